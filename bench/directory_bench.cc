// bench/directory_bench.cc: what one change of the router's directory costs as the directory
// grows. Every change (a create, a move's step, a failover's row) is one synced write block,
// then a new snapshot of the maps (shard/directory.h: copy on write, so reads never wait); a
// replica's placement reads a snapshot too. Measured at 1,000, 10,000 and 100,000 tenants, the
// first the baseline in the same run:
//   BM_PutTenant      put_tenant of one row: the write block, its fsync, the new snapshot
//   BM_CopyMaps       the snapshot's copy alone (what each change pays beside its write)
//   BM_CopyStdMaps    the baseline: the same tenants and replicas copied as the std::maps the
//                     snapshot held before CowMap (shard/cow_map.h)
//   BM_PlaceReplica   shard::place_replica over a snapshot (a create under --replicas), the
//                     copies per node read from the counts the snapshot carries
//                     (shard/copy_counts.h)
//   BM_PlaceReplicaCountingAll  the baseline: the same with no counts kept, every tenant walked
// The directory lives in $TMPDIR (default /tmp), loaded in one block (adopt_rows).
//
//   build/bench/directory_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "shard/directory.h"
#include "shard/placement.h"

namespace {

using fenec::shard::Directory;
using fenec::shard::DirectoryMaps;
using fenec::shard::NodeRow;
using fenec::shard::RegionRows;
using fenec::shard::TenantRow;

std::string name_of(size_t i) {
    char b[32];
    std::snprintf(b, sizeof b, "tenant-%07zu", i);
    return b;
}

// A directory of `tenants` rows on four nodes, each with a lineage (16 hex, as a node answers),
// a quarter of them with a replica. One per size, kept for the process.
Directory& directory_of(size_t tenants) {
    static std::map<size_t, std::unique_ptr<Directory>> made;
    if (auto it = made.find(tenants); it != made.end()) return *it->second;
    const char* tmp = std::getenv("TMPDIR");
    const std::filesystem::path dir = std::filesystem::path(tmp ? tmp : "/tmp") /
                                      ("fenec-directory-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / ("d" + std::to_string(tenants) + ".fenec")).string();
    auto opened = Directory::open(path);
    if (!opened.is_ok()) {
        std::fprintf(stderr, "%s\n", opened.status().to_string().c_str());
        std::abort();
    }
    RegionRows rows;
    for (int n = 1; n <= 4; ++n) {
        NodeRow node;
        node.name = "n" + std::to_string(n);
        node.addr = "127.0.0.1:" + std::to_string(9000 + n);
        node.token_env = "FENEC_BENCH_TOKEN";  // named, so no sidecar write per node
        rows.nodes.push_back(node);
    }
    for (size_t i = 0; i < tenants; ++i) {
        TenantRow t;
        t.name = name_of(i);
        t.node = "n" + std::to_string(1 + i % 4);
        t.lineage = "0123456789abcdef";
        rows.tenants.push_back(t);
        if (i % 4 == 0) rows.replicas.push_back({t.name, "n" + std::to_string(1 + (i + 1) % 4)});
    }
    if (auto st = (*opened)->adopt_rows(rows); !st.is_ok()) {
        std::fprintf(stderr, "%s\n", st.to_string().c_str());
        std::abort();
    }
    std::filesystem::remove_all(dir);  // the file stays open; gone at exit
    return *made.emplace(tenants, std::move(*opened)).first->second;
}

void BM_PutTenant(benchmark::State& state) {
    Directory& d = directory_of(static_cast<size_t>(state.range(0)));
    TenantRow row = d.maps()->tenants.begin()->second;
    size_t i = 0;
    for (auto _ : state) {
        row.lineage = (++i % 2) ? "fedcba9876543210" : "0123456789abcdef";
        if (auto st = d.put_tenant(row); !st.is_ok()) state.SkipWithError(st.to_string().c_str());
    }
}

void BM_CopyMaps(benchmark::State& state) {
    Directory& d = directory_of(static_cast<size_t>(state.range(0)));
    const std::shared_ptr<const DirectoryMaps> maps = d.maps();
    for (auto _ : state) {
        auto copy = std::make_shared<DirectoryMaps>(*maps);
        benchmark::DoNotOptimize(copy);
    }
}

void BM_CopyStdMaps(benchmark::State& state) {
    Directory& d = directory_of(static_cast<size_t>(state.range(0)));
    const std::shared_ptr<const DirectoryMaps> maps = d.maps();
    struct Before {
        std::map<std::string, TenantRow, std::less<>> tenants;
        std::map<std::string, std::string, std::less<>> replicas;
    };
    auto before = std::make_shared<Before>();
    for (const auto& [name, row] : maps->tenants) before->tenants.emplace(name, row);
    for (const auto& [name, node] : maps->replicas) before->replicas.emplace(name, node);
    for (auto _ : state) {
        auto copy = std::make_shared<Before>(*before);
        benchmark::DoNotOptimize(copy);
    }
}

void BM_PlaceReplica(benchmark::State& state) {
    Directory& d = directory_of(static_cast<size_t>(state.range(0)));
    const std::shared_ptr<const DirectoryMaps> maps = d.maps();
    const TenantRow& row = maps->tenants.begin()->second;
    for (auto _ : state) {
        auto placed = fenec::shard::place_replica(*maps, row, {});
        benchmark::DoNotOptimize(placed);
    }
}

// The baseline: the same placement over the same rows with no counts kept, each placement
// walking every tenant (as every one did before shard/copy_counts.h).
void BM_PlaceReplicaCountingAll(benchmark::State& state) {
    Directory& d = directory_of(static_cast<size_t>(state.range(0)));
    DirectoryMaps maps = *d.maps();
    maps.counted = nullptr;
    const TenantRow& row = maps.tenants.begin()->second;
    for (auto _ : state) {
        auto placed = fenec::shard::place_replica(maps, row, {});
        benchmark::DoNotOptimize(placed);
    }
}

BENCHMARK(BM_PutTenant)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CopyMaps)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CopyStdMaps)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlaceReplica)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlaceReplicaCountingAll)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
