// engine/replay.cc: opening a file (engine.md §6): one pass over the records, each checked and
// applied with the same in-memory mutations the write path makes, minus undo. The verdicts of
// §6.2 decide between a torn tail (cut) and corruption (refused, naming the offset).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstring>
#include <limits>
#include <thread>
#include <unordered_map>

#include "engine/database_internal.h"
#include "engine/flusher.h"
#include "engine/limits.h"

namespace fenec::engine {

namespace fb = fenec::format;

struct ReplayState {
    // verify_image: an image as a PUT brings it (install_open, verify_image): any whole file,
    // a pure image (starting with a checkpoint) or a file with records after one, with no tear:
    // a fault anywhere is corruption, never a cut. Spills at the tail that no landing names
    // are dead space and are cut as open cuts them.
    enum class Mode { open, verify_image };

    ReplayState(Database& d, const std::byte* b, uint64_t n, Mode m)
        : db(d), buf(b), size(n), mode(m) {}

    Database& db;
    const std::byte* buf;
    uint64_t size;
    Mode mode;
    // Owns `buf` when the database may keep it (finish_replay adopts it rather than copying the
    // documents out); null: `buf` is the caller's for the call only.
    std::shared_ptr<const std::byte[]> owner;

    uint64_t pos = format::kHeaderBytes;
    bool header_checked = false;
    uint64_t received = UINT64_MAX;  // advance(): the bytes there so far, when fewer than `size`
    mutable bool deferred = false;   // zero_from was asked about bytes not there yet
    std::optional<uint64_t> deferred_at;  // ... reading the record here, read again at the end
    uint64_t image_end = 0;           // 0: no image region
    bool have_history = false;
    std::optional<uint64_t> cut_at;   // a torn tail starts here
    std::optional<uint64_t> trailing_spill;
    struct SpillSeen {
        uint32_t part;
        uint64_t count;
        uint64_t checksum;
        uint64_t offset;
        uint64_t framed;
        const fb::Spill* body;
        bool named = false;
    };
    std::unordered_map<uint64_t, std::vector<SpillSeen>> spills;
    std::map<std::pair<uint32_t, uint16_t>, GraphRecord> graphs;
    std::map<uint32_t, uint64_t> image_rows;  // collection -> rows its state promised
    std::map<uint32_t, uint64_t> last_write;  // collection -> offset of the last record writing it
    // Landed blocks of the appended region, in order, for the feed's seed (engine.md §6.1 step 5):
    // the (offset, framed) of each record, a spilled block's spills first.
    struct LandedSeen {
        uint64_t first = 0;
        uint64_t last = 0;
        int64_t at_ms = 0;
        std::vector<std::pair<uint64_t, uint64_t>> pieces;
    };
    std::vector<LandedSeen> landed;

    Status corrupt(uint64_t at, const std::string& what) const {
        return Status::error(Code::corruption, what + " at offset " + std::to_string(at),
                             Detail{.offset = at});
    }

