// bench/hash_bench.cc: XXH3 through libxxhash's runtime dispatch (engine/hash.h) against the
// library's plain entry points, in the same run, at the sizes Fenec hashes: a small record (64
// bytes), a document record (600), a 4 KiB page, a 1 MiB slice, and a 64 MiB image or graph
// (out of cache: the memory's speed bounds both). The 64-bit hash one shot and fed in 512-byte
// pieces (as a graph's live digest is fed a vector at a time), and the 128-bit one (images).
// Both sides must give the same hash; the program fails if they do not. Without the dispatch in
// the library (FENEC_XXH_DISPATCH unset) there is nothing to compare and it says so.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>  // the plain entry points; engine/hash.h would rename them

#if defined(FENEC_XXH_DISPATCH)
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>

namespace {

enum class Path { plain, dispatch };
enum class Shape { oneshot64, pieces64, oneshot128 };

const std::vector<char>& input(size_t bytes) {
    static std::map<size_t, std::vector<char>> inputs;
    std::vector<char>& v = inputs[bytes];
    if (v.empty()) {
        v.resize(bytes);
        for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<char>(i * 131 + (i >> 9));
    }
    return v;
}

uint64_t hash(Path path, Shape shape, const char* p, size_t n) {
    const bool d = path == Path::dispatch;
    switch (shape) {
        case Shape::oneshot64:
            return d ? XXH3_64bits_dispatch(p, n) : XXH3_64bits(p, n);
        case Shape::pieces64: {
            XXH3_state_t st;
            XXH3_64bits_reset(&st);
            for (size_t at = 0; at < n; at += 512) {
                const size_t k = std::min<size_t>(512, n - at);
                if (d)
                    XXH3_64bits_update_dispatch(&st, p + at, k);
                else
                    XXH3_64bits_update(&st, p + at, k);
            }
            return XXH3_64bits_digest(&st);
        }
        case Shape::oneshot128: {
            const XXH128_hash_t h = d ? XXH3_128bits_dispatch(p, n) : XXH3_128bits(p, n);
            return h.low64 ^ h.high64;
        }
    }
    return 0;
}

void BM_Hash(benchmark::State& state, Path path, Shape shape) {
    const auto bytes = static_cast<size_t>(state.range(0));
    const std::vector<char>& in = input(bytes);
    if (hash(Path::plain, shape, in.data(), bytes) !=
        hash(Path::dispatch, shape, in.data(), bytes)) {
        state.SkipWithError("the dispatched hash differs from the plain one");
        return;
    }
    for (auto _ : state) benchmark::DoNotOptimize(hash(path, shape, in.data(), bytes));
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void sizes(benchmark::internal::Benchmark* b) {
    for (int64_t n : {64, 600, 4096, 1 << 20, 64 << 20}) b->Arg(n);
    b->Repetitions(5)->ReportAggregatesOnly(true);
}

BENCHMARK_CAPTURE(BM_Hash, plain_64, Path::plain, Shape::oneshot64)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Hash, dispatch_64, Path::dispatch, Shape::oneshot64)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Hash, plain_64_in_512s, Path::plain, Shape::pieces64)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Hash, dispatch_64_in_512s, Path::dispatch, Shape::pieces64)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Hash, plain_128, Path::plain, Shape::oneshot128)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Hash, dispatch_128, Path::dispatch, Shape::oneshot128)->Apply(sizes);

// Prints dispatch / plain time for each shape and size once the runs are done (medians), in the
// order the benchmarks ran.
class RatioReporter : public benchmark::ConsoleReporter {
  public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const Run& r : runs) {
            if (r.error_occurred) failed_ = true;
            if (r.run_type != Run::RT_Aggregate || r.aggregate_name != "median") continue;
            std::string name = r.benchmark_name();
            name = name.substr(0, name.find("/repeats:"));  // BM_Hash/<path>_<shape>/<bytes>
            if (!times_.count(name)) order_.push_back(name);
            times_[name] = r.GetAdjustedRealTime();
        }
        ConsoleReporter::ReportRuns(runs);
    }
    void Finalize() override {
        ConsoleReporter::Finalize();
        for (const std::string& name : order_) {
            const size_t at = name.find("/plain_");
            if (at == std::string::npos) continue;
            std::string other = name;
            other.replace(at, 7, "/dispatch_");
            auto it = times_.find(other);
            if (it == times_.end() || times_[name] == 0) continue;
            std::printf("ratio %-28s dispatch / plain %6.2f\n", name.c_str() + at + 7,
                        it->second / times_[name]);
        }
    }

    bool failed() const { return failed_; }

  private:
    bool failed_ = false;  // a run skipped with an error: the two hashes differed
    std::vector<std::string> order_;
    std::map<std::string, double> times_;
};

}  // namespace

int main(int argc, char** argv) {
    // The two paths' repetitions interleaved in random order, so a change in the machine's speed
    // touches both alike (a flag given on the command line still wins: it comes later).
    std::vector<char*> args(argv, argv + argc);
    char interleave[] = "--benchmark_enable_random_interleaving=true";
    args.insert(args.begin() + 1, interleave);
    int n = static_cast<int>(args.size());
    benchmark::Initialize(&n, args.data());
    RatioReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    return reporter.failed() ? 1 : 0;
}

#else

int main() {
    std::printf(
        "hash_bench: libxxhash has no runtime dispatch in this build (FENEC_XXH_DISPATCH "
        "unset): nothing to compare\n");
    return 0;
}

#endif
