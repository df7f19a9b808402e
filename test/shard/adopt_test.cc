// test/shard/adopt_test.cc: a region moved out of the global directory (router.md §11.9,
// shard/adopt.h). The body the global router relays (`POST /_shard/adopt`) is read back as it was
// written and refused where it is wrong; and through real processes — the global router G leasing
// two nodes of region us (one paired with the other) and us's own router started with --region
// and --global — `PUT /_shard/regions/us` hands us's rows to us's router: G keeps the tenant as
// `@us` and no node, us's router places it, pairs it and leases its nodes under its own
// authority without waiting for G's lease to lapse (released), and the tenant takes writes
// through either router, none lost. The adoption is refused to a request no router relayed. The
// oracle is each router's API and what the nodes say of their leases and copies.
#include "shard/adopt.h"

#include <gtest/gtest.h>

#include <future>

#include "server/runtime/mark.h"
#include "test/shard/standby_fixture.h"

namespace fenec::test::adopt_test {
namespace {

using shard::adopt_body;
using shard::parse_adopt_body;
using shard::RegionRows;

RegionRows two_nodes() {
    RegionRows rows;
    rows.region = "us";
    shard::NodeRow n1, n2;
    n1.name = "n1", n1.addr = "127.0.0.1:7001", n1.token = "n1-admin", n1.region = "us";
    n1.zone = "a", n1.lease = "takes";
    n2.name = "n2", n2.addr = "127.0.0.1:7002", n2.region = "us", n2.zone = "b";
    n2.lease = "takes", n2.token_env = "N2_TOKEN";
    rows.nodes = {n1, n2};
    rows.pairs = {{"n1", "n2"}};
    rows.replicas = {{"beta", "n1"}};
    shard::TenantRow acme, beta;
    acme.name = "acme", acme.node = "n1", acme.lineage = "0123456789abcdef";
    acme.quota = shard::Quota{};
    acme.quota->limits[0] = 1000000;
    beta.name = "beta", beta.node = "n2", beta.forked = "fedcba9876543210";
    beta.failed_from = "n1";
    rows.tenants = {acme, beta};
    return rows;
}

TEST(AdoptBody, RowsWrittenAreReadBackTheSame) {
    const RegionRows rows = two_nodes();
    const std::string body = adopt_body(rows);
    const shard::ParsedRegionRows back = parse_adopt_body(body);
    ASSERT_EQ(back.error, "") << body;
    EXPECT_EQ(adopt_body(back.rows), body);
    ASSERT_EQ(back.rows.nodes.size(), 2u);
    EXPECT_EQ(back.rows.nodes[0].token, "n1-admin");
    EXPECT_EQ(back.rows.nodes[0].region, "us");
    // A token a node reads from its variable is not sent in the clear.
    EXPECT_EQ(back.rows.nodes[1].token_env, "N2_TOKEN");
    EXPECT_EQ(body.find("\"token\":\"\""), std::string::npos) << body;
    ASSERT_EQ(back.rows.tenants.size(), 2u);
    EXPECT_EQ(back.rows.tenants[0].quota, rows.tenants[0].quota);
    EXPECT_EQ(back.rows.tenants[1].failed_from, "n1");
    EXPECT_EQ(back.rows.replicas, rows.replicas);
    EXPECT_EQ(back.rows.pairs, rows.pairs);
}

TEST(AdoptBody, AWrongBodyIsRefusedNamingWhatIsWrong) {
    auto refused = [](const std::string& body) { return parse_adopt_body(body).error; };
    EXPECT_EQ(refused("[]"), "the body is not a JSON object");
    EXPECT_NE(refused(R"({"region":"us","extra":1})").find("unknown field `extra`"),
              std::string::npos);
    EXPECT_NE(refused(R"({"region":"US"})").find("field `region`"), std::string::npos);
    EXPECT_NE(refused(R"j({"region":"us","tenants":[{"name":"a","node":"n9"}]})j")
                  .find("node `n9` is not among the nodes adopted"),
              std::string::npos);
    EXPECT_NE(refused(R"j({"region":"us","nodes":[{"name":"n1","addr":"h:1"}],
                          "tenants":[{"name":"a","node":"n1","state":"moving"}]})j")
                  .find("tenant `a` is moving"),
              std::string::npos);
    EXPECT_NE(refused(R"j({"region":"us","nodes":[{"name":"n1","addr":"h:1"},
                                                  {"name":"n1","addr":"h:2"}]})j")
                  .find("named twice"),
              std::string::npos);
    EXPECT_NE(refused(R"j({"region":"us","nodes":[{"name":"n1","addr":"h:1"}],
                          "tenants":[{"name":"a","node":"n1","quota":{"rows":-1}}]})j")
                  .find("tenant `a`'s quota"),
              std::string::npos);
    EXPECT_NE(refused(R"j({"region":"us","nodes":[{"name":"n1","addr":"h:1"}],
                          "replicas":[{"tenant":"zz","node":"n1"}]})j")
                  .find("no such tenant"),
              std::string::npos);
    // A refusal carries no rows.
    EXPECT_TRUE(parse_adopt_body(R"j({"region":"us","nodes":[{"name":"n1","addr":"h:1"}],
                                      "tenants":[{"name":"a","node":"n9"}]})j")
                    .rows.nodes.empty());
}