    Status check_header();
    Status run();
    // Replays the records wholly inside the first `available` bytes (all of them: `size`); one
    // that runs past them waits for more. A verdict that would depend on bytes not yet there (a
    // fault whose message says whether zeros follow) is deferred: the record is read again once
    // they are.
    Status advance(uint64_t available);
    Status record_at(uint64_t p, bool in_image);
    bool zero_from(uint64_t p) const;
    Status apply(format::Kind kind, uint64_t p, std::span<const std::byte> body, uint64_t framed);
    Status apply_ops(uint64_t p, const flatbuffers::Vector<fb::Op>* types,
                     const flatbuffers::Vector<flatbuffers::Offset<void>>* values,
                     uint64_t& writes);
    Status apply_put(uint64_t p, uint32_t collection, const flatbuffers::Vector<uint64_t>* ids,
                     const flatbuffers::Vector<uint32_t>* ends,
                     const flatbuffers::Vector<uint8_t>* bodies, bool image);
    Status finish_image(uint64_t p);
    void note_write(uint64_t p, fb::Op type, const void* op);
};

// Remembers where each collection was last written, so a graph record knows whether writes
// followed it (GraphRecord::written_after).
void ReplayState::note_write(uint64_t p, fb::Op type, const void* op) {
    uint32_t c = 0;
    switch (type) {
        case fb::Op::AlterCollection: c = static_cast<const fb::AlterCollection*>(op)->collection(); break;
        case fb::Op::DropCollection: c = static_cast<const fb::DropCollection*>(op)->collection(); break;
        case fb::Op::PutDocs: c = static_cast<const fb::PutDocs*>(op)->collection(); break;
        case fb::Op::DeleteDocs: c = static_cast<const fb::DeleteDocs*>(op)->collection(); break;
        default: return;
    }
    last_write[c] = p;
}

Status ReplayState::check_header() {
    if (size < format::kHeaderBytes) return corrupt(0, "file shorter than its 64-byte header");
    if (std::memcmp(buf, format::kMagic.data(), format::kMagic.size()) != 0) {
        return corrupt(0, "not a Fenec file (bad magic)");
    }
    const uint32_t version = format::load_u32(buf + format::kOffVersion);
    if (format::load_u64(buf + format::kOffHeaderCheck) != XXH3_64bits(buf, format::kOffHeaderCheck)) {
        return corrupt(0, "header checksum mismatch");
    }
    if (version > format::kFormatVersion) {
        return corrupt(0, "format version " + std::to_string(version) + " is newer than this build");
    }
    if (version != format::kFormatVersion) return corrupt(0, "format version " + std::to_string(version));
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

uint64_t body_max(format::Kind k) {
    switch (k) {
        case format::Kind::block: case format::Kind::spill: case format::Kind::landing:
        case format::Kind::image_docs:
            return limits::block_body_bytes_max;
        case format::Kind::checkpoint: case format::Kind::collection_state: case format::Kind::history:
            return limits::meta_body_bytes_max;
        case format::Kind::graph: return limits::record_body_bytes_max;
    }
    return 0;
}

template <class T>
bool verify_as(std::span<const std::byte> body) {
    flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(body.data()), body.size(),
                            limits::verifier_depth_max, limits::verifier_tables_max);
    return v.VerifyBuffer<T>(nullptr);
}

bool verify_body(format::Kind k, std::span<const std::byte> body) {
    switch (k) {
        case format::Kind::checkpoint: return verify_as<fb::Checkpoint>(body);
        case format::Kind::collection_state: return verify_as<fb::CollectionState>(body);
        case format::Kind::image_docs: return verify_as<fb::ImageDocs>(body);
        case format::Kind::block: return verify_as<fb::Block>(body);
        case format::Kind::spill: return verify_as<fb::Spill>(body);
        case format::Kind::landing: return verify_as<fb::Landing>(body);
        case format::Kind::history: return verify_as<fb::History>(body);
        case format::Kind::graph: return verify_as<fb::Graph>(body);
    }
    return false;
}

template <class T>
const T* root(std::span<const std::byte> body) {
    return flatbuffers::GetRoot<T>(body.data());
}

}  // namespace

// Reads and applies the record at p, or records a tear (cut_at) and stops.
Status ReplayState::record_at(uint64_t p, bool in_image) {
    const uint64_t left = size - p;
    // A fault in the appended region is a tear where the rest of the file is zeros.
    auto fault = [&](bool torn_if_appended, const std::string& what) -> Status {
        if (in_image || mode == Mode::verify_image) {
            if (p + format::kRecordHeadBytes > size || torn_if_appended) {
                if (in_image) {
                    return corrupt(p, "image cut short at " + std::to_string(size) + " of " +
                                          std::to_string(image_end) + " bytes");
                }
            }
            return corrupt(p, what);
        }
        if (torn_if_appended || zero_from(p)) {
            cut_at = p;
            return Status::ok();
        }
        return corrupt(p, what);
    };
    if (left < format::kRecordHeadBytes) return fault(true, "record head cut short");
    const std::byte* h = buf + p;
    const uint32_t length = format::load_u32(h);
    const uint8_t kind_byte = std::to_integer<uint8_t>(h[12]);
    const uint32_t hc = std::to_integer<uint32_t>(h[13]) | (std::to_integer<uint32_t>(h[14]) << 8) |
                        (std::to_integer<uint32_t>(h[15]) << 16);
    // A head that fails its check with only zeros after it was never followed by its body: a
    // zero-filled tail that began inside the head (torn), not a damaged record (engine.md §6.2).
    if (hc != format::head_check(length, kind_byte)) {
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
    if (length > body_max(kind)) return corrupt(p, std::string(format::kind_name(kind)) + " record too large");
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
        if (c->rows() != rows) return corrupt(p, "collection state promised " + std::to_string(rows) +
                                                     " rows, the image holds " +
                                                     std::to_string(c->rows()));
        if (!c->docs().empty() && c->docs().max_id() >= c->next_id()) {
            return corrupt(p, "next id is not above every id");
        }
    }
    return Status::ok();
}

