// test/engine/io_test.cc: proves the I/O seam (engine/io.h, engine.md §14) behaves as the engine
// relies on. PosixFs, against a fresh directory under /tmp: appends read back, size and truncate,
// create_new and rename(replace=false) refuse existing names, a second flock is busy, remove and
// exists, errors name the path, append_direct writes past the page cache and reads back as
// append does. FaultFs, the double every crash test runs on: each fault fires on
// exactly the call it was armed for, a path fault on one call of its path only, a torn append
// leaves exactly k bytes, the power cut stops at its byte budget, each crash mode leaves exactly
// the bytes the model says, renames and removes are durable only after a directory sync, stalled
// syncs block until released, counters count.
#include "engine/io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/aligned_bytes.h"
#include "test/support/fault_fs.h"

namespace fenec::io_test {
namespace {

using engine::Code;
using engine::File;
using engine::OpenMode;
using engine::Status;
using test::FaultFs;
using CrashMode = FaultFs::CrashMode;

std::vector<std::byte> bytes_of(std::string_view s) {
    std::vector<std::byte> out(s.size());
    for (size_t i = 0; i < s.size(); ++i) out[i] = static_cast<std::byte>(s[i]);
    return out;
}

std::string text_of(const std::vector<std::byte>& b) {
    std::string out(b.size(), '\0');
    for (size_t i = 0; i < b.size(); ++i) out[i] = static_cast<char>(b[i]);
    return out;
}

Status append_text(File& f, std::string_view s) { return f.append(bytes_of(s)); }

// The whole file through read_at, or "<error>" with the status.
std::string read_all(File& f) {
    auto size = f.size();
    if (!size.is_ok()) return "<error " + size.status().to_string() + ">";
    std::vector<std::byte> buf(*size);
    Status st = f.read_at(0, buf);
    if (!st.is_ok()) return "<error " + st.to_string() + ">";
    return text_of(buf);
}

std::unique_ptr<File> must_open(engine::Fs& fs, const std::string& path, OpenMode mode) {
    auto r = fs.open(path, mode);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? std::move(r).value() : nullptr;
}

// --- dir_of ------------------------------------------------------------------------------------

TEST(DirOfIoTest, SplitsTheDirectoryPart) {
    EXPECT_EQ(engine::dir_of("tenant.fen"), ".");
    EXPECT_EQ(engine::dir_of("data/tenant.fen"), "data");
    EXPECT_EQ(engine::dir_of("/var/fenec/tenant.fen"), "/var/fenec");
    EXPECT_EQ(engine::dir_of("/tenant.fen"), "/");
    EXPECT_EQ(engine::dir_of("a//b"), "a");
}

// --- PosixFs -----------------------------------------------------------------------------------

class PosixFsIoTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/fenec_io_test.XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    std::string path(std::string_view name) const { return dir_ + "/" + std::string(name); }

    engine::Fs& fs_ = engine::posix_fs();
    std::string dir_;
};

TEST_F(PosixFsIoTest, AppendReadSizeSyncTruncate) {
    auto f = must_open(fs_, path("a"), OpenMode::create_new);
    ASSERT_TRUE(f);
    ASSERT_TRUE(append_text(*f, "hello ").is_ok());
    ASSERT_TRUE(append_text(*f, "world").is_ok());
    ASSERT_TRUE(f->sync().is_ok());
    EXPECT_EQ(*f->size(), 11u);
    EXPECT_EQ(read_all(*f), "hello world");
    std::vector<std::byte> mid(5);
    ASSERT_TRUE(f->read_at(6, mid).is_ok());
    EXPECT_EQ(text_of(mid), "world");
    EXPECT_EQ(std::filesystem::file_size(path("a")), 11u);

    ASSERT_TRUE(f->truncate(5).is_ok());
    EXPECT_EQ(*f->size(), 5u);
    // O_APPEND: after a truncate the next append lands at the new end.
    ASSERT_TRUE(append_text(*f, "!").is_ok());
    EXPECT_EQ(read_all(*f), "hello!");

    // A second handle sees the bytes; read_write appends at the end.
    auto g = must_open(fs_, path("a"), OpenMode::read_write);
    ASSERT_TRUE(append_text(*g, "?").is_ok());
    EXPECT_EQ(read_all(*f), "hello!?");
}

// Pages of `path` in the page cache, of its first `pages` (mincore over a mapping never touched).
size_t cached_pages(const std::string& path, size_t pages) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return SIZE_MAX;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* m = ::mmap(nullptr, pages * page, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) return SIZE_MAX;
    std::vector<unsigned char> in(pages);
    const int rc = ::mincore(m, pages * page, in.data());
    ::munmap(m, pages * page);
    if (rc != 0) return SIZE_MAX;
    size_t n = 0;
    for (unsigned char c : in) n += c & 1;
    return n;
}