class AdoptRegion : public LeasedClusterTest<2> {
  protected:
    // G leases at 5 s: a node G leased takes another directory's grant only once G's lease
    // lapsed or was released, so us's lease on it within much less than that is the release.
    void SetUp() override {
        start_router({"--replication-token", kReplication, "--auto-failover", "5"});
    }
    std::string g_url() const { return url_of(router_->port()); }

    std::unique_ptr<RouterProcess> us_router() {
        std::vector<std::string> flags = {
            "--token",  kRoot,   "--directory",         dir_.file("us.fenec"), "--region", "us",
            "--global", g_url(), "--replication-token", kReplication,          "--auth-delay",
            "0",        "--auto-failover", "5"};
        auto r = std::make_unique<RouterProcess>(flags, dir_.file("us.err"));
        EXPECT_NE(r->port(), 0) << read_file(dir_.file("us.err"));
        return r;
    }
    static Reply on(uint16_t port, std::string_view method, std::string_view target,
                    std::string_view body = {}, const std::string& token = kRoot) {
        Client c(port);
        return c.request(method, target, body, bearer(token)).value_or(Reply{});
    }
    // A write to `tenant` through the router on `port`, asked again while a lease is not yet
    // held (503); its status.
    static int write(uint16_t port, const std::string& tenant, const std::string& title) {
        Reply r;
        eventually([&] {
            r = on(port, "POST", "/t/" + tenant + "/c/notes", "{\"title\":\"" + title + "\"}",
                   kData);
            return r.status != 503;
        }, 8000);
        return r.status;
    }
    // The authority node i's running lease came from, "" when none runs.
    std::string lease_authority(int i) {
        Reply r = node(i, "GET", "/_admin/lease", {}, node_admin_token(i));
        Json j(r.body);
        simdjson::dom::element lease;
        if (!j.ok || j.doc["lease"].get(lease) || lease.is_null()) return "";
        return Json::text(lease, "authority");
    }
};

