// index/hnsw_index.cc: the one file that includes hnswlib (Debian's 0.6.2). Every call into it
// sits inside a try block here; an exception never leaves this file.
//
// How we drive hnswlib:
//   - a node's label is its node number, so a retired node (markDelete) is never confused with
//     the new node a changed vector gets; node -> document id lives in Field::node_docs;
//   - ef_ is set to 1 once and never changed: searchKnn(q, c) then searches at ef = max(1, c) = c
//     (fenecql.md §9 rule 2 asks for c rows at ef = c), and concurrent readers never write the
//     graph (searchKnn is const; its visited-list pool has its own lock);
//   - cosine stores unit vectors and uses the inner-product space (distance 1 - cos); l2 uses the
//     squared-L2 space; dot the inner-product space. Answers are always re-scored in double from
//     our own float32 copy, so the graph's float distances only choose candidates.
//
// The graph record's layout and the checks a record passes before a restore are
// index/hnsw_record.h's; this file writes records from graphs (encode_graph) and fills graphs
// from records those checks passed (restore).
#include "index/hnsw_index.h"

#include <flatbuffers/flatbuffers.h>

// hnswlib 0.6.2's SSE path prefetches `*(links + j + 1)` one word past a full link list (a read
// of 4 bytes beyond a malloc'd block whose value only feeds a prefetch; harmless, fixed upstream
// in 0.7). AddressSanitizer rightly reports it, so sanitizer builds use the library's scalar
// path, which has no prefetches; answers are the same.
#if defined(__SANITIZE_ADDRESS__)
#define NO_MANUAL_VECTORIZATION
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_MANUAL_VECTORIZATION
#endif
#endif
#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <queue>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include "engine/format_generated.h"
#include "engine/hash.h"
#include "engine/limits.h"
#include "index/field_memory.h"
#include "index/hnsw_record.h"

