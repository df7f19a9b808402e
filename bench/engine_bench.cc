// bench/engine_bench.cc: the engine's write, read and open rates, with SQLite as the baseline in
// the same run (issue 2, "Show"). Every figure is wall-clock (UseRealTime): the writes wait on
// fsync, which costs no CPU time (the quota pairs are the exception, below). Files live on the real
// disk under a fresh /tmp/fenec-bench-* directory, removed at the end; everything goes through
// engine::posix_fs().
//
// One row shape everywhere: name text of 16 bytes, age int, score float; ids handed out by the
// engine (Fenec) or by INTEGER PRIMARY KEY (SQLite).
//
// Comparing like with like (issue 18 item 8: goal >= 3x at both durabilities).
// - One fsync per 1,000 rows on both sides: Fenec's every_block returns from commit() once an
//   fdatasync covers the block; SQLite in WAL mode with synchronous=FULL syncs the WAL at every
//   commit. So a Fenec block of 1,000 documents against a SQLite transaction of 1,000 rows under
//   FULL; and, printed beside it, the time of one fdatasync of a file growing by one block's bytes
//   alone (fsync/append_<bytes>): the floor that holds both sides when the disk is the cost.
// - Sync in the background on both sides: SQLite WAL synchronous=NORMAL syncs the WAL only at a
//   checkpoint, so a power cut may lose its last commits; Fenec's interval policy (the node's
//   --sync 250) syncs every 250 ms on the flusher thread. Both keep every commit across a process
//   crash and may lose the last ones to a power cut.
// - Also printed: each side without fsync (the CPU cost of a write), and the one-document case
//   against synchronous=FULL.
//
// SQLite's page cache. By default it holds 2,000 KiB, less than the get-by-id table (100,000 rows,
// 815 pages of 4 KiB: 3.3 MB), so a select would read some pages back from the kernel while Fenec's
// documents are all in memory: a baseline that loses for a reason a user would tune away.
// sqlite/select_by_rowid therefore sets `PRAGMA cache_size` from the database's page count once the
// table is loaded (read from `PRAGMA page_count`, not guessed; see cache_whole_database), reads the
// table once to fill the cache, and fails if the timed loop still misses the cache
// (SQLITE_DBSTATUS_CACHE_MISS). Every SQLite benchmark reports its cache misses as `cache_misses`:
// the inserts append at the table's right edge and re-read none of it, which that counter shows
// rather than assumes.
//
// The quota comparison runs without fsync (SyncPolicy::at_close), so the CPU the quota code adds
// at landing is not hidden under disk latency. It is measured in CPU time, repeated 7 times,
// interleaved with the other benchmarks in random order, and compared by medians.
//
// At the end the program prints the ratios: Fenec rows/s over SQLite's (goal >= 3x) and quota'd
// over unquota'd puts (goal >= 0.97, within 3%).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/database.h"
#include "engine/flusher.h"

namespace {

using namespace fenec::engine;

constexpr int kRowsPerBlock = 1000;                // the "1,000 documents in one block" case
constexpr uint64_t kGetRows = 100'000;             // rows in the table that get-by-id reads
constexpr uint64_t kOpenFileBytes = 100ull << 20;  // the file the open benchmark replays

// ---- shared context

struct Context {
    std::string dir;
    uint64_t next_file = 0;
    std::string fresh_path(const char* stem) {
        return dir + "/" + stem + "-" + std::to_string(next_file++) + ".db";
    }
};

void remove_files(const std::string& path) {
    for (const char* suffix : {"", ".new", ".rewrite", "-wal", "-shm", "-journal"}) {
        std::error_code ec;
        std::filesystem::remove(path + suffix, ec);
    }
}

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "engine_bench: %s\n", what.c_str());
    std::exit(1);
}

template <class T>
T must(Result<T> r, const char* what) {
    if (!r.is_ok()) die(std::string(what) + ": " + r.status().to_string());
    return std::move(r).value();
}
void must(const Status& st, const char* what) {
    if (!st.is_ok()) die(std::string(what) + ": " + st.to_string());
}

