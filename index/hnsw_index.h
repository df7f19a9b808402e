// index/hnsw_index.h: the tenant's vector indexes (`@hnsw`), kept through the engine's IndexHook,
// and `near` ranking (fenecql.md §9). hnswlib is the graph library; it is included only by
// hnsw_index.cc, and every exception it throws is caught there and turned into a Status (or, in
// hook calls that cannot fail, into a graph marked unusable, after which `near` scores exactly).
//
// Per (collection, slot) of every live `@hnsw` field this keeps:
//   - every node's float32 vector (f16 fields converted), the live ones reachable by document id:
//     exact scoring and re-scoring read these, never the graph's copy (which is normalised under
//     cosine);
//   - an HNSW graph whose node labels are node numbers; node -> document id, 0 for a retired node.
// A field keeps its graph once it holds more than 2 x m x ef_search live vectors; below that a
// `near` at the field's ef_search scores every row exactly anyway, and the field costs what its
// vectors do (an hnswlib graph holds 2.6 MB before its first node).
// Invariant (I-HNSW): every document holding a vector has exactly one live node, holding that
// vector bit for bit; a retired node never appears in an answer but keeps routing searches with
// its old vector until the graph is rebuilt. A graph, when kept, holds every node, labelled by
// its number.
//
// Persistence (engine.md §6.3): encode_graph writes the Graph table of engine/format.fbs; on open
// the last record per field is validated against the documents and restored into hnswlib's own
// buffers, or discarded and the graph rebuilt. A rebuild costs time, never documents or an open.
//
// Thread-safety: the engine calls the hook under its writer lock; `near`, `has` and the stats are
// read under a ReadView (shared lock), and `near` is safe from many readers at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/hooks.h"

namespace fenec::index {

struct VectorIndexStats {
    uint64_t restored = 0;     // graphs taken from a graph record at open
    uint64_t caught_up = 0;    // of them, graphs the writes after their record were applied to
    uint64_t rebuilt = 0;      // graphs built from the documents
    uint64_t graphs_rebuilt = 0;  // of them, those that hold a graph (built insert by insert)
    uint64_t kept = 0;         // schema calls that found the graph already matching the documents
    uint64_t discarded = 0;    // graph records found unfit (or written before a write): rebuilt
    std::string last_discard;  // why the last record was discarded, for tests and logs
};

struct VectorFieldStats {
    uint64_t live = 0;   // documents holding a vector
    uint64_t nodes = 0;  // graph nodes, retired ones included
    bool usable = true;  // false: the graph failed; `near` scores exactly until a rebuild
    bool graph = false;  // a graph is kept: past 2 x m x ef_search live vectors, or restored
};

class VectorIndexes final : public engine::IndexHook {
  public:
    // (document id, score), best first; equal scores by lower id.
    using Hit = std::pair<uint64_t, double>;

    VectorIndexes();
    ~VectorIndexes() override;
    VectorIndexes(const VectorIndexes&) = delete;
    VectorIndexes& operator=(const VectorIndexes&) = delete;

    // engine::IndexHook. Vector indexes never refuse a write.
    engine::Status on_write(const engine::WriteEvent& ev) override;
    void on_undo(const engine::WriteEvent& ev) override;
    void on_schema(engine::CollectionId c, const engine::Schema* schema,
                   const engine::DocSource* docs) override;
    // Forgets every graph (a tenant is being opened) and keeps each graph record, for on_schema to
    // restore, with the writes that followed it (engine.md §6.3: applied to the restored graph; a
    // record followed by writes it cannot tell is discarded and the graph rebuilt): the record's
    // bytes in the open's buffer, not a copy (valid until on_opened, which forgets those no
    // on_schema took).
    void on_open(engine::OpenReport& report) override;
    void on_opened() override;
    // The Graph table (format.fbs) of the field's graph at `at`; not_found when this object keeps
    // no graph for (c, slot); invalid_argument when the graph is unusable or does not fit the
    // table (the engine then writes none and the next open rebuilds).
    // Compaction (engine.md §7): whether the field's graph holds retired nodes, and a rebuild
    // from its live vectors that drops them.
    bool has_retired(engine::CollectionId c, uint16_t slot) const override;
    engine::Status rebuild_graph(engine::CollectionId c, uint16_t slot) override;
    engine::Result<std::vector<std::byte>> encode_graph(engine::CollectionId c, uint16_t slot,
                                                        engine::Seq at,
                                                        uint64_t durable_end) override;
    uint64_t memory_bytes() const override;

    // The k best rows for `query` under the field's metric (fenecql.md §9 rules 1-4). `ef` 0
    // means the field's ef_search. `filter`: ascending ids of the rows passing `where` (null:
    // every row); ids holding no vector are ignored. Answers exactly min(k, |F|) rows, each scored
    // in double from its float32 components: cosine similarity and dot product highest first,
    // Euclidean distance lowest first, equal scores by lower id. invalid_argument (naming the
    // field) for a wrong dimension, a non-finite component, a zero query under cosine, or a
    // field without `@hnsw`.
    engine::Result<std::vector<Hit>> near(engine::CollectionId c, uint16_t slot,
                                          std::span<const float> query, size_t k, size_t ef,
                                          const std::vector<uint64_t>* filter) const;

    bool has(engine::CollectionId c, uint16_t slot) const;
    const VectorIndexStats& stats() const { return stats_; }
    VectorFieldStats field_stats(engine::CollectionId c, uint16_t slot) const;

    class Field;  // one field's vectors and graph (hnsw_index.cc)

  private:
    using Key = std::pair<uint32_t, uint16_t>;
    std::map<Key, std::unique_ptr<Field>> fields_;
    // Graph records from on_open, until on_schema takes them or on_opened forgets them.
    struct Stashed {
        std::span<const std::byte> body;
        std::vector<engine::GraphChange> changes;  // written after it, ascending by id
    };
    std::map<Key, Stashed> stashed_;
    VectorIndexStats stats_;
};

}  // namespace fenec::index
