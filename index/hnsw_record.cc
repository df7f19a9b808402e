// index/hnsw_record.cc: the checks a graph record passes before a restore (index/hnsw_record.h),
// each node's checked in parts on threads of their own, and in_parts itself.
#include "index/hnsw_record.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "engine/limits.h"

namespace fenec::index::hnsw {

namespace fb = fenec::format;

engine::Status unfit(const std::string& why) {
    return engine::Status::error(engine::Code::corruption, why);
}

namespace {

// Nodes from which a restore's per-node work is split across threads: below it a thread costs
// more than it saves. A 100,000-node graph's fill (its 65 MB of node memory first touched, each
// vector normalised) is ~50 ms on one core.
constexpr size_t kPartNodesMin = 16384;
constexpr unsigned kPartsMax = 4;

// The record's Graph table, when it is one written for this field with its parameters, its node
// arrays of one length and its entry point a node at max_level.
engine::Result<GraphTable> graph_table(std::span<const std::byte> body, engine::CollectionId c,
                                       uint16_t slot, uint32_t dim,
                                       const engine::HnswParams& params) {
    const auto* data = reinterpret_cast<const uint8_t*>(body.data());
    flatbuffers::Verifier verifier(data, body.size(), engine::limits::verifier_depth_max,
                                   engine::limits::verifier_tables_max);
    if (!verifier.VerifyBuffer<fb::Graph>(nullptr)) return unfit("not a Graph table");
    const fb::Graph* g = flatbuffers::GetRoot<fb::Graph>(data);
    if (g->version() != kGraphVersion) return unfit("unknown version");
    if (g->collection() != c.v || g->slot() != slot) return unfit("another field's graph");
    if (g->dim() != dim) return unfit("dimension differs");
    const fb::HnswParams* p = g->params();
    if (!p || static_cast<uint8_t>(p->metric()) != static_cast<uint8_t>(params.metric) ||
        p->m() != params.m || p->ef_construction() != params.ef_construction ||
        p->ef_search() != params.ef_search) {
        return unfit("parameters differ");
    }
    GraphTable t;
    t.g = g;
    t.n = size_of(g->node_docs());
    t.m = params.m;
    t.stride0 = 1 + 2 * t.m;
    t.upper_size = size_of(g->upper());
    t.max_level = g->max_level();
    if (t.n >= (uint64_t{1} << 32) - 1) return unfit("too many nodes");
    if (size_of(g->levels()) != t.n || size_of(g->upper_ends()) != t.n ||
        size_of(g->level0()) != t.n * t.stride0) {
        return unfit("node arrays differ in length");
    }
    if (t.n > 0 && (g->entry() >= t.n || g->levels()->Get(g->entry()) != t.max_level)) {
        return unfit("entry point invalid");
    }
    return t;
}
// What is wrong with node i's links, or null: a level above max_level, more links than m allows,
// a link to no node, upper lists that do not end where upper_ends says. `pos` is where its upper
// lists start in `upper`, and is moved past them.
const char* node_fault(const GraphTable& t, size_t i, size_t& pos) {
    const fb::Graph* g = t.g;
    const int level = g->levels()->Get(i);
    if (level > t.max_level) return "node above max_level";
    const uint32_t count0 = g->level0()->Get(i * t.stride0);
    if (count0 > 2 * t.m) return "too many level-0 links";
    for (size_t j = 0; j < count0; ++j) {
        if (g->level0()->Get(i * t.stride0 + 1 + j) >= t.n) return "link out of range";
    }
    for (int l = 1; l <= level; ++l) {
        if (pos >= t.upper_size) return "upper links truncated";
        const uint32_t count = g->upper()->Get(pos);
        if (count > t.m || pos + 1 + count > t.upper_size) return "bad upper link list";
        for (size_t j = 0; j < count; ++j) {
            if (g->upper()->Get(pos + 1 + j) >= t.n) return "link out of range";
        }
        pos += 1 + count;
    }
    if (g->upper_ends()->Get(i) != pos) return "upper_ends inconsistent";
    return nullptr;
}

// Every node's links checked (node_fault), and the retired nodes counted. Each node is checked on
// its own -- its upper lists start where upper_ends says the node before it ends, and must end
// where its own entry says -- so the nodes are checked in parts on threads of their own. The
// fault told is the first node's, as a scan from the front would find it.
engine::Result<size_t> check_links(const GraphTable& t) {
    std::atomic<size_t> retired{0};
    std::mutex fault_mu;
    const char* fault = nullptr;
    size_t fault_node = t.n;
    const bool checked = in_parts(t.n, [&](size_t lo, size_t hi) {
        size_t retired_here = 0;
        size_t pos = lo == 0 ? 0 : t.g->upper_ends()->Get(lo - 1);
        for (size_t i = lo; i < hi; ++i) {
            if (t.g->node_docs()->Get(i) == 0) ++retired_here;
            if (const char* why = node_fault(t, i, pos)) {
                std::lock_guard lock(fault_mu);
                if (i < fault_node) {
                    fault_node = i;
                    fault = why;
                }
                return false;
            }
        }
        retired += retired_here;
        return true;
    });
    if (!checked) return unfit(fault ? fault : "a check failed");
    if ((t.n == 0 ? 0 : t.g->upper_ends()->Get(t.n - 1)) != t.upper_size) {
        return unfit("upper has trailing words");
    }
    return retired.load();
}

// Where each node's vector comes from: its document's row, or (retired) the record's next retired
// vector. Every live node's document must hold a vector, and no document two live nodes. Nodes in
// the documents' id order with none retired (a tenant loaded in id order and never rewritten
// since) need no lookup. The caller has checked there are as many live nodes as rows.
engine::Result<std::vector<uint32_t>> vector_sources(const GraphTable& t,
                                                     std::span<const uint64_t> row_ids,
                                                     size_t retired) {
    std::vector<uint32_t> source(t.n);
    bool in_row_order = retired == 0;
    for (size_t i = 0; in_row_order && i < t.n; ++i) {
        in_row_order = t.g->node_docs()->Get(i) == row_ids[i];
    }
    if (in_row_order) {
        for (size_t i = 0; i < t.n; ++i) source[i] = static_cast<uint32_t>(i);
        return source;
    }
    std::unordered_map<uint64_t, uint32_t> row_of;
    row_of.reserve(row_ids.size());
    for (size_t r = 0; r < row_ids.size(); ++r)
        row_of.emplace(row_ids[r], static_cast<uint32_t>(r));
    std::vector<bool> seen(row_ids.size(), false);
    uint32_t next_retired = 0;
    for (size_t i = 0; i < t.n; ++i) {
        const uint64_t doc = t.g->node_docs()->Get(i);
        if (doc == 0) {
            source[i] = kRetiredBit | next_retired++;
            continue;
        }
        auto it = row_of.find(doc);
        if (it == row_of.end()) return unfit("a live node's document holds no vector");
        if (seen[it->second]) return unfit("a document has two live nodes");
        seen[it->second] = true;
        source[i] = it->second;
    }
    return source;
}

}  // namespace

engine::Result<FitRecord> check_record(std::span<const std::byte> body, engine::CollectionId c,
                                       uint16_t slot, uint32_t dim,
                                       const engine::HnswParams& params,
                                       std::span<const uint64_t> row_ids) {
    FitRecord fit;
    FENEC_ASSIGN_OR_RETURN(fit.table, graph_table(body, c, slot, dim, params));
    FENEC_ASSIGN_OR_RETURN(fit.retired, check_links(fit.table));
    if (size_of(fit.table.g->retired_vectors()) != fit.retired * dim) {
        return unfit("retired vectors size");
    }
    if (fit.table.n - fit.retired != row_ids.size()) {
        return unfit("live node count differs from documents");
    }
    FENEC_ASSIGN_OR_RETURN(fit.source, vector_sources(fit.table, row_ids, fit.retired));
    return fit;
}

bool in_parts(size_t n, const std::function<bool(size_t lo, size_t hi)>& part) {
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    const size_t parts =
        std::min<size_t>({cpus, kPartsMax, std::max<size_t>(1, n / kPartNodesMin)});
    if (parts <= 1) return part(size_t{0}, n);
    std::vector<std::thread> threads;
    std::vector<char> ok(parts, 0);
    const size_t step = (n + parts - 1) / parts;
    size_t covered = step;  // [0, covered): this thread's first part and the threads'
    for (size_t k = 1; k < parts && covered < n; ++k) {
        const size_t lo = covered;
        const size_t hi = std::min(n, lo + step);
        try {
            threads.emplace_back([&ok, &part, k, lo, hi] { ok[k] = part(lo, hi) ? 1 : 0; });
        } catch (const std::system_error&) {
            break;
        }
        covered = hi;
    }
    bool all = part(size_t{0}, std::min(step, n));
    if (covered < n) all = part(covered, n) && all;  // a thread that could not be started
    for (std::thread& t : threads) t.join();
    for (size_t k = 1; k <= threads.size(); ++k) all = all && ok[k] != 0;
    return all;
}

}  // namespace fenec::index::hnsw
