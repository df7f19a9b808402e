// bench/ql_bench.cc: what FenecQL's indexes and collations cost and save (issue 3, "Show"), each
// against its baseline in the same run:
//   - equality: `get r where k = $v` through @hash against the same read over an unindexed copy
//     (a scan);
//   - `set r {...} where k = $v` the same way, and `where _id = $n`: a write picks its rows as a
//     read does;
//   - `get r order s limit 20` over 1M rows through @sorted against the same over an unindexed
//     copy (a full sort);
//   - 1M names ordered `collate tr` against ordered by bytes (both full sorts, limit 20);
//   - the sort key of each of 100,000 names under `collate tr` and `collate tr` `nocase` against
//     the same names' keys by bytes (each a copy of the name): what a collated order, a sorted
//     index's write and the router's collated merge pay a row.
// Rows are written through the engine's API (fast set-up); the reads go through parse() and the
// executor as the node runs them. Files live under /tmp/fenec-qlbench-* and are removed.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "engine/database.h"
#include "index/collation.h"
#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"

namespace {

using namespace fenec;

constexpr uint64_t kEqRows = 200'000;
constexpr uint64_t kBigRows = 1'000'000;

struct Tenant {
    index::IndexSet indexes;
    std::unique_ptr<engine::Database> db;

    std::string run(const std::string& text) {
        auto parsed = ql::parse(text);
        if (!parsed) return "parse error: " + parsed.error().to_string();
        ql::Executor ex(*db, indexes);
        auto answer = ex.run(parsed.value(), {});
        if (!answer) return "error: " + answer.error().to_string();
        return ql::to_json(answer.value());
    }
};

std::string bench_dir() {
    static std::string dir = [] {
        char tmpl[] = "/tmp/fenec-qlbench-XXXXXX";
        const char* d = mkdtemp(tmpl);
        return std::string(d ? d : "/tmp");
    }();
    return dir;
}

// A tenant with `rows` rows of (k int, s int, name text); `schema` is the create statement.
// The bench's names: four of these syllables each, drawn by `rng`.
std::string random_name(std::mt19937_64& rng) {
    static const char* syllables[] = {"ça", "ğı", "Ir", "ka", "İs", "ön",
                                      "şu", "ay", "le", "Ün", "bo", "zi"};
    std::string name;
    for (int s = 0; s < 4; ++s) name += syllables[rng() % 12];
    return name;
}

std::unique_ptr<Tenant> make_tenant(const std::string& file, const std::string& schema, uint64_t rows) {
    auto t = std::make_unique<Tenant>();
    engine::OpenOptions o;
    o.hook = &t->indexes;
    o.sync = engine::SyncPolicy::at_close();
    const std::string path = bench_dir() + "/" + file;
    std::filesystem::remove(path);
    auto created = engine::Database::create(path, o);
    if (!created.is_ok()) std::abort();
    t->db = std::move(created).value();
    t->run(schema);
    std::mt19937_64 rng(7);
    for (uint64_t done = 0; done < rows;) {
        auto block = t->db->begin();
        const engine::CollectionId c = *block->find("r");
        for (uint64_t n = 0; n < 100'000 && done < rows; ++n, ++done) {
            const std::string name = random_name(rng);
            engine::Doc doc{{0, engine::Value(static_cast<int64_t>(rng() % 1000))},
                            {1, engine::Value(static_cast<int64_t>(rng()))},
                            {2, engine::Value(name)}};
            if (!block->put(c, std::nullopt, doc).is_ok()) std::abort();
        }
        if (!block->commit().is_ok()) std::abort();
    }
    return t;
}

Tenant& tenant(const std::string& which) {
    static std::map<std::string, std::unique_ptr<Tenant>> tenants;
    auto& t = tenants[which];
    if (!t) {
        if (which == "eq_hash") t = make_tenant(which, "create collection r (k int @hash, s int, name text)", kEqRows);
        if (which == "eq_scan") t = make_tenant(which, "create collection r (k int, s int, name text)", kEqRows);
        if (which == "big_sorted") t = make_tenant(which, "create collection r (k int, s int @sorted, name text)", kBigRows);
        if (which == "big_plain") t = make_tenant(which, "create collection r (k int, s int, name text)", kBigRows);
    }
    return *t;
}

void run_query(benchmark::State& state, const std::string& which, const std::string& query) {
    Tenant& t = tenant(which);
    const std::string first = t.run(query);
    if (first.rfind("{\"rows\"", 0) != 0) {
        state.SkipWithError(first.c_str());
        return;
    }
    for (auto _ : state) benchmark::DoNotOptimize(t.run(query));
}

void BM_EqualityHashIndex(benchmark::State& s) { run_query(s, "eq_hash", "get r where k = 417"); }
void BM_EqualityScan(benchmark::State& s) { run_query(s, "eq_scan", "get r where k = 417"); }
void BM_OrderLimitSorted(benchmark::State& s) { run_query(s, "big_sorted", "get r order s limit 20"); }
void BM_OrderLimitFullSort(benchmark::State& s) { run_query(s, "big_plain", "get r order s limit 20"); }
void BM_OrderNamesBytes(benchmark::State& s) { run_query(s, "big_plain", "get r select name order name limit 20"); }
void BM_OrderNamesCollateTr(benchmark::State& s) {
    run_query(s, "big_plain", "get r select name order name collate tr limit 20");
}

// A write of the rows a filter picks, a block each iteration: `set` picks its rows as a read
// does, by `_id` or through an index, and the unindexed copy's is a scan (what every set and del
// cost before 2026-12-07).
void run_write(benchmark::State& state, const std::string& which, const std::string& statement) {
    Tenant& t = tenant(which);
    const std::string first = t.run(statement);
    if (first.rfind("{\"affected\"", 0) != 0) {
        state.SkipWithError(first.c_str());
        return;
    }
    for (auto _ : state) benchmark::DoNotOptimize(t.run(statement));
}

void BM_SetById(benchmark::State& s) { run_write(s, "eq_hash", "set r {s: 1} where _id = 4242"); }
void BM_SetHashIndex(benchmark::State& s) { run_write(s, "eq_hash", "set r {s: 1} where k = 417"); }
void BM_SetScan(benchmark::State& s) { run_write(s, "eq_scan", "set r {s: 1} where k = 417"); }

// Every name's sort key under `rule`, once an iteration.
void sort_keys(benchmark::State& state, const index::TextRule& rule) {
    static const std::vector<std::string> names = [] {
        std::mt19937_64 rng(7);
        std::vector<std::string> out(100'000);
        for (std::string& n : out) n = random_name(rng);
        return out;
    }();
    for (auto _ : state) {
        for (const std::string& n : names) benchmark::DoNotOptimize(index::sort_key(n, rule));
    }
}

void BM_SortKeysBytes(benchmark::State& s) {
    sort_keys(s, index::field_rule(engine::Collation::bytes, false));
}
void BM_SortKeysTr(benchmark::State& s) {
    sort_keys(s, index::field_rule(engine::Collation::tr, false));
}
void BM_SortKeysTrNocase(benchmark::State& s) {
    sort_keys(s, index::field_rule(engine::Collation::tr, true));
}

BENCHMARK(BM_EqualityHashIndex)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EqualityScan)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SetById)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SetHashIndex)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SetScan)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OrderLimitSorted)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OrderLimitFullSort)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_OrderNamesBytes)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_OrderNamesCollateTr)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SortKeysBytes)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_SortKeysTr)->Unit(benchmark::kMillisecond)->Repetitions(5);
BENCHMARK(BM_SortKeysTrNocase)->Unit(benchmark::kMillisecond)->Repetitions(5);

