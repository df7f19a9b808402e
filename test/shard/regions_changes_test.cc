// test/shard/regions_changes_test.cc: `/_shard/` changes across the two levels (router.md §11.4,
// §11.5) through real processes: the global router G, a router keeping region us's directory (U,
// node n1) and one keeping eu's (E, node n2), each region's with --global G. It proves: creates
// and deletes asked of either level relayed both ways and landing once (the region's node holds
// the tenant, G a `@<region>` row, no other node or directory anything); a create whose region
// is out of reach answered 503 `Retry-After: 5` leaving no row, a delete so refused leaving the
// row as it was; a relay mark forged, or lifted onto another request (another method, target or
// id), stripped and the request taken as direct (relayed on, or 401 without the token), a valid
// one not relayed again; a relayed change that reaches a router it is not the owner of refused
// 409 naming the owner; rows left `creating` or `deleting` (G killed between its two writes by
// the FENEC_TEST_TWO_LEVEL_STALL hook, or written so in G's file) settled as G starts by asking
// the region, or on a later round (FENEC_TEST_SETTLE_MS) where the region did not answer then, and
// by the region's primary alone, never on a standby's copy that lags it (FENEC_TEST_FEED_STALL); a
// node naming a region registered by that region's router, asked of either other; a region's
// routers tried the one that answered last first; a region's router reading a tenant it does not
// place from its global copy; a --global URL of another scope passed over and said at
// /_health; more creates at once through a region's router than it has API workers all landing.
// The oracles: the nodes asked directly, each router's own directory as it answers
// it, G's file read through the Directory API.
#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <optional>
#include <thread>

#include "server/runtime/mark.h"
#include "shard/directory.h"
#include "test/shard/standby_fixture.h"

namespace fenec::test::regions_changes_test {
namespace {

// Nothing listens here: a router named by it does not answer.
const std::string kNobody = "http://127.0.0.1:1";
const std::string kSchema = R"J(["create collection notes (title text)"])J";

class RegionsChanges : public ClusterTest<2> {
  protected:
    void SetUp() override {
        start_router({"--replication-token", kReplication});
        g_port_ = router_->port();
        us_ = region_router("us", "us.fenec");
        eu_ = region_router("eu", "eu.fenec");
        ASSERT_EQ(add_on(us_->port(), 0, "n1", "us").status, 201);
        ASSERT_EQ(add_on(eu_->port(), 1, "n2", "eu").status, 201);
        for (auto& [r, p] : {std::pair{"us", us_->port()}, std::pair{"eu", eu_->port()}}) {
            Reply put = shard("PUT", std::string("/_shard/regions/") + r,
                              "{\"routers\":[\"" + url_of(p) + "\"]}");
            ASSERT_EQ(put.status, 201) << put.body;
        }
        // Both regions' routers have G's regions rows in their copies.
        for (uint16_t p : {us_->port(), eu_->port()}) {
            ASSERT_TRUE(eventually([&] {
                const std::string body = on(p, "GET", "/_shard/regions").body;
                return body.find("\"us\",\"routers\":[\"http") != std::string::npos &&
                       body.find("\"eu\",\"routers\":[\"http") != std::string::npos;
            })) << on(p, "GET", "/_shard/regions").body;
        }
    }

