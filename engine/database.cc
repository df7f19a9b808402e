// engine/database.cc: a database's life: create, open (open.cc, replay.cc), begin, durability
// and the latch (engine.md §5.4), freeze, limits, history forks, TTL deletes and close.
#include <algorithm>
#include <cstring>

#include "engine/database_internal.h"
#include "engine/flusher.h"
#include "engine/syncer.h"
#include "engine/lease_guard.h"
#include "engine/limits.h"

namespace fenec::engine {
namespace fb = fenec::format;

Database::Database(std::string path, const OpenOptions& options)
    : path_(std::move(path)), options_(options) {
    fs_ = options.fs ? options.fs : &posix_fs();
    if (options.clock) {
        clock_ = options.clock;
    } else {
        own_clock_ = std::make_unique<SystemClock>();
        clock_ = own_clock_.get();
    }
    if (options.random) {
        random_ = options.random;
    } else {
        own_random_ = std::make_unique<SystemRandom>();
        random_ = own_random_.get();
    }
    read_only_ = options.read_only;
    feed_ = std::make_unique<Feed>(options.feed_bytes);
    following_ = options.role == Role::follower;
}

Database::~Database() {
    Status st = close(CloseMode::plain);
    st.ignore();  // a destructor cannot report; callers who care call close() themselves
}

Result<std::unique_ptr<Database>> Database::create(std::string_view path,
                                                   const OpenOptions& options) {
    std::unique_ptr<Database> db(new Database(std::string(path), options));
    Fs& fs = *db->fs_;
    bool placed = false;
    Status st = db->write_fresh(fs, placed);
    db.reset();
    Result<std::unique_ptr<Database>> opened =
        st.is_ok() ? open(path, options) : Result<std::unique_ptr<Database>>(st);
    // A create that failed once its file was in place leaves no file: one that never opened is
    // no tenant, and left behind it would answer the next create `already_exists` and each open
    // its failure. (Not placed: nothing of ours is at `path`, maybe someone else's file.)
    if (!opened.is_ok() && placed) remove_durably(fs, path).ignore();
    return opened;
}

Status Database::write_fresh(Fs& fs, bool& placed) {
    FENEC_ASSIGN_OR_RETURN(bool there, fs.exists(path_));
    if (there) {
        return Status::error(Code::already_exists, "the file `" + path_ + "` already exists");
    }
    uint64_t lineage = options_.lineage.v;
    while (lineage == 0) lineage = random_->next_u64();
    const auto header = format::encode_header({lineage, clock_->wall_ms()});
    std::vector<std::byte> bytes(header.begin(), header.end());
    flatbuffers::FlatBufferBuilder b;
    std::vector<fb::Fork> forks{fb::Fork(lineage, 0)};
    // Stamped with its own offset: the file is written whole and synced before it is one, and
    // the stamp tells the open that this file's writer stamps its records (file-format.md §6).
    b.Finish(fb::CreateHistory(b, b.CreateVectorOfStructs(forks), false, bytes.size()));
    format::append_record(bytes, format::Kind::history, codec::body_of(b));
    const std::string tmp = path_ + ".new";
    FENEC_ASSIGN_OR_RETURN(auto file, fs.open(tmp, OpenMode::create_truncate));
    Status st = file->append(bytes);
    if (st.is_ok()) st = file->sync();
    file.reset();
    if (st.is_ok()) st = fs.rename(tmp, path_, false);
    if (!st.is_ok()) {
        fs.remove(tmp).ignore();  // no `.new` left behind
        return st;
    }
    placed = true;
    return fs.sync_dir(dir_of(path_));
}

ReadView Database::read(std::optional<int64_t> now_ms) const {
    return ReadView(this, now_ms ? *now_ms : clock_->wall_ms());
}

std::optional<ReadView> Database::try_read(std::optional<int64_t> now_ms) const {
    ReadView view(this, now_ms ? *now_ms : clock_->wall_ms(), std::try_to_lock);
    if (!view.lock_.owns_lock()) return std::nullopt;
    return view;
}

Status Database::refusal_locked() const {
    if (auto f = failure()) {
        return Status::error(Code::latched,
                             "the tenant is read-only after a failed write: " + f->to_string(),
                             f->detail());
    }
    if (read_only_) return Status::error(Code::read_only, "the tenant is open read-only");
    if (history_.replica || following_) {
        return Status::error(Code::read_only, "the tenant is a replica");
    }
    if (frozen_) return Status::error(Code::frozen, "the tenant is frozen");
    return Status::ok();
}

Result<Block> Database::begin(BlockOptions options) {
    std::unique_lock<std::shared_mutex> lock(mu_, std::defer_lock);
    if (!options.no_wait) {
        lock.lock();
    } else if (!lock.try_lock()) {
        return Status::error(Code::busy, "the writer lock is held");
    }
    FENEC_RETURN_IF_ERROR(refusal_locked());
    if (options_.gate) {
        const LeaseVerdict v = options_.gate->check(options_.tenant);
        if (v != LeaseVerdict::ok) {
            return Status::error(Code::not_leased,
                                 "tenant `" + options_.tenant + "` is not leased here (" +
                                     std::string(lease_verdict_name(v)) + ")",
                                 Detail{.lease = v});
        }
    }
    if (quota_ && !options.internal && (quota_->rows_bucket || quota_->bytes_bucket)) {
        const int64_t now_ns = clock_->steady_ns();
        if (quota_->rows_bucket && !quota_->rows_bucket->can_begin(kRowsNeed, now_ns)) {
            const int64_t ms = quota_->rows_bucket->retry_after_ms(kRowsNeed, now_ns);
            return Status::error(Code::rate_limited, "the tenant's rows_per_s rate is spent",
                                 Detail{.quota = QuotaKind::rows_per_s, .retry_after_ms = ms});
        }
        if (quota_->bytes_bucket && !quota_->bytes_bucket->can_begin(kBytesNeed, now_ns)) {
            const int64_t ms = quota_->bytes_bucket->retry_after_ms(kBytesNeed, now_ns);
            return Status::error(Code::rate_limited, "the tenant's bytes_per_s rate is spent",
                                 Detail{.quota = QuotaKind::bytes_per_s, .retry_after_ms = ms});
        }
    }
    return Block(this, std::move(lock), options);
}

void Database::latch(const Status& cause) {
    std::lock_guard<std::mutex> g(sync_mu_);
    if (!failure_) failure_ = cause;
    sync_cv_.notify_all();
}

std::optional<Status> Database::failure() const {
    std::lock_guard<std::mutex> g(sync_mu_);
    return failure_;
}

Status Database::append_locked(std::span<const std::byte> record) {
    Status st = file_->append(record);
    if (!st.is_ok()) {
        latch(st);
        return st;
    }
    file_bytes_ += record.size();
    appended_end_.store(file_bytes_, std::memory_order_release);
    appended_bytes_ += record.size();
    if (!room_kept_ && !sealing_ && options_.sync.kind == SyncPolicy::Kind::every_block &&
        !following_ && !history_.replica && appended_bytes_ >= limits::file_room_after_bytes) {
        room_kept_ = true;
        // Best effort (io.h): without room the appends go on as before.
        file_->keep_room(limits::file_room_bytes).ignore();
    }
    return Status::ok();
}

Status Database::append_history_locked(const History& h) {
    flatbuffers::FlatBufferBuilder b;
    std::vector<fb::Fork> forks;
    for (const Fork& f : h.forks) forks.emplace_back(f.history.v, f.seq.v);
    b.Finish(fb::CreateHistory(b, b.CreateVectorOfStructs(forks), h.replica, durable_stamp_locked()));
    std::vector<std::byte> rec;
    format::append_record(rec, format::Kind::history, codec::body_of(b));
    return append_locked(rec);
}

uint64_t Database::durable_stamp_locked() {
    const uint64_t stamp = durable_end_.load(std::memory_order_acquire);
    if (stamp < file_bytes_) unsealed_ = true;
    return stamp;
}

// close() calls it once a sync covered every record appended, the room already cut.
Status Database::seal() {
    {
        std::unique_lock<std::shared_mutex> lock(mu_);
        if (!unsealed_ || frozen_ || following_ || history_.replica) return Status::ok();
        // A seal stamped below its own offset would cover nothing: a record landed since the
        // close's sync (nothing appends to a closing tenant), so the file stays as it is.
        if (durable_end_.load(std::memory_order_acquire) < file_bytes_) return Status::ok();
        sealing_ = true;  // the seal keeps no room
        unsealed_ = false;
        Status st = append_history_locked(history_);
        sealing_ = false;
        FENEC_RETURN_IF_ERROR(st);
    }
    return sync_now();  // a History moves no seq, so sync() would not write it
}

Seq Database::durable_seq() const {
    std::lock_guard<std::mutex> g(sync_mu_);
    return Seq{durable_seq_};
}

// Group commit (engine.md §5.4): one fsync covers every block appended before it began.
Status Database::wait_durable(Seq s) {
    std::unique_lock<std::mutex> l(sync_mu_);
    for (;;) {
        if (durable_seq_ >= s.v) return Status::ok();
        if (failure_) return latched_locked();
        if (syncing_) {
            sync_cv_.wait(l);
            continue;
        }
        sync_locked(l);
    }
}

Status Database::latched_locked() const {
    return Status::error(Code::io_error,
                         "the tenant is read-only after a failed write: " + failure_->to_string(),
                         failure_->detail());
}

// One fsync, sync_mu_ held on entry and on return (dropped around the fsync), `syncing_` clear
// on entry: durable_seq_ moves to the seq it began at, or the failure latches; then the waiters
// it settled are called (finish_waiters_locked).
void Database::sync_locked(std::unique_lock<std::mutex>& l) {
    syncing_ = true;
    const uint64_t target = seq_.load(std::memory_order_acquire);
    const uint64_t target_end = appended_end_.load(std::memory_order_acquire);
    std::shared_ptr<File> file = file_;
    l.unlock();
    Status st = file->sync();
    l.lock();
    settle_sync_locked(target, target_end, st);
    tell_durable_locked(l, target, st);
}

// sync_round's first step: the waiters a sync already covered are told.
void Database::settle_covered() {
    std::unique_lock<std::mutex> l(sync_mu_);
    if (!syncing_) finish_waiters_locked(l, false);
}

// sync_round up to its fsync, which the Syncer's flush of the whole file system replaces. Calls
// nothing: no other database's waiters are told while this one is taken.
std::optional<Database::GroupRound> Database::begin_group_round() {
    std::lock_guard<std::mutex> g(sync_mu_);
    if (syncing_ || waiters_.empty()) return std::nullopt;
    syncing_ = true;
    return GroupRound{this, seq_.load(std::memory_order_acquire),
                      appended_end_.load(std::memory_order_acquire), file_, Status::ok()};
}

// After the flush covered the file's bytes, the file's own write-back errors, which a flush of
// the whole file system reports to whoever asks first, are asked of its handle. Without a flush
// (none ran: the round's one database), or after a failed one, which may have been any file's,
// the file is fsynced: then only its own errors latch it.
void Database::end_group_round(GroupRound& round, const Status* flushed) {
    round.status =
        flushed != nullptr && flushed->is_ok() ? round.file->check_written() : round.file->sync();
    std::lock_guard<std::mutex> g(sync_mu_);
    settle_sync_locked(round.target, round.target_end, round.status);
}

void Database::tell_group_round(const GroupRound& round) {
    std::unique_lock<std::mutex> l(sync_mu_);
    tell_durable_locked(l, round.target, round.status);
}

// A sync's end, sync_mu_ held: syncing_ cleared, durable_seq_ moved to `target` or the failure
// latched. Calls nothing.
void Database::settle_sync_locked(uint64_t target, uint64_t target_end, const Status& st) {
    syncing_ = false;
    if (!st.is_ok()) {
        if (!failure_) failure_ = st;
    } else {
        durable_seq_ = std::max(durable_seq_, target);
        if (target_end > durable_end_.load(std::memory_order_relaxed))
            durable_end_.store(target_end, std::memory_order_release);
        feed_->durable(Seq{durable_seq_});
    }
    sync_cv_.notify_all();
}

// Then the listener and the waiters it settled are told (sync_mu_ dropped around the calls).
void Database::tell_durable_locked(std::unique_lock<std::mutex>& l, uint64_t target,
                                   const Status& st) {
    if (st.is_ok() && options_.listener) {
        l.unlock();
        options_.listener->on_durable(Seq{target});
        l.lock();
    }
    finish_waiters_locked(l);
}

void Database::when_durable(Seq s, DurableCallback done) {
    std::unique_lock<std::mutex> l(sync_mu_);
    if (durable_seq_ >= s.v || failure_ || !options_.syncer || syncer_left_) {
        // Settled now, or no Syncer to settle it later: the caller's thread waits.
        l.unlock();
        done(wait_durable(s));
        return;
    }
    waiters_.push_back(DurableWaiter{s.v, std::move(done)});
    // Queued under sync_mu_, so close(), which sets syncer_left_ under it before it takes the
    // database off the Syncer, always finds the entry to remove.
    options_.syncer->queue(this);
}

// A Syncer's turn (syncer.h): the waiters already covered are called; if any are left and no
// other sync runs, one fsync for all of them, which queues the database again only for waiters
// that come while it runs. A sync running elsewhere (a writer in wait_durable, sync_now) calls
// them as it ends, and queues the database again if it left any.
void Database::sync_round(Syncer&) {
    std::unique_lock<std::mutex> l(sync_mu_);
    if (syncing_) return;
    // Not queued again for the waiters left here: this round's own fsync is for them. Queued, the
    // database would stand in the Syncer's queue ahead of every other queued while it ran.
    finish_waiters_locked(l, false);
    if (waiters_.empty() || syncing_) return;
    sync_locked(l);
}

// Calls every waiter durable_seq_ covers (all of them, with the failure, once latched), outside
// sync_mu_, and, when `queue_left`, queues the database on its Syncer again when some are left
// (under sync_mu_, as when_durable does).
void Database::finish_waiters_locked(std::unique_lock<std::mutex>& l, bool queue_left) {
    if (waiters_.empty()) return;
    std::vector<DurableWaiter> done;
    std::vector<DurableWaiter> left;
    for (DurableWaiter& w : waiters_) {
        (failure_ || w.seq <= durable_seq_ ? done : left).push_back(std::move(w));
    }
    waiters_ = std::move(left);
    const Status st = failure_ ? latched_locked() : Status::ok();
    if (queue_left && !waiters_.empty() && options_.syncer && !syncer_left_) {
        options_.syncer->queue(this);
    }
    if (done.empty()) return;
    l.unlock();
    for (DurableWaiter& w : done) w.done(st);
    done.clear();  // what the callbacks held goes outside sync_mu_ too
    l.lock();
}

Status Database::sync() {
    if (auto f = failure()) {
        return Status::error(Code::io_error,
                             "the tenant is read-only after a failed write: " + f->to_string(),
                             f->detail());
    }
    if (read_only_) return Status::ok();
    const Seq s = seq();
    if (durable_seq() >= s) return Status::ok();
    return wait_durable(s);
}

Status Database::freeze() {
    std::unique_lock<std::shared_mutex> lock(mu_);  // waits for the block in progress
    frozen_ = true;
    return Status::ok();
}

void Database::thaw() {
    std::unique_lock<std::shared_mutex> lock(mu_);
    frozen_ = false;
}

bool Database::frozen() const { return frozen_.load(); }

void Database::set_limit(const Limits& limits) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (!limits.any()) {
        quota_.reset();
        return;
    }
    const int64_t now_ns = clock_->steady_ns();
    auto q = std::make_unique<Quota>();
    q->limits = limits;
    auto bucket = [&](const std::optional<double>& rate,
                      std::unique_ptr<RateBucket>* old) -> std::unique_ptr<RateBucket> {
        if (!rate) return nullptr;
        if (old && *old) {
            (*old)->set_rate(*rate, now_ns);  // keeps the level, clipped to the new capacity
            return std::move(*old);
        }
        return std::make_unique<RateBucket>(*rate, now_ns);
    };
    q->rows_bucket = bucket(limits.rows_per_s, quota_ ? &quota_->rows_bucket : nullptr);
    q->bytes_bucket = bucket(limits.bytes_per_s, quota_ ? &quota_->bytes_bucket : nullptr);
    quota_ = std::move(q);
}

