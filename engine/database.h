// engine/database.h: one tenant file, open. The public surface of engine/.
//
// Threading: one writer at a time (a Block holds the writer lock from begin() to commit() or
// rollback()), many readers (a ReadView holds the lock shared), so no reader sees half a block.
// fsync always runs outside the writer lock. Every method is safe from any thread.
//
// Invariants (docs/INVARIANTS.md): a block lands as one record or not at all (I1); seq moves by
// the writes a block holds (I2); ids are never reused (I3); replay ends in the state the live
// writes left (I4); a failed append or fsync latches the database read-only (I5).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/clock.h"
#include "engine/collection.h"
#include "engine/feed.h"
#include "engine/hooks.h"
#include "engine/ids.h"
#include "engine/io.h"
#include "engine/schema.h"
#include "engine/status.h"
#include "engine/value.h"

namespace fenec::engine {

class LandingGate;
class RateBucket;
class Flusher;
class Syncer;
class Block;
class ReadView;
struct ReplayState;

struct SyncPolicy {
    enum class Kind : uint8_t { every_block, interval, at_close };
    Kind kind = Kind::every_block;
    int64_t interval_ms = 250;
    static SyncPolicy every_block() { return {Kind::every_block, 0}; }
    static SyncPolicy interval(int64_t ms) { return {Kind::interval, ms}; }
    static SyncPolicy at_close() { return {Kind::at_close, 0}; }
};

enum class Role : uint8_t { primary, follower };
enum class InstallMode : uint8_t { create_only, replace };
enum class CloseMode : uint8_t { plain, checkpoint };

struct OpenOptions {
    Fs* fs = nullptr;               // default: posix_fs()
    const Clock* clock = nullptr;   // default: a SystemClock
    Random* random = nullptr;       // default: a SystemRandom
    std::string tenant;             // for the gate and for messages
    SyncPolicy sync = SyncPolicy::every_block();
    Role role = Role::primary;
    bool promote = false;
    bool read_only = false;
    const LandingGate* gate = nullptr;
    IndexHook* hook = nullptr;
    ChangeListener* listener = nullptr;
    Flusher* flusher = nullptr;     // syncs `interval` databases and sweeps TTL in the background
    // Runs the fsyncs when_durable asks for (engine/syncer.h); null: when_durable waits in its
    // caller as wait_durable does.
    Syncer* syncer = nullptr;
    uint64_t feed_bytes = 64ull << 20;  // the replication feed's bound (engine.md §11)
    // The caller knows every byte of the file is durable already (the node synced and closed it
    // itself, and it has not grown since: Registry's closed-durable mark): the open does not
    // sync it again, a device flush of 3-18 ms on a file with nothing to write. A torn tail cut
    // is synced whatever this says.
    bool file_durable = false;
    // An open of a file of two slices or more reads it a slice of this many bytes at a time on
    // a thread of its own, replaying the records already read meanwhile, so the read's time (the
    // disk's, or the copy out of the page cache) overlaps the replay's (engine/open.cc). 0: one
    // read, then the replay.
    uint64_t open_slice_bytes = 4ull << 20;
    // create only: the new file's lineage (0: a random one). An empty copy made to follow a
    // primary takes the primary's (node-http.md §8.7), so it answers lineage checks as one.
    LineageId lineage;
};

struct Fork {
    HistoryId history;
    Seq seq;
    bool operator==(const Fork&) const = default;
};
struct History {
    std::vector<Fork> forks;
    bool replica = false;
    uint64_t term() const { return forks.empty() ? 0 : forks.size() - 1; }
    HistoryId current() const { return forks.empty() ? HistoryId{} : forks.back().history; }
    bool operator==(const History&) const = default;
};

struct BlockOptions {
    bool internal = false;  // the server's own writes and TTL sweeps: may touch `_` collections,
                            // never asked or charged the rate buckets
    // The block's `now` (TTL expiry, at_ms): one statement reads and writes at one instant.
    // Unset: the clock's wall time as the block begins.
    std::optional<int64_t> now_ms = std::nullopt;
    // Under `every_block`: commit() returns once the block landed (Landed::durable false) rather
    // than after its fsync, and the caller must not answer for the block before when_durable
    // (or wait_durable) says an fsync covers it. No effect under the other policies.
    bool defer_durable = false;
    // begin() refuses with `busy`, nothing run, where another holds the writer lock (or readers
    // hold it shared), rather than waiting for it: a thread that must not wait (the node's event
    // loop) tries, and hands the block to one that may.
    bool no_wait = false;
};

struct Landed {
    Seq first;
    Seq last;
    HistoryId history;
    uint64_t bytes = 0;   // framed bytes appended (spills included)
    bool durable = false;
};

struct Limits {
    std::optional<uint64_t> bytes;
    std::optional<uint64_t> rows;
    std::optional<double> rows_per_s;
    std::optional<double> bytes_per_s;
    bool any() const { return bytes || rows || rows_per_s || bytes_per_s; }
};

struct Usage {
    uint64_t file_bytes = 0;
    uint64_t dead_bytes = 0;     // superseded versions, deleted rows, superseded graph records
    uint64_t rows = 0;           // client collections
    uint64_t internal_rows = 0;  // `_` collections
    uint64_t memory_bytes = 0;
    uint64_t peak_buffer_bytes = 0;
    uint32_t collections = 0;
    Seq seq;
    Seq durable_seq;
    uint64_t quota_checks = 0;   // times the landing ran quota code (zero without limits)
    // A graph left stale by checkpoint_graphs for a rewrite to write (its dead-space budget).
    bool graphs_deferred = false;
    // The rate buckets' levels now (§9): tokens, at most a second's worth, negative in debt;
    // unset where the rate is not limited.
    std::optional<double> rows_per_s_level;
    std::optional<double> bytes_per_s_level;
};

struct CollectionInfo {
    CollectionId id;
    std::string name;
    uint64_t rows = 0;
    uint64_t next_id = 1;
};

struct ImageInfo {
    Seq seq;
    History history;
    LineageId lineage;
    int64_t created_ms = 0;
    uint64_t bytes = 0;
};

struct Image {
    ImageInfo info;
    std::shared_ptr<const std::vector<std::byte>> bytes;  // a whole file, header included
};

// One record as a pass read it (Database::survey): where it starts, its kind (format::Kind's
// byte) and its framed length (head, body and padding), so the next record starts at
// offset + framed.
struct RecordSpan {
    uint64_t offset = 0;
    uint8_t kind = 0;
    uint64_t framed = 0;
};

// What one pass over a file found, whole or not (Database::survey): the records it read and
// applied, in order, up to where it stopped.
struct FileSurvey {
    std::vector<RecordSpan> records;
    uint64_t file_bytes = 0;
    uint64_t image_end = 0;           // where the image region ends; 0: the file holds none
    std::optional<uint64_t> torn_at;  // a tear an open would cut here (engine.md §6.2)
    Status fault = Status::ok();      // what refused the pass (corruption names its offset)
};

// A frozen primary's file as it stands, taken as its image (Database::file_image): the first
// `info.bytes` bytes of `file`, read at will; the file is append-only and nothing is appended
// below that length, so they stay what they were whatever happens to the database meanwhile.
class ImageInstall;

struct FileImage {
    ImageInfo info;
    std::shared_ptr<File> file;
    // The file's first `memory_bytes` bytes (at most info.bytes) as they are in memory, where the
    // database holds them (the buffer its open or install read the file from, its documents'
    // store): read from here rather than the file, whose pages may not be cached (an installed
    // image is written past the cache). Null: none; everything is read from `file`.
    std::shared_ptr<const std::byte[]> memory;
    uint64_t memory_bytes = 0;
};

class Database {
public:
    ~Database();
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    // A new file at `path` (refused if it exists): header and one history record, written to
    // `<path>.new`, fsynced and renamed without replacing.
    static Result<std::unique_ptr<Database>> create(std::string_view path, const OpenOptions&);
    // One pass of replay; a torn tail is cut, corruption refuses naming the offset.
    // `read_only` takes no lock and changes nothing, so it may read a file another process has
    // open and is writing (engine/open.cc says what it can see then); a torn tail is cut in
    // memory only and reported by torn_at().
    static Result<std::unique_ptr<Database>> open(std::string_view path, const OpenOptions&);
    // Checks an image file whole, in memory, without installing it.
    static Result<ImageInfo> verify_image(Fs& fs, std::string_view path);
    // One pass over the file at `path` as a read-only open makes it (no lock, nothing written),
    // kept whatever it meets: every record read before the pass stopped, a tear, the fault that
    // refused it. For tools that say where a file is damaged and where it may be cut; an error
    // only when the file cannot be read.
    static Result<FileSurvey> survey(Fs& fs, std::string_view path);
    // Verifies `incoming` and renames it onto `target`; on any failure removes `incoming` and
    // leaves `target` untouched (a directory fsync failed after the rename: `create_only`
    // removes the file it placed).
    static Status install_image(Fs& fs, std::string_view incoming, std::string_view target,
                                InstallMode mode);
    // Installs an image held in memory and opens it, in one pass over its bytes: `image` is
    // written to `incoming` (created or truncated) and fsynced once, replayed and verified from
    // memory as verify_image checks a file (so `info` is what it would say), `check`ed, renamed
    // onto `target` (`create_only`: refused if a file is there) and the directory fsynced. The
    // database comes back open on `target` with `options` (its indexes built, its graphs loaded
    // from their records), as open() would leave it, without reading the file back. On any
    // failure `incoming` is removed and `target` left untouched (as install_image's); a damaged
    // image is `corruption` naming the offset. The write and the fsync run on a thread of their
    // own beside the replay, past the page cache where the file system allows
    // (File::append_direct).
    // An image here is any whole file, as file_image() sends one: a tear is `corruption` too.
    // `owner`, when given, owns `image` (owner.get() == image.data()) and hands it over: the
    // database may keep it as its documents' store instead of copying them out of it.
    // `begun`, when given, is the install begun on `image` as it arrived (ImageInstall, which
    // then holds the owner and was made with the same target and options): what it replayed is
    // not replayed again, and a failure it met is returned.
    static Result<std::unique_ptr<Database>> install_open(
        std::span<const std::byte> image, std::string_view incoming, std::string_view target,
        InstallMode mode, const OpenOptions& options,
        const std::function<Status(const ImageInfo&)>& check, ImageInfo& info,
        std::shared_ptr<const std::byte[]> owner = nullptr,
        std::unique_ptr<ImageInstall> begun = nullptr);

