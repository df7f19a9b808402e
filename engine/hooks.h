// engine/hooks.h: the in-process interfaces through which index/ and the server follow the
// engine. IndexHook is told of every write before it is kept and may refuse it (a unique value
// taken); ChangeListener is told once per landed block, in seq order, under the writer lock, so
// it must only enqueue.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "engine/ids.h"
#include "engine/schema.h"
#include "engine/status.h"
#include "engine/value.h"

namespace fenec::engine {

struct WriteEvent {
    CollectionId collection;
    DocId id;
    const Schema* schema = nullptr;
    std::optional<DocView> before;  // the visible version it replaces or deletes
    std::optional<DocView> after;   // nullopt for a delete
};

// A document written after a graph record, as the record saw it (engine.md §6.3's change set).
struct GraphChange {
    DocId id;
    // Its body at the graph, in the open's read buffer (valid as GraphRecord::body is); nullopt:
    // the document did not exist then.
    std::optional<std::span<const std::byte>> at_graph;
    // Where its last write after the graph came among the set's: applied in this order, the
    // writes build the graph as the node that wrote them did (an HNSW graph depends on it).
    uint64_t last = 0;
};

// What a graph record held, handed to index/ as a tenant opens (engine.md §6.3).
struct GraphRecord {
    CollectionId collection;
    uint16_t slot = 0;
    uint64_t offset = 0;                 // of the record in the file
    // In the open's read buffer: valid during on_open and the open's on_schema calls that follow
    // it, until on_opened (a hook may keep the span that long instead of copying the record).
    std::span<const std::byte> body;
    // A write to the collection landed after the graph: its nodes may not match the documents
    // (index/ then applies the change set when it is known, else rebuilds).
    bool written_after = false;
    // With written_after, whether `changes` tells every document written since: false when the
    // collection's schema changed after the graph.
    bool changes_known = false;
    // Every document of the collection written after the graph, ascending by id, each once with
    // its version at the graph (the first write after it saved that).
    std::vector<GraphChange> changes;
};
struct OpenReport {
    std::vector<GraphRecord> graphs;     // the last one per (collection, slot)
};

// The live rows of one collection, for a hook building an index; valid during the call only.
class DocSource {
public:
    virtual ~DocSource() = default;
    virtual void each(const std::function<bool(DocId, DocView)>& visit) const = 0;
};

class IndexHook {
public:
    virtual ~IndexHook() = default;
    virtual Status on_write(const WriteEvent&) = 0;  // live blocks; may refuse (duplicate)
    virtual void on_undo(const WriteEvent&) = 0;     // the write is being taken back
    // A collection created, altered, dropped (null schema), or loaded by an open; `docs` are its
    // rows as they stand (null for a drop). Called under the writer lock.
    virtual void on_schema(CollectionId, const Schema*, const DocSource* docs) = 0;
    virtual void on_open(OpenReport&) = 0;
    // The open's on_schema calls are done: the OpenReport's bodies are no longer valid.
    virtual void on_opened() {}
    // The field's Graph record (format.fbs) as of `at`, carrying `durable_end` as its own: the
    // engine's stamp (what a finished sync covered), by which the open tells a hole from damage
    // (file-format.md §6), or format::kNoDurableStamp (not stored) for a graph an image holds.
    // The body is a finished Graph buffer, its root offset at byte 0; one appended to the file
    // must carry the field, which the engine verifies and sets again as the record lands,
    // refusing a body without it.
    virtual Result<std::vector<std::byte>> encode_graph(CollectionId, uint16_t slot, Seq at,
                                                        uint64_t durable_end) = 0;
    // compact() first rebuilds every graph holding retired nodes, so the image it writes holds
    // none (engine.md §7). Called under the writer lock. Hooks keeping no graph keep the default.
    virtual bool has_retired(CollectionId, uint16_t /*slot*/) const { return false; }
    virtual Status rebuild_graph(CollectionId, uint16_t /*slot*/) { return Status::ok(); }
    // The bytes this hook's structures hold on the heap (node-http.md §11: a tenant's memory is
    // what it really holds, indexes and graphs with its documents). Called under the database's
    // lock, shared or the writer's, so it reads what the writer last left.
    virtual uint64_t memory_bytes() const { return 0; }
};

struct CollectionChange {
    CollectionId collection;
    std::vector<DocId> put;
    std::vector<DocId> deleted;
    bool schema_changed = false;
};

struct BlockSummary {
    Seq first;
    Seq last;
    int64_t at_ms = 0;
    bool internal = false;
    std::vector<CollectionChange> changes;
    uint64_t memory_bytes = 0;  // the database's Usage::memory_bytes once the block is applied
};

class ChangeListener {
public:
    virtual ~ChangeListener() = default;
    virtual void on_block(const BlockSummary&) = 0;
    virtual void on_durable(Seq) = 0;
};

}  // namespace fenec::engine