    std::unique_ptr<RouterProcess> region_router(const std::string& region, const std::string& file,
                                                 std::vector<std::string> more = {}) {
        std::vector<std::string> flags{"--token",       kRoot,           "--directory",
                                       dir_.file(file), "--region",      region,
                                       "--global",      url_of(g_port_), "--replication-token",
                                       kReplication,    "--auth-delay",  "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        auto r = std::make_unique<RouterProcess>(flags, dir_.file(file + ".err"));
        EXPECT_NE(r->port(), 0) << read_file(dir_.file(file + ".err"));
        return r;
    }
    static Reply on(uint16_t port, std::string_view method, std::string_view target,
                    std::string_view body = {},
                    std::vector<std::pair<std::string, std::string>> headers = bearer(kRoot)) {
        Client c(port);
        return c.request(method, target, body, headers).value_or(Reply{});
    }
    Reply add_on(uint16_t port, int i, const std::string& name, const std::string& region) {
        return on(port, "PUT", "/_shard/nodes/" + name,
                  "{\"addr\":\"127.0.0.1:" + std::to_string(nodes_->port(i)) + "\",\"token\":\"" +
                      node_admin_token(i) + "\",\"region\":\"" + region + "\"}");
    }
    // G started again on its port (U and E follow it there), with `more` flags.
    void restart_g() {
        client_.reset();
        router_->kill(SIGKILL);
        start_router({"--replication-token", kReplication, "--listen",
                      "127.0.0.1:" + std::to_string(g_port_)});
        ASSERT_EQ(router_->port(), g_port_);
    }
    // G started again on its port with `more` flags, settling every `settle_ms` ("": a minute).
    void restart_g_with(std::vector<std::string> more, const std::string& settle_ms) {
        client_.reset();
        router_->kill(SIGKILL);
        std::optional<HookEnv> period;
        if (!settle_ms.empty()) period.emplace("FENEC_TEST_SETTLE_MS", settle_ms);
        std::vector<std::string> flags{"--replication-token", kReplication, "--listen",
                                       "127.0.0.1:" + std::to_string(g_port_)};
        flags.insert(flags.end(), more.begin(), more.end());
        start_router(flags);
        ASSERT_EQ(router_->port(), g_port_);
    }
    // What G's file says of `tenant`, read with G stopped: its node and state, or "".
    std::string g_row(const std::string& tenant) {
        auto d = shard::Directory::open(dir_.file("shard.fenec"));
        EXPECT_TRUE(d.is_ok()) << d.status().to_string();
        if (!d.is_ok()) return "?";
        auto maps = (*d)->maps();
        auto it = maps->tenants.find(tenant);
        return it == maps->tenants.end() ? "" : it->second.node + " " + it->second.state;
    }
    // G's, U's and E's word on `tenant` (GET /_shard/tenants/<t>), and whether n1 and n2 hold it.
    int on_g(const std::string& t) { return shard("GET", "/_shard/tenants/" + t).status; }
    std::string node_of(uint16_t port, const std::string& t) {
        Reply r = on(port, "GET", "/_shard/tenants/" + t);
        return r.status == 200 ? Json(r.body).text("node") : std::to_string(r.status);
    }
    bool held_by(int i, const std::string& t) { return copy_on(i, t).status == 200; }

    uint16_t g_port_ = 0;
    std::unique_ptr<RouterProcess> us_, eu_;
};

// §11.4: a create asked of G, of the region's own router, or of another region's router lands
// once, on the region's node, with G's row `@<region>` active; a delete asked of either level
// takes it off the node and both directories.
TEST_F(RegionsChanges, CreatesAndDeletesAskedOfEitherLevelLandOnce) {
    const std::string a = tenant("a"), b = tenant("b"), c = tenant("c");
    // Asked of G.
    Reply made =
        shard("PUT", "/_shard/tenants/" + a, R"({"region":"us","schema":)" + kSchema + "}");
    ASSERT_EQ(made.status, 201) << made.body;
    EXPECT_EQ(Json(made.body).text("node"), "n1") << made.body;
    EXPECT_EQ(Json(made.body).text("region"), "us") << made.body;
    EXPECT_EQ(shard("GET", "/_shard/tenants/" + a).body,
              "{\"name\":\"" + a + R"(","node":"@us","state":"active","region":"us"})");
    EXPECT_EQ(node_of(us_->port(), a), "n1");
    EXPECT_TRUE(held_by(0, a));
    EXPECT_FALSE(held_by(1, a));
    EXPECT_TRUE(eventually([&] { return node_of(eu_->port(), a) == "@us"; }));  // its copy
    // Its schema went with it: a write through E crosses to U, then n1.
    ASSERT_TRUE(eventually([&] {
        Client cl(eu_->port());
        return cl.request("POST", "/t/" + a + "/c/notes", R"({"title":"via eu"})", bearer(kData))
                   .value_or(Reply{})
                   .status == 201;
    }));
    EXPECT_NE(count_on(0, a).find('1'), std::string::npos) << count_on(0, a);

    // Asked of U: relayed to G, which takes the name and relays the create back to U.
    Reply by_us = on(us_->port(), "PUT", "/_shard/tenants/" + b, R"({"region":"us"})");
    ASSERT_EQ(by_us.status, 201) << by_us.body;
    EXPECT_EQ(Json(by_us.body).text("node"), "n1") << by_us.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + b).body).text("node"), "@us");
    EXPECT_EQ(node_of(us_->port(), b), "n1");
    // Asked of E for region us: G's, then U's; nothing in eu.
    Reply by_eu = on(eu_->port(), "PUT", "/_shard/tenants/" + c, R"({"region":"us"})");
    ASSERT_EQ(by_eu.status, 201) << by_eu.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + c).body).text("node"), "@us");
    EXPECT_EQ(node_of(us_->port(), c), "n1");
    EXPECT_TRUE(eventually([&] { return node_of(eu_->port(), c) == "@us"; }));  // its copy
    EXPECT_FALSE(held_by(1, c));
    // Asked again, of either: the name is taken (409 `exists`), nothing made twice.
    Reply again = on(eu_->port(), "PUT", "/_shard/tenants/" + b, R"({"region":"us"})");
    EXPECT_EQ(again.status, 409) << again.body;
    EXPECT_TRUE(Json(again.body).boolean("exists")) << again.body;
    EXPECT_EQ(shard("PUT", "/_shard/tenants/" + b, R"({"region":"eu"})").status, 409);
    EXPECT_TRUE(eventually([&] { return node_of(eu_->port(), b) == "@us"; }));  // its copy

    // Deletes: of U's tenant asked of U (through G and back), of another asked of E, one of G.
    Reply d1 = on(us_->port(), "DELETE", "/_shard/tenants/" + b);
    EXPECT_EQ(d1.status, 204) << d1.body;
    Reply d2 = on(eu_->port(), "DELETE", "/_shard/tenants/" + c);
    EXPECT_EQ(d2.status, 204) << d2.body;
    Reply d3 = shard("DELETE", "/_shard/tenants/" + a);
    EXPECT_EQ(d3.status, 204) << d3.body;
    for (const std::string& t : {a, b, c}) {
        EXPECT_EQ(on_g(t), 404) << t;
        EXPECT_EQ(node_of(us_->port(), t), "404") << t;
        EXPECT_FALSE(held_by(0, t)) << t;
    }
    EXPECT_EQ(shard("GET", "/_shard/tenants?region=us").body, "[]");
    // The audit lines on G: each create and delete, the ones relayed to it among them.
    EXPECT_TRUE(eventually([&] {
        const std::string audit = read_file(dir_.file("audit.log"));
        return audit.find("\"path\":\"/_shard/tenants/" + b + "\",\"status\":201") !=
                   std::string::npos &&
               audit.find("\"path\":\"/_shard/tenants/" + c + "\",\"status\":204") !=
                   std::string::npos;
    })) << read_file(dir_.file("audit.log"));
}

