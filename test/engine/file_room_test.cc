// test/engine/file_room_test.cc: a database's file keeps room of zeros ahead of its appends once
// it has been written on (File::keep_room, limits::file_room_after_bytes), on the POSIX file
// system: the room is zeros past the records while the database is open; a copy of the file as
// a crash leaves it opens with every row, its zero tail cut (engine.md §6.2); a close leaves the
// file ending at its last record; a file written once keeps none.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/database.h"
#include "engine/limits.h"
#include "test/support/engine_fixture.h"
#include "test/support/temp_dir.h"

namespace fenec::engine {
namespace {

using test::schema_of;
using test::TempDir;
using test::why;

OpenOptions posix_options(const FakeClock& clock) {
    OpenOptions o;  // fs = nullptr: the POSIX file system
    o.clock = &clock;
    o.tenant = "t";
    return o;
}

std::string on_disk(const std::string& path) {
    std::string out(std::filesystem::file_size(path), '\0');
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pread(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    ::close(fd);
    return out;
}

void write_file(const std::string& path, const std::string& bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
}

// Lands `rows` rows of `text_bytes` each into `items`, one block a row.
void land(Database& db, int first, int rows, size_t text_bytes) {
    for (int i = first; i < first + rows; ++i) {
        auto b = db.begin();
        ASSERT_TRUE(b.is_ok()) << why(b);
        auto c = b->find("items");
        if (!c.is_ok()) c = b->create_collection("items", schema_of("n:int, s:text"));
        ASSERT_TRUE(c.is_ok()) << why(c);
        Doc d{{0, Value(int64_t{i})}, {1, Value(std::string(text_bytes, char('a' + i % 26)))}};
        ASSERT_TRUE(b->insert(*c, std::nullopt, d).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
}

uint64_t rows_of(const Database& db) {
    ReadView view = db.read();
    for (const CollectionInfo& c : view.collections()) {
        if (c.name == "items") return c.rows;
    }
    return 0;
}

TEST(FileRoom, AFileWrittenOnKeepsRoomThatACrashLeavesAsAZeroTailAndACloseCuts) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    FakeClock clock;
    auto db = Database::create(path, posix_options(clock));
    ASSERT_TRUE(db.is_ok()) << why(db);
    // Past the threshold: rows of 4 KiB, one block each.
    const int rows = static_cast<int>(limits::file_room_after_bytes / 4096) + 8;
    land(**db, 0, rows, 4096);
    const uint64_t records = (*db)->usage().file_bytes;
    ASSERT_GE(records, limits::file_room_after_bytes);
    const std::string disk = on_disk(path);
    ASSERT_GT(disk.size(), records) << "a file written on keeps room";
    EXPECT_GE(disk.size() - records, limits::file_room_bytes / 2);
    EXPECT_LE(disk.size() - records, limits::file_room_bytes);
    EXPECT_EQ(disk.find_first_not_of('\0', records), std::string::npos) << "the room is zeros";

    // The file as a crash would leave it (room and all): every row, the zero tail cut on disk.
    const std::string crashed = dir.file("crashed.fenec");
    write_file(crashed, disk);
    {
        auto reopened = Database::open(crashed, posix_options(clock));
        ASSERT_TRUE(reopened.is_ok()) << why(reopened);
        EXPECT_EQ(rows_of(**reopened), static_cast<uint64_t>(rows));
        EXPECT_EQ((*reopened)->seq(), (*db)->seq());
        EXPECT_EQ((*reopened)->usage().file_bytes, records);
        EXPECT_EQ(std::filesystem::file_size(crashed), records) << "the zero tail cut";
        land(**reopened, rows, 1, 10);  // and written on after it
        EXPECT_EQ(rows_of(**reopened), static_cast<uint64_t>(rows) + 1);
        ASSERT_TRUE((*reopened)->close().is_ok());
    }

    // A close cuts the room: the file ends at its last record, and opens as it was.
    land(**db, rows, 3, 10);
    const uint64_t before_close = (*db)->usage().file_bytes;
    ASSERT_TRUE((*db)->close().is_ok());
    EXPECT_EQ(std::filesystem::file_size(path), before_close);
    auto again = Database::open(path, posix_options(clock));
    ASSERT_TRUE(again.is_ok()) << why(again);
    EXPECT_EQ(rows_of(**again), static_cast<uint64_t>(rows) + 3);
    EXPECT_EQ((*again)->usage().file_bytes, before_close);
    ASSERT_TRUE((*again)->close().is_ok());
}

TEST(FileRoom, AFileWrittenOnceKeepsNone) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    FakeClock clock;
    auto db = Database::create(path, posix_options(clock));
    ASSERT_TRUE(db.is_ok()) << why(db);
    land(**db, 0, 20, 100);
    EXPECT_EQ(std::filesystem::file_size(path), (*db)->usage().file_bytes);
    ASSERT_TRUE((*db)->close().is_ok());
}

}  // namespace
}  // namespace fenec::engine
