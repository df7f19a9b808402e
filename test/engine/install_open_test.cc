// test/engine/install_open_test.cc: proves Database::install_open (engine.md §8), the install a
// node's PUT …/file runs: an image held in memory is written and fsynced, verified while it is
// replayed, renamed into place and handed back open. The open database is the source's dump at
// the image's seq, the file on disk is the image byte for byte, the incoming file is gone and the
// copy goes on writing from the image's seq; a damaged image (cut, flipped, one byte over) is
// refused as `corruption` naming an offset, a refused check or an existing target (create_only)
// installs nothing, and each leaves no incoming file and the target as it was. A folder fsync
// that fails after the rename refuses a create_only install with nothing left at the target,
// from memory as from a file (install_image), so the same install then succeeds; a replace keeps
// the file it placed (what was there is gone).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/database.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::install_open_test {
namespace {

using namespace engine;

std::unique_ptr<Database> source_with_rows(EngineEnv& env, int rows) {
    return database_with_rows(env, kInstallSource, rows, 40);
}

Result<std::unique_ptr<Database>> install(EngineEnv& env, std::span<const std::byte> image,
                                          ImageInfo& info,
                                          InstallMode mode = InstallMode::create_only,
                                          std::function<Status(const ImageInfo&)> check = {}) {
    return Database::install_open(image, kInstallIncoming, kInstallTarget, mode, env.options(),
                                  check, info);
}

TEST(InstallOpen, OpensTheImageAsTheSourceStoodAndWritesItByteForByte) {
    EngineEnv env;
    auto src = source_with_rows(env, 500);
    ASSERT_NE(src, nullptr);
    auto img = src->image();
    ASSERT_TRUE(img.is_ok()) << why(img.status());
    const std::vector<std::byte>& bytes = *img->bytes;

    EngineEnv env2;
    ImageInfo info;
    auto db = install(env2, bytes, info);
    ASSERT_TRUE(db.is_ok()) << why(db.status());
    EXPECT_EQ(info.seq, img->info.seq);
    EXPECT_EQ(info.lineage, src->lineage());
    EXPECT_EQ(info.bytes, bytes.size());
    EXPECT_FALSE(env2.fs.has(kInstallIncoming));
    EXPECT_TRUE(env2.fs.contents(kInstallTarget) == bytes);
    EXPECT_EQ(dump(**db), dump(*src));
    EXPECT_EQ((*db)->path(), kInstallTarget);

    // It goes on from the image's seq, and what it writes lands in the installed file.
    auto b = (*db)->begin();
    ASSERT_TRUE(b.is_ok());
    auto c = b->find("items");
    ASSERT_TRUE(c.is_ok());
    ASSERT_TRUE(
        b->insert(*c, std::nullopt, Doc{{0, Value(int64_t{7})}, {1, Value(std::string("x"))}})
            .is_ok());
    auto l = b->commit();
    ASSERT_TRUE(l.is_ok()) << why(l.status());
    EXPECT_EQ(l->first.v, img->info.seq.v + 1);
    const std::string live = dump(**db);
    ASSERT_TRUE((*db)->close().is_ok());
    auto again = Database::open(kInstallTarget, env2.options());
    ASSERT_TRUE(again.is_ok()) << why(again.status());
    EXPECT_EQ(dump(**again), live);
}

TEST(InstallOpen, DamagedImagesAreRefusedNamingAnOffsetAndLeaveNothing) {
    EngineEnv env;
    auto src = source_with_rows(env, 300);
    ASSERT_NE(src, nullptr);
    auto img = src->image();
    ASSERT_TRUE(img.is_ok());
    const std::vector<std::byte>& bytes = *img->bytes;

    EngineEnv env2;
    auto refused = [&](std::vector<std::byte> image, const std::string& what) {
        ImageInfo info;
        auto db = install(env2, image, info);
        ASSERT_FALSE(db.is_ok()) << what;
        EXPECT_EQ(db.status().code(), Code::corruption) << what << ": " << why(db.status());
        EXPECT_FALSE(env2.fs.has(kInstallIncoming)) << what;
        EXPECT_FALSE(env2.fs.has(kInstallTarget)) << what;
    };
    refused({bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(bytes.size() / 2)}, "cut");
    std::vector<std::byte> flipped = bytes;
    flipped[flipped.size() / 2] ^= std::byte{0x20};
    refused(flipped, "flipped");
    std::vector<std::byte> longer = bytes;
    longer.resize(bytes.size() + 8);
    refused(longer, "8 bytes over");
}

TEST(InstallOpen, ARefusedCheckOrAnExistingTargetInstallsNothing) {
    EngineEnv env;
    auto src = source_with_rows(env, 50);
    ASSERT_NE(src, nullptr);
    auto img = src->image();
    ASSERT_TRUE(img.is_ok());

    EngineEnv env2;
    ImageInfo info;
    auto no = install(env2, *img->bytes, info, InstallMode::create_only, [](const ImageInfo&) {
        return Status::error(Code::invalid_argument, "Fenec-Seq differs");
    });
    ASSERT_FALSE(no.is_ok());
    EXPECT_EQ(no.status().code(), Code::invalid_argument);
    EXPECT_FALSE(env2.fs.has(kInstallIncoming));
    EXPECT_FALSE(env2.fs.has(kInstallTarget));

    auto first = install(env2, *img->bytes, info);
    ASSERT_TRUE(first.is_ok()) << why(first.status());
    ASSERT_TRUE((*first)->close().is_ok());
    const std::vector<std::byte> there = env2.fs.contents(kInstallTarget);
    auto second = install(env2, *img->bytes, info);
    ASSERT_FALSE(second.is_ok());
    EXPECT_EQ(second.status().code(), Code::already_exists) << why(second.status());
    EXPECT_FALSE(env2.fs.has(kInstallIncoming));
    EXPECT_TRUE(env2.fs.contents(kInstallTarget) == there);
}

TEST(InstallOpen, AFolderFsyncFailedAfterTheRenameLeavesNoTarget) {
    EngineEnv env;
    auto src = source_with_rows(env, 20);
    ASSERT_NE(src, nullptr);
    auto img = src->image();
    ASSERT_TRUE(img.is_ok());
    const std::vector<std::byte>& bytes = *img->bytes;

    EngineEnv env2;
    ImageInfo info;
    env2.fs.fail_sync_dir(1);
    auto refused = install(env2, bytes, info);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().code(), Code::io_error) << why(refused.status());
    EXPECT_FALSE(env2.fs.has(kInstallIncoming));
    EXPECT_FALSE(env2.fs.has(kInstallTarget));
    auto again = install(env2, bytes, info);
    ASSERT_TRUE(again.is_ok()) << why(again.status());
    ASSERT_TRUE((*again)->close().is_ok());
    // A replace keeps what it put there: the old file is gone whatever is answered.
    env2.fs.fail_sync_dir(1);
    ASSERT_FALSE(install(env2, bytes, info, InstallMode::replace).is_ok());
    EXPECT_TRUE(env2.fs.contents(kInstallTarget) == bytes);

    // The same from a file: install_image.
    EngineEnv env3;
    env3.fs.set_contents(kInstallIncoming, bytes);
    env3.fs.fail_sync_dir(1);
    Status st = Database::install_image(env3.fs, kInstallIncoming, kInstallTarget,
                                        InstallMode::create_only);
    EXPECT_EQ(st.code(), Code::io_error) << why(st);
    EXPECT_FALSE(env3.fs.has(kInstallTarget));
    env3.fs.set_contents(kInstallIncoming, bytes);
    EXPECT_TRUE(
        Database::install_image(env3.fs, kInstallIncoming, kInstallTarget, InstallMode::create_only)
            .is_ok());
}

}  // namespace
}  // namespace fenec::test::install_open_test