// append_direct: an aligned run goes past the page cache (its pages are not cached after it),
// an unaligned tail and anything after it through append, every byte where append puts it; an
// unaligned start (in the file or in memory) is a plain append.
TEST_F(PosixFsIoTest, AppendDirectWritesPastTheCacheAndReadsBackAsAppend) {
    constexpr size_t page = engine::aligned_bytes_alignment;
    const size_t n = 8 * page + 123;
    std::shared_ptr<std::byte[]> buf = engine::aligned_bytes(n + 1);
    std::string expect;
    for (size_t i = 0; i < n + 1; ++i) {
        buf[i] = static_cast<std::byte>('a' + (i * 7 + i / 4096) % 26);
    }
    auto f = must_open(fs_, path("d"), OpenMode::create_new);
    ASSERT_TRUE(f);
    ASSERT_TRUE(f->append_direct({buf.get(), n}).is_ok());
    ASSERT_TRUE(append_text(*f, "!").is_ok());
    ASSERT_TRUE(f->sync().is_ok());
    EXPECT_EQ(cached_pages(path("d"), 8), 0u) << "the aligned pages went through the cache";
    for (size_t i = 0; i < n; ++i) expect += static_cast<char>(buf[i]);
    EXPECT_TRUE(read_all(*f) == expect + "!");

    // At an unaligned offset, and from unaligned memory: appended as append appends.
    auto g = must_open(fs_, path("e"), OpenMode::create_new);
    ASSERT_TRUE(append_text(*g, "head").is_ok());
    ASSERT_TRUE(g->append_direct({buf.get(), n}).is_ok());
    ASSERT_TRUE(g->append_direct({buf.get() + 1, n}).is_ok());
    std::string shifted;
    for (size_t i = 1; i < n + 1; ++i) shifted += static_cast<char>(buf[i]);
    EXPECT_TRUE(read_all(*g) == "head" + expect + shifted);
}