namespace fenec::index {

namespace fb = fenec::format;
using engine::Code;
using engine::Status;

namespace {

using hnsw::GraphTable;
using hnsw::in_parts;
using hnsw::kGraphVersion;
using hnsw::kRetiredBit;
using hnsw::unfit;
// hnswlib's level generator seed: fixed, so a rebuild from the same documents in the same order
// gives the same graph (tests compare answers across rebuilds).
constexpr size_t kLevelSeed = 100;
// The first allocation of a graph, in nodes; it doubles as nodes are added (Graph::reserve).
constexpr size_t kInitialCapacity = 64;
// Levels are stored as ubyte. hnswlib draws level L with probability about m^-L; 255 is never
// reached in practice, and a graph that did reach it is simply not persisted.
constexpr int kLevelMax = 255;

using Hnsw = hnswlib::HierarchicalNSW<float>;
using hnswlib::labeltype;
using hnswlib::linklistsizeint;
using hnswlib::tableint;

// ---- hnswlib, pinned. restore() writes hnswlib's node memory directly and encode_graph() reads
// it, both as 0.6.2 lays it out. The build takes only the headers this was verified against
// (index/CMakeLists.txt checks their SHA-256); index/README.md lists every assumption to
// re-verify before another version is let in. What a compiler can see of them is asserted here,
// so a header that slipped past the hash check still fails the build where the types moved.
#define FENEC_HNSWLIB_PIN(what)                                                \
    "hnswlib is not the 0.6.2 index/hnsw_index.cc was verified against (" what \
    "): re-verify the assumptions index/README.md lists under \"hnswlib, pinned\""
static_assert(std::is_same_v<tableint, uint32_t>, FENEC_HNSWLIB_PIN("a link is 4 bytes"));
static_assert(std::is_same_v<linklistsizeint, uint32_t>,
              FENEC_HNSWLIB_PIN("a link list opens with one 4-byte word holding its count"));
static_assert(std::is_same_v<labeltype, size_t>,
              FENEC_HNSWLIB_PIN("a node's label is 8 bytes, after its vector"));
static_assert(std::is_same_v<decltype(Hnsw::data_level0_memory_), char*> &&
                  std::is_same_v<decltype(Hnsw::size_data_per_element_), size_t> &&
                  std::is_same_v<decltype(Hnsw::offsetLevel0_), size_t> &&
                  std::is_same_v<decltype(Hnsw::size_links_level0_), size_t>,
              FENEC_HNSWLIB_PIN("level 0 is one array of fixed-size node records"));
static_assert(std::is_same_v<decltype(Hnsw::linkLists_), char**> &&
                  std::is_same_v<decltype(Hnsw::size_links_per_element_), size_t> &&
                  std::is_same_v<decltype(Hnsw::element_levels_), std::vector<int>>,
              FENEC_HNSWLIB_PIN("a node's upper levels are one malloc'd block of lists"));
static_assert(std::is_same_v<decltype(Hnsw::M_), size_t> &&
                  std::is_same_v<decltype(Hnsw::link_list_locks_), std::vector<std::mutex>> &&
                  std::is_same_v<decltype(Hnsw::link_list_update_locks_), std::vector<std::mutex>>,
              FENEC_HNSWLIB_PIN("m is a size_t; a node's lock is a std::mutex (memory_bytes)"));
static_assert(std::is_same_v<decltype(Hnsw::cur_element_count), size_t> &&
                  std::is_same_v<decltype(Hnsw::max_elements_), size_t>,
              FENEC_HNSWLIB_PIN("the node count is a plain size_t; 0.7 made it atomic"));
static_assert(
    std::is_same_v<decltype(Hnsw::label_lookup_), std::unordered_map<labeltype, tableint>>,
    FENEC_HNSWLIB_PIN("labels map to nodes in one unordered_map"));
static_assert(std::is_same_v<decltype(Hnsw::enterpoint_node_), tableint> &&
                  std::is_same_v<decltype(Hnsw::maxlevel_), int>,
              FENEC_HNSWLIB_PIN("the entry point is a node and a level"));
static_assert(std::is_same_v<decltype(Hnsw::num_deleted_), size_t> &&
                  std::is_same_v<decltype(&Hnsw::markDeletedInternal), void (Hnsw::*)(tableint)>,
              FENEC_HNSWLIB_PIN("a node is marked deleted by its number, and counted"));
static_assert(
    std::is_same_v<decltype(&Hnsw::getListCount),
                   unsigned short (Hnsw::*)(linklistsizeint*) const> &&
        std::is_same_v<decltype(&Hnsw::setListCount),
                       void (Hnsw::*)(linklistsizeint*, unsigned short) const> &&
        std::is_same_v<decltype(&Hnsw::get_linklist),
                       linklistsizeint* (Hnsw::*)(tableint, int) const> &&
        std::is_same_v<decltype(&Hnsw::getDataByInternalId), char* (Hnsw::*)(tableint) const> &&
        std::is_same_v<decltype(&Hnsw::setExternalLabel),
                       void (Hnsw::*)(tableint, labeltype) const>,
    FENEC_HNSWLIB_PIN("the accessors of a node's lists, vector and label"));
static_assert(
    std::is_same_v<
        decltype(&Hnsw::searchBaseLayerST<false, false>),
        std::priority_queue<std::pair<float, tableint>, std::vector<std::pair<float, tableint>>,
                            Hnsw::CompareByFirst> (Hnsw::*)(tableint, const void*, size_t) const> &&
        std::is_same_v<decltype(Hnsw::fstdistfunc_), hnswlib::DISTFUNC<float>> &&
        std::is_same_v<decltype(&Hnsw::get_linklist),
                       linklistsizeint* (Hnsw::*)(tableint, int) const>,
    FENEC_HNSWLIB_PIN("searchKnn's two steps, which graph_candidates takes apart"));
static_assert(
    std::is_same_v<decltype(Hnsw::visited_list_pool_), hnswlib::VisitedListPool*> &&
        std::is_same_v<decltype(&Hnsw::resizeIndex), void (Hnsw::*)(size_t)>,
    FENEC_HNSWLIB_PIN("resizeIndex replaces the visited-list pool, the locks and level 0 (Graph)"));
#undef FENEC_HNSWLIB_PIN

std::optional<std::vector<float>> vector_of(const engine::DocView& doc, uint16_t slot,
                                            uint32_t dim) {
    engine::Value v = doc.get(slot);
    if (auto* a = std::get_if<engine::VectorF32>(&v.rep)) {
        if (a->v.size() != dim) return std::nullopt;
        return std::move(a->v);
    }
    if (auto* h = std::get_if<engine::VectorF16>(&v.rep)) {
        if (h->v.size() != dim) return std::nullopt;
        std::vector<float> out(dim);
        for (uint32_t i = 0; i < dim; ++i) out[i] = engine::f16_to_f32(h->v[i]);
        return out;
    }
    return std::nullopt;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double dot(std::span<const double> q, std::span<const float> x) {
    double s = 0;
    for (size_t i = 0; i < q.size(); ++i) s += q[i] * static_cast<double>(x[i]);
    return s;
}

// hnswlib's graph with its level-0 block (one record per node, ~650 bytes at 128 dimensions) in a
// FieldBlock rather than malloc'd and grown by realloc: huge pages once it reaches 2 MiB
// (index/field_memory.h says why). `reserve` is hnswlib's resizeIndex (index/README.md, "hnswlib,
// pinned" 9) with the block grown here; the graph is never resized by hnswlib itself.
class Graph final : public Hnsw {
  public:
    // An empty graph for at least `capacity` nodes. Throws what hnswlib and allocation throw.
    Graph(hnswlib::SpaceInterface<float>* space, size_t capacity, size_t m, size_t ef_construction)
        : Hnsw(space, 0, m, ef_construction, kLevelSeed) {
        std::free(data_level0_memory_);  // hnswlib's malloc(0): level 0 is ours from here
        data_level0_memory_ = nullptr;
        reserve(capacity);
    }
    // level0_ frees the block; hnswlib's destructor then frees the rest, and free(nullptr) here.
    ~Graph() override { data_level0_memory_ = nullptr; }
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    // Room for at least `capacity` nodes (all the block holds: its huge-page rounding is used),
    // the nodes so far copied over. Throws std::bad_alloc with the graph's nodes and capacity as
    // they were (some of its per-node arrays possibly longer, which is harmless).
    void reserve(size_t capacity) {
        if (capacity <= max_elements_ && data_level0_memory_) return;
        FieldBlock block(std::max<size_t>(capacity, 1) * size_data_per_element_);
        capacity = block.bytes() / size_data_per_element_;
        auto pool = std::make_unique<hnswlib::VisitedListPool>(1, static_cast<int>(capacity));
        std::vector<std::mutex> locks(capacity);
        element_levels_.resize(capacity);  // longer than max_elements_ is harmless
        auto* lists = static_cast<char**>(std::realloc(linkLists_, sizeof(void*) * capacity));
        if (!lists) throw std::bad_alloc();
        linkLists_ = lists;
        // Nothing below throws.
        if (cur_element_count > 0) {
            std::memcpy(block.data(), data_level0_memory_,
                        cur_element_count * size_data_per_element_);
        }
        level0_ = std::move(block);
        data_level0_memory_ = reinterpret_cast<char*>(level0_.data());
        delete visited_list_pool_;
        visited_list_pool_ = pool.release();
        link_list_locks_.swap(locks);
        max_elements_ = capacity;
    }

  private:
    FieldBlock level0_;
};

}  // namespace

class VectorIndexes::Field {
  public:
    Field(std::string name_in, uint32_t dim_in, engine::HnswParams params_in)
        : name(std::move(name_in)), dim(dim_in), params(params_in) {}

    std::string name;
    uint32_t dim;
    engine::HnswParams params;
    std::unique_ptr<hnswlib::SpaceInterface<float>> space;
    // Null with `failure` empty: the field is small (graph_from) and scored exactly; null with a
    // failure: hnswlib failed, exact scoring until a rebuild.
    std::unique_ptr<Graph> graph;
    std::string failure;
    std::vector<uint64_t> node_docs;  // node -> document id; 0 = retired
    FloatArray vecs;                  // node * dim: each node's vector as its document held it
    std::vector<double> norms;        // node -> Euclidean norm of vecs, in double (cosine)
    std::unordered_map<uint64_t, uint32_t> doc_node;  // live nodes

    // The live vectors past which the field keeps a graph: up to 2 x m x ef_search, a `near` at the
    // field's ef_search scores every row exactly (rule 1) and never asks a graph, while an hnswlib
    // graph costs 2.6 MB before its first node (65,536 label locks). A field that shrinks below it
    // keeps its graph; one rebuilt below it (a reopen finding no graph record, a compaction) has
    // none.
    size_t graph_from() const { return 2 * size_t{params.m} * params.ef_search; }
    bool failed() const { return !graph && !failure.empty(); }

    std::span<const float> vec(uint32_t node) const {
        return {vecs.data() + static_cast<size_t>(node) * dim, dim};
    }

    // Appends a node's vector (the graph is told separately).
    void push(uint64_t doc, std::span<const float> v) {
        node_docs.push_back(doc);
        vecs.append(v);
        double xx = 0;
        for (float x : v) xx += static_cast<double>(x) * x;
        norms.push_back(std::sqrt(xx));
    }