// §11.4, §11.10: a region none of whose routers take the change: a create is 503 `Retry-After:
// 5` naming the region and leaves no row; a delete is the same and leaves the row as it was. Its
// standby, listed after it, refusing changes naming its primary, passes the relay on, to none.
TEST_F(RegionsChanges, AChangeWhoseRegionIsOutOfReachIs503AndChangesNothing) {
    const std::string kept = tenant("kept"), lost = tenant("lost");
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + kept, R"({"region":"us"})").status, 201);
    RouterProcess standby(
        {"--token", kRoot, "--directory", dir_.file("us-standby.fenec"), "--region", "us",
         "--global", url_of(g_port_), "--replica-of", url_of(us_->port()), "--replication-token",
         kReplication, "--auth-delay", "0"},
        dir_.file("us-standby.err"));
    ASSERT_NE(standby.port(), 0) << read_file(dir_.file("us-standby.err"));
    ASSERT_EQ(
        shard("PUT", "/_shard/regions/us",
              "{\"routers\":[\"" + url_of(us_->port()) + "\",\"" + url_of(standby.port()) + "\"]}")
            .status,
        200);
    const uint16_t us_port = us_->port();
    us_->kill(SIGKILL);
    // A killed router's listening socket outlives it for a moment (its io_uring is torn down
    // after the process), taking a connection it never answers: gone once it refuses them.
    ASSERT_TRUE(eventually([&] { return !Client(us_port).ok(); }));

    for (uint16_t asked : {g_port_, eu_->port()}) {
        Reply r = on(asked, "PUT", "/_shard/tenants/" + lost, R"({"region":"us"})");
        EXPECT_EQ(r.status, 503) << r.body;
        EXPECT_EQ(r.header("Retry-After").value_or(""), "5") << r.body;
        EXPECT_EQ(Json(r.body).text("region"), "us") << r.body;
        EXPECT_NE(r.body.find("is a standby"), std::string::npos) << r.body;
        EXPECT_EQ(on_g(lost), 404);
    }
    Reply del = shard("DELETE", "/_shard/tenants/" + kept);
    EXPECT_EQ(del.status, 503) << del.body;
    EXPECT_EQ(del.header("Retry-After").value_or(""), "5");
    EXPECT_EQ(shard("GET", "/_shard/tenants/" + kept).body,
              "{\"name\":\"" + kept + R"(","node":"@us","state":"active","region":"us"})");
    EXPECT_FALSE(held_by(0, lost));
}