// Descriptors this process has open.
size_t open_descriptors() {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

// sync_fs keeps one descriptor of a directory from its first sync on: later syncs of it open
// nothing, and a second directory gets its own.
TEST_F(PosixFsIoTest, SyncFsKeepsOneDescriptorADirectory) {
    ASSERT_TRUE(fs_.make_dirs(path("one")).is_ok());
    ASSERT_TRUE(fs_.make_dirs(path("two")).is_ok());
    const size_t before = open_descriptors();
    ASSERT_TRUE(fs_.sync_fs(path("one")).is_ok());
    EXPECT_EQ(open_descriptors(), before + 1) << "the directory's descriptor kept";
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(fs_.sync_fs(path("one")).is_ok());
    EXPECT_EQ(open_descriptors(), before + 1);
    ASSERT_TRUE(fs_.sync_fs(path("two")).is_ok());
    EXPECT_EQ(open_descriptors(), before + 2);
    EXPECT_EQ(fs_.sync_fs(path("none")).code(), Code::not_found);
    EXPECT_EQ(open_descriptors(), before + 2);
}

// The bytes of `path` on disk, as another process would read them.
std::string on_disk(const std::string& path) {
    std::string out(std::filesystem::file_size(path), '\0');
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pread(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    ::close(fd);
    return out;
}

// keep_room: zeros written ahead of the appends, a half of the room at a time, appends landing
// in them at the appends' end (not at the file's), size() the appends' end; a truncate takes the
// room too and the next append lands at the cut; keep_room(0) leaves the file ending at its last
// append; append_direct lands where append would.
TEST_F(PosixFsIoTest, KeepRoomWritesZerosAheadAndAppendsLandInThem) {
    constexpr uint64_t room = 256 << 10;
    auto f = must_open(fs_, path("r"), OpenMode::create_new);
    ASSERT_TRUE(append_text(*f, "hello").is_ok());
    ASSERT_TRUE(f->keep_room(room).is_ok());
    EXPECT_EQ(*f->size(), 5u);
    EXPECT_EQ(std::filesystem::file_size(path("r")), 5 + room);
    ASSERT_TRUE(append_text(*f, " world").is_ok());
    EXPECT_EQ(*f->size(), 11u);
    EXPECT_EQ(read_all(*f), "hello world");
    std::string disk = on_disk(path("r"));
    ASSERT_EQ(disk.size(), 5 + room) << "more than half the room was left: nothing written";
    EXPECT_EQ(disk.substr(0, 11), "hello world");
    EXPECT_EQ(disk.find_first_not_of('\0', 11), std::string::npos) << "the room is zeros";

    // Past half the room, the zeros are topped up to `room` past the appends again.
    const std::string big(room / 2 + 100, 'x');
    ASSERT_TRUE(append_text(*f, big).is_ok());
    EXPECT_EQ(*f->size(), 11 + big.size());
    EXPECT_EQ(std::filesystem::file_size(path("r")), 11 + big.size() + room);
    EXPECT_EQ(read_all(*f), "hello world" + big);

    // A truncate cuts the room too; the next append goes at the cut, and the room comes back.
    ASSERT_TRUE(f->truncate(5).is_ok());
    EXPECT_EQ(*f->size(), 5u);
    ASSERT_TRUE(append_text(*f, "!").is_ok());
    EXPECT_EQ(read_all(*f), "hello!");
    EXPECT_EQ(std::filesystem::file_size(path("r")), 6 + room);

    // Direct appends land at the appends' end as well.
    constexpr size_t page = engine::aligned_bytes_alignment;
    std::shared_ptr<std::byte[]> buf = engine::aligned_bytes(2 * page);
    for (size_t i = 0; i < 2 * page; ++i) buf[i] = static_cast<std::byte>('a' + i % 26);
    ASSERT_TRUE(f->truncate(page).is_ok());
    ASSERT_TRUE(f->append_direct({buf.get(), 2 * page}).is_ok());
    ASSERT_TRUE(append_text(*f, "?").is_ok());
    EXPECT_EQ(*f->size(), 3 * page + 1);
    disk = on_disk(path("r"));
    for (size_t i = 0; i < 2 * page; ++i) {
        ASSERT_EQ(disk[page + i], static_cast<char>('a' + i % 26)) << "byte " << page + i;
    }
    EXPECT_EQ(disk[3 * page], '?');

    // Room given back: the file ends at its last append, and appends go on there.
    ASSERT_TRUE(f->keep_room(0).is_ok());
    EXPECT_EQ(std::filesystem::file_size(path("r")), 3 * page + 1);
    ASSERT_TRUE(append_text(*f, "end").is_ok());
    ASSERT_TRUE(f->sync().is_ok());
    EXPECT_EQ(std::filesystem::file_size(path("r")), 3 * page + 4);
    EXPECT_EQ(on_disk(path("r")).substr(3 * page, 4), "?end");
}

TEST_F(PosixFsIoTest, ReadPastTheEndIsAShortRead) {
    auto f = must_open(fs_, path("a"), OpenMode::create_new);
    ASSERT_TRUE(append_text(*f, "abc").is_ok());
    std::vector<std::byte> buf(4);
    Status st = f->read_at(0, buf);
    EXPECT_EQ(st.code(), Code::io_error);
    EXPECT_NE(st.message().find("short read"), std::string_view::npos) << st.to_string();
    EXPECT_NE(st.message().find(path("a")), std::string_view::npos) << st.to_string();
    EXPECT_EQ(f->read_at(10, std::span(buf).first(1)).code(), Code::io_error);
}

TEST_F(PosixFsIoTest, OpenModes) {
    auto missing = fs_.open(path("none"), OpenMode::read_only);
    ASSERT_FALSE(missing.is_ok());
    EXPECT_EQ(missing.status().code(), Code::not_found);
    EXPECT_EQ(missing.status().detail().err_no, ENOENT);
    EXPECT_NE(missing.status().message().find(path("none")), std::string_view::npos);
    EXPECT_EQ(fs_.open(path("none"), OpenMode::read_write).status().code(), Code::not_found);

    auto f = must_open(fs_, path("a"), OpenMode::create_new);
    ASSERT_TRUE(append_text(*f, "abc").is_ok());
    auto again = fs_.open(path("a"), OpenMode::create_new);
    ASSERT_FALSE(again.is_ok());
    EXPECT_EQ(again.status().code(), Code::already_exists);
    EXPECT_EQ(read_all(*f), "abc");  // the refused open left the file alone

    auto t = must_open(fs_, path("a"), OpenMode::create_truncate);
    EXPECT_EQ(*t->size(), 0u);
    auto fresh = must_open(fs_, path("b"), OpenMode::create_truncate);
    EXPECT_TRUE(*fs_.exists(path("b")));

    auto ro = must_open(fs_, path("a"), OpenMode::read_only);
    Status st = append_text(*ro, "x");
    EXPECT_EQ(st.code(), Code::io_error);
    EXPECT_EQ(st.detail().err_no, EBADF);
}

TEST_F(PosixFsIoTest, FilesAreCloseOnExec) {
    auto f = must_open(fs_, path("a"), OpenMode::create_new);
    ASSERT_TRUE(f);
    // Find the fd by the file its /proc/self/fd link names.
    bool found = false;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        auto target = std::filesystem::read_symlink(entry.path(), ec);
        if (ec || target != path("a")) continue;
        int fd = std::stoi(entry.path().filename().string());
        EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC);
        found = true;
    }
    EXPECT_TRUE(found);
}