    // The vector as the graph stores it: unit length under cosine.
    std::vector<float> prepared(std::span<const float> v) const {
        std::vector<float> p(v.begin(), v.end());
        if (params.metric == engine::Metric::cosine) {
            double n = 0;
            for (float x : v) n += static_cast<double>(x) * x;
            n = std::sqrt(n);
            if (n > 0) {
                for (float& x : p) x = static_cast<float>(x / n);
            }
        }
        return p;
    }

    // prepared() of node `node`'s own vector written to `out` (dim floats), its norm taken from
    // `norms` (the same double sum prepared() computes), with no allocation: the restore's.
    void prepare_into(uint32_t node, float* out) const {
        const std::span<const float> v = vec(node);
        const double n = norms[node];
        if (params.metric != engine::Metric::cosine || !(n > 0)) {
            std::memcpy(out, v.data(), v.size() * sizeof(float));
            return;
        }
        for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i] / n);
    }

    // A fresh, empty graph for `capacity` nodes. May throw (hnswlib, bad_alloc).
    void new_graph(size_t capacity) {
        graph.reset();
        if (params.metric == engine::Metric::l2) {
            space = std::make_unique<hnswlib::L2Space>(dim);
        } else {
            space = std::make_unique<hnswlib::InnerProductSpace>(dim);
        }
        graph = std::make_unique<Graph>(space.get(), std::max(capacity, kInitialCapacity), params.m,
                                        params.ef_construction);
        graph->setEf(1);
        failure.clear();
    }

    void fail(const char* what) {
        graph.reset();
        failure = what;
    }

    // The heap this field holds (index/memory.h): its vectors and maps, and hnswlib's arrays,
    // which are sized by the graph's capacity. A node's upper levels are drawn with
    // P(level >= L) = m^-L, so they are counted at their expected 1/(m-1) levels a node rather
    // than walked.
    uint64_t memory_bytes() const {
        uint64_t bytes = sizeof(Field) + vecs.capacity() * sizeof(float) +
                         node_docs.capacity() * sizeof(uint64_t) +
                         norms.capacity() * sizeof(double) +
                         doc_node.size() * (8 + 8 + sizeof(std::pair<const uint64_t, uint32_t>));
        if (graph) {
            const uint64_t cap = graph->max_elements_;
            const uint64_t n = graph->cur_element_count;
            bytes += cap * (graph->size_data_per_element_ + sizeof(void*) + sizeof(int) +
                            sizeof(std::mutex) + sizeof(unsigned short));
            // A fixed 65,536 update locks a graph (2.6 MB), whatever its size.
            bytes += graph->link_list_update_locks_.size() * sizeof(std::mutex);
            bytes += n * (8 + 8 + sizeof(std::pair<const labeltype, tableint>));
            if (graph->M_ > 1) bytes += n * graph->size_links_per_element_ / (graph->M_ - 1);
        }
        return bytes;
    }

    // The graph of every node so far, numbered as they are (a node's label is its number, and
    // hnswlib numbers its nodes in the order they come), the retired ones marked deleted: as if it
    // had been kept from the first node.
    void build_graph() {
        try {
            new_graph(2 * node_docs.size());
            for (size_t n = 0; n < node_docs.size(); ++n) {
                const std::vector<float> p = prepared(vec(static_cast<uint32_t>(n)));
                graph->addPoint(p.data(), static_cast<labeltype>(n));
            }
            for (size_t n = 0; n < node_docs.size(); ++n) {
                if (node_docs[n] == 0) graph->markDelete(static_cast<labeltype>(n));
            }
        } catch (const std::exception& e) {
            fail(e.what());
        }
    }

    void add(uint64_t doc, std::span<const float> v) {
        const auto node = static_cast<uint32_t>(node_docs.size());
        push(doc, v);
        doc_node[doc] = node;
        if (!graph) {
            if (!failed() && doc_node.size() > graph_from()) build_graph();
            return;
        }
        try {
            if (node >= graph->max_elements_) graph->reserve(2 * graph->max_elements_);
            const std::vector<float> p = prepared(v);
            graph->addPoint(p.data(), static_cast<labeltype>(node));
        } catch (const std::exception& e) {
            fail(e.what());
        }
    }

    void retire(uint64_t doc) {
        auto it = doc_node.find(doc);
        if (it == doc_node.end()) return;
        const uint32_t node = it->second;
        doc_node.erase(it);
        node_docs[node] = 0;
        if (!graph) return;
        try {
            graph->markDelete(static_cast<labeltype>(node));
        } catch (const std::exception& e) {
            fail(e.what());
        }
    }

    // Brings `doc` to hold `target` (nullopt: no vector). An identical vector keeps its node.
    void apply(uint64_t doc, const std::optional<std::vector<float>>& target) {
        auto it = doc_node.find(doc);
        if (it != doc_node.end() && target && same_bits(vec(it->second), *target)) return;
        retire(doc);
        if (target) add(doc, *target);
    }

    void clear() {
        node_docs.clear();
        vecs.clear();
        norms.clear();
        doc_node.clear();
    }

    uint64_t live_digest() const {
        XXH3_state_t st;
        XXH3_64bits_reset(&st);
        for (size_t n = 0; n < node_docs.size(); ++n) {
            if (node_docs[n] != 0) XXH3_64bits_update(&st, vec(n).data(), dim * sizeof(float));
        }
        return XXH3_64bits_digest(&st);
    }
};

