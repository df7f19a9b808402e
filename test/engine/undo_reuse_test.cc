// test/engine/undo_reuse_test.cc: proves that a block's undo log, kept emptied by the database for
// the next block (limits::undo_kept_bytes_max), carries nothing over: a block that rolls back
// after committed blocks of every size puts back its own writes and schema changes only, and the
// reopened file agrees. Also that the documents of a collection past one huge-page segment
// (engine/huge_pages.h) read back, roll back across a segment boundary and replay unchanged.
#include <gtest/gtest.h>

#include <string>

#include "engine/database.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::undo_reuse_test {
namespace {

using namespace engine;

Doc row(int64_t i) { return Doc{{0, Value("row-" + std::to_string(i))}, {1, Value(i)}}; }

// A collection made in a block of its own, committed; its id in `out`.
void create_collection(Database& db, const std::string& name, const std::string& spec,
                       CollectionId& out) {
    auto b = db.begin();
    ASSERT_OK(b);
    auto c = b->create_collection(name, schema_of(spec));
    ASSERT_OK(c);
    out = *c;
    ASSERT_OK(b->commit());
}

void put_rows(Database& db, CollectionId c, int64_t from, int n) {
    auto b = db.begin();
    ASSERT_OK(b);
    for (int64_t i = from; i < from + n; ++i) ASSERT_OK(b->put(c, std::nullopt, row(i)));
    ASSERT_OK(b->commit());
}

TEST(UndoReuse, ARollbackAfterKeptLogsPutsBackOnlyItsOwnWrites) {
    EngineEnv env;
    auto db = Database::create("/d/t.fenec", env.options());
    ASSERT_OK(db);
    CollectionId people;
    ASSERT_NO_FATAL_FAILURE(create_collection(**db, "people", "name:text, n:int", people));
    // Logs under the kept size (1,000 writes) and over it (5,000), each committed.
    put_rows(**db, people, 0, 1000);
    put_rows(**db, people, 1000, 5000);
    put_rows(**db, people, 6000, 1000);
    const std::string committed = dump(**db);
    const Seq seq = (*db)->seq();

    // Every kind of undo entry, then the rollback.
    {
        auto b = (*db)->begin();
        ASSERT_OK(b);
        for (int64_t i = 0; i < 700; ++i) ASSERT_OK(b->put(people, std::nullopt, row(10'000 + i)));
        ASSERT_OK(b->set(people, DocId{5}, row(-5)));
        auto gone = b->del(people, DocId{6});
        ASSERT_OK(gone);
        EXPECT_TRUE(*gone);
        AlterSpec rename;
        rename.kind = AlterKind::rename_field;
        rename.field = "n";
        rename.new_name = "m";
        ASSERT_OK(b->alter_collection(people, rename));
        auto extra = b->create_collection("extra", schema_of("x:int"));
        ASSERT_OK(extra);
        ASSERT_OK(b->put(*extra, std::nullopt, Doc{{0, Value(int64_t{1})}}));
        ASSERT_OK(b->drop_collection(people));
        b->rollback();
    }
    EXPECT_EQ(dump(**db), committed);
    EXPECT_EQ((*db)->seq().v, seq.v);

    // A block whose destructor rolls back, after a rollback: the same.
    {
        auto b = (*db)->begin();
        ASSERT_OK(b);
        ASSERT_OK(b->put(people, std::nullopt, row(20'000)));
    }
    EXPECT_EQ(dump(**db), committed);

    // The next block lands, and the file replays to what memory shows.
    put_rows(**db, people, 30'000, 10);
    const std::string after = dump(**db);
    EXPECT_NE(after, committed);
    ASSERT_OK((*db)->close());
    db->reset();
    auto again = Database::open("/d/t.fenec", env.options());
    ASSERT_OK(again);
    EXPECT_EQ(dump(**again), after);
}

TEST(UndoReuse, DocumentsPastAHugePageSegmentReadRollBackAndReplay) {
    EngineEnv env;
    auto db = Database::create("/d/t.fenec", env.options());
    ASSERT_OK(db);
    CollectionId blobs;
    ASSERT_NO_FATAL_FAILURE(create_collection(**db, "blobs", "body:text, n:int", blobs));
    // 100 KiB bodies: segments of 4 KiB doubling to 2 MiB are passed after ~40 of them; the
    // 3 MiB one is larger than a huge page and gets a segment of its own, rounded up.
    auto body = [](int64_t i, size_t bytes) {
        return std::string(bytes, static_cast<char>('a' + i % 26));
    };
    {
        auto b = (*db)->begin();
        ASSERT_OK(b);
        for (int64_t i = 0; i < 80; ++i) {
            ASSERT_OK(
                b->put(blobs, std::nullopt, Doc{{0, Value(body(i, 100 << 10))}, {1, Value(i)}}));
        }
        ASSERT_OK(b->put(blobs, std::nullopt,
                         Doc{{0, Value(body(80, 3 << 20))}, {1, Value(int64_t{80})}}));
        ASSERT_OK(b->commit());
    }
    const std::string committed = dump(**db);
    {
        // Enough to open new segments, then put back: the rewind frees them.
        auto b = (*db)->begin();
        ASSERT_OK(b);
        for (int64_t i = 0; i < 60; ++i) {
            ASSERT_OK(b->put(blobs, std::nullopt, Doc{{0, Value(body(i + 7, 100 << 10))}}));
        }
        ASSERT_OK(b->put(blobs, std::nullopt, Doc{{0, Value(body(1, 5 << 20))}}));
        b->rollback();
    }
    EXPECT_EQ(dump(**db), committed);
    {
        ReadView view = (*db)->read();
        for (int64_t i = 0; i <= 80; ++i) {
            std::optional<DocView> doc = view.get(blobs, DocId{uint64_t(i + 1)});
            ASSERT_TRUE(doc.has_value()) << i;
            EXPECT_EQ(doc->get(0), Value(body(i, i == 80 ? 3 << 20 : 100 << 10))) << i;
            EXPECT_EQ(doc->get(1), Value(i)) << i;
        }
    }
    ASSERT_OK((*db)->close());
    db->reset();
    auto again = Database::open("/d/t.fenec", env.options());
    ASSERT_OK(again);
    EXPECT_EQ(dump(**again), committed);
}

}  // namespace
}  // namespace fenec::test::undo_reuse_test