Status ReplayState::apply(format::Kind kind, uint64_t p, std::span<const std::byte> body,
                          uint64_t framed) {
    const bool in_image = image_end != 0 && p < image_end;
    using K = format::Kind;
    const bool image_kind = kind == K::checkpoint || kind == K::collection_state || kind == K::image_docs;
    if (image_kind && !in_image && !(kind == K::checkpoint && p == format::kHeaderBytes)) {
        return corrupt(p, std::string(format::kind_name(kind)) + " record outside an image");
    }
    if (in_image && (kind == K::block || kind == K::spill || kind == K::landing)) {
        return corrupt(p, std::string(format::kind_name(kind)) + " record inside an image");
    }
    if (kind != K::spill) trailing_spill.reset();
    switch (kind) {
        case K::checkpoint: {
            const auto* c = root<fb::Checkpoint>(body);
            image_end = p + framed + c->image_bytes();
            if (image_end < p + framed) return corrupt(p, "image length overflows");
            db.seq_.store(c->seq());
            db.next_collection_ = std::max<uint32_t>(1, c->next_collection());
            if (image_end > size && mode == Mode::verify_image) {
                return corrupt(p, "image cut short at " + std::to_string(size) + " of " +
                                      std::to_string(image_end) + " bytes");
            }
            if (image_end > size) {
                return corrupt(p, "image cut short at " + std::to_string(size) + " of " +
                                      std::to_string(image_end) + " bytes");
            }
            if (image_end == p + framed) FENEC_RETURN_IF_ERROR(finish_image(p));
            return Status::ok();
        }
        case K::collection_state: {
            const auto* s = root<fb::CollectionState>(body);
            const std::string name = s->name() ? s->name()->str() : "";
            FENEC_ASSIGN_OR_RETURN(Schema schema, codec::from_fb(s->schema(), p));
            if (!is_identifier(name) || db.names_.count(name) || db.collections_.count(s->collection()) ||
                s->collection() == 0 || s->collection() >= db.next_collection_) {
                return corrupt(p, "collection state for `" + name + "` is not valid here");
            }
            if (!validate_schema(name, schema).is_ok()) return corrupt(p, "invalid schema for `" + name + "`");
            auto col = std::make_unique<Collection>(CollectionId{s->collection()}, name, std::move(schema));
            col->set_next_id(std::max<uint64_t>(1, s->next_id()));
            db.names_[name] = s->collection();
            db.collections_[s->collection()] = std::move(col);
            image_rows[s->collection()] = s->rows();
            return Status::ok();
        }
        case K::image_docs: {
            const auto* d = root<fb::ImageDocs>(body);
            return apply_put(p, d->collection(), d->ids(), d->ends(), d->bodies(), true);
        }
        case K::history: {
            const auto* h = root<fb::History>(body);
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
        case K::graph: {
            const auto* g = root<fb::Graph>(body);
            graphs[{g->collection(), g->slot()}] =
                GraphRecord{CollectionId{g->collection()}, g->slot(), p, body};
            uint64_t& last = db.graph_framed_[{g->collection(), g->slot()}];
            db.graph_dead_bytes_ += last;  // the record this one supersedes
            last = framed;
            return Status::ok();
        }
        case K::block: {
            if (!have_history) return corrupt(p, "a block before any history record");
            const auto* b = root<fb::Block>(body);
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
            if (writes != b->count() || writes == 0) return corrupt(p, "block count does not match its writes");
            db.seq_.store(b->first_seq() + b->count() - 1);
            landed.push_back({b->first_seq(), db.seq_.load(), b->at_ms(), {{p, framed}}});
            return Status::ok();
        }
        case K::spill: {
            if (!have_history) return corrupt(p, "a spill before any history record");
            const auto* s = root<fb::Spill>(body);
            spills[s->token()].push_back(SpillSeen{s->part(), s->count(), format::load_u64(buf + p + 4),
                                                   p, framed, s, false});
            if (!trailing_spill) trailing_spill = p;
            return Status::ok();
        }
        case K::landing: {
            if (!have_history) return corrupt(p, "a landing before any history record");
            const auto* l = root<fb::Landing>(body);
            if (l->first_seq() != db.seq_.load() + 1) {
                return corrupt(p, "landing first_seq does not follow the file's seq");
            }
            if (l->count() > std::numeric_limits<uint64_t>::max() - db.seq_.load()) {
                return corrupt(p, "landing would carry seq past 2^64-1");
            }
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
            if (writes != l->count() || writes == 0) return corrupt(p, "landing count does not match its writes");
            db.seq_.store(l->first_seq() + l->count() - 1);
            LandedSeen seen{l->first_seq(), db.seq_.load(), l->at_ms(), {}};
            for (const SpillSeen* sp : parts) seen.pieces.emplace_back(sp->offset, sp->framed);
            seen.pieces.emplace_back(p, framed);
            landed.push_back(std::move(seen));
            return Status::ok();
        }
    }
    return corrupt(p, "unknown record kind");
}

Status ReplayState::apply_put(uint64_t p, uint32_t collection, const flatbuffers::Vector<uint64_t>* ids,
                              const flatbuffers::Vector<uint32_t>* ends,
                              const flatbuffers::Vector<uint8_t>* bodies, bool image) {
    Collection* c = db.collection_locked(CollectionId{collection});
    if (!c) return corrupt(p, "documents for unknown collection " + std::to_string(collection));
    const uint32_t n = ids ? ids->size() : 0;
    if (!ends || ends->size() != n || (n > 0 && !bodies)) return corrupt(p, "ids and ends differ in count");
    const uint64_t body_base = static_cast<uint64_t>(
        reinterpret_cast<const std::byte*>(bodies ? bodies->data() : nullptr) - buf);
    uint32_t start = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const uint64_t id = ids->Get(i);
        const uint32_t end = ends->Get(i);
        if (end <= start || end > bodies->size()) return corrupt(p, "document ends out of order");
        if (id < 1 || id > limits::doc_id_max) return corrupt(p, "document id out of range");
        const std::span<const std::byte> body(reinterpret_cast<const std::byte*>(bodies->data()) + start,
                                              end - start);
        FENEC_RETURN_IF_ERROR(validate_body(body, bodies ? body_base + start : p));
        const std::optional<DocRef> prev =
            c->put_ref(DocId{id}, DocRef{body.data(), static_cast<uint32_t>(body.size())});
        if (prev) {
            if (image) return corrupt(p, "an image holds id " + std::to_string(id) + " twice");
            db.dead_bytes_ += prev->size;
        }
        if (!image) c->set_next_id(std::max(c->next_id(), id + 1));
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
                if (!is_identifier(name) || db.names_.count(name) || c->collection() < db.next_collection_ ||
                    c->collection() == std::numeric_limits<uint32_t>::max() ||
                    !validate_schema(name, schema).is_ok()) {
                    return corrupt(p, "create collection `" + name + "` is not valid here");
                }
                db.collections_[c->collection()] =
                    std::make_unique<Collection>(CollectionId{c->collection()}, name, std::move(schema));
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
                FENEC_RETURN_IF_ERROR(apply_put(p, d->collection(), d->ids(), d->ends(), d->bodies(), false));
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
                        ++writes;
                    }
                }
                break;
            }
            default: return corrupt(p, "unknown op type " + std::to_string(static_cast<unsigned>(type)));
        }
    }
    return Status::ok();
}

