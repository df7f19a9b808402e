// engine/replay.cc: ReplayState's pass (engine/replay.h) over a file's records (engine.md §6):
// each record checked and applied with the same in-memory mutations the write path makes, minus
// undo. The verdicts of §6.2 decide between a torn tail (cut) and corruption (refused, naming
// the offset). What follows a pass is open.cc's; installing an image, install.cc's.
#include "engine/replay.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "engine/hash.h"
#include "engine/limits.h"

namespace fenec::engine {

// Remembers where each collection was last written, so a graph record knows whether writes
// followed it (GraphRecord::written_after).
void ReplayState::note_write(uint64_t p, fb::Op type, const void* op) {
    uint32_t c = 0;
    switch (type) {
        case fb::Op::AlterCollection:
            c = static_cast<const fb::AlterCollection*>(op)->collection();
            break;
        case fb::Op::DropCollection:
            c = static_cast<const fb::DropCollection*>(op)->collection();
            break;
        case fb::Op::PutDocs:
            c = static_cast<const fb::PutDocs*>(op)->collection();
            break;
        case fb::Op::DeleteDocs:
            c = static_cast<const fb::DeleteDocs*>(op)->collection();
            break;
        default:
            return;
    }
    last_write[c] = p;
    if (type == fb::Op::AlterCollection || type == fb::Op::DropCollection) {
        for (auto it = graph_changes.lower_bound({c, 0});
             it != graph_changes.end() && it->first.first == c; ++it) {
            it->second.known = false;
            it->second.first.clear();
        }
    }
}

void ReplayState::note_change(uint32_t collection, uint64_t id, const std::optional<DocRef>& prev) {
    // The common file has no graph; an open without an index hook (a survey) reads none.
    if (graph_changes.empty() || !db.options_.hook) return;
    const uint64_t order = ++changes_noted;
    for (auto it = graph_changes.lower_bound({collection, 0});
         it != graph_changes.end() && it->first.first == collection; ++it) {
        if (!it->second.known) continue;
        auto [change, fresh] = it->second.first.try_emplace(id, Change{prev, order});
        if (!fresh) change->second.last = order;
    }
}

bool ReplayState::take_changes(std::pair<uint32_t, uint16_t> key, std::vector<GraphChange>& out) {
    auto it = graph_changes.find(key);
    if (it == graph_changes.end() || !it->second.known) return false;
    out.reserve(it->second.first.size());
    for (const auto& [id, c] : it->second.first) {
        out.push_back(GraphChange{
            DocId{id}, c.at_graph ? std::optional(c.at_graph->bytes()) : std::nullopt, c.last});
    }
    std::sort(out.begin(), out.end(),
              [](const GraphChange& a, const GraphChange& b) { return a.id.v < b.id.v; });
    graph_changes.erase(it);
    return true;
}

Status ReplayState::check_header() {
    if (size < format::kHeaderBytes) return corrupt(0, "file shorter than its 64-byte header");
    if (std::memcmp(buf, format::kMagic.data(), format::kMagic.size()) != 0) {
        return corrupt(0, "not a Fenec file (bad magic)");
    }
    const uint32_t version = format::load_u32(buf + format::kOffVersion);
    if (format::load_u64(buf + format::kOffHeaderCheck) !=
        XXH3_64bits(buf, format::kOffHeaderCheck)) {
        return corrupt(0, "header checksum mismatch");
    }
    if (version > format::kFormatVersion) {
        return corrupt(0,
                       "format version " + std::to_string(version) + " is newer than this build");
    }
    if (version != format::kFormatVersion)
        return corrupt(0, "format version " + std::to_string(version));
    if (format::load_u32(buf + format::kOffHeaderBytes) != format::kHeaderBytes) {
        return corrupt(0, "header length is not 64");
    }
    if (format::load_u64(buf + format::kOffFlags) != 0) return corrupt(0, "header flag bits set");
    if (format::load_u64(buf + 24) != 0 || format::load_u64(buf + 48) != 0) {
        return corrupt(0, "header reserved bytes are not zero");
    }
    const uint64_t lineage = format::load_u64(buf + format::kOffLineage);
    if (lineage == 0) return corrupt(0, "lineage is zero");
    db.lineage_ = LineageId{lineage};
    db.created_ms_ = static_cast<int64_t>(format::load_u64(buf + format::kOffCreated));
    return Status::ok();
}

bool ReplayState::zero_from(uint64_t p) const {
    if (received < size) {  // not all there: never read past what is
        deferred = true;
        return false;
    }
    for (uint64_t i = p; i < size; ++i) {
        if (buf[i] != std::byte{0}) return false;
    }
    return true;
}

namespace {

uint64_t body_max(format::Kind k);
bool verify_body(format::Kind k, std::span<const std::byte> body);
uint64_t durable_stamp(format::Kind k, std::span<const std::byte> body);
template <class T>
const T* root(std::span<const std::byte> body) {
    return flatbuffers::GetRoot<T>(body.data());
}

}  // namespace

bool ReplayState::unsynced_from(uint64_t p) const {
    if (received < size) {  // not all there: never read past what is
        deferred = true;
        return false;
    }
    if (db.history_.replica) return false;
    // The record at p with its head whole (its length checked) ends where it says; otherwise the
    // next record can start at any 8-byte step after p.
    const std::byte* head = buf + p;
    const bool head_whole = size - p >= format::kRecordHeadBytes && format::head_holds(head);
    uint64_t q = head_whole ? p + format::framed_size(format::load_u32(head)) : p + format::kRecordAlign;
    if (q > size) return false;  // a tear, which the caller has already told
    // A sector the flush never wrote reads as it was at the last sync: the bytes before p that
    // the sync covered, then the room's zeros. So the gap from p to the next whole record holds
    // a sector that is zero from p (or from its start) to its end. A flipped bit in a record that
    // was on disk leaves none, unless the record held such zeros itself.
    constexpr uint64_t sector = 512;
    bool zeros_seen = false;
    auto note_gap = [&](uint64_t from, uint64_t to) {
        for (uint64_t at = from / sector * sector; !zeros_seen && at + sector <= to; at += sector) {
            zeros_seen = std::all_of(buf + std::max(at, from), buf + at + sector,
                                     [](std::byte b) { return b == std::byte{0}; });
        }
    };
    bool first_gap = true;
    bool stamped_after = false;
    uint64_t gap_from = p;
    while (q + format::kRecordHeadBytes <= size) {
        const std::byte* h = buf + q;
        const uint32_t length = format::load_u32(h);
        const uint8_t kind_byte = std::to_integer<uint8_t>(h[12]);
        const uint64_t framed = format::framed_size(length);
        bool whole = kind_byte >= 1 && kind_byte <= format::kKindMax &&
                     length <= limits::record_body_bytes_max && framed <= size - q &&
                     format::head_holds(h);
        const auto kind = static_cast<format::Kind>(kind_byte);
        const std::span<const std::byte> body(h + format::kRecordHeadBytes, whole ? length : 0);
        whole = whole && length <= body_max(kind) &&
                format::checksum(kind_byte, body) == format::load_u64(h + 4) &&
                verify_body(kind, body);
        if (!whole) {
            q += format::kRecordAlign;
            continue;
        }
        if (first_gap) {
            note_gap(gap_from, q);
            first_gap = false;
        }
        // A record appended once p was on disk says so: p's fault is damage. A Graph without a
        // stamp is let by: derived data, never acknowledged, and what a build before graphs
        // carried stamps wrote into room (a record of any other kind without one was written by
        // a build that stamped only appends into room, past the end, after p was on disk). A
        // replica's History means a follower's file.
        if (kind == format::Kind::history && root<fb::History>(body)->replica()) return false;
        const uint64_t stamp = durable_stamp(kind, body);
        if (!(kind == format::Kind::graph && stamp == format::kNoDurableStamp) && stamp > p) {
            return false;
        }
        stamped_after = stamped_after || stamp != format::kNoDurableStamp;
        q += framed;
    }
    if (first_gap) note_gap(gap_from, size);
    // Only a file whose writer stamped its records can hold a hole: one of them says so, before
    // p or after it. A file written before the stamps is taken to have none.
    return zeros_seen && (stamps_seen || stamped_after);
}

namespace {

uint64_t body_max(format::Kind k) {
    switch (k) {
        case format::Kind::block:
        case format::Kind::spill:
        case format::Kind::landing:
        case format::Kind::image_docs:
            return limits::block_body_bytes_max;
        case format::Kind::checkpoint:
        case format::Kind::collection_state:
        case format::Kind::history:
            return limits::meta_body_bytes_max;
        case format::Kind::graph:
            return limits::record_body_bytes_max;
    }
    return 0;
}

bool verify_body(format::Kind k, std::span<const std::byte> body) {
    switch (k) {
        case format::Kind::checkpoint:
            return codec::verify_as<fb::Checkpoint>(body);
        case format::Kind::collection_state:
            return codec::verify_as<fb::CollectionState>(body);
        case format::Kind::image_docs:
            return codec::verify_as<fb::ImageDocs>(body);
        case format::Kind::block:
            return codec::verify_as<fb::Block>(body);
        case format::Kind::spill:
            return codec::verify_as<fb::Spill>(body);
        case format::Kind::landing:
            return codec::verify_as<fb::Landing>(body);
        case format::Kind::history:
            return codec::verify_as<fb::History>(body);
        case format::Kind::graph:
            return codec::verify_as<fb::Graph>(body);
    }
    return false;
}

// A verified record's durable_end (format.fbs); kNoDurableStamp for kinds that carry none.
uint64_t durable_stamp(format::Kind k, std::span<const std::byte> body) {
    switch (k) {
        case format::Kind::block:
            return root<fb::Block>(body)->durable_end();
        case format::Kind::spill:
            return root<fb::Spill>(body)->durable_end();
        case format::Kind::landing:
            return root<fb::Landing>(body)->durable_end();
        case format::Kind::history:
            return root<fb::History>(body)->durable_end();
        case format::Kind::graph:
            return root<fb::Graph>(body)->durable_end();
        default:
            return format::kNoDurableStamp;
    }
}

}  // namespace

// Reads and applies the record at p, or records a tear (cut_at) and stops.
Status ReplayState::record_at(uint64_t p, bool in_image) {
    const uint64_t left = size - p;
    // A fault in the appended region is a tear where the rest of the file is zeros. In an image
    // nothing is torn: a file that holds every byte its checkpoint promised is damaged where a
    // record fails, so the verdict names that record's fault. "Cut short" is said only of a file
    // that ends before image_end (apply_checkpoint and run() say it), never of a record that
    // merely ends at the end of the file or has zeros after it.
    auto fault = [&](bool torn_if_appended, const std::string& what) -> Status {
        if (in_image || mode == Mode::verify_image) return corrupt(p, what);
        if (torn_if_appended || zero_from(p) || unsynced_from(p)) {
            cut_at = p;
            return Status::ok();
        }
        return corrupt(p, what);
    };
    if (left < format::kRecordHeadBytes) return fault(true, "record head cut short");
    const std::byte* h = buf + p;
    const uint32_t length = format::load_u32(h);
    const uint8_t kind_byte = std::to_integer<uint8_t>(h[12]);
    // A head that fails its check with only zeros after it was never followed by its body: a
    // zero-filled tail that began inside the head (torn), not a damaged record (engine.md §6.2).
    if (!format::head_holds(h)) {
        return fault(zero_from(p + format::kRecordHeadBytes), "record head check fails");
    }
    if (length > limits::record_body_bytes_max) return fault(false, "record length too large");
    const uint64_t framed = format::framed_size(length);
    if (framed > left) return fault(true, "record runs past the end of the file");
    const std::span<const std::byte> body(h + format::kRecordHeadBytes, length);
    if (format::checksum(kind_byte, body) != format::load_u64(h + 4)) {
        // Torn too when only zeros follow: a zero-filled tail that began inside this record's
        // body (several unsynced records cut by a crash) holds no record after it.
        return fault(p + framed == size || zero_from(p + framed), "record checksum mismatch");
    }
    if (kind_byte < 1 || kind_byte > format::kKindMax) {
        return corrupt(p, "unknown record kind " + std::to_string(kind_byte));
    }
    for (uint64_t i = format::kRecordHeadBytes + length; i < framed; ++i) {
        if (h[i] != std::byte{0}) return corrupt(p, "record padding is not zero");
    }
    const auto kind = static_cast<format::Kind>(kind_byte);
    if (length > body_max(kind))
        return corrupt(p, std::string(format::kind_name(kind)) + " record too large");
    if (!verify_body(kind, body)) {
        // A graph is derived data: one that does not verify is rebuilt from the documents, never
        // a reason to refuse the open (engine.md §6.3). It is dead space until a rewrite.
        if (kind == format::Kind::graph) {
            db.dead_bytes_ += framed;
            return Status::ok();
        }
        return corrupt(p, std::string(format::kind_name(kind)) + " record fails verification");
    }
    return apply(kind, p, body, framed);
}

Status ReplayState::advance(uint64_t available) {
    const bool partial = available < size;
    if (!header_checked) {
        if (partial && available < format::kHeaderBytes) return Status::ok();
        FENEC_RETURN_IF_ERROR(check_header());
        header_checked = true;
    }
    received = partial ? available : UINT64_MAX;
    struct Reset {
        uint64_t& r;
        ~Reset() { r = UINT64_MAX; }
    } reset{received};
    while (pos < available && !cut_at) {
        const bool in_image = image_end != 0 && pos < image_end;
        const uint64_t at = pos;
        if (partial && deferred_at == at) break;  // read again once every byte is there
        if (partial) {                            // only a record wholly there is read
            if (available - at < format::kRecordHeadBytes) break;
            const uint64_t whole = format::framed_size(format::load_u32(buf + at));
            if (whole > available - at && whole <= size - at) break;
        }
        if (Status st = record_at(at, in_image); !st.is_ok()) {
            if (partial && deferred) {
                deferred = false;
                deferred_at = at;
                return Status::ok();  // read again with the bytes after it
            }
            return st;
        }
        if (cut_at) break;
        const uint64_t framed = format::framed_size(format::load_u32(buf + at));
        if (records_seen)
            records_seen->push_back({at, std::to_integer<uint8_t>(buf[at + 12]), framed});
        pos = at + framed;
        if (image_end != 0 && at < image_end && pos >= image_end) {
            if (pos != image_end) return corrupt(at, "record crosses the end of the image");
            FENEC_RETURN_IF_ERROR(finish_image(at));
        }
    }
    return Status::ok();
}

Status ReplayState::run() {
    FENEC_RETURN_IF_ERROR(advance(size));
    if (image_end != 0 && pos < image_end && !cut_at) {
        return corrupt(pos, "image cut short at " + std::to_string(size) + " of " +
                                std::to_string(image_end) + " bytes");
    }
    if (!have_history) return corrupt(format::kHeaderBytes, "the file holds no history record");
    // Spills at the tail that no landing names are cut with the tear (engine.md §6.2).
    if (trailing_spill && !cut_at) cut_at = trailing_spill;
    for (auto& [token, parts] : spills) {
        for (const SpillSeen& s : parts) {
            if (!s.named && (!cut_at || s.offset < *cut_at)) db.dead_bytes_ += s.framed;
        }
    }
    return Status::ok();
}

Status ReplayState::finish_image(uint64_t p) {
    for (const auto& [cid, rows] : image_rows) {
        Collection* c = db.collection_locked(CollectionId{cid});
        if (!c) continue;
        if (c->rows() != rows)
            return corrupt(p, "collection state promised " + std::to_string(rows) +
                                  " rows, the image holds " + std::to_string(c->rows()));
        if (!c->docs().empty() && c->docs().max_id() >= c->next_id()) {
            return corrupt(p, "next id is not above every id");
        }
    }
    return Status::ok();
}

// Where a record may stand is checked first: an image's kinds only inside an image (a checkpoint
// also as the file's first record, opening one), a block's kinds only outside; then the record
// is applied by its kind.
Status ReplayState::apply(format::Kind kind, uint64_t p, std::span<const std::byte> body,
                          uint64_t framed) {
    const bool in_image = image_end != 0 && p < image_end;
    using K = format::Kind;
    const bool image_kind =
        kind == K::checkpoint || kind == K::collection_state || kind == K::image_docs;
    if (image_kind && !in_image && !(kind == K::checkpoint && p == format::kHeaderBytes)) {
        return corrupt(p, std::string(format::kind_name(kind)) + " record outside an image");
    }
    if (in_image && (kind == K::block || kind == K::spill || kind == K::landing)) {
        return corrupt(p, std::string(format::kind_name(kind)) + " record inside an image");
    }
    if (kind != K::spill) trailing_spill.reset();
    if (const uint64_t stamp = durable_stamp(kind, body); stamp != format::kNoDurableStamp) {
        stamps_seen = true;
        // The last stamped record speaks for every one before it; but a spill may be cut at the
        // end as dead (no landing names it), so it only ever adds to what is uncovered.
        tail_uncovered = stamp < p || (kind == K::spill && tail_uncovered);
    }
    switch (kind) {
        case K::checkpoint:
            return apply_checkpoint(p, root<fb::Checkpoint>(body), framed);
        case K::collection_state:
            return apply_collection_state(p, root<fb::CollectionState>(body));
        case K::image_docs: {
            const auto* d = root<fb::ImageDocs>(body);
            return apply_put(p, d->collection(), d->ids(), d->ends(), d->bodies(), true);
        }
        case K::history:
            return apply_history(p, root<fb::History>(body));
        case K::graph:
            note_graph(p, root<fb::Graph>(body), body, framed);
            return Status::ok();
        case K::block:
            return apply_block(p, root<fb::Block>(body), framed);
        case K::spill:
            return note_spill(p, root<fb::Spill>(body), framed);
        case K::landing:
            return apply_landing(p, root<fb::Landing>(body), framed);
    }
    return corrupt(p, "unknown record kind");
}

// A checkpoint opens an image: the records up to image_end are the image's. The seq and the
// collection counter are the image's; an image of no record after the checkpoint ends here.
Status ReplayState::apply_checkpoint(uint64_t p, const fb::Checkpoint* c, uint64_t framed) {
    image_end = p + framed + c->image_bytes();
    if (image_end < p + framed) return corrupt(p, "image length overflows");
    db.seq_.store(c->seq());
    db.next_collection_ = std::max<uint32_t>(1, c->next_collection());
    if (image_end > size) {
        return corrupt(p, "image cut short at " + std::to_string(size) + " of " +
                              std::to_string(image_end) + " bytes");
    }
    if (image_end == p + framed) return finish_image(p);
    return Status::ok();
}

// A collection as the image holds it, with the rows its image_docs must add up to
// (finish_image checks them).
Status ReplayState::apply_collection_state(uint64_t p, const fb::CollectionState* s) {
    const std::string name = s->name() ? s->name()->str() : "";
    FENEC_ASSIGN_OR_RETURN(Schema schema, codec::from_fb(s->schema(), p));
    if (!is_identifier(name) || db.names_.count(name) || db.collections_.count(s->collection()) ||
        s->collection() == 0 || s->collection() >= db.next_collection_) {
        return corrupt(p, "collection state for `" + name + "` is not valid here");
    }
    if (!validate_schema(name, schema).is_ok()) {
        return corrupt(p, "invalid schema for `" + name + "`");
    }
    auto col = std::make_unique<Collection>(CollectionId{s->collection()}, name, std::move(schema));
    col->set_next_id(std::max<uint64_t>(1, s->next_id()));
    db.names_[name] = s->collection();
    db.collections_[s->collection()] = std::move(col);
    image_rows[s->collection()] = s->rows();
    return Status::ok();
}

// The file's forks: at least one, in seq order, the first at seq 0, none past the file's seq. A
// later history record replaces an earlier one.
Status ReplayState::apply_history(uint64_t p, const fb::History* h) {
    History hist;
    if (!h->forks() || h->forks()->size() == 0 || h->forks()->size() > limits::forks_max) {
        return corrupt(p, "history holds no forks or too many");
    }
    uint64_t last = 0;
    for (const fb::Fork* f : *h->forks()) {
        if (f->history() == 0 || f->seq() < last) return corrupt(p, "history forks out of order");
        last = f->seq();
        hist.forks.push_back(Fork{HistoryId{f->history()}, Seq{f->seq()}});
    }
    if (hist.forks.front().seq.v != 0) return corrupt(p, "history does not start at seq 0");
    if (last > db.seq_.load()) return corrupt(p, "history forks past the file's seq");
    hist.replica = h->replica();
    db.history_ = std::move(hist);
    have_history = true;
    return Status::ok();
}

// A graph record is kept for the index hook (the last one per field wins; the one it supersedes
// is dead space). It is derived data: nothing here can refuse the open.
void ReplayState::note_graph(uint64_t p, const fb::Graph* g, std::span<const std::byte> body,
                             uint64_t framed) {
    // It describes the documents at its at_seq, which must be the file's seq where it lies
    // (engine.md §6.3). One that is not cannot be caught up by the change set counted from here:
    // it is dead space, and the field's earlier record, with its change set, stays in force.
    if (g->at_seq() != db.seq_.load()) {
        db.dead_bytes_ += framed;
        return;
    }
    GraphRecord& rec = graphs[{g->collection(), g->slot()}];
    rec = GraphRecord{};
    rec.collection = CollectionId{g->collection()};
    rec.slot = g->slot();
    rec.offset = p;
    rec.body = body;
    graph_changes[{g->collection(), g->slot()}] = ChangeSet{};  // writes are counted from here
    uint64_t& last = db.graph_framed_[{g->collection(), g->slot()}];
    db.graph_dead_bytes_ += last;  // the record this one supersedes
    last = framed;
}

// A block: its writes follow the file's seq, exactly as many as it counts.
Status ReplayState::apply_block(uint64_t p, const fb::Block* b, uint64_t framed) {
    if (!have_history) return corrupt(p, "a block before any history record");
    if (b->first_seq() != db.seq_.load() + 1) {
        return corrupt(p, "block first_seq " + std::to_string(b->first_seq()) +
                              " does not follow seq " + std::to_string(db.seq_.load()));
    }
    // seq never wraps (I2): a checkpoint near 2^64-1 must not carry it back to 0.
    if (b->count() > std::numeric_limits<uint64_t>::max() - db.seq_.load()) {
        return corrupt(p, "block would carry seq past 2^64-1");
    }
    uint64_t writes = 0;
    FENEC_RETURN_IF_ERROR(apply_ops(p, b->ops_type(), b->ops(), writes));
    if (writes != b->count() || writes == 0) {
        return corrupt(p, "block count does not match its writes");
    }
    db.seq_.store(b->first_seq() + b->count() - 1);
    landed.push_back({b->first_seq(), db.seq_.load(), b->at_ms(), {{p, framed}}});
    return Status::ok();
}

// A spill is set aside, unapplied, until a landing names it (I1); one no landing names is dead
// space, and cut with the tear when it trails the file.
Status ReplayState::note_spill(uint64_t p, const fb::Spill* s, uint64_t framed) {
    if (!have_history) return corrupt(p, "a spill before any history record");
    spills[s->token()].push_back(
        SpillSeen{s->part(), s->count(), format::load_u64(buf + p + 4), p, framed, s, false});
    if (!trailing_spill) trailing_spill = p;
    return Status::ok();
}

// The spills a landing names, in part order: each one in the file under the landing's token, not
// named before, with the checksum and count the landing gives it.
Result<std::vector<ReplayState::SpillSeen*>> ReplayState::named_spills(uint64_t p,
                                                                       const fb::Landing* l) {
    auto it = spills.find(l->token());
    const size_t nrefs = l->spills() ? l->spills()->size() : 0;
    std::vector<SpillSeen*> parts;
    for (size_t i = 0; i < nrefs; ++i) {
        const fb::SpillRef* ref = l->spills()->Get(static_cast<flatbuffers::uoffset_t>(i));
        SpillSeen* found = nullptr;
        if (it != spills.end()) {
            for (SpillSeen& s : it->second) {
                if (s.part == ref->part() && !s.named) found = &s;
            }
        }
        if (!found || ref->part() != i) return corrupt(p, "landing names a spill not in the file");
        if (found->checksum != ref->checksum() || found->count != ref->count()) {
            return corrupt(p, "landing's spill checksum differs from its spill's");
        }
        parts.push_back(found);
    }
    return parts;
}

// A landing: the spills it names applied in order, then its own ops; their writes together
// follow the file's seq, exactly as many as it counts.
Status ReplayState::apply_landing(uint64_t p, const fb::Landing* l, uint64_t framed) {
    if (!have_history) return corrupt(p, "a landing before any history record");
    if (l->first_seq() != db.seq_.load() + 1) {
        return corrupt(p, "landing first_seq does not follow the file's seq");
    }
    if (l->count() > std::numeric_limits<uint64_t>::max() - db.seq_.load()) {
        return corrupt(p, "landing would carry seq past 2^64-1");
    }
    FENEC_ASSIGN_OR_RETURN(const std::vector<SpillSeen*> parts, named_spills(p, l));
    uint64_t writes = 0;
    for (SpillSeen* s : parts) {
        uint64_t w = 0;
        FENEC_RETURN_IF_ERROR(apply_ops(s->offset, s->body->ops_type(), s->body->ops(), w));
        if (w != s->count) return corrupt(s->offset, "spill count does not match its writes");
        s->named = true;
        writes += w;
    }
    uint64_t own = 0;
    FENEC_RETURN_IF_ERROR(apply_ops(p, l->ops_type(), l->ops(), own));
    writes += own;
    if (writes != l->count() || writes == 0) {
        return corrupt(p, "landing count does not match its writes");
    }
    db.seq_.store(l->first_seq() + l->count() - 1);
    LandedSeen seen{l->first_seq(), db.seq_.load(), l->at_ms(), {}};
    for (const SpillSeen* sp : parts) seen.pieces.emplace_back(sp->offset, sp->framed);
    seen.pieces.emplace_back(p, framed);
    landed.push_back(std::move(seen));
    return Status::ok();
}

Status ReplayState::apply_put(uint64_t p, uint32_t collection,
                              const flatbuffers::Vector<uint64_t>* ids,
                              const flatbuffers::Vector<uint32_t>* ends,
                              const flatbuffers::Vector<uint8_t>* bodies, bool image) {
    Collection* c = db.collection_locked(CollectionId{collection});
    if (!c) return corrupt(p, "documents for unknown collection " + std::to_string(collection));
    const uint32_t n = ids ? ids->size() : 0;
    if (!ends || ends->size() != n || (n > 0 && !bodies))
        return corrupt(p, "ids and ends differ in count");
    const uint64_t body_base = static_cast<uint64_t>(
        reinterpret_cast<const std::byte*>(bodies ? bodies->data() : nullptr) - buf);
    uint32_t start = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const uint64_t id = ids->Get(i);
        const uint32_t end = ends->Get(i);
        if (end <= start || end > bodies->size()) return corrupt(p, "document ends out of order");
        if (id < 1 || id > limits::doc_id_max) return corrupt(p, "document id out of range");
        const std::span<const std::byte> body(
            reinterpret_cast<const std::byte*>(bodies->data()) + start, end - start);
        FENEC_RETURN_IF_ERROR(validate_body(body, bodies ? body_base + start : p));
        const std::optional<DocRef> prev =
            c->put_ref(DocId{id}, DocRef{body.data(), static_cast<uint32_t>(body.size())});
        if (prev) {
            if (image) return corrupt(p, "an image holds id " + std::to_string(id) + " twice");
            db.dead_bytes_ += prev->size;
        }
        if (!image) {
            c->set_next_id(std::max(c->next_id(), id + 1));
            note_change(collection, id, prev);
        }
        start = end;
    }
    if (n > 0 && start != bodies->size()) return corrupt(p, "bodies longer than their documents");
    return Status::ok();
}