TEST_F(PosixFsIoTest, RenameWithoutReplaceRefusesAnExistingTarget) {
    {
        auto a = must_open(fs_, path("a"), OpenMode::create_new);
        ASSERT_TRUE(append_text(*a, "A").is_ok());
        auto b = must_open(fs_, path("b"), OpenMode::create_new);
        ASSERT_TRUE(append_text(*b, "B").is_ok());
    }
    Status st = fs_.rename(path("a"), path("b"), false);
    EXPECT_EQ(st.code(), Code::already_exists) << st.to_string();
    EXPECT_EQ(st.detail().err_no, EEXIST);
    EXPECT_EQ(read_all(*must_open(fs_, path("a"), OpenMode::read_only)), "A");
    EXPECT_EQ(read_all(*must_open(fs_, path("b"), OpenMode::read_only)), "B");

    ASSERT_TRUE(fs_.rename(path("a"), path("c"), false).is_ok());
    EXPECT_FALSE(*fs_.exists(path("a")));
    EXPECT_EQ(read_all(*must_open(fs_, path("c"), OpenMode::read_only)), "A");

    ASSERT_TRUE(fs_.rename(path("c"), path("b"), true).is_ok());
    EXPECT_FALSE(*fs_.exists(path("c")));
    EXPECT_EQ(read_all(*must_open(fs_, path("b"), OpenMode::read_only)), "A");

    EXPECT_EQ(fs_.rename(path("none"), path("x"), false).code(), Code::not_found);
    EXPECT_EQ(fs_.rename(path("none"), path("x"), true).code(), Code::not_found);
    EXPECT_TRUE(fs_.sync_dir(dir_).is_ok());
    EXPECT_EQ(fs_.sync_dir(path("nodir")).code(), Code::not_found);
}

TEST_F(PosixFsIoTest, SecondLockOnTheSameFileIsBusy) {
    auto first = must_open(fs_, path("lock"), OpenMode::create_new);
    ASSERT_TRUE(fs_.lock(*first).is_ok());
    ASSERT_TRUE(fs_.lock(*first).is_ok());  // the holder may ask again
    {
        // A second open is a second open file description: flock conflicts.
        auto second = must_open(fs_, path("lock"), OpenMode::read_write);
        Status st = fs_.lock(*second);
        EXPECT_EQ(st.code(), Code::busy) << st.to_string();
        EXPECT_NE(st.message().find(path("lock")), std::string_view::npos);
    }
    first.reset();  // closing the holder releases the lock
    auto third = must_open(fs_, path("lock"), OpenMode::read_write);
    EXPECT_TRUE(fs_.lock(*third).is_ok());

    FaultFs other;
    auto foreign = must_open(other, "x", OpenMode::create_new);
    EXPECT_EQ(fs_.lock(*foreign).code(), Code::invalid_argument);
}

TEST_F(PosixFsIoTest, RemoveAndExists) {
    EXPECT_FALSE(*fs_.exists(path("a")));
    must_open(fs_, path("a"), OpenMode::create_new).reset();
    EXPECT_TRUE(*fs_.exists(path("a")));
    EXPECT_TRUE(*fs_.exists(dir_));
    ASSERT_TRUE(fs_.remove(path("a")).is_ok());
    EXPECT_FALSE(*fs_.exists(path("a")));
    Status st = fs_.remove(path("a"));
    EXPECT_EQ(st.code(), Code::not_found);
    EXPECT_NE(st.message().find(path("a")), std::string_view::npos);
    EXPECT_FALSE(*fs_.exists(path("a") + "/below"));  // ENOTDIR is "no such file" too
}

// With umask 0 (nothing taken away), every way PosixFs creates a file gives 0600 and
// make_dirs gives 0700 to each level it makes; others_may_access reads the bits back.
TEST_F(PosixFsIoTest, CreatesOwnerOnly) {
    const mode_t umask_before = ::umask(0);
    must_open(fs_, path("new"), OpenMode::create_new).reset();
    must_open(fs_, path("truncated"), OpenMode::create_truncate).reset();
    ASSERT_TRUE(engine::replace_durably(fs_, path("replaced"), "secret").is_ok());
    ASSERT_TRUE(fs_.make_dirs(path("d1/d2")).is_ok());
    ::umask(umask_before);
    for (const char* name : {"new", "truncated", "replaced"}) {
        struct stat st {};
        ASSERT_EQ(::stat(path(name).c_str(), &st), 0) << name;
        EXPECT_EQ(st.st_mode & 0777, 0600u) << name;
        EXPECT_EQ(*engine::others_may_access(path(name)), 0u) << name;
    }
    for (const char* name : {"d1", "d1/d2"}) {
        struct stat st {};
        ASSERT_EQ(::stat(path(name).c_str(), &st), 0) << name;
        EXPECT_EQ(st.st_mode & 0777, 0700u) << name;
    }
    ASSERT_EQ(::chmod(path("new").c_str(), 0640), 0);
    EXPECT_EQ(*engine::others_may_access(path("new")), 040u);
    EXPECT_EQ(engine::others_may_access(path("absent")).status().code(), Code::not_found);
}

