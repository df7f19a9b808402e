// test/shard/standby_promote_test.cc: a standby router promoted (router.md §10, §18 cases 9, 80
// and 81), by hand or with --promote: the term up by one, changes taken, the old primary fenced at
// the nodes the new one reaches, and back only as a follower whose diverged directory is replaced
// by the new primary's image.
#include <gtest/gtest.h>

#include "test/shard/standby_fixture.h"

namespace fenec::test::standby_promote_test {
namespace {

class StandbyPromotion : public StandbyTest {};

// Case 9: promoted by hand, S leads R's term plus one, takes changes, and is no standby.
TEST_F(StandbyPromotion, PromotionRaisesTheTermByOne) {
    const std::string acme = tenant("acme");
    ASSERT_EQ(create(acme, "n1").status, 201);
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); }));
    const int64_t r_term = term_of(on_r("GET", "/_health"));
    ASSERT_EQ(r_term, 0);
    EXPECT_EQ(on_s("POST", "/_replication/promote", {}, kRoot).status, 401);
    Reply p = on_s("POST", "/_replication/promote", {}, kReplication);
    ASSERT_EQ(p.status, 200) << p.body;
    EXPECT_TRUE(Json(p.body).boolean("promoted")) << p.body;
    EXPECT_EQ(Json(p.body).text("history").size(), 16u) << p.body;
    Reply h = on_s("GET", "/_health");
    EXPECT_EQ(term_of(h), r_term + 1) << h.body;
    EXPECT_EQ(Json(h.body).text("role"), "primary") << h.body;
    EXPECT_EQ(sample(on_s("GET", "/_metrics").body, "fenec_router_directory_term"), "1");
    EXPECT_EQ(sample(on_s("GET", "/_metrics").body, "fenec_router_following"), "0");
    Reply again = on_s("POST", "/_replication/promote", {}, kReplication);
    EXPECT_EQ(again.status, 409) << again.body;
    Reply c = on_s("PUT", "/_shard/nodes/n2", R"({"zone":"z9"})");
    EXPECT_EQ(c.status, 200) << "a promoted router takes changes: " << c.body;
    EXPECT_EQ(term_of(on_r("GET", "/_health")), r_term) << "R's own file is untouched";
}

// A standby whose directory has not come has nothing to promote: 409, and it goes on waiting.
TEST_F(StandbyPromotion, NothingToPromoteBeforeTheDirectoryComes) {
    RouterProcess nothing({"--token", kRoot, "--directory", sdir_.path() + "/gone.fenec"});
    const uint16_t gone = nothing.port();
    nothing.kill(SIGKILL);
    start_standby({}, gone);
    Reply p = on_s("POST", "/_replication/promote", {}, kReplication);
    EXPECT_EQ(p.status, 409) << p.body;
    EXPECT_NE(on_s("GET", "/_health").body.find(R"("role":"standby")"), std::string::npos);
}

// §2.2, §10: --promote opens a standby's file as a primary, the term up by one; a router is not
// started both following and promoted.
TEST_F(StandbyPromotion, StartsPromotedWithPromote) {
    const std::string acme = tenant("acme");
    ASSERT_EQ(create(acme, "n1").status, 201);
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); }));
    standby_->kill(SIGTERM);
    start_standby({"--promote"}, 1);
    Reply h = on_s("GET", "/_health");
    EXPECT_EQ(term_of(h), 1) << h.body;
    EXPECT_EQ(Json(h.body).text("role"), "primary") << h.body;
    EXPECT_EQ(on_s("GET", "/_shard/tenants/" + acme).status, 200);
    EXPECT_EQ(on_s("PUT", "/_shard/nodes/n2", R"({"zone":"z9"})").status, 200);

    RouterProcess both({"--replica-of", url_of(router_->port()), "--replication-token", "t",
                        "--promote", "--directory", sdir_.path() + "/y.fenec"});
    EXPECT_EQ(both.wait_exit(), 2);
}

