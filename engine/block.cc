// engine/block.cc: the write path (engine.md §4-§5). Each write is applied to memory at once,
// an inverse entry pushed on the undo log and the op appended to the block's op list; commit()
// encodes one record and lands it through the checks of §5.3, or puts everything back.
#include <algorithm>
#include <limits>

#include "engine/database_internal.h"
#include "engine/lease_guard.h"
#include "engine/limits.h"

namespace fenec::engine {
namespace fb = fenec::format;

namespace {
constexpr uint64_t kOpOverheadBytes = 64;  // estimate of a table's bytes beyond its payload
}

Block::Block(Database* db, std::unique_lock<std::shared_mutex> lock, BlockOptions options)
    : db_(db), lock_(std::move(lock)), options_(options), now_ms_(options.now_ms ? *options.now_ms : db->clock_->wall_ms()) {
    // The last block's undo log, emptied, so its memory is written again rather than faulted in
    // afresh (the writer lock, held from here, guards the spare).
    undo_.swap(db->undo_spare_);
}

Block::Block(Block&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)),
      lock_(std::move(o.lock_)),
      options_(o.options_),
      now_ms_(o.now_ms_),
      undo_(std::move(o.undo_)),
      ops_(std::move(o.ops_)),
      spilled_ops_(o.spilled_ops_),
      unspilled_bytes_(o.unspilled_bytes_),
      count_(o.count_),
      rows_delta_(o.rows_delta_),
      charged_rows_(o.charged_rows_),
      charged_bytes_(o.charged_bytes_),
      spill_token_(o.spill_token_),
      spill_bytes_(o.spill_bytes_),
      spills_(std::move(o.spills_)),
      scratch_(std::move(o.scratch_)),
      refused_(std::move(o.refused_)),
      applying_(o.applying_) {}

Block::~Block() {
    if (db_) rollback();
}

const Schema* Block::schema(CollectionId c) const {
    const Collection* col = db_ ? db_->collection_locked(c) : nullptr;
    return col ? &col->schema() : nullptr;
}

Result<CollectionId> Block::find(std::string_view name) const {
    auto it = db_->names_.find(name);
    if (it == db_->names_.end()) {
        return Status::error(Code::not_found, "no collection `" + std::string(name) + "`");
    }
    return CollectionId{it->second};
}

std::optional<DocView> Block::get(CollectionId c, DocId id) const {
    const Collection* col = db_->collection_locked(c);
    if (!col) return std::nullopt;
    const DocRef* ref = col->find(id);
    if (!ref || db_->expired(*col, *ref, now_ms_)) return std::nullopt;
    return DocView(ref->bytes());
}

ReadView Block::view() const {
    return ReadView(db_, now_ms_, Seq{db_->seq().v + count_});
}

void Block::scan(CollectionId c, const std::function<bool(DocId, DocView)>& visit) const {
    const Collection* col = db_->collection_locked(c);
    if (!col) return;
    col->docs().each_from(0, [&](uint64_t id, const DocRef& ref) {
        return db_->expired(*col, ref, now_ms_) || visit(DocId{id}, DocView(ref.bytes()));
    });
}

Result<CollectionId> Block::create_collection(std::string_view name, const Schema& schema) {
    return create(name, schema, options_.internal);
}

Result<CollectionId> Block::create_internal_collection(std::string_view name,
                                                       const Schema& schema) {
    if (name.empty() || name[0] != '_') {
        return Status::error(Code::invalid_argument,
                             "collection `" + std::string(name) + "` is not the server's own");
    }
    return create(name, schema, true);
}

