// test/engine/block_view_test.cc: proves the two ways a client's block reaches past its own
// writes: Block::view() reads the block's state (its own writes included, under the writer lock
// it already holds), and put_internal / create_internal_collection let the server's own rows
// (an Idempotency-Key's, node-http.md §5.7) land in a client's block, never counted in the rows
// quota nor charged to the rate buckets (engine.md §9), and replayed as they landed.
#include <gtest/gtest.h>

#include "engine/database.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::block_view_test {
namespace {

using namespace engine;

std::unique_ptr<Database> fresh(EngineEnv& env) {
    auto db = Database::create("/d/t.fenec", env.options());
    EXPECT_TRUE(db.is_ok()) << why(db);
    return std::move(*db);
}

CollectionId make(Database& db, const std::string& name) {
    auto b = db.begin();
    EXPECT_TRUE(b.is_ok()) << why(b);
    auto c = b->create_collection(name, schema_of("n:int"));
    EXPECT_TRUE(c.is_ok()) << why(c);
    EXPECT_TRUE(b->commit().is_ok());
    return *c;
}

Doc row(int64_t n) { return Doc{{0, Value(n)}}; }

Limits rows_max(uint64_t rows) {
    Limits l;
    l.rows = rows;
    return l;
}

Limits rows_per_s(double rate) {
    Limits l;
    l.rows_per_s = rate;
    return l;
}

TEST(BlockView, SeesTheBlocksOwnWritesAtItsSeq) {
    EngineEnv env;
    auto db = fresh(env);
    const CollectionId c = make(*db, "r");
    const Seq before = db->seq();
    const HistoryId history = db->history().current();
    auto b = db->begin();
    ASSERT_OK(b);
    ASSERT_OK(b->insert(c, std::nullopt, row(7)));
    ASSERT_OK(b->insert(c, std::nullopt, row(8)));
    {
        const ReadView v = b->view();
        EXPECT_EQ(v.seq().v, before.v + 2);
        EXPECT_EQ(v.history(), history);
        EXPECT_EQ(v.count(c), 2u);
        auto d = v.get(c, DocId{2});
        ASSERT_TRUE(d.has_value());
        EXPECT_EQ(d->get(0), Value(int64_t{8}));
    }
    b->rollback();
    const ReadView after = db->read();
    EXPECT_EQ(after.seq(), before);
    EXPECT_EQ(after.count(c), 0u);
}

TEST(BlockInternal, ServerRowsLandInAClientBlockOutsideTheRowsQuota) {
    EngineEnv env;
    auto db = fresh(env);
    const CollectionId c = make(*db, "r");
    db->set_limit(rows_max(1));
    auto b = db->begin();
    ASSERT_OK(b);
    ASSERT_OK(b->insert(c, std::nullopt, row(1)));
    auto k = b->create_internal_collection("_idempotency", schema_of("n:int"));
    ASSERT_OK(k);
    ASSERT_OK(b->put_internal(*k, std::nullopt, row(2)));
    ASSERT_OK(b->put_internal(*k, std::nullopt, row(3)));
    auto landed = b->commit();
    ASSERT_OK(landed);
    EXPECT_EQ(landed->last.v - landed->first.v + 1, 4u);  // one block: create and three rows
    Usage u = db->usage();
    EXPECT_EQ(u.rows, 1u);
    EXPECT_EQ(u.internal_rows, 2u);
    // A client row past the quota is still refused: the key rows did not make room.
    auto b2 = db->begin();
    ASSERT_OK(b2);
    ASSERT_OK(b2->insert(c, std::nullopt, row(4)));
    auto refused = b2->commit();
    EXPECT_EQ(refused.status().code(), Code::quota_exceeded) << why(refused);
    // The block was not flagged internal, and replay takes its `_` rows as they landed.
    const std::string state = dump(*db);
    ASSERT_OK(db->close());
    db.reset();
    auto reopened = Database::open("/d/t.fenec", env.options());
    ASSERT_OK(reopened);
    EXPECT_EQ(dump(**reopened), state);
}

TEST(BlockInternal, OnlyTheServersCollections) {
    EngineEnv env;
    auto db = fresh(env);
    const CollectionId c = make(*db, "r");
    auto b = db->begin();
    ASSERT_OK(b);
    EXPECT_EQ(b->put_internal(c, std::nullopt, row(1)).status().code(), Code::invalid_argument);
    EXPECT_EQ(b->create_internal_collection("keys", schema_of("n:int")).status().code(),
              Code::invalid_argument);
    auto k = b->create_internal_collection("_keys", schema_of("n:int"));
    ASSERT_OK(k);
    // The plain calls of a client's block still keep out of `_` collections.
    EXPECT_EQ(b->put(*k, std::nullopt, row(1)).status().code(), Code::invalid_argument);
    EXPECT_EQ(b->insert(*k, std::nullopt, row(1)).status().code(), Code::invalid_argument);
    EXPECT_EQ(b->create_collection("_other", schema_of("n:int")).status().code(),
              Code::invalid_argument);
    EXPECT_EQ(b->writes(), 1u);
}

TEST(BlockInternal, ServerRowsAreNotChargedToTheRates) {
    EngineEnv env;
    auto db = fresh(env);
    make(*db, "r");
    auto b0 = db->begin();
    ASSERT_OK(b0);
    auto k = b0->create_internal_collection("_idempotency", schema_of("n:int"));
    ASSERT_OK(k);
    ASSERT_OK(b0->commit());
    // One row a second and a clock that never moves: a charged row would leave the bucket empty.
    db->set_limit(rows_per_s(1.0));
    for (int i = 0; i < 3; ++i) {
        auto b = db->begin();
        ASSERT_OK(b);
        for (int j = 0; j < 5; ++j) ASSERT_OK(b->put_internal(*k, std::nullopt, row(j)));
        ASSERT_OK(b->commit());
    }
    auto c = db->begin();
    ASSERT_OK(c);
    ASSERT_OK(c->insert(*c->find("r"), std::nullopt, row(1)));
    ASSERT_OK(c->commit());
    EXPECT_EQ(db->begin().status().code(), Code::rate_limited);  // the client's row was charged
}

}  // namespace
}  // namespace fenec::test::block_view_test