// A router's stop (SIGTERM) while a change it relays waits on another router that answers nothing
// (U stopped): past the drain's 10 s the relay is cut, the create answered 503 `outcome: unknown`
// (sent whole, it may have run there; G's row stays `creating` for the settling to ask), and G
// exits 0. Before, the relay held the stop for --upstream-timeout (60 s).
TEST_F(RegionsChanges, AStopCutsARelayWaitingOnASilentRouter) {
    const std::string t = tenant("stopping");
    us_->signal(SIGSTOP);
    const uint16_t port = g_port_;
    auto made = std::async(std::launch::async, [port, t] {
        Client c(port, 90'000);
        return c.request("PUT", "/_shard/tenants/" + t, R"({"region":"us"})", bearer(kRoot))
            .value_or(Reply{});
    });
    // G writes the row `creating` just before it relays the create to U.
    ASSERT_TRUE(eventually([&] {
        return Json(shard("GET", "/_shard/tenants/" + t).body).text("state") == "creating";
    })) << shard("GET", "/_shard/tenants/" + t).body;
    client_.reset();
    const int status = stop_within(router_->pid(), std::chrono::seconds(40),
                                   [&] { return router_->kill(SIGTERM); });
    EXPECT_EQ(status, 0) << "128 + 9: no exit within 40 s of SIGTERM\n"
                         << read_file(dir_.path() + "/router.err");
    const Reply r = made.get();
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(Json(r.body).text("outcome"), "unknown") << r.body;
    EXPECT_NE(r.body.find("this router is stopping, and cut its call to"), std::string::npos)
        << r.body;
    EXPECT_NE(read_file(dir_.path() + "/router.err")
                  .find("stopping: the calls to nodes and routers still out after 10 s are cut"),
              std::string::npos)
        << read_file(dir_.path() + "/router.err");
    us_->signal(SIGCONT);
}

// The same for a region's routers changed on G (§11.3): G asks the first router's GET /_health,
// and that call, bounded by --upstream-timeout (60 s) alone, held G's stop for as long.
TEST_F(RegionsChanges, AStopCutsARegionsChangeWaitingOnASilentRouter) {
    us_->signal(SIGSTOP);
    const std::string body = "{\"routers\":[\"" + url_of(us_->port()) + "\"]}";
    const uint16_t port = g_port_;
    auto put = std::async(std::launch::async, [port, body] {
        Client c(port, 90'000);
        return c.request("PUT", "/_shard/regions/us", body, bearer(kRoot)).value_or(Reply{});
    });
    // G's GET /_health sent whole to U, unread.
    ASSERT_TRUE(eventually([&] { return requests_waiting_at(us_->port()) > 0; }));
    client_.reset();
    const int status = stop_within(router_->pid(), std::chrono::seconds(40),
                                   [&] { return router_->kill(SIGTERM); });
    EXPECT_EQ(status, 0) << "128 + 9: no exit within 40 s of SIGTERM\n"
                         << read_file(dir_.path() + "/router.err");
    const Reply r = put.get();
    EXPECT_EQ(r.status, 502) << r.body;
    EXPECT_NE(r.body.find("this router is stopping, and cut its call to"), std::string::npos)
        << r.body;
    us_->signal(SIGCONT);
}

// §11.5: a change carrying a valid mark is not relayed again; a forged mark, or one made for
// another method, target or request id, is stripped and the change taken as direct: relayed to
// its owner with the token, 401 without it. §11.4: a relayed change that reaches a router it is
// not the owner of is refused 409 naming the owner.
TEST_F(RegionsChanges, MarksThatDoNotVerifyAreStrippedAndRelaysGoNoFurther) {
    const std::string target = "/_shard/regions/us";
    const std::string body = "{\"routers\":[\"" + url_of(us_->port()) + "\"]}";
    auto marked = [&](const std::string& token, const std::string& id, const std::string& mark) {
        auto h = token.empty() ? std::vector<std::pair<std::string, std::string>>{} : bearer(token);
        h.push_back({"X-Request-Id", id});
        h.push_back({"Fenec-Relay", "10.1.2.3 " + mark});
        return on(us_->port(), "PUT", target, body, h);
    };
    auto mark = [&](std::string_view id, std::string_view method, std::string_view t) {
        return server::relay_mark(kRoot, "10.1.2.3", id, method, t);
    };
    // Valid: regions rows are G's, so U refuses it naming G rather than relay it again.
    Reply valid = marked(kRoot, "m-1", mark("m-1", "PUT", target));
    EXPECT_EQ(valid.status, 409) << valid.body;
    EXPECT_EQ(Json(valid.body).text("owner"), url_of(g_port_)) << valid.body;
    EXPECT_EQ(Json(valid.body).text("region"), "global") << valid.body;
    // Forged, or lifted from another request: direct, so relayed to G, which takes it (200).
    for (const auto& [what, m] :
         {std::pair{"forged", std::string("AAAAAAAAAAAAAAAAAAAAAA")},
          std::pair{"another id", mark("m-0", "PUT", target)},
          std::pair{"another method", mark("m-2", "DELETE", target)},
          std::pair{"another target", mark("m-2", "PUT", "/_shard/regions/eu")},
          std::pair{"another token",
                    server::relay_mark("not-the-token", "10.1.2.3", "m-2", "PUT", target)}}) {
        Reply r = marked(kRoot, "m-2", m);
        EXPECT_EQ(r.status, 200) << what << ": " << r.body;
        EXPECT_EQ(Json(r.body).text("region"), "us") << what << ": " << r.body;
    }
    // A valid mark does not stand in for the token.
    EXPECT_EQ(marked("", "m-3", mark("m-3", "PUT", target)).status, 401);
    EXPECT_EQ(marked("wrong", "m-4", mark("m-4", "PUT", target)).status, 401);

    // Relayed to G, a change that is us's (a `@us` tenant's quota): refused naming U.
    const std::string t = tenant("t");
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + t, R"({"region":"us"})").status, 201);
    const std::string quota = "/_shard/tenants/" + t + "/quota";
    auto h = bearer(kRoot);
    h.push_back({"X-Request-Id", "m-5"});
    h.push_back({"Fenec-Relay", "10.1.2.3 " + mark("m-5", "PUT", quota)});
    Reply wrong = on(g_port_, "PUT", quota, R"({"rows":10})", h);
    EXPECT_EQ(wrong.status, 409) << wrong.body;
    EXPECT_EQ(Json(wrong.body).text("owner"), url_of(us_->port())) << wrong.body;
    EXPECT_EQ(Json(wrong.body).text("region"), "us") << wrong.body;
    // Asked directly of G, it is relayed to U, which keeps it and sends it to n1.
    Reply direct = shard("PUT", quota, R"({"rows":10})");
    EXPECT_EQ(direct.status, 200) << direct.body;
    Reply kept = on(us_->port(), "GET", quota);
    EXPECT_EQ(kept.status, 200) << kept.body;
    EXPECT_NE(kept.body.find("\"rows\":10"), std::string::npos) << kept.body;
}