namespace {

using Field = VectorIndexes::Field;

// The rows holding a vector of the field, in id order: their ids and where each one's vector is
// -- the document's encoded value (rows_of: read where it lies, nothing copied until a graph is
// filled, in parallel, from it) or `vecs` (flat floats, for a rebuild from the field's own).
struct Rows {
    uint32_t dim = 0;
    std::vector<uint64_t> ids;
    std::vector<std::span<const std::byte>> raw;  // per row, or empty: `vecs` holds them
    std::vector<float> vecs;
    // Row `row`'s vector into `out` (dim floats).
    void vec_into(size_t row, float* out) const {
        if (!raw.empty()) return engine::DocView::vector_into(raw[row], out);
        std::memcpy(out, vecs.data() + row * dim, dim * sizeof(float));
    }
};

// The rows of `docs` whose `slot` holds a vector of `dim`; their values are read where they lie,
// which stays valid while the caller holds the writer lock (on_schema's contract).
Rows rows_of(const engine::DocSource& docs, uint16_t slot, uint32_t dim) {
    Rows r;
    r.dim = dim;
    docs.each([&](engine::DocId id, engine::DocView doc) {
        const std::span<const std::byte> v = doc.raw(slot);
        if (engine::DocView::vector_dim(v) == dim) {
            r.ids.push_back(id.v);
            r.raw.push_back(v);
        }
        return true;
    });
    return r;
}

void rebuild(Field& f, const Rows& rows) {
    f.clear();
    f.graph.reset();
    f.failure.clear();
    f.node_docs.reserve(rows.ids.size());
    f.vecs.reserve(rows.ids.size() * f.dim);
    if (rows.ids.size() > f.graph_from()) {  // else none: add() builds it once the field grows
        try {
            f.new_graph(rows.ids.size());
        } catch (const std::exception& e) {
            f.fail(e.what());
        }
    }
    std::vector<float> v(f.dim);
    for (size_t i = 0; i < rows.ids.size(); ++i) {
        rows.vec_into(i, v.data());
        f.add(rows.ids[i], v);
    }
}

// True when `f` already holds exactly the vectors of `rows` (an alter that left the field alone).
bool matches(const Field& f, const Rows& rows) {
    if (f.failed() || rows.ids.size() != f.doc_node.size()) return false;
    std::vector<float> v(f.dim);
    for (size_t i = 0; i < rows.ids.size(); ++i) {
        auto it = f.doc_node.find(rows.ids[i]);
        if (it == f.doc_node.end()) return false;
        rows.vec_into(i, v.data());
        if (!same_bits(f.vec(it->second), v)) return false;
    }
    return true;
}

// ---- hnswlib's node memory, written as its loadIndex writes it (0.6.2's public members and
// level-0 layout). These two functions and finish_graph are all the restore writes of it.

// Node `node`'s level-0 link list: zeroed (the delete mark in it cleared), then its count and
// links. The vector and the label after it in the node's memory are written whole apart.
void set_level0_links(Hnsw& h, tableint node, const GraphTable& t) {
    std::memset(h.data_level0_memory_ + node * h.size_data_per_element_ + h.offsetLevel0_, 0,
                h.size_links_level0_);
    linklistsizeint* ll0 = h.get_linklist0(node);
    const uint32_t count0 = t.g->level0()->Get(node * t.stride0);
    h.setListCount(ll0, static_cast<unsigned short>(count0));
    auto* links0 = reinterpret_cast<tableint*>(ll0 + 1);
    for (size_t j = 0; j < count0; ++j) links0[j] = t.g->level0()->Get(node * t.stride0 + 1 + j);
}

// Node `node`'s lists at levels 1..level: one malloc'd block (the destructor frees it with free()
// for every counted node whose level is above 0), its level set together with it so a failure
// part way leaves nothing the destructor would free twice or miss. False when malloc fails.
bool set_upper_links(Hnsw& h, tableint node, int level, const GraphTable& t) {
    const size_t bytes = h.size_links_per_element_ * level + 1;
    h.linkLists_[node] = static_cast<char*>(std::malloc(bytes));
    if (!h.linkLists_[node]) return false;
    h.element_levels_[node] = level;
    std::memset(h.linkLists_[node], 0, bytes);
    size_t at = node == 0 ? 0 : t.g->upper_ends()->Get(node - 1);
    for (int l = 1; l <= level; ++l) {
        linklistsizeint* ll = h.get_linklist(node, l);
        const uint32_t count = t.g->upper()->Get(at);
        h.setListCount(ll, static_cast<unsigned short>(count));
        auto* links = reinterpret_cast<tableint*>(ll + 1);
        for (size_t j = 0; j < count; ++j) links[j] = t.g->upper()->Get(at + 1 + j);
        at += 1 + count;
    }
    return true;
}

// Node i whole: its vector (as its document holds it, or the record's retired copy) and norm in
// `f`, and its part of hnswlib's buffers. No two nodes share any of it, so nodes are filled in
// parallel. False when its upper lists could not be allocated.
bool fill_node(Field& f, Hnsw& h, const GraphTable& t, const Rows& rows, uint32_t source,
               size_t i) {
    const auto node = static_cast<tableint>(i);
    f.node_docs[i] = t.g->node_docs()->Get(i);
    float* v = f.vecs.data() + i * f.dim;
    if (source & kRetiredBit) {
        const size_t k = source & ~kRetiredBit;
        std::memcpy(v, t.g->retired_vectors()->data() + k * f.dim, f.dim * sizeof(float));
    } else {
        rows.vec_into(source, v);
    }
    double xx = 0;
    for (uint32_t d = 0; d < f.dim; ++d) xx += static_cast<double>(v[d]) * v[d];
    f.norms[i] = std::sqrt(xx);
    set_level0_links(h, node, t);
    f.prepare_into(node, reinterpret_cast<float*>(h.getDataByInternalId(node)));
    h.setExternalLabel(node, static_cast<labeltype>(i));
    const int level = t.g->levels()->Get(i);
    return level == 0 || set_upper_links(h, node, level, t);
}

// What the nodes share, once each is filled: hnswlib's label map, deleted marks and entry point,
// and our id map, here, while a thread of its own takes the live digest (XXH3 over every live
// vector: the longest part, about as long as the two maps together; docs/benchmarks.md, "a
// restore's live digest"). False when the digest differs from the record's (the graph is then
// the caller's to drop).
bool finish_graph(Field& f, Hnsw& h, const GraphTable& t, size_t retired) {
    uint64_t digest = 0;
    auto take_digest = [&] { digest = f.live_digest(); };
    std::jthread beside;  // joined on the way out if anything below throws meanwhile
    try {
        beside = std::jthread(take_digest);
    } catch (const std::system_error&) {
        take_digest();
    }
    h.label_lookup_.reserve(t.n);
    for (size_t i = 0; i < t.n; ++i) {
        h.label_lookup_[static_cast<labeltype>(i)] = static_cast<tableint>(i);
        if (f.node_docs[i] == 0) h.markDeletedInternal(static_cast<tableint>(i));
    }
    f.doc_node.reserve(t.n - retired);
    for (size_t i = 0; i < t.n; ++i) {
        if (f.node_docs[i] != 0) f.doc_node.emplace(f.node_docs[i], static_cast<uint32_t>(i));
    }
    if (beside.joinable()) beside.join();
    if (digest != t.g->live_digest()) return false;
    h.enterpoint_node_ = t.n > 0 ? t.g->entry() : static_cast<tableint>(-1);
    h.maxlevel_ = t.n > 0 ? t.max_level : -1;
    return true;
}

// `f` and a new graph filled from the checked table: every node in parts on threads of their own
// (in_parts; a 100,000 x 128 graph first-touches ~120 MB here), then what they share. On any
// failure `f` is left cleared, without a graph.
Status load_graph(Field& f, const GraphTable& t, const Rows& rows,
                  const std::vector<uint32_t>& source, size_t retired) {
    f.clear();
    try {
        f.node_docs.resize(t.n);
        f.vecs.resize(t.n * f.dim);  // left uninitialised (FloatArray): the parts write it
        f.norms.resize(t.n);
        f.new_graph(t.n);
        Hnsw& h = *f.graph;
        const bool filled = in_parts(t.n, [&](size_t lo, size_t hi) {
            for (size_t i = lo; i < hi; ++i) {
                if (!fill_node(f, h, t, rows, source[i], i)) return false;
            }
            return true;
        });
        h.cur_element_count = t.n;  // the destructor frees link lists of counted nodes
        if (!filled) throw std::bad_alloc();
        if (finish_graph(f, h, t, retired)) return Status::ok();
        f.graph.reset();
        f.clear();
        return unfit("live digest differs");
    } catch (const std::exception& e) {
        f.graph.reset();
        f.clear();
        return unfit(std::string("hnswlib: ") + e.what());
    }
}

// Checks a graph record against the field and the documents (engine.md §6.3), then fills
// hnswlib's buffers. On any error `f` is left for the caller to rebuild.
Status restore(Field& f, engine::CollectionId c, uint16_t slot, std::span<const std::byte> body,
               const Rows& rows) {
    FENEC_ASSIGN_OR_RETURN(const hnsw::FitRecord fit,
                           hnsw::check_record(body, c, slot, f.dim, f.params, rows.ids));
    return load_graph(f, fit.table, rows, fit.source, fit.retired);
}

// The rows as a graph record saw them (engine.md §6.3): the rows `now`, each document written
// since at its version then (`changes`, ascending by id), in id order; and per change, where the
// document's vector is now (empty: it holds none).
struct RowsAtGraph {
    Rows rows;
    std::vector<std::span<const std::byte>> now;
};

RowsAtGraph rows_at_graph(const Rows& now, std::span<const engine::GraphChange> changes,
                          uint16_t slot, uint32_t dim) {
    RowsAtGraph a;
    a.rows.dim = dim;
    a.rows.ids.reserve(now.ids.size() + changes.size());
    a.rows.raw.reserve(now.ids.size() + changes.size());
    a.now.resize(changes.size());
    size_t i = 0;  // the next row of `now`
    auto keep_until = [&](uint64_t id) {
        for (; i < now.ids.size() && now.ids[i] < id; ++i) {
            a.rows.ids.push_back(now.ids[i]);
            a.rows.raw.push_back(now.raw[i]);
        }
    };
    for (size_t k = 0; k < changes.size(); ++k) {
        const uint64_t id = changes[k].id.v;
        keep_until(id);
        if (i < now.ids.size() && now.ids[i] == id) a.now[k] = now.raw[i++];
        if (!changes[k].at_graph) continue;  // written into being after the graph
        const std::span<const std::byte> then = engine::DocView(*changes[k].at_graph).raw(slot);
        if (engine::DocView::vector_dim(then) == dim) {
            a.rows.ids.push_back(id);
            a.rows.raw.push_back(then);
        }
    }
    keep_until(UINT64_MAX);
    return a;
}

// A graph record followed by writes: the graph restored as the record saw the documents, then
// each document written since brought to its vector now, as on_write would have (a changed or
// deleted vector retires its node, a new one gets a node, an identical one keeps its node), in
// the order of their last writes: an HNSW graph depends on the order of its inserts, and this is
// the order the node that wrote them inserted them in (a document written twice skips its
// intermediate vector).
Status restore_then_apply(Field& f, engine::CollectionId c, uint16_t slot,
                          std::span<const std::byte> body, const Rows& now,
                          std::span<const engine::GraphChange> changes) {
    const RowsAtGraph a = rows_at_graph(now, changes, slot, f.dim);
    FENEC_RETURN_IF_ERROR(restore(f, c, slot, body, a.rows));
    std::vector<size_t> in_order(changes.size());
    for (size_t k = 0; k < in_order.size(); ++k) in_order[k] = k;
    std::sort(in_order.begin(), in_order.end(),
              [&](size_t x, size_t y) { return changes[x].last < changes[y].last; });
    std::optional<std::vector<float>> target;
    for (const size_t k : in_order) {
        target.reset();
        if (!a.now[k].empty()) {
            target.emplace(f.dim);
            engine::DocView::vector_into(a.now[k], target->data());
        }
        f.apply(changes[k].id.v, target);
    }
    return Status::ok();
}

}  // namespace

