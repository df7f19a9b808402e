// engine/apply.cc: a follower applying its primary's feed (engine.md §11). A block entry's
// records are checked as replay checks them, applied through a Block (so the index hook, the
// listener and the feed hear of them as of a landing), and appended byte for byte; a forks
// entry becomes this file's history with replica = true. Nothing here asks a quota or a lease.
#include <limits>
#include <unordered_map>

#include "engine/database_internal.h"
#include "engine/limits.h"

namespace fenec::engine {
namespace fb = fenec::format;

namespace {

Status bad(const std::string& what) {
    return Status::error(Code::invalid_argument, "replicated block refused: " + what);
}

struct Rec {
    format::Kind kind;
    std::span<const std::byte> body;
};

// Splits an entry's bytes into records, each checked: head, length, checksum, padding, kind
// (spills then one block or landing), FlatBuffers verification.
Result<std::vector<Rec>> split_records(std::span<const std::byte> bytes) {
    std::vector<Rec> out;
    uint64_t p = 0;
    while (p < bytes.size()) {
        if (bytes.size() - p < format::kRecordHeadBytes) return bad("a record head cut short");
        const std::byte* h = bytes.data() + p;
        const uint32_t length = format::load_u32(h);
        const uint8_t kind = std::to_integer<uint8_t>(h[12]);
        if (!format::head_holds(h)) return bad("a record head check fails");
        if (length > limits::block_body_bytes_max) return bad("a record is too large");
        const uint64_t framed = format::framed_size(length);
        if (framed > bytes.size() - p) return bad("a record runs past the entry");
        const std::span<const std::byte> body(h + format::kRecordHeadBytes, length);
        if (format::checksum(kind, body) != format::load_u64(h + 4)) {
            return bad("a record checksum mismatch");
        }
        for (uint64_t i = format::kRecordHeadBytes + length; i < framed; ++i) {
            if (h[i] != std::byte{0}) return bad("record padding is not zero");
        }
        const auto k = static_cast<format::Kind>(kind);
        const bool last = p + framed == bytes.size();
        bool ok = false;
        if (k == format::Kind::spill && !last) ok = codec::verify_as<fb::Spill>(body);
        if (k == format::Kind::block && last && out.empty()) ok = codec::verify_as<fb::Block>(body);
        if (k == format::Kind::landing && last) ok = codec::verify_as<fb::Landing>(body);
        if (!ok) return bad("record kind " + std::to_string(kind) + " is not valid here");
        out.push_back(Rec{k, body});
        p += framed;
    }
    if (out.empty()) return bad("no records");
    return out;
}

}  // namespace

Status Database::apply(const FeedEntry& entry) {
    if (entry.type == FeedEntry::Type::forks) {
        std::vector<Fork> forks;
        for (const auto& [h, s] : entry.forks) forks.push_back(Fork{h, s});
        std::unique_lock<std::shared_mutex> lock(mu_);
        return write_forks_locked(std::move(forks));
    }
    return apply_block(entry);
}

Status Database::follow(const History& primary) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    following_ = true;
    return write_forks_locked(primary.forks);
}

// A primary's forks may name a fork past this file's seq (the follower is behind it): a history
// naming a seq the file has not reached would not replay, so each such fork waits until the seq
// reaches it, and is written then. Takes the writer lock held; releases nothing.
Status Database::write_forks_locked(std::vector<Fork> forks) {
    if (!following_ && !history_.replica) {
        return Status::error(Code::invalid_argument, "only a follower applies a feed");
    }
    if (auto f = failure()) return Status::error(Code::io_error, f->to_string(), f->detail());
    if (forks.empty() || forks.front().seq.v != 0 || forks.size() > limits::forks_max) {
        return Status::error(Code::invalid_argument, "a fork list starts at seq 0, ≤ 1024 forks");
    }
    // What replay requires of a history record (engine/replay.cc): written otherwise, the
    // copy's own file would not reopen.
    for (size_t i = 0; i < forks.size(); ++i) {
        if (forks[i].history.v == 0 || (i > 0 && forks[i].seq.v < forks[i - 1].seq.v)) {
            return Status::error(Code::invalid_argument,
                                 "a fork list names history 0 or goes back in seq");
        }
    }
    History h{std::move(forks), true};
    // The forks this file has reached are written now, those past it wait (pending_forks_) and
    // are written as its seq reaches each: every block it applies is then labelled with the
    // history its primary wrote it on, which a promotion forks from and a Fenec-History reads.
    const uint64_t at = seq().v;
    History reached = h;
    if (h.forks.back().seq.v > at) {
        std::erase_if(reached.forks, [&](const Fork& f) { return f.seq.v > at; });
        pending_forks_ = std::move(h);
    } else {
        pending_forks_.reset();
    }
    if (reached == history_) return Status::ok();
    FENEC_RETURN_IF_ERROR(append_history_locked(reached));
    history_ = reached;
    FENEC_RETURN_IF_ERROR(sync_now());  // sync_mu_ only: never waits on the writer lock
    feed_->set_forks(reached.forks);
    return Status::ok();
}

