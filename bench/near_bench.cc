// bench/near_bench.cc: what `near` costs (issue 4, "Show"; issue 18 item 7), each figure against a
// baseline in the same run, on N clustered 128-dimension vectors (cosine, m 16, ef_construction
// 200, ef_search 100; N = 100,000, or FENEC_NEAR_BENCH_N):
//   - building the graph: N rows inserted through the engine and index::VectorIndexes (5,000 a
//     block) against raw hnswlib addPoint of the same unit vectors at the same m, ef_construction
//     and level seed, both on this one thread. The two are built in turns, 5,000 rows each (which
//     side goes first alternates), so a change in the machine's load touches both alike; the
//     ratio is of the summed times, and the chunks' own ratios give its spread. Both graphs are
//     then compared link for link: the same parameters give the same graph, so any difference in
//     time is the adapter's, not hnswlib's work. Each side's minor page faults are counted
//     (getrusage) while it builds. FENEC_NEAR_BENCH_RAW_HUGE=1 gives raw hnswlib's level-0 block
//     the same transparent huge pages ours has (MADV_HUGEPAGE on its malloc'd block): the
//     allocation choice measured apart from the rest of the adapter;
//   - `near` k = 10 through index::VectorIndexes (graph path, re-scoring in double) against raw
//     hnswlib searchKnn at the same parameters on the same vectors, asked in turns query by query
//     (BM_NearPair; --benchmark_repetitions gives the spread), and against an exact scan
//     (VectorIndexes asked with ef large enough that rule 1 scores all rows);
//   - reopening the tenant with its persisted graph (restored) against reopening it after 1,000
//     and then 10,000 rows written since the graph record (restored and the writes applied,
//     engine.md §6.3; a build without the change set rebuilds);
//   - issue 18 item 2's cold open: the tenant closed and opened again to its first `near`
//     answer, from the page cache (in GB/s, goal >= 1) and from a cold page cache (its pages
//     dropped with posix_fadvise), each against the file read as dd reads it (a 1 MiB buffer) in
//     the same turn (goal <= 1.3x cold); five turns. The rows carry a vector and nothing else
//     (the shape adds a title of a few bytes). The baseline of the read in slices beside
//     the replay (OpenOptions::open_slice_bytes) is the same open with one read first, in the
//     same turns.
// Latencies are per query; p50 is reported as a counter. hnswlib is included here only as the
// baseline (wrapped in a namespace, see below); Fenec reaches it through index/hnsw_index.cc alone.
// Files live under /tmp/fenec-nearbench-* and are removed.
#include <assert.h>
#include <benchmark/benchmark.h>
#include <cpuid.h>
#include <fcntl.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <list>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/database.h"
#include "engine/format.h"
#include "engine/format_generated.h"
#include "engine/huge_pages.h"
#include "index/hnsw_index.h"
#include "index/index_set.h"

// hnswlib 0.6.2's headers define non-inline functions and variables (cpuid, the SIMD function
// pointers), so a second copy in this program collides at link with index/hnsw_index.cc's. The
// baseline's copy lives in its own namespace; every header it includes is included above first.
namespace baseline {
#include <hnswlib/hnswlib.h>  // NOLINT: inside a namespace on purpose
}  // namespace baseline
namespace hnswlib = baseline::hnswlib;

namespace {

using namespace fenec;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kDim = 128;
constexpr size_t kClusters = 100;
constexpr size_t kQueries = 1000;
constexpr size_t kK = 10;
constexpr engine::HnswParams kParams{engine::Metric::cosine, 16, 200, 100};

bool raw_huge() {
    const char* h = std::getenv("FENEC_NEAR_BENCH_RAW_HUGE");
    return h && std::string(h) == "1";
}

// MADV_HUGEPAGE on the whole pages of [p, p + bytes): what engine/huge_pages.h asks of the kernel.
void advise_huge(void* p, size_t bytes) {
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
    if (hi > lo && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) != 0) {
        std::perror("madvise");
    }
}

// Freed huge pages kept for reuse in BM_Reopen (engine/huge_pages.h): the node's default
// (--huge-pool 256) unless FENEC_NEAR_BENCH_HUGE_POOL_MIB says otherwise (0: none).
size_t huge_pool_bytes() {
    const char* m = std::getenv("FENEC_NEAR_BENCH_HUGE_POOL_MIB");
    return (m ? std::strtoull(m, nullptr, 10) : 256) << 20;
}