Limits Database::limits() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return quota_ ? quota_->limits : Limits{};
}

uint64_t Database::client_rows_locked() const {
    uint64_t rows = 0;
    for (const auto& [id, c] : collections_) {
        if (!c->internal()) rows += c->rows();
    }
    return rows;
}

Collection* Database::collection_locked(CollectionId id) const {
    auto it = collections_.find(id.v);
    return it == collections_.end() ? nullptr : it->second.get();
}

bool Database::expired(const Collection& c, const DocRef& ref, int64_t now_ms) const {
    const std::optional<uint16_t> slot = c.schema().ttl_slot();
    if (!slot) return false;
    const Value v = DocView(ref.bytes()).get(*slot);
    const Timestamp* t = std::get_if<Timestamp>(&v.rep);
    if (!t) return false;  // null never expires
    const int64_t ttl_ms = c.schema().fields[*slot].index.ttl_ms;
    return t->ms <= now_ms - ttl_ms;
}

Usage Database::usage() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    Usage u;
    u.file_bytes = file_bytes_;
    u.dead_bytes = dead_bytes_ + graph_dead_bytes_;
    u.graphs_deferred = graphs_deferred_.load(std::memory_order_relaxed);
    for (const auto& [id, c] : collections_) {
        (c->internal() ? u.internal_rows : u.rows) += c->rows();
    }
    u.memory_bytes = memory_bytes_locked();
    u.peak_buffer_bytes = peak_buffer_bytes_;
    u.collections = static_cast<uint32_t>(collections_.size());
    u.seq = seq();
    u.durable_seq = durable_seq();
    u.quota_checks = quota_checks_;
    if (quota_ && (quota_->rows_bucket || quota_->bytes_bucket)) {
        const int64_t now_ns = clock_->steady_ns();
        if (quota_->rows_bucket) u.rows_per_s_level = quota_->rows_bucket->level(now_ns);
        if (quota_->bytes_bucket) u.bytes_per_s_level = quota_->bytes_bucket->level(now_ns);
    }
    return u;
}

