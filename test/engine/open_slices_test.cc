// test/engine/open_slices_test.cc: an open that reads its file in slices on a thread of its own,
// replaying what is there meanwhile (OpenOptions::open_slice_bytes, engine/open.cc), gives every
// verdict one read gives (engine.md §6.2): the same documents, the same tear, or the same refusal
// naming the same offset. The oracle is the same file opened with slices off. The files: a
// workload with an image region (a compaction) and records appended after it, cut at and around
// every record and at evenly spaced bytes, zeroed from there to the end, damaged in each record's
// head and body, and grown by zeros and by garbage; read in slices of 1, 7 and 4,096 bytes. Also:
// a torn tail cut on disk by a sliced read-write open, and a read failing after two slices refusing
// the open with the file left as it was.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/database.h"
#include "engine/format.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::open_slices_test {
namespace {

using namespace engine;
namespace ef = fenec::engine::format;

constexpr char kPath[] = "/d/t.fenec";

Doc row(int64_t n, size_t bytes) {
    std::string data(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) data[i] = char('a' + (i * 7 + uint64_t(n)) % 26);
    return Doc{{0, Value("r" + std::to_string(n))}, {1, Value(n)}, {2, Value(Bytes{data})}};
}

// Lands `rows` rows of growing sizes in `a`, and deletes the row `del` (0: none), in one block.
void land(Database& db, int first, int rows, uint64_t del) {
    auto b = db.begin();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    auto a = b->find("a");
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    for (int i = first; i < first + rows; ++i) {
        ASSERT_TRUE(b->insert(*a, std::nullopt, row(i, size_t(i) * 37 % 700 + 3)).is_ok());
    }
    if (del != 0) {
        auto gone = b->del(*a, DocId{del});
        ASSERT_TRUE(gone.is_ok() && *gone) << "row " << del;
    }
    ASSERT_TRUE(b->commit().is_ok());
}

// The file: blocks, a compaction (an image region), then more blocks appended after it.
std::vector<std::byte> workload(EngineEnv& env) {
    auto db = Database::create(kPath, env.options());
    EXPECT_TRUE(db.is_ok()) << db.status().to_string();
    if (!db.is_ok()) return {};
    {
        auto b = (*db)->begin();
        EXPECT_TRUE(b.is_ok());
        EXPECT_TRUE(b->create_collection("a", schema_of("name:text, n:int, data:bytes")).is_ok());
        EXPECT_TRUE(b->commit().is_ok());
    }
    for (int block = 0; block < 5; ++block) land(**db, block * 6 + 1, 6, block > 1 ? block : 0);
    EXPECT_TRUE((*db)->compact().is_ok());
    for (int block = 5; block < 9; ++block) land(**db, block * 6 + 1, 5, block * 3);
    EXPECT_TRUE((*db)->close().is_ok());
    return env.fs.contents(kPath);
}

// Where each record of `bytes` starts, the header skipped.
std::vector<uint64_t> record_starts(const std::vector<std::byte>& bytes) {
    std::vector<uint64_t> out;
    for (uint64_t p = ef::kHeaderBytes; p + ef::kRecordHeadBytes <= bytes.size();) {
        out.push_back(p);
        p += ef::framed_size(ef::load_u32(bytes.data() + p));
    }
    return out;
}

// What a read-only open of `bytes` in slices of `slice` (0: one read) says: the refusal, or the
// documents and the tear it would cut.
std::string outcome(EngineEnv& env, const std::vector<std::byte>& bytes, uint64_t slice) {
    env.fs.set_contents(kPath, bytes);
    OpenOptions o = env.options();
    o.read_only = true;
    o.open_slice_bytes = slice;
    auto db = Database::open(kPath, o);
    if (!db.is_ok()) return "refused " + db.status().to_string();
    const auto torn = (*db)->torn_at();
    return dump(**db) + " torn at " + (torn ? std::to_string(*torn) : "none");
}

TEST(OpenSlices, EveryCutDamageAndTailGetsTheVerdictOfOneRead) {
    EngineEnv env;
    const std::vector<std::byte> file = workload(env);
    ASSERT_GE(file.size(), 2u * 4096) << "slices of 4096 would not slice the file";
    const std::vector<uint64_t> starts = record_starts(file);
    ASSERT_GE(starts.size(), 8u);  // the image's records, then the four blocks after it

    std::vector<std::pair<std::string, std::vector<std::byte>>> cases;
    auto cut = [&](uint64_t at) {
        if (at >= file.size()) return;
        cases.emplace_back("cut at " + std::to_string(at),
                           std::vector<std::byte>(file.begin(), file.begin() + at));
        std::vector<std::byte> zeroed = file;
        std::fill(zeroed.begin() + at, zeroed.end(), std::byte{0});
        cases.emplace_back("zeros from " + std::to_string(at), std::move(zeroed));
    };
    for (uint64_t p : starts) {
        const uint64_t framed = ef::framed_size(ef::load_u32(file.data() + p));
        for (uint64_t d : {uint64_t{0}, uint64_t{1}, uint64_t{15}, uint64_t{16}, uint64_t{17},
                           framed / 2, framed - 1}) {
            cut(p + d);
        }
        const uint32_t length = ef::load_u32(file.data() + p);
        // The length, the checksum, the kind, the head check, the body's middle.
        for (uint64_t d : {uint64_t{0}, uint64_t{4}, uint64_t{12}, uint64_t{13},
                           uint64_t{ef::kRecordHeadBytes + length / 2}}) {
            std::vector<std::byte> bad = file;
            bad[p + d] ^= std::byte{0x01};
            cases.emplace_back("byte " + std::to_string(p + d) + " flipped", std::move(bad));
        }
    }
    for (uint64_t at = 1; at < file.size(); at += file.size() / 61) cut(at);
    std::vector<std::byte> grown = file;
    grown.resize(file.size() + 64, std::byte{0});
    cases.emplace_back("64 zeros after the end", grown);
    grown = file;
    for (int i = 0; i < 3; ++i) grown.push_back(std::byte{0xab});
    cases.emplace_back("3 bytes of garbage after the end", grown);
    cases.emplace_back("the whole file", file);

    int refused = 0, torn = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const auto& [what, bytes] = cases[i];
        SCOPED_TRACE(what);
        const std::string whole = outcome(env, bytes, 0);
        refused += whole.rfind("refused", 0) == 0;
        torn += whole.find(" torn at none") == std::string::npos && whole.rfind("refused", 0) != 0;
        // Slices of one byte read the file a byte at a time: every fourth case.
        for (uint64_t slice : {uint64_t{7}, uint64_t{4096}, uint64_t{1}}) {
            if (slice == 1 && i % 4 != 0) continue;
            ASSERT_EQ(outcome(env, bytes, slice), whole) << "slices of " << slice;
        }
    }
    // The cases reach each verdict: documents, a tear, a refusal.
    EXPECT_GT(refused, 20);
    EXPECT_GT(torn, 20);
}