// `internal`: the caller may create a `_` collection.
Result<CollectionId> Block::create(std::string_view name, const Schema& schema, bool internal) {
    if (refused_) return *refused_;
    if (!is_identifier(name)) {
        return Status::error(Code::invalid_argument,
                             "collection name `" + std::string(name) +
                                 "` must match [A-Za-z_][A-Za-z0-9_]* and be 1..64 bytes");
    }
    if (name[0] == '_' && !internal) {
        return Status::error(Code::invalid_argument,
                             "collection names starting with `_` are the server's own");
    }
    if (db_->names_.count(name)) {
        return Status::error(Code::already_exists,
                             "collection `" + std::string(name) + "` already exists");
    }
    if (db_->next_collection_ == std::numeric_limits<uint32_t>::max()) {
        // Collection ids are never reused; a counter this high came from a checkpoint.
        return Status::error(Code::limit_exceeded, "the file has used every collection id");
    }
    if (db_->collections_.size() >= limits::collections_max) {
        return Status::error(Code::limit_exceeded, "a file holds at most 4096 collections");
    }
    FENEC_RETURN_IF_ERROR(validate_schema(name, schema));
    const CollectionId id{db_->next_collection_};
    Database::Undo u;
    u.kind = Database::Undo::Kind::create;
    u.collection = id;
    u.schema_change = std::make_unique<Database::Undo::SchemaChange>();
    u.schema_change->prev_next_collection = db_->next_collection_;
    db_->next_collection_++;
    db_->collections_[id.v] = std::make_unique<Collection>(id, std::string(name), schema);
    db_->names_[std::string(name)] = id.v;
    undo_.push_back(std::move(u));
    if (db_->options_.hook) db_->options_.hook->on_schema(id, &db_->collections_[id.v]->schema(), db_->collections_[id.v].get());
    ops_.push_back(Op{Op::Create{id, std::string(name), schema}});
    unspilled_bytes_ += kOpOverheadBytes * 4;
    ++count_;
    return id;
}

Status Block::alter_collection(CollectionId c, const AlterSpec& spec) {
    if (refused_) return *refused_;
    Collection* col = db_->collection_locked(c);
    if (!col) return Status::error(Code::not_found, "no collection with id " + std::to_string(c.v));
    if (spec.kind == AlterKind::rename_field && spec.new_name == spec.field) {
        return Status::error(Code::invalid_argument, "rename to the same name");
    }
    uint16_t slot = 0;
    FENEC_ASSIGN_OR_RETURN(Schema after, apply_alter(col->name(), col->schema(), spec, &slot));
    Database::Undo u;
    u.kind = Database::Undo::Kind::alter;
    u.collection = c;
    u.schema_change = std::make_unique<Database::Undo::SchemaChange>();
    u.schema_change->prev_schema = col->schema();
    undo_.push_back(std::move(u));
    col->set_schema(after);
    if (db_->options_.hook) db_->options_.hook->on_schema(c, &col->schema(), col);
    ops_.push_back(Op{Op::Alter{c, spec, slot, std::move(after)}});
    unspilled_bytes_ += kOpOverheadBytes * 8;
    ++count_;
    return Status::ok();
}

Status Block::drop_collection(CollectionId c) {
    if (refused_) return *refused_;
    auto it = db_->collections_.find(c.v);
    if (it == db_->collections_.end()) {
        return Status::error(Code::not_found, "no collection with id " + std::to_string(c.v));
    }
    if (it->second->internal() && !options_.internal) {
        return Status::error(Code::invalid_argument,
                             "collections starting with `_` are the server's own");
    }
    if (!it->second->internal()) rows_delta_ -= static_cast<int64_t>(it->second->rows());
    Database::Undo u;
    u.kind = Database::Undo::Kind::drop;
    u.collection = c;
    db_->names_.erase(it->second->name());
    u.schema_change = std::make_unique<Database::Undo::SchemaChange>();
    u.schema_change->dropped = std::move(it->second);
    db_->collections_.erase(it);
    undo_.push_back(std::move(u));
    if (db_->options_.hook) db_->options_.hook->on_schema(c, nullptr, nullptr);
    ops_.push_back(Op{Op::Drop{c}});
    unspilled_bytes_ += kOpOverheadBytes;
    ++count_;
    return Status::ok();
}