uint64_t Database::memory_bytes_locked() const {
    uint64_t bytes = 0;
    for (const auto& [id, c] : collections_) {
        bytes += c->segments().bytes_held() + c->docs().memory_bytes();
    }
    if (options_.hook) bytes += options_.hook->memory_bytes();
    if (feed_) bytes += feed_->bytes();  // the replication feed's recent blocks (engine.md §11)
    bytes += undo_spare_.capacity() * sizeof(Undo);  // the last block's undo log, kept
    return bytes;
}

History Database::history() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return history_;
}

bool Database::following() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return following_;
}

Result<History> Database::fork_history() {
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (auto f = failure()) return Status::error(Code::io_error, f->to_string(), f->detail());
    if (read_only_) return Status::error(Code::read_only, "the tenant is open read-only");
    if (history_.forks.size() >= limits::forks_max) {
        return Status::error(Code::limit_exceeded, "a history keeps at most 1024 forks");
    }
    History h = history_;
    uint64_t id = 0;
    while (id == 0) id = random_->next_u64();
    h.forks.push_back(Fork{HistoryId{id}, seq()});
    h.replica = false;
    FENEC_RETURN_IF_ERROR(append_history_locked(h));
    history_ = h;
    following_ = false;
    pending_forks_.reset();
    lock.unlock();
    // A fork is durable before it is answered: a promotion must survive a crash.
    FENEC_RETURN_IF_ERROR(sync_now());
    feed_->set_forks(h.forks);
    return h;
}

