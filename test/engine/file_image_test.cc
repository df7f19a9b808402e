// test/engine/file_image_test.cc: proves Database::file_image (engine/file_image.cc), the image a
// move's source sends without building one: a frozen primary's file, as it stands, is taken as
// its image (its length, seq, history and lineage the database's), and install_open takes those
// bytes, written blocks and all, to the source's dump, the installed file byte for byte what was
// sent and going on from the seq; a file that is not frozen, or more than a quarter dead, is no
// file image (image() builds one then), and a compaction makes it one again; a file image cut
// anywhere, or one byte over, is refused as `corruption` and installs nothing (a tear is never
// cut where an image lands).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/database.h"
#include "engine/format.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::file_image_test {
namespace {

using namespace engine;

// `blocks` blocks of `rows` rows each into a new `items`.
std::unique_ptr<Database> source(EngineEnv& env, int blocks, int rows) {
    auto db = Database::create(kInstallSource, env.options());
    if (!db.is_ok()) {
        ADD_FAILURE() << "create: " << why(db.status());
        return nullptr;
    }
    {
        auto b = (*db)->begin();
        EXPECT_TRUE(b.is_ok());
        EXPECT_TRUE(b->create_collection("items", schema_of("n:int, s:text")).is_ok());
        EXPECT_TRUE(b->commit().is_ok());
    }
    for (int k = 0; k < blocks; ++k) {
        auto b = (*db)->begin();
        EXPECT_TRUE(b.is_ok());
        auto c = b->find("items");
        EXPECT_TRUE(c.is_ok());
        for (int i = 0; i < rows; ++i) {
            Doc d{{0, Value(int64_t{k * rows + i})},
                  {1, Value(std::string(40, char('a' + i % 26)))}};
            EXPECT_TRUE(b->insert(*c, std::nullopt, d).is_ok());
        }
        EXPECT_TRUE(b->commit().is_ok());
    }
    return std::move(*db);
}

std::vector<std::byte> read_all(const FileImage& fi) {
    std::vector<std::byte> out(fi.info.bytes);
    EXPECT_TRUE(fi.file->read_at(0, out).is_ok());
    return out;
}

TEST(FileImage, AFrozenFileIsItsImageAndInstallsAsTheSourceStood) {
    EngineEnv env;
    auto src = source(env, 4, 200);
    ASSERT_NE(src, nullptr);
    auto none = src->file_image();
    ASSERT_TRUE(none.is_ok()) << why(none.status());
    EXPECT_FALSE(none->has_value()) << "not frozen: writes may land, so no file image";

    ASSERT_TRUE(src->freeze().is_ok());
    auto fi = src->file_image();
    ASSERT_TRUE(fi.is_ok()) << why(fi.status());
    ASSERT_TRUE(fi->has_value());
    const FileImage& image = **fi;
    EXPECT_EQ(image.info.seq, src->seq());
    EXPECT_EQ(image.info.lineage, src->lineage());
    EXPECT_EQ(image.info.history, src->history());
    const std::vector<std::byte> bytes = read_all(image);
    EXPECT_TRUE(bytes == env.fs.contents(kInstallSource)) << "the file as it stands, nothing built";

    EngineEnv env2;
    ImageInfo info;
    auto db = Database::install_open(bytes, kInstallIncoming, kInstallTarget,
                                     InstallMode::create_only, env2.options(), {}, info);
    ASSERT_TRUE(db.is_ok()) << why(db.status());
    EXPECT_EQ(info.seq, image.info.seq);
    EXPECT_EQ(info.bytes, bytes.size());
    EXPECT_EQ(dump(**db), dump(*src));
    EXPECT_TRUE(env2.fs.contents(kInstallTarget) == bytes);
    EXPECT_FALSE(env2.fs.has(kInstallIncoming));
    auto b = (*db)->begin();
    ASSERT_TRUE(b.is_ok()) << why(b.status());
    auto c = b->find("items");
    ASSERT_TRUE(c.is_ok());
    ASSERT_TRUE(b->insert(*c, std::nullopt, Doc{{0, Value(int64_t{-1})}}).is_ok());
    auto l = b->commit();
    ASSERT_TRUE(l.is_ok()) << why(l.status());
    EXPECT_EQ(l->first.v, image.info.seq.v + 1);
}

// An installed image's bytes stay in memory as its documents' store (install_open's owner): a
// file image of it names them, so they are read from memory rather than the file (written past
// the page cache), and they are the file's bytes; what landed after is read from the file; a
// compaction, which replaces the file, leaves none.
TEST(FileImage, AnInstalledImageIsReadFromMemoryUntilTheFileIsRewritten) {
    EngineEnv env;
    auto src = source(env, 4, 200);
    ASSERT_NE(src, nullptr);
    auto built = src->image();
    ASSERT_TRUE(built.is_ok()) << why(built.status());
    auto owned = std::make_shared<std::vector<std::byte>>(*built->bytes);

    EngineEnv env2;
    ImageInfo info;
    auto db = Database::install_open(*owned, kInstallIncoming, kInstallTarget,
                                     InstallMode::create_only, env2.options(), {}, info,
                                     std::shared_ptr<const std::byte[]>(owned, owned->data()));
    ASSERT_TRUE(db.is_ok()) << why(db.status());
    {
        auto b = (*db)->begin();
        ASSERT_TRUE(b.is_ok());
        auto c = b->find("items");
        ASSERT_TRUE(c.is_ok());
        ASSERT_TRUE(b->insert(*c, std::nullopt, Doc{{0, Value(int64_t{-1})}}).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    ASSERT_TRUE((*db)->freeze().is_ok());
    auto fi = (*db)->file_image();
    ASSERT_TRUE(fi.is_ok() && fi->has_value()) << why(fi.status());
    const FileImage& image = **fi;
    ASSERT_NE(image.memory, nullptr);
    EXPECT_EQ(image.memory.get(), owned->data()) << "the installed body itself";
    EXPECT_EQ(image.memory_bytes, owned->size());
    EXPECT_GT(image.info.bytes, image.memory_bytes) << "the insert landed after it";
    const std::vector<std::byte> file = env2.fs.contents(kInstallTarget);
    ASSERT_EQ(file.size(), image.info.bytes);
    EXPECT_TRUE(std::equal(owned->begin(), owned->end(), file.begin()));

    ASSERT_TRUE((*db)->compact().is_ok());
    auto after = (*db)->file_image();
    ASSERT_TRUE(after.is_ok() && after->has_value()) << why(after.status());
    EXPECT_EQ((*after)->memory, nullptr) << "the memory was the old file's";
    EXPECT_EQ((*after)->memory_bytes, 0u);
}

TEST(FileImage, AFileMoreThanAQuarterDeadIsBuiltInsteadUntilCompacted) {
    EngineEnv env;
    auto src = source(env, 1, 400);
    ASSERT_NE(src, nullptr);
    {
        auto b = src->begin();
        ASSERT_TRUE(b.is_ok());
        auto c = b->find("items");
        ASSERT_TRUE(c.is_ok());
        for (uint64_t id = 1; id <= 300; ++id) ASSERT_TRUE(b->del(*c, DocId{id}).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    ASSERT_TRUE(src->freeze().is_ok());
    auto dead = src->file_image();
    ASSERT_TRUE(dead.is_ok()) << why(dead.status());
    EXPECT_FALSE(dead->has_value()) << "three quarters of the rows deleted";
    ASSERT_TRUE(src->compact().is_ok());
    auto compacted = src->file_image();
    ASSERT_TRUE(compacted.is_ok()) << why(compacted.status());
    ASSERT_TRUE(compacted->has_value());
    auto built = src->image();
    ASSERT_TRUE(built.is_ok());
    // Compacted, the file holds what a built image holds, at the same seq.
    EXPECT_EQ((*compacted)->info.seq, built->info.seq);
    EXPECT_EQ((*compacted)->info.bytes, built->info.bytes);
}

TEST(FileImage, ACutOrLongerFileImageIsRefusedAndInstallsNothing) {
    EngineEnv env;
    auto src = source(env, 3, 50);
    ASSERT_NE(src, nullptr);
    ASSERT_TRUE(src->freeze().is_ok());
    auto fi = src->file_image();
    ASSERT_TRUE(fi.is_ok() && fi->has_value());
    const std::vector<std::byte> bytes = read_all(**fi);
    const std::span<const std::byte> all(bytes);
    EngineEnv env2;
    int tried = 0;
    auto refused = [&](std::span<const std::byte> image, const std::string& what) {
        ++tried;
        ImageInfo info;
        auto db = Database::install_open(image, kInstallIncoming, kInstallTarget,
                                         InstallMode::create_only, env2.options(), {}, info);
        EXPECT_FALSE(db.is_ok()) << what;
        if (!db.is_ok()) {
            EXPECT_EQ(db.status().code(), Code::corruption) << what << ": " << why(db.status());
        }
        EXPECT_FALSE(env2.fs.has(kInstallIncoming)) << what;
        EXPECT_FALSE(env2.fs.has(kInstallTarget)) << what;
    };
    // Every cut inside a record (a cut on a record's edge is a shorter valid file: the digest
    // and the seq sent with it refuse that one, node-http.md §8.3).
    std::set<uint64_t> edges;
    for (uint64_t p = engine::format::kHeaderBytes; p < bytes.size();
         p += engine::format::framed_size(engine::format::load_u32(bytes.data() + p))) {
        edges.insert(p);
    }
    EXPECT_GT(edges.size(), 4u);
    for (uint64_t k = 1; k < bytes.size(); k += 97) {
        if (edges.count(k)) continue;
        refused(all.first(k), "cut at " + std::to_string(k));
        if (HasFailure()) return;
    }
    std::vector<std::byte> longer = bytes;
    longer.resize(bytes.size() + 8);
    refused(longer, "8 zero bytes after it");
    EXPECT_GT(tried, 10);
}

}  // namespace
}  // namespace fenec::test::file_image_test