// Prints each pair's ratio once the runs are done.
class RatioReporter : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const Run& r : runs) {
            const std::string name = r.benchmark_name();
            std::string key = name.substr(0, name.find('/'));
            if (r.run_type == Run::RT_Aggregate) {
                if (r.aggregate_unit != benchmark::kTime) continue;  // the coefficient of variation
                key += "_" + r.aggregate_name;
            } else if (r.repetitions > 1) {
                continue;  // a repeated bench is read by its aggregates
            }
            times_[key] = r.GetAdjustedRealTime() * unit(r.time_unit);
        }
        ConsoleReporter::ReportRuns(runs);
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        ratio("equality: scan / @hash", "BM_EqualityScan", "BM_EqualityHashIndex");
        ratio("set where k = v: scan / @hash", "BM_SetScan", "BM_SetHashIndex");
        ratio("set: scan where k = v / by _id", "BM_SetScan", "BM_SetById");
        ratio("order s limit 20 over 1M: full sort / @sorted", "BM_OrderLimitFullSort", "BM_OrderLimitSorted");
        ratio("1M names: collate tr / bytes", "BM_OrderNamesCollateTr", "BM_OrderNamesBytes");
        ratio("100k sort keys: collate tr / bytes", "BM_SortKeysTr_median",
              "BM_SortKeysBytes_median");
        ratio("100k sort keys: collate tr nocase / bytes", "BM_SortKeysTrNocase_median",
              "BM_SortKeysBytes_median");
    }

private:
    static double unit(benchmark::TimeUnit u) {
        switch (u) {
            case benchmark::kNanosecond: return 1e-9;
            case benchmark::kMicrosecond: return 1e-6;
            case benchmark::kMillisecond: return 1e-3;
            default: return 1;
        }
    }
    void ratio(const char* what, const std::string& a, const std::string& b) {
        auto find = [&](const std::string& k) {  // repeated: read by the median
            auto it = times_.find(k);
            return it != times_.end() ? it : times_.find(k + "_median");
        };
        auto x = find(a), y = find(b);
        if (x == times_.end() || y == times_.end() || y->second == 0) return;
        std::printf("ratio %-48s %10.2fx\n", what, x->second / y->second);
    }
    std::map<std::string, double> times_;
};

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    RatioReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    std::filesystem::remove_all(bench_dir());
    return 0;
}
