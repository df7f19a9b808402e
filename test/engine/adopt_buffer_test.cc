// test/engine/adopt_buffer_test.cc: proves that an open or an install keeps the buffer it
// replayed as its documents' store (Collection::adopt) rather than copying them out, only when
// the buffer is mostly live, and holds it exactly as long as the documents point into it: an
// install handed its body's owner keeps it for the database's life (reads and writes go on),
// lets it go at the next rewrite (the documents repacked), and frees it with the database; a
// mostly dead file is copied out and its buffer freed, as before; a file past huge_buffer_min,
// read into huge pages, is replayed, adopted and its torn tail cut as a small one is.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/database.h"
#include "engine/huge_pages.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::adopt_buffer_test {
namespace {

using namespace engine;

std::unique_ptr<Database> source_with_rows(EngineEnv& env, int rows) {
    return database_with_rows(env, kInstallSource, rows, 200);
}

void add_row(Database& db, int n) {
    auto b = db.begin();
    ASSERT_TRUE(b.is_ok());
    auto c = b->find("items");
    ASSERT_TRUE(c.is_ok());
    ASSERT_TRUE(b->insert(*c, std::nullopt, Doc{{0, Value(int64_t{n})}, {1, Value(std::string("x"))}})
                    .is_ok());
    ASSERT_TRUE(b->commit().is_ok());
}

TEST(AdoptBuffer, AnInstallKeepsItsBodyForTheDatabasesLifeAndARewriteLetsItGo) {
    EngineEnv env;
    auto src = source_with_rows(env, 400);
    ASSERT_NE(src, nullptr);
    auto img = src->image();
    ASSERT_TRUE(img.is_ok()) << img.status().to_string();
    auto owned = std::make_shared<std::vector<std::byte>>(*img->bytes);
    const std::weak_ptr<std::vector<std::byte>> watch = owned;

    EngineEnv env2;
    ImageInfo info;
    auto db = Database::install_open(*owned, kInstallIncoming, kInstallTarget,
                                     InstallMode::create_only, env2.options(), {}, info,
                                     std::shared_ptr<const std::byte[]>(owned, owned->data()));
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    // Handed over: the caller's reference goes, the database's stays.
    owned.reset();
    EXPECT_FALSE(watch.expired()) << "the documents were copied out, not adopted";
    EXPECT_EQ((*db)->usage().peak_buffer_bytes, info.bytes);
    EXPECT_EQ(dump(**db), dump(*src));

    // Writes go on beside the adopted store; a rewrite repacks the documents and lets it go.
    add_row(**db, 9999);
    const std::string live = dump(**db);
    ASSERT_TRUE((*db)->compact().is_ok());
    EXPECT_TRUE(watch.expired()) << "a rewrite kept the adopted body";
    EXPECT_EQ(dump(**db), live);
    ASSERT_TRUE((*db)->close().is_ok());
    auto again = Database::open(kInstallTarget, env2.options());
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    EXPECT_EQ(dump(**again), live);
}

TEST(AdoptBuffer, TheBodyGoesWithTheDatabase) {
    EngineEnv env;
    auto src = source_with_rows(env, 100);
    ASSERT_NE(src, nullptr);
    auto img = src->image();
    ASSERT_TRUE(img.is_ok());
    auto owned = std::make_shared<std::vector<std::byte>>(*img->bytes);
    const std::weak_ptr<std::vector<std::byte>> watch = owned;
    EngineEnv env2;
    ImageInfo info;
    auto db = Database::install_open(*owned, kInstallIncoming, kInstallTarget,
                                     InstallMode::create_only, env2.options(), {}, info,
                                     std::shared_ptr<const std::byte[]>(owned, owned->data()));
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    owned.reset();
    EXPECT_FALSE(watch.expired());
    db->reset();
    EXPECT_TRUE(watch.expired()) << "the database's end did not free its adopted body";
}

TEST(AdoptBuffer, AMostlyLiveFileIsAdoptedAtOpenAMostlyDeadOneCopiedOut) {
    EngineEnv env;
    std::string before;
    {
        auto src = source_with_rows(env, 300);
        ASSERT_NE(src, nullptr);
        ASSERT_TRUE(src->close().is_ok());
    }
    {
        auto db = Database::open(kInstallSource, env.options());
        ASSERT_TRUE(db.is_ok()) << db.status().to_string();
        // Adopted: the buffer is the peak, no copy beside it.
        EXPECT_EQ((*db)->usage().peak_buffer_bytes, env.fs.contents(kInstallSource).size());
        // Every row overwritten three times: three quarters of the file dead.
        for (int round = 0; round < 3; ++round) {
            auto b = (*db)->begin();
            ASSERT_TRUE(b.is_ok());
            auto c = b->find("items");
            ASSERT_TRUE(c.is_ok());
            for (uint64_t id = 1; id <= 300; ++id) {
                Doc d{{0, Value(int64_t(id))}, {1, Value(std::string(200, 'z'))}};
                ASSERT_TRUE(b->put(*c, DocId{id}, d).is_ok());
            }
            ASSERT_TRUE(b->commit().is_ok());
        }
        before = dump(**db);
        ASSERT_TRUE((*db)->close().is_ok());
    }
    auto db = Database::open(kInstallSource, env.options());
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    const uint64_t size = env.fs.contents(kInstallSource).size();
    EXPECT_GT((*db)->usage().peak_buffer_bytes, size) << "a mostly dead buffer was kept";
    EXPECT_EQ(dump(**db), before);
}

// The database's seq and, per collection, its rows with each body's size and XXH3: what the
// large file's test compares, where dump()'s hex of 36 MB of bodies would take seconds.
std::string digest(const Database& db) {
    std::string out = "seq " + std::to_string(db.seq().v) + "\n";
    ReadView view = db.read();
    for (const CollectionInfo& c : view.collections()) {
        out += c.name + " rows " + std::to_string(c.rows) + "\n";
        view.scan(c.id, [&](DocId id, DocView doc) {
            const auto body = doc.body();
            out += std::to_string(id.v) + " " + std::to_string(body.size()) + " " +
                   std::to_string(XXH3_64bits(body.data(), body.size())) + "\n";
            return true;
        });
    }
    return out;
}

// A file past huge_buffer_min is read into huge pages (engine/open.cc): the same replay, the buffer
// adopted as the documents' store, a torn tail of zeros cut on disk, and writes going on after.
TEST(AdoptBuffer, AFileOverTheHugePageThresholdIsReadAdoptedAndItsTornTailCut) {
    EngineEnv env;
    std::string before;
    {
        auto db = Database::create(kInstallSource, env.options());
        ASSERT_TRUE(db.is_ok()) << db.status().to_string();
        auto b = (*db)->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->create_collection("items", schema_of("n:int, s:text")).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
        for (int block = 0; block < 9; ++block) {
            auto w = (*db)->begin();
            ASSERT_TRUE(w.is_ok());
            auto c = w->find("items");
            ASSERT_TRUE(c.is_ok());
            for (int i = 0; i < 4; ++i) {  // 1 MB rows: 36 MB in 36 rows
                const int n = block * 4 + i;
                Doc d{{0, Value(int64_t{n})},
                      {1, Value(std::string(1'000'000, char('a' + n % 26)))}};
                auto put = w->insert(*c, std::nullopt, d);
                ASSERT_TRUE(put.is_ok()) << put.status().to_string();
            }
            ASSERT_TRUE(w->commit().is_ok());
        }
        before = digest(**db);
        ASSERT_TRUE((*db)->close().is_ok());
    }
    std::vector<std::byte> bytes = env.fs.contents(kInstallSource);
    const uint64_t whole = bytes.size();
    ASSERT_GE(whole, huge_buffer_min) << "the file does not reach the huge-page read";
    bytes.resize(whole + 4096, std::byte{0});  // a torn tail: an append's zeros
    env.fs.set_contents(kInstallSource, bytes);

    auto db = Database::open(kInstallSource, env.options());
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    EXPECT_EQ(digest(**db), before);
    EXPECT_EQ((*db)->usage().peak_buffer_bytes, whole + 4096) << "the documents were copied out";
    EXPECT_EQ(env.fs.contents(kInstallSource).size(), whole) << "the torn tail was not cut";
    add_row(**db, 424242);
    const std::string after = digest(**db);
    ASSERT_TRUE((*db)->close().is_ok());
    auto again = Database::open(kInstallSource, env.options());
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    EXPECT_EQ(digest(**again), after);
}

}  // namespace
}  // namespace fenec::test::adopt_buffer_test
