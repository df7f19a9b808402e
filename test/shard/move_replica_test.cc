// test/shard/move_replica_test.cc: a tenant's own replica through a move (router.md §7.2 steps
// 1 and 9; §18 cases 47 and 48, within one region) with three real fenec-node processes shared
// by the cases: a replica that still fits stays where it is and follows the target, a row
// written after the move reaching it; a replica on the move's target is taken off first and
// placed again elsewhere, never on the source the move deletes.
#include <gtest/gtest.h>

#include "test/shard/cluster_fixture.h"

namespace fenec::test::move_replica_test {
namespace {

class MoveReplica : public ClusterTest<3> {
  protected:
    void SetUp() override { start_router({"--replicas"}); }
};

// Case 48: acme on eu1 (fra) with its replica on eu3 (ams), moved to eu2 (fra): the replica
// stays on eu3, now following eu2.
TEST_F(MoveReplica, ReplicaThatStillFitsStays) {
    ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(1, "eu2", "eu", "fra").status, 201);
    ASSERT_EQ(add(2, "eu3", "eu", "ams").status, 201);
    const std::string t = tenant("acme");
    Reply r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    ASSERT_EQ(Json(r.body).text("replica_on"), "eu3") << r.body;
    ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"before"})").status, 201);

    // The adds' repairs, queued, may come after the create and hold the tenant a moment.
    r = shard_past_repair("POST", "/_shard/tenants/" + t + "/move", R"({"to":"eu2"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(r.body).text("replica_on"), "eu3") << r.body;
    EXPECT_TRUE(Json(r.body).boolean("source_removed")) << r.body;
    EXPECT_TRUE(follows(2, t, 1)) << copy_on(2, t).body;
    // The same copy, told a second time whom to follow; one deleted and made again starts at 1.
    EXPECT_NE(copy_on(2, t).body.find(R"("told":2)"), std::string::npos) << copy_on(2, t).body;
    ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"after"})").status, 201);
    EXPECT_TRUE(eventually([&] { return count_on(2, t) == R"({"count":2})"; })) << count_on(2, t);
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("replica"), "eu3");
}

// Case 47 within one region: acme on eu1 with its replica on eu2, moved to eu2: the replica
// there is detached first (a node holds one copy of a tenant), and a new one placed on eu3, not
// on eu1, whose copy the move deletes.
TEST_F(MoveReplica, ReplicaOnTheTargetIsPlacedAgain) {
    ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(1, "eu2", "eu", "ams").status, 201);
    const std::string t = tenant("acme");
    Reply r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    ASSERT_EQ(Json(r.body).text("replica_on"), "eu2") << r.body;
    ASSERT_EQ(add(2, "eu3", "eu", "ams").status, 201);
    ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"before"})").status, 201);

    // eu3's arrival starts a repair, which may hold the tenant when the move comes.
    r = shard_past_repair("POST", "/_shard/tenants/" + t + "/move", R"({"to":"eu2"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(r.body).text("replica_on"), "eu3") << r.body;
    EXPECT_EQ(copy_on(0, t).status, 404) << "the source's copy was deleted, not kept as a replica";
    EXPECT_EQ(copy_on(1, t).status, 200);
    EXPECT_NE(copy_on(1, t).body.find(R"("role":"primary")"), std::string::npos)
        << copy_on(1, t).body;
    EXPECT_TRUE(follows(2, t, 1)) << copy_on(2, t).body;
    EXPECT_TRUE(eventually([&] { return count_on(2, t) == R"({"count":1})"; })) << count_on(2, t);
}

}  // namespace
}  // namespace fenec::test::move_replica_test