    // `now_ms` fixes the view's `now` for TTL expiry; unset: the clock's wall time.
    ReadView read(std::optional<int64_t> now_ms = std::nullopt) const;
    // As read(), but nullopt rather than waiting while a block holds the writer lock: for a
    // caller that must never wait (the node's event loop answering a point read).
    std::optional<ReadView> try_read(std::optional<int64_t> now_ms = std::nullopt) const;
    Result<Block> begin(BlockOptions options = {});

    // Returns once an fsync covers `seq` (the group commit, engine.md §5.4), or with the latch's
    // io_error.
    Status wait_durable(Seq seq);
    // As wait_durable, but calls `done` with its outcome instead of returning it: at once on the
    // caller's thread where `seq` is durable, the database latched, or it has no Syncer;
    // otherwise later, on a Syncer thread, once the round whose fsync covers `seq` ends. `done`
    // must be short (it holds up the next round) and must not call back into this database's
    // sync (when_durable, wait_durable, sync); it is called exactly once, at the latest by close().
    using DurableCallback = std::function<void(const Status&)>;
    void when_durable(Seq seq, DurableCallback done);
    Status sync();
    Status checkpoint();
    Status compact();
    // Asks a rewrite in progress (a checkpoint's or a compaction's) to stop before its rename:
    // it removes its side file and returns `cancelled`, the file as it was. For a tenant
    // leaving service (deleted, or replaced by an install), whose file the rewrite would
    // replace for nothing while holding the tenant. A no-op when none runs: the next rewrite
    // starts afresh. Between steps of up to one image_docs record (~16 MiB), the side file's
    // one write and its sync; a graph rebuild under the writer lock is not stopped.
    void cancel_rewrite();
    Result<Image> image();
    // The file itself as the image, where it may stand for one (engine/file_image.cc): the
    // database frozen, a primary's, not latched, its graph records current (written now if
    // not, once) and at most file_image_dead_share of it dead. Nothing is built: the caller
    // reads the bytes from the file. nullopt where the file may not stand for its image (take
    // image() then).
    Result<std::optional<FileImage>> file_image();
    Status append_graph(CollectionId collection, uint16_t slot);
    // Appends a graph record for every @hnsw field whose collection was written since that field's
    // last graph record (the background checkpoint of engine.md §6.3). Returns how many were
    // written. Each record supersedes the field's last, whose bytes are dead until a rewrite:
    // a bulk load checkpointed once a minute would leave a file mostly old graphs. So the
    // Flusher's pass (`sweep`) appends a graph only while, its predecessor superseded, the
    // superseded graph records stay within a fifth of the file (limits::graph_dead_share_den:
    // at most 1.25x its compact size), and one more of its size (a move's, file_image) would
    // keep them within the quarter a file image may carry. Past that it leaves the graph stale
    // and says so (Usage::graphs_deferred) for a rewrite to write it, which the node's
    // compactor does on its next look (server/node/compactor.h); a close's checkpoint writes it
    // too. A field whose graph is more than a sixth of its file (128 floats a row and little
    // else) is thus rewritten, not appended to, at each sweep that finds it written.
    // `always` (file_image's) appends every stale graph.
    enum class GraphCheckpoint : uint8_t { sweep, always };
    Result<uint32_t> checkpoint_graphs(GraphCheckpoint mode = GraphCheckpoint::sweep);