VectorIndexes::VectorIndexes() = default;
VectorIndexes::~VectorIndexes() = default;

engine::Status VectorIndexes::on_write(const engine::WriteEvent& ev) {
    for (auto it = fields_.lower_bound({ev.collection.v, 0});
         it != fields_.end() && it->first.first == ev.collection.v; ++it) {
        Field& f = *it->second;
        std::optional<std::vector<float>> target;
        if (ev.after) target = vector_of(*ev.after, it->first.second, f.dim);
        f.apply(ev.id.v, target);
    }
    return Status::ok();
}

void VectorIndexes::on_undo(const engine::WriteEvent& ev) {
    for (auto it = fields_.lower_bound({ev.collection.v, 0});
         it != fields_.end() && it->first.first == ev.collection.v; ++it) {
        Field& f = *it->second;
        std::optional<std::vector<float>> target;
        if (ev.before) target = vector_of(*ev.before, it->first.second, f.dim);
        f.apply(ev.id.v, target);
    }
}

void VectorIndexes::on_schema(engine::CollectionId c, const engine::Schema* schema,
                              const engine::DocSource* docs) {
    std::map<Key, std::unique_ptr<Field>> kept;
    for (uint16_t slot = 0; schema && slot < schema->fields.size(); ++slot) {
        const engine::FieldDesc& fd = schema->fields[slot];
        if (fd.dropped || fd.index.kind != engine::IndexKind::hnsw) continue;
        if (fd.type.base != engine::BaseType::Vector) continue;
        const Key key{c.v, slot};
        Rows rows = docs ? rows_of(*docs, slot, fd.type.dim) : Rows{};
        std::unique_ptr<Field>& have = fields_[key];
        auto stash = stashed_.find(key);
        if (stash == stashed_.end() && have && have->dim == fd.type.dim &&
            have->params == fd.index.hnsw && matches(*have, rows)) {
            have->name = fd.name;  // a rename keeps the graph
            ++stats_.kept;
            kept[key] = std::move(have);
            continue;
        }
        auto f = std::make_unique<Field>(fd.name, fd.type.dim, fd.index.hnsw);
        bool restored = false;
        if (stash != stashed_.end()) {
            const Stashed record = std::move(stash->second);
            stashed_.erase(stash);
            Status s = Status::ok();
            if (record.changes.empty()) {
                s = restore(*f, c, slot, record.body, rows);
            } else if (2 * record.changes.size() > rows.ids.size()) {
                // Applying them would cost about what a rebuild does, and leave a graph of
                // retired nodes.
                s = unfit("more rows written after the graph record than half the field's");
            } else {
                s = restore_then_apply(*f, c, slot, record.body, rows, record.changes);
            }
            if (s.is_ok()) {
                restored = true;
                ++stats_.restored;
                if (!record.changes.empty()) ++stats_.caught_up;
            } else {
                ++stats_.discarded;
                stats_.last_discard = std::string(s.message());
            }
        }
        if (!restored) {
            rebuild(*f, rows);
            ++stats_.rebuilt;
            if (f->graph) ++stats_.graphs_rebuilt;
        }
        kept[key] = std::move(f);
    }
    // Fields of `c` no longer indexed (or the collection dropped) go; so do their records.
    auto lo = fields_.lower_bound({c.v, 0});
    auto hi = fields_.lower_bound({c.v + 1, 0});
    fields_.erase(lo, hi);
    fields_.merge(kept);
    auto slo = stashed_.lower_bound({c.v, 0});
    auto shi = stashed_.lower_bound({c.v + 1, 0});
    for (auto it = slo; it != shi; ++it) {
        ++stats_.discarded;
        stats_.last_discard = "the field no longer has @hnsw";
    }
    stashed_.erase(slo, shi);
}

