// test/shard/regions_test.cc: the two-level directory's foundations (router.md §11.3, §2.2, §2.3,
// §4, §6.2) through real fenec-shard processes: the global router G (started without --region,
// serving its directory's feed) and region routers started by each case with --region and
// --global. It proves: the flags' start-up refusals; a directory's `scope` written at creation
// and a router of another scope refusing it (exit 2); a region's router following the global
// directory into `<directory>.global` and seeing each change of G's (its URLs tried in order);
// `GET/PUT/DELETE /_shard/regions` with each refusal, the first router judged by its own
// `/_health`; a tenant row `@us` of the global directory read as `{"name","node","state",
// "region"}`, its delete refused 503 while its region's router does not answer; `/t/` forwarded
// across the levels (§11.6): the global router relaying a `@us` tenant's request to us's router,
// us's router sending a tenant it does not place to its node by its copy of the global directory, a
// relayed request going no further (its `Fenec-Relay` mark verified), a region out of reach
// answered 502. The oracle is what each router says of itself at
// /_health, the directory file written in this process through the Directory API, and the nodes
// asked directly; a relay mark made here with the routers' token.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "server/runtime/mark.h"
#include "shard/directory.h"
#include "test/shard/standby_fixture.h"

namespace fenec::test::regions_test {
namespace {

// Nothing listens here: a router named by it does not answer.
const std::string kNobody = "http://127.0.0.1:1";

class Regions : public ClusterTest<1> {
  protected:
    void SetUp() override { start_router({"--replication-token", kReplication}); }

    std::string g_url() const { return url_of(router_->port()); }