    void set_limit(const Limits& limits);
    Limits limits() const;
    Usage usage() const;

    // Deletes the rows of `ids` still expired at `now_ms`, in one internal block.
    Result<uint32_t> delete_expired(CollectionId collection, std::span<const DocId> ids,
                                    int64_t now_ms);
    // Deletes every expired row of every collection in batches of limits::ttl_sweep_batch.
    Result<uint64_t> sweep_expired();

    // Forks a replica's history (a follower's included): this copy becomes a primary. Refused
    // (invalid_argument) for a copy that is not a replica; two calls at once fork once, the second
    // refused after the first's fork is durable.
    Result<History> promote();
    Result<History> fork_history();

    // The replication feed (engine.md §11): landed blocks, readable once durable.
    Feed& feed() { return *feed_; }
    // A follower's apply (a database opened as Role::follower or holding a replica's history):
    // a forks entry is written as this file's history with replica = true and fsynced; a block
    // entry must start at seq + 1, its records are checked, appended verbatim and applied as a
    // landing would (index hook, listener, feed; no quota, no lease), synced by the policy.
    Status apply(const FeedEntry& entry);
    // Starts following: writes `primary`'s forks as this file's history, replica = true, fsynced.
    Status follow(const History& primary);

    Status freeze();  // waits for the block in progress
    void thaw();
    bool frozen() const;