// --- FaultFs -----------------------------------------------------------------------------------

class FaultFsTest : public ::testing::Test {
protected:
    // A file holding `synced` then `unsynced`, with the first part synced.
    std::unique_ptr<File> make(const std::string& path, std::string_view synced,
                               std::string_view unsynced = "") {
        auto f = must_open(fs_, path, OpenMode::create_new);
        EXPECT_TRUE(append_text(*f, synced).is_ok());
        EXPECT_TRUE(f->sync().is_ok());
        if (!unsynced.empty()) {
            EXPECT_TRUE(append_text(*f, unsynced).is_ok());
        }
        return f;
    }
    std::string text(std::string_view path) const { return text_of(fs_.contents(path)); }

    FaultFs fs_;
};

TEST_F(FaultFsTest, BehavesLikeAFileSystem) {
    auto f = must_open(fs_, "d/a", OpenMode::create_new);
    ASSERT_TRUE(append_text(*f, "hello").is_ok());
    EXPECT_EQ(*f->size(), 5u);
    EXPECT_EQ(read_all(*f), "hello");
    std::vector<std::byte> buf(3);
    EXPECT_EQ(f->read_at(3, buf).code(), Code::io_error);  // short read
    EXPECT_EQ(fs_.open("d/a", OpenMode::create_new).status().code(), Code::already_exists);
    EXPECT_EQ(fs_.open("d/b", OpenMode::read_only).status().code(), Code::not_found);
    EXPECT_EQ(fs_.open("d/b", OpenMode::read_write).status().code(), Code::not_found);
    EXPECT_TRUE(*fs_.exists("d/a"));
    EXPECT_FALSE(*fs_.exists("d/b"));

    ASSERT_TRUE(f->truncate(2).is_ok());
    EXPECT_EQ(text("d/a"), "he");
    auto ro = must_open(fs_, "d/a", OpenMode::read_only);
    EXPECT_EQ(append_text(*ro, "x").detail().err_no, EBADF);
    auto t = must_open(fs_, "d/a", OpenMode::create_truncate);
    EXPECT_EQ(*f->size(), 0u);  // the same file, emptied

    ASSERT_TRUE(fs_.remove("d/a").is_ok());
    EXPECT_FALSE(fs_.has("d/a"));
    EXPECT_EQ(fs_.remove("d/a").code(), Code::not_found);
    ASSERT_TRUE(append_text(*f, "still").is_ok());  // an open handle outlives its name
    EXPECT_EQ(read_all(*f), "still");
}

TEST_F(FaultFsTest, FailedAppendFiresOnTheNthCallAndLeavesExactlyKBytes) {
    auto f = make("a", "");
    fs_.fail_append(2, ENOSPC, 3);
    EXPECT_EQ(fs_.appends(), 1u);  // make() appended once
    ASSERT_TRUE(append_text(*f, "1111").is_ok());
    Status st = append_text(*f, "22222222");
    EXPECT_EQ(st.code(), Code::io_error);
    EXPECT_EQ(st.detail().err_no, ENOSPC);
    EXPECT_NE(st.message().find("a"), std::string_view::npos);
    EXPECT_EQ(text("a"), "1111222");  // torn: 3 of the 8 bytes
    ASSERT_TRUE(append_text(*f, "3").is_ok());  // fired once
    EXPECT_EQ(text("a"), "11112223");
    EXPECT_EQ(fs_.appends(), 4u);

    fs_.fail_append(1);  // no byte, EIO
    st = append_text(*f, "4444");
    EXPECT_EQ(st.detail().err_no, EIO);
    EXPECT_EQ(text("a"), "11112223");
}

TEST_F(FaultFsTest, FailedSyncFiresOnTheNthCallAndCoversNothing) {
    auto f = make("a", "x");
    fs_.fail_sync(2, EIO);
    ASSERT_TRUE(append_text(*f, "y").is_ok());
    ASSERT_TRUE(f->sync().is_ok());
    EXPECT_EQ(fs_.synced_size("a"), 2u);
    ASSERT_TRUE(append_text(*f, "z").is_ok());
    Status st = f->sync();
    EXPECT_EQ(st.code(), Code::io_error);
    EXPECT_EQ(st.detail().err_no, EIO);
    EXPECT_EQ(fs_.synced_size("a"), 2u);
    EXPECT_TRUE(f->sync().is_ok());
    EXPECT_EQ(fs_.synced_size("a"), 3u);
    EXPECT_EQ(fs_.syncs(), 4u);
}

