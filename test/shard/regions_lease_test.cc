// test/shard/regions_lease_test.cc: changes across regions (router.md §11.4, §11.5, §11.7, §11.8;
// seed 002) over nodes that take leases, judged by the lease-safety checker
// (test/support/lease_check.h). Creates and deletes relayed both ways, and writes carrying forged
// or lifted relay marks, with writes through every router recorded; then a move across regions.
// The
// global router G keeps no node; eu's router E leases n1 (node 0) and us's router U leases n2
// (node 1), each under its own authority, 1 s leases. A writer sends notes through G, each under
// its own Idempotency-Key, again after a refusal, while t moves eu → us; every write answered 201
// is recorded as acknowledged by the node that held t then, and each node's lease is polled. The
// checker then asserts that every acknowledged write was acknowledged inside a lease naming t, that
// n1 and n2 never held leases naming t at once (the move declared: n1's lease may end by the
// release's grant, not only by running out), and that no acknowledged write is missing from t's
// primary afterwards. The same runs with each step failed on purpose (the fenec-shard-hooks
// build's FENEC_TEST_HANDOFF_FAIL), the move undone, t left on n1. U holds each import 300 ms
// (FENEC_TEST_MOVE_STALL=imported:300): with the target leased at its import, as router.md §11.7
// first had it, the checker named n1 and n2 leasing t at once, and with the home step failed, a
// write acknowledged by n2 through E after the release and discarded by the undo.
//
// Which node acknowledged a write: a serial writer sees n1's answers, then refusals while t is
// frozen and between the regions, then n2's; the first 201 after a refusal once the move was asked
// is n2's when the move went through. A write acknowledged by n2 under an Idempotency-Key whose
// first attempt n1 applied is n2's answer, under n2's lease, and is judged as such.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "server/runtime/mark.h"
#include "test/shard/recorded_writes.h"
#include "test/shard/standby_fixture.h"