    Status close(CloseMode mode = CloseMode::plain);

    LineageId lineage() const { return lineage_; }
    int64_t created_ms() const { return created_ms_; }
    Seq seq() const { return Seq{seq_.load(std::memory_order_acquire)}; }
    Seq durable_seq() const;
    const SyncPolicy& sync_policy() const { return options_.sync; }
    History history() const;
    // Opened as a follower (Role::follower) and not promoted since: promote() forks it.
    bool following() const;
    std::optional<Status> failure() const;
    const std::string& path() const { return path_; }
    // A read-only open's tear (engine.md §6.2): where the records read stopped, the bytes from
    // there to the end of the file left in it, unread. nullopt: none, or not a read-only open.
    std::optional<uint64_t> torn_at() const { return torn_at_; }

private:
    friend class Block;
    friend class ReadView;
    friend struct ReplayState;
    friend class ImageInstall;
    friend class Syncer;
    struct Snapshot;
    struct Quota;
    struct Undo;

    Database(std::string path, const OpenOptions& options);

    // The new file written beside `path_` and renamed onto it; `placed` once it is there.
    Status write_fresh(Fs& fs, bool& placed);
    // finish_replay (the hook told, documents repacked out of the replay's buffer, indexes
    // built) then adopt_file (the file kept, synced, the flusher told).
    Status finish_open(ReplayState& replay, std::unique_ptr<File> file, uint64_t file_size);
    Status finish_replay(ReplayState& replay, uint64_t file_size);
    Status adopt_file(ReplayState& replay, std::unique_ptr<File> file, uint64_t file_size);
    void latch(const Status& cause);
    Status refusal_locked() const;  // latched, frozen, read-only: the reason a write is refused
    Status append_locked(std::span<const std::byte> record);
    Status append_history_locked(const History& h);
    // The durable_end a record appended now, at file_bytes_, carries (format.fbs): durable_end_,
    // into room or past the end alike, since either append can reach the disk before bytes
    // earlier in the file that no finished sync covered (file-format.md §6). A stamp below
    // file_bytes_ leaves the file to be sealed at close (unsealed_). Under the writer's lock.
    uint64_t durable_stamp_locked();
    Status sync_now();  // an fsync outside the writer lock, for a history record
    // A clean close's last record (file-format.md §6, "A sealed file"): a History restating the
    // file's history, stamped with its whole length and synced, once the close's sync covered
    // every record, when one appended since the last seal was stamped below its own offset.
    Status seal();
    // The group commit's parts (database.cc): one fsync and what follows it; a Syncer's round;
    // the when_durable callbacks a sync settled; the latch as a writer is told of it.
    void sync_locked(std::unique_lock<std::mutex>& l);
    void sync_round(Syncer& syncer);
    // A Syncer's group round (syncer.h) over this database, in passes over all its databases so
    // that none is left taken (syncing_) while another's waiters are told: settle_covered (the
    // waiters already covered told), begin_group_round (taken, nullopt when nothing is left to
    // sync or a sync runs elsewhere), the flush, end_group_round (the file's errors asked, or
    // the file fsynced when no flush ran or it failed; the sync settled), tell_group_round.
    struct GroupRound {
        Database* db;
        uint64_t target;             // the seq the flush covers
        uint64_t target_end;         // and the file's bytes
        std::shared_ptr<File> file;  // the file it covers
        Status status;               // the round's outcome, set by end_group_round
    };
    void settle_covered();
    std::optional<GroupRound> begin_group_round();
    void end_group_round(GroupRound& round, const Status* flushed);
    void tell_group_round(const GroupRound& round);
    void settle_sync_locked(uint64_t target, uint64_t target_end, const Status& st);
    void tell_durable_locked(std::unique_lock<std::mutex>& l, uint64_t target, const Status& st);
    void finish_waiters_locked(std::unique_lock<std::mutex>& l, bool queue_left = true);
    Status latched_locked() const;
    Status apply_block(const FeedEntry& entry);
    Status write_forks_locked(std::vector<Fork> forks);
    Status apply_record(Block& block, uint8_t kind, std::span<const std::byte> body);
    void seed_feed(const ReplayState& replay);
    void notify_locked(const Block& block, Seq first, Seq last, bool internal);
    // Usage::memory_bytes, under either lock.
    uint64_t memory_bytes_locked() const;
    Snapshot snapshot_locked() const;
    void rebuild_retired_graphs_locked();
    uint64_t written_seq_locked(CollectionId collection) const;  // written_seq_'s, 0 if none
    // `stop`, where given, is asked between records: set, the build ends `cancelled`.
    Result<std::vector<std::byte>> build_image(const Snapshot& snap,
                                               const std::atomic<bool>* stop = nullptr) const;
    Status rewrite(bool compact);
    Status cancelled_if_asked() const;  // `cancelled` once cancel_rewrite() was called
    // rewrite()'s steps after its snapshot (rewrite.cc).
    Result<std::unique_ptr<File>> write_side_file(const Snapshot& snap, const std::string& side,
                                                  uint64_t& image_bytes);
    Status replace_with_side_file_locked(const Snapshot& snap, const std::string& side, File& out,
                                         uint64_t end);
    void adopt_rewritten_locked(std::unique_ptr<File> out, const Snapshot& snap,
                                uint64_t file_bytes);
    void null_dropped_slots_locked(const Snapshot& snap);
    bool room_for_graph(CollectionId collection, uint16_t slot) const;  // checkpoint_graphs
    uint64_t client_rows_locked() const;
    Collection* collection_locked(CollectionId id) const;
    bool expired(const Collection& c, const DocRef& ref, int64_t now_ms) const;