void VectorIndexes::on_open(engine::OpenReport& report) {
    fields_.clear();
    stashed_.clear();
    for (const engine::GraphRecord& g : report.graphs) {
        if (g.written_after && !g.changes_known) {
            ++stats_.discarded;
            stats_.last_discard = "the collection's schema changed after the graph record";
            continue;
        }
        stashed_[{g.collection.v, g.slot}] = Stashed{g.body, g.changes};
    }
}

void VectorIndexes::on_opened() {
    // Left only for collections the open did not load (a dropped collection's last graph): their
    // bytes are about to go.
    stashed_.clear();
}

engine::Result<std::vector<std::byte>> VectorIndexes::encode_graph(engine::CollectionId c,
                                                                   uint16_t slot, engine::Seq at,
                                                                   uint64_t durable_end) {
    auto it = fields_.find({c.v, slot});
    if (it == fields_.end()) return Status::error(Code::not_found, "no vector index on that field");
    const Field& f = *it->second;
    if (f.failed()) {
        return Status::error(Code::invalid_argument,
                             "the graph of `" + f.name + "` failed (" + f.failure + ")");
    }
    if (!f.graph) {  // a small field, scored exactly: rebuilt from its documents on open
        return Status::error(Code::not_found, "`" + f.name + "` is under " +
                                                  std::to_string(f.graph_from()) +
                                                  " vectors and keeps no graph");
    }
    const Hnsw& h = *f.graph;
    const size_t n = f.node_docs.size();
    const size_t m = f.params.m;
    std::vector<uint8_t> levels(n);
    std::vector<uint32_t> level0(n * (1 + 2 * m), 0);
    std::vector<uint64_t> upper_ends(n);
    std::vector<uint32_t> upper;
    std::vector<float> retired;
    for (size_t i = 0; i < n; ++i) {
        const auto node = static_cast<tableint>(i);
        const int level = h.element_levels_[i];
        if (level < 0 || level > kLevelMax) {
            return Status::error(Code::invalid_argument, "a node's level does not fit a byte");
        }
        levels[i] = static_cast<uint8_t>(level);
        linklistsizeint* ll0 = h.get_linklist0(node);
        const unsigned short count0 = h.getListCount(ll0);
        uint32_t* out0 = level0.data() + i * (1 + 2 * m);
        out0[0] = count0;
        std::memcpy(out0 + 1, ll0 + 1, count0 * sizeof(tableint));
        for (int l = 1; l <= level; ++l) {
            linklistsizeint* ll = h.get_linklist(node, l);
            const unsigned short count = h.getListCount(ll);
            const auto* links = reinterpret_cast<const tableint*>(ll + 1);
            upper.push_back(count);
            upper.insert(upper.end(), links, links + count);
        }
        upper_ends[i] = upper.size();
        if (f.node_docs[i] == 0) {
            const std::span<const float> v = f.vec(node);
            retired.insert(retired.end(), v.begin(), v.end());
        }
    }
    flatbuffers::FlatBufferBuilder b(1024 + n * (8 + 1 + 8 + 4 * (1 + 2 * m)) + upper.size() * 4 +
                                     retired.size() * 4);
    auto params = fb::CreateHnswParams(b, static_cast<fb::Metric>(f.params.metric), f.params.m,
                                       f.params.ef_construction, f.params.ef_search);
    auto node_docs_v = b.CreateVector(f.node_docs);
    auto levels_v = b.CreateVector(levels);
    auto level0_v = b.CreateVector(level0);
    auto upper_ends_v = b.CreateVector(upper_ends);
    auto upper_v = b.CreateVector(upper);
    auto retired_v = b.CreateVector(retired);
    const uint32_t entry = n > 0 ? h.enterpoint_node_ : 0;
    const auto max_level = static_cast<uint8_t>(n > 0 ? h.maxlevel_ : 0);
    b.Finish(fb::CreateGraph(b, kGraphVersion, c.v, slot, at.v, f.dim, params, entry, max_level,
                             node_docs_v, levels_v, level0_v, upper_ends_v, upper_v, retired_v,
                             f.live_digest(), durable_end));
    const auto* p = reinterpret_cast<const std::byte*>(b.GetBufferPointer());
    return std::vector<std::byte>(p, p + b.GetSize());
}

namespace {

// Scores in double (fenecql.md §9 rule 4) and orders best first, equal scores by lower id.
struct Scorer {
    engine::Metric metric;
    std::vector<double> q;
    double q_norm = 0;