Status Database::sync_now() {
    std::unique_lock<std::mutex> l(sync_mu_);
    while (syncing_) sync_cv_.wait(l);
    syncing_ = true;
    const uint64_t target_end = appended_end_.load(std::memory_order_acquire);
    std::shared_ptr<File> file = file_;
    l.unlock();
    Status st = file->sync();
    l.lock();
    syncing_ = false;
    if (!st.is_ok() && !failure_) failure_ = st;
    if (st.is_ok() && target_end > durable_end_.load(std::memory_order_relaxed))
        durable_end_.store(target_end, std::memory_order_release);
    sync_cv_.notify_all();
    finish_waiters_locked(l);  // the failure's, or a Syncer round skipped while this ran
    return st;
}

Result<History> Database::promote() {
    // Held through the fork and its sync: a call meanwhile finds a primary once the fork is
    // durable, rather than both passing the check and forking twice.
    std::lock_guard<std::mutex> one(promote_mu_);
    {
        std::shared_lock<std::shared_mutex> lock(mu_);
        if (!history_.replica && !following_) {
            return Status::error(Code::invalid_argument, "the tenant is not a replica");
        }
    }
    return fork_history();
}

Result<uint32_t> Database::delete_expired(CollectionId collection, std::span<const DocId> ids,
                                          int64_t now_ms) {
    if (history().replica) {
        return Status::error(Code::read_only, "a replica receives its primary's TTL deletes");
    }
    FENEC_ASSIGN_OR_RETURN(Block block, begin(BlockOptions{.internal = true}));
    Collection* col = collection_locked(collection);
    if (!col)
        return Status::error(Code::not_found,
                             "no collection with id " + std::to_string(collection.v));
    uint32_t deleted = 0;
    for (DocId id : ids) {
        const DocRef* ref = col->find(id);
        if (!ref || !expired(*col, *ref, now_ms)) continue;  // moved to a later time meanwhile
        FENEC_ASSIGN_OR_RETURN(bool gone, block.del(collection, id));
        if (gone) ++deleted;
    }
    FENEC_RETURN_IF_ERROR(block.commit().status());
    return deleted;
}