    // State. Everything below `mu_` changes only under the writer lock.
    std::string path_;
    OpenOptions options_;
    std::unique_ptr<Clock> own_clock_;
    std::unique_ptr<Random> own_random_;
    Fs* fs_ = nullptr;
    const Clock* clock_ = nullptr;
    Random* random_ = nullptr;

    mutable std::shared_mutex mu_;
    std::shared_ptr<File> file_;
    LineageId lineage_;
    int64_t created_ms_ = 0;
    std::atomic<uint64_t> seq_{0};
    History history_;
    std::map<uint32_t, std::unique_ptr<Collection>> collections_;
    std::map<std::string, uint32_t, std::less<>> names_;
    uint32_t next_collection_ = 1;
    uint64_t file_bytes_ = 0;
    // Bytes appended since the open, and whether the file keeps room (File::keep_room,
    // limits::file_room_after_bytes; never while it holds a replica's history, whose records are
    // its primary's bytes); under the writer's lock.
    uint64_t appended_bytes_ = 0;
    bool room_kept_ = false;
    // A record was appended stamped below its own offset since the open or the last seal (or
    // the open's replay, or a compaction's copied tail, left such records last): a power cut's
    // hole, or damage, before a later record could be read as such (seal()). sealing_: the
    // seal's append, which keeps no room (the close has cut it).
    bool unsealed_ = false;
    bool sealing_ = false;
    // The file's first file_memory_bytes_ bytes as the open or install that read them left them
    // in memory, where the collections kept that buffer as their store (finish_replay): the
    // bytes stay valid while anything holds the buffer, and are the file's until a rewrite
    // replaces it (reset there). file_image() reads them from here.
    std::weak_ptr<const std::byte[]> file_memory_;
    uint64_t file_memory_bytes_ = 0;
    uint64_t dead_bytes_ = 0;
    uint64_t peak_buffer_bytes_ = 0;
    // Written under the writer lock; read without it by frozen(), which the node's event loop asks
    // (a write's refusal) while a block may hold the lock.
    std::atomic<bool> frozen_{false};
    bool read_only_ = false;
    std::optional<uint64_t> torn_at_;  // a read-only open's tear, left in the file
    bool rewriting_ = false;
    std::atomic<bool> rewrite_cancel_{false};  // cancel_rewrite(); cleared as a rewrite starts
    bool following_ = false;           // opened as Role::follower and not promoted since
    std::mutex promote_mu_;            // promote()'s check and its fork, one call at a time
    std::optional<History> pending_forks_;  // a primary's forks past this file's seq (apply.cc)
    std::unique_ptr<Quota> quota_;  // null: no limits, and landing touches none of it
    // Per @hnsw field (collection, slot), the seq its last graph record describes.
    std::map<std::pair<uint32_t, uint16_t>, uint64_t> graph_seq_;
    // Per collection, the last seq of the last block that wrote it since the open (landed or
    // applied as a follower): a field's graph is stale once this passes its graph_seq_, and
    // writes to other collections leave it current.
    std::map<uint32_t, uint64_t> written_seq_;
    // Per @hnsw field, the framed bytes of its last graph record in the file; the records it
    // superseded are dead space (graph_dead_bytes_) until a rewrite, which file_image weighs.
    std::map<std::pair<uint32_t, uint16_t>, uint64_t> graph_framed_;
    uint64_t graph_dead_bytes_ = 0;
    // A sweep left a graph stale rather than pass its dead-space budget (checkpoint_graphs); a
    // rewrite clears it. Atomic: set with no lock held, read by usage() under the shared one.
    std::atomic<bool> graphs_deferred_{false};
    uint64_t quota_checks_ = 0;
    // The last block's undo log, empty, its capacity kept for the next block (Block's constructor
    // takes it, finish() gives it back while at most limits::undo_kept_bytes_max).
    std::vector<Undo> undo_spare_;

