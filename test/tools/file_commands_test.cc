// test/tools/file_commands_test.cc: proves `fenec verify`, `inspect`, `cut` and `compact` on real
// tenant files, run as the process an operator runs: a whole file verifies (exit 0); a file
// damaged in its appended region fails verify with exit 1 naming the damaged record's offset; cut
// refuses an offset that is not a record's start or lies past the damage, and at the damage drops
// the tail, keeping the bytes cut beside the file, after which verify passes with the records
// before it; compact rewrites a file with dead bytes smaller, rows unchanged.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/database.h"
#include "engine/format.h"
#include "test/support/engine_fixture.h"
#include "test/support/temp_dir.h"
#include "test/tools/run_tool.h"

namespace fenec::test {
namespace {

using namespace fenec::engine;

// A tenant file: `blocks` blocks each inserting a row into `items`, then `updates` blocks each
// rewriting row 1 (a dead version each).
void write_file(const std::string& path, int blocks, int updates = 0) {
    OpenOptions o;
    o.tenant = "t";
    auto db = Database::create(path, o);
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    for (int i = 0; i < blocks + updates; ++i) {
        auto b = (*db)->begin();
        ASSERT_TRUE(b.is_ok());
        auto c = b->find("items");
        if (!c.is_ok()) c = b->create_collection("items", test::schema_of("n:int"));
        ASSERT_TRUE(c.is_ok());
        if (i < blocks) {
            ASSERT_TRUE(b->insert(*c, std::nullopt, Doc{{0, Value(int64_t{i})}}).is_ok());
        } else {
            ASSERT_TRUE(b->put(*c, DocId{1}, Doc{{0, Value(int64_t{i})}}).is_ok());
        }
        ASSERT_TRUE(b->commit().is_ok());
    }
    ASSERT_TRUE((*db)->close().is_ok());
}

std::vector<RecordSpan> records_of(const std::string& path) {
    auto s = Database::survey(posix_fs(), path);
    EXPECT_TRUE(s.is_ok());
    return s.is_ok() ? s->records : std::vector<RecordSpan>{};
}

void flip_byte(const std::string& path, uint64_t at) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    unsigned char b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(at)), 1);
    b ^= 0x5a;
    ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(at)), 1);
    ::close(fd);
}

std::string q(const std::string& path) { return "'" + path + "'"; }

TEST(FileCommands, AWholeFileVerifies) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    write_file(path, 3);
    const ToolRun r = fenec("verify " + q(path));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find(": whole: 4 records, seq 4"), std::string::npos) << r.out;
}

TEST(FileCommands, DamageFailsVerifyNamingTheOffsetAndCutMendsIt) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    write_file(path, 4);
    const std::vector<RecordSpan> records = records_of(path);
    ASSERT_EQ(records.size(), 5u);
    const uint64_t bad = records[3].offset;  // the third block; one more follows it
    flip_byte(path, bad + format::kRecordHeadBytes + 4);
    const uint64_t size = std::filesystem::file_size(path);

    const ToolRun v = fenec("verify " + q(path));
    EXPECT_EQ(v.status, 1) << v.out;
    EXPECT_NE(v.err.find("at offset " + std::to_string(bad)), std::string::npos) << v.err;
    EXPECT_NE(v.err.find("corruption"), std::string::npos) << v.err;

    // Not a record's start; past the damage; inside the header: refused, nothing touched.
    for (uint64_t at : {bad + 8, records[4].offset, uint64_t{16}}) {
        const ToolRun refused = fenec("cut " + q(path) + " --at " + std::to_string(at));
        EXPECT_EQ(refused.status, 1) << at << ": " << refused.out;
        EXPECT_EQ(std::filesystem::file_size(path), size) << at;
        EXPECT_FALSE(std::filesystem::exists(path + ".cut-" + std::to_string(at))) << at;
    }

    const ToolRun cut = fenec("cut " + q(path) + " --at " + std::to_string(bad));
    EXPECT_EQ(cut.status, 0) << cut.err;
    EXPECT_EQ(std::filesystem::file_size(path), bad);
    const std::string saved = path + ".cut-" + std::to_string(bad);
    ASSERT_TRUE(std::filesystem::exists(saved)) << cut.out;
    EXPECT_EQ(std::filesystem::file_size(saved), size - bad);

    const ToolRun again = fenec("verify " + q(path));
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_NE(again.out.find(": whole: 3 records, seq 3"), std::string::npos) << again.out;
}