    // `x_norm`: the Euclidean norm of x, in double (Field::norms).
    double score(std::span<const float> x, double x_norm) const {
        switch (metric) {
            case engine::Metric::cosine: {
                if (x_norm == 0) return 0;
                return dot(q, x) / (q_norm * x_norm);
            }
            case engine::Metric::l2: {
                double s = 0;
                for (size_t i = 0; i < q.size(); ++i) {
                    const double d = q[i] - static_cast<double>(x[i]);
                    s += d * d;
                }
                return std::sqrt(s);
            }
            case engine::Metric::dot:
                return dot(q, x);
        }
        return 0;
    }
    // Node `node` of `f` scored, as (its document, its score).
    VectorIndexes::Hit hit(const Field& f, uint32_t node) const {
        return {f.node_docs[node], score(f.vec(node), f.norms[node])};
    }
    bool better(const VectorIndexes::Hit& a, const VectorIndexes::Hit& b) const {
        if (a.second != b.second) {
            return metric == engine::Metric::l2 ? a.second < b.second : a.second > b.second;
        }
        return a.first < b.first;
    }
    // Keeps the best k of `hits`, ordered.
    void best(std::vector<VectorIndexes::Hit>& hits, size_t k) const {
        auto cmp = [this](const auto& a, const auto& b) { return better(a, b); };
        if (hits.size() > k) {
            std::nth_element(hits.begin(), hits.begin() + static_cast<ptrdiff_t>(k), hits.end(),
                             cmp);
            hits.resize(k);
        }
        std::sort(hits.begin(), hits.end(), cmp);
    }
};

// The scorer of `query` on `f`, or why it cannot be scored (fenecql.md §9): a dimension not the
// field's, a component that is not finite, a zero vector under cosine.
engine::Result<Scorer> scorer_for(const Field& f, std::span<const float> query) {
    if (query.size() != f.dim) {
        return Status::error(Code::invalid_argument,
                             "near on `" + f.name + "`: the field has dimension " +
                                 std::to_string(f.dim) + ", given " + std::to_string(query.size()));
    }
    Scorer scorer{f.params.metric, std::vector<double>(query.begin(), query.end())};
    for (double v : scorer.q) {
        if (!std::isfinite(v)) {
            return Status::error(Code::invalid_argument,
                                 "near on `" + f.name + "`: a component is not finite");
        }
        scorer.q_norm += v * v;
    }
    scorer.q_norm = std::sqrt(scorer.q_norm);
    if (f.params.metric == engine::Metric::cosine && scorer.q_norm == 0) {
        return Status::error(Code::invalid_argument,
                             "near on `" + f.name + "`: a zero vector has no cosine similarity");
    }
    return scorer;
}

// |F|: the rows of `filter` (ascending ids, a repeat counted once; null: every row) that hold a
// vector of the field.
size_t rows_with_vectors(const Field& f, const std::vector<uint64_t>* filter) {
    if (!filter) return f.doc_node.size();
    size_t count = 0;
    for (size_t i = 0; i < filter->size(); ++i) {
        if (i > 0 && (*filter)[i] == (*filter)[i - 1]) continue;
        count += f.doc_node.count((*filter)[i]);
    }
    return count;
}

// Rule 1: every row of F scored from our own float32 copy, the best k kept.
std::vector<VectorIndexes::Hit> exact_hits(const Field& f, const Scorer& scorer,
                                           const std::vector<uint64_t>* filter, size_t k,
                                           size_t f_count) {
    std::vector<VectorIndexes::Hit> hits;
    if (filter) {
        hits.reserve(f_count);
        for (size_t i = 0; i < filter->size(); ++i) {
            if (i > 0 && (*filter)[i] == (*filter)[i - 1]) continue;
            auto d = f.doc_node.find((*filter)[i]);
            if (d != f.doc_node.end()) hits.push_back(scorer.hit(f, d->second));
        }
    } else {
        hits.reserve(f.doc_node.size());
        for (size_t n = 0; n < f.node_docs.size(); ++n) {
            if (f.node_docs[n] != 0) hits.push_back(scorer.hit(f, static_cast<uint32_t>(n)));
        }
    }
    scorer.best(hits, k);
    return hits;
}

// A priority_queue's container, taken whole (its protected member, reached through a subclass).
template <class Queue>
typename Queue::container_type container_of(Queue&& queue) {
    struct Open : Queue {
        static typename Queue::container_type& of(Queue& q) { return q.*&Open::c; }
    };
    return std::move(Open::of(queue));
}

// Node and float distance as the graph scored it: lower is nearer.
using Candidate = std::pair<float, tableint>;

// What searchKnn(q, c) finds at ef = c (index/README.md, "hnswlib, pinned" 6): the same greedy
// descent through the upper levels, then the same searchBaseLayerST at ef = c, whose queue holds
// exactly the c candidates searchKnn would answer. Taken here unordered, as node numbers (a node's
// label is its number), without searchKnn's second queue, its label lookups and the metric
// counters it bumps for every hop (atomics, shared by every reader). Throws what hnswlib throws.
std::vector<Candidate> graph_candidates(const Hnsw& h, const float* q, size_t c) {
    if (h.cur_element_count == 0) return {};
    tableint at = h.enterpoint_node_;
    float at_dist = h.fstdistfunc_(q, h.getDataByInternalId(at), h.dist_func_param_);
    for (int level = h.maxlevel_; level > 0; --level) {
        for (bool changed = true; changed;) {
            changed = false;
            const linklistsizeint* list = h.get_linklist(at, level);
            const int size = h.getListCount(const_cast<linklistsizeint*>(list));
            const auto* links = reinterpret_cast<const tableint*>(list + 1);
            for (int i = 0; i < size; ++i) {
                if (links[i] > h.max_elements_) throw std::runtime_error("cand error");
                const float d =
                    h.fstdistfunc_(q, h.getDataByInternalId(links[i]), h.dist_func_param_);
                if (d < at_dist) {
                    at_dist = d;
                    at = links[i];
                    changed = true;
                }
            }
        }
    }
    if (h.num_deleted_) return container_of(h.searchBaseLayerST<true, false>(at, q, c));
    return container_of(h.searchBaseLayerST<false, false>(at, q, c));
}

// How far the graph's float distance of a candidate can be from its exact distance, doubled
// (`slack`): the candidates whose float distance is beyond the k-th best by more than both their
// slacks are worse than k others by more than any rounding of the double re-score, so scoring
// them cannot change the answer. Distances are in the graph's space: 1 - (unit a . unit b) under
// cosine, 1 - a . b under dot, |a - b|^2 under l2. With u = 2^-24 and n the dimension, a float sum
// of n products is within (n + 1) u of the sum of their magnitudes (any order of adding, SSE's
// included); rounding each component of a unit vector adds 2u, the final 1 - s adds u |d|; so
// (n + 4) u covers it, and 2 (n + 8) u is used. The double re-score rounds far less (n 2^-53).
struct Slack {
    engine::Metric metric;
    double per_unit;  // 2 (n + 8) u
    double q_norm;
    double of(const Field& f, const Candidate& c) const {
        const double d = c.first;
        switch (metric) {
            case engine::Metric::cosine:  // unit vectors: the products sum to at most 1
                return per_unit * (1 + std::abs(d));
            case engine::Metric::dot:  // the products sum to at most |q| |x|
                return per_unit * (q_norm * f.norms[c.second] + std::abs(d));
            case engine::Metric::l2:  // relative, each term (a - b)^2 rounded three times;
                // plus what squares that underflow to 0 or to a subnormal can lose (2^-126 each)
                return per_unit * d + per_unit * 0x1p-102;
        }
        return std::numeric_limits<double>::infinity();
    }
};

// Rule 2: the graph searched for c candidates, c doubling from max(ef, k |rows| / |F|) until k
// rows of F are among them (or all of F, when it holds fewer), the best k re-scored in double
// and kept (only those that could be among them are re-scored: Slack). nullopt once c reaches
// half the rows, or when hnswlib fails (a library failure costs speed, never the answer): the
// caller then scores exactly.
std::optional<std::vector<VectorIndexes::Hit>> graph_hits(const Field& f, const Scorer& scorer,
                                                          std::span<const float> query,
                                                          const std::vector<uint64_t>* filter,
                                                          size_t k, size_t ef_q, size_t f_count) {
    const size_t rows = f.doc_node.size();
    const size_t need = std::min(k, f_count);
    size_t c_want = std::max(ef_q, (k * rows + f_count - 1) / f_count);
    const std::vector<float> q = f.prepared(query);
    const Slack slack{f.params.metric, 2.0 * (f.dim + 8) * 0x1p-24, scorer.q_norm};
    try {
        while (2 * c_want < rows) {
            std::vector<Candidate> found = graph_candidates(*f.graph, q.data(), c_want);
            // The candidates in F, each with its bounds [d - slack, d + slack].
            std::vector<std::pair<double, double>> bounds;
            size_t kept = 0;
            bool finite = true;
            for (const Candidate& cand : found) {
                const uint64_t doc = f.node_docs[cand.second];
                if (doc == 0) continue;
                if (filter && !std::binary_search(filter->begin(), filter->end(), doc)) continue;
                const double s = slack.of(f, cand);
                finite = finite && std::isfinite(cand.first) && std::isfinite(s);
                bounds.emplace_back(cand.first - s, cand.first + s);
                found[kept++] = cand;
            }
            found.resize(kept);
            if (kept < need) {
                c_want *= 2;
                continue;
            }
            // T: the k-th lowest upper bound. A candidate whose lower bound is above it is
            // worse than k others; the rest (all of them when any distance is not finite) are
            // scored.
            double t = std::numeric_limits<double>::infinity();
            if (kept > k && finite) {
                std::vector<double> uppers(kept);
                for (size_t i = 0; i < kept; ++i) uppers[i] = bounds[i].second;
                std::nth_element(uppers.begin(), uppers.begin() + static_cast<ptrdiff_t>(k - 1),
                                 uppers.end());
                t = uppers[k - 1];
            }
            std::vector<VectorIndexes::Hit> hits;
            hits.reserve(std::min(kept, 2 * k));
            for (size_t i = 0; i < kept; ++i) {
                if (!(bounds[i].first > t)) hits.push_back(scorer.hit(f, found[i].second));
            }
            scorer.best(hits, k);
            return hits;
        }
    } catch (const std::exception&) {
    }
    return std::nullopt;
}

}  // namespace

