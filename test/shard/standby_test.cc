// test/shard/standby_test.cc: standby routers (router.md §10, §18 cases 78 and 79) through real
// fenec-shard processes in front of real fenec-node processes: a primary R serving its
// directory's feed behind --replication-token, a standby S following it into a file of its own
// and applying each change as it arrives (a create, a move, a delete, a node changed), answering
// reads and the query from its copy, forwarding from the same placements, refusing changes 409
// naming R (and a read asked with `Fenec-Read: primary`), 503 before its directory arrives.
#include <gtest/gtest.h>

#include "test/shard/standby_fixture.h"

namespace fenec::test::standby_test {
namespace {

class Standby : public StandbyTest {};

// §10: S follows R's directory from nothing (an image), then applies each change as it arrives
// and rebuilds its maps: a create, a move, a delete, a node added, all seen on S as on R.
TEST_F(Standby, FollowsEachChangeOfThePrimarysDirectory) {
    const std::string acme = tenant("acme");
    const std::string beta = tenant("beta");
    ASSERT_EQ(create(acme, "n1").status, 201);
    start_standby();
    EXPECT_TRUE(eventually([&] { return caught_up(); })) << on_s("GET", "/_shard/tenants").body;

    ASSERT_EQ(create(beta, "n2").status, 201);
    EXPECT_TRUE(eventually([&] { return on_s("GET", "/_shard/tenants/" + beta).status == 200; }));
    ASSERT_EQ(shard("POST", "/_shard/tenants/" + acme + "/move", R"({"to":"n2"})").status, 200);
    EXPECT_TRUE(eventually([&] {
        return Json(on_s("GET", "/_shard/tenants/" + acme).body).text("node") == "n2";
    })) << on_s("GET", "/_shard/tenants/" + acme).body;
    ASSERT_EQ(shard("DELETE", "/_shard/tenants/" + beta).status, 204);
    EXPECT_TRUE(eventually([&] { return on_s("GET", "/_shard/tenants/" + beta).status == 404; }));
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n2", R"({"zone":"z2"})").status, 200);
    EXPECT_TRUE(eventually([&] { return same("/_shard/nodes"); }))
        << on_s("GET", "/_shard/nodes").body;
    EXPECT_TRUE(same("/_shard/tenants"));

    // One image (the first start), every change after it a block of the feed.
    Reply st = on_s("GET", "/_replication/status", {}, kReplication);
    ASSERT_EQ(st.status, 200) << st.body;
    EXPECT_EQ(Json(st.body).text("role"), "standby") << st.body;
    EXPECT_NE(st.body.find(R"("images":1,)"), std::string::npos) << st.body;
    EXPECT_NE(st.body.find(R"("connected":true)"), std::string::npos) << st.body;
    Reply rs = on_r("GET", "/_replication/status", {}, kReplication);
    EXPECT_EQ(Json(rs.body).text("role"), "primary") << rs.body;
    EXPECT_NE(rs.body.find(R"("keeping_up":true)"), std::string::npos) << rs.body;
}

// §3: the feed is behind --replication-token: 401 without it, 404 on a router without one.
TEST_F(Standby, TheFeedIsGuardedByTheReplicationToken) {
    Reply r = on_r("GET", "/_replication?since=0", {}, "wrong");
    EXPECT_EQ(r.status, 401) << r.body;
    EXPECT_EQ(on_r("GET", "/_replication/status", {}, kRoot).status, 401);
    RouterProcess plain({"--token", kRoot, "--directory", sdir_.path() + "/plain.fenec"});
    Client c(plain.port());
    EXPECT_EQ(c.request("GET", "/_replication", {}, bearer(kReplication))->status, 404);
}

// §2.2, §2.3: a standby needs the replication token; a following file opens only to follow (or
// be promoted), never as a primary's.
TEST_F(Standby, RefusesToStartWhatCannotFollow) {
    RouterProcess no_token(
        {"--replica-of", url_of(router_->port()), "--directory", sdir_.path() + "/x.fenec"});
    EXPECT_EQ(no_token.wait_exit(), 2);
    RouterProcess bad_url({"--replica-of", "127.0.0.1:1", "--replication-token", "t", "--directory",
                           sdir_.path() + "/z.fenec"});
    EXPECT_EQ(bad_url.wait_exit(), 2);
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); }));
    standby_->kill(SIGTERM);
    RouterProcess plain({"--token", kRoot, "--directory", sdir_.path() + "/standby.fenec"});
    EXPECT_EQ(plain.wait_exit(), 2);
}