Status ReplayState::apply_ops(uint64_t p, const flatbuffers::Vector<fb::Op>* types,
                              const flatbuffers::Vector<flatbuffers::Offset<void>>* values,
                              uint64_t& writes) {
    if (!types || !values || types->size() != values->size()) return corrupt(p, "malformed ops");
    for (flatbuffers::uoffset_t i = 0; i < types->size(); ++i) {
        const fb::Op type = types->Get(i);
        const void* v = values->Get(i);
        if (!v) return corrupt(p, "missing op");
        note_write(p, type, v);
        switch (type) {
            case fb::Op::CreateCollection: {
                const auto* c = static_cast<const fb::CreateCollection*>(v);
                const std::string name = c->name() ? c->name()->str() : "";
                FENEC_ASSIGN_OR_RETURN(Schema schema, codec::from_fb(c->schema(), p));
                // The id must leave the counter room to move past it: 2^32-1 would wrap it to 0.
                if (!is_identifier(name) || db.names_.count(name) ||
                    c->collection() < db.next_collection_ ||
                    c->collection() == std::numeric_limits<uint32_t>::max() ||
                    !validate_schema(name, schema).is_ok()) {
                    return corrupt(p, "create collection `" + name + "` is not valid here");
                }
                db.collections_[c->collection()] = std::make_unique<Collection>(
                    CollectionId{c->collection()}, name, std::move(schema));
                db.names_[name] = c->collection();
                db.next_collection_ = c->collection() + 1;
                ++writes;
                break;
            }
            case fb::Op::AlterCollection: {
                const auto* a = static_cast<const fb::AlterCollection*>(v);
                Collection* col = db.collection_locked(CollectionId{a->collection()});
                if (!col) return corrupt(p, "alter of an unknown collection");
                FENEC_ASSIGN_OR_RETURN(AlterSpec spec, codec::alter_spec_of(a, col->schema(), p));
                FENEC_ASSIGN_OR_RETURN(Schema recorded, codec::from_fb(a->after(), p));
                uint16_t slot = 0;
                Result<Schema> after = apply_alter(col->name(), col->schema(), spec, &slot);
                if (!after.is_ok() || !(*after == recorded) || slot != a->slot()) {
                    return corrupt(p, "alter's schema differs from the one replay computes");
                }
                col->set_schema(std::move(recorded));
                ++writes;
                break;
            }
            case fb::Op::DropCollection: {
                const auto* d = static_cast<const fb::DropCollection*>(v);
                auto it = db.collections_.find(d->collection());
                if (it == db.collections_.end()) return corrupt(p, "drop of an unknown collection");
                db.names_.erase(it->second->name());
                db.collections_.erase(it);
                ++writes;
                break;
            }
            case fb::Op::PutDocs: {
                const auto* d = static_cast<const fb::PutDocs*>(v);
                FENEC_RETURN_IF_ERROR(
                    apply_put(p, d->collection(), d->ids(), d->ends(), d->bodies(), false));
                writes += d->ids() ? d->ids()->size() : 0;
                break;
            }
            case fb::Op::DeleteDocs: {
                const auto* d = static_cast<const fb::DeleteDocs*>(v);
                Collection* col = db.collection_locked(CollectionId{d->collection()});
                if (!col) return corrupt(p, "delete in an unknown collection");
                if (d->ids()) {
                    for (uint64_t id : *d->ids()) {
                        std::optional<DocRef> prev = col->erase(DocId{id});
                        if (!prev) return corrupt(p, "delete of absent id " + std::to_string(id));
                        db.dead_bytes_ += prev->size;
                        note_change(d->collection(), id, prev);
                        ++writes;
                    }
                }
                break;
            }
            default:
                return corrupt(p, "unknown op type " + std::to_string(static_cast<unsigned>(type)));
        }
    }
    return Status::ok();
}

}  // namespace fenec::engine
