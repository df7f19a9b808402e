// bench/near_bench.cc: what `near` costs (issue 4, "Show"), each figure against a baseline in the
// same run, on N clustered 128-dimension vectors (cosine, m 16, ef_construction 200, ef_search
// 100; N = 100,000, or FENEC_NEAR_BENCH_N):
//   - `near` k = 10 through index::VectorIndexes (graph path, re-scoring in double) against raw
//     hnswlib searchKnn at the same parameters on the same vectors (our overhead as a ratio), and
//     against an exact scan (VectorIndexes asked with ef large enough that rule 1 scores all rows);
//   - reopening the tenant with its persisted graph (restored) against reopening it after a
//     write that makes the graph unfit (rebuilt).
// Latencies are per query; p50 is reported as a counter. hnswlib is included here only as the
// baseline (wrapped in a namespace, see below); Fenec reaches it through index/hnsw_index.cc alone.
// Files live under /tmp/fenec-nearbench-* and are removed.
#include <assert.h>
#include <benchmark/benchmark.h>
#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/database.h"
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

size_t rows_wanted() {
    const char* n = std::getenv("FENEC_NEAR_BENCH_N");
    return n ? std::strtoull(n, nullptr, 10) : 100'000;
}

struct Tenant {
    index::IndexSet set;
    index::VectorIndexes vec;
    std::unique_ptr<engine::Database> db;
    Tenant() { set.add_extension(&vec); }
    engine::OpenOptions options() {
        engine::OpenOptions o;
        o.tenant = "bench";
        o.hook = &set;
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
    double p50_fenec_us = 0, p50_raw_us = 0, p50_exact_us = 0;
    double open_restore_s = 0, open_rebuild_s = 0;

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
        build_raw();
        build_fenec();
    }
    ~World() {
        if (tenant.db) (void)tenant.db->close().is_ok();
        std::filesystem::remove_all(dir);
    }

    void build_fenec() {
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
        const auto t0 = Clock::now();
        for (size_t at = 0; at < n; at += 5000) {
            auto b = tenant.db->begin();
            if (!b) std::abort();
            if (at == 0) c = *b->create_collection("v", s);
            for (size_t i = at; i < std::min(n, at + 5000); ++i) {
                engine::VectorF32 v{{vecs.begin() + i * kDim, vecs.begin() + (i + 1) * kDim}};
                if (!b->insert(c, std::nullopt, {{0, v}})) std::abort();
            }
            if (!b->commit()) std::abort();
        }
        build_fenec_s = std::chrono::duration<double>(Clock::now() - t0).count();
    }

    static std::vector<float> unit(const float* v) {
        double s = 0;
        for (uint32_t i = 0; i < kDim; ++i) s += double(v[i]) * v[i];
        std::vector<float> u(v, v + kDim);
        for (float& x : u) x = float(x / std::sqrt(s));
        return u;
    }

    void build_raw() {
        const auto t0 = Clock::now();
        space = std::make_unique<hnswlib::InnerProductSpace>(kDim);
        raw = std::make_unique<hnswlib::HierarchicalNSW<float>>(space.get(), n, kParams.m,
                                                                kParams.ef_construction, 100);
        for (size_t i = 0; i < n; ++i) raw->addPoint(unit(vecs.data() + i * kDim).data(), i + 1);
        raw->setEf(kParams.ef_search);
        build_raw_s = std::chrono::duration<double>(Clock::now() - t0).count();
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

void BM_NearFenec(benchmark::State& state) {
    World& w = world();
    per_query(
        state,
        [&](size_t q) {
            auto r = w.tenant.vec.near(w.c, 0, {w.queries.data() + q * kDim, kDim}, kK, 0, nullptr);
            if (!r || r->size() != kK) std::abort();
            benchmark::DoNotOptimize(r->data());
        },
        &w.p50_fenec_us);
}

void BM_NearRawHnswlib(benchmark::State& state) {
    World& w = world();
    per_query(
        state,
        [&](size_t q) {
            // The query normalised, as hnswlib's own users do for cosine; part of the query's cost.
            const std::vector<float> u = World::unit(w.queries.data() + q * kDim);
            auto r = w.raw->searchKnn(u.data(), kK);
            if (r.size() != kK) std::abort();
            benchmark::DoNotOptimize(r.top());
        },
        &w.p50_raw_us);
}

void BM_NearExactScan(benchmark::State& state) {
    World& w = world();
    per_query(
        state,
        [&](size_t q) {
            auto r =
                w.tenant.vec.near(w.c, 0, {w.queries.data() + q * kDim, kDim}, kK, w.n, nullptr);
            if (!r || r->size() != kK) std::abort();
            benchmark::DoNotOptimize(r->data());
        },
        &w.p50_exact_us);
}

// Reopens the tenant: first with the graph record a checkpoint wrote (restored), then after a
// write to the collection (rebuilt). One timed open each; the counters say which path ran.
void BM_Reopen(benchmark::State& state) {
    World& w = world();
    for (auto _ : state) {
        if (!w.tenant.db->checkpoint()) std::abort();
        if (!w.tenant.db->close()) std::abort();
        w.tenant.db.reset();
        const auto s0 = w.tenant.vec.stats();
        auto t0 = Clock::now();
        auto opened = engine::Database::open(w.path, w.tenant.options());
        w.open_restore_s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (!opened) std::abort();
        w.tenant.db = std::move(opened).value();
        state.counters["restored"] = double(w.tenant.vec.stats().restored - s0.restored);

        {
            auto b = w.tenant.db->begin();
            if (!b) std::abort();
            if (!b->insert(w.c, std::nullopt, {})) std::abort();  // a row without a vector
            if (!b->commit()) std::abort();
        }
        if (!w.tenant.db->close()) std::abort();
        w.tenant.db.reset();
        const auto s1 = w.tenant.vec.stats();
        t0 = Clock::now();
        opened = engine::Database::open(w.path, w.tenant.options());
        w.open_rebuild_s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (!opened) std::abort();
        w.tenant.db = std::move(opened).value();
        state.counters["rebuilt"] = double(w.tenant.vec.stats().rebuilt - s1.rebuilt);
    }
    state.counters["open_restore_ms"] = w.open_restore_s * 1e3;
    state.counters["open_rebuild_ms"] = w.open_rebuild_s * 1e3;
}

}  // namespace

BENCHMARK(BM_NearFenec)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_NearRawHnswlib)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
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
    std::printf("build: fenec (engine inserts + graph) %.1f s, raw hnswlib %.1f s\n",
                w.build_fenec_s, w.build_raw_s);
    std::printf("near p50: fenec %.1f us, raw hnswlib %.1f us, exact scan %.1f us\n",
                w.p50_fenec_us, w.p50_raw_us, w.p50_exact_us);
    if (w.p50_raw_us > 0) {
        std::printf("ratio fenec / raw hnswlib: %.2fx\n", w.p50_fenec_us / w.p50_raw_us);
    }
    if (w.p50_fenec_us > 0) {
        std::printf("ratio exact scan / fenec: %.1fx\n", w.p50_exact_us / w.p50_fenec_us);
    }
    if (w.open_restore_s > 0) {
        std::printf("reopen: restored %.0f ms, rebuilt %.0f ms, ratio rebuild / restore %.1fx\n",
                    w.open_restore_s * 1e3, w.open_rebuild_s * 1e3,
                    w.open_rebuild_s / w.open_restore_s);
    }
    benchmark::Shutdown();
    return 0;
}