TEST(FileCommands, CutAtARecordBeforeTheDamageKeepsTheRecordsBeforeIt) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    write_file(path, 4);
    const std::vector<RecordSpan> records = records_of(path);
    flip_byte(path, records[4].offset + format::kRecordHeadBytes + 4);
    // The history record is the first: cutting at it would leave none.
    EXPECT_EQ(fenec("cut " + q(path) + " --at " + std::to_string(records[0].offset)).status, 1);
    const ToolRun cut = fenec("cut " + q(path) + " --at " + std::to_string(records[2].offset));
    EXPECT_EQ(cut.status, 0) << cut.err;
    const ToolRun v = fenec("verify " + q(path));
    EXPECT_EQ(v.status, 0) << v.err;
    EXPECT_NE(v.out.find(": whole: 2 records, seq 2"), std::string::npos) << v.out;
}

TEST(FileCommands, InspectSaysRecordsGraphsAndTheDeadShare) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    write_file(path, 2, 3);
    const ToolRun r = fenec("inspect " + q(path));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("records     6, block 5"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("history 1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("graphs      0 graph records"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" dead ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("collection  items (id 1): 2 rows"), std::string::npos) << r.out;
}

// `fenec demo DIR` writes DIR/demo.fenec once and never over a file there: a data directory's
// demo.fenec is a tenant a node may serve. Before, it unlinked the file and wrote its own, and a
// node serving `demo` lost every write it had answered at its next open.
TEST(FileCommands, DemoWritesANewFileAndReplacesNone) {
    TempDir dir;
    const ToolRun made = fenec("demo " + q(dir.path()));
    EXPECT_EQ(made.status, 0) << made.err;
    EXPECT_NE(made.out.find("row 3: Chloé, Lyon"), std::string::npos) << made.out;

    const std::string path = dir.file("demo.fenec");
    std::filesystem::remove(path);
    write_file(path, 3);
    const auto before = std::filesystem::file_size(path);
    const ToolRun again = fenec("demo " + q(dir.path()));
    EXPECT_EQ(again.status, 1) << again.out;
    EXPECT_NE(again.err.find("demo.fenec exists"), std::string::npos) << again.err;
    EXPECT_EQ(std::filesystem::file_size(path), before);
    const ToolRun kept = fenec("verify " + q(path));
    EXPECT_NE(kept.out.find(": whole: 4 records, seq 4"), std::string::npos) << kept.out;
}

// A file another process holds (here this one, as a node would) is said to be held by compact
// and the shell, as by cut; a file in a folder that does not exist says so. Before, compact and
// the shell said `busy: flock …`, and the shell named the engine's temp file `….fenec.new`.
TEST(FileCommands, AHeldFileOrAMissingFolderIsSaidPlainly) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    write_file(path, 2);
    {
        auto held = Database::open(path, OpenOptions{});
        ASSERT_TRUE(held.is_ok()) << held.status().to_string();
        for (const std::string& command :
             {"compact " + q(path), "shell " + q(path) + " -c 'get items'"}) {
            const ToolRun r = fenec(command);
            EXPECT_EQ(r.status, 1) << command << ": " << r.out;
            EXPECT_NE(r.err.find("is held by another process (a node serving it?)"),
                      std::string::npos)
                << command << ": " << r.err;
        }
    }
    const ToolRun r = fenec("shell " + q(dir.file("no/such/x.fenec")) + " -c 'get items'");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(".fenec.new"), std::string::npos) << r.err;
}

TEST(FileCommands, CompactDropsTheDeadBytes) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    write_file(path, 2, 20);
    const uint64_t before = std::filesystem::file_size(path);
    const ToolRun r = fenec("compact " + q(path));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_LT(std::filesystem::file_size(path), before);
    const ToolRun v = fenec("verify " + q(path));
    EXPECT_EQ(v.status, 0) << v.err;
    EXPECT_NE(v.out.find("seq 23"), std::string::npos) << v.out;
    const ToolRun i = fenec("inspect " + q(path));
    EXPECT_NE(i.out.find("collection  items (id 1): 2 rows"), std::string::npos) << i.out;
}

}  // namespace
}  // namespace fenec::test
