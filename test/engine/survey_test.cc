// test/engine/survey_test.cc: proves Database::survey (what `fenec verify`, `inspect` and `cut`
// read a file with): on a whole file it lists every record, each starting where the one before
// ends, from the header to the end of the file; on a file damaged in its appended region it
// keeps the records before the damage and names the damage's offset (the bad record's start), as
// an open would refuse it; on a zero-filled tail it reports the tear an open would cut; and it
// writes nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "engine/database.h"
#include "engine/format.h"
#include "test/support/engine_fixture.h"
#include "test/support/temp_dir.h"

namespace fenec::test::survey_test {
namespace {

using namespace fenec::engine;
using test::schema_of;

// A file of a history record and `blocks` blocks, each inserting a row into `items`.
void write_file(const std::string& path, int blocks) {
    OpenOptions o;
    o.tenant = "t";
    auto db = Database::create(path, o);
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    for (int i = 0; i < blocks; ++i) {
        auto b = (*db)->begin();
        ASSERT_TRUE(b.is_ok());
        auto c = b->find("items");
        if (!c.is_ok()) c = b->create_collection("items", schema_of("n:int"));
        ASSERT_TRUE(c.is_ok());
        ASSERT_TRUE(b->insert(*c, std::nullopt, Doc{{0, Value(int64_t{i})}}).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    ASSERT_TRUE((*db)->close().is_ok());
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

TEST(Survey, AWholeFileListsEveryRecordEndToEnd) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    write_file(path, 3);
    auto s = Database::survey(posix_fs(), path);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    EXPECT_TRUE(s->fault.is_ok()) << s->fault.to_string();
    EXPECT_FALSE(s->torn_at.has_value());
    ASSERT_EQ(s->records.size(), 4u);  // the history record, then three blocks
    EXPECT_EQ(s->records[0].kind, static_cast<uint8_t>(format::Kind::history));
    uint64_t at = format::kHeaderBytes;
    for (const RecordSpan& r : s->records) {
        EXPECT_EQ(r.offset, at);
        at += r.framed;
    }
    EXPECT_EQ(at, s->file_bytes);
    EXPECT_EQ(s->file_bytes, std::filesystem::file_size(path));
    EXPECT_EQ(s->records[3].kind, static_cast<uint8_t>(format::Kind::block));
}

TEST(Survey, DamageKeepsTheRecordsBeforeItAndNamesItsOffset) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    write_file(path, 3);
    auto whole = Database::survey(posix_fs(), path);
    ASSERT_TRUE(whole.is_ok());
    const RecordSpan second_block = whole->records[2];
    flip_byte(path, second_block.offset + format::kRecordHeadBytes + 4);  // its body: checksum
    const auto before = std::filesystem::file_size(path);
    auto s = Database::survey(posix_fs(), path);
    ASSERT_TRUE(s.is_ok());
    ASSERT_EQ(s->fault.code(), Code::corruption) << s->fault.to_string();
    EXPECT_EQ(s->fault.detail().offset, second_block.offset);
    ASSERT_EQ(s->records.size(), 2u);
    EXPECT_EQ(s->records[1].offset + s->records[1].framed, second_block.offset);
    EXPECT_EQ(std::filesystem::file_size(path), before);  // nothing written
    OpenOptions ro;
    ro.read_only = true;
    auto opened = Database::open(path, ro);
    ASSERT_FALSE(opened.is_ok());  // an open refuses the same file at the same offset
    EXPECT_EQ(opened.status().detail().offset, second_block.offset);
}

TEST(Survey, AZeroTailIsATearWhereAnOpenWouldCut) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    write_file(path, 2);
    const uint64_t end = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, end + 64);  // zeros
    auto s = Database::survey(posix_fs(), path);
    ASSERT_TRUE(s.is_ok());
    EXPECT_TRUE(s->fault.is_ok()) << s->fault.to_string();
    EXPECT_EQ(s->torn_at, std::optional<uint64_t>(end));
    EXPECT_EQ(s->records.size(), 3u);
    EXPECT_EQ(std::filesystem::file_size(path), end + 64);  // left for the file's writer
}

}  // namespace
}  // namespace fenec::test::survey_test