// Keeps `body` as the new version of `id`. The hook hears of the stored version it replaces,
// visible or expired, since the indexes hold every stored row.
Status Block::write_doc(Collection& c, DocId id, std::span<const std::byte> body) {
    if (count_ >= limits::block_writes_max) {
        return Status::error(Code::limit_exceeded, "a block holds at most 2^32-1 writes");
    }
    Database::Undo u;
    u.kind = Database::Undo::Kind::put;
    u.collection = c.id();
    u.id = id;
    u.prev_next_id = c.next_id();
    u.seg_mark = c.segments().mark();
    DocRef ref;
    u.prev = c.put(id, body, &ref);  // an expired, unswept row is replaced like any other
    c.set_next_id(std::max(c.next_id(), id.v + 1));
    if (IndexHook* hook = db_->options_.hook) {
        WriteEvent ev{c.id(), id, &c.schema(),
                      u.prev ? std::optional<DocView>(DocView(u.prev->bytes())) : std::nullopt,
                      DocView(ref.bytes())};
        Status st = hook->on_write(ev);
        if (!st.is_ok() && st.code() == Code::duplicate) {
            // A unique value held only by an expired row is free: the holder is deleted in this
            // block before the put (engine.md §10), one more write.
            const DocId holder{st.detail().id};
            const DocRef* held = holder.v != id.v ? c.find(holder) : nullptr;
            if (held && db_->expired(c, *held, now_ms_)) {
                c.restore(id, u.prev);
                c.set_next_id(u.prev_next_id);
                c.segments().rewind(u.seg_mark);
                const bool was_internal = options_.internal;
                options_.internal = true;  // the sweep's delete: not the client's to refuse
                Result<bool> gone = del(c.id(), holder);
                options_.internal = was_internal;
                if (!gone.is_ok()) return gone.status();
                return write_doc(c, id, body);
            }
        }
        if (!st.is_ok()) {
            c.restore(id, u.prev);
            c.set_next_id(u.prev_next_id);
            c.segments().rewind(u.seg_mark);
            return st;
        }
        u.hooked = true;
    }
    if (!c.internal()) {
        if (!u.prev) ++rows_delta_;
        if (!options_.internal) {
            ++charged_rows_;
            charged_bytes_ += body.size();
        }
    }
    undo_.push_back(std::move(u));
    push_put(c.id(), id, ref);
    unspilled_bytes_ += body.size() + 12;
    ++count_;
    return maybe_spill();
}

void Block::push_put(CollectionId c, DocId id, DocRef ref) {
    if (ops_.size() > spilled_ops_) {
        if (auto* p = std::get_if<Op::Put>(&ops_.back().v); p && p->collection == c) {
            p->ids.push_back(id.v);
            p->refs.push_back(ref);
            return;
        }
    }
    unspilled_bytes_ += kOpOverheadBytes;
    ops_.push_back(Op{Op::Put{c, {id.v}, {ref}}});
}

void Block::push_delete(CollectionId c, DocId id) {
    if (ops_.size() > spilled_ops_) {
        if (auto* d = std::get_if<Op::Delete>(&ops_.back().v); d && d->collection == c) {
            d->ids.push_back(id.v);
            return;
        }
    }
    unspilled_bytes_ += kOpOverheadBytes;
    ops_.push_back(Op{Op::Delete{c, {id.v}}});
}

namespace {
Status bad_id(DocId id) {
    return Status::error(Code::invalid_argument,
                         "document id " + std::to_string(id.v) + " is outside 1..2^63-1",
                         Detail{.id = id.v});
}
}  // namespace