TEST_F(FaultFsTest, FailedRenameAndSyncDirChangeNothing) {
    make("d/a", "A");
    make("d/b", "B");
    fs_.fail_rename(2, EXDEV);
    ASSERT_TRUE(fs_.rename("d/a", "d/c", false).is_ok());
    Status st = fs_.rename("d/c", "d/e", true);
    EXPECT_EQ(st.code(), Code::io_error);
    EXPECT_EQ(st.detail().err_no, EXDEV);
    EXPECT_TRUE(fs_.has("d/c"));
    EXPECT_FALSE(fs_.has("d/e"));
    EXPECT_EQ(fs_.renames(), 2u);

    fs_.fail_sync_dir(1, EIO);
    EXPECT_EQ(fs_.sync_dir("d").detail().err_no, EIO);
    EXPECT_EQ(fs_.sync_dirs(), 1u);
    fs_.crash(CrashMode::all);  // the failed directory sync made the rename no more durable
    EXPECT_TRUE(fs_.has("d/a"));
    EXPECT_FALSE(fs_.has("d/c"));
}

TEST_F(FaultFsTest, PathFaultsFireOnceOnTheNamedPathOnly) {
    make("d/a", "A");
    make("d/b", "B");
    using Op = FaultFs::PathOp;
    fs_.fail_path(Op::open, "d/a", EMFILE);
    EXPECT_TRUE(fs_.open("d/b", OpenMode::read_only).is_ok()) << "another path";
    auto refused = fs_.open("d/a", OpenMode::read_write);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().code(), Code::io_error);
    EXPECT_EQ(refused.status().detail().err_no, EMFILE);
    auto f = fs_.open("d/a", OpenMode::read_only);  // once
    ASSERT_TRUE(f.is_ok());

    fs_.fail_path(Op::read, "d/a");
    std::byte one[1];
    EXPECT_EQ((*f)->read_at(0, one).detail().err_no, EIO);
    EXPECT_TRUE((*f)->read_at(0, one).is_ok());

    fs_.fail_path(Op::stat, "d/a", EACCES);
    EXPECT_EQ(fs_.exists("d/a").status().detail().err_no, EACCES);
    fs_.fail_path(Op::stat, "d/a");
    EXPECT_FALSE(fs_.file_size("d/a").is_ok());
    fs_.fail_path(Op::stat, "d/a", EIO, 2);  // the second stat of d/a from now
    EXPECT_TRUE(fs_.exists("d/b").is_ok());
    EXPECT_TRUE(fs_.exists("d/a").is_ok());
    EXPECT_FALSE((*f)->size().is_ok());
    EXPECT_TRUE(fs_.exists("d/a").is_ok());

    fs_.fail_path(Op::remove, "d/b");
    EXPECT_EQ(fs_.remove("d/b").code(), Code::io_error);
    EXPECT_TRUE(fs_.has("d/b")) << "a failed unlink changes nothing";
    fs_.fail_path(Op::open, "d/c", ENOENT);
    EXPECT_EQ(fs_.open("d/c", OpenMode::create_new).status().code(), Code::not_found);
    EXPECT_FALSE(fs_.has("d/c")) << "a failed creating open creates nothing";
    fs_.fail_path(Op::remove, "d/b");
    fs_.clear_faults();
    EXPECT_TRUE(fs_.remove("d/b").is_ok());
}

TEST_F(FaultFsTest, RenameWithoutReplaceRefusesAnExistingTarget) {
    make("a", "A");
    make("b", "B");
    EXPECT_EQ(fs_.rename("a", "b", false).code(), Code::already_exists);
    EXPECT_EQ(text("a"), "A");
    EXPECT_EQ(text("b"), "B");
    ASSERT_TRUE(fs_.rename("a", "b", true).is_ok());
    EXPECT_FALSE(fs_.has("a"));
    EXPECT_EQ(text("b"), "A");
    EXPECT_EQ(fs_.rename("a", "c", true).code(), Code::not_found);
}

TEST_F(FaultFsTest, CrashModesKeepExactlyTheModelledBytes) {
    struct Case {
        CrashMode mode;
        uint64_t k;
        std::string want;
    };
    const std::string zeros2("\0\0", 2);
    const std::vector<Case> cases = {
        {CrashMode::synced_only, 0, "SSSS"},
        {CrashMode::prefix, 0, "SSSS"},
        {CrashMode::prefix, 3, "SSSSuuu"},
        {CrashMode::prefix, 100, "SSSSuuuuuu"},
        {CrashMode::all, 0, "SSSSuuuuuu"},
        {CrashMode::zero_tail, 2, "SSSSuuuu" + zeros2},
        {CrashMode::zero_tail, 100, "SSSS" + std::string(6, '\0')},  // synced bytes stay
    };
    for (const Case& c : cases) {
        FaultFs fs;
        auto f = must_open(fs, "a", OpenMode::create_new);
        ASSERT_TRUE(append_text(*f, "SSSS").is_ok());
        ASSERT_TRUE(f->sync().is_ok());
        ASSERT_TRUE(append_text(*f, "uuuuuu").is_ok());
        fs.crash(c.mode, c.k);
        EXPECT_EQ(text_of(fs.contents("a")), c.want)
            << "mode " << static_cast<int>(c.mode) << " k " << c.k;
        EXPECT_EQ(fs.synced_size("a"), c.want.size());  // after a crash all is on disk
    }
}