// §11.4, §2.3 step 4: G killed between its two writes (the region answered, the row still
// `creating` or `deleting`) settles the row as it starts, by asking the region: there, a creating
// row becomes active; gone, a deleting row goes. Rows the region never heard of are removed.
TEST_F(RegionsChanges, RowsLeftCreatingOrDeletingAreSettledAtStart) {
    const std::string made = tenant("made"), dropped = tenant("dropped");
    const std::string ghost = tenant("ghost"), zombie = tenant("zombie");
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + dropped, R"({"region":"us"})").status, 201);
    {
        HookEnv stall("FENEC_TEST_TWO_LEVEL_STALL", "relayed:60000");
        restart_g();
    }
    // A create: U makes it; G, stalled before writing `active`, is killed.
    std::thread create([&] {
        Client cl(g_port_);
        (void)cl.request("PUT", "/_shard/tenants/" + made, R"({"region":"us"})", bearer(kRoot));
    });
    EXPECT_TRUE(eventually([&] { return node_of(us_->port(), made) == "n1"; }));
    router_->kill(SIGKILL);
    create.join();
    EXPECT_EQ(g_row(made), "@us creating");
    {
        HookEnv stall("FENEC_TEST_TWO_LEVEL_STALL", "relayed:60000");
        start_router({"--replication-token", kReplication, "--listen",
                      "127.0.0.1:" + std::to_string(g_port_)});
    }
    // Settled as G starts: U has it, so the row is active.
    EXPECT_TRUE(eventually([&] {
        return Json(shard("GET", "/_shard/tenants/" + made).body).text("state") == "active";
    })) << shard("GET", "/_shard/tenants/" + made).body;
    EXPECT_TRUE(logged(dir_.file("router.err"), "settled `" + made + "` left creating"))
        << read_file(dir_.file("router.err"));
    EXPECT_EQ(node_of(us_->port(), made), "n1");
    EXPECT_TRUE(held_by(0, made));

    // A delete: U deletes it; G, stalled before removing the row, is killed.
    std::thread del([&] {
        Client cl(g_port_);
        (void)cl.request("DELETE", "/_shard/tenants/" + dropped, {}, bearer(kRoot));
    });
    EXPECT_TRUE(eventually([&] { return node_of(us_->port(), dropped) == "404"; }));
    router_->kill(SIGKILL);
    del.join();
    EXPECT_EQ(g_row(dropped), "@us deleting");
    // And two rows us never heard of, as a stop before the relay leaves them.
    {
        auto d = shard::Directory::open(dir_.file("shard.fenec"));
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        for (const auto& [name, state] : {std::pair{ghost, std::string("creating")},
                                          std::pair{zombie, std::string("deleting")}}) {
            shard::TenantRow row;
            row.name = name;
            row.node = "@us";
            row.state = state;
            ASSERT_TRUE((*d)->put_tenant(row).is_ok());
        }
    }

    start_router(
        {"--replication-token", kReplication, "--listen", "127.0.0.1:" + std::to_string(g_port_)});
    EXPECT_TRUE(eventually([&] {
        return on_g(dropped) == 404 && on_g(ghost) == 404 && on_g(zombie) == 404;
    })) << shard("GET", "/_shard/tenants").body;
    EXPECT_FALSE(held_by(0, dropped));
    EXPECT_EQ(on_g(made), 200);
}

// A region's standby router, held behind its primary U by the FENEC_TEST_FEED_STALL hook, decides
// no settling: with U stopped, a create left `creating` (G killed between its two writes) is not
// removed on the standby's word, whose copy has not been sent the create; G's settling asks with
// `Fenec-Read: primary`, the standby refuses, and the row waits for U, which, back, says the
// tenant is there.
TEST_F(RegionsChanges, ASettlingAsksTheRegionsPrimaryNotAStandbyBehindIt) {
    const std::string made = tenant("made");
    const uint16_t u_port = us_->port();
    const std::vector<std::string> u_listen{"--listen", "127.0.0.1:" + std::to_string(u_port)};
    us_.reset();
    {
        HookEnv stall("FENEC_TEST_FEED_STALL", "60000");
        us_ = region_router("us", "us.fenec", u_listen);
    }
    ASSERT_EQ(us_->port(), u_port);
    auto standby = region_router("us", "us-standby.fenec", {"--replica-of", url_of(u_port)});
    ASSERT_TRUE(eventually([&] {
        return on(standby->port(), "GET", "/_health").body.find(R"("directory":"ready")") !=
               std::string::npos;
    })) << read_file(dir_.file("us-standby.fenec.err"));
    Reply put =
        shard("PUT", "/_shard/regions/us",
              "{\"routers\":[\"" + url_of(u_port) + "\",\"" + url_of(standby->port()) + "\"]}");
    ASSERT_EQ(put.status / 100, 2) << put.body;
    {
        HookEnv stall("FENEC_TEST_TWO_LEVEL_STALL", "relayed:60000");
        restart_g();
    }
    std::thread create([&] {
        Client cl(g_port_);
        (void)cl.request("PUT", "/_shard/tenants/" + made, R"({"region":"us"})", bearer(kRoot));
    });
    EXPECT_TRUE(eventually([&] { return node_of(u_port, made) == "n1"; }));
    router_->kill(SIGKILL);
    create.join();
    us_.reset();
    EXPECT_EQ(g_row(made), "@us creating");
    EXPECT_EQ(node_of(standby->port(), made), "404") << "the standby has not been sent the create";

    // G again, U stopped: the standby refuses the settling's read, so the row is left as it is,
    // round after round.
    {
        HookEnv period("FENEC_TEST_SETTLE_MS", "200");
        start_router({"--replication-token", kReplication, "--listen",
                      "127.0.0.1:" + std::to_string(g_port_)});
    }
    const std::string unsaid = "settling `" + made + "`: region `us` did not say";
    EXPECT_TRUE(eventually([&] {
        const std::string err = read_file(dir_.file("router.err"));
        size_t n = 0;
        for (size_t at = err.find(unsaid); at != std::string::npos; at = err.find(unsaid, at + 1)) {
            ++n;
        }
        return n >= 3;
    })) << read_file(dir_.file("router.err"));
    EXPECT_TRUE(logged(dir_.file("router.err"), "is a standby"))
        << read_file(dir_.file("router.err"));
    Reply row = shard("GET", "/_shard/tenants/" + made);
    EXPECT_EQ(row.status, 200) << row.body;
    EXPECT_EQ(Json(row.body).text("state"), "creating") << row.body;
    // The create sent again meanwhile: 409, saying the row is half-way and settled later.
    Reply again = shard("PUT", "/_shard/tenants/" + made, R"({"region":"us"})");
    EXPECT_EQ(again.status, 409) << again.body;
    EXPECT_NE(again.body.find("creating: its outcome is not known yet"), std::string::npos)
        << again.body;

    // U back: it has the tenant, so the row is active.
    us_ = region_router("us", "us.fenec", u_listen);
    ASSERT_EQ(us_->port(), u_port);
    EXPECT_TRUE(eventually([&] {
        return Json(shard("GET", "/_shard/tenants/" + made).body).text("state") == "active";
    })) << shard("GET", "/_shard/tenants/" + made).body
        << read_file(dir_.file("router.err"));
    EXPECT_TRUE(held_by(0, made));
    EXPECT_EQ(node_of(u_port, made), "n1");
}