// Case 80, as far as this branch goes (leasing is not wired into the router yet, so R grants
// nothing to be refused): S promoted while R runs carries its term to the nodes it calls — a pair
// recorded through S has n1 follow at term 1 — and from then on n1 refuses R's re-pointing of a
// replica (its follow at term 0), 409 naming S's term, so R records the tenant unreplicated.
TEST_F(StandbyPromotion, APromotedStandbysTermFencesTheOldPrimaryAtTheNodes) {
    const std::string acme = tenant("acme");
    ASSERT_EQ(create(acme, "n2").status, 201);
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); }));
    ASSERT_EQ(on_s("POST", "/_replication/promote", {}, kReplication).status, 200);
    Reply s = on_s("PUT", "/_shard/nodes/n2", R"({"standby":"n1"})");
    ASSERT_EQ(s.status, 200) << s.body;
    EXPECT_NE(s.body.find(R"("unreplicated":[])"), std::string::npos) << s.body;
    EXPECT_TRUE(follows(0, acme, 1)) << copy_on(0, acme).body;

    Reply r = on_r("PUT", "/_shard/nodes/n2", R"({"standby":"n1"})");
    EXPECT_NE(r.body.find(acme), std::string::npos) << "R's copy was refused: " << r.body;
    Reply t = on_r("GET", "/_shard/tenants/" + acme);
    EXPECT_NE(t.body.find("term 1"), std::string::npos) << t.body;
}

// Case 81: R promoted over and diverged (a tenant created on R after S's promotion) comes back
// with --replica-of S: its directory is replaced by S's image, listing S's tenants and none that
// only it had.
TEST_F(StandbyPromotion, ADivergedPrimaryComesBackAsAFollowerOfTheNewOne) {
    const std::string shared = tenant("shared");
    const std::string only_r = tenant("onlyr");
    const std::string only_s = tenant("onlys");
    ASSERT_EQ(create(shared, "n1").status, 201);
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); }));
    ASSERT_EQ(on_s("POST", "/_replication/promote", {}, kReplication).status, 200);
    ASSERT_EQ(create(only_r, "n1").status, 201);  // R, unaware, goes on
    Reply c = on_s("PUT", "/_shard/tenants/" + only_s,
                   R"J({"node":"n2","schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(c.status, 201) << c.body;

    const std::string r_dir = dir_.path() + "/shard.fenec";
    client_.reset();  // its keep-alive connection would hold R's drain
    router_->kill(SIGTERM);
    router_ = std::make_unique<RouterProcess>(
        std::vector<std::string>{"--token", kRoot, "--directory", r_dir, "--replication-token",
                                 kReplication, "--replica-of", url_of(standby_->port()),
                                 "--auth-delay", "0"},
        dir_.path() + "/router.err");
    ASSERT_NE(router_->port(), 0) << read_file(dir_.path() + "/router.err");
    EXPECT_TRUE(eventually([&] { return same("/_shard/tenants"); }))
        << on_r("GET", "/_shard/tenants").body;
    Reply listed = on_r("GET", "/_shard/tenants");
    EXPECT_NE(listed.body.find(only_s), std::string::npos) << listed.body;
    EXPECT_NE(listed.body.find(shared), std::string::npos) << listed.body;
    EXPECT_EQ(listed.body.find(only_r), std::string::npos) << listed.body;
    Reply h = on_r("GET", "/_health");
    EXPECT_EQ(Json(h.body).text("role"), "standby") << h.body;
    EXPECT_EQ(term_of(h), 1) << h.body;
    Reply st = on_r("GET", "/_replication/status", {}, kReplication);
    EXPECT_NE(st.body.find(R"("images":1,)"), std::string::npos) << st.body;
    (void)node(0, "DELETE", "/_admin/tenants/" + only_r);
}

}  // namespace
}  // namespace fenec::test::standby_promote_test