namespace codec {

Result<AlterSpec> alter_spec_of(const fb::AlterCollection* a, const Schema& before, uint64_t p) {
    auto corrupt = [&](const std::string& what) {
        return Status::error(Code::corruption, what + " at offset " + std::to_string(p),
                             Detail{.offset = p});
    };
    AlterSpec spec;
    const unsigned k = static_cast<unsigned>(a->kind());
    if (k > 3) return corrupt("unknown AlterKind " + std::to_string(k));
    spec.kind = static_cast<AlterKind>(k);
    if (spec.kind == AlterKind::add_field) {
        FENEC_ASSIGN_OR_RETURN(spec.field_desc, from_fb(a->field(), p));
    } else {
        if (a->slot() >= before.fields.size() || before.fields[a->slot()].dropped) {
            return corrupt("alter names a slot that holds no field");
        }
        spec.field = before.fields[a->slot()].name;
    }
    if (a->new_name()) spec.new_name = a->new_name()->str();
    if (a->keys()) for (const auto* key : *a->keys()) spec.keys.push_back(key->str());
    FENEC_ASSIGN_OR_RETURN(spec.index, from_fb(a->index(), p));
    return spec;
}

}  // namespace codec

// ---- open

Result<std::unique_ptr<Database>> Database::open(std::string_view path, const OpenOptions& options) {
    std::unique_ptr<Database> db(new Database(std::string(path), options));
    Fs& fs = *db->fs_;
    FENEC_ASSIGN_OR_RETURN(std::unique_ptr<File> file,
                           fs.open(path, options.read_only ? OpenMode::read_only : OpenMode::read_write));
    FENEC_RETURN_IF_ERROR(fs.lock(*file));
    FENEC_ASSIGN_OR_RETURN(uint64_t size, file->size());
    auto storage = std::make_shared<std::vector<uint64_t>>((size + 7) / 8);
    auto* buf = reinterpret_cast<std::byte*>(storage->data());
    if (size > 0) FENEC_RETURN_IF_ERROR(file->read_at(0, {buf, size}));
    db->peak_buffer_bytes_ = size;
    ReplayState replay{*db, buf, size, ReplayState::Mode::open};
    replay.owner = std::shared_ptr<const std::byte[]>(storage, buf);
    FENEC_RETURN_IF_ERROR(replay.run());
    FENEC_RETURN_IF_ERROR(db->finish_open(replay, std::move(file), size));
    return db;
}