TEST_F(FaultFsTest, CrashKillsOldHandlesAndTheirLocks) {
    auto f = make("a", "SS", "uu");
    ASSERT_TRUE(fs_.lock(*f).is_ok());
    fs_.crash(CrashMode::synced_only);
    EXPECT_EQ(append_text(*f, "x").detail().err_no, EIO);
    EXPECT_EQ(f->sync().code(), Code::io_error);
    EXPECT_EQ(f->size().status().code(), Code::io_error);
    EXPECT_EQ(fs_.lock(*f).code(), Code::io_error);
    EXPECT_EQ(text("a"), "SS");  // the dead handle wrote nothing

    auto g = must_open(fs_, "a", OpenMode::read_write);
    EXPECT_TRUE(fs_.lock(*g).is_ok());  // the dead handle's lock is gone
    EXPECT_EQ(read_all(*g), "SS");
    f.reset();  // destroying the dead handle leaves the new lock alone
    auto h = must_open(fs_, "a", OpenMode::read_write);
    EXPECT_EQ(fs_.lock(*h).code(), Code::busy);
}

TEST_F(FaultFsTest, PowerCutStopsAtTheByteBudget) {
    auto a = make("a", "");
    auto b = make("b", "");
    fs_.crash_after_bytes(10);
    ASSERT_TRUE(append_text(*a, "aaaa").is_ok());
    ASSERT_TRUE(append_text(*b, "bbbb").is_ok());
    ASSERT_TRUE(a->sync().is_ok());
    Status st = append_text(*a, "AAAA");  // 2 bytes left of the budget
    EXPECT_EQ(st.code(), Code::io_error);
    EXPECT_EQ(st.detail().err_no, EIO);
    EXPECT_EQ(text("a"), "aaaaAA");
    // Nothing after the cut reaches the disk.
    EXPECT_EQ(append_text(*b, "x").code(), Code::io_error);
    EXPECT_EQ(b->sync().code(), Code::io_error);
    EXPECT_EQ(b->truncate(0).code(), Code::io_error);
    EXPECT_EQ(fs_.rename("a", "c", true).code(), Code::io_error);
    EXPECT_EQ(fs_.open("n", OpenMode::create_new).status().code(), Code::io_error);
    EXPECT_EQ(text("b"), "bbbb");

    fs_.crash(CrashMode::all);
    EXPECT_EQ(text("a"), "aaaaAA");
    EXPECT_EQ(text("b"), "bbbb");
    auto c = must_open(fs_, "a", OpenMode::read_write);  // the power is back
    EXPECT_TRUE(append_text(*c, "more").is_ok());
}

TEST_F(FaultFsTest, PowerCutAtExactlyTheBudgetFailsOnlyTheNextAppend) {
    auto a = make("a", "");
    fs_.crash_after_bytes(4);
    ASSERT_TRUE(append_text(*a, "1234").is_ok());
    ASSERT_TRUE(a->sync().is_ok());
    EXPECT_EQ(append_text(*a, "5").code(), Code::io_error);
    fs_.crash(CrashMode::synced_only);
    EXPECT_EQ(text("a"), "1234");
}

TEST_F(FaultFsTest, RenamesAndRemovesAreDurableOnlyAfterADirectorySync) {
    make("d/live", "old");
    make("d/side", "new");
    make("d/stale", "x");
    ASSERT_TRUE(fs_.rename("d/side", "d/live", true).is_ok());
    ASSERT_TRUE(fs_.remove("d/stale").is_ok());
    EXPECT_EQ(text("d/live"), "new");
    fs_.crash(CrashMode::all);
    EXPECT_EQ(text("d/live"), "old");
    EXPECT_EQ(text("d/side"), "new");
    EXPECT_TRUE(fs_.has("d/stale"));

    ASSERT_TRUE(fs_.rename("d/side", "d/live", true).is_ok());
    ASSERT_TRUE(fs_.remove("d/stale").is_ok());
    ASSERT_TRUE(fs_.sync_dir("e").is_ok());  // another directory: no effect on d
    ASSERT_TRUE(fs_.sync_dir("d").is_ok());
    fs_.crash(CrashMode::all);
    EXPECT_EQ(text("d/live"), "new");
    EXPECT_FALSE(fs_.has("d/side"));
    EXPECT_FALSE(fs_.has("d/stale"));
    EXPECT_EQ(fs_.paths(), std::vector<std::string>{"d/live"});
}

