// test/shard/standby_region_test.cc: one router a region with one directory (router.md §11.2,
// seed 002 "One router a region"): a primary router R in eu keeping the directory under
// --replicas and --default-region eu, a standby router S (in another region, as a router of us
// would be) following it, both started with one --token. Nodes in two regions, two zones each.
// A tenant created through R in a named region lands there with its replica in the same region
// and another zone; S answers its row as R does, region and replica included; a client of S
// writes to the tenant through S and reads the write through R (S forwards to the node wherever
// it is, from the same placements); S refuses a change 409 naming R; a move across regions on
// R reaches S's placements, and S forwards there at once.
#include <gtest/gtest.h>

#include "test/shard/standby_fixture.h"

namespace fenec::test::standby_region_test {
namespace {

class StandbyRegion : public WithStandby<ClusterTest<4>> {
  protected:
    void SetUp() override {
        start_router({"--replication-token", kReplication, "--replicas", "--default-region", "eu"});
        ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
        ASSERT_EQ(add(1, "eu2", "eu", "ams").status, 201);
        ASSERT_EQ(add(2, "tr1", "tr", "ist").status, 201);
        ASSERT_EQ(add(3, "tr2", "tr", "ank").status, 201);
    }
    // The note count tenant `t` answers through S (or R) by its data token.
    std::string count_via(bool standby, const std::string& t) {
        Client c(standby ? standby_->port() : router_->port());
        return c.request("GET", "/t/" + t + "/c/notes?count", {}, bearer(kData))
            .value_or(Reply{})
            .body;
    }
};

TEST_F(StandbyRegion, AStandbyInAnotherRegionForwardsFromThePrimarysPlacements) {
    const std::string acme = tenant("acme");
    Reply made = shard("PUT", "/_shard/tenants/" + acme,
                       R"j({"region":"tr","schema":["create collection notes (title text)"]})j");
    ASSERT_EQ(made.status, 201) << made.body;
    Json m(made.body);
    EXPECT_EQ(m.text("region"), "tr") << made.body;
    const std::string node = m.text("node");
    const std::string replica = m.text("replica_on");
    ASSERT_TRUE(node == "tr1" || node == "tr2") << made.body;
    EXPECT_EQ(replica, node == "tr1" ? "tr2" : "tr1") << "a copy in its region, another zone";

    // A create naming no region goes to --default-region's.
    const std::string beta = tenant("beta");
    Reply b = shard("PUT", "/_shard/tenants/" + beta,
                    R"j({"schema":["create collection notes (title text)"]})j");
    ASSERT_EQ(b.status, 201) << b.body;
    EXPECT_EQ(Json(b.body).text("region"), "eu") << b.body;

    // S, started with the same --token, follows R and answers the rows as R does.
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); })) << on_s("GET", "/_shard/tenants").body;
    Reply row = on_s("GET", "/_shard/tenants/" + acme);
    ASSERT_EQ(row.status, 200) << row.body;
    EXPECT_EQ(Json(row.body).text("region"), "tr") << row.body;
    EXPECT_EQ(Json(row.body).text("replica"), replica) << row.body;
    EXPECT_TRUE(same("/_shard/tenants?region=tr"));

    // A client of S writes through S; the write is on the tenant's node, read through R.
    Client cs(standby_->port());
    Reply put =
        cs.request("POST", "/t/" + acme + "/c/notes", R"({"title":"from us"})", bearer(kData))
            .value_or(Reply{});
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(count_via(false, acme), R"({"count":1})");
    EXPECT_EQ(count_on(node == "tr1" ? 2 : 3, acme), R"({"count":1})");

    // A change asked of S is refused, naming R; R takes it.
    Reply refused = on_s("POST", "/_shard/tenants/" + acme + "/move", R"({"region":"eu"})");
    EXPECT_EQ(refused.status, 409) << refused.body;
    EXPECT_NE(refused.body.find(url_of(router_->port())), std::string::npos) << refused.body;
    Reply moved = shard("POST", "/_shard/tenants/" + acme + "/move", R"({"region":"eu"})");
    ASSERT_EQ(moved.status, 200) << moved.body;
    EXPECT_EQ(Json(moved.body).text("region"), "eu") << moved.body;

    // S learns the new placement from R's feed and forwards there: the note moved with it.
    ASSERT_TRUE(eventually([&] {
        return Json(on_s("GET", "/_shard/tenants/" + acme).body).text("region") == "eu";
    })) << on_s("GET", "/_shard/tenants/" + acme).body;
    EXPECT_EQ(count_via(true, acme), R"({"count":1})");
    Reply again =
        cs.request("POST", "/t/" + acme + "/c/notes", R"({"title":"after"})", bearer(kData))
            .value_or(Reply{});
    EXPECT_EQ(again.status, 201) << again.body;
    EXPECT_EQ(count_via(false, acme), R"({"count":2})");
}

}  // namespace
}  // namespace fenec::test::standby_region_test
