// test/engine/durable_replace_test.cc: proves the seam's one durable replace (engine/io.h
// replace_durably) and what sits beside it (remove_durably, read_small), and the directory calls
// the node's data directory needs (file_size, list, make_dirs) on both file systems. On FaultFs:
// a replace survives a crash whole; a failure at each step (append, sync, rename, directory sync)
// is returned and leaves the old content as what a crash finds; a power cut after any number of
// bytes leaves the old content or the new one, never a mix; a removal is durable, also of a file
// already gone. On PosixFs: the same calls against a fresh directory under /tmp.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/io.h"
#include "test/support/fault_fs.h"

namespace fenec::durable_replace_test {
namespace {

using engine::Code;
using engine::OpenMode;
using engine::Status;
using test::FaultFs;
using CrashMode = FaultFs::CrashMode;

std::vector<std::byte> bytes_of(std::string_view s) {
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    return {p, p + s.size()};
}

std::string text_of(const std::vector<std::byte>& b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

class DurableReplaceTest : public ::testing::Test {
  protected:
    void SetUp() override { fs_.set_contents(path_, bytes_of(old_)); }
    std::string text() const { return text_of(fs_.contents(path_)); }
    // What a restart would find at `path_` after a crash that keeps only synced bytes.
    std::string after_crash() {
        fs_.crash(CrashMode::synced_only);
        return fs_.has(path_) ? text() : "<absent>";
    }

    FaultFs fs_;
    const std::string path_ = "/data/n1.state";
    const std::string temp_ = "/data/n1.state.new";
    const std::string old_ = "{\"term\":3}\n";
    const std::string new_ = "{\"term\":4,\"history\":\"c04b7e1a9d2f6385\"}\n";
};

TEST_F(DurableReplaceTest, TheNewContentSurvivesACrash) {
    ASSERT_TRUE(engine::replace_durably(fs_, path_, new_).is_ok());
    EXPECT_EQ(text(), new_);
    EXPECT_FALSE(fs_.has(temp_));
    EXPECT_EQ(after_crash(), new_);
}

TEST_F(DurableReplaceTest, AFailedAppendLeavesTheOldContent) {
    fs_.fail_append(1, ENOSPC, 3);  // torn: 3 bytes of the new content reach the temp
    const Status st = engine::replace_durably(fs_, path_, new_);
    EXPECT_EQ(st.code(), Code::io_error) << st.to_string();
    EXPECT_EQ(text(), old_);
    EXPECT_FALSE(fs_.has(temp_));
    EXPECT_EQ(fs_.renames(), 0u);
    EXPECT_EQ(after_crash(), old_);
}

TEST_F(DurableReplaceTest, AFailedSyncIsNotRenamedIntoPlace) {
    fs_.fail_sync(1);
    const Status st = engine::replace_durably(fs_, path_, new_);
    EXPECT_EQ(st.code(), Code::io_error) << st.to_string();
    EXPECT_EQ(text(), old_);
    EXPECT_FALSE(fs_.has(temp_));
    EXPECT_EQ(fs_.renames(), 0u);
    EXPECT_EQ(after_crash(), old_);
}

TEST_F(DurableReplaceTest, AFailedRenameLeavesTheOldContent) {
    fs_.fail_rename(1);
    const Status st = engine::replace_durably(fs_, path_, new_);
    EXPECT_EQ(st.code(), Code::io_error) << st.to_string();
    EXPECT_EQ(text(), old_);
    EXPECT_FALSE(fs_.has(temp_));
    EXPECT_EQ(fs_.sync_dirs(), 0u);
    EXPECT_EQ(after_crash(), old_);
}

TEST_F(DurableReplaceTest, AFailedDirectorySyncIsReportedAndNotDurable) {
    fs_.fail_sync_dir(1);
    const Status st = engine::replace_durably(fs_, path_, new_);
    EXPECT_EQ(st.code(), Code::io_error) << st.to_string();
    EXPECT_EQ(text(), new_);         // in place for the running system...
    EXPECT_EQ(after_crash(), old_);  // ...but a crash finds the old: the caller was told
}

TEST_F(DurableReplaceTest, APowerCutAtAnyByteLeavesTheOldContentOrTheNewWhole) {
    for (uint64_t k = 0; k <= new_.size(); ++k) {
        for (CrashMode mode : {CrashMode::synced_only, CrashMode::all, CrashMode::zero_tail}) {
            FaultFs fs;
            fs.set_contents(path_, bytes_of(old_));
            fs.crash_after_bytes(k);
            const Status st = engine::replace_durably(fs, path_, new_);
            fs.crash(mode, 2);
            ASSERT_TRUE(fs.has(path_)) << "k=" << k;
            const std::string found = text_of(fs.contents(path_));
            // Whatever the replace answered, a restart finds one whole version; and one it was
            // told was kept is the new one.
            EXPECT_TRUE(found == old_ || found == new_) << "k=" << k << ": " << found;
            if (st.is_ok()) {
                EXPECT_EQ(found, new_) << "k=" << k;
            }
        }
    }
}

TEST_F(DurableReplaceTest, ALeftoverTempIsEmptiedFirst) {
    fs_.set_contents(temp_, bytes_of("a longer leftover from a crash, longer than the new one"));
    ASSERT_TRUE(engine::replace_durably(fs_, path_, new_).is_ok());
    EXPECT_EQ(text(), new_);
}

TEST_F(DurableReplaceTest, ARemovalIsDurableAlsoOfAFileAlreadyGone) {
    ASSERT_TRUE(engine::remove_durably(fs_, path_).is_ok());
    EXPECT_FALSE(fs_.has(path_));
    // Removed again (as after an earlier removal whose directory sync failed): the directory is
    // synced all the same.
    const uint64_t synced_before = fs_.sync_dirs();
    ASSERT_TRUE(engine::remove_durably(fs_, path_).is_ok());
    EXPECT_EQ(fs_.sync_dirs(), synced_before + 1);
    EXPECT_EQ(after_crash(), "<absent>");
}

TEST_F(DurableReplaceTest, AFailedRemovalSyncIsReported) {
    fs_.fail_sync_dir(1);
    EXPECT_EQ(engine::remove_durably(fs_, path_).code(), Code::io_error);
    EXPECT_EQ(after_crash(), old_);
}

TEST_F(DurableReplaceTest, ReadSmallReadsWholeWithinItsBound) {
    auto got = engine::read_small(fs_, path_, 64);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_EQ(*got, old_);
    EXPECT_EQ(engine::read_small(fs_, "/data/none", 64).status().code(), Code::not_found);
    const Status big = engine::read_small(fs_, path_, 4).status();
    EXPECT_EQ(big.code(), Code::limit_exceeded);
    EXPECT_NE(big.message().find(path_), std::string_view::npos) << big.to_string();
}

TEST(FaultFsDirectoryTest, ListsTheLiveFilesOfADirectory) {
    FaultFs fs;
    fs.set_contents("/d/a.fenec", bytes_of("1"));
    fs.set_contents("/d/b.quota", bytes_of("22"));
    fs.set_contents("/d/sub/c", bytes_of("3"));
    fs.set_contents("/e/d", bytes_of("4"));
    ASSERT_TRUE(fs.make_dirs("/d/sub").is_ok());
    auto names = fs.list("/d");
    ASSERT_TRUE(names.is_ok());
    std::sort(names->begin(), names->end());
    EXPECT_EQ(*names, (std::vector<std::string>{"a.fenec", "b.quota"}));
    ASSERT_TRUE(fs.remove("/d/a.fenec").is_ok());
    EXPECT_EQ(fs.list("/d/")->size(), 1u);
    EXPECT_EQ(*fs.file_size("/d/b.quota"), 2u);
    EXPECT_EQ(fs.file_size("/d/a.fenec").status().code(), Code::not_found);
    fs.crash_after_bytes(0);
    ASSERT_TRUE(engine::replace_durably(fs, "/d/b.quota", "x").code() == Code::io_error);
    EXPECT_EQ(fs.make_dirs("/d/other").code(), Code::io_error);  // after the power cut
}

class PosixDirectoryTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/fenec_durable_test.XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    engine::Fs& fs_ = engine::posix_fs();
    std::string dir_;
};

TEST_F(PosixDirectoryTest, MakesListsSizesAndReplaces) {
    const std::string deep = dir_ + "/a/b/c";
    ASSERT_TRUE(fs_.make_dirs(deep).is_ok());
    ASSERT_TRUE(fs_.make_dirs(deep).is_ok());  // there already: fine
    EXPECT_TRUE(std::filesystem::is_directory(deep));
    const std::string file = deep + "/x.state";
    ASSERT_TRUE(engine::replace_durably(fs_, file, "first").is_ok());
    ASSERT_TRUE(engine::replace_durably(fs_, file, "second, longer").is_ok());
    EXPECT_EQ(*engine::read_small(fs_, file, 100), "second, longer");
    EXPECT_EQ(*fs_.file_size(file), 14u);
    EXPECT_FALSE(*fs_.exists(file + ".new"));
    auto names = fs_.list(deep);
    ASSERT_TRUE(names.is_ok()) << names.status().to_string();
    EXPECT_EQ(*names, std::vector<std::string>{"x.state"});
    EXPECT_EQ(fs_.list(dir_ + "/none").status().code(), Code::not_found);
    EXPECT_EQ(fs_.file_size(dir_ + "/none").status().code(), Code::not_found);
    EXPECT_EQ(fs_.make_dirs(file).code(), Code::already_exists);  // a file, not a directory
    ASSERT_TRUE(engine::remove_durably(fs_, file).is_ok());
    ASSERT_TRUE(engine::remove_durably(fs_, file).is_ok());
    EXPECT_FALSE(*fs_.exists(file));
}

}  // namespace
}  // namespace fenec::durable_replace_test