namespace fenec::test::regions_lease_test {
namespace {

constexpr int kN1 = 0, kN2 = 1;
const std::string kLease = "1";

class RegionsLeased : public LeasedClusterTest<2> {
  protected:
    // G, E and U started (the step `fail` named to each), n1 leased by E and n2 by U, the regions
    // recorded on G, and `t` created through G on n1.
    void two_regions(const std::string& t, const std::string& fail = "") {
        HookEnv env("FENEC_TEST_HANDOFF_FAIL", fail);
        // U holds each import 300 ms once it is recorded: the window between the target's import
        // and the source's release where both could hold t, and where t's writes through E would
        // land on a copy an undo discards, if the target were leased before the release.
        ::setenv("FENEC_TEST_MOVE_STALL", "imported:300", 1);
        start_router({"--replication-token", kReplication});
        const uint16_t g_port = router_->port();
        eu_ = region_router("eu", g_port);
        us_ = region_router("us", g_port);
        ::unsetenv("FENEC_TEST_MOVE_STALL");
        ASSERT_TRUE(eu_ && us_);
        ASSERT_EQ(register_node(eu_->port(), kN1, "n1", "eu").status, 201);
        ASSERT_EQ(register_node(us_->port(), kN2, "n2", "us").status, 201);
        for (auto [region, port] : {std::pair{"eu", eu_->port()}, std::pair{"us", us_->port()}}) {
            Reply r = shard("PUT", std::string("/_shard/regions/") + region,
                            "{\"routers\":[\"" + url_of(port) + "\"]}");
            ASSERT_EQ(r.status, 201) << r.body;
        }
        Reply made = shard(
            "PUT", "/_shard/tenants/" + t,
            R"J({"region":"eu","node":"n1","schema":["create collection notes (title text)"]})J");
        ASSERT_EQ(made.status, 201) << made.body;
        // Written through G once E's grant names t on n1 (the nodes outlive cases: a lease of
        // another case's router runs out first).
        ASSERT_TRUE(eventually([&] { return write(t).status == 201; }, 8000)) << write(t).body;
    }
    std::unique_ptr<RouterProcess> region_router(const std::string& region, uint16_t g_port,
                                                 std::vector<std::string> more = {}) {
        std::vector<std::string> flags = {
            "--token",    kRoot,          "--directory",         dir_.file(region + ".fenec"),
            "--region",   region,         "--global",            url_of(g_port),
            "--replication-token", kReplication, "--auto-failover", kLease,
            "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        auto r = std::make_unique<RouterProcess>(flags, dir_.file(region + ".err"));
        EXPECT_NE(r->port(), 0) << read_file(dir_.file(region + ".err"));
        return r;
    }
    Reply register_node(uint16_t port, int i, const std::string& name, const std::string& region) {
        Client c(port);
        return c
            .request("PUT", "/_shard/nodes/" + name,
                     "{\"addr\":\"127.0.0.1:" + std::to_string(nodes_->port(i)) +
                         "\",\"token\":\"" + node_admin_token(i) + "\",\"region\":\"" + region +
                         "\"}",
                     bearer(kRoot))
            .value_or(Reply{});
    }
    Reply write(const std::string& t) {
        return data("POST", "/t/" + t + "/c/notes", R"({"title":"probe"})");
    }
    // US, a standby router of U's, started; the `regions` row names U then US where `row_both`,
    // else U alone as two_regions left it; `u` created at home in us through G and seen on n2 by
    // US. Then US promoted over a stopped U (leasing n2 at term 1), and U woken: n2 refuses U's
    // grant and U steps down (its /_health 503).
    void us_promoted_over_u(const std::string& u, bool row_both,
                            std::unique_ptr<RouterProcess>& us_standby) {
        us_standby = std::make_unique<RouterProcess>(
            std::vector<std::string>{"--token", kRoot, "--directory", dir_.file("us-s.fenec"),
                                     "--region", "us", "--global", url_of(router_->port()),
                                     "--replica-of", url_of(us_->port()), "--replication-token",
                                     kReplication, "--auto-failover", kLease, "--auth-delay", "0"},
            dir_.file("us-s.err"));
        ASSERT_NE(us_standby->port(), 0) << read_file(dir_.file("us-s.err"));
        if (row_both) {
            Reply r = shard("PUT", "/_shard/regions/us",
                            "{\"routers\":[\"" + url_of(us_->port()) + "\",\"" +
                                url_of(us_standby->port()) + "\"]}");
            ASSERT_EQ(r.status / 100, 2) << r.body;
        }
        Reply made =
            shard("PUT", "/_shard/tenants/" + u,
                  R"J({"region":"us","schema":["create collection notes (title text)"]})J");
        ASSERT_EQ(made.status, 201) << made.body;
        ASSERT_TRUE(eventually([&] { return write(u).status == 201; }, 8000)) << write(u).body;
        Client s(us_standby->port());
        ASSERT_TRUE(eventually([&] {
            return Json(s.request("GET", "/_shard/tenants/" + u, {}, bearer(kRoot))
                            .value_or(Reply{})
                            .body)
                       .text("node") == "n2";
        })) << read_file(dir_.file("us.err"));
        us_->signal(SIGSTOP);
        Reply promoted =
            s.request("POST", "/_replication/promote", {}, bearer(kReplication)).value_or(Reply{});
        ASSERT_EQ(promoted.status, 200) << promoted.body;
        ASSERT_TRUE(held_at_term(kN2, 1, 8000)) << node(kN2, "GET", "/_admin/lease").body;
        us_->signal(SIGCONT);
        Client uc(us_->port());
        ASSERT_TRUE(eventually(
            [&] { return uc.request("GET", "/_health").value_or(Reply{}).status == 503; }, 5000))
            << read_file(dir_.file("us.err"));
    }
    std::vector<RecordedWrites::Node> both_nodes() const {
        return {{"n1", nodes_->port(kN1), node_admin_token(kN1)},
                {"n2", nodes_->port(kN2), node_admin_token(kN2)}};
    }

    // Moves t to us through G under a serial writer recording through `rec`, which is told of
    // the move before it is asked; the move's answer. The writer writes until `after` more writes
    // were acknowledged after the move's answer, or for 10 s. `through`: the move is to go
    // through, so the first 201 after a 503 once it was asked, and each after it, is n2's.
    Reply move_under_writer(RecordedWrites& rec, const std::string& t, size_t after, bool through) {
        const uint16_t port = router_->port();
        std::atomic<bool> stop{false}, asked{false};
        std::atomic<size_t> acked{0};
        std::atomic<int> unexpected{0};
        std::thread writer([&] {
            auto c = std::make_unique<Client>(port);
            bool refused_since_asked = false;  // the writer's view of which node answers
            for (int i = 1; !stop; ++i) {
                const std::string key = "hl-" + std::to_string(i);
                for (int attempt = 0; attempt < 1000 && !stop; ++attempt) {
                    const bool moving = asked.load();
                    const bool on_n2 = through && moving && refused_since_asked;
                    Reply got = rec.write(t, on_n2 ? "n2" : "n1", [&](const std::string& body) {
                        auto a = c->request("POST", "/t/" + t + "/c/notes", body,
                                            {{"Authorization", "Bearer " + kData},
                                             {"Content-Type", "application/json"},
                                             {"Idempotency-Key", key}});
                        if (!a || a->closed) c = std::make_unique<Client>(port);
                        return a.value_or(Reply{});
                    });
                    if (got.status == 201) {
                        ++acked;
                        break;
                    }
                    if (got.status == 0 || got.status == 502 || got.status == 503) {
                        // Frozen on n1, or between the regions: n1 answers no more. Asked
                        // again at once: the answer itself says when the move let it through.
                        if (moving && got.status == 503) refused_since_asked = true;
                        continue;
                    }
                    ++unexpected;
                    ADD_FAILURE() << "write " << i << ": " << got.status << " " << got.body;
                    break;
                }
            }
        });
        EXPECT_TRUE(eventually([&] { return acked.load() >= 5; }));
        rec.moving(t, "n1");
        asked = true;
        Client mover(port);
        Reply moved = mover
                          .request("POST", "/_shard/tenants/" + t + "/move", R"({"region":"us"})",
                                   bearer(kRoot))
                          .value_or(Reply{});
        const size_t at_answer = acked.load();
        EXPECT_TRUE(eventually([&] { return acked.load() >= at_answer + after; }, 10000));
        stop = true;
        writer.join();
        EXPECT_EQ(unexpected.load(), 0);
        return moved;
    }

    std::unique_ptr<RouterProcess> eu_, us_;
};

// §11.4, §11.5: tenants created through G, through U (relayed to G and back) and through E for us
// (G's, then U's), written through each router, some writes carrying a Fenec-Relay mark forged or
// lifted from another request (stripped: the write is a client's, forwarded as any); each write
// acknowledged inside a lease naming its tenant, none missing; then each deleted through another
// router and gone from its node.
TEST_F(RegionsLeased, CreatesDeletesAndMarkedWritesAcrossLevelsAreLeaseSafe) {
    const std::string a = tenant("a"), b = tenant("b"), c = tenant("c");
    ASSERT_NO_FATAL_FAILURE(two_regions(a));
    auto create_on = [&](uint16_t port, const std::string& t) {
        Client cl(port);
        return cl
            .request("PUT", "/_shard/tenants/" + t,
                     R"J({"region":"us","schema":["create collection notes (title text)"]})J",
                     bearer(kRoot))
            .value_or(Reply{});
    };
    Reply by_us = create_on(us_->port(), b);
    ASSERT_EQ(by_us.status, 201) << by_us.body;
    Reply by_eu = create_on(eu_->port(), c);
    ASSERT_EQ(by_eu.status, 201) << by_eu.body;
    EXPECT_EQ(Json(by_eu.body).text("node"), "n2") << by_eu.body;

    RecordedWrites rec(both_nodes(), true);
    const std::vector<uint16_t> routers = {router_->port(), eu_->port(), us_->port()};
    // U grants n2 the new tenants within its next round: written once it has.
    for (const std::string& t : {b, c}) {
        ASSERT_TRUE(
            eventually([&] { return rec.write_at(us_->port(), t, "n2").status == 201; }, 8000));
    }
    int marked = 0;
    for (int round = 0; round < 5; ++round) {
        for (uint16_t port : routers) {
            for (const auto& [t, n] :
                 {std::pair{a, "n1"}, std::pair{b, "n2"}, std::pair{c, "n2"}}) {
                Reply r = rec.write(t, n, [&, t = t](const std::string& body) {
                    Client cl(port);
                    const std::string target = "/t/" + t + "/c/notes";
                    auto h = bearer(kData);
                    h.push_back({"X-Request-Id", "rl-" + std::to_string(++marked)});
                    // Forged, and a valid one lifted from another request: both stripped.
                    h.push_back({"Fenec-Relay",
                                 marked % 2 ? "10.1.2.3 AAAAAAAAAAAAAAAAAAAAAA"
                                            : "10.1.2.3 " + server::relay_mark(kRoot, "10.1.2.3",
                                                                               "another-id", "POST",
                                                                               target)});
                    return cl.request("POST", target, body, h).value_or(Reply{});
                });
                EXPECT_EQ(r.status, 201) << t << " through " << port << ": " << r.body;
            }
        }
    }
    const std::string said =
        rec.check({{a, nodes_->port(kN1)}, {b, nodes_->port(kN2)}, {c, nodes_->port(kN2)}});
    EXPECT_EQ(said, "");
    EXPECT_GE(rec.writes(), 45u);

    // Deleted through another router than made each: gone from its node.
    for (const auto& [port, t, i] :
         {std::tuple{eu_->port(), b, kN2}, std::tuple{us_->port(), a, kN1},
          std::tuple{router_->port(), c, kN2}}) {
        Client cl(port);
        Reply d = cl.request("DELETE", "/_shard/tenants/" + t, {}, bearer(kRoot)).value_or(Reply{});
        EXPECT_EQ(d.status, 204) << t << ": " << d.body;
        EXPECT_EQ(copy_on(i, t).status, 404) << t;
    }
}

// §11.7 end to end under a writer: the move goes through, and the checker finds every write
// acknowledged inside its node's lease, n1 and n2 never leasing t at once, and none missing on n2.
TEST_F(RegionsLeased, AMoveAcrossRegionsIsLeaseSafe) {
    const std::string t = tenant("acme");
    ASSERT_NO_FATAL_FAILURE(two_regions(t));
    RecordedWrites rec(both_nodes(), true);
    Reply moved = move_under_writer(rec, t, 10, true);
    ASSERT_EQ(moved.status, 200) << moved.body;
    EXPECT_EQ(Json(moved.body).text("to"), "n2") << moved.body;
    EXPECT_EQ(copy_on(kN1, t).status, 404) << copy_on(kN1, t).body;
    const std::string said = rec.check({{t, nodes_->port(kN2)}});
    EXPECT_EQ(said, "");
    EXPECT_GT(rec.writes(), 10u);
}

// us's routers are U and US, its standby, both recorded on G. U stopped while US is promoted (US
// leasing n2 at term 1), then woken: n2 refuses U's grant, and U steps down (Router::superseded),
// refusing everything with `"superseded":true`. G, which U answered last, still tries U first:
// a write to a tenant at home in us, and a create there relayed by G, go on to US and are taken,
// where before they were answered with U's refusal.
TEST_F(RegionsLeased, ARegionsRouterPromotedOverIsPassedOverForTheNextOne) {
    const std::string t = tenant("acme"), u = tenant("in-us");
    ASSERT_NO_FATAL_FAILURE(two_regions(t));
    std::unique_ptr<RouterProcess> us_standby;
    ASSERT_NO_FATAL_FAILURE(us_promoted_over_u(u, true, us_standby));
    Client s(us_standby->port());

    EXPECT_EQ(write(u).status, 201) << write(u).body;
    const std::string v = tenant("in-us-after");
    Reply again = shard("PUT", "/_shard/tenants/" + v,
                        R"J({"region":"us","schema":["create collection notes (title text)"]})J");
    EXPECT_EQ(again.status, 201) << again.body;
    EXPECT_EQ(
        Json(s.request("GET", "/_shard/tenants/" + v, {}, bearer(kRoot)).value_or(Reply{}).body)
            .text("node"),
        "n2");
    us_->kill(SIGKILL);
    us_standby.reset();  // its lease on the shared nodes runs out before the next case's grants
}

// As above, but us's `regions` row names U alone: U's standby US is promoted and U steps down,
// and the row was not put right. G's relay finds every router it has for us promoted over: it
// answers 503 `Retry-After: 5` naming the region and the row to mend, not 502 "out of reach"
// (every router it asked answered). Once the row names US, the write goes through.
TEST_F(RegionsLeased, ARegionWhoseRecordedRoutersWereAllPromotedOverIs503NotOutOfReach) {
    const std::string t = tenant("acme"), u = tenant("in-us");
    ASSERT_NO_FATAL_FAILURE(two_regions(t));
    std::unique_ptr<RouterProcess> us_standby;
    ASSERT_NO_FATAL_FAILURE(us_promoted_over_u(u, false, us_standby));

    Reply refused = write(u);
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_EQ(refused.header("Retry-After").value_or(""), "5") << refused.body;
    EXPECT_EQ(Json(refused.body).text("region"), "us") << refused.body;
    EXPECT_NE(refused.body.find("promoted over"), std::string::npos) << refused.body;
    EXPECT_FALSE(refused.header("Fenec-Superseded").has_value()) << "G itself leads";

    Reply r = shard("PUT", "/_shard/regions/us",
                    "{\"routers\":[\"" + url_of(us_standby->port()) + "\"]}");
    ASSERT_EQ(r.status / 100, 2) << r.body;
    EXPECT_TRUE(eventually([&] { return write(u).status == 201; }, 5000)) << write(u).body;

    // The row naming US then U, and US gone: one router promoted over, the other not reached.
    // Out of reach (502), the one leading maybe among those not reached, but not "none answered".
    r = shard(
        "PUT", "/_shard/regions/us",
        "{\"routers\":[\"" + url_of(us_standby->port()) + "\",\"" + url_of(us_->port()) + "\"]}");
    ASSERT_EQ(r.status / 100, 2) << r.body;
    us_standby->kill(SIGKILL);
    // A read: G may hold a kept connection to US, which a write sent on would find cut after
    // sending (its outcome unknown); a read is sent again, and US refuses it then.
    Reply out = data("GET", "/t/" + u + "/c/notes?count");
    EXPECT_EQ(out.status, 502) << out.body;
    EXPECT_NE(out.body.find("1 of its 2 routers answered as promoted over"), std::string::npos)
        << out.body;
    us_->kill(SIGKILL);
    us_standby.reset();  // its lease on the shared nodes runs out before the next case's grants
}

// §11.7: each step failed on purpose is undone and t stays on n1 (or, a failed drop failing
// nothing, is on n2); under the writer, the checker finds every run safe.
class RegionsLeasedStepFails : public RegionsLeased,
                               public ::testing::WithParamInterface<const char*> {};

TEST_P(RegionsLeasedStepFails, AndTheRunIsLeaseSafe) {
    const std::string step = GetParam();
    const std::string t = "acme-fails-at-" + step;  // unique in the suite: the nodes outlive cases
    ASSERT_NO_FATAL_FAILURE(two_regions(t, step));
    RecordedWrites rec(both_nodes(), true);
    const bool through = step == "drop";
    Reply moved = move_under_writer(rec, t, 5, through);
    if (through) {
        ASSERT_EQ(moved.status, 200) << moved.body;
    } else {
        EXPECT_GE(moved.status, 500) << moved.body;
    }
    const std::string said = rec.check({{t, nodes_->port(through ? kN2 : kN1)}});
    EXPECT_EQ(said, "");
    EXPECT_GT(rec.writes(), 5u);
}

INSTANTIATE_TEST_SUITE_P(Each, RegionsLeasedStepFails,
                         ::testing::Values("export", "import", "release", "home", "drop"));

// §11.7, where one side is kept by the global directory itself: G keeps eu (n1, leased by G),
// U keeps us (n2). t is created on n1 through G, moved to us under the writer, then back to eu
// under another; the checker finds both runs safe, and each move leaves no copy behind.
class RegionsLeasedHere : public RegionsLeased {
  protected:
    void global_keeps_eu(const std::string& t, const std::string& fail = "") {
        HookEnv env("FENEC_TEST_HANDOFF_FAIL", fail);
        ::setenv("FENEC_TEST_MOVE_STALL", "imported:300", 1);
        start_router({"--replication-token", kReplication, "--auto-failover", kLease});
        us_ = region_router("us", router_->port());
        ::unsetenv("FENEC_TEST_MOVE_STALL");
        ASSERT_TRUE(us_);
        ASSERT_EQ(register_node(router_->port(), kN1, "n1", "eu").status, 201);
        ASSERT_EQ(register_node(us_->port(), kN2, "n2", "us").status, 201);
        Reply r =
            shard("PUT", "/_shard/regions/us", "{\"routers\":[\"" + url_of(us_->port()) + "\"]}");
        ASSERT_EQ(r.status, 201) << r.body;
        Reply made = shard("PUT", "/_shard/tenants/" + t,
                           R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
        ASSERT_EQ(made.status, 201) << made.body;
        ASSERT_TRUE(eventually([&] { return write(t).status == 201; }, 8000)) << write(t).body;
    }
};

TEST_F(RegionsLeasedHere, AMoveOutOfARegionTheGlobalRouterKeepsAndBackIsLeaseSafe) {
    const std::string t = tenant("acme");
    ASSERT_NO_FATAL_FAILURE(global_keeps_eu(t));
    {
        RecordedWrites rec(both_nodes(), true);
        Reply out = move_under_writer(rec, t, 10, true);
        ASSERT_EQ(out.status, 200) << out.body;
        EXPECT_EQ(Json(out.body).text("to"), "n2") << out.body;
        EXPECT_EQ(Json(out.body).text("region"), "us") << out.body;
        EXPECT_TRUE(Json(out.body).boolean("source_removed")) << out.body;
        EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), "@us");
        EXPECT_EQ(copy_on(kN1, t).status, 404) << copy_on(kN1, t).body;
        EXPECT_EQ(rec.check({{t, nodes_->port(kN2)}}), "");
    }
    // Back: exported by U, installed here on n1 (`importing`), the home statement its activation.
    RecordedWrites rec(both_nodes(), true);
    const uint16_t port = router_->port();
    std::atomic<bool> stop{false}, asked{false};
    std::atomic<size_t> acked{0};
    std::thread writer([&] {
        bool refused = false;
        for (int i = 1; !stop; ++i) {
            const std::string key = "back-" + std::to_string(i);
            while (!stop) {
                const bool moving = asked.load();
                Reply got =
                    rec.write(t, moving && refused ? "n1" : "n2", [&](const std::string& b) {
                        Client c(port);
                        return c
                            .request("POST", "/t/" + t + "/c/notes", b,
                                     {{"Authorization", "Bearer " + kData},
                                      {"Content-Type", "application/json"},
                                      {"Idempotency-Key", key}})
                            .value_or(Reply{});
                    });
                if (got.status == 201) {
                    ++acked;
                    break;
                }
                if (moving && got.status == 503) refused = true;  // asked again at once
            }
        }
    });
    EXPECT_TRUE(eventually([&] { return acked.load() >= 5; }));
    rec.moving(t, "n2");
    asked = true;
    Reply back = shard("POST", "/_shard/tenants/" + t + "/move", R"({"region":"eu"})");
    const size_t at_answer = acked.load();
    EXPECT_TRUE(eventually([&] { return acked.load() >= at_answer + 10; }, 10000));
    stop = true;
    writer.join();
    ASSERT_EQ(back.status, 200) << back.body;
    EXPECT_EQ(Json(back.body).text("to"), "n1") << back.body;
    EXPECT_EQ(Json(back.body).text("from"), "@us") << back.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), "n1");
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("state"), "active");
    EXPECT_EQ(copy_on(kN2, t).status, 404) << copy_on(kN2, t).body;
    EXPECT_EQ(rec.check({{t, nodes_->port(kN1)}}), "");
}

