// engine/replay.h: ReplayState, one pass over a tenant file's records (engine.md §6), shared by
// the files that run it: replay.cc (the pass), open.cc (Database::open and what follows a pass)
// and install.cc (an image checked, replayed and installed). Not part of the API.
//
// Invariant: a pass applies each record with the same in-memory mutations the write path makes,
// minus undo, and reads the buffer in place: documents point into `buf` until finish_replay
// copies them out or adopts the buffer (`owner`).
#pragma once

#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/database_internal.h"

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
    uint64_t image_end = 0;               // 0: no image region
    bool have_history = false;
    bool stamps_seen = false;  // a record read carries a durable_end: its writer stamped them
    // The last stamped record read was stamped below its offset: records before it were not
    // all durable when it was appended (a crash's file, or an image of a file not sealed), so a
    // clean close seals the file (Database::seal).
    bool tail_uncovered = false;
    std::optional<uint64_t> cut_at;  // a torn tail starts here
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
    // Per graph in `graphs`, the documents of its collection written after it, each with its
    // version before the first such write (nullopt: it did not exist), pointing into `buf`; not
    // `known` once the collection's schema changed after the graph (engine.md §6.3).
    struct Change {
        std::optional<DocRef> at_graph;
        uint64_t last = 0;  // the order of its last write (GraphChange::last)
    };
    struct ChangeSet {
        bool known = true;
        std::unordered_map<uint64_t, Change> first;
    };
    std::map<std::pair<uint32_t, uint16_t>, ChangeSet> graph_changes;
    uint64_t changes_noted = 0;               // the writes note_change has seen: their order
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
    // Database::survey: every record read and applied, in order; null: not kept.
    std::vector<RecordSpan>* records_seen = nullptr;

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
    // Whether a fault at p is a hole that an unfinished flush left unwritten (file-format.md §6,
    // "A hole before later records"): the file's writer stamped its records (a record before p,
    // or a whole one after p, carries a durable_end); the gap from p to the next whole record
    // holds a sector that reads zero from p on; and every whole record after p carries a
    // durable_end at or below p, or is a Graph without one (derived data, or written before
    // graphs carried stamps), so nothing after p was appended once p was on disk. False for a
    // replica's file (its records are its primary's), and when a record after p has no stamp or
    // a later one: p was durable, so the fault is damage.
    bool unsynced_from(uint64_t p) const;
    // The record at p, of `kind`, checked against the records before it and applied.
    Status apply(format::Kind kind, uint64_t p, std::span<const std::byte> body, uint64_t framed);
    // apply()'s cases, one a kind (replay.cc says what each checks).
    Status apply_checkpoint(uint64_t p, const fb::Checkpoint* c, uint64_t framed);
    Status apply_collection_state(uint64_t p, const fb::CollectionState* s);
    Status apply_history(uint64_t p, const fb::History* h);
    void note_graph(uint64_t p, const fb::Graph* g, std::span<const std::byte> body,
                    uint64_t framed);
    Status apply_block(uint64_t p, const fb::Block* b, uint64_t framed);
    Status note_spill(uint64_t p, const fb::Spill* s, uint64_t framed);
    Status apply_landing(uint64_t p, const fb::Landing* l, uint64_t framed);
    Result<std::vector<SpillSeen*>> named_spills(uint64_t p, const fb::Landing* l);
    Status apply_ops(uint64_t p, const flatbuffers::Vector<fb::Op>* types,
                     const flatbuffers::Vector<flatbuffers::Offset<void>>* values,
                     uint64_t& writes);
    Status apply_put(uint64_t p, uint32_t collection, const flatbuffers::Vector<uint64_t>* ids,
                     const flatbuffers::Vector<uint32_t>* ends,
                     const flatbuffers::Vector<uint8_t>* bodies, bool image);
    Status finish_image(uint64_t p);
    void note_write(uint64_t p, fb::Op type, const void* op);
    // Document `id` of `collection` written (not by an image), `prev` its version before: kept in
    // the change set of each graph of the collection that has none for it yet, and the write's
    // order as the document's last.
    void note_change(uint32_t collection, uint64_t id, const std::optional<DocRef>& prev);
    // The change set of the graph at `key`, sorted by id, for GraphRecord::changes.
    bool take_changes(std::pair<uint32_t, uint16_t> key, std::vector<GraphChange>& out);
};

}  // namespace fenec::engine