Status Database::finish_open(ReplayState& replay, std::unique_ptr<File> file, uint64_t size) {
    FENEC_RETURN_IF_ERROR(finish_replay(replay, size));
    return adopt_file(replay, std::move(file), size);
}

namespace {
// A read buffer is kept as the documents' store (Collection::adopt) only when at least three
// quarters of it are live bodies: the dead quarter (superseded versions, graph records, the
// header) is then held until the next rewrite, at most a third more than the copy would hold,
// the share file_image() lets travel. Below it the live bodies are copied out and the buffer freed.
constexpr uint64_t adopt_live_share_num = 3;
constexpr uint64_t adopt_live_share_den = 4;
}  // namespace

Status Database::finish_replay(ReplayState& replay, uint64_t size) {
    if (history_.replica && options_.role == Role::primary && !options_.promote) {
        return Status::error(Code::invalid_argument, "the file is a replica's; follow or promote it");
    }
    if (options_.hook) {
        OpenReport report;
        for (auto& [key, g] : replay.graphs) {
            auto w = replay.last_write.find(g.collection.v);
            g.written_after = w != replay.last_write.end() && w->second > g.offset;
            if (!g.written_after) graph_seq_[{g.collection.v, g.slot}] = seq_.load();
            report.graphs.push_back(g);
        }
        options_.hook->on_open(report);
    }
    // The live documents copied out of the read buffer, which is then freed; or, when the
    // buffer is the database's to keep and mostly live, the buffer kept as their store and
    // nothing copied (a 69 MB image: 55 MB of bodies not copied, ~20 ms of page faults and
    // memcpy on the install's path).
    uint64_t live = 0;
    for (const auto& [id, c] : collections_) live += c->live_bytes();
    const bool adopt =
        replay.owner && live * adopt_live_share_den >= size * adopt_live_share_num;
    for (auto& [id, c] : collections_) {
        if (adopt) {
            c->adopt(replay.owner);
        } else {
            c->repack();
        }
    }
    if (adopt) {
        live = 0;  // the buffer itself is the peak
        file_memory_ = replay.owner;
        file_memory_bytes_ = replay.cut_at.value_or(size);  // a torn tail is cut from the file
    }
    if (options_.hook) {
        for (const auto& [id, c] : collections_) options_.hook->on_schema(c->id(), &c->schema(), c.get());
        options_.hook->on_opened();
    }
    peak_buffer_bytes_ = size + live;
    return Status::ok();
}