// Each step of a move out of the region G keeps failed on purpose: undone, t on n1 taking
// writes, the run lease-safe.
class RegionsLeasedHereStepFails : public RegionsLeasedHere,
                                   public ::testing::WithParamInterface<const char*> {};

TEST_P(RegionsLeasedHereStepFails, AndTheRunIsLeaseSafe) {
    const std::string step = GetParam();
    const std::string t = "here-fails-at-" + step;
    ASSERT_NO_FATAL_FAILURE(global_keeps_eu(t, step));
    RecordedWrites rec(both_nodes(), true);
    const bool through = step == "drop";
    Reply moved = move_under_writer(rec, t, 5, through);
    if (through) {
        ASSERT_EQ(moved.status, 200) << moved.body;
        EXPECT_FALSE(Json(moved.body).boolean("source_removed")) << moved.body;
    } else {
        EXPECT_GE(moved.status, 500) << moved.body;
        EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), "n1");
        EXPECT_EQ(copy_on(kN2, t).status, 404) << copy_on(kN2, t).body;
    }
    EXPECT_EQ(rec.check({{t, nodes_->port(through ? kN2 : kN1)}}), "");
}

INSTANTIATE_TEST_SUITE_P(Each, RegionsLeasedHereStepFails,
                         ::testing::Values("export", "import", "release", "drop"));