    // Durability and the latch.
    mutable std::mutex sync_mu_;
    std::condition_variable sync_cv_;
    bool syncing_ = false;
    uint64_t durable_seq_ = 0;
    // The file's bytes appended (appended_end_, stored after each append, so a sync that loads it
    // as it begins covers them) and the bytes the last finished sync covered (durable_end_,
    // written under sync_mu_): the stamp of every record appended (durable_stamp_locked).
    std::atomic<uint64_t> appended_end_{0};
    std::atomic<uint64_t> durable_end_{0};
    std::optional<Status> failure_;
    struct DurableWaiter {
        uint64_t seq = 0;
        DurableCallback done;
    };
    std::vector<DurableWaiter> waiters_;  // when_durable's, not yet covered
    bool syncer_left_ = false;            // close() took the database off its Syncer

    std::unique_ptr<Feed> feed_;
};

// A write in progress: holds the writer lock until commit() or rollback(). Move-only; the
// destructor rolls back what was not committed.
class Block {
public:
    struct Mark {
        size_t undo = 0;
        size_t ops = 0;
        size_t last_items = 0;
        uint64_t count = 0;
        int64_t rows_delta = 0;
        size_t spills = 0;
        size_t spilled_ops = 0;
    };

    Block(Block&&) noexcept;
    Block& operator=(Block&&) = delete;
    ~Block();