// A pause between a tenant's close and its reopen (FENEC_NEAR_BENCH_IDLE_MS, default 0): a node
// reopens a tenant after it was closed idle (--close-idle, 300 s), by which time a host that
// takes a guest's free memory back (free page reporting: ~2 s) has taken what the close freed.
std::chrono::milliseconds idle_before_reopen() {
    const char* i = std::getenv("FENEC_NEAR_BENCH_IDLE_MS");
    return std::chrono::milliseconds(i ? std::strtoull(i, nullptr, 10) : 0);
}

size_t rows_wanted() {
    const char* n = std::getenv("FENEC_NEAR_BENCH_N");
    return n ? std::strtoull(n, nullptr, 10) : 100'000;
}

// The tenant as the node keeps one: an IndexSet, whose own VectorIndexes (set.vectors()) holds
// the graph. (Until 2026-12-03 this bench also added a VectorIndexes of its own as an extension,
// so every row went into two graphs and "ours" built twice the graphs raw hnswlib did.)
struct Tenant {
    std::unique_ptr<index::IndexSet> set = std::make_unique<index::IndexSet>();
    std::unique_ptr<engine::Database> db;
    const index::VectorIndexes& vec() const { return set->vectors(); }
    // Closed as the node closes a tenant: the database and its indexes freed, so the next open
    // builds a fresh IndexSet (server/node/registry.cc) and frees nothing on its own path.
    void close() {
        if (!db->close()) std::abort();
        db.reset();
        set = std::make_unique<index::IndexSet>();
    }
    engine::OpenOptions options() {
        engine::OpenOptions o;
        o.tenant = "bench";
        o.hook = set.get();
        o.sync = engine::SyncPolicy::at_close();
        return o;
    }
};

struct World {
    std::string dir;
    std::string path;
    size_t n = 0;
    std::vector<float> vecs;     // n * kDim
    std::vector<float> queries;  // kQueries * kDim
    Tenant tenant;
    engine::CollectionId c;
    std::unique_ptr<hnswlib::InnerProductSpace> space;
    std::unique_ptr<hnswlib::HierarchicalNSW<float>> raw;
    double build_fenec_s = 0, build_raw_s = 0;
    std::vector<double> chunk_ratios;       // fenec / raw, per 5,000-row chunk
    long faults_fenec = 0, faults_raw = 0;  // minor page faults while each side was building
    size_t graph_differences = 0;  // nodes whose levels or links differ between the two graphs
    double p50_fenec_us = 0, p50_raw_us = 0, p50_exact_us = 0;  // the last repetition's
    std::vector<double> pair_ratios;                            // fenec / raw p50, per repetition
    double open_restore_s = 0;
    // Opens after rows written since the graph record: restored and the writes applied, or (before
    // engine.md §6.3's change set was kept) the graph rebuilt.
    struct AfterWrites {
        size_t writes = 0;
        double open_s = 0;
        uint64_t restored = 0, rebuilt = 0;
    };
    std::vector<AfterWrites> after_writes;
    // Issue 18 item 2, per turn: the open to the first `near` answer and the file read as dd
    // reads it, from the page cache (warm) and from a cold one; and the file's bytes.
    std::vector<double> open_warm_s, read_warm_s, open_cold_s, read_cold_s;
    // The same opens with the file read in one read before the replay (open_slice_bytes 0), in the
    // same turns: the baseline of the read in slices beside the replay.
    std::vector<double> one_read_warm_s, one_read_cold_s;
    uint64_t file_bytes = 0;

    World() {
        n = rows_wanted();
        char tmpl[] = "/tmp/fenec-nearbench-XXXXXX";
        dir = mkdtemp(tmpl);
        path = dir + "/t.fenec";
        std::mt19937_64 rng(2024);
        std::normal_distribution<float> g(0, 1), noise(0, 0.25f);
        std::vector<float> centres(kClusters * kDim);
        for (float& x : centres) x = g(rng);
        auto draw = [&](std::vector<float>& out) {
            const float* c0 = centres.data() + (rng() % kClusters) * kDim;
            for (uint32_t i = 0; i < kDim; ++i) out.push_back(c0[i] + noise(rng));
        };
        vecs.reserve(n * kDim);
        for (size_t i = 0; i < n; ++i) draw(vecs);
        for (size_t i = 0; i < kQueries; ++i) draw(queries);
        build_both();
        graph_differences = compare_graphs();
    }
    ~World() {
        if (tenant.db) (void)tenant.db->close().is_ok();
        std::filesystem::remove_all(dir);
    }

