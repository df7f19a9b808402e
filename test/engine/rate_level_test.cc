// test/engine/rate_level_test.cc: Usage's rate levels (engine.md §9, "Rates"), which the node's
// `GET /_admin/tenants/<t>/quota` reports: unset without the rate, a second's worth when full,
// the debt after a block larger than a second, refilled on the steady clock and never past full.
#include <gtest/gtest.h>

#include "engine/database.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::rate_level_test {
namespace {

using namespace engine;

TEST(RateLevel, UsageReportsEachBucketsLevelAndNothingWithoutARate) {
    EngineEnv env;
    auto created = Database::create("/d/t.fenec", env.options());
    ASSERT_TRUE(created.is_ok()) << created.status().to_string();
    std::unique_ptr<Database> db = std::move(*created);
    CollectionId c;
    {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        c = *b->create_collection("items", schema_of("n:int"));
        ASSERT_TRUE(b->commit().is_ok());
    }
    EXPECT_FALSE(db->usage().rows_per_s_level);
    EXPECT_FALSE(db->usage().bytes_per_s_level);
    Limits l;
    l.rows_per_s = 10.0;
    db->set_limit(l);
    ASSERT_TRUE(db->usage().rows_per_s_level);
    EXPECT_DOUBLE_EQ(*db->usage().rows_per_s_level, 10.0);
    EXPECT_FALSE(db->usage().bytes_per_s_level);
    {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        for (int i = 0; i < 50; ++i) {
            ASSERT_TRUE(b->insert(c, std::nullopt, Doc{{0, Value(int64_t{i})}}).is_ok());
        }
        ASSERT_TRUE(b->commit().is_ok());
    }
    EXPECT_DOUBLE_EQ(*db->usage().rows_per_s_level, -40.0);  // 50 rows from a bucket of 10
    env.clock.advance_ms(1000);
    EXPECT_DOUBLE_EQ(*db->usage().rows_per_s_level, -30.0);
    env.clock.advance_ms(60'000);
    EXPECT_DOUBLE_EQ(*db->usage().rows_per_s_level, 10.0);  // full, never past it
    db->set_limit(Limits{});
    EXPECT_FALSE(db->usage().rows_per_s_level);
}

}  // namespace
}  // namespace fenec::test::rate_level_test