Result<DocId> Block::insert(CollectionId c, std::optional<DocId> id, const Doc& doc) {
    if (refused_) return *refused_;
    Collection* col = db_->collection_locked(c);
    if (!col) return Status::error(Code::not_found, "no collection with id " + std::to_string(c.v));
    if (col->internal() && !options_.internal) {
        return Status::error(Code::invalid_argument, "collections starting with `_` are the server's own");
    }
    DocId target = id.value_or(DocId{col->next_id()});
    if (target.v < 1 || target.v > limits::doc_id_max) return bad_id(target);
    const DocRef* existing = col->find(target);
    if (existing && !db_->expired(*col, *existing, now_ms_)) {
        return Status::error(Code::duplicate,
                             "collection `" + col->name() + "` already holds id " +
                                 std::to_string(target.v),
                             Detail{.id = target.v});
    }
    scratch_.clear();
    FENEC_RETURN_IF_ERROR(encode_doc(col->name(), col->schema(), doc, scratch_));
    FENEC_RETURN_IF_ERROR(write_doc(*col, target, scratch_));
    return target;
}

Result<DocId> Block::put(CollectionId c, std::optional<DocId> id, const Doc& doc) {
    return put_as(c, id, doc, options_.internal);
}

Result<DocId> Block::put_internal(CollectionId c, std::optional<DocId> id, const Doc& doc) {
    const Collection* col = db_->collection_locked(c);
    if (col && !col->internal()) {
        return Status::error(Code::invalid_argument,
                             "collection `" + col->name() + "` is not the server's own");
    }
    return put_as(c, id, doc, true);
}

// `internal`: the caller may write a `_` collection. Whether the write is counted and charged
// follows the collection (write_doc), not this.
Result<DocId> Block::put_as(CollectionId c, std::optional<DocId> id, const Doc& doc,
                            bool internal) {
    if (refused_) return *refused_;
    Collection* col = db_->collection_locked(c);
    if (!col) return Status::error(Code::not_found, "no collection with id " + std::to_string(c.v));
    if (col->internal() && !internal) {
        return Status::error(Code::invalid_argument, "collections starting with `_` are the server's own");
    }
    DocId target = id.value_or(DocId{col->next_id()});
    if (target.v < 1 || target.v > limits::doc_id_max) return bad_id(target);
    scratch_.clear();
    FENEC_RETURN_IF_ERROR(encode_doc(col->name(), col->schema(), doc, scratch_));
    FENEC_RETURN_IF_ERROR(write_doc(*col, target, scratch_));
    return target;
}

Status Block::set(CollectionId c, DocId id, const Doc& doc) {
    if (refused_) return *refused_;
    Collection* col = db_->collection_locked(c);
    if (!col) return Status::error(Code::not_found, "no collection with id " + std::to_string(c.v));
    if (col->internal() && !options_.internal) {
        return Status::error(Code::invalid_argument, "collections starting with `_` are the server's own");
    }
    if (id.v < 1 || id.v > limits::doc_id_max) return bad_id(id);
    const DocRef* existing = col->find(id);
    if (!existing || db_->expired(*col, *existing, now_ms_)) {
        return Status::error(Code::not_found,
                             "collection `" + col->name() + "` has no row " + std::to_string(id.v),
                             Detail{.id = id.v});
    }
    scratch_.clear();
    FENEC_RETURN_IF_ERROR(encode_doc(col->name(), col->schema(), doc, scratch_));
    return write_doc(*col, id, scratch_);
}

Result<bool> Block::del(CollectionId c, DocId id) {
    if (refused_) return *refused_;
    Collection* col = db_->collection_locked(c);
    if (!col) return Status::error(Code::not_found, "no collection with id " + std::to_string(c.v));
    if (col->internal() && !options_.internal) {
        return Status::error(Code::invalid_argument, "collections starting with `_` are the server's own");
    }
    if (id.v < 1 || id.v > limits::doc_id_max) return bad_id(id);
    const DocRef* existing = col->find(id);
    // A TTL sweep (internal) deletes expired rows; a client's del treats them as absent.
    if (!existing || (!options_.internal && db_->expired(*col, *existing, now_ms_))) return false;
    if (count_ >= limits::block_writes_max) {
        return Status::error(Code::limit_exceeded, "a block holds at most 2^32-1 writes");
    }
    Database::Undo u;
    u.kind = Database::Undo::Kind::del;
    u.collection = c;
    u.id = id;
    u.prev = col->erase(id);
    if (IndexHook* hook = db_->options_.hook) {
        WriteEvent ev{c, id, &col->schema(), DocView(u.prev->bytes()), std::nullopt};
        Status st = hook->on_write(ev);
        if (!st.is_ok()) {
            col->restore(id, u.prev);
            return st;
        }
        u.hooked = true;
    }
    if (!col->internal()) {
        --rows_delta_;
        if (!options_.internal) ++charged_rows_;
    }
    undo_.push_back(std::move(u));
    push_delete(c, id);
    unspilled_bytes_ += 8;
    ++count_;
    FENEC_RETURN_IF_ERROR(maybe_spill());
    return true;
}