Status Database::apply_block(const FeedEntry& entry) {
    if (!entry.records) return bad("no records");
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (!following_ && !history_.replica) {
        return Status::error(Code::invalid_argument, "only a follower applies a feed");
    }
    if (auto f = failure()) return Status::error(Code::io_error, f->to_string(), f->detail());
    const uint64_t at = seq().v;
    if (entry.first.v != at + 1) {
        return bad("a gap: the block starts at " + std::to_string(entry.first.v) +
                   ", the copy is at " + std::to_string(at));
    }
    FENEC_ASSIGN_OR_RETURN(std::vector<Rec> recs, split_records(*entry.records));
    const Rec& tail = recs.back();
    uint64_t first = 0, count = 0;
    int64_t at_ms = 0;
    bool internal = false;
    if (tail.kind == format::Kind::block) {
        const auto* b = flatbuffers::GetRoot<fb::Block>(tail.body.data());
        first = b->first_seq(), count = b->count(), at_ms = b->at_ms(), internal = b->internal();
    } else {
        const auto* l = flatbuffers::GetRoot<fb::Landing>(tail.body.data());
        first = l->first_seq(), count = l->count(), at_ms = l->at_ms(), internal = l->internal();
        const size_t nrefs = l->spills() ? l->spills()->size() : 0;
        if (nrefs + 1 != recs.size()) return bad("the landing names other spills than it came with");
        for (size_t i = 0; i < nrefs; ++i) {
            const auto* ref = l->spills()->Get(static_cast<flatbuffers::uoffset_t>(i));
            const auto* sp = flatbuffers::GetRoot<fb::Spill>(recs[i].body.data());
            if (ref->part() != i || sp->part() != i || sp->token() != l->token() ||
                sp->count() != ref->count() ||
                format::checksum(uint8_t(format::Kind::spill), recs[i].body) != ref->checksum()) {
                return bad("a spill differs from the one its landing names");
            }
        }
    }
    if (first != entry.first.v || count == 0 || entry.last.v != first + count - 1 ||
        count > std::numeric_limits<uint64_t>::max() - at) {
        return bad("its seqs differ from the entry's");
    }
    Block block(this, std::move(lock), BlockOptions{.internal = true, .now_ms = at_ms});
    block.applying_ = true;
    for (const Rec& r : recs) {
        // On a refusal the block's destructor puts everything back.
        FENEC_RETURN_IF_ERROR(apply_record(block, static_cast<uint8_t>(r.kind), r.body));
    }
    if (block.count_ != count) return bad("its count does not match its writes");
    if (Status st = append_locked(*entry.records); !st.is_ok()) return st;
    seq_.store(entry.last.v, std::memory_order_release);
    for (const Undo& u : block.undo_) {
        if (u.prev) dead_bytes_ += u.prev->size;
    }
    notify_locked(block, entry.first, entry.last, internal);
    feed_->push(entry.first, entry.last, at_ms,
                std::vector<std::byte>(entry.records->begin(), entry.records->end()));
    Status forks_written;
    if (pending_forks_) forks_written = write_forks_locked(pending_forks_->forks);
    const SyncPolicy policy = options_.sync;
    block.finish();
    FENEC_RETURN_IF_ERROR(forks_written);
    if (policy.kind == SyncPolicy::Kind::every_block) return wait_durable(entry.last);
    return Status::ok();
}