// §11.4: a node whose body names a region keeping its own directory is that region's router's,
// asked of G or of another region's router; §11.6: a region's router answers a tenant it does
// not place from its copy of the global directory, and its own region's tenants from its own.
TEST_F(RegionsChanges, ANodeNamingARegionIsItsRoutersAndTenantsAreReadWhereTheyAre) {
    const std::string addr = "127.0.0.1:" + std::to_string(nodes_->port(0));
    for (const auto& [asked, name] : {std::pair{g_port_, "n1b"}, std::pair{eu_->port(), "n1c"}}) {
        Reply put = on(asked, "PUT", std::string("/_shard/nodes/") + name,
                       "{\"addr\":\"" + addr + "\",\"token\":\"" + node_admin_token(0) +
                           "\",\"region\":\"us\"}");
        EXPECT_EQ(put.status, 201) << name << ": " << put.body;
        EXPECT_EQ(on(us_->port(), "GET", std::string("/_shard/nodes/") + name).status, 200);
        EXPECT_EQ(on(asked, "GET", std::string("/_shard/nodes/") + name).status, 404);
    }
    const std::string t = tenant("t");
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + t, R"({"region":"us"})").status, 201);
    // E's copy of the global directory has its home; U places it.
    EXPECT_TRUE(eventually([&] { return node_of(eu_->port(), t) == "@us"; }))
        << on(eu_->port(), "GET", "/_shard/tenants/" + t).body;
    EXPECT_EQ(Json(on(eu_->port(), "GET", "/_shard/tenants/" + t).body).text("region"), "us");
    EXPECT_EQ(node_of(us_->port(), t).substr(0, 2), "n1");
    // A tenant at home in eu that eu does not place: not answered from the copy on eu's router.
    const std::string nowhere = tenant("nowhere");
    client_.reset();
    router_->kill(SIGKILL);
    {
        auto d = shard::Directory::open(dir_.file("shard.fenec"));
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        shard::TenantRow row;
        row.name = nowhere;
        row.node = "@eu";
        ASSERT_TRUE((*d)->put_tenant(row).is_ok());
    }
    start_router(
        {"--replication-token", kReplication, "--listen", "127.0.0.1:" + std::to_string(g_port_)});
    EXPECT_TRUE(eventually([&] { return node_of(us_->port(), nowhere) == "@eu"; }));
    EXPECT_EQ(node_of(eu_->port(), nowhere), "404");
}

// A node is kept by one directory. n2, eu's, named into region us on eu's router (with or
// without its addr and token) is refused 409 there, never relayed: us's router took it as a new
// node, and n2 was in both directories, eu's tenants counted among us's copies. Before, without
// `addr` the relay answered 400 "a new node needs `addr`", and with it 201.
TEST_F(RegionsChanges, ANodeOfOneRegionIsNotAddedToAnotherUnderItsName) {
    const std::string addr = "127.0.0.1:" + std::to_string(nodes_->port(1));
    for (const std::string& body :
         {std::string(R"({"region":"us"})"), "{\"addr\":\"" + addr + "\",\"token\":\"" +
                                                 node_admin_token(1) + "\",\"region\":\"us\"}"}) {
        Reply put = on(eu_->port(), "PUT", "/_shard/nodes/n2", body);
        EXPECT_EQ(put.status, 409) << body << ": " << put.body;
        EXPECT_NE(put.body.find("region `us` keeps its own"), std::string::npos) << put.body;
    }
    EXPECT_EQ(on(us_->port(), "GET", "/_shard/nodes/n2").status, 404);
    EXPECT_EQ(Json(on(eu_->port(), "GET", "/_shard/nodes/n2").body).text("region"), "eu");
    // Its own region named, or none: a change of its own, here.
    EXPECT_EQ(on(eu_->port(), "PUT", "/_shard/nodes/n2", R"({"region":"eu","zone":"z1"})").status,
              200);
    EXPECT_EQ(Json(on(eu_->port(), "GET", "/_shard/nodes/n2").body).text("zone"), "z1");
}

// A create asked of a region's router names its region for the global router only where the
// body names none: one naming a region that is not a string is sent as it is and refused 400, as
// on the global router. Before, the region's own name was put in front of it, read first, and the
// tenant created.
TEST_F(RegionsChanges, ACreateWithARegionThatIsNoStringIsRefusedOnARegionsRouter) {
    const std::string t = tenant("t");
    Reply put = on(eu_->port(), "PUT", "/_shard/tenants/" + t, R"({"region":5})");
    EXPECT_EQ(put.status, 400) << put.body;
    EXPECT_NE(put.body.find("`region`"), std::string::npos) << put.body;
    EXPECT_EQ(shard("GET", "/_shard/tenants/" + t).status, 404);
    EXPECT_EQ(on(eu_->port(), "PUT", "/_shard/tenants/" + t, "{}").status, 201);
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("region"), "eu");
}