TEST_F(FaultFsTest, CreatedNamesAreDurableAtOnce) {
    auto f = must_open(fs_, "top", OpenMode::create_new);
    ASSERT_TRUE(append_text(*f, "abc").is_ok());
    fs_.crash(CrashMode::synced_only);
    EXPECT_TRUE(fs_.has("top"));
    EXPECT_EQ(text("top"), "");
}

TEST_F(FaultFsTest, LockIsExclusiveAndFollowsTheFile) {
    auto a = make("a", "x");
    ASSERT_TRUE(fs_.lock(*a).is_ok());
    auto a2 = must_open(fs_, "a", OpenMode::read_only);
    Status st = fs_.lock(*a2);
    EXPECT_EQ(st.code(), Code::busy);
    EXPECT_EQ(st.detail().err_no, EWOULDBLOCK);

    // A file renamed over the locked one is another file: lockable (flock is per inode).
    make("side", "y");
    ASSERT_TRUE(fs_.rename("side", "a", true).is_ok());
    auto fresh = must_open(fs_, "a", OpenMode::read_write);
    EXPECT_TRUE(fs_.lock(*fresh).is_ok());

    auto other = must_open(engine::posix_fs(), "/proc/self/status", OpenMode::read_only);
    EXPECT_EQ(fs_.lock(*other).code(), Code::invalid_argument);
    FaultFs second;
    auto foreign = must_open(second, "z", OpenMode::create_new);
    EXPECT_EQ(fs_.lock(*foreign).code(), Code::invalid_argument);
}

TEST_F(FaultFsTest, LockIsReleasedWhenTheHolderIsDestroyed) {
    auto a = make("a", "x");
    ASSERT_TRUE(fs_.lock(*a).is_ok());
    a.reset();
    auto b = must_open(fs_, "a", OpenMode::read_write);
    EXPECT_TRUE(fs_.lock(*b).is_ok());
}

TEST_F(FaultFsTest, StalledSyncBlocksUntilReleased) {
    auto f = make("a", "12");
    ASSERT_TRUE(append_text(*f, "34").is_ok());
    fs_.stall_syncs(true);
    std::atomic<bool> done = false;
    Status result;
    std::thread syncer([&] {
        result = f->sync();
        done = true;
    });
    ASSERT_TRUE(fs_.wait_for_stalled_syncs(1, std::chrono::seconds(10)));
    // Appended while the sync waits: not covered by it.
    ASSERT_TRUE(append_text(*f, "56").is_ok());
    // The behaviour under test: a window in which the stalled sync must not return.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(done);
    EXPECT_EQ(fs_.synced_size("a"), 2u);
    // Readers and other calls go on while a sync is stalled.
    EXPECT_EQ(read_all(*f), "123456");
    fs_.release_syncs();
    syncer.join();
    EXPECT_TRUE(done);
    EXPECT_TRUE(result.is_ok()) << result.to_string();
    EXPECT_EQ(fs_.synced_size("a"), 4u);
    EXPECT_FALSE(fs_.wait_for_stalled_syncs(1, std::chrono::milliseconds(1)));
}

TEST_F(FaultFsTest, CrashFailsAStalledSync) {
    auto f = make("a", "12", "34");
    fs_.stall_syncs(true);
    Status result;
    std::thread syncer([&] { result = f->sync(); });
    ASSERT_TRUE(fs_.wait_for_stalled_syncs(1, std::chrono::seconds(10)));
    fs_.crash(CrashMode::synced_only);
    syncer.join();
    EXPECT_EQ(result.code(), Code::io_error);
    EXPECT_EQ(text("a"), "12");
}

TEST_F(FaultFsTest, SyncDelayDelaysEachSync) {
    auto f = make("a", "1");
    fs_.set_sync_delay(std::chrono::milliseconds(20));
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(f->sync().is_ok());
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
}

TEST_F(FaultFsTest, HelpersSetFlipAndReadContents) {
    fs_.set_contents("a", bytes_of("abc"));
    EXPECT_TRUE(fs_.has("a"));
    EXPECT_EQ(fs_.synced_size("a"), 3u);
    fs_.flip_byte("a", 1);
    std::vector<std::byte> got = fs_.contents("a");
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[1], static_cast<std::byte>('b') ^ std::byte{0xFF});
    fs_.crash(CrashMode::synced_only);  // set_contents is durable, name and bytes
    EXPECT_EQ(fs_.contents("a"), got);
}

}  // namespace
}  // namespace fenec::io_test
