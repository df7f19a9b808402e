// index/hnsw_record.h: a field's HNSW graph as a graph record holds it (the Graph table of
// engine/format.fbs), and the checks a record passes before it is restored (engine.md §6.3).
// Nothing here touches hnswlib: hnsw_index.cc alone includes it, writes a record from a graph
// (encode_graph) and fills a graph from a record check_record passed (restore).
//
// Graph record (format.fbs `Graph`, version kGraphVersion):
//   node_docs[i]   document id of node i, 0 for a retired node
//   levels[i]      the node's top level (hnswlib element_levels_)
//   level0         per node 1 + 2m words: link count, then 2m slots (unused slots 0)
//   upper          per node, for levels 1..levels[i]: link count, then exactly that many links
//   upper_ends[i]  index into `upper` just past node i's lists
//   retired_vectors  dim float32 per retired node, node order, as the document held them
//   live_digest    XXH3-64 (seed 0) over the live nodes' float32 components (host order, i.e.
//                  little-endian), node order, as the documents hold them
// Live vectors are not stored: they come from the documents at open, which is why every live
// node's document must hold a vector and the digest must match.
//
// Invariant: a record check_record passes is one a restore can fill a graph from without reading
// out of bounds: every array has the length the node count gives it, every link names a node,
// no list holds more links than m allows, and every node has one vector source.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/format_generated.h"
#include "engine/hooks.h"

namespace fenec::index::hnsw {

inline constexpr uint16_t kGraphVersion = 1;

// A node's vector source (FitRecord::source) with this bit set: the record's retired vector of
// that number, not a document's row.
inline constexpr uint32_t kRetiredBit = uint32_t{1} << 31;

// A refusal of a record: corruption, with why (the index keeps the last, VectorIndexStats).
engine::Status unfit(const std::string& why);

template <class T>
size_t size_of(const flatbuffers::Vector<T>* v) {
    return v ? v->size() : 0;
}

// A Graph table that verified as FlatBuffers and fits the field, with the sizes every check and
// fill of it reads.
struct GraphTable {
    const format::Graph* g = nullptr;
    size_t n = 0;           // nodes
    size_t m = 0;           // the field's m: up to 2m links a node at level 0, m above
    size_t stride0 = 0;     // words a node in `level0`: its link count, then 2m slots
    size_t upper_size = 0;  // words in `upper`
    int max_level = 0;
};

// A record fit to restore, and what the restore needs of the checks.
struct FitRecord {
    GraphTable table;
    size_t retired = 0;            // retired nodes
    std::vector<uint32_t> source;  // per node: a row of `row_ids`, or kRetiredBit | k
};

// The record `body`, checked against the field (collection `c`, `slot`, `dim`, `params`) and the
// documents: `row_ids`, ascending, the rows holding a vector. unfit(why) when it is not a Graph
// table, was written for another field or other parameters, is inconsistent in itself, or does
// not have exactly one live node per row. The digest is the restore's to check: it reads the
// vectors.
engine::Result<FitRecord> check_record(std::span<const std::byte> body, engine::CollectionId c,
                                       uint16_t slot, uint32_t dim,
                                       const engine::HnswParams& params,
                                       std::span<const uint64_t> row_ids);

// Runs `part(lo, hi)` over [0, n) cut into up to one part per CPU (at most four, each of 16,384
// nodes or more), the first on this thread and the rest on threads of their own; true when every
// part returned true. One part (and no thread) where n is small, there is one CPU, or a thread
// cannot be started. A restore checks and fills nodes this way: each node's work is its own.
bool in_parts(size_t n, const std::function<bool(size_t lo, size_t hi)>& part);

}  // namespace fenec::index::hnsw
