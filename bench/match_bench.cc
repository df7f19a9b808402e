// bench/match_bench.cc: what `match` costs against SQLite FTS5's bm25() on the same generated
// corpus (issue 4, "Show"): 50,000 documents of about 20 words drawn from a Zipf vocabulary
// (fixed seed), indexed by a TextIndexes (built through on_schema from encoded bodies, as an
// open builds it) and by an in-memory FTS5 table; the same 100 queries of 1-3 terms against both,
// top 10. Our `match` is a disjunction (a row holding any query term), so FTS5 is asked
// `"a" OR "b"`, the same candidate set. Each benchmark reports its p50 latency per query; the
// program ends by printing ours over SQLite's (goal at most 0.5). Both sides use k1 1.2, b 0.75;
// FTS5's idf has no `1 +`, so rankings may differ slightly while the work is the same.
#include <benchmark/benchmark.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/value.h"
#include "index/text_index.h"

namespace {

using namespace fenec;

constexpr size_t kDocs = 50'000;
constexpr size_t kWordsPerDoc = 20;  // each document holds 15 to 25
constexpr size_t kVocab = 20'000;
constexpr size_t kQueries = 100;
constexpr size_t kTop = 10;
constexpr engine::CollectionId kColl{1};

void die(const char* what) {
    std::fprintf(stderr, "match_bench: %s\n", what);
    std::exit(1);
}

// Words by Zipf rank (s = 1): a rank spelt in letters, so every tokenizer reads one word.
class Zipf {
public:
    explicit Zipf(uint64_t seed) : rng_(seed) {
        double sum = 0;
        for (size_t r = 1; r <= kVocab; ++r) cdf_.push_back(sum += 1.0 / double(r));
        for (double& x : cdf_) x /= sum;
    }
    std::string word() {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
        size_t rank = size_t(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
        std::string w = "w";
        for (rank += 1; rank > 0; rank /= 26) w += char('a' + rank % 26);
        return w;
    }
    std::string text(size_t words) {
        std::string out;
        for (size_t i = 0; i < words; ++i) out += (i ? " " : "") + word();
        return out;
    }
    std::mt19937_64& rng() { return rng_; }

private:
    std::mt19937_64 rng_;
    std::vector<double> cdf_;
};

struct Corpus {
    std::vector<std::string> docs;                // id = index + 1
    std::vector<std::vector<std::string>> queries;  // 1-3 words each
};

Corpus generate() {
    Zipf zipf(0xF3EC);
    Corpus c;
    for (size_t i = 0; i < kDocs; ++i) {
        c.docs.push_back(zipf.text(kWordsPerDoc - 5 + zipf.rng()() % 11));
    }
    for (size_t q = 0; q < kQueries; ++q) {
        std::vector<std::string> words;
        const size_t n = 1 + zipf.rng()() % 3;
        for (size_t w = 0; w < n; ++w) words.push_back(zipf.word());
        c.queries.push_back(std::move(words));
    }
    return c;
}

// The rows as a DocSource, the way an open hands them to the hook.
class Rows final : public engine::DocSource {
public:
    Rows(const engine::Schema& schema, const std::vector<std::string>& docs) {
        for (const std::string& d : docs) {
            bodies_.emplace_back();
            if (!engine::encode_doc("docs", schema, engine::Doc{{0, engine::Value(d)}},
                                    bodies_.back())
                     .is_ok()) {
                die("encode_doc");
            }
        }
    }
    void each(const std::function<bool(engine::DocId, engine::DocView)>& visit) const override {
        for (size_t i = 0; i < bodies_.size(); ++i) {
            if (!visit(engine::DocId{i + 1}, engine::DocView(bodies_[i]))) return;
        }
    }

private:
    std::vector<std::vector<std::byte>> bodies_;
};

engine::Schema docs_schema() {
    engine::FieldDesc body;
    body.name = "body";
    body.type = engine::make_type(engine::BaseType::Text);
    body.index.kind = engine::IndexKind::text;
    body.index.text.k1_hundredths = 120;  // FTS5's bm25() constants
    body.index.text.b_hundredths = 75;
    engine::Schema s;
    s.fields = {body};
    return s;
}

struct Sqlite {
    sqlite3* db = nullptr;
    sqlite3_stmt* query = nullptr;
    ~Sqlite() {
        sqlite3_finalize(query);
        sqlite3_close(db);
    }
};

void exec(sqlite3* db, const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) die(err ? err : sql);
}

void load_sqlite(Sqlite& s, const Corpus& c) {
    if (sqlite3_open(":memory:", &s.db) != SQLITE_OK) die("sqlite3_open");
    exec(s.db, "CREATE VIRTUAL TABLE t USING fts5(body)");
    exec(s.db, "BEGIN");
    sqlite3_stmt* ins = nullptr;
    if (sqlite3_prepare_v2(s.db, "INSERT INTO t(rowid, body) VALUES (?, ?)", -1, &ins, nullptr) !=
        SQLITE_OK) {
        die(sqlite3_errmsg(s.db));
    }
    for (size_t i = 0; i < c.docs.size(); ++i) {
        sqlite3_bind_int64(ins, 1, int64_t(i + 1));
        sqlite3_bind_text(ins, 2, c.docs[i].data(), int(c.docs[i].size()), SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) die(sqlite3_errmsg(s.db));
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    exec(s.db, "COMMIT");
    exec(s.db, "INSERT INTO t(t) VALUES ('optimize')");  // one b-tree segment: FTS5 at its best
    const char* sql = "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10";
    if (sqlite3_prepare_v2(s.db, sql, -1, &s.query, nullptr) != SQLITE_OK) {
        die(sqlite3_errmsg(s.db));
    }
}

size_t run_sqlite(Sqlite& s, const std::string& fts_query) {
    sqlite3_bind_text(s.query, 1, fts_query.data(), int(fts_query.size()), SQLITE_STATIC);
    size_t rows = 0;
    int rc;
    while ((rc = sqlite3_step(s.query)) == SQLITE_ROW) {
        benchmark::DoNotOptimize(sqlite3_column_int64(s.query, 0));
        benchmark::DoNotOptimize(sqlite3_column_double(s.query, 1));
        ++rows;
    }
    if (rc != SQLITE_DONE) die(sqlite3_errmsg(s.db));
    sqlite3_reset(s.query);
    return rows;
}

double p50_us(std::vector<double> samples) {
    if (samples.empty()) return 0;
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    return samples[samples.size() / 2];
}

// Runs query (iteration mod 100) per iteration, timing each; reports the p50 over all of them.
template <class F>
void per_query(benchmark::State& state, std::vector<double>& samples, size_t queries, F&& run) {
    size_t q = 0;
    size_t rows = 0;
    samples.clear();
    for (auto _ : state) {
        const auto start = std::chrono::steady_clock::now();
        rows += run(q);
        const auto end = std::chrono::steady_clock::now();
        samples.push_back(std::chrono::duration<double, std::micro>(end - start).count());
        q = (q + 1) % queries;
    }
    state.counters["p50_us"] = p50_us(samples);
    state.counters["rows_per_query"] = double(rows) / double(state.iterations());
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    const Corpus corpus = generate();

    const engine::Schema schema = docs_schema();
    index::TextIndexes text;
    {
        const Rows rows(schema, corpus.docs);
        const auto start = std::chrono::steady_clock::now();
        text.on_schema(kColl, &schema, &rows);
        const auto end = std::chrono::steady_clock::now();
        const index::TextStats st = *text.stats(kColl, 0);
        std::printf("fenec: built %llu rows, %zu terms, avgdl %.2f in %.0f ms\n",
                    static_cast<unsigned long long>(st.rows), st.terms,
                    double(st.total_length) / double(st.rows),
                    std::chrono::duration<double, std::milli>(end - start).count());
    }
    Sqlite sqlite;
    {
        const auto start = std::chrono::steady_clock::now();
        load_sqlite(sqlite, corpus);
        const auto end = std::chrono::steady_clock::now();
        std::printf("sqlite fts5: loaded and optimized in %.0f ms (%s)\n",
                    std::chrono::duration<double, std::milli>(end - start).count(),
                    sqlite3_libversion());
    }
    std::vector<std::string> ours;
    std::vector<std::string> fts;
    for (const auto& words : corpus.queries) {
        std::string q, f;
        for (const std::string& w : words) {
            q += (q.empty() ? "" : " ") + w;
            f += (f.empty() ? "\"" : " OR \"") + w + "\"";
        }
        ours.push_back(q);
        fts.push_back(f);
    }

    std::vector<double> fenec_samples;
    std::vector<double> sqlite_samples;
    const auto keep_all = [](uint64_t) { return true; };
    benchmark::RegisterBenchmark("fenec/match_top10", [&](benchmark::State& s) {
        per_query(s, fenec_samples, kQueries, [&](size_t q) {
            auto answer = text.match(kColl, 0, ours[q], keep_all, kTop).value();
            benchmark::DoNotOptimize(answer.data());
            return answer.size();
        });
    })->Unit(benchmark::kMicrosecond)->UseRealTime()->Iterations(kQueries * 20);
    benchmark::RegisterBenchmark("sqlite/fts5_bm25_top10", [&](benchmark::State& s) {
        per_query(s, sqlite_samples, kQueries,
                  [&](size_t q) { return run_sqlite(sqlite, fts[q]); });
    })->Unit(benchmark::kMicrosecond)->UseRealTime()->Iterations(kQueries * 20);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();

    const double ours_p50 = p50_us(fenec_samples);
    const double theirs_p50 = p50_us(sqlite_samples);
    std::printf("match p50: fenec %.1f us, sqlite fts5 %.1f us, ratio %.3f (goal <= 0.5)\n",
                ours_p50, theirs_p50, theirs_p50 > 0 ? ours_p50 / theirs_p50 : 0.0);
    return 0;
}