// The 16-byte name of row i: "user-" and i's last 11 digits, zero-padded (what
// snprintf("user-%011llu") wrote). Both sides build it for every row; its digits are written by
// hand because snprintf cost a tenth of a Fenec block's time, neither engine's work.
struct Name {
    char text[24];
    explicit Name(uint64_t i) {
        std::memcpy(text, "user-", 5);
        // Two halves, two independent chains of divisions by ten.
        const uint64_t v = i % 100'000'000'000ull;
        uint64_t hi = v / 100'000, lo = v % 100'000;
        for (int k = 4; k >= 0; --k, hi /= 10, lo /= 10) {
            text[11 + k] = static_cast<char>('0' + lo % 10);
            text[6 + k] = static_cast<char>('0' + hi % 10);
        }
        text[5] = static_cast<char>('0' + hi % 10);
        text[16] = '\0';
    }
};

// ---- Fenec

Schema row_schema() {
    Schema s;
    for (auto [name, base] : {std::pair{"name", BaseType::Text}, std::pair{"age", BaseType::Int},
                              std::pair{"score", BaseType::Float}}) {
        FieldDesc f;
        f.name = name;
        f.type = make_type(base);
        s.fields.push_back(std::move(f));
    }
    return s;
}

// Row i as a Doc, built as a careful caller builds many: one Doc whose values are overwritten in
// place for each row, so its name's string keeps its capacity and no row allocates. put() encodes
// the Doc and keeps nothing of it, as SQLite's step copies what its bound parameters point at.
class RowDoc {
  public:
    const Doc& at(uint64_t i) {
        const Name n(i);
        std::get<std::string>(doc_[0].second.rep).assign(n.text, 16);
        std::get<int64_t>(doc_[1].second.rep) = int64_t(i % 100);
        std::get<double>(doc_[2].second.rep) = double(i) * 0.5;
        return doc_;
    }

  private:
    Doc doc_{{0, Value(std::string(16, ' '))}, {1, Value(int64_t{0})}, {2, Value(0.0)}};
};

// A fresh tenant file with the row collection, deleted when it goes.
struct FenecTable {
    std::string path;
    std::unique_ptr<Database> db;
    CollectionId rows;
    RowDoc row;

    FenecTable(Context& ctx, SyncPolicy sync, bool quota, Flusher* flusher = nullptr)
        : path(ctx.fresh_path("fenec")) {
        OpenOptions o;
        o.tenant = "bench";
        o.sync = sync;
        o.flusher = flusher;
        db = must(Database::create(path, o), "create");
        if (quota) {
            // Limits far above what the run writes: every landing asks them and passes.
            Limits l;
            l.bytes = uint64_t{1} << 50;
            l.rows = uint64_t{1} << 40;
            db->set_limit(l);
        }
        Block b = must(db->begin(), "begin");
        rows = must(b.create_collection("rows", row_schema()), "create collection");
        must(b.commit(), "commit");
    }
    ~FenecTable() {
        must(db->close(), "close");
        db.reset();
        remove_files(path);
    }
    // One block of `n` puts starting at row `i`.
    void put_block(uint64_t i, int n) {
        Block b = must(db->begin(), "begin");
        for (int k = 0; k < n; ++k) must(b.put(rows, std::nullopt, row.at(i + k)), "put");
        must(b.commit(), "commit");
    }
};

void fenec_put(benchmark::State& state, Context& ctx, SyncPolicy sync, int per_block, bool quota) {
    // The interval policy needs the process's flusher thread, as the node runs it.
    std::unique_ptr<Flusher> flusher;
    if (sync.kind == SyncPolicy::Kind::interval)
        flusher = std::make_unique<Flusher>(sync.interval_ms, 0);
    FenecTable t(ctx, sync, quota, flusher.get());
    uint64_t i = 0;
    for (auto _ : state) {
        t.put_block(i, per_block);
        i += per_block;
    }
    state.SetItemsProcessed(static_cast<int64_t>(i));
    if (quota && t.db->usage().quota_checks == 0) state.SkipWithError("the quota was never asked");
}

void fenec_get(benchmark::State& state, Context& ctx) {
    FenecTable t(ctx, SyncPolicy::at_close(), false);
    for (uint64_t i = 0; i < kGetRows; i += kRowsPerBlock) t.put_block(i, kRowsPerBlock);
    uint64_t x = 88172645463325252ull, found = 0;
    for (auto _ : state) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64: ids in random order
        ReadView view = t.db->read();
        std::optional<DocView> doc = view.get(t.rows, DocId{1 + x % kGetRows});
        if (doc) {
            Value name = doc->get(0), age = doc->get(1), score = doc->get(2);
            benchmark::DoNotOptimize(name);
            benchmark::DoNotOptimize(age);
            benchmark::DoNotOptimize(score);
            ++found;
        }
    }
    if (found != static_cast<uint64_t>(state.iterations()))
        state.SkipWithError("a get missed its row");
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// The file the open benchmark replays: ~100 MB of blocks of 1,000 rows, written once.
struct OpenFile {
    std::string path;
    uint64_t bytes = 0;
    uint64_t rows = 0;
};