// Runs one checked record's ops through `block` as the write path would.
Status Database::apply_record(Block& block, uint8_t kind, std::span<const std::byte> body) {
    const flatbuffers::Vector<fb::Op>* types = nullptr;
    const flatbuffers::Vector<flatbuffers::Offset<void>>* values = nullptr;
    if (kind == uint8_t(format::Kind::spill)) {
        const auto* r = flatbuffers::GetRoot<fb::Spill>(body.data());
        types = r->ops_type(), values = r->ops();
    } else if (kind == uint8_t(format::Kind::block)) {
        const auto* r = flatbuffers::GetRoot<fb::Block>(body.data());
        types = r->ops_type(), values = r->ops();
    } else {
        const auto* r = flatbuffers::GetRoot<fb::Landing>(body.data());
        types = r->ops_type(), values = r->ops();
    }
    if (!types || !values || types->size() != values->size()) return bad("malformed ops");
    for (flatbuffers::uoffset_t i = 0; i < types->size(); ++i) {
        const void* v = values->Get(i);
        if (!v) return bad("a missing op");
        switch (types->Get(i)) {
            case fb::Op::CreateCollection: {
                const auto* c = static_cast<const fb::CreateCollection*>(v);
                FENEC_ASSIGN_OR_RETURN(Schema schema, codec::from_fb(c->schema(), 0));
                FENEC_ASSIGN_OR_RETURN(CollectionId id,
                                       block.create(c->name() ? c->name()->string_view() : "",
                                                    schema, true));
                if (id.v != c->collection()) return bad("a collection id differs from the copy's");
                break;
            }
            case fb::Op::AlterCollection: {
                const auto* a = static_cast<const fb::AlterCollection*>(v);
                const Schema* before = block.schema(CollectionId{a->collection()});
                const Collection* col = collection_locked(CollectionId{a->collection()});
                if (!before || !col) return bad("an alter of an unknown collection");
                FENEC_ASSIGN_OR_RETURN(AlterSpec spec, codec::alter_spec_of(a, *before, 0));
                // The record carries the schema after it and the slot it took; replay refuses
                // a file where they differ from what it computes, so the copy refuses them
                // here rather than append a block its own reopen would refuse.
                FENEC_ASSIGN_OR_RETURN(Schema recorded, codec::from_fb(a->after(), 0));
                uint16_t slot = 0;
                Result<Schema> after = apply_alter(col->name(), *before, spec, &slot);
                if (!after.is_ok() || !(*after == recorded) || slot != a->slot()) {
                    return bad("an alter's schema differs from the one the copy computes");
                }
                FENEC_RETURN_IF_ERROR(block.alter_collection(CollectionId{a->collection()}, spec));
                break;
            }
            case fb::Op::DropCollection: {
                const auto* d = static_cast<const fb::DropCollection*>(v);
                FENEC_RETURN_IF_ERROR(block.drop_collection(CollectionId{d->collection()}));
                break;
            }
            case fb::Op::PutDocs: {
                const auto* d = static_cast<const fb::PutDocs*>(v);
                Collection* col = collection_locked(CollectionId{d->collection()});
                if (!col) return bad("documents for an unknown collection");
                const uint32_t n = d->ids() ? d->ids()->size() : 0;
                if (!d->ends() || d->ends()->size() != n || (n > 0 && !d->bodies())) {
                    return bad("ids and ends differ in count");
                }
                uint32_t start = 0;
                for (uint32_t k = 0; k < n; ++k) {
                    const uint64_t id = d->ids()->Get(k);
                    const uint32_t end = d->ends()->Get(k);
                    if (end <= start || end > d->bodies()->size()) return bad("document ends out of order");
                    if (id < 1 || id > limits::doc_id_max) return bad("a document id out of range");
                    const std::span<const std::byte> doc(
                        reinterpret_cast<const std::byte*>(d->bodies()->data()) + start, end - start);
                    FENEC_RETURN_IF_ERROR(validate_body(doc, 0));
                    FENEC_RETURN_IF_ERROR(block.write_doc(*col, DocId{id}, doc));
                    start = end;
                }
                // Replay refuses bytes past the last document (engine/replay.cc apply_put).
                if (n > 0 && start != d->bodies()->size()) {
                    return bad("bodies longer than their documents");
                }
                break;
            }
            case fb::Op::DeleteDocs: {
                const auto* d = static_cast<const fb::DeleteDocs*>(v);
                if (!d->ids()) break;
                for (uint64_t id : *d->ids()) {
                    FENEC_ASSIGN_OR_RETURN(bool gone, block.del(CollectionId{d->collection()}, DocId{id}));
                    if (!gone) return bad("a delete of absent id " + std::to_string(id));
                }
                break;
            }
            default: return bad("an unknown op type");
        }
    }
    return Status::ok();
}

}  // namespace fenec::engine