Block::Mark Block::savepoint() const {
    Mark m;
    m.undo = undo_.size();
    m.ops = ops_.size();
    if (!ops_.empty()) {
        if (auto* p = std::get_if<Op::Put>(&ops_.back().v)) m.last_items = p->ids.size();
        if (auto* d = std::get_if<Op::Delete>(&ops_.back().v)) m.last_items = d->ids.size();
    }
    m.count = count_;
    m.rows_delta = rows_delta_;
    m.spills = spills_.size();
    m.spilled_ops = spilled_ops_;
    return m;
}

void Block::undo_to(size_t undo_size) {
    IndexHook* hook = db_->options_.hook;
    while (undo_.size() > undo_size) {
        Database::Undo& u = undo_.back();
        switch (u.kind) {
            case Database::Undo::Kind::put: {
                Collection* col = db_->collection_locked(u.collection);
                if (hook && u.hooked) {
                    const DocRef* now = col->find(u.id);
                    WriteEvent ev{u.collection, u.id, &col->schema(),
                                  u.prev ? std::optional<DocView>(DocView(u.prev->bytes()))
                                         : std::nullopt,
                                  now ? std::optional<DocView>(DocView(now->bytes())) : std::nullopt};
                    hook->on_undo(ev);
                }
                col->restore(u.id, u.prev);
                col->set_next_id(u.prev_next_id);
                col->segments().rewind(u.seg_mark);
                break;
            }
            case Database::Undo::Kind::del: {
                Collection* col = db_->collection_locked(u.collection);
                if (hook && u.hooked) {
                    WriteEvent ev{u.collection, u.id, &col->schema(), DocView(u.prev->bytes()),
                                  std::nullopt};
                    hook->on_undo(ev);
                }
                col->restore(u.id, u.prev);
                break;
            }
            case Database::Undo::Kind::create: {
                auto it = db_->collections_.find(u.collection.v);
                db_->names_.erase(it->second->name());
                db_->collections_.erase(it);
                db_->next_collection_ = u.schema_change->prev_next_collection;
                if (hook) hook->on_schema(u.collection, nullptr, nullptr);
                break;
            }
            case Database::Undo::Kind::alter: {
                Collection* col = db_->collection_locked(u.collection);
                col->set_schema(std::move(u.schema_change->prev_schema));
                if (hook) hook->on_schema(u.collection, &col->schema(), col);
                break;
            }
            case Database::Undo::Kind::drop: {
                std::unique_ptr<Collection>& dropped = u.schema_change->dropped;
                db_->names_[dropped->name()] = u.collection.v;
                db_->collections_[u.collection.v] = std::move(dropped);
                if (hook) {
                    Collection* back = db_->collections_[u.collection.v].get();
                    hook->on_schema(u.collection, &back->schema(), back);
                }
                break;
            }
        }
        undo_.pop_back();
    }
}