    static std::vector<float> unit(const float* v) {
        double s = 0;
        for (uint32_t i = 0; i < kDim; ++i) s += double(v[i]) * v[i];
        std::vector<float> u(v, v + kDim);
        for (float& x : u) x = float(x / std::sqrt(s));
        return u;
    }

    // Rows [lo, hi) through the engine, one block; seconds.
    static long minor_faults() {
        rusage u{};
        getrusage(RUSAGE_SELF, &u);
        return u.ru_minflt;
    }

    double fenec_chunk(size_t lo, size_t hi) {
        const long f0 = minor_faults();
        const auto t0 = Clock::now();
        auto b = tenant.db->begin();
        if (!b) std::abort();
        for (size_t i = lo; i < hi; ++i) {
            engine::VectorF32 v{{vecs.begin() + i * kDim, vecs.begin() + (i + 1) * kDim}};
            if (!b->insert(c, std::nullopt, {{0, v}})) std::abort();
        }
        if (!b->commit()) std::abort();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        faults_fenec += minor_faults() - f0;
        return s;
    }

    // Rows [lo, hi) into the raw graph, normalised as hnswlib's users do for cosine; seconds.
    double raw_chunk(size_t lo, size_t hi) {
        const long f0 = minor_faults();
        const auto t0 = Clock::now();
        for (size_t i = lo; i < hi; ++i) raw->addPoint(unit(vecs.data() + i * kDim).data(), i);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        faults_raw += minor_faults() - f0;
        return s;
    }

    // Both graphs built in turns, 5,000 rows at a time, the side that goes first alternating.
    void build_both() {
        auto created = engine::Database::create(path, tenant.options());
        if (!created) std::abort();
        tenant.db = std::move(created).value();
        engine::Schema s;
        engine::FieldDesc f;
        f.name = "e";
        f.type = engine::make_vector(kDim);
        f.index.kind = engine::IndexKind::hnsw;
        f.index.hnsw = kParams;
        s.fields.push_back(f);
        {
            auto b = tenant.db->begin();
            if (!b) std::abort();
            c = *b->create_collection("v", s);
            if (!b->commit()) std::abort();
        }
        space = std::make_unique<hnswlib::InnerProductSpace>(kDim);
        raw = std::make_unique<hnswlib::HierarchicalNSW<float>>(space.get(), n, kParams.m,
                                                                kParams.ef_construction, 100);
        raw->setEf(kParams.ef_search);
        if (raw_huge()) advise_huge(raw->data_level0_memory_, n * raw->size_data_per_element_);
        constexpr size_t kChunk = 5000;
        for (size_t at = 0, turn = 0; at < n; at += kChunk, ++turn) {
            const size_t hi = std::min(n, at + kChunk);
            double fenec_s = 0, raw_s = 0;
            if (turn % 2 == 0) {
                raw_s = raw_chunk(at, hi);
                fenec_s = fenec_chunk(at, hi);
            } else {
                fenec_s = fenec_chunk(at, hi);
                raw_s = raw_chunk(at, hi);
            }
            build_fenec_s += fenec_s;
            build_raw_s += raw_s;
            chunk_ratios.push_back(fenec_s / raw_s);
        }
    }

    // The nodes whose level or links differ between our graph (read from its graph record) and
    // the raw one. Both number nodes in insertion order, draw levels from the same seed and link
    // the same float vectors, so 0 says the parameters are the same.
    size_t compare_graphs() {
        auto bytes =
            tenant.set->encode_graph(c, 0, engine::Seq{1}, engine::format::kNoDurableStamp);
        if (!bytes) std::abort();
        const auto* g = flatbuffers::GetRoot<format::Graph>(bytes->data());
        if (g->node_docs()->size() != n) return n;
        const size_t stride0 = 1 + 2 * size_t{kParams.m};
        size_t differ = 0;
        for (size_t i = 0; i < n; ++i) {
            const auto node = static_cast<hnswlib::tableint>(i);
            bool same = g->levels()->Get(i) == raw->element_levels_[i];
            const hnswlib::linklistsizeint* ll = raw->get_linklist0(node);
            const size_t count = raw->getListCount(const_cast<hnswlib::linklistsizeint*>(ll));
            same = same && g->level0()->Get(i * stride0) == count;
            for (size_t j = 0; same && j < count; ++j) {
                same = g->level0()->Get(i * stride0 + 1 + j) == ll[1 + j];
            }
            if (!same) ++differ;
        }
        return differ;
    }
};