// A move out of the region G keeps whose import U answered too late (U holds it past G's
// --upstream-timeout): G undoes its side (t thawed on n1, active in G's directory) and cannot
// delete an import still running, which U then records `importing`. Its home in G's directory is
// G's own node n1, not a region: U's settling asks G, hears n1 active, and deletes the import,
// rather than keep a frozen copy on n2 answering us's clients stale reads for good.
TEST_F(RegionsLeasedHere, AnImportLeftByAMoveOutOfTheGlobalRoutersRegionIsDeleted) {
    const std::string t = tenant("acme");
    ::setenv("FENEC_TEST_MOVE_STALL", "imported:2500", 1);
    ::setenv("FENEC_TEST_SETTLE_MS", "200", 1);
    start_router({"--replication-token", kReplication, "--auto-failover", kLease,
                  "--upstream-timeout", "1"});
    us_ = region_router("us", router_->port(), {"--upstream-timeout", "1"});
    ::unsetenv("FENEC_TEST_MOVE_STALL");
    ::unsetenv("FENEC_TEST_SETTLE_MS");
    ASSERT_TRUE(us_);
    ASSERT_EQ(register_node(router_->port(), kN1, "n1", "eu").status, 201);
    ASSERT_EQ(register_node(us_->port(), kN2, "n2", "us").status, 201);
    ASSERT_EQ(
        shard("PUT", "/_shard/regions/us", "{\"routers\":[\"" + url_of(us_->port()) + "\"]}")
            .status,
        201);
    Reply made = shard("PUT", "/_shard/tenants/" + t,
                       R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    ASSERT_TRUE(eventually([&] { return write(t).status == 201; }, 8000)) << write(t).body;
    Reply moved = shard("POST", "/_shard/tenants/" + t + "/move", R"({"region":"us"})");
    EXPECT_GE(moved.status, 500) << moved.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), "n1");
    EXPECT_TRUE(eventually([&] { return write(t).status == 201; }, 8000)) << write(t).body;
    // Where U places t: its own row (n2, `importing`), or, with none, its copy of G's (n1).
    auto on_us = [&] {
        Client c(us_->port());
        return Json(c.request("GET", "/_shard/tenants/" + t, {}, bearer(kRoot))
                        .value_or(Reply{})
                        .body)
            .text("node");
    };
    // U recorded its import after G gave up on it (seen, so what follows is not a copy never
    // made), then settled it within 2 × its timeout and a period: the copy and the row gone.
    ASSERT_TRUE(eventually([&] { return on_us() == "n2"; }, 5000)) << on_us();
    EXPECT_TRUE(eventually([&] { return on_us() == "n1" && copy_on(kN2, t).status == 404; },
                           10000))
        << on_us() << " " << copy_on(kN2, t).body << read_file(dir_.file("us.err"));
}