void Block::rollback_to(const Mark& m) {
    if (!db_) return;
    undo_to(m.undo);
    ops_.resize(m.ops);
    if (!ops_.empty() && m.last_items) {
        if (auto* p = std::get_if<Op::Put>(&ops_.back().v)) {
            p->ids.resize(m.last_items);
            p->refs.resize(m.last_items);
        }
        if (auto* d = std::get_if<Op::Delete>(&ops_.back().v)) d->ids.resize(m.last_items);
    }
    count_ = m.count;
    rows_delta_ = m.rows_delta;
    if (spills_.size() > m.spills) {
        // Spills written after the mark are dead space now; their ops are re-encoded.
        for (size_t i = m.spills; i < spills_.size(); ++i) db_->dead_bytes_ += spills_[i].framed;
        spills_.resize(m.spills);
    }
    spilled_ops_ = std::min(m.spilled_ops, ops_.size());
    unspilled_bytes_ = 0;
    for (size_t i = spilled_ops_; i < ops_.size(); ++i) {
        unspilled_bytes_ += kOpOverheadBytes;
        if (auto* p = std::get_if<Op::Put>(&ops_[i].v)) {
            for (const DocRef& r : p->refs) unspilled_bytes_ += r.size + 12;
        } else if (auto* d = std::get_if<Op::Delete>(&ops_[i].v)) {
            unspilled_bytes_ += 8 * d->ids.size();
        }
    }
}

void Block::rollback() {
    if (!db_) return;
    undo_to(0);
    for (const SpillDone& s : spills_) db_->dead_bytes_ += s.framed;
    finish();
}

void Block::finish() {
    static_assert(sizeof(Database::Undo) <= 64, "a put's undo entry grew: see undo_kept_bytes_max");
    undo_.clear();
    // Kept for the next block while small (limits.h); the spare is empty, the constructor took it.
    if (undo_.capacity() * sizeof(Database::Undo) <= limits::undo_kept_bytes_max) {
        undo_.swap(db_->undo_spare_);
    }
    ops_.clear();
    spills_.clear();
    if (lock_.owns_lock()) lock_.unlock();
    db_ = nullptr;
}

// Appends the unspilled ops as a spill record once they reach the threshold (engine.md §5.2).
Status Block::maybe_spill() {
    // A follower's apply writes its primary's records verbatim, never spills of its own.
    if (applying_ || unspilled_bytes_ < limits::spill_threshold_bytes) return Status::ok();
    Status st = spill();
    if (!st.is_ok()) refused_ = st;
    return st;
}

Status Block::spill() {
    if (spill_token_ == 0) spill_token_ = db_->random_->next_u64() | 1;
    flatbuffers::FlatBufferBuilder b(unspilled_bytes_ + 1024);
    auto types = codec::op_types(b, ops_, spilled_ops_, ops_.size());
    auto values = codec::op_values(b, ops_, spilled_ops_, ops_.size());
    const uint64_t count = codec::count_writes(ops_, spilled_ops_, ops_.size());
    const uint32_t part = static_cast<uint32_t>(spills_.size());
    b.Finish(fb::CreateSpill(b, spill_token_, part, count, types, values, db_->durable_stamp_locked()));
    std::vector<std::byte> rec;
    format::append_record(rec, format::Kind::spill, codec::body_of(b));
    FENEC_RETURN_IF_ERROR(db_->refusal_locked());
    FENEC_RETURN_IF_ERROR(check_quotas(rec.size(), false));
    if (spill_bytes_ + rec.size() > limits::block_bytes_max) {
        return Status::error(Code::limit_exceeded, "a block is over 4 GiB encoded");
    }
    FENEC_RETURN_IF_ERROR(db_->append_locked(rec));
    const uint64_t checksum = format::load_u64(rec.data() + 4);
    spill_bytes_ += rec.size();
    const uint64_t framed = rec.size();
    spills_.push_back(SpillDone{part, count, checksum, framed, std::move(rec)});
    spilled_ops_ = ops_.size();
    unspilled_bytes_ = 0;
    return Status::ok();
}