TEST(OpenSlices, ATornTailIsCutOnDiskAndAFailedReadRefusesTheOpen) {
    EngineEnv env;
    const std::vector<std::byte> file = workload(env);
    OpenOptions o = env.options();
    o.open_slice_bytes = 64;
    std::string before;
    {
        env.fs.set_contents(kPath, file);
        auto db = Database::open(kPath, o);
        ASSERT_TRUE(db.is_ok()) << db.status().to_string();
        before = dump(**db);
    }
    // A read failing after two slices: the open is refused, the file left as it was.
    std::vector<std::byte> torn = file;
    torn.resize(file.size() + 4096, std::byte{0});
    env.fs.set_contents(kPath, torn);
    env.fs.fail_path(FaultFs::PathOp::read, kPath, EIO, 3);
    auto failed = Database::open(kPath, o);
    ASSERT_FALSE(failed.is_ok()) << "the read was not in slices";
    EXPECT_EQ(failed.status().code(), Code::io_error) << failed.status().to_string();
    EXPECT_EQ(env.fs.contents(kPath), torn);
    // Asked again, the open reads it whole, and cuts its torn tail on disk.
    auto db = Database::open(kPath, o);
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    EXPECT_EQ(dump(**db), before);
    EXPECT_EQ(env.fs.contents(kPath), file);
}

}  // namespace
}  // namespace fenec::test::open_slices_test