    // A router keeping region `region`'s directory at `<case dir>/<file>`, following `global`.
    std::unique_ptr<RouterProcess> region_router(const std::string& region,
                                                 const std::string& global, const std::string& file,
                                                 std::vector<std::string> more = {}) {
        std::vector<std::string> flags = {
            "--token",  kRoot,  "--directory",         dir_.file(file), "--region",     region,
            "--global", global, "--replication-token", kReplication,    "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        auto r = std::make_unique<RouterProcess>(flags, dir_.file(file + ".err"));
        EXPECT_NE(r->port(), 0) << read_file(dir_.file(file + ".err"));
        return r;
    }
    static Reply on(uint16_t port, std::string_view method, std::string_view target,
                    std::string_view body = {}) {
        Client c(port);
        return c.request(method, target, body, bearer(kRoot)).value_or(Reply{});
    }
    // A router started with `flags` that must refuse to start: its exit status, and why on stderr.
    int refused(std::vector<std::string> flags, std::string& why) {
        flags.insert(flags.begin(), {"--token", kRoot, "--auth-delay", "0"});
        RouterProcess p(flags, dir_.file("refused.err"));
        const int code = p.wait_exit();
        why = read_file(dir_.file("refused.err"));
        return code;
    }
};

// §2.2: --region and --global only together, a region name, http://host:port URLs, the
// replication token that guards the global directory's feed, and no --default-region on a
// region's router; each refused with exit 2, naming it.
TEST_F(Regions, TheFlagsAreRefusedAtStartUnlessTheyFitTogether) {
    const std::string d = dir_.file("x.fenec");
    std::string why;
    EXPECT_EQ(refused({"--directory", d, "--region", "us", "--replication-token", "t"}, why), 2);
    EXPECT_NE(why.find("--region needs --global"), std::string::npos) << why;
    EXPECT_EQ(refused({"--directory", d, "--global", g_url(), "--replication-token", "t"}, why), 2);
    EXPECT_NE(why.find("--global without --region"), std::string::npos) << why;
    EXPECT_EQ(refused({"--directory", d, "--region", "US", "--global", g_url(),
                       "--replication-token", "t"},
                      why),
              2);
    EXPECT_NE(why.find("is not a region name"), std::string::npos) << why;
    EXPECT_EQ(refused({"--directory", d, "--region", "us", "--global", g_url() + ",127.0.0.1:9",
                       "--replication-token", "t"},
                      why),
              2);
    EXPECT_NE(why.find("`127.0.0.1:9` is not http://host:port"), std::string::npos) << why;
    EXPECT_EQ(refused({"--directory", d, "--region", "us", "--global", g_url()}, why), 2);
    EXPECT_NE(why.find("--region needs --replication-token"), std::string::npos) << why;
    EXPECT_EQ(refused({"--directory", d, "--region", "us", "--global", g_url(),
                       "--replication-token", "t", "--default-region", "us"},
                      why),
              2);
    EXPECT_NE(why.find("--default-region is the global router's"), std::string::npos) << why;
    EXPECT_FALSE(std::filesystem::exists(d)) << "a refused start wrote its directory";
}

// §2.3 step 2, §4.1: the scope is written as the file is created and is what /_health says; a
// router keeping another scope refuses the file (exit 2, naming both scopes), whichever way.
TEST_F(Regions, ADirectoryOfAnotherScopeIsRefusedAtOpen) {
    auto us = region_router("us", kNobody, "us.fenec");
    Reply h = on(us->port(), "GET", "/_health");
    EXPECT_EQ(Json(h.body).text("scope"), "us") << h.body;
    EXPECT_EQ(Json(h.body).text("role"), "primary") << h.body;
    EXPECT_EQ(Json(on(router_->port(), "GET", "/_health").body).text("scope"), "global");
    us->kill(SIGTERM);

    std::string why;
    EXPECT_EQ(refused({"--directory", dir_.file("us.fenec")}, why), 2);
    EXPECT_NE(why.find("its scope is `us`, and this router keeps `global`"), std::string::npos)
        << why;
    EXPECT_EQ(refused({"--directory", dir_.file("us.fenec"), "--region", "eu", "--global", kNobody,
                       "--replication-token", kReplication},
                      why),
              2);
    EXPECT_NE(why.find("its scope is `us`, and this router keeps `eu`"), std::string::npos) << why;
    // G's own file, opened as a region's.
    client_.reset();  // no connection left for its drain to wait on
    router_->kill(SIGTERM);
    EXPECT_EQ(refused({"--directory", dir_.file("shard.fenec"), "--region", "us", "--global",
                       kNobody, "--replication-token", kReplication},
                      why),
              2);
    EXPECT_NE(why.find("its scope is `global`, and this router keeps `us`"), std::string::npos)
        << why;
    // Its own scope still opens.
    auto again = region_router("us", kNobody, "us.fenec");
    EXPECT_EQ(Json(on(again->port(), "GET", "/_health").body).text("scope"), "us");
}

// §11.3, §4.2: a region's router follows the global directory into `<directory>.global`, from
// the first of --global's URLs that serves it (one that does not answer passed over), and sees
// G's changes as they are made; it does not take a change of `regions` itself.
TEST_F(Regions, ARegionsRouterFollowsTheGlobalDirectoryIntoACopy) {
    auto us = region_router("us", kNobody + "," + g_url(), "us.fenec");
    const std::string us_url = url_of(us->port());
    Reply put =
        on(router_->port(), "PUT", "/_shard/regions/us", "{\"routers\":[\"" + us_url + "\"]}");
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(put.body, "{\"region\":\"us\",\"routers\":[\"" + us_url +
                            "\"],\"adopted\":{\"nodes\":0,\"tenants\":0}}");
    const std::string listed =
        "[{\"name\":\"us\",\"routers\":[\"" + us_url + "\"],\"nodes\":0,\"tenants\":0}]";
    EXPECT_EQ(on(router_->port(), "GET", "/_shard/regions").body, listed);
    EXPECT_TRUE(eventually([&] { return on(us->port(), "GET", "/_shard/regions").body == listed; }))
        << on(us->port(), "GET", "/_shard/regions").body;

    // A change after it arrives as a block of the feed.
    const std::string two = "{\"routers\":[\"" + us_url + "\",\"http://127.0.0.1:7\"]}";
    ASSERT_EQ(on(router_->port(), "PUT", "/_shard/regions/us", two).status, 200);
    EXPECT_TRUE(eventually([&] {
        return on(us->port(), "GET", "/_shard/regions").body.find("http://127.0.0.1:7") !=
               std::string::npos;
    })) << on(us->port(), "GET", "/_shard/regions").body;
    EXPECT_TRUE(std::filesystem::exists(dir_.file("us.fenec.global")));
    Client c(us->port());
    Reply st = c.request("GET", "/_replication/status", {}, bearer(kReplication)).value_or(Reply{});
    EXPECT_NE(st.body.find("\"global\":{\"file\":"), std::string::npos) << st.body;
    EXPECT_NE(st.body.find("\"primary\":\"" + g_url() + "\""), std::string::npos) << st.body;
    EXPECT_NE(st.body.find("\"scope\":\"us\""), std::string::npos) << st.body;

    // §11.4: regions rows are G's: us's router relays a change of them there, the first of
    // --global's URLs that answers taking it (regions_changes_test.cc has the rest of relays).
    Reply mine = on(us->port(), "PUT", "/_shard/regions/us", two);
    EXPECT_EQ(mine.status, 200) << mine.body;
    EXPECT_EQ(on(us->port(), "DELETE", "/_shard/regions/us").status, 204);
    EXPECT_EQ(on(router_->port(), "GET", "/_shard/regions").body, "[]");
}

// §11.3, §6.2: PUT's checks (the name, the body, the first router's own word on its role and
// scope, or its silence) and DELETE's 404; each refusal changes nothing.
TEST_F(Regions, RegionsArePutAndDeletedOnlyWhenTheirFirstRouterKeepsThem) {
    auto us = region_router("us", g_url(), "us.fenec");
    auto eu = region_router("eu", g_url(), "eu.fenec");
    const std::string us_url = url_of(us->port());
    auto put = [&](const std::string& region, const std::string& body) {
        return on(router_->port(), "PUT", "/_shard/regions/" + region, body);
    };
    EXPECT_EQ(put("", R"({"routers":[]})").status, 400);  // the unnamed region
    EXPECT_EQ(put("U_S", "{\"routers\":[\"" + us_url + "\"]}").status, 400);
    EXPECT_EQ(put("us", "not json").status, 400);
    EXPECT_EQ(put("us", R"({"routers":[]})").status, 400);
    EXPECT_EQ(put("us", R"({"routers":"http://127.0.0.1:5"})").status, 400);
    EXPECT_EQ(put("us", R"({"routers":["127.0.0.1:5"]})").status, 400);
    EXPECT_EQ(put("us", "{\"routers\":[\"" + us_url + "\"],\"zone\":\"x\"}").status, 400);
    // The first router: silent (502), of another scope (409), global (409).
    Reply silent = put("us", "{\"routers\":[\"" + kNobody + "\",\"" + us_url + "\"]}");
    EXPECT_EQ(silent.status, 502) << silent.body;
    EXPECT_EQ(Json(silent.body).text("router"), kNobody) << silent.body;
    Reply other = put("us", "{\"routers\":[\"" + url_of(eu->port()) + "\"]}");
    EXPECT_EQ(other.status, 409) << other.body;
    EXPECT_EQ(Json(other.body).text("scope"), "eu") << other.body;
    Reply global = put("us", "{\"routers\":[\"" + g_url() + "\"]}");
    EXPECT_EQ(global.status, 409) << global.body;
    EXPECT_EQ(Json(global.body).text("scope"), "global") << global.body;
    EXPECT_EQ(on(router_->port(), "GET", "/_shard/regions").body, "[]");
    EXPECT_EQ(on(router_->port(), "DELETE", "/_shard/regions/us").status, 404);

    ASSERT_EQ(put("us", "{\"routers\":[\"" + us_url + "\"]}").status, 201);
    ASSERT_EQ(put("eu", "{\"routers\":[\"" + url_of(eu->port()) + "\"]}").status, 201);
    EXPECT_EQ(on(router_->port(), "DELETE", "/_shard/regions/us").status, 204);
    EXPECT_EQ(on(router_->port(), "GET", "/_shard/regions").body,
              "[{\"name\":\"eu\",\"routers\":[\"" + url_of(eu->port()) +
                  "\"],\"nodes\":0,\"tenants\":0}]");
    EXPECT_EQ(on(router_->port(), "GET", "/_shard/regions/us").status, 405);
    // The audit log has each change, refused or not (flushed within a second).
    EXPECT_TRUE(eventually([&] {
        const std::string audit = read_file(dir_.file("audit.log"));
        return audit.find("\"path\":\"/_shard/regions/us\",\"status\":204") != std::string::npos &&
               audit.find("\"path\":\"/_shard/regions/us\",\"status\":502") != std::string::npos;
    })) << read_file(dir_.file("audit.log"));
}

// §11.3, §4.1: a tenant at home in a region keeping its own directory is a row `@<region>` of
// the global directory, read on G as its name, node, state and region, in the list and by
// ?region=; the region is not removed while it is home to it; its delete is the region's first.
TEST_F(Regions, ATenantAtHomeInARegionIsReadOnTheGlobalRouter) {
    client_.reset();
    router_->kill(SIGTERM);
    const std::string path = dir_.file("shard.fenec");
    {
        auto d = shard::Directory::open(path);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        shard::TenantRow acme;
        acme.name = "acme";
        acme.node = "@us";
        ASSERT_TRUE((*d)->put_tenant(acme).is_ok());
        ASSERT_TRUE((*d)->put_region("us", {"http://127.0.0.1:7"}).is_ok());
    }
    start_router({"--replication-token", kReplication});
    const std::string row = R"({"name":"acme","node":"@us","state":"active","region":"us"})";
    EXPECT_EQ(shard("GET", "/_shard/tenants/acme").body, row);
    EXPECT_EQ(shard("GET", "/_shard/tenants").body, "[" + row + "]");
    EXPECT_EQ(shard("GET", "/_shard/tenants?region=us").body, "[" + row + "]");
    EXPECT_EQ(shard("GET", "/_shard/tenants?region=eu").body, "[]");
    EXPECT_EQ(shard("GET", "/_shard/regions").body,
              R"([{"name":"us","routers":["http://127.0.0.1:7"],"nodes":0,"tenants":1}])");
    // No node of this directory holds it: no metric counts it on a node `@us` or unreplicated.
    const std::string m = metrics();
    EXPECT_EQ(m.find("@us"), std::string::npos);
    const std::string unreplicated = sample(m, "fenec_router_unreplicated_tenants{region=\"\"}");
    EXPECT_TRUE(unreplicated.empty() || unreplicated == "0") << m;
    Reply home = shard("DELETE", "/_shard/regions/us");
    EXPECT_EQ(home.status, 409) << home.body;
    EXPECT_NE(home.body.find("\"tenants\":1,\"nodes\":0"), std::string::npos) << home.body;
    // §11.4: its delete is the region's first, whose router does not answer: 503, no change.
    Reply del = shard("DELETE", "/_shard/tenants/acme");
    EXPECT_EQ(del.status, 503) << del.body;
    EXPECT_EQ(del.header("Retry-After").value_or(""), "5") << del.body;
    EXPECT_EQ(Json(del.body).text("region"), "us") << del.body;
    EXPECT_EQ(shard("PUT", "/_shard/tenants/acme", "{}").status, 409);  // exists
    EXPECT_EQ(shard("GET", "/_shard/tenants/acme").body, row);
}

// Two nodes: n1 kept by us's router U, n2 by the global router G.
class RegionsForwarding : public ClusterTest<2> {
  protected:
    static Reply on(uint16_t port, std::string_view method, std::string_view target,
                    std::string_view body, const std::string& token) {
        Client c(port);
        return c.request(method, target, body, bearer(token)).value_or(Reply{});
    }
    // us's router, following the global router at `g_port` (its port 0 when it did not start).
    std::unique_ptr<RouterProcess> start_us(uint16_t g_port) {
        return std::make_unique<RouterProcess>(
            std::vector<std::string>{"--token", kRoot, "--directory", dir_.file("us.fenec"),
                                     "--region", "us", "--global", url_of(g_port),
                                     "--replication-token", kReplication, "--auth-delay", "0"},
            dir_.file("us.err"));
    }
    // n1 registered in region us on us's router.
    Reply n1_in_us(const RouterProcess& us) {
        return on(us.port(), "PUT", "/_shard/nodes/n1",
                  "{\"addr\":\"127.0.0.1:" + std::to_string(nodes_->port(0)) + "\",\"token\":\"" +
                      node_admin_token(0) + "\",\"region\":\"us\"}",
                  kRoot);
    }
};

// §5.5 across the levels: a write G relays to a region's router that takes it and then answers
// nothing within G's --upstream-timeout may have run there, and G's 504 says `outcome: unknown`,
// as it does for a node; a read (sent again harmlessly) says no more than the 504. The write,
// once the region's router wakes, has run. Before, the 504 said nothing of the outcome, and
// named the router twice.
TEST_F(RegionsForwarding, AWriteToASilentRegionsRouterIsAnsweredOutcomeUnknown) {
    start_router({"--replication-token", kReplication, "--upstream-timeout", "2"});
    const std::unique_ptr<RouterProcess> us_router = start_us(router_->port());
    RouterProcess& us = *us_router;
    ASSERT_NE(us.port(), 0) << read_file(dir_.file("us.err"));
    ASSERT_EQ(n1_in_us(us).status, 201);
    ASSERT_EQ(
        shard("PUT", "/_shard/regions/us", "{\"routers\":[\"" + url_of(us.port()) + "\"]}").status,
        201);
    const std::string acme = tenant("acme");
    ASSERT_EQ(
        on(us.port(), "PUT", "/_shard/tenants/" + acme,
           R"J({"node":"n1","region":"us","schema":["create collection notes (title text)"]})J",
           kRoot)
            .status,
        201);
    ASSERT_EQ(data("POST", "/t/" + acme + "/c/notes", R"({"title":"first"})").status, 201);

    us.signal(SIGSTOP);
    Reply wrote = data("POST", "/t/" + acme + "/c/notes", R"({"title":"second"})");
    Reply read = data("GET", "/t/" + acme + "/c/notes?count");
    us.signal(SIGCONT);
    EXPECT_EQ(wrote.status, 504) << wrote.body;
    EXPECT_EQ(Json(wrote.body).text("outcome"), "unknown") << wrote.body;
    EXPECT_EQ(Json(wrote.body).text("region"), "us") << wrote.body;
    const std::string router_named = "region `us`'s router";
    const size_t at = wrote.body.find(router_named);
    EXPECT_NE(at, std::string::npos) << wrote.body;
    EXPECT_EQ(wrote.body.find(router_named, at + 1), std::string::npos) << wrote.body;
    EXPECT_EQ(read.status, 504) << read.body;
    EXPECT_FALSE(Json(read.body).has("outcome")) << read.body;
    // It ran: both notes are on n1.
    EXPECT_TRUE(eventually([&] { return count_on(0, acme) == R"({"count":2})"; }))
        << count_on(0, acme);
}

// §9.12 on a region's router: a tenant it forwards by its copy of the global directory (placed on
// one of the global router's nodes) is failed over by the global router; what the region's router
// has out to the old node for it is cut as soon as its copy shows the failover, and goes to the new
// primary. Before, only a standby's copy cut: the region's router waited for the stopped node
// until its --upstream-timeout.
class RegionsGlobalFailover : public ClusterTest<3> {};

TEST_F(RegionsGlobalFailover, ARegionsRouterCutsWhatIsOutToANodeTheGlobalRouterFailedOver) {
    start_router({"--replication-token", kReplication});
    const uint16_t g_port = router_->port();
    RouterProcess us({"--token", kRoot, "--directory", dir_.file("us.fenec"), "--region", "us",
                      "--global", url_of(g_port), "--replication-token", kReplication,
                      "--auth-delay", "0", "--upstream-timeout", "10"},
                     dir_.file("us.err"));
    ASSERT_NE(us.port(), 0) << read_file(dir_.file("us.err"));
    auto on_us = [&](std::string_view method, const std::string& target) {
        Client c(us.port());
        return c.request(method, target, {}, bearer(kData)).value_or(Reply{});
    };
    const std::string beta = tenant("beta");
    ASSERT_EQ(add(1, "n2").status, 201);
    ASSERT_EQ(add(2, "n3").status, 201);
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n2", R"({"standby":"n3"})").status, 200);
    ASSERT_EQ(create(beta, "n2").status, 201);
    ASSERT_TRUE(eventually([&] {
        return on_us("GET", "/t/" + beta + "/c/notes?count").status == 200;
    })) << read_file(dir_.file("us.err"));
    // The standby's copy has the collection (the failover promotes what it holds).
    ASSERT_TRUE(eventually([&] { return count_on(2, beta) == R"({"count":0})"; }))
        << count_on(2, beta);
    nodes_->procs[1]->signal(SIGSTOP);
    auto read = std::async(std::launch::async, [&] {
        const auto began = std::chrono::steady_clock::now();
        Reply r = on_us("GET", "/t/" + beta + "/c/notes?count");
        return std::make_pair(r, std::chrono::steady_clock::now() - began);
    });
    ASSERT_TRUE(eventually([&] { return requests_waiting_at(nodes_->port(1)) >= 1; }))
        << requests_waiting_at(nodes_->port(1));
    const Reply f = shard("POST", "/_shard/nodes/n2/failover", "{}");
    ASSERT_EQ(f.status, 200) << f.body;
    const auto [got, took] = read.get();
    EXPECT_EQ(got.status, 200) << got.body;
    EXPECT_LT(took, std::chrono::seconds(5))
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// §11.6, §11.10: G relays a `@us` tenant's request to us's router, which sends it to its node;
// us's router sends a tenant of the global directory's nodes there by its copy; a tenant at home
// in us that us does not place is 404 on both (a relay goes no further); with us's router gone
// the relay passes to its standby, listed next; us out of reach is 502 naming the region. The
// query across tenants (§12.4.1) on either router names the tenants the other level keeps.
TEST_F(RegionsForwarding, RequestsCrossTheLevelsToTheTenantsNode) {
    start_router({"--replication-token", kReplication});
    const uint16_t g_port = router_->port();
    const std::unique_ptr<RouterProcess> us_router = start_us(g_port);
    RouterProcess& us = *us_router;
    ASSERT_NE(us.port(), 0) << read_file(dir_.file("us.err"));
    const std::string acme = tenant("acme"), beta = tenant("beta"), gone = tenant("gone");
    const std::string schema = R"J(,"schema":["create collection notes (title text)"]})J";
    ASSERT_EQ(n1_in_us(us).status, 201);
    ASSERT_EQ(add(1, "n2").status, 201);
    ASSERT_EQ(create(beta, "n2").status, 201);
    ASSERT_EQ(
        shard("PUT", "/_shard/regions/us", "{\"routers\":[\"" + url_of(us.port()) + "\"]}").status,
        201);
    // acme created through us's router, in two levels (G's `@us` row, n1 placed by us's router).
    ASSERT_EQ(on(us.port(), "PUT", "/_shard/tenants/" + acme,
                 R"({"node":"n1","region":"us")" + schema, kRoot)
                  .status,
              201);
    // gone's home in the global directory, which no directory of us's places: written into G's
    // file while it is stopped, G started again on its port.
    client_.reset();
    router_->kill(SIGTERM);
    {
        auto d = shard::Directory::open(dir_.file("shard.fenec"));
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        for (const std::string& name : {gone}) {
            shard::TenantRow row;
            row.name = name;
            row.node = "@us";
            ASSERT_TRUE((*d)->put_tenant(row).is_ok());
        }
    }
    start_router(
        {"--replication-token", kReplication, "--listen", "127.0.0.1:" + std::to_string(g_port)});
    ASSERT_EQ(router_->port(), g_port);

    // G → us's router → n1: the write lands on n1, as n1 itself says.
    Reply wrote = data("POST", "/t/" + acme + "/c/notes", R"({"title":"through G"})");
    EXPECT_EQ(wrote.status, 201) << wrote.body;
    EXPECT_EQ(data("GET", "/t/" + acme + "/c/notes?count").body, count_on(0, acme));
    EXPECT_NE(count_on(0, acme).find('1'), std::string::npos) << count_on(0, acme);
    // us's router → n2 by its copy of the global directory.
    ASSERT_TRUE(eventually([&] {
        return on(us.port(), "GET", "/t/" + beta + "/c/notes?count", {}, kData).status == 200;
    })) << on(us.port(), "GET", "/t/" + beta + "/c/notes?count", {}, kData).body;
    ASSERT_EQ(
        on(us.port(), "POST", "/t/" + beta + "/c/notes", R"({"title":"through us"})", kData).status,
        201);
    EXPECT_EQ(on(us.port(), "GET", "/t/" + beta + "/c/notes?count", {}, kData).body,
              count_on(1, beta));
    // At home in us, placed by no directory: 404 on us's router, and through G (relayed once).
    EXPECT_TRUE(eventually(
        [&] { return on(us.port(), "GET", "/t/" + gone + "/c/notes", {}, kData).status == 404; }));
    Reply relayed = data("GET", "/t/" + gone + "/c/notes");
    EXPECT_EQ(relayed.status, 404) << relayed.body;
    EXPECT_NE(relayed.body.find("region `us`'s directory"), std::string::npos) << relayed.body;

    // §12.4.1: a query asks the tenants its router's own directory places; each other tenant it
    // knows of is a 421 failure from the start, never asked and never left out. On G: acme and
    // gone (`@us`); without `partial` nothing is asked after them.
    const std::string q = R"J({"statement":"get notes select title"})J";
    const std::string qp = R"J({"statement":"get notes select title","partial":true})J";
    Reply gq = shard("POST", "/_shard/query", q);
    EXPECT_EQ(gq.status, 421) << gq.body;
    const std::string at_home_in_us =
        R"J("node":"@us","status":421,"why":"at home in region `us`, which keeps its own directory: ask its router"})J";
    EXPECT_NE(gq.body.find("{\"tenant\":\"" + acme + "\"," + at_home_in_us), std::string::npos)
        << gq.body;
    EXPECT_NE(gq.body.find("{\"tenant\":\"" + gone + "\"," + at_home_in_us), std::string::npos)
        << gq.body;
    EXPECT_NE(gq.body.find(R"("tenants":3,"asked":0,"answered":0)"), std::string::npos) << gq.body;
    EXPECT_NE(gq.body.find(R"("not_asked":1)"), std::string::npos) << gq.body;
    Reply gqp = shard("POST", "/_shard/query", qp);
    EXPECT_EQ(gqp.status, 200) << gqp.body;
    EXPECT_NE(gqp.body.find(R"("title":"through us")"), std::string::npos) << gqp.body;
    EXPECT_NE(gqp.body.find(R"("tenants":3,"asked":1,"answered":1)"), std::string::npos)
        << gqp.body;
    EXPECT_NE(gqp.body.find(R"("not_asked":0)"), std::string::npos) << gqp.body;
    // On us's router: acme answered from n1; beta, which the global directory keeps, a failure.
    Reply uq = on(us.port(), "POST", "/_shard/query", qp, kRoot);
    EXPECT_EQ(uq.status, 200) << uq.body;
    EXPECT_NE(uq.body.find(R"("title":"through G")"), std::string::npos) << uq.body;
    EXPECT_NE(
        uq.body.find(
            "{\"tenant\":\"" + beta +
            R"J(","node":"n2","status":421,"why":"kept by the global directory: ask the global router"})J"),
        std::string::npos)
        << uq.body;
    EXPECT_EQ(uq.body.find(gone), std::string::npos) << "at home in us: not another directory's";

    // §11.5: a request bearing a valid relay mark (the routers' --token over its client, id
    // and request line) is placed by us's own directory alone; a mark that does not verify is
    // dropped, and the request placed as a client's.
    const std::string target = "/t/" + beta + "/c/notes?count";
    auto with_mark = [&](const std::string& mark) {
        auto headers = bearer(kData);
        headers.push_back({"X-Request-Id", "relay-test-1"});
        headers.push_back({"Fenec-Relay", mark});
        Client c(us.port());
        return c.request("GET", target, {}, headers).value_or(Reply{});
    };
    const std::string valid =
        "10.9.8.7 " + server::relay_mark(kRoot, "10.9.8.7", "relay-test-1", "GET", target);
    EXPECT_EQ(with_mark(valid).status, 404) << with_mark(valid).body;
    EXPECT_EQ(with_mark("10.9.8.7 forged").status, 200);
    EXPECT_EQ(with_mark("10.9.8.7 " + server::relay_mark("not-the-token", "10.9.8.7",
                                                         "relay-test-1", "GET", target))
                  .status,
              200);

    // us's standby router (following us's directory, scope us) listed after it: with us's router
    // gone, G's relay passes to it, and it forwards from its copy.
    RouterProcess us_standby(
        {"--token", kRoot, "--directory", dir_.file("us-standby.fenec"), "--region", "us",
         "--global", url_of(g_port), "--replica-of", url_of(us.port()), "--replication-token",
         kReplication, "--auth-delay", "0"},
        dir_.file("us-standby.err"));
    ASSERT_NE(us_standby.port(), 0) << read_file(dir_.file("us-standby.err"));
    // Serving (its directory and its nodes' tokens taken), not only its rows copied: a standby
    // still waiting for the tokens answers a data request 503.
    ASSERT_TRUE(eventually([&] {
        return on(us_standby.port(), "GET", "/_shard/tenants/" + acme, {}, kRoot).status == 200 &&
               on(us_standby.port(), "GET", "/_health", {}, kRoot)
                       .body.find(R"("directory":"ready")") != std::string::npos;
    })) << read_file(dir_.file("us-standby.err"));
    Reply h = on(us_standby.port(), "GET", "/_health", {}, kRoot);
    EXPECT_EQ(Json(h.body).text("role"), "standby") << h.body;
    EXPECT_EQ(Json(h.body).text("scope"), "us") << h.body;
    ASSERT_EQ(
        shard("PUT", "/_shard/regions/us",
              "{\"routers\":[\"" + url_of(us.port()) + "\",\"" + url_of(us_standby.port()) + "\"]}")
            .status,
        200);
    us.kill(SIGKILL);
    Reply next = data("GET", "/t/" + acme + "/c/notes?count");
    EXPECT_EQ(next.status, 200) << next.body;
    EXPECT_EQ(next.body, count_on(0, acme));

    us_standby.kill(SIGKILL);
    Reply cut = data("GET", "/t/" + acme + "/c/notes?count");
    EXPECT_EQ(cut.status, 502) << cut.body;
    EXPECT_EQ(Json(cut.body).text("region"), "us") << cut.body;
}

}  // namespace
}  // namespace fenec::test::regions_test