OpenFile& open_file(Context& ctx) {
    static OpenFile file = [&] {
        OpenFile f;
        FenecTable t(ctx, SyncPolicy::at_close(), false);
        uint64_t i = 0;
        while (t.db->usage().file_bytes < kOpenFileBytes) {
            t.put_block(i, kRowsPerBlock);
            i += kRowsPerBlock;
        }
        must(t.db->close(), "close");
        f.path = t.path + ".keep";
        std::filesystem::rename(t.path, f.path);
        f.bytes = std::filesystem::file_size(f.path);
        f.rows = i;
        return f;
    }();
    return file;
}

void fenec_open(benchmark::State& state, Context& ctx) {
    const OpenFile& f = open_file(ctx);
    OpenOptions o;
    o.tenant = "bench";
    uint64_t seq = 0;
    for (auto _ : state) {
        std::unique_ptr<Database> db = must(Database::open(f.path, o), "open");
        state.PauseTiming();  // closing and freeing the rows is not opening
        seq = db->seq().v;
        must(db->close(), "close");
        db.reset();
        state.ResumeTiming();
    }
    if (seq != f.rows + 1) state.SkipWithError("the open shows another seq");
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.bytes));
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * f.rows));
    state.counters["file_MB"] = double(f.bytes) / 1e6;
}

// ---- SQLite

struct SqliteTable {
    std::string path;
    sqlite3* db = nullptr;
    sqlite3_stmt* insert = nullptr;
    sqlite3_stmt* select = nullptr;

    SqliteTable(Context& ctx, const char* synchronous) : path(ctx.fresh_path("sqlite")) {
        if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) die("sqlite3_open");
        exec("PRAGMA journal_mode=WAL");
        exec((std::string("PRAGMA synchronous=") + synchronous).c_str());
        exec("CREATE TABLE rows(id INTEGER PRIMARY KEY, name TEXT, age INTEGER, score REAL)");
        prepare("INSERT INTO rows(name, age, score) VALUES(?, ?, ?)", &insert);
        prepare("SELECT name, age, score FROM rows WHERE id = ?", &select);
    }
    ~SqliteTable() {
        sqlite3_finalize(insert);
        sqlite3_finalize(select);
        sqlite3_close(db);
        remove_files(path);
    }
    void exec(const char* sql) {
        char* err = nullptr;
        if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
            die(std::string(sql) + ": " + (err ? err : "?"));
        }
    }
    void prepare(const char* sql, sqlite3_stmt** stmt) {
        if (sqlite3_prepare_v2(db, sql, -1, stmt, nullptr) != SQLITE_OK) die(sql);
    }
    int64_t query_int(const char* sql) {
        sqlite3_stmt* stmt = nullptr;
        prepare(sql, &stmt);
        if (sqlite3_step(stmt) != SQLITE_ROW) die(sql);
        const int64_t v = sqlite3_column_int64(stmt, 0);
        sqlite3_finalize(stmt);
        return v;
    }
    // A page cache that holds every page the database has now (the table and the schema page),
    // filled by one read of every row. Returns the database's page count. The cache is one page
    // larger: SQLite's default cache (pcache1) recycles a page once it holds cache_size - 1 of
    // them, and at exactly page_count a second scan of this table missed on every page.
    int64_t cache_whole_database() {
        const int64_t pages = query_int("PRAGMA page_count");
        const int64_t cache_pages = pages + 1;
        exec(("PRAGMA cache_size=" + std::to_string(cache_pages)).c_str());
        if (query_int("PRAGMA cache_size") != cache_pages) die("PRAGMA cache_size was not taken");
        exec("SELECT sum(length(name)), sum(age), sum(score) FROM rows");
        return pages;
    }
    // Page cache misses since the last call (the first call: since the connection opened).
    int64_t take_cache_misses() {
        int current = 0, highwater = 0;
        if (sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_MISS, &current, &highwater, 1) !=
            SQLITE_OK) {
            die("sqlite3_db_status");
        }
        return current;
    }
    // One transaction of `n` inserts starting at row `i`.
    void insert_txn(uint64_t i, int n) {
        exec("BEGIN");
        for (int k = 0; k < n; ++k) {
            Name name(i + k);
            sqlite3_bind_text(insert, 1, name.text, 16, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 2, int64_t((i + k) % 100));
            sqlite3_bind_double(insert, 3, double(i + k) * 0.5);
            if (sqlite3_step(insert) != SQLITE_DONE) die("insert");
            sqlite3_reset(insert);
        }
        exec("COMMIT");
    }
};

