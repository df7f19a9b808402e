// test/shard/global_import_test.cc: a move into a region the global directory keeps itself
// (router.md §11.7), its global router stopped between its import and its home statement, settled
// as that router starts again (shard/two_level.h), through real processes: the global router G
// keeping n1 (node 0, region eu), us's router U keeping n2 (node 1) with --upstream-timeout 1.
// It proves: with G killed once its import was recorded (FENEC_TEST_MOVE_STALL on G), U's export
// lapses, and G, started again, deletes its import and puts the home `@us` back, so the tenant
// takes writes through G on n2 and n1 keeps no copy; with G killed once U released the tenant to
// eu (the stall on U), G activates its import: the tenant on n1, written through G. The oracles:
// G's and U's answers about the tenant, and the nodes asked directly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "shard/directory.h"
#include "test/shard/standby_fixture.h"

namespace fenec::test::global_import_test {
namespace {

constexpr int kN1 = 0, kN2 = 1;

class GlobalImport : public ClusterTest<2> {
  protected:
    // G (its hook `g_stall` set), U (`us_stall`), n1 kept by G in eu and n2 by U, and `t` made
    // in us, on n2, written once through G.
    void start(const std::string& t, const std::string& g_stall, const std::string& us_stall) {
        {
            HookEnv stall("FENEC_TEST_MOVE_STALL", g_stall);
            HookEnv period("FENEC_TEST_SETTLE_MS", "200");
            std::vector<std::unique_ptr<HookEnv>> more;
            for (const auto& [name, value] : g_env_) {
                more.push_back(std::make_unique<HookEnv>(name, value));
            }
            start_router(g_flags());
        }
        g_port_ = router_->port();
        {
            HookEnv stall("FENEC_TEST_MOVE_STALL", us_stall);
            HookEnv period("FENEC_TEST_SETTLE_MS", "200");
            std::vector<std::unique_ptr<HookEnv>> more;
            for (const auto& [name, value] : us_env_) {
                more.push_back(std::make_unique<HookEnv>(name, value));
            }
            us_ = std::make_unique<RouterProcess>(
                std::vector<std::string>{"--token", kRoot, "--directory", dir_.file("us.fenec"),
                                         "--region", "us", "--global", url_of(g_port_),
                                         "--replication-token", kReplication, "--auth-delay", "0",
                                         "--upstream-timeout", "1"},
                dir_.file("us.err"));
        }
        ASSERT_NE(us_->port(), 0) << read_file(dir_.file("us.err"));
        ASSERT_EQ(add(kN1, "n1", "eu").status, 201);
        Reply r =
            shard("PUT", "/_shard/regions/us", "{\"routers\":[\"" + url_of(us_->port()) + "\"]}");
        ASSERT_EQ(r.status, 201) << r.body;
        Client c(us_->port());
        Reply n2 =
            c.request("PUT", "/_shard/nodes/n2",
                      "{\"addr\":\"127.0.0.1:" + std::to_string(nodes_->port(kN2)) +
                          "\",\"token\":\"" + node_admin_token(kN2) + "\",\"region\":\"us\"}",
                      bearer(kRoot))
                .value_or(Reply{});
        ASSERT_EQ(n2.status, 201) << n2.body;
        Reply made =
            shard("PUT", "/_shard/tenants/" + t,
                  R"J({"region":"us","schema":["create collection notes (title text)"]})J");
        ASSERT_EQ(made.status, 201) << made.body;
        ASSERT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    }
    std::vector<std::string> g_flags(std::vector<std::string> more = {}) const {
        std::vector<std::string> f = {"--replication-token", kReplication};
        f.insert(f.end(), g_more_.begin(), g_more_.end());
        f.insert(f.end(), more.begin(), more.end());
        if (g_port_) f.insert(f.end(), {"--listen", "127.0.0.1:" + std::to_string(g_port_)});
        return f;
    }
    // The move to eu asked of G in a thread, G killed once `reached` holds, then G started again.
    void move_and_kill_g(
        const std::string& t, const std::function<bool()>& reached, const std::string& to = "eu",
        const std::function<void()>& between = [] {}, std::vector<std::string> g_more = {}) {
        std::thread mover([&] {
            Client c(g_port_);
            (void)c.request("POST", "/_shard/tenants/" + t + "/move", "{\"region\":\"" + to + "\"}",
                            bearer(kRoot));
        });
        EXPECT_TRUE(eventually(reached, 8000));
        client_.reset();
        router_->kill(SIGKILL);
        mover.join();
        between();
        HookEnv period("FENEC_TEST_SETTLE_MS", "200");
        start_router(g_flags(std::move(g_more)));
        ASSERT_EQ(router_->port(), g_port_);
    }
    // G has recorded its import of `t` on n1 and installed it there: its row `importing` (written
    // before the install, so that G killed once the copy is on n1 leaves a row its settling
    // finds), and the hook `imported` holding the move after both.
    bool imported_on_n1(const std::string& t) {
        return g_row(t) == "n1 importing" && imported(dir_.file("router.err"));
    }
    // The hook `imported` (FENEC_TEST_MOVE_STALL) holds the router whose stderr is `err`.
    static bool imported(const std::string& err) {
        return logged(err, "test hook: held after `imported`", 0);
    }
    Reply write(const std::string& t) {
        return data("POST", "/t/" + t + "/c/notes", R"({"title":"w"})");
    }
    std::string g_row(const std::string& t) {
        Json j(shard("GET", "/_shard/tenants/" + t).body);
        return j.text("node") + " " + j.text("state");
    }
    // U's own row of `t` (a relayed read is answered from its own directory alone: asked
    // straight, it answers a tenant it does not place from its copy of G's).
    std::string us_row(const std::string& t) { return row_of(us_->port(), t); }
    // What the router at `port` answers for `t`, as "<node> <state>".
    static std::string row_of(uint16_t port, const std::string& t) {
        Client c(port);
        Json j(c.request("GET", "/_shard/tenants/" + t, {}, bearer(kRoot)).value_or(Reply{}).body);
        return j.text("node") + " " + j.text("state");
    }
    // The standby router at `port` promoted (POST /_replication/promote).
    static Reply promote(uint16_t port) {
        Client c(port);
        return c.request("POST", "/_replication/promote", {}, bearer(kReplication))
            .value_or(Reply{});
    }
    // GS, a standby router of G's directory, once it has `t` on n1 (nullptr, failed, otherwise).
    std::unique_ptr<RouterProcess> g_standby_with(const std::string& t) {
        auto gs = std::make_unique<RouterProcess>(
            std::vector<std::string>{"--token", kRoot, "--directory", dir_.file("gs.fenec"),
                                     "--replica-of", url_of(g_port_), "--replication-token",
                                     kReplication, "--auth-delay", "0"},
            dir_.file("gs.err"));
        if (gs->port() == 0 ||
            !eventually([&] { return row_of(gs->port(), t) == "n1 active"; }, 10000)) {
            ADD_FAILURE() << row_of(gs->port(), t) << read_file(dir_.file("gs.err"));
            return nullptr;
        }
        return gs;
    }