engine::Result<std::vector<VectorIndexes::Hit>> VectorIndexes::near(
    engine::CollectionId c, uint16_t slot, std::span<const float> query, size_t k, size_t ef,
    const std::vector<uint64_t>* filter) const {
    auto it = fields_.find({c.v, slot});
    if (it == fields_.end()) {
        return Status::error(Code::invalid_argument, "near needs a field with @hnsw");
    }
    const Field& f = *it->second;
    FENEC_ASSIGN_OR_RETURN(const Scorer scorer, scorer_for(f, query));
    if (k == 0) return std::vector<Hit>{};
    const size_t f_count = rows_with_vectors(f, filter);
    const size_t ef_q = std::max<size_t>(ef ? ef : f.params.ef_search, k);
    // Rule 1: small candidate sets are scored exactly (so is everything once the graph failed).
    if (!f.graph || f_count <= ef_q * 2 * f.params.m) {
        return exact_hits(f, scorer, filter, k, f_count);
    }
    if (std::optional<std::vector<Hit>> hits =
            graph_hits(f, scorer, query, filter, k, ef_q, f_count)) {
        return std::move(*hits);
    }
    return exact_hits(f, scorer, filter, k, f_count);
}

bool VectorIndexes::has_retired(engine::CollectionId c, uint16_t slot) const {
    auto it = fields_.find({c.v, slot});
    if (it == fields_.end()) return false;
    const Field& f = *it->second;
    return f.node_docs.size() > f.doc_node.size();
}

engine::Status VectorIndexes::rebuild_graph(engine::CollectionId c, uint16_t slot) {
    auto it = fields_.find({c.v, slot});
    if (it == fields_.end()) return Status::ok();
    Field& f = *it->second;
    // The live vectors, in ascending id: the rebuilt graph holds no retired node.
    Rows rows;
    rows.dim = f.dim;
    std::vector<std::pair<uint64_t, uint32_t>> live(f.doc_node.begin(), f.doc_node.end());
    std::sort(live.begin(), live.end());
    for (const auto& [doc, node] : live) {
        rows.ids.push_back(doc);
        const std::span<const float> v = f.vec(node);
        rows.vecs.insert(rows.vecs.end(), v.begin(), v.end());
    }
    rebuild(f, rows);
    ++stats_.rebuilt;
    return Status::ok();
}

uint64_t VectorIndexes::memory_bytes() const {
    uint64_t bytes = 0;
    for (const auto& [key, f] : fields_) bytes += f->memory_bytes();
    return bytes;
}

bool VectorIndexes::has(engine::CollectionId c, uint16_t slot) const {
    return fields_.contains({c.v, slot});
}

VectorFieldStats VectorIndexes::field_stats(engine::CollectionId c, uint16_t slot) const {
    VectorFieldStats s;
    auto it = fields_.find({c.v, slot});
    if (it == fields_.end()) return s;
    s.live = it->second->doc_node.size();
    s.nodes = it->second->node_docs.size();
    s.usable = !it->second->failed();
    s.graph = it->second->graph != nullptr;
    return s;
}

}  // namespace fenec::index