void sqlite_insert(benchmark::State& state, Context& ctx, const char* synchronous, int per_txn) {
    SqliteTable t(ctx, synchronous);
    uint64_t i = 0;
    t.take_cache_misses();
    for (auto _ : state) {
        t.insert_txn(i, per_txn);
        i += per_txn;
    }
    state.counters["cache_misses"] = static_cast<double>(t.take_cache_misses());
    state.SetItemsProcessed(static_cast<int64_t>(i));
}

void sqlite_get(benchmark::State& state, Context& ctx) {
    SqliteTable t(ctx, "NORMAL");
    for (uint64_t i = 0; i < kGetRows; i += kRowsPerBlock) t.insert_txn(i, kRowsPerBlock);
    const int64_t pages = t.cache_whole_database();
    state.counters["db_pages"] = static_cast<double>(pages);
    state.counters["db_MB"] = static_cast<double>(pages * t.query_int("PRAGMA page_size")) / 1e6;
    t.take_cache_misses();
    uint64_t x = 88172645463325252ull, found = 0;
    for (auto _ : state) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        sqlite3_bind_int64(t.select, 1, int64_t(1 + x % kGetRows));
        if (sqlite3_step(t.select) == SQLITE_ROW) {
            benchmark::DoNotOptimize(sqlite3_column_text(t.select, 0));
            benchmark::DoNotOptimize(sqlite3_column_int64(t.select, 1));
            benchmark::DoNotOptimize(sqlite3_column_double(t.select, 2));
            ++found;
        }
        sqlite3_reset(t.select);
    }
    const int64_t misses = t.take_cache_misses();
    state.counters["cache_misses"] = static_cast<double>(misses);
    if (found != static_cast<uint64_t>(state.iterations()))
        state.SkipWithError("a select missed its row");
    if (misses != 0) state.SkipWithError("the page cache missed: it is smaller than the table");
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// ---- the disk alone

// The bytes one 1,000-document block adds to a Fenec file, measured from a real block.
uint64_t one_block_bytes(Context& ctx) {
    FenecTable t(ctx, SyncPolicy::at_close(), false);
    const uint64_t before = t.db->usage().file_bytes;
    t.put_block(0, kRowsPerBlock);
    return t.db->usage().file_bytes - before;
}

// One append of a 1,000-document block's bytes (the size Fenec's record has, measured) and one
// fdatasync per iteration, through the same File the engine uses: what a durable block costs
// with no engine at all. Items are rows (1,000 per iteration), so its rate is the ceiling of any
// "one fsync per 1,000 rows" writer on this disk.
void fsync_floor(benchmark::State& state, Context& ctx) {
    const uint64_t block_bytes = one_block_bytes(ctx);
    const std::string path = ctx.fresh_path("fsync");
    Fs& fs = posix_fs();
    std::unique_ptr<File> f = must(fs.open(path, OpenMode::create_new), "create");
    const std::vector<std::byte> block(block_bytes, std::byte{0x5a});
    for (auto _ : state) {
        must(f->append(block), "append");
        must(f->sync(), "sync");
    }
    f.reset();
    remove_files(path);
    state.counters["block_bytes"] = static_cast<double>(block_bytes);
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRowsPerBlock);
}

// The same bytes written over a region already written and synced, then fdatasync: what a WAL
// that is reused in place (SQLite's, after its first checkpoint) pays, since the file's size and
// extents do not change and the sync has no metadata to journal. An append always changes the
// size. Raw POSIX: the engine's File only appends.
void fsync_overwrite_floor(benchmark::State& state, Context& ctx) {
    const uint64_t block_bytes = one_block_bytes(ctx);
    constexpr uint64_t kBlocks = 256;  // the region written over, again and again
    const std::string path = ctx.fresh_path("overwrite");
    const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0) die("open " + path);
    const std::vector<std::byte> block(block_bytes, std::byte{0x5a});
    for (uint64_t k = 0; k < kBlocks; ++k) {
        if (::pwrite(fd, block.data(), block.size(), off_t(k * block_bytes)) != ssize_t(block_bytes))
            die("pwrite");
    }
    if (::fsync(fd) != 0) die("fsync");
    uint64_t k = 0;
    for (auto _ : state) {
        const off_t at = off_t((k++ % kBlocks) * block_bytes);
        if (::pwrite(fd, block.data(), block.size(), at) != ssize_t(block_bytes)) die("pwrite");
        if (::fdatasync(fd) != 0) die("fdatasync");
    }
    ::close(fd);
    remove_files(path);
    state.counters["block_bytes"] = static_cast<double>(block_bytes);
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRowsPerBlock);
}