    Result<CollectionId> create_collection(std::string_view name, const Schema& schema);
    Status alter_collection(CollectionId collection, const AlterSpec& spec);
    Status drop_collection(CollectionId collection);
    Result<DocId> insert(CollectionId collection, std::optional<DocId> id, const Doc& doc);
    Result<DocId> put(CollectionId collection, std::optional<DocId> id, const Doc& doc);
    Status set(CollectionId collection, DocId id, const Doc& doc);
    Result<bool> del(CollectionId collection, DocId id);

    // The server's own rows written from any block, landing with the block's other writes (an
    // Idempotency-Key's answer, node-http.md §5.7): `name` / `collection` must start with `_`
    // (invalid_argument otherwise). Like every write to a `_` collection, never counted in the
    // rows quota nor charged to the rate buckets (engine.md §9).
    Result<CollectionId> create_internal_collection(std::string_view name, const Schema& schema);
    Result<DocId> put_internal(CollectionId collection, std::optional<DocId> id, const Doc& doc);

    std::optional<DocView> get(CollectionId collection, DocId id) const;
    // The state this block sees, its own writes included, as a ReadView at the block's `now`.
    // Takes no lock (the block holds the writer lock): valid only while the block is open and
    // not written to. Its seq() is the seq this state stands at: the database's seq plus the
    // block's writes so far.
    ReadView view() const;
    // Visits the visible rows in id order as this block sees them; stop by returning false.
    void scan(CollectionId collection, const std::function<bool(DocId, DocView)>& visit) const;
    Result<CollectionId> find(std::string_view name) const;
    const Schema* schema(CollectionId collection) const;
    int64_t now_ms() const { return now_ms_; }
    uint64_t writes() const { return count_; }

    Mark savepoint() const;
    void rollback_to(const Mark& mark);
    Result<Landed> commit();
    void rollback();

    struct Op;  // an op of the block, in write order (block.cc)

private:
    friend class Database;
    Block(Database* db, std::unique_lock<std::shared_mutex> lock, BlockOptions options);

    Result<CollectionId> create(std::string_view name, const Schema& schema, bool internal);
    Result<DocId> put_as(CollectionId collection, std::optional<DocId> id, const Doc& doc,
                         bool internal);
    Status write_doc(Collection& c, DocId id, std::span<const std::byte> body);
    void push_put(CollectionId c, DocId id, DocRef ref);
    void push_delete(CollectionId c, DocId id);
    Status maybe_spill();
    Status spill();
    // commit()'s steps (block.cc); spill() shares the quota check.
    std::vector<std::byte> encode_record(Seq first) const;
    Status check_lease() const;
    bool takes_away_only() const;
    Status check_quotas(uint64_t record_bytes, bool last_record) const;
    void account_landed(Seq first, Seq last, std::vector<std::byte> record);
    void undo_to(size_t undo_size);
    void finish();