// §11.4: either router takes every change. A move of us's tenant into eu, asked of eu's router
// (whose directory does not place it), goes to the global router, which moves it across. Before,
// eu's router took it for its own and answered 404 "not in the directory".
TEST_F(RegionsChanges, AMoveOfAnotherRegionsTenantAskedOfARegionsRouterGoesToTheGlobalRouter) {
    const std::string t = tenant("t");
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + t, R"({"region":"us"})").status, 201);
    ASSERT_TRUE(eventually([&] { return node_of(eu_->port(), t) == "@us"; }))
        << on(eu_->port(), "GET", "/_shard/tenants/" + t).body;
    Reply moved = on(eu_->port(), "POST", "/_shard/tenants/" + t + "/move", R"({"region":"eu"})");
    EXPECT_EQ(moved.status, 200) << moved.body;
    EXPECT_TRUE(eventually([&] { return node_of(eu_->port(), t) == "n2"; }))
        << on(eu_->port(), "GET", "/_shard/tenants/" + t).body;
    EXPECT_EQ(node_of(g_port_, t), "@eu");
    // A tenant no directory has: the global router's 404, through eu's router.
    Reply none = on(eu_->port(), "POST", "/_shard/tenants/" + tenant("none") + "/move",
                    R"({"region":"eu"})");
    EXPECT_EQ(none.status, 404) << none.body;
}

// A create naming a region and a node of another region: the two disagree, 409 (http-router.md),
// asked of the global router or of a region's router. Before, the region's router that took it
// answered 404 "no node", the node being in a directory it does not read.
TEST_F(RegionsChanges, ACreateNamingAnotherRegionsNodeIs409) {
    const std::string t = tenant("t");
    for (uint16_t port : {g_port_, eu_->port()}) {
        Reply put = on(port, "PUT", "/_shard/tenants/" + t, R"({"region":"eu","node":"n1"})");
        EXPECT_EQ(put.status, 409) << put.body;
        EXPECT_NE(put.body.find("node `n1` is not in region `eu`"), std::string::npos) << put.body;
    }
    EXPECT_EQ(shard("GET", "/_shard/tenants/" + t).status, 404);
    Reply none = shard("PUT", "/_shard/tenants/" + t, R"({"node":"nowhere"})");
    EXPECT_EQ(none.status, 404) << none.body;
    // A move the same way: eu's tenant into us, onto eu's node. Before, us's import said 404.
    const std::string in_eu = tenant("in-eu");
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + in_eu, R"({"region":"eu"})").status, 201);
    Reply moved =
        shard("POST", "/_shard/tenants/" + in_eu + "/move", R"({"region":"us","to":"n2"})");
    EXPECT_EQ(moved.status, 409) << moved.body;
    EXPECT_NE(moved.body.find("node `n2` is not in region `us`"), std::string::npos) << moved.body;
    EXPECT_EQ(node_of(g_port_, in_eu), "@eu") << "left where it was";
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + in_eu).body).text("state"), "active");
    // Neither named, on a global router whose regions all keep their own directories and with
    // no --default-region: 409 asking for a region (it knows none of their nodes).
    Reply neither = shard("PUT", "/_shard/tenants/" + t, "{}");
    EXPECT_EQ(neither.status, 409) << neither.body;
    EXPECT_NE(neither.body.find("every region keeps its own directory, so name one"),
              std::string::npos)
        << neither.body;
}

// §11.4, §11.6: a region's routers are tried the one that answered last first: with its first
// router gone, a create lands on the next; that one is asked first from then on, the first back
// or not.
TEST_F(RegionsChanges, ARegionsRoutersAreTriedTheOneThatAnsweredLastFirst) {
    auto other = region_router("us", "us2.fenec");
    ASSERT_EQ(add_on(other->port(), 0, "m1", "us").status, 201);
    const uint16_t other_port = other->port();
    ASSERT_EQ(
        shard("PUT", "/_shard/regions/us",
              "{\"routers\":[\"" + url_of(other_port) + "\",\"" + url_of(us_->port()) + "\"]}")
            .status,
        200);
    const std::string first = tenant("first"), second = tenant("second"), third = tenant("third");
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + first, R"({"region":"us"})").status, 201);
    EXPECT_EQ(node_of(other_port, first), "m1");  // the first router, in their order
    other->kill(SIGKILL);
    ASSERT_TRUE(eventually([&] { return !Client(other_port).ok(); }));
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + second, R"({"region":"us"})").status, 201);
    EXPECT_EQ(node_of(us_->port(), second), "n1");
    other =
        region_router("us", "us2.fenec", {"--listen", "127.0.0.1:" + std::to_string(other_port)});
    ASSERT_EQ(other->port(), other_port);
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + third, R"({"region":"us"})").status, 201);
    EXPECT_EQ(node_of(us_->port(), third), "n1");
    EXPECT_EQ(node_of(other_port, third), "404");
    // A tenant's request follows the same order: the second router answers it.
    Reply wrote = data("GET", "/t/" + second + "/c/notes");
    EXPECT_NE(wrote.status, 502) << wrote.body;
}