// ---- reporting

// The console output as usual, plus items_per_second per benchmark (the median when repeated).
class Collector : public benchmark::ConsoleReporter {
  public:
    void ReportRuns(const std::vector<Run>& runs) override {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& r : runs) {
            if (r.error_occurred) continue;
            auto it = r.counters.find("items_per_second");
            if (it == r.counters.end()) continue;
            const std::string name = r.run_name.function_name;
            if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
            if (r.run_type == Run::RT_Iteration && r.repetitions > 1) continue;
            rate[name] = it->second.value;
        }
    }
    std::map<std::string, double> rate;
};

void print_ratio(const Collector& c, const char* what, const std::string& ours,
                 const std::string& theirs, const char* goal) {
    auto a = c.rate.find(ours), b = c.rate.find(theirs);
    if (a == c.rate.end() || b == c.rate.end() || b->second == 0) {
        std::printf("  %-58s n/a (not run)\n", what);
        return;
    }
    std::printf("  %-58s %7.3f  (%.0f / %.0f per s)%s\n", what, a->second / b->second, a->second,
                b->second, goal);
}

}  // namespace

int main(int argc, char** argv) {
    char dir_template[] = "/tmp/fenec-bench-XXXXXX";
    if (!mkdtemp(dir_template)) die("mkdtemp");
    Context ctx{dir_template};
    // Repetitions of different benchmarks run interleaved in random order, so that a change in
    // the machine's load hits quota'd and unquota'd runs alike. A flag given on the command line
    // comes later and wins.
    std::vector<char*> args(argv, argv + argc);
    char interleave[] = "--benchmark_enable_random_interleaving=true";
    args.insert(args.begin() + 1, interleave);
    int args_count = static_cast<int>(args.size());
    benchmark::Initialize(&args_count, args.data());

    const SyncPolicy every = SyncPolicy::every_block();
    const SyncPolicy none = SyncPolicy::at_close();
    auto reg = [](const char* name, auto fn) {
        return benchmark::RegisterBenchmark(name, fn)->UseRealTime()->Unit(benchmark::kMicrosecond);
    };
    // Durable puts: commit returns after the fsync.
    reg("fenec/put_1doc_block/every_block", [&](benchmark::State& s) {
        fenec_put(s, ctx, every, 1, false);
    })->MinTime(1.0);
    reg("sqlite/insert_1row_txn/wal_full", [&](benchmark::State& s) {
        sqlite_insert(s, ctx, "FULL", 1);
    })->MinTime(1.0);
    reg("fenec/put_1000doc_block/every_block", [&](benchmark::State& s) {
        fenec_put(s, ctx, every, kRowsPerBlock, false);
    })->MinTime(2.0);
    // Its like with like: one fsync of the WAL per 1,000-row transaction.
    reg("sqlite/insert_1000row_txn/wal_full", [&](benchmark::State& s) {
        sqlite_insert(s, ctx, "FULL", kRowsPerBlock);
    })->MinTime(2.0);
    // The floor under both: append one block's bytes and fdatasync, nothing else.
    reg("fsync/append_block_bytes", [&](benchmark::State& s) { fsync_floor(s, ctx); })
        ->MinTime(2.0);
    reg("fsync/overwrite_block_bytes", [&](benchmark::State& s) { fsync_overwrite_floor(s, ctx); })
        ->MinTime(2.0);
    reg("sqlite/insert_1000row_txn/wal_normal", [&](benchmark::State& s) {
        sqlite_insert(s, ctx, "NORMAL", kRowsPerBlock);
    })->MinTime(2.0);
    // Like with like for SQLite's WAL NORMAL, which syncs at checkpoints, not commits: Fenec's
    // interval policy (the node's --sync 250), whose commit returns after the append and whose
    // flusher syncs every 250 ms. Both keep every commit across a process crash and may lose the
    // last ones to a power cut.
    reg("fenec/put_1000doc_block/interval", [&](benchmark::State& s) {
        fenec_put(s, ctx, SyncPolicy::interval(250), kRowsPerBlock, false);
    })->MinTime(2.0);
    // Without fsync on either side: the CPU cost of a write.
    reg("fenec/put_1000doc_block/at_close", [&](benchmark::State& s) {
        fenec_put(s, ctx, none, kRowsPerBlock, false);
    })->MinTime(1.0);
    reg("sqlite/insert_1000row_txn/wal_off", [&](benchmark::State& s) {
        sqlite_insert(s, ctx, "OFF", kRowsPerBlock);
    })->MinTime(1.0);
    // Quota'd against unquota'd, same workload, medians of 7.
    for (int per_block : {1, kRowsPerBlock}) {
        for (bool quota : {false, true}) {
            const std::string name = std::string("fenec/quota_") + (quota ? "on" : "off") +
                                     "/put_" + std::to_string(per_block) + "doc_block/at_close";
            // Process CPU time, not wall clock: the quota code costs CPU only, and on a shared
            // machine the wall clock also counts the time other processes held the core.
            benchmark::RegisterBenchmark(name.c_str(),
                                         [&, per_block, quota](benchmark::State& s) {
                                             fenec_put(s, ctx, none, per_block, quota);
                                         })
                ->Unit(benchmark::kMicrosecond)
                ->MinTime(0.3)
                ->Repetitions(7)
                ->ReportAggregatesOnly(true);
        }
    }
    reg("fenec/get_by_id", [&](benchmark::State& s) { fenec_get(s, ctx); })
        ->MinTime(1.0)
        ->Unit(benchmark::kNanosecond);
    reg("sqlite/select_by_rowid", [&](benchmark::State& s) { sqlite_get(s, ctx); })
        ->MinTime(1.0)
        ->Unit(benchmark::kNanosecond);
    reg("fenec/open_100MB", [&](benchmark::State& s) { fenec_open(s, ctx); })
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);

    Collector collector;
    benchmark::RunSpecifiedBenchmarks(&collector);

    std::printf("\nRatios of items per second (wall clock; the quota pairs: CPU time):\n");
    print_ratio(collector, "fenec 1000-doc block interval / sqlite 1000-row txn NORMAL",
                "fenec/put_1000doc_block/interval", "sqlite/insert_1000row_txn/wal_normal",
                "   goal >= 3");
    print_ratio(collector, "fenec 1000-doc block every_block / sqlite 1000-row txn FULL",
                "fenec/put_1000doc_block/every_block", "sqlite/insert_1000row_txn/wal_full",
                "   goal >= 3");
    print_ratio(collector, "append+fdatasync alone / sqlite 1000-row txn FULL",
                "fsync/append_block_bytes", "sqlite/insert_1000row_txn/wal_full",
                "   (the ceiling of an appending engine)");
    print_ratio(collector, "overwrite+fdatasync alone / sqlite 1000-row txn FULL",
                "fsync/overwrite_block_bytes", "sqlite/insert_1000row_txn/wal_full",
                "   (the ceiling of one in place)");
    print_ratio(collector, "fenec 1000-doc block every_block / sqlite 1000-row txn NORMAL",
                "fenec/put_1000doc_block/every_block", "sqlite/insert_1000row_txn/wal_normal",
                "   (fsync per block against none)");
    print_ratio(collector, "fenec 1-doc block every_block / sqlite 1-row txn FULL",
                "fenec/put_1doc_block/every_block", "sqlite/insert_1row_txn/wal_full", "");
    print_ratio(collector, "fenec 1000-doc block at_close / sqlite 1000-row txn OFF",
                "fenec/put_1000doc_block/at_close", "sqlite/insert_1000row_txn/wal_off", "");
    print_ratio(collector, "fenec get by id / sqlite select by rowid", "fenec/get_by_id",
                "sqlite/select_by_rowid", "");
    for (int per_block : {1, kRowsPerBlock}) {
        const std::string stem = "/put_" + std::to_string(per_block) + "doc_block/at_close";
        const std::string what =
            "quota'd / unquota'd put, " + std::to_string(per_block) + "-doc blocks (medians)";
        print_ratio(collector, what.c_str(), "fenec/quota_on" + stem, "fenec/quota_off" + stem,
                    "   goal >= 0.97");
    }
    benchmark::Shutdown();
    std::error_code ec;
    std::filesystem::remove_all(ctx.dir, ec);
    return 0;
}