Result<uint64_t> Database::sweep_expired() {
    uint64_t total = 0;
    std::vector<CollectionId> ids;
    {
        ReadView view = read();
        for (const CollectionInfo& c : view.collections()) ids.push_back(c.id);
    }
    for (CollectionId c : ids) {
        for (;;) {
            std::vector<DocId> batch;
            int64_t now_ms = 0;
            {
                ReadView view = read();
                now_ms = view.now_ms();
                batch = view.expired(c, limits::ttl_sweep_batch);
            }
            if (batch.empty()) break;
            FENEC_ASSIGN_OR_RETURN(uint32_t n, delete_expired(c, batch, now_ms));
            total += n;
            if (batch.size() < limits::ttl_sweep_batch) break;
        }
    }
    return total;
}

Status Database::close(CloseMode mode) {
    feed_->close();  // streams end; a reopened database has a feed of its own
    if (!file_) return Status::ok();
    if (options_.flusher && !read_only_) options_.flusher->remove(this);
    Status result;
    if (mode == CloseMode::checkpoint && !read_only_ && !failure()) result = checkpoint();
    {
        // The file ends at its last record again, under the writer's lock, and an fsync of its
        // own makes that durable: the sync below returns at once when one already covered every
        // block.
        std::unique_lock<std::shared_mutex> lock(mu_);
        if (room_kept_) {
            Status cut = file_->keep_room(0);
            if (cut.is_ok() && !read_only_ && !failure()) cut = file_->sync();
            if (result.is_ok()) result = cut;
        }
    }
    // Synced whatever came of the checkpoint: a checkpoint that failed without latching (no
    // room for its side file) left the file as it was, and under a policy that syncs only at
    // close this is the writes' one sync (engine.md §5.4: the final sync first). The seal, which
    // says the file closed clean, only after all went well.
    if (!read_only_ && !failure()) {
        Status synced = sync();
        // A graph record moves no seq, so sync() returns at once with one appended since the
        // last sync still unwritten; a closed file is durable to its end (the registry opens it
        // next without a sync), and the seal's stamp must cover it.
        const bool uncovered = durable_end_.load(std::memory_order_acquire) <
                               appended_end_.load(std::memory_order_acquire);
        if (synced.is_ok() && !failure() && uncovered) synced = sync_now();
        if (result.is_ok()) result = synced;
    }
    if (result.is_ok() && !read_only_ && !failure()) result = seal();
    if (options_.syncer) {
        {
            std::lock_guard<std::mutex> g(sync_mu_);
            syncer_left_ = true;  // when_durable waits in its caller from here on
        }
        options_.syncer->remove(this);
    }
    std::unique_lock<std::shared_mutex> lock(mu_);
    std::unique_lock<std::mutex> l(sync_mu_);
    while (syncing_) sync_cv_.wait(l);
    // The sync above covered every waiter, or the latch settles them. Any left (a sync that
    // failed) are told the writes' durability is not known, never left uncalled.
    finish_waiters_locked(l);
    if (!waiters_.empty()) {
        std::vector<DurableWaiter> left = std::move(waiters_);
        waiters_.clear();
        const Status unknown = Status::error(
            Code::io_error, "the tenant closed before its last writes were known durable: " +
                                result.to_string());
        l.unlock();
        for (DurableWaiter& w : left) w.done(unknown);
        l.lock();
    }
    file_.reset();
    return result;
}