// §11.3, §2.3 step 2: a --global URL serving a directory of another scope (here eu's router) is
// refused as its image lands, said by /_health (`"global":"refused"` and why) and passed over
// for the next URL, rather than asked again at once for ever.
TEST_F(RegionsChanges, AGlobalURLOfAnotherScopeIsPassedOverAndSaidAtHealth) {
    const std::string eu_url = url_of(eu_->port());
    auto only_eu = std::make_unique<RouterProcess>(
        std::vector<std::string>{"--token", kRoot, "--directory", dir_.file("us3.fenec"),
                                 "--region", "us", "--global", eu_url, "--replication-token",
                                 kReplication, "--auth-delay", "0"},
        dir_.file("us3.err"));
    ASSERT_NE(only_eu->port(), 0) << read_file(dir_.file("us3.err"));
    EXPECT_TRUE(eventually([&] {
        return Json(on(only_eu->port(), "GET", "/_health").body).text("global") == "refused";
    })) << on(only_eu->port(), "GET", "/_health").body;
    Reply h = on(only_eu->port(), "GET", "/_health");
    EXPECT_NE(Json(h.body).text("global_error").find("its scope is `eu`"), std::string::npos)
        << h.body;
    EXPECT_TRUE(eventually([&] {  // the router's lines reach stderr from a queue
        return read_file(dir_.file("us3.err")).find("its scope is `eu`") != std::string::npos;
    })) << read_file(dir_.file("us3.err"));
    // Listed before the global router: passed over, and the copy follows the global router.
    auto both = std::make_unique<RouterProcess>(
        std::vector<std::string>{"--token", kRoot, "--directory", dir_.file("us5.fenec"),
                                 "--region", "us", "--global", eu_url + "," + url_of(g_port_),
                                 "--replication-token", kReplication, "--auth-delay", "0"},
        dir_.file("us5.err"));
    ASSERT_NE(both->port(), 0) << read_file(dir_.file("us5.err"));
    EXPECT_TRUE(eventually([&] {
        return Json(on(both->port(), "GET", "/_health").body).text("global") == "ready";
    })) << on(both->port(), "GET", "/_health").body;
    EXPECT_NE(on(both->port(), "GET", "/_shard/regions").body.find("\"us\",\"routers\""),
              std::string::npos);
}

// §11.4: a row its region could not be asked about as G started is settled on a later round,
// once the region answers (every FENEC_TEST_SETTLE_MS here, every minute otherwise).
TEST_F(RegionsChanges, RowsTheRegionDidNotAnswerForAreSettledOnALaterRound) {
    const std::string ghost = tenant("ghost");
    client_.reset();
    router_->kill(SIGKILL);
    {
        auto d = shard::Directory::open(dir_.file("shard.fenec"));
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        shard::TenantRow row;
        row.name = ghost;
        row.node = "@us";
        row.state = "creating";
        ASSERT_TRUE((*d)->put_tenant(row).is_ok());
    }
    const uint16_t us_port = us_->port();
    us_->kill(SIGKILL);
    ASSERT_TRUE(eventually([&] { return !Client(us_port).ok(); }));
    {
        HookEnv period("FENEC_TEST_SETTLE_MS", "200");
        start_router({"--replication-token", kReplication, "--listen",
                      "127.0.0.1:" + std::to_string(g_port_)});
    }
    EXPECT_TRUE(eventually([&] {
        return read_file(dir_.file("router.err")).find("settling `" + ghost + "`: region `us`") !=
               std::string::npos;
    })) << read_file(dir_.file("router.err"));
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + ghost).body).text("state"), "creating");
    us_ = region_router("us", "us.fenec", {"--listen", "127.0.0.1:" + std::to_string(us_port)});
    ASSERT_EQ(us_->port(), us_port);
    EXPECT_TRUE(eventually([&] { return on_g(ghost) == 404; }))
        << shard("GET", "/_shard/tenants/" + ghost).body;
}

// §11.4: a create G stopped waiting for (its relay timed out: 503, the row left `creating`) while
// the region's create still ran, held by its node (n1 stopped). G's settling asks the region,
// which has claimed the name and not yet written its row: it answers 409 (busy), not 404, so G
// keeps its row rather than remove it, and makes it `active` once the region's create lands.
// Before, G's row was removed and the tenant lived in us with no row in the global directory.
TEST_F(RegionsChanges, ACreateStillRunningInTheRegionIsNotSettledAsAbsent) {
    const std::string t = tenant("slow");
    restart_g_with({"--upstream-timeout", "1"}, "200");
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_NO_FATAL_FAILURE(nodes_->procs[0]->signal(SIGSTOP));
    Reply made =
        shard("PUT", "/_shard/tenants/" + t, R"({"region":"us","schema":)" + kSchema + "}");
    EXPECT_EQ(made.status, 503) << made.body;
    EXPECT_TRUE(
        logged(dir_.file("router.err"), "settling `" + t + "`: region `us` did not say (409"))
        << read_file(dir_.file("router.err"));
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("state"), "creating");
    ASSERT_NO_FATAL_FAILURE(nodes_->procs[0]->signal(SIGCONT));
    EXPECT_TRUE(eventually([&] { return node_of(us_->port(), t) == "n1"; }, 10000))
        << on(us_->port(), "GET", "/_shard/tenants/" + t).body;
    EXPECT_TRUE(eventually([&] {
        return Json(shard("GET", "/_shard/tenants/" + t).body).text("state") == "active";
    })) << shard("GET", "/_shard/tenants/" + t).body
        << read_file(dir_.file("router.err"));
    EXPECT_TRUE(held_by(0, t));
}

// §11.4: more creates asked of a region's router at once than it has API workers: each waits on
// the global router, whose relay back must not wait behind them; all are made, at once.
TEST_F(RegionsChanges, ManyCreatesAskedOfARegionsRouterAtOnceAllLand) {
    constexpr int creates = 8;  // twice the API workers
    std::vector<std::string> names;
    for (int i = 0; i < creates; ++i) names.push_back(tenant("m" + std::to_string(i)));
    std::vector<int> status(creates, 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < creates; ++i) {
        threads.emplace_back([&, i] {
            Client cl(us_->port(), 20'000);
            status[i] = cl.request("PUT", "/_shard/tenants/" + names[i], R"({"region":"us"})",
                                   bearer(kRoot))
                            .value_or(Reply{})
                            .status;
        });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < creates; ++i) {
        EXPECT_EQ(status[i], 201) << names[i];
        EXPECT_EQ(node_of(us_->port(), names[i]), "n1") << names[i];
    }
}

}  // namespace
}  // namespace fenec::test::regions_changes_test