// Case 78: reads and a query on S answer as on R; data goes through S to the tenant's node; a
// change is 409 naming R, and asked again it refuses again.
TEST_F(Standby, AnswersReadsFromItsCopyAndRefusesChanges) {
    const std::string acme = tenant("acme");
    ASSERT_EQ(create(acme, "n1").status, 201);
    start_standby();
    // Serving (its directory and its nodes' tokens taken), not only its rows copied: a standby
    // still waiting for the tokens answers a data request 503.
    ASSERT_TRUE(eventually([&] { return caught_up() && same("/_shard/tenants/" + acme); }));
    EXPECT_TRUE(same("/_shard/nodes/n1"));
    EXPECT_TRUE(same("/_shard/pairs"));

    Client s(standby_->port());
    auto w =
        s.request("POST", "/t/" + acme + "/c/notes", R"({"title":"through S"})", bearer(kData));
    ASSERT_TRUE(w);
    EXPECT_EQ(w->status, 201) << w->body;
    EXPECT_EQ(count_on(0, acme), R"({"count":1})");
    const std::string query = R"({"statement":"get notes"})";
    Reply qs = on_s("POST", "/_shard/query", query);
    Reply qr = on_r("POST", "/_shard/query", query);
    EXPECT_EQ(qs.status, 200) << qs.body;
    EXPECT_EQ(qs.status, qr.status);
    EXPECT_NE(qs.body.find("through S"), std::string::npos) << qs.body;

    const std::string expected =
        "{\"error\":\"this router follows " + url_of(router_->port()) +
        ": send changes there, or promote this one with POST /_replication/promote\","
        "\"primary\":\"" +
        url_of(router_->port()) + "\"}";
    for (int i = 0; i < 2; ++i) {
        Reply c = on_s("PUT", "/_shard/tenants/" + tenant("other"), R"({"node":"n1"})");
        EXPECT_EQ(c.status, 409);
        EXPECT_EQ(c.body, expected);
    }
    EXPECT_EQ(on_s("DELETE", "/_shard/tenants/" + acme).status, 409);
    EXPECT_EQ(on_s("POST", "/_shard/tenants/" + acme + "/move", R"({"to":"n2"})").status, 409);
    EXPECT_EQ(on_r("GET", "/_shard/tenants/" + tenant("other")).status, 404);
    EXPECT_EQ(copy_on(0, acme).status, 200) << "nothing was deleted through S";
    EXPECT_EQ(sample(on_s("GET", "/_metrics").body, "fenec_router_following"), "1");
    EXPECT_EQ(sample(metrics(), "fenec_router_following"), "0");
    // Its copy of the directory may lag R's: it names no copy a stray (a tenant R made since
    // would be one), which R's status does.
    EXPECT_NE(on_s("GET", "/_shard/status").body.find(R"("strays":null)"), std::string::npos)
        << on_s("GET", "/_shard/status").body;
    EXPECT_NE(on_r("GET", "/_shard/status").body.find(R"("strays":[)"), std::string::npos)
        << on_r("GET", "/_shard/status").body;
}

// §6.1 [ours]: a read a decision rests on, asked with `Fenec-Read: primary`, is refused by S
// naming R, as a change is (a relay passes it to the next router); R answers it; a value other
// than `primary` is 400 on either.
TEST_F(Standby, AReadAskedOfThePrimaryIsRefusedNamingIt) {
    const std::string acme = tenant("acme");
    ASSERT_EQ(create(acme, "n1").status, 201);
    start_standby();
    ASSERT_TRUE(eventually([&] { return same("/_shard/tenants/" + acme); }));
    const std::string target = "/_shard/tenants/" + acme;
    auto asked = [&](uint16_t port, const std::string& value) {
        Client c(port);
        auto headers = bearer(kRoot);
        headers.emplace_back("Fenec-Read", value);
        return c.request("GET", target, {}, headers).value_or(Reply{});
    };
    Reply s = asked(standby_->port(), "primary");
    EXPECT_EQ(s.status, 409) << s.body;
    EXPECT_EQ(Json(s.body).text("primary"), url_of(router_->port())) << s.body;
    EXPECT_NE(s.body.find("a read asked of the primary"), std::string::npos) << s.body;
    Reply r = asked(router_->port(), "primary");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(r.body).text("node"), "n1") << r.body;
    EXPECT_EQ(on_s("GET", target).status, 200) << "without it S answers from its copy";
    for (uint16_t port : {standby_->port(), router_->port()}) {
        Reply bad = asked(port, "any");
        EXPECT_EQ(bad.status, 400) << bad.body;
        EXPECT_NE(bad.body.find("Fenec-Read"), std::string::npos) << bad.body;
    }
}

// Case 79: S following nothing answers `/t/` 503 with Retry-After: 1 (unknown is not absent),
// and says so in _health.
TEST_F(Standby, WaitsForItsDirectoryBeforeAnsweringTenants) {
    RouterProcess nothing({"--token", kRoot, "--directory", sdir_.path() + "/gone.fenec"});
    const uint16_t gone = nothing.port();
    nothing.kill(SIGKILL);
    start_standby({}, gone);
    Reply r = on_s("GET", "/t/acme/c/notes", {}, kData);
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.header("Retry-After").value_or(""), "1");
    Reply h = on_s("GET", "/_health");
    EXPECT_EQ(h.body,
              R"({"ok":true,"role":"standby","scope":"global","term":0,"directory":"waiting"})");
}

// A standby's first start: its directory has come but its nodes' tokens not yet (the first ask
// held 3 s). A tenant's request and a query across tenants are 503 (asked again), never sent to
// a node without its credential (they were 401s from the node); then both answer.
TEST_F(Standby, WaitsForItsNodesTokensBeforeAnswering) {
    const std::string acme = tenant("acme");
    ASSERT_EQ(create(acme, "n1").status, 201);
    ::setenv("FENEC_TEST_TOKENS_STALL", "3000", 1);
    start_standby();
    ::unsetenv("FENEC_TEST_TOKENS_STALL");
    ASSERT_TRUE(eventually([&] { return same("/_shard/tenants/" + acme); }));
    const std::string query = R"({"statement":"get notes"})";
    Reply q = on_s("POST", "/_shard/query", query);
    EXPECT_EQ(q.status, 503) << q.body;
    EXPECT_EQ(q.header("Retry-After").value_or(""), "1");
    Reply g = on_s("GET", "/t/" + acme + "/c/notes", {}, kData);
    EXPECT_EQ(g.status, 503) << g.body;
    EXPECT_NE(on_s("GET", "/_health").body.find(R"("directory":"waiting")"), std::string::npos);

    ASSERT_TRUE(eventually([&] { return on_s("POST", "/_shard/query", query).status == 200; },
                           10000));
    EXPECT_EQ(on_s("GET", "/t/" + acme + "/c/notes", {}, kData).status, 200);
}

}  // namespace
}  // namespace fenec::test::standby_test
