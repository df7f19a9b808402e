// test/shard/pairs_test.cc: pairs, a node and the standby node that follows all of its tenants
// (router.md §8.1, §6.3; §18 cases 28 and 29), through fenec-shard against three real fenec-node
// processes shared by the cases: a pair recorded has every tenant of its node follow on the
// standby and a row written through the router appear there; the pair is listed and counted; a
// tenant created on the node gets its copy on the standby and takes it away when deleted;
// `"standby": null` removes the pair and its copies; §8.1's refusals.
#include <gtest/gtest.h>

#include "test/shard/cluster_fixture.h"

namespace fenec::test::pairs_test {
namespace {

class Pairs : public ClusterTest<3> {
  protected:
    void SetUp() override {
        start_router();
        ASSERT_EQ(add(0, "n1").status, 201);
        ASSERT_EQ(add(1, "n2").status, 201);
    }
};

// Case 29: acme and beta on n2, n1 holding no tenant: the pair has both follow on n1, and a row
// written through the router appears there.
TEST_F(Pairs, StandbyFollowsEveryTenantOfItsNode) {
    const std::string acme = tenant("acme");
    const std::string beta = tenant("beta");
    ASSERT_EQ(create(acme, "n2").status, 201);
    ASSERT_EQ(create(beta, "n2").status, 201);
    Reply r = shard("PUT", "/_shard/nodes/n2", R"({"standby":"n1"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(R"("unreplicated":[])"), std::string::npos) << r.body;
    EXPECT_TRUE(follows(0, acme, 1)) << copy_on(0, acme).body;
    EXPECT_TRUE(follows(0, beta, 1)) << copy_on(0, beta).body;
    ASSERT_EQ(data("POST", "/t/" + acme + "/c/notes", R"({"title":"through R"})").status, 201);
    EXPECT_TRUE(eventually([&] { return count_on(0, acme) == R"({"count":1})"; }))
        << count_on(0, acme);

    EXPECT_EQ(shard("GET", "/_shard/pairs").body, R"([{"node":"n2","standby":"n1"}])");
    Reply nodes = shard("GET", "/_shard/nodes");
    EXPECT_NE(nodes.body.find(R"("name":"n1",)"), std::string::npos);
    EXPECT_NE(nodes.body.find(R"("standby_of":"n2","tenants":0,"replicas":2)"), std::string::npos)
        << nodes.body;
    EXPECT_NE(nodes.body.find(R"("standby":"n1","tenants":2,"replicas":0)"), std::string::npos)
        << nodes.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + acme).body).text("replica"), "n1");
    EXPECT_EQ(sample(metrics(), R"(fenec_router_replicas{node="n1"})"), "2");
}

// §8.1: a create on the pair's node makes its copy on the standby; a delete takes it away; no
// tenant is placed on a standby, nor moved there; null removes the pair and its copies.
TEST_F(Pairs, CopiesFollowCreatesAndDeletesUntilThePairGoes) {
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n2", R"({"standby":"n1"})").status, 200);
    const std::string t = tenant("acme");
    Reply r = create(t, "n2");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(Json(r.body).text("replica_on"), "n1") << r.body;
    EXPECT_TRUE(follows(0, t, 1)) << copy_on(0, t).body;
    EXPECT_EQ(create(tenant("other"), "n1").status, 409) << "n1 is a standby";
    EXPECT_EQ(shard("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n1"})").status, 409);

    const std::string gone = tenant("gone");
    ASSERT_EQ(create(gone, "n2").status, 201);
    ASSERT_EQ(copy_on(0, gone).status, 200);
    ASSERT_EQ(shard("DELETE", "/_shard/tenants/" + gone).status, 204);
    EXPECT_EQ(copy_on(0, gone).status, 404) << "the standby's copy went with the tenant";

    r = shard("PUT", "/_shard/nodes/n2", R"({"standby":null})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(shard("GET", "/_shard/pairs").body, "[]");
    EXPECT_EQ(copy_on(0, t).status, 404) << "the copy on the old standby is deleted";
    Reply got = shard("GET", "/_shard/tenants/" + t);
    EXPECT_FALSE(Json(got.body).has("replica")) << got.body;
    EXPECT_FALSE(Json(got.body).has("unreplicated")) << "no copy is asked for: " << got.body;
}

// §8.1's refusals, and case 28: a standby of another region.
TEST_F(Pairs, RefusesWhatCannotBeAPair) {
    ASSERT_EQ(add(2, "n3").status, 201);
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "n3").status, 201);
    EXPECT_EQ(shard("PUT", "/_shard/nodes/n2", R"({"standby":"n9"})").status, 404);
    EXPECT_EQ(shard("PUT", "/_shard/nodes/n2", R"({"standby":"n2"})").status, 400);
    EXPECT_EQ(shard("PUT", "/_shard/nodes/n2", R"({"standby":7})").status, 400);
    Reply r = shard("PUT", "/_shard/nodes/n2", R"({"standby":"n3"})");
    EXPECT_EQ(r.status, 409) << "n3 holds a primary: " << r.body;
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n2", R"({"standby":"n1"})").status, 200);
    EXPECT_EQ(shard("PUT", "/_shard/nodes/n3", R"({"standby":"n1"})").status, 409)
        << "n1 is n2's standby already";
    EXPECT_EQ(shard("PUT", "/_shard/nodes/n1", R"({"standby":"n2"})").status, 409)
        << "a standby has none";
    r = shard("PUT", "/_shard/nodes/n1", R"({"region":"eu"})");
    EXPECT_EQ(r.status, 409) << "its region is fixed while it is in a pair: " << r.body;
    EXPECT_NE(r.body.find(R"("pairs":1)"), std::string::npos) << r.body;
    // Case 28: eu1 in eu, us1 in us.
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n2", R"({"standby":null})").status, 200);
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n1", R"({"region":"us"})").status, 200);
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n2", R"({"region":"eu"})").status, 200);
    r = shard("PUT", "/_shard/nodes/n2", R"({"standby":"n1"})");
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_NE(r.body.find("region `us`, not `eu`"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace fenec::test::pairs_test