Result<Landed> Block::commit() {
    if (!db_) return Status::error(Code::invalid_argument, "the block has ended");
    if (refused_) {
        const Status st = *refused_;
        rollback();
        return st;
    }
    Database& db = *db_;
    const Seq before{db.seq_.load(std::memory_order_relaxed)};
    // 1. No writes: nothing is appended or notified.
    if (count_ == 0) {
        rollback();
        return Landed{before, before, db.history_.current(), 0, true};
    }
    const Seq first{before.v + 1};
    const Seq last{before.v + count_};
    auto refuse = [this](Status st) -> Result<Landed> {
        rollback();
        return st;
    };
    // 2. Latched, frozen, read-only.
    if (Status st = db.refusal_locked(); !st.is_ok()) return refuse(st);
    // 3. Encode the record; its framed length is exact.
    std::vector<std::byte> rec = encode_record(first);
    const uint64_t rec_bytes = rec.size();
    // 4. The landing gate (the node's lease).
    if (Status st = check_lease(); !st.is_ok()) return refuse(st);
    // 5. Quotas, with the record's exact length and the rows it adds.
    if (Status st = check_quotas(rec_bytes, true); !st.is_ok()) return refuse(st);
    // 7. Append. A failure latches the database.
    if (Status st = db.append_locked(rec); !st.is_ok()) return refuse(st);
    // 8. Account and notify.
    account_landed(first, last, std::move(rec));
    Landed landed{first, last, db.history_.current(), spill_bytes_ + rec_bytes, false};
    const SyncPolicy policy = db.options_.sync;
    const bool defer = options_.defer_durable;
    finish();  // drops the undo log and releases the writer lock
    // 9. Durability outside the lock, unless the caller waits for it (when_durable).
    if (policy.kind == SyncPolicy::Kind::every_block && !defer) {
        FENEC_RETURN_IF_ERROR(db.wait_durable(last));
        landed.durable = true;
    }
    return landed;
}

// The record the block lands as: a block record, or a landing naming the spills written before
// it; either holds the ops not yet spilled.
std::vector<std::byte> Block::encode_record(Seq first) const {
    flatbuffers::FlatBufferBuilder b(unspilled_bytes_ + 1024);
    auto types = codec::op_types(b, ops_, spilled_ops_, ops_.size());
    auto values = codec::op_values(b, ops_, spilled_ops_, ops_.size());
    std::vector<std::byte> rec;
    if (spills_.empty()) {
        b.Finish(fb::CreateBlock(b, first.v, count_, now_ms_, options_.internal, types, values,
                                 db_->durable_stamp_locked()));
        rec.reserve(format::framed_size(b.GetSize()));
        format::append_record(rec, format::Kind::block, codec::body_of(b));
    } else {
        std::vector<fb::SpillRef> refs;
        for (const SpillDone& s : spills_) refs.emplace_back(s.part, s.count, s.checksum);
        auto rv = b.CreateVectorOfStructs(refs);
        b.Finish(fb::CreateLanding(b, spill_token_, first.v, count_, now_ms_, options_.internal, rv,
                                   types, values, db_->durable_stamp_locked()));
        format::append_record(rec, format::Kind::landing, codec::body_of(b));
    }
    return rec;
}

// The landing gate (engine.md §12): not_leased, naming the verdict, unless the node holds the
// tenant's lease now.
Status Block::check_lease() const {
    const Database& db = *db_;
    if (!db.options_.gate) return Status::ok();
    const LeaseVerdict v = db.options_.gate->check(db.options_.tenant);
    if (v == LeaseVerdict::ok) return Status::ok();
    return Status::error(Code::not_leased,
                         "tenant `" + db.options_.tenant + "` is not leased here (" +
                             std::string(lease_verdict_name(v)) + ")",
                         Detail{.lease = v});
}

// Whether every op only takes away (deletes, drops): such a block lands past the bytes quota.
bool Block::takes_away_only() const {
    for (const Op& op : ops_) {
        if (!std::holds_alternative<Op::Delete>(op.v) && !std::holds_alternative<Op::Drop>(op.v)) {
            return false;
        }
    }
    return true;
}