    Database* db_ = nullptr;
    std::unique_lock<std::shared_mutex> lock_;
    BlockOptions options_;
    int64_t now_ms_ = 0;
    std::vector<Database::Undo> undo_;
    std::vector<Op> ops_;
    size_t spilled_ops_ = 0;      // ops_[0, spilled_ops_) are in spill records already
    uint64_t unspilled_bytes_ = 0;
    uint64_t count_ = 0;
    int64_t rows_delta_ = 0;      // net new rows in client collections
    uint64_t charged_rows_ = 0;   // client writes, for the rate buckets
    uint64_t charged_bytes_ = 0;
    uint64_t spill_token_ = 0;
    uint64_t spill_bytes_ = 0;
    struct SpillDone;
    std::vector<SpillDone> spills_;
    std::vector<std::byte> scratch_;
    // A spill refused (quota, latch, limit) refuses the whole block: every later write and the
    // commit answer this, and the commit puts the block back (engine.md §5.2).
    std::optional<Status> refused_;
    bool applying_ = false;  // a follower's apply (Database::apply): no spills
};

// A consistent read at one seq, holding the lock shared while it lives (or, from
// Block::view(), reading under the block's writer lock).
class ReadView {
public:
    Seq seq() const { return seq_; }
    HistoryId history() const { return history_; }  // the history seq() was written on
    int64_t now_ms() const { return now_ms_; }
    std::vector<CollectionInfo> collections() const;
    Result<CollectionId> find(std::string_view name) const;
    const Schema* schema(CollectionId collection) const;
    std::optional<DocView> get(CollectionId collection, DocId id) const;  // expired: nullopt
    // Visits live, unexpired rows in id order from `from`; stop by returning false.
    void scan(CollectionId collection, const std::function<bool(DocId, DocView)>& visit,
              DocId from = DocId{1}) const;
    uint64_t count(CollectionId collection) const;
    std::vector<DocId> expired(CollectionId collection, size_t limit) const;

private:
    friend class Database;
    friend class Block;
    ReadView(const Database* db, int64_t now_ms);
    // try_read's: the lock taken only if free; reads nothing of `db` otherwise.
    ReadView(const Database* db, int64_t now_ms, std::try_to_lock_t);
    // Takes no lock: the caller holds the writer lock for the view's life.
    ReadView(const Database* db, int64_t now_ms, Seq seq);
    const Database* db_;
    std::shared_lock<std::shared_mutex> lock_;
    Seq seq_;
    HistoryId history_;
    int64_t now_ms_;
};

// An image's install begun while its bytes are still arriving (a PUT's body received into the
// buffer it will fill): feed() verifies and replays the records wholly inside what has arrived,
// so that work is done while the network delivers the rest; Database::install_open, given it
// once every byte is there, does what is left (the records after, the indexes and graphs, the
// write, the rename). `image` is the whole buffer, 8-byte aligned, its bytes written in order
// and never changed once fed; `owner` as install_open's. One thread uses it.
class ImageInstall {
  public:
    ImageInstall(std::span<const std::byte> image, std::string_view target,
                 const OpenOptions& options, std::shared_ptr<const std::byte[]> owner);
    ~ImageInstall();
    ImageInstall(const ImageInstall&) = delete;
    ImageInstall& operator=(const ImageInstall&) = delete;
    // The first `available` bytes are there. A damaged image is known as soon as its damage has
    // arrived: the error is returned, kept, and install_open returns it.
    Status feed(uint64_t available);

  private:
    friend class Database;
    std::span<const std::byte> image_;
    std::unique_ptr<Database> db_;
    std::unique_ptr<ReplayState> replay_;
    Status failed_ = Status::ok();
};

}  // namespace fenec::engine