Status Database::adopt_file(ReplayState& replay, std::unique_ptr<File> file, uint64_t size) {
    uint64_t end = replay.cut_at.value_or(size);
    if (replay.cut_at && !read_only_) {
        FENEC_RETURN_IF_ERROR(file->truncate(end));
    }
    file_ = std::move(file);
    file_bytes_ = read_only_ ? size : end;
    if (!read_only_) {
        FENEC_RETURN_IF_ERROR(file_->sync());
        Status gone = fs_->remove(path_ + ".rewrite");
        gone.ignore();  // usually there is none
    }
    durable_seq_ = seq_.load();
    seed_feed(replay);
    if (history_.replica && options_.promote) {
        FENEC_RETURN_IF_ERROR(promote().status());
    }
    if (options_.flusher && !read_only_) options_.flusher->add(this);
    return Status::ok();
}

// The feed starts with the last feed_bytes of landed blocks the file holds, every one durable
// now (engine.md §6.1 step 5), so a follower outlives a primary restart without an image.
void Database::seed_feed(const ReplayState& replay) {
    feed_->reset(seq(), Seq{durable_seq_}, history_.forks);
    size_t from = replay.landed.size();
    uint64_t bytes = 0;
    while (from > 0) {
        uint64_t n = 0;
        for (const auto& [off, framed] : replay.landed[from - 1].pieces) n += framed;
        if (bytes + n > options_.feed_bytes && from != replay.landed.size()) break;
        bytes += n;
        --from;
    }
    for (size_t i = from; i < replay.landed.size(); ++i) {
        const auto& seen = replay.landed[i];
        std::vector<std::byte> records;
        for (const auto& [off, framed] : seen.pieces) {
            records.insert(records.end(), replay.buf + off, replay.buf + off + framed);
        }
        feed_->push(Seq{seen.first}, Seq{seen.last}, seen.at_ms, std::move(records));
    }
}

Result<ImageInfo> Database::verify_image(Fs& fs, std::string_view path) {
    FENEC_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs.open(path, OpenMode::read_only));
    FENEC_ASSIGN_OR_RETURN(uint64_t size, file->size());
    std::vector<uint64_t> storage((size + 7) / 8);
    auto* buf = reinterpret_cast<std::byte*>(storage.data());
    if (size > 0) FENEC_RETURN_IF_ERROR(file->read_at(0, {buf, size}));
    OpenOptions opts;
    opts.fs = &fs;
    opts.read_only = true;
    std::unique_ptr<Database> db(new Database(std::string(path), opts));
    ReplayState replay{*db, buf, size, ReplayState::Mode::verify_image};
    FENEC_RETURN_IF_ERROR(replay.run());
    ImageInfo info{db->seq(), db->history_, db->lineage_, db->created_ms_, size};
    db->collections_.clear();  // their refs point into `storage`
    return info;
}

ImageInstall::ImageInstall(std::span<const std::byte> image, std::string_view target,
                           const OpenOptions& options, std::shared_ptr<const std::byte[]> owner)
    : image_(image), db_(new Database(std::string(target), options)) {
    if (reinterpret_cast<uintptr_t>(image.data()) % alignof(uint64_t) != 0) {
        failed_ = Status::error(Code::invalid_argument,
                                "an image installed as it arrives must "
                                "be 8-byte aligned");
        return;
    }
    replay_ = std::make_unique<ReplayState>(*db_, image.data(), image.size(),
                                            ReplayState::Mode::verify_image);
    if (owner && owner.get() == image.data()) replay_->owner = std::move(owner);
}

ImageInstall::~ImageInstall() {
    if (db_) db_->close(CloseMode::plain).ignore();  // never installed: as install_open's fail
}

Status ImageInstall::feed(uint64_t available) {
    if (!failed_.is_ok()) return failed_;
    failed_ = replay_->advance(std::min<uint64_t>(available, image_.size()));
    return failed_;
}

