// test/engine/smoke_test.cc: proves the basic life of a tenant file: create, write blocks,
// reopen to the same state, ids per collection, and a checkpoint that keeps it all.
#include <gtest/gtest.h>

#include "engine/database.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::smoke_test {
namespace {

using namespace engine;

TEST(EngineSmoke, WriteReopenCheckpoint) {
    EngineEnv env;
    std::string before;
    {
        auto db = Database::create("/d/t.fenec", env.options());
        ASSERT_TRUE(db.is_ok()) << db.status().to_string();
        auto b = (*db)->begin();
        ASSERT_TRUE(b.is_ok());
        auto c = b->create_collection("people", schema_of("name:text, age:int"));
        ASSERT_TRUE(c.is_ok()) << c.status().to_string();
        for (int i = 0; i < 3; ++i) {
            auto id = b->insert(*c, std::nullopt, Doc{{0, Value("ann")}, {1, Value(int64_t{30 + i})}});
            ASSERT_TRUE(id.is_ok()) << id.status().to_string();
            EXPECT_EQ(id->v, uint64_t(i + 1));
        }
        auto landed = b->commit();
        ASSERT_TRUE(landed.is_ok()) << landed.status().to_string();
        EXPECT_EQ(landed->first.v, 1u);
        EXPECT_EQ(landed->last.v, 4u);
        EXPECT_TRUE(landed->durable);
        before = dump(**db);
        ASSERT_TRUE((*db)->close().is_ok());
    }
    {
        auto db = Database::open("/d/t.fenec", env.options());
        ASSERT_TRUE(db.is_ok()) << db.status().to_string();
        EXPECT_EQ(dump(**db), before);
        ASSERT_TRUE((*db)->checkpoint().is_ok());
        EXPECT_EQ(dump(**db), before);
        auto b = (*db)->begin();
        ASSERT_TRUE(b.is_ok());
        auto c = b->find("people");
        ASSERT_TRUE(c.is_ok());
        ASSERT_TRUE(b->del(*c, DocId{3}).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
        before = dump(**db);
    }
    auto db = Database::open("/d/t.fenec", env.options());
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    EXPECT_EQ(dump(**db), before);
    EXPECT_EQ((*db)->seq().v, 5u);
    auto b = (*db)->begin();
    auto id = b->insert(*b->find("people"), std::nullopt, Doc{{0, Value("bob")}});
    ASSERT_TRUE(id.is_ok());
    EXPECT_EQ(id->v, 4u);  // 3 was deleted, never reused
}

}  // namespace
}  // namespace fenec::test::smoke_test