// Quotas at landing (engine.md §9) for a record of `record_bytes`, framed: the rows quota where
// the block adds rows, and the bytes quota, which the block's last record passes when the block
// only takes away (a spill is checked as it stands).
Status Block::check_quotas(uint64_t record_bytes, bool last_record) const {
    Database& db = *db_;
    if (!db.quota_) return Status::ok();
    ++db.quota_checks_;
    const Limits& l = db.quota_->limits;
    const bool exempt = last_record && takes_away_only();
    if (l.bytes && !exempt && db.file_bytes_ + record_bytes > *l.bytes) {
        return Status::error(
            Code::quota_exceeded,
            "the tenant's bytes quota (" + std::to_string(*l.bytes) + ") is reached",
            Detail{.quota = QuotaKind::bytes, .limit = double(*l.bytes)});
    }
    if (l.rows && rows_delta_ > 0 && db.client_rows_locked() > *l.rows) {
        return Status::error(Code::quota_exceeded,
                             "the tenant's rows quota (" + std::to_string(*l.rows) + ") is reached",
                             Detail{.quota = QuotaKind::rows, .limit = double(*l.rows)});
    }
    return Status::ok();
}

// The block appended as `rec`: seq moved on, the rate buckets charged for client writes, the
// versions it superseded counted dead, the feed given the block as the file holds it, its spills
// then its record (§11), and the listener told (§5.5).
void Block::account_landed(Seq first, Seq last, std::vector<std::byte> rec) {
    Database& db = *db_;
    db.seq_.store(last.v, std::memory_order_release);
    uint32_t written = 0;  // the collection of the op before: a block's ops run by collection
    for (const Op& op : ops_) {
        CollectionId c;
        std::visit([&](const auto& o) { c = o.collection; }, op.v);
        if (c.v != written) db.written_seq_[c.v] = last.v;
        written = c.v;
    }
    if (db.quota_ && !options_.internal && (db.quota_->rows_bucket || db.quota_->bytes_bucket)) {
        const int64_t now_ns = db.clock_->steady_ns();
        if (db.quota_->rows_bucket) db.quota_->rows_bucket->charge(double(charged_rows_), now_ns);
        if (db.quota_->bytes_bucket)
            db.quota_->bytes_bucket->charge(double(charged_bytes_), now_ns);
    }
    for (const Database::Undo& u : undo_) {
        if (u.prev) db.dead_bytes_ += u.prev->size;
    }
    // Without spills the feed takes the record itself: no second copy of the block's bytes.
    std::vector<std::byte> records;
    if (spills_.empty()) {
        records = std::move(rec);
    } else {
        records.reserve(spill_bytes_ + rec.size());
        for (const SpillDone& sp : spills_) {
            records.insert(records.end(), sp.record.begin(), sp.record.end());
        }
        records.insert(records.end(), rec.begin(), rec.end());
    }
    db.feed_->push(first, last, now_ms_, std::move(records));
    // Told last, so the memory figure it is given holds the feed's copy too.
    db.notify_locked(*this, first, last, options_.internal);
}

}  // namespace fenec::engine

namespace fenec::engine {

// The listener hears of a landed block once, in seq order, under the writer lock (§5.5).
void Database::notify_locked(const Block& block, Seq first, Seq last, bool internal) {
    ChangeListener* listener = options_.listener;
    if (!listener) return;
    using Op = Block::Op;
    BlockSummary sum{first, last, block.now_ms_, internal, {}};
    for (const Op& op : block.ops_) {
        CollectionId c;
        std::visit([&](const auto& o) { c = o.collection; }, op.v);
        if (sum.changes.empty() || sum.changes.back().collection != c) {
            sum.changes.push_back(CollectionChange{c, {}, {}, false});
        }
        CollectionChange& ch = sum.changes.back();
        if (auto* p = std::get_if<Op::Put>(&op.v)) {
            for (uint64_t id : p->ids) ch.put.push_back(DocId{id});
        } else if (auto* d = std::get_if<Op::Delete>(&op.v)) {
            for (uint64_t id : d->ids) ch.deleted.push_back(DocId{id});
        } else {
            ch.schema_changed = true;
        }
    }
    sum.memory_bytes = memory_bytes_locked();
    listener->on_block(sum);
}

}  // namespace fenec::engine