Result<std::unique_ptr<Database>> Database::install_open(
    std::span<const std::byte> image, std::string_view incoming, std::string_view target,
    InstallMode mode, const OpenOptions& options,
    const std::function<Status(const ImageInfo&)>& check, ImageInfo& info,
    std::shared_ptr<const std::byte[]> owner, std::unique_ptr<ImageInstall> begun) {
    if (begun && (begun->image_.data() != image.data() || begun->image_.size() != image.size())) {
        return Status::error(Code::invalid_argument, "the install begun is another image's");
    }
    std::unique_ptr<Database> db =
        begun ? std::move(begun->db_)
              : std::unique_ptr<Database>(new Database(std::string(target), options));
    Fs& fs = *db->fs_;
    auto fail = [&](Status st) -> Status {
        if (db) {
            db->close(CloseMode::plain).ignore();  // its descriptor is incoming's
            db.reset();
        }
        fs.remove(incoming).ignore();
        return st;
    };
    Result<std::unique_ptr<File>> opened = fs.open(incoming, OpenMode::create_truncate);
    if (!opened.is_ok()) return opened.status();
    std::unique_ptr<File> file = std::move(*opened);
    if (Status st = fs.lock(*file); !st.is_ok()) return fail(st);
    // The file is written and fsynced on a thread of its own while the image is verified and
    // replayed from memory here: the disk's time and the CPU's overlap. Written past the page
    // cache where it can be (append_direct): the bytes are in memory already and the database
    // keeps them or copies out of them, never reading the file back, so a cached copy would be
    // CPU and memory spent for nothing. Nothing else touches `file` until the thread is joined,
    // and the rename waits for both, so the tenant is served only from a file that is durable.
    Status wrote;
    std::jthread writer([&] {  // joined on every way out, before `file` goes
        wrote = file->append_direct(image);
        if (wrote.is_ok()) wrote = file->sync();
    });
    // Records are read in place, as open() reads them from its buffer: 8-byte aligned. A body
    // that is not (any heap allocation is) is copied once.
    std::vector<uint64_t> aligned;
    const std::byte* buf = image.data();
    if (reinterpret_cast<uintptr_t>(buf) % alignof(uint64_t) != 0) {
        aligned.resize((image.size() + 7) / 8);
        std::memcpy(aligned.data(), image.data(), image.size());
        buf = reinterpret_cast<const std::byte*>(aligned.data());
    }
    if (begun && !begun->replay_) return fail(begun->failed_);
    std::unique_ptr<ReplayState> fresh;
    if (!begun) {
        fresh =
            std::make_unique<ReplayState>(*db, buf, image.size(), ReplayState::Mode::verify_image);
        if (buf == image.data() && owner && owner.get() == image.data()) {
            fresh->owner = std::move(owner);
        }
    }
    ReplayState& replay = begun ? *begun->replay_ : *fresh;
    // Begun: what arrived was replayed as it came (a failure then is kept), the rest goes here.
    Status replayed = begun ? begun->failed_ : Status::ok();
    if (replayed.is_ok()) replayed = replay.run();
    if (replayed.is_ok()) {
        info = ImageInfo{db->seq(), db->history_, db->lineage_, db->created_ms_, image.size()};
        if (check) replayed = check(info);
    }
    // The live documents are copied out of `image` (repack) or, `owner` given, kept in it
    // (adopt), the indexes built and the graphs loaded from their records, beside the writer.
    if (replayed.is_ok()) replayed = db->finish_replay(replay, image.size());
    writer.join();
    if (!replayed.is_ok()) return fail(replayed);  // a damaged image says so before a bad disk
    if (!wrote.is_ok()) return fail(wrote);
    if (Status st = db->adopt_file(replay, std::move(file), image.size()); !st.is_ok()) {
        return fail(st);
    }
    if (Status st = fs.rename(incoming, target, mode == InstallMode::replace); !st.is_ok()) {
        return fail(st);
    }
    if (Status st = fs.sync_dir(dir_of(target)); !st.is_ok()) {
        // Renamed but the directory's fsync failed: the file is in place, its entry perhaps not
        // durable. Refused, as install_image refuses it; the caller is told and serves nothing.
        db->close(CloseMode::plain).ignore();
        return st;
    }
    return db;
}

Status Database::install_image(Fs& fs, std::string_view incoming, std::string_view target,
                               InstallMode mode) {
    auto fail = [&](Status st) {
        fs.remove(incoming).ignore();
        return st;
    };
    {
        Result<std::unique_ptr<File>> f = fs.open(incoming, OpenMode::read_write);
        if (!f.is_ok()) return fail(f.status());
        if (Status st = (*f)->sync(); !st.is_ok()) return fail(st);
    }
    Result<ImageInfo> info = verify_image(fs, incoming);
    if (!info.is_ok()) return fail(info.status());
    if (Status st = fs.rename(incoming, target, mode == InstallMode::replace); !st.is_ok()) {
        return fail(st);
    }
    return fs.sync_dir(dir_of(target));
}

}  // namespace fenec::engine