World& world() {
    static World w;
    return w;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
}

template <class F>
void per_query(benchmark::State& state, F&& query, double* p50_out) {
    std::vector<double> us;
    size_t i = 0;
    for (auto _ : state) {
        const auto t0 = Clock::now();
        query(i++ % kQueries);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    *p50_out = median(us);
    state.counters["p50_us"] = *p50_out;
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// One iteration asks the same query of both, ours and raw hnswlib's, in turns (which goes first
// alternates): the two p50s come from the same moments of the machine's load.
void BM_NearPair(benchmark::State& state) {
    World& w = world();
    std::vector<double> fenec_us, raw_us;
    size_t i = 0;
    for (auto _ : state) {
        const size_t q = i % kQueries;
        const float* query = w.queries.data() + q * kDim;
        auto ours = [&] {
            const auto t0 = Clock::now();
            auto r = w.tenant.vec().near(w.c, 0, {query, kDim}, kK, 0, nullptr);
            fenec_us.push_back(
                std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            if (!r || r->size() != kK) std::abort();
            benchmark::DoNotOptimize(r->data());
        };
        auto theirs = [&] {
            const auto t0 = Clock::now();
            // The query normalised, as hnswlib's own users do for cosine; part of its cost.
            const std::vector<float> u = World::unit(query);
            auto r = w.raw->searchKnn(u.data(), kK);
            raw_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            if (r.size() != kK) std::abort();
            benchmark::DoNotOptimize(r.top());
        };
        if (i++ % 2 == 0) {
            ours();
            theirs();
        } else {
            theirs();
            ours();
        }
    }
    w.p50_fenec_us = median(fenec_us);
    w.p50_raw_us = median(raw_us);
    w.pair_ratios.push_back(w.p50_fenec_us / w.p50_raw_us);
    state.counters["fenec_p50_us"] = w.p50_fenec_us;
    state.counters["raw_p50_us"] = w.p50_raw_us;
    state.counters["ratio"] = w.p50_fenec_us / w.p50_raw_us;
}

void BM_NearExactScan(benchmark::State& state) {
    World& w = world();
    per_query(
        state,
        [&](size_t q) {
            auto r =
                w.tenant.vec().near(w.c, 0, {w.queries.data() + q * kDim, kDim}, kK, w.n, nullptr);
            if (!r || r->size() != kK) std::abort();
            benchmark::DoNotOptimize(r->data());
        },
        &w.p50_exact_us);
}

// The file's pages dropped from the page cache (it is clean: closed, synced).
void drop_page_cache(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) std::abort();
    ::close(fd);
}

// The file at `path` read whole as `dd bs=1M of=/dev/null` reads it: one 1 MiB buffer used again
// and again, so the time is the page cache's copy (and, cold, the disk's reads), nothing kept.
// `cold`: its pages dropped from the page cache first (the file is clean: closed, synced).
double read_like_dd_s(const std::string& path, bool cold) {
    if (cold) drop_page_cache(path);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) std::abort();
    std::vector<std::byte> buf(1 << 20);
    const auto t0 = Clock::now();
    for (;;) {
        const ssize_t got = ::read(fd, buf.data(), buf.size());
        if (got < 0) std::abort();
        if (got == 0) break;
        benchmark::DoNotOptimize(buf.data());
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    ::close(fd);
    return s;
}

// The tenant closed (its graph record current, as a close or idle close leaves it) and opened
// again to its first `near` answer: a node's first request to a tenant it closed when idle.
// `cold`: the file's pages dropped from the page cache first. `slice`: the open's
// open_slice_bytes (0: one read, then the replay). Returns the open's seconds.
double reopen_to_first_answer_s(World& w, bool cold, uint64_t slice) {
    w.tenant.close();
    if (cold) drop_page_cache(w.path);
    std::this_thread::sleep_for(idle_before_reopen());
    const auto s0 = w.tenant.vec().stats();
    engine::OpenOptions o = w.tenant.options();
    o.open_slice_bytes = slice;
    const auto t0 = Clock::now();
    auto opened = engine::Database::open(w.path, o);
    if (!opened) std::abort();
    w.tenant.db = std::move(opened).value();
    auto r = w.tenant.vec().near(w.c, 0, {w.queries.data(), kDim}, kK, 0, nullptr);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!r || r->size() != kK) std::abort();
    if (w.tenant.vec().stats().restored != s0.restored + 1) std::abort();  // not rebuilt
    return s;
}

// Reopens the tenant: first with the graph record a checkpoint wrote (restored), then after rows
// written since it (restored and applied, or rebuilt). One timed open each; the counters and the
// summary say which path ran.
// Before them, issue 18 item 2's cold open: five turns, each the file read as dd reads it and the
// tenant reopened to its first answer twice (read in slices, and in one read), from the page
// cache and then from a cold page cache.
void BM_Reopen(benchmark::State& state) {
    World& w = world();
    engine::set_huge_pool_bytes(huge_pool_bytes());
    for (auto _ : state) {
        if (!w.tenant.db->checkpoint()) std::abort();
        w.file_bytes = std::filesystem::file_size(w.path);
        const uint64_t sliced = engine::OpenOptions{}.open_slice_bytes;
        for (int turn = 0; turn < 5; ++turn) {
            for (bool cold : {false, true}) {
                (cold ? w.read_cold_s : w.read_warm_s).push_back(read_like_dd_s(w.path, cold));
                // The two opens in turn, the one asked first changing every turn.
                for (int k = 0; k < 2; ++k) {
                    if ((k + turn) % 2 == 0) {
                        (cold ? w.open_cold_s : w.open_warm_s)
                            .push_back(reopen_to_first_answer_s(w, cold, sliced));
                    } else {
                        (cold ? w.one_read_cold_s : w.one_read_warm_s)
                            .push_back(reopen_to_first_answer_s(w, cold, 0));
                    }
                }
            }
        }
        w.tenant.close();
        const auto s0 = w.tenant.vec().stats();
        auto t0 = Clock::now();
        auto opened = engine::Database::open(w.path, w.tenant.options());
        w.open_restore_s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (!opened) std::abort();
        w.tenant.db = std::move(opened).value();
        state.counters["restored"] = double(w.tenant.vec().stats().restored - s0.restored);

        // Rows with vectors written after the record (1,000, then 9,000 more), each set followed
        // by an open: a crash's or a promoted replica's, with no graph record since the writes.
        size_t written = 0;
        for (size_t upto : {size_t{1000}, size_t{10000}}) {
            auto b = w.tenant.db->begin();
            if (!b) std::abort();
            for (; written < upto; ++written) {
                const float* src = w.vecs.data() + (written % w.n) * kDim;
                engine::VectorF32 v{{src, src + kDim}};
                v.v[0] += 0.01f;
                if (!b->insert(w.c, std::nullopt, {{0, v}})) std::abort();
            }
            if (!b->commit()) std::abort();
            w.tenant.close();
            const auto s1 = w.tenant.vec().stats();
            t0 = Clock::now();
            opened = engine::Database::open(w.path, w.tenant.options());
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            if (!opened) std::abort();
            w.tenant.db = std::move(opened).value();
            const auto s2 = w.tenant.vec().stats();
            w.after_writes.push_back({upto, s, s2.restored - s1.restored, s2.rebuilt - s1.rebuilt});
        }
    }
    const engine::HugePoolStats pool = engine::huge_pool_stats();
    state.counters["huge_pages_reused"] = double(pool.reused);
    state.counters["huge_pages_fresh"] = double(pool.fresh);
    engine::set_huge_pool_bytes(0);
    state.counters["open_restore_ms"] = w.open_restore_s * 1e3;
    for (const World::AfterWrites& a : w.after_writes) {
        state.counters["open_after_" + std::to_string(a.writes) + "_ms"] = a.open_s * 1e3;
    }
}

}  // namespace