// ---- ReadView

ReadView::ReadView(const Database* db, int64_t now_ms)
    : db_(db), lock_(db->mu_), seq_(db->seq()), history_(db->history_.current()), now_ms_(now_ms) {}

ReadView::ReadView(const Database* db, int64_t now_ms, std::try_to_lock_t)
    : db_(db),
      lock_(db->mu_, std::try_to_lock),
      seq_(lock_.owns_lock() ? db->seq() : Seq{}),
      history_(lock_.owns_lock() ? db->history_.current() : HistoryId{}),
      now_ms_(now_ms) {}

ReadView::ReadView(const Database* db, int64_t now_ms, Seq seq)
    : db_(db), seq_(seq), history_(db->history_.current()), now_ms_(now_ms) {}

std::vector<CollectionInfo> ReadView::collections() const {
    std::vector<CollectionInfo> out;
    for (const auto& [id, c] : db_->collections_) {
        out.push_back(CollectionInfo{c->id(), c->name(), c->rows(), c->next_id()});
    }
    return out;
}

Result<CollectionId> ReadView::find(std::string_view name) const {
    auto it = db_->names_.find(name);
    if (it == db_->names_.end()) {
        return Status::error(Code::not_found, "no collection `" + std::string(name) + "`");
    }
    return CollectionId{it->second};
}