    std::vector<std::string> g_more_;                          // flags G always starts with
    std::vector<std::pair<std::string, std::string>> g_env_;   // hooks G starts with
    std::vector<std::pair<std::string, std::string>> us_env_;  // hooks U starts with
    uint16_t g_port_ = 0;
    std::unique_ptr<RouterProcess> us_;
};

TEST_F(GlobalImport, StoppedBeforeTheReleaseTheImportIsDeletedAndTheHomePutBack) {
    const std::string t = tenant("acme");
    ASSERT_NO_FATAL_FAILURE(start(t, "imported:60000", ""));
    ASSERT_NO_FATAL_FAILURE(move_and_kill_g(t, [&] { return imported_on_n1(t); }));
    // U never released t (its export `moving` on n2, then lapsed: 2 × its 1 s timeout), and no
    // move of G's runs: G's settling deletes its import, and U holds t on n2 again.
    EXPECT_TRUE(eventually([&] { return g_row(t) == "@us active"; }, 15000))
        << g_row(t) << read_file(dir_.file("router.err"));
    EXPECT_TRUE(logged(dir_.file("router.err"), "the import of `" + t + "` settled: region `us`"))
        << read_file(dir_.file("router.err"));
    EXPECT_EQ(copy_on(kN1, t).status, 404) << copy_on(kN1, t).body;
    EXPECT_TRUE(eventually([&] { return us_row(t) == "n2 active"; }, 10000)) << us_row(t);
    EXPECT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    EXPECT_EQ(count_on(kN2, t), R"({"count":2})");
}

// G killed with the image installed on n1 and the move not yet answered (the hook `installed`):
// its row `importing`, written before the install, is settled as above, and n1's copy deleted.
// Before, the row came after the install, and G killed between them left n1 a frozen copy that
// no directory named.
TEST_F(GlobalImport, StoppedOnceTheImageIsInstalledItsCopyIsDeleted) {
    const std::string t = tenant("acme");
    ASSERT_NO_FATAL_FAILURE(start(t, "import-installed:60000", ""));
    ASSERT_NO_FATAL_FAILURE(move_and_kill_g(t, [&] {
        return logged(dir_.file("router.err"), "test hook: held after `import-installed`", 0);
    }));
    EXPECT_TRUE(eventually([&] { return g_row(t) == "@us active"; }, 15000))
        << g_row(t) << read_file(dir_.file("router.err"));
    EXPECT_TRUE(eventually([&] { return copy_on(kN1, t).status == 404; }, 10000))
        << copy_on(kN1, t).body << read_file(dir_.file("router.err"));
    EXPECT_TRUE(eventually([&] { return us_row(t) == "n2 active"; }, 10000)) << us_row(t);
    EXPECT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    EXPECT_EQ(count_on(kN2, t), R"({"count":2})");
}

TEST_F(GlobalImport, StoppedAfterTheReleaseTheImportIsActivated) {
    const std::string t = tenant("acme");
    ASSERT_NO_FATAL_FAILURE(start(t, "", "released:60000"));
    ASSERT_NO_FATAL_FAILURE(move_and_kill_g(t, [&] { return us_row(t) == "@eu active"; }));
    EXPECT_TRUE(eventually([&] { return g_row(t) == "n1 active"; }, 15000))
        << g_row(t) << read_file(dir_.file("router.err"));
    EXPECT_TRUE(logged(dir_.file("router.err"), "region `us` released it here; activated"))
        << read_file(dir_.file("router.err"));
    EXPECT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    EXPECT_EQ(count_on(kN1, t), R"({"count":2})");
    // The home moved (G's row is it), so us is asked to drop what the move left there, as the
    // move's last step would have: its row `@eu` and n2's frozen copy.
    EXPECT_TRUE(eventually(
        [&] { return us_row(t) == "n1 active" && copy_on(kN2, t).status == 404; }, 10000))
        << us_row(t) << " " << copy_on(kN2, t).body << read_file(dir_.file("router.err"));
    EXPECT_TRUE(logged(dir_.file("router.err"), "region `us` dropped its frozen copy and row"))
        << read_file(dir_.file("router.err"));
}

// A third region, ap, keeps its own directory with a row `@eu` for t left from some earlier move
// (its router started on a file written so): G's settling asks the region the import came from,
// us, alone, so ap's stale word activates nothing while us still exports t; once us's export
// lapses the import is deleted as in the first case.
TEST_F(GlobalImport, AStaleReleaseInAnotherRegionIsNotTakenForThisImports) {
    const std::string t = tenant("acme");
    ASSERT_NO_FATAL_FAILURE(start(t, "imported:60000", ""));
    {
        shard::DirectoryOpening how;
        how.scope = "ap";
        auto d = shard::Directory::open(dir_.file("ap.fenec"), how);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        shard::TenantRow stale;
        stale.name = t;
        stale.node = "@eu";
        ASSERT_TRUE((*d)->put_tenant(stale).is_ok());
    }
    RouterProcess ap(
        {"--token", kRoot, "--directory", dir_.file("ap.fenec"), "--region", "ap", "--global",
         url_of(g_port_), "--replication-token", kReplication, "--auth-delay", "0"},
        dir_.file("ap.err"));
    ASSERT_NE(ap.port(), 0) << read_file(dir_.file("ap.err"));
    Reply r = shard("PUT", "/_shard/regions/ap", "{\"routers\":[\"" + url_of(ap.port()) + "\"]}");
    ASSERT_EQ(r.status / 100, 2) << r.body;
    ASSERT_NO_FATAL_FAILURE(move_and_kill_g(t, [&] { return imported_on_n1(t); }));
    // (Its row's `moving_from` is not read here: a slow restart may find us's export lapsed and the
    // import settled already. AnImportNamingNoSource... reads it in G's file, G stopped.)
    EXPECT_TRUE(eventually([&] { return g_row(t) == "@us active"; }, 15000))
        << g_row(t) << read_file(dir_.file("router.err"));
    EXPECT_FALSE(logged(dir_.file("router.err"), "released it here", 0))
        << read_file(dir_.file("router.err"));
    EXPECT_EQ(copy_on(kN1, t).status, 404) << copy_on(kN1, t).body;
    EXPECT_TRUE(eventually([&] { return us_row(t) == "n2 active"; }, 10000)) << us_row(t);
    EXPECT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
}

// A move out of eu (kept by G) to us, G killed once U recorded its import (U holds it 1.5 s), and
// n1 stopped (SIGSTOP) while G starts again, so G's thaw at start is not answered and the row
// stays `moving`: G's settling tries again each round, and once n1 answers, thaws t there and
// puts its row back `active`, and U deletes its import.
TEST_F(GlobalImport, AMoveOutWhoseThawWasNotAnsweredAtStartIsSettledOnceItIs) {
    const std::string t = tenant("acme"), other = tenant("other");
    ASSERT_NO_FATAL_FAILURE(start(other, "", "imported:1500"));
    Reply made = shard("PUT", "/_shard/tenants/" + t,
                       R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    ASSERT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    ASSERT_NO_FATAL_FAILURE(move_and_kill_g(
        t, [&] { return us_row(t) == "n2 importing" && imported(dir_.file("us.err")); }, "us",
        [&] { nodes_->procs[kN1]->signal(SIGSTOP); }, {"--upstream-timeout", "1"}));
    EXPECT_TRUE(logged(dir_.file("router.err"), "its source did not answer the thaw"))
        << read_file(dir_.file("router.err"));
    EXPECT_EQ(g_row(t), "n1 moving");
    nodes_->procs[kN1]->signal(SIGCONT);
    EXPECT_TRUE(eventually([&] { return g_row(t) == "n1 active"; }, 10000))
        << g_row(t) << read_file(dir_.file("router.err"));
    EXPECT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    // U's settling: G's row active on its node, so the import goes, copy and row.
    EXPECT_TRUE(eventually(
        [&] { return copy_on(kN2, t).status == 404 && us_row(t) == "n1 active"; }, 10000))
        << us_row(t) << " " << copy_on(kN2, t).body << read_file(dir_.file("us.err"));
}

// As the first case, the import's row written as a router before `moving_from` wrote it (the
// field cleared in G's file while G is stopped): us, the one region that knows the tenant, is
// taken for its source, and the import is deleted once us's export lapses.
TEST_F(GlobalImport, AnImportNamingNoSourceIsSettledByTheOneRegionThatKnowsIt) {
    const std::string t = tenant("acme");
    ASSERT_NO_FATAL_FAILURE(start(t, "imported:60000", ""));
    ASSERT_NO_FATAL_FAILURE(move_and_kill_g(
        t, [&] { return imported_on_n1(t); }, "eu",
        [&] {
            auto d = shard::Directory::open(dir_.file("shard.fenec"));
            ASSERT_TRUE(d.is_ok()) << d.status().to_string();
            shard::TenantRow row = (*d)->maps()->tenants.at(t);
            ASSERT_EQ(row.state, "importing");
            ASSERT_EQ(row.moving_from, "@us");
            row.moving_from.clear();
            ASSERT_TRUE((*d)->put_tenant(row).is_ok());
        }));
    EXPECT_TRUE(eventually([&] { return g_row(t) == "@us active"; }, 15000))
        << g_row(t) << read_file(dir_.file("router.err"));
    EXPECT_EQ(copy_on(kN1, t).status, 404) << copy_on(kN1, t).body;
    EXPECT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    EXPECT_EQ(count_on(kN2, t), R"({"count":2})");
}

// A move out of eu (kept by G) that G undoes (U holds its import 1.5 s, past G's 1 s
// --upstream-timeout), n1 stopped (SIGSTOP) once U recorded the import, so G's thaw in the
// undo-export is not answered: the row is left `moving`, not `active` over a frozen copy, and once
// n1 is back (killed, its thaw lost, and started again) G's settling thaws t and puts the row back
// `active`, and t takes writes again.
TEST_F(GlobalImport, AnUndoneMoveOutWhoseThawWasNotAnsweredIsThawedLater) {
    const std::string t = tenant("acme"), other = tenant("other");
    g_more_ = {"--upstream-timeout", "1"};
    ASSERT_NO_FATAL_FAILURE(start(other, "", "imported:1500"));
    Reply made = shard("PUT", "/_shard/tenants/" + t,
                       R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    ASSERT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    Reply moved;
    std::thread mover([&] {
        Client c(g_port_);
        moved = c.request("POST", "/_shard/tenants/" + t + "/move", R"({"region":"us"})",
                          bearer(kRoot))
                    .value_or(Reply{});
    });
    EXPECT_TRUE(eventually(
        [&] { return us_row(t) == "n2 importing" && imported(dir_.file("us.err")); }, 8000))
        << us_row(t);
    nodes_->procs[kN1]->signal(SIGSTOP);
    mover.join();
    EXPECT_GE(moved.status, 500) << moved.body;
    EXPECT_EQ(g_row(t), "n1 moving");
    EXPECT_TRUE(logged(dir_.file("router.err"), "did not thaw it: left moving"))
        << read_file(dir_.file("router.err"));
    // n1 killed, its unanswered thaw with it, and started again on its port: t is frozen there
    // (the mark is on disk) until G's settling thaws it.
    const uint16_t n1_port = nodes_->port(kN1);
    nodes_->procs[kN1]->signal(SIGKILL);
    ASSERT_NO_FATAL_FAILURE(nodes_->start(kN1, n1_port));
    EXPECT_TRUE(eventually([&] { return g_row(t) == "n1 active"; }, 10000))
        << g_row(t) << read_file(dir_.file("router.err"));
    EXPECT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    EXPECT_TRUE(eventually(
        [&] { return copy_on(kN2, t).status == 404 && us_row(t) == "n1 active"; }, 10000))
        << us_row(t) << " " << copy_on(kN2, t).body << read_file(dir_.file("us.err"));
}

// A move out of eu (kept by G) to us goes through (U active on n2; G's drop failed on purpose, so
// n1 keeps its frozen copy) while G's feed to its standby GS is held 3 s a change
// (FENEC_TEST_FEED_STALL): GS has been sent the row `moving` but not the release when G is
// killed. GS, promoted, does not thaw n1 (a second primary beside n2): it asks us, which has t
// active, and takes `@us` for t's home.
TEST_F(GlobalImport, APromotedStandbyBehindAReleaseTakesTheHomeTheTargetRegionSays) {
    const std::string t = tenant("acme"), other = tenant("other");
    g_env_ = {{"FENEC_TEST_FEED_STALL", "3000"}, {"FENEC_TEST_HANDOFF_FAIL", "drop"}};
    ASSERT_NO_FATAL_FAILURE(start(other, "", ""));
    Reply made = shard("PUT", "/_shard/tenants/" + t,
                       R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    ASSERT_TRUE(eventually([&] { return write(t).status == 201; })) << write(t).body;
    std::unique_ptr<RouterProcess> gs = g_standby_with(t);
    ASSERT_TRUE(gs);
    auto gs_row = [&] { return row_of(gs->port(), t); };

    Reply moved = shard("POST", "/_shard/tenants/" + t + "/move", R"({"region":"us"})");
    ASSERT_EQ(moved.status, 200) << moved.body;
    EXPECT_FALSE(Json(moved.body).boolean("source_removed")) << moved.body;
    ASSERT_TRUE(eventually([&] { return gs_row() == "n1 moving"; }, 15000)) << gs_row();
    client_.reset();
    router_->kill(SIGKILL);
    ASSERT_EQ(gs_row(), "n1 moving") << "the standby was sent the release: nothing to show";

    Reply promoted = promote(gs->port());
    ASSERT_EQ(promoted.status, 200) << promoted.body;
    EXPECT_TRUE(eventually([&] { return gs_row() == "@us active"; }, 5000))
        << gs_row() << read_file(dir_.file("gs.err"));
    EXPECT_TRUE(logged(dir_.file("gs.err"), "the move went through")) << read_file(dir_.file("gs.err"));
    EXPECT_NE(copy_on(kN1, t).body.find("\"frozen\":true"), std::string::npos)
        << copy_on(kN1, t).body;
    // Written through the promoted router: to us, on n2.
    Client c(gs->port());
    Reply w = c.request("POST", "/t/" + t + "/c/notes", R"({"title":"after"})", bearer(kData))
                  .value_or(Reply{});
    EXPECT_EQ(w.status, 201) << w.body;
    EXPECT_EQ(count_on(kN2, t), R"({"count":2})");
}

// §11.7 step 3 from a region G keeps itself (eu): the release is G's own row `@us`, and step 5's
// activation of the import follows it. G's feed to its standby GS holds each change 300 ms
// (FENEC_TEST_FEED_STALL); the move is held just after the release (FENEC_TEST_MOVE_STALL): G's
// feed has handed GS the row `@us` by then (its /_replication/status). Before, the activation
// followed the release at once, and a GS promoted then, reading `moving` with the import not yet
// active, thawed n1 beside the import about to be.
TEST_F(GlobalImport, AReleaseOfARegionKeptHereIsSentToTheStandbysBeforeTheImportIsActivated) {
    const std::string t = tenant("acme"), other = tenant("other");
    g_env_ = {{"FENEC_TEST_FEED_STALL", "300"}};
    ASSERT_NO_FATAL_FAILURE(start(other, "released:60000", ""));
    Reply made = shard("PUT", "/_shard/tenants/" + t,
                       R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    std::unique_ptr<RouterProcess> gs = g_standby_with(t);
    ASSERT_TRUE(gs);
    auto gs_row = [&] { return row_of(gs->port(), t); };

    std::thread mover([&] {
        Client c(g_port_);
        (void)c.request("POST", "/_shard/tenants/" + t + "/move", R"({"region":"us"})",
                        bearer(kRoot));
    });
    EXPECT_TRUE(logged(dir_.file("router.err"), "test hook: held after `released`", 20000))
        << read_file(dir_.file("router.err"));
    // Held there, before step 5: G's feed (each change held 300 ms) has handed its standbys the
    // release already, and GS reads it.
    EXPECT_TRUE(feed_handed_all(g_port_))
        << "the import was to be activated before the standby was sent the release";
    EXPECT_TRUE(eventually([&] { return gs_row() == "@us active"; }, 3000)) << gs_row();
    client_.reset();
    router_->kill(SIGKILL);
    mover.join();
}

// A move out of us (U's) into eu, a region G keeps itself, goes through (n1 active in G's
// directory; U's drop failed on purpose, so n2 keeps its frozen copy) while U's feed to its standby
// US holds each change 3 s (FENEC_TEST_FEED_STALL), past every wait's bound: US has been sent the
// row `moving` but not the release when U is killed. US, promoted, asks G, which has t active on
// n1, a node of eu: `@eu` is t's home, and n2's frozen copy stays frozen. Before, only an answer
// naming `@eu` itself counted, which G never gives for a region it keeps, and US thawed n2: the
// tenant live in two regions.
TEST_F(GlobalImport, APromotedRegionStandbyBehindAReleaseTakesAHomeTheGlobalRouterKeeps) {
    const std::string t = tenant("acme");
    us_env_ = {{"FENEC_TEST_FEED_STALL", "3000"}, {"FENEC_TEST_HANDOFF_FAIL", "drop"}};
    ASSERT_NO_FATAL_FAILURE(start(t, "", ""));
    std::optional<RouterProcess> us_standby;
    {
        HookEnv period("FENEC_TEST_SETTLE_MS", "200");
        us_standby.emplace(
            std::vector<std::string>{"--token", kRoot, "--directory", dir_.file("us-s.fenec"),
                                     "--region", "us", "--global", url_of(g_port_), "--replica-of",
                                     url_of(us_->port()), "--replication-token", kReplication,
                                     "--auth-delay", "0"},
            dir_.file("us-s.err"));
    }
    ASSERT_NE(us_standby->port(), 0) << read_file(dir_.file("us-s.err"));
    auto standby_row = [&] { return row_of(us_standby->port(), t); };
    ASSERT_TRUE(eventually([&] { return standby_row() == "n2 active"; }, 15000)) << standby_row();

    Reply moved = shard("POST", "/_shard/tenants/" + t + "/move", R"({"region":"eu"})");
    ASSERT_EQ(moved.status, 200) << moved.body;
    EXPECT_FALSE(Json(moved.body).boolean("source_removed")) << moved.body;
    ASSERT_EQ(g_row(t), "n1 active");
    ASSERT_TRUE(eventually([&] { return standby_row() == "n2 moving"; }, 15000)) << standby_row();
    us_->kill(SIGKILL);
    ASSERT_EQ(standby_row(), "n2 moving") << "the standby was sent the release: nothing to show";

    Reply promoted = promote(us_standby->port());
    ASSERT_EQ(promoted.status, 200) << promoted.body;
    EXPECT_TRUE(eventually([&] { return standby_row() == "@eu active"; }, 5000))
        << standby_row() << read_file(dir_.file("us-s.err"));
    EXPECT_NE(copy_on(kN2, t).body.find("\"frozen\":true"), std::string::npos)
        << copy_on(kN2, t).body;
}

}  // namespace
}  // namespace fenec::test::global_import_test
