// test/engine/read_only_open_test.cc: proves that a read-only open (what `fenec inspect` does)
// reads a file another holder has open and locked, on the POSIX file system and its flock: it
// takes no lock, so the holder keeps its lock and its writes; a torn tail is cut in memory only
// and reported, the bytes left on disk; and opens racing a writer that lands block after block
// each succeed, seeing a prefix of what it landed (engine/open.cc).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "engine/database.h"
#include "test/support/engine_fixture.h"
#include "test/support/temp_dir.h"

namespace fenec::engine {
namespace {

using test::TempDir;

using test::schema_of;
using test::why;

OpenOptions posix_options(const FakeClock& clock) {
    OpenOptions o;  // fs = nullptr: the POSIX file system and its flock
    o.clock = &clock;
    o.tenant = "t";
    return o;
}

OpenOptions read_only(OpenOptions o) {
    o.read_only = true;
    return o;
}

// Lands one block inserting `n` into `items` (made by the first block); its seq, 0 on failure.
uint64_t land_row(Database& db, int64_t n) {
    auto b = db.begin();
    if (!b.is_ok()) return 0;
    auto c = b->find("items");
    if (!c.is_ok()) {
        c = b->create_collection("items", schema_of("n:int"));
        if (!c.is_ok()) return 0;
    }
    if (!b->insert(*c, std::nullopt, Doc{{0, Value(n)}}).is_ok()) return 0;
    auto landed = b->commit();
    return landed.is_ok() ? landed->last.v : 0;
}

uint64_t rows_of(const Database& db) {
    ReadView view = db.read();
    for (const CollectionInfo& c : view.collections()) {
        if (c.name == "items") return c.rows;
    }
    return 0;
}

std::vector<std::byte> read_all(const std::string& path) {
    std::vector<std::byte> out(std::filesystem::file_size(path));
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pread(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    ::close(fd);
    return out;
}

void write_all(const std::string& path, std::span<const std::byte> bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
}

// A writer holds the file open and locked: a read-only open still reads it, and the writer
// keeps its lock (a second writer is still busy) and goes on landing blocks.
TEST(ReadOnlyOpen, ReadsAFileAWriterHoldsLocked) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    FakeClock clock;
    auto writer = Database::create(path, posix_options(clock));
    ASSERT_TRUE(writer.is_ok()) << why(writer);
    for (int i = 0; i < 3; ++i) ASSERT_NE(land_row(**writer, i), 0u);
    {
        auto reader = Database::open(path, read_only(posix_options(clock)));
        ASSERT_TRUE(reader.is_ok()) << why(reader);
        EXPECT_EQ((*reader)->seq(), (*writer)->seq());
        EXPECT_EQ(rows_of(**reader), 3u);
        EXPECT_EQ((*reader)->lineage(), (*writer)->lineage());
        EXPECT_EQ((*reader)->torn_at(), std::nullopt);
        EXPECT_EQ((*reader)->begin().status().code(), Code::read_only);
    }
    auto second = Database::open(path, posix_options(clock));
    EXPECT_EQ(second.status().code(), Code::busy) << "the writer keeps its lock";
    ASSERT_NE(land_row(**writer, 3), 0u);
    auto again = Database::open(path, read_only(posix_options(clock)));
    ASSERT_TRUE(again.is_ok()) << why(again);
    EXPECT_EQ(rows_of(**again), 4u);
    ASSERT_TRUE((*writer)->close().is_ok());
}

// A block half appended as the reader reads: the tear is cut in memory only, reported at the
// record it begins, and the file keeps every byte, for its writer's own open to judge.
TEST(ReadOnlyOpen, TornTailIsCutInMemoryOnly) {
    TempDir dir;
    const std::string whole = dir.file("whole.fenec");
    FakeClock clock;
    uint64_t one_block = 0;
    Seq seq_one;
    {
        auto db = Database::create(whole, posix_options(clock));
        ASSERT_TRUE(db.is_ok()) << why(db);
        ASSERT_NE(land_row(**db, 0), 0u);
        one_block = (*db)->usage().file_bytes;
        seq_one = (*db)->seq();
        ASSERT_NE(land_row(**db, 1), 0u);
        ASSERT_TRUE((*db)->close().is_ok());
    }
    const std::vector<std::byte> bytes = read_all(whole);
    ASSERT_GT(bytes.size(), one_block);
    // The first block whole, then half of the second: a writer caught mid-append.
    const size_t torn_size = one_block + (bytes.size() - one_block) / 2;
    const std::string path = dir.file("t.fenec");
    write_all(path, std::span(bytes).first(torn_size));
    // Held as a node holds it: open and locked.
    auto held = posix_fs().open(path, OpenMode::read_write);
    ASSERT_TRUE(held.is_ok()) << why(held);
    ASSERT_TRUE(posix_fs().lock(**held).is_ok());

    auto reader = Database::open(path, read_only(posix_options(clock)));
    ASSERT_TRUE(reader.is_ok()) << why(reader);
    EXPECT_EQ((*reader)->seq(), seq_one);
    EXPECT_EQ(rows_of(**reader), 1u);
    EXPECT_EQ((*reader)->torn_at(), std::optional<uint64_t>(one_block));
    reader->reset();
    EXPECT_EQ(std::filesystem::file_size(path), torn_size) << "nothing is cut on disk";
    EXPECT_EQ(read_all(path), std::vector<std::byte>(bytes.begin(), bytes.begin() + torn_size));
}

// Read-only opens racing a writer landing block after block: every one succeeds, and sees a
// prefix of the landed rows (one per block), never more than has been landed.
TEST(ReadOnlyOpen, OpensRacingAWriterSeeAPrefix) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    FakeClock clock;
    OpenOptions o = posix_options(clock);
    o.sync = SyncPolicy::at_close();  // the writer as fast as it goes: more chance to be mid-append
    auto writer = Database::create(path, o);
    ASSERT_TRUE(writer.is_ok()) << why(writer);
    ASSERT_NE(land_row(**writer, 0), 0u);
    constexpr int kBlocks = 2000;
    std::atomic<uint64_t> landed{1};
    std::thread write([&] {
        for (int i = 1; i < kBlocks; ++i) {
            if (land_row(**writer, i) == 0) return;
            landed.store(static_cast<uint64_t>(i) + 1, std::memory_order_release);
        }
    });
    int opens = 0, torn = 0;
    uint64_t last_rows = 0;
    while (landed.load(std::memory_order_acquire) < kBlocks) {
        const uint64_t before = landed.load(std::memory_order_acquire);
        auto reader = Database::open(path, read_only(posix_options(clock)));
        const uint64_t after = landed.load(std::memory_order_acquire);
        ASSERT_TRUE(reader.is_ok()) << why(reader);
        const uint64_t rows = rows_of(**reader);
        EXPECT_GE(rows, before);
        EXPECT_LE(rows, after + 1);  // a block appended but not yet counted here
        EXPECT_GE(rows, last_rows);
        last_rows = rows;
        ++opens;
        torn += (*reader)->torn_at().has_value();
    }
    write.join();
    EXPECT_EQ(landed.load(), uint64_t{kBlocks});
    EXPECT_GT(opens, 0);
    RecordProperty("opens", opens);
    RecordProperty("torn", torn);
    ASSERT_TRUE((*writer)->close().is_ok());
    auto reopened = Database::open(path, posix_options(clock));
    ASSERT_TRUE(reopened.is_ok()) << why(reopened);
    EXPECT_EQ(rows_of(**reopened), uint64_t{kBlocks});
}

}  // namespace
}  // namespace fenec::engine