TEST_F(AdoptRegion, ARegionMovesOutWithItsNodesTenantsAndLeases) {
    ASSERT_EQ(add(0, "n1", "us", "a").status, 201);
    ASSERT_EQ(add(1, "n2", "us", "b").status, 201);
    const std::string t = tenant("acme");
    const Reply p = shard("PUT", "/_shard/nodes/n1", R"({"standby":"n2"})");
    ASSERT_EQ(p.status, 200) << p.body;
    ASSERT_EQ(create(t, "n1").status, 201);
    ASSERT_EQ(write(router_->port(), t, "before"), 201);
    const std::string g_authority = lease_authority(0);
    ASSERT_NE(g_authority, "");

    auto us = us_router();
    const std::string us_url = url_of(us->port());
    Reply put = on(router_->port(), "PUT", "/_shard/regions/us",
                   "{\"routers\":[\"" + us_url + "\"]}");
    ASSERT_EQ(put.status, 201) << put.body << read_file(dir_.file("us.err"));
    EXPECT_EQ(put.body, "{\"region\":\"us\",\"routers\":[\"" + us_url +
                            "\"],\"adopted\":{\"nodes\":2,\"tenants\":1}}");

    // G keeps the name alone, at home in us, and no node of us.
    Json g_row(on(router_->port(), "GET", "/_shard/tenants/" + t).body);
    EXPECT_EQ(g_row.text("node"), "@us");
    EXPECT_EQ(g_row.text("region"), "us");
    EXPECT_EQ(on(router_->port(), "GET", "/_shard/nodes").body, "[]");
    // us's router places it where it was, keeps the pair, and leases the nodes itself, taken
    // well before G's 5 s lease would have lapsed.
    Json us_row(on(us->port(), "GET", "/_shard/tenants/" + t).body);
    EXPECT_EQ(us_row.text("node"), "n1");
    EXPECT_EQ(us_row.text("replica"), "n2") << on(us->port(), "GET", "/_shard/tenants/" + t).body;
    Reply us_nodes = on(us->port(), "GET", "/_shard/nodes");
    EXPECT_NE(us_nodes.body.find("\"name\":\"n1\""), std::string::npos) << us_nodes.body;
    EXPECT_NE(us_nodes.body.find("\"standby\":\"n2\""), std::string::npos) << us_nodes.body;
    std::string us_authority;
    EXPECT_TRUE(eventually(
        [&] {
            us_authority = lease_authority(0);
            return !us_authority.empty() && us_authority != g_authority;
        },
        3000))
        << "n1 still leased by " << lease_authority(0);
    EXPECT_TRUE(us_authority.ends_with("/us")) << us_authority;

    // Writes go on through us's router and through G (relayed), none lost.
    ASSERT_EQ(write(us->port(), t, "through us"), 201);
    ASSERT_EQ(write(router_->port(), t, "through G"), 201);
    Reply count = node(0, "GET", "/t/" + t + "/c/notes?count", {}, kData);
    EXPECT_NE(count.body.find("\"count\":3"), std::string::npos) << count.body;
    EXPECT_TRUE(eventually([&] {
        return node(1, "GET", "/t/" + t + "/c/notes?count", {}, kData).body.find("\"count\":3") !=
               std::string::npos;
    })) << "n2's copy does not follow n1 any more";

    // Asked again, nothing is left to adopt: the row is replaced.
    Reply again = on(router_->port(), "PUT", "/_shard/regions/us",
                     "{\"routers\":[\"" + us_url + "\"]}");
    EXPECT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(Json(on(us->port(), "GET", "/_shard/tenants/" + t).body).text("node"), "n1");
}

// A node of the region owed a thaw (a move undone while it was silent left its copy frozen) is
// not handed over: G pays that thaw when the node answers, and the region's router would never
// hear of it. Refused 409 naming the node; once the node answered and the thaw was paid, the
// region moves out and the tenant takes writes. Before, the hand-over deleted the debt with the
// node's rows, and the copy stayed frozen under the region's router.
TEST_F(AdoptRegion, ANodeOwedAThawIsNotHandedOverUntilItIsPaid) {
    ASSERT_EQ(add(0, "n1", "us", "a").status, 201);
    ASSERT_EQ(add(1, "n2", "us", "b").status, 201);
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "n1").status, 201);
    ASSERT_EQ(write(router_->port(), t, "before"), 201);
    nodes_->procs[0]->signal(SIGSTOP);  // TearDown continues it
    // Undone once G judges n1's 5 s lease certainly lapsed, its calls there cut.
    Client c(router_->port(), 30'000);
    const Reply m =
        c.request("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n2"})", bearer(kRoot))
            .value_or(Reply{});
    EXPECT_EQ(m.status, 502) << m.body;
    const std::string owed = R"("thaws_owed":[{"node":"n1","tenant":")" + t + R"("}])";
    ASSERT_NE(shard("GET", "/_shard/status").body.find(owed), std::string::npos)
        << shard("GET", "/_shard/status").body << read_file(dir_.path() + "/router.err");

    auto us = us_router();
    const std::string routers = "{\"routers\":[\"" + url_of(us->port()) + "\"]}";
    const Reply refused = on(router_->port(), "PUT", "/_shard/regions/us", routers);
    EXPECT_EQ(refused.status, 409) << refused.body;
    EXPECT_NE(refused.body.find("node `n1` of region `us` is owed the thaw of `" + t + "`"),
              std::string::npos)
        << refused.body;
    EXPECT_EQ(on(router_->port(), "GET", "/_shard/tenants/" + t).status, 200);

    nodes_->procs[0]->signal(SIGCONT);
    ASSERT_TRUE(eventually(
        [&] {
            return shard("GET", "/_shard/status").body.find(R"("thaws_owed":[])") !=
                   std::string::npos;
        },
        15000))
        << shard("GET", "/_shard/status").body << read_file(dir_.path() + "/router.err");
    const Reply put = on(router_->port(), "PUT", "/_shard/regions/us", routers);
    ASSERT_EQ(put.status, 201) << put.body << read_file(dir_.file("us.err"));
    EXPECT_EQ(write(us->port(), t, "after"), 201);
}