// A move out of the region G keeps, G killed once U recorded its import (U holds it 1.5 s,
// FENEC_TEST_MOVE_STALL): G, started again, thaws t on n1 and puts its row back `active` (the
// release never ran), so t takes writes through G, and U's settling, reading that row, deletes
// the import rather than keep it `importing` for good.
TEST_F(RegionsLeasedHere, AMoveOutStoppedWithTheGlobalRouterIsUndoneOnBothSides) {
    const std::string t = tenant("acme");
    const std::vector<std::string> g_flags = {"--replication-token", kReplication,
                                              "--auto-failover", kLease};
    start_router(g_flags);
    const uint16_t g_port = router_->port();
    ::setenv("FENEC_TEST_MOVE_STALL", "imported:1500", 1);
    ::setenv("FENEC_TEST_SETTLE_MS", "200", 1);
    us_ = region_router("us", g_port, {"--upstream-timeout", "1"});
    ::unsetenv("FENEC_TEST_MOVE_STALL");
    ::unsetenv("FENEC_TEST_SETTLE_MS");
    ASSERT_TRUE(us_);
    ASSERT_EQ(register_node(g_port, kN1, "n1", "eu").status, 201);
    ASSERT_EQ(register_node(us_->port(), kN2, "n2", "us").status, 201);
    ASSERT_EQ(shard("PUT", "/_shard/regions/us", "{\"routers\":[\"" + url_of(us_->port()) + "\"]}")
                  .status,
              201);
    Reply made = shard("PUT", "/_shard/tenants/" + t,
                       R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    ASSERT_TRUE(eventually([&] { return write(t).status == 201; }, 8000)) << write(t).body;

    std::thread mover([&] {
        Client c(g_port);
        (void)c.request("POST", "/_shard/tenants/" + t + "/move", R"({"region":"us"})",
                        bearer(kRoot));
    });
    auto us_row = [&] {
        Client c(us_->port());
        Json j(c.request("GET", "/_shard/tenants/" + t, {}, bearer(kRoot)).value_or(Reply{}).body);
        return j.text("node") + " " + j.text("state");
    };
    // Recorded and installed: the hook `imported` holds U after both.
    EXPECT_TRUE(eventually(
        [&] {
            return us_row() == "n2 importing" &&
                   logged(dir_.file("us.err"), "test hook: held after `imported`", 0);
        },
        5000))
        << us_row();
    client_.reset();
    router_->kill(SIGKILL);
    mover.join();
    start_router({"--replication-token", kReplication, "--auto-failover", kLease, "--listen",
                  "127.0.0.1:" + std::to_string(g_port)});
    ASSERT_EQ(router_->port(), g_port);
    Reply row = shard("GET", "/_shard/tenants/" + t);
    EXPECT_EQ(Json(row.body).text("node"), "n1") << row.body;
    EXPECT_EQ(Json(row.body).text("state"), "active") << row.body;
    EXPECT_TRUE(logged(dir_.file("router.err"), "its row active again"))
        << read_file(dir_.file("router.err"));
    EXPECT_TRUE(eventually([&] { return write(t).status == 201; }, 8000)) << write(t).body;
    // U's settling: G's row active on its node, so the import goes, copy and row.
    EXPECT_TRUE(
        eventually([&] { return us_row() == "n1 active" && copy_on(kN2, t).status == 404; }, 10000))
        << us_row() << " " << copy_on(kN2, t).body << read_file(dir_.file("us.err"));
}

}  // namespace
}  // namespace fenec::test::regions_lease_test