const Schema* ReadView::schema(CollectionId c) const {
    const Collection* col = db_->collection_locked(c);
    return col ? &col->schema() : nullptr;
}

std::optional<DocView> ReadView::get(CollectionId c, DocId id) const {
    const Collection* col = db_->collection_locked(c);
    if (!col) return std::nullopt;
    const DocRef* ref = col->find(id);
    if (!ref || db_->expired(*col, *ref, now_ms_)) return std::nullopt;
    return DocView(ref->bytes());
}

void ReadView::scan(CollectionId c, const std::function<bool(DocId, DocView)>& visit,
                    DocId from) const {
    const Collection* col = db_->collection_locked(c);
    if (!col) return;
    const bool ttl = col->schema().ttl_slot().has_value();
    col->docs().each_from(from.v, [&](uint64_t id, const DocRef& ref) {
        if (ttl && db_->expired(*col, ref, now_ms_)) return true;
        return visit(DocId{id}, DocView(ref.bytes()));
    });
}

uint64_t ReadView::count(CollectionId c) const {
    const Collection* col = db_->collection_locked(c);
    if (!col) return 0;
    if (!col->schema().ttl_slot()) return col->rows();
    uint64_t n = 0;
    col->docs().each_from(0, [&](uint64_t, const DocRef& ref) {
        n += !db_->expired(*col, ref, now_ms_);
        return true;
    });
    return n;
}

std::vector<DocId> ReadView::expired(CollectionId c, size_t limit) const {
    std::vector<DocId> out;
    const Collection* col = db_->collection_locked(c);
    if (!col || !col->schema().ttl_slot()) return out;
    col->docs().each_from(0, [&](uint64_t id, const DocRef& ref) {
        if (out.size() >= limit) return false;
        if (db_->expired(*col, ref, now_ms_)) out.push_back(DocId{id});
        return true;
    });
    return out;
}

}  // namespace fenec::engine