// A tenant created on one of the region's nodes while its router adopts the region's rows is not
// left behind: the hand-over refuses (409, ask again) rather than remove the node under it, and
// asked again takes it too. Before, the new tenant's row stayed in G on a node G no longer had.
TEST_F(AdoptRegion, ATenantCreatedWhileTheRegionIsHandedOverGoesWithItWhenAskedAgain) {
    ASSERT_EQ(add(0, "n1", "us", "a").status, 201);
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "n1").status, 201);
    client_.reset();
    router_.reset();
    ::setenv("FENEC_TEST_TWO_LEVEL_STALL", "adopted:1500", 1);
    start_router({"--replication-token", kReplication, "--auto-failover", "5"});
    ::unsetenv("FENEC_TEST_TWO_LEVEL_STALL");
    auto us = us_router();
    const std::string body = "{\"routers\":[\"" + url_of(us->port()) + "\"]}";
    auto put = std::async(std::launch::async,
                          [&] { return on(router_->port(), "PUT", "/_shard/regions/us", body); });
    ASSERT_TRUE(logged(dir_.path() + "/router.err", "test hook: held after `adopted`", 10000));
    const std::string late = tenant("late");
    ASSERT_EQ(create(late, "n1").status, 201);
    const Reply first = put.get();
    EXPECT_EQ(first.status, 409) << first.body;
    const Reply again = on(router_->port(), "PUT", "/_shard/regions/us", body);
    ASSERT_EQ(again.status, 201) << again.body;
    EXPECT_NE(again.body.find("\"tenants\":2"), std::string::npos) << again.body;
    EXPECT_EQ(Json(on(us->port(), "GET", "/_shard/tenants/" + late).body).text("node"), "n1");
    EXPECT_EQ(write(router_->port(), late, "through G"), 201);
}

// POST /_shard/adopt is a relay's: the routers' token alone, a forged mark or a mark made for
// another request is refused 403, and nothing is recorded.
TEST_F(AdoptRegion, AnAdoptionNoRouterRelayedIsRefused) {
    auto us = us_router();
    const std::string body =
        R"j({"region":"us","nodes":[{"name":"n9","addr":"127.0.0.1:9"}],"tenants":[]})j";
    EXPECT_EQ(on(us->port(), "POST", "/_shard/adopt", body).status, 403);
    Client c(us->port());
    auto marked = [&](const std::string& mark) {
        return c.request("POST", "/_shard/adopt", body,
                         {{"Authorization", "Bearer " + kRoot},
                          {"X-Request-Id", "adopt-1"},
                          {"Fenec-Relay", mark}})
            .value_or(Reply{});
    };
    EXPECT_EQ(marked("127.0.0.1 AAAAAAAAAAAAAAAAAAAAAA").status, 403);
    const std::string other =
        server::relay_mark(kRoot, "127.0.0.1", "adopt-1", "POST", "/_shard/regions/us");
    EXPECT_EQ(marked("127.0.0.1 " + other).status, 403);
    EXPECT_EQ(on(us->port(), "GET", "/_shard/nodes").body, "[]");
    // The same request, marked for itself, is taken: the mark is what is checked.
    const std::string own = server::relay_mark(kRoot, "127.0.0.1", "adopt-1", "POST", "/_shard/adopt");
    Reply taken = marked("127.0.0.1 " + own);
    EXPECT_EQ(taken.status, 200) << taken.body;
    EXPECT_EQ(taken.body, "{\"nodes\":1,\"tenants\":0}");
}

}  // namespace
}  // namespace fenec::test::adopt_test