// Fixed iterations: no estimating runs, so every call is one of the repetitions counted.
BENCHMARK(BM_NearPair)->Unit(benchmark::kMicrosecond)->Iterations(10 * kQueries)->Repetitions(5);
BENCHMARK(BM_NearExactScan)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_Reopen)->Unit(benchmark::kMillisecond)->Iterations(1);

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    World& w = world();
    std::printf(
        "\nN = %zu vectors, dim %u, cosine, m %u, ef_construction %u, ef_search %u, k %zu\n", w.n,
        kDim, kParams.m, kParams.ef_construction, kParams.ef_search, kK);
    auto spread = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? std::pair{0.0, 0.0} : std::pair{v.front(), v.back()};
    };
    const auto [chunk_lo, chunk_hi] = spread(w.chunk_ratios);
    std::printf("build, in turns: fenec (engine inserts + graph) %.1f s, raw hnswlib %.1f s\n",
                w.build_fenec_s, w.build_raw_s);
    std::printf("ratio build fenec / raw hnswlib: %.2fx (chunks %.2f-%.2f)\n",
                w.build_fenec_s / w.build_raw_s, chunk_lo, chunk_hi);
    std::printf("page faults while building: fenec %ld, raw hnswlib %ld (%.2f and %.2f a row)%s\n",
                w.faults_fenec, w.faults_raw, double(w.faults_fenec) / double(w.n),
                double(w.faults_raw) / double(w.n),
                raw_huge() ? ", raw's level 0 in huge pages" : "");
    std::printf("graphs: %zu of %zu nodes differ in level or level-0 links\n", w.graph_differences,
                w.n);
    std::printf(
        "near p50 (last repetition): fenec %.1f us, raw hnswlib %.1f us, exact scan %.1f us\n",
        w.p50_fenec_us, w.p50_raw_us, w.p50_exact_us);
    if (!w.pair_ratios.empty()) {
        const auto [lo, hi] = spread(w.pair_ratios);
        std::printf("ratio near p50 fenec / raw hnswlib: median %.2fx, %.2f-%.2f over %zu\n",
                    median(w.pair_ratios), lo, hi, w.pair_ratios.size());
    }
    if (w.p50_fenec_us > 0) {
        std::printf("ratio exact scan / fenec: %.1fx\n", w.p50_exact_us / w.p50_fenec_us);
    }
    if (w.open_restore_s > 0) {
        std::printf("reopen: restored %.0f ms\n", w.open_restore_s * 1e3);
        for (const World::AfterWrites& a : w.after_writes) {
            std::printf(
                "reopen after %zu rows written since the graph record: %.0f ms (%s), %.1fx the "
                "restore\n",
                a.writes, a.open_s * 1e3,
                a.restored == 1 ? "restored, the writes applied"
                                : (a.rebuilt == 1 ? "rebuilt" : "neither?"),
                a.open_s / w.open_restore_s);
        }
    }
    if (!w.open_warm_s.empty()) {
        // Issue 18 item 2: medians and spreads of five turns, each pair from the same turn.
        const double mb = double(w.file_bytes) / 1e6;
        auto ms = [&](const std::vector<double>& v) {
            const auto [lo, hi] = spread(v);
            std::printf("%.1f ms (%.1f-%.1f)", median(v) * 1e3, lo * 1e3, hi * 1e3);
        };
        std::vector<double> cold_ratio;
        for (size_t i = 0; i < w.open_cold_s.size(); ++i) {
            cold_ratio.push_back(w.open_cold_s[i] / w.read_cold_s[i]);
        }
        std::printf("cold open of the %.1f MB file to its first near answer, five turns:\n", mb);
        std::printf("  from the page cache: open ");
        ms(w.open_warm_s);
        std::printf(" = %.2f GB/s (goal >= 1 GB/s); the file read as dd reads it ", mb / 1e3 /
                                                                                    median(w.open_warm_s));
        ms(w.read_warm_s);
        std::printf("\n  from a cold page cache: open ");
        ms(w.open_cold_s);
        std::printf(", read as dd reads it ");
        ms(w.read_cold_s);
        const auto [rlo, rhi] = spread(cold_ratio);
        std::printf("; open / read median %.2fx (%.2f-%.2f; goal <= 1.3)\n", median(cold_ratio),
                    rlo, rhi);
        // The baseline: the same opens with one read before the replay, in the same turns.
        for (bool cold : {false, true}) {
            const auto& one = cold ? w.one_read_cold_s : w.one_read_warm_s;
            const auto& sliced = cold ? w.open_cold_s : w.open_warm_s;
            std::vector<double> ratio;
            for (size_t i = 0; i < one.size() && i < sliced.size(); ++i) {
                ratio.push_back(sliced[i] / one[i]);
            }
            const auto [lo, hi] = spread(ratio);
            std::printf("  %s: one read, then the replay ", cold ? "cold" : "page cache");
            ms(one);
            std::printf("; read in slices beside the replay / one read median %.2fx (%.2f-%.2f)\n",
                        median(ratio), lo, hi);
        }
    }
    benchmark::Shutdown();
    return 0;
}
