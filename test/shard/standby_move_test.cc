// test/shard/standby_move_test.cc: a move waits for the standby routers (router.md §7.2 step 10,
// §18 case 45): its source is deleted only once every standby keeping up was sent the flip, at
// most one second.
#include <gtest/gtest.h>

#include <future>

#include "test/shard/standby_fixture.h"

namespace fenec::test::standby_move_test {
namespace {

class StandbyMove : public StandbyTest {
  protected:
    // A move whose flip never reached S: R's feed holds each change 2 s and R holds 60 s once it
    // flipped. `t` is made on n1 with a note, moved to n2 by R, and a second note is written
    // through R, on n2; S has the mark, not the flip; then R is killed. S's settling runs every
    // `settle_ms` where given.
    void missed_flip(const std::string& t, const char* settle_ms = nullptr) {
        ASSERT_EQ(create(t, "n1").status, 201);
        ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"before"})").status, 201);
        ::setenv("FENEC_TEST_FEED_STALL", "2000", 1);
        ::setenv("FENEC_TEST_MOVE_STALL", "flipped:60000", 1);
        start_router({"--replication-token", kReplication});
        ::unsetenv("FENEC_TEST_FEED_STALL");
        ::unsetenv("FENEC_TEST_MOVE_STALL");
        if (settle_ms) ::setenv("FENEC_TEST_SETTLE_MS", settle_ms, 1);
        start_standby();
        ::unsetenv("FENEC_TEST_SETTLE_MS");
        ASSERT_TRUE(eventually([&] { return caught_up(); }, 8000));
        auto move = std::async(std::launch::async, [&] {
            return on_r("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n2"})");
        });
        // R flipped (and holds there); S has the mark, not the flip.
        ASSERT_TRUE(eventually(
            [&] { return Json(on_r("GET", "/_shard/tenants/" + t).body).text("node") == "n2"; },
            8000));
        ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"after"})").status, 201);
        ASSERT_EQ(count_on(1, t), R"({"count":2})");
        ASSERT_TRUE(eventually(
            [&] {
                return Json(on_s("GET", "/_shard/tenants/" + t).body).text("state") == "moving";
            },
            8000));
        ASSERT_EQ(Json(on_s("GET", "/_shard/tenants/" + t).body).text("node"), "n1");
        router_->signal(SIGKILL);
        (void)move.get();
    }
};

// Case 45 (§7.2 step 10): a move deletes its source only once every standby keeping up was sent
// the flip. R's feed holds each change 300 ms (FENEC_TEST_FEED_STALL): the mark and the flip reach
// S some 600 ms after the mark was written, and the move waits for them; at 3 s a change, it
// waits its one second and goes on; with no standby it waits for nothing.
TEST_F(StandbyMove, AMoveDeletesItsSourceOnlyOnceStandbysWereSentTheFlip) {
    auto standbys_ms = [&](const std::string& t, const std::string& to) {
        Reply m = shard("POST", "/_shard/tenants/" + t + "/move", "{\"to\":\"" + to + "\"}");
        EXPECT_EQ(m.status, 200) << m.body;
        EXPECT_TRUE(Json(m.body).boolean("source_removed")) << m.body;
        Json j(m.body);
        double ms = -1;
        if (j.doc["steps"]["standbys"].get_double().get(ms)) ms = -1;
        return ms;
    };
    const std::string acme = tenant("acme");
    ASSERT_EQ(create(acme, "n1").status, 201);
    EXPECT_LT(standbys_ms(acme, "n2"), 50) << "no standby: nothing to wait for";

    ::setenv("FENEC_TEST_FEED_STALL", "300", 1);
    start_router({"--replication-token", kReplication});
    ::unsetenv("FENEC_TEST_FEED_STALL");
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); }));
    const double waited = standbys_ms(acme, "n1");
    EXPECT_GE(waited, 250) << "the flip reached S only after two stalled changes";
    EXPECT_LT(waited, 1000) << "and the move went on once it was sent";
    EXPECT_TRUE(eventually(
        [&] { return Json(on_s("GET", "/_shard/tenants/" + acme).body).text("node") == "n1"; }));

    ::setenv("FENEC_TEST_FEED_STALL", "3000", 1);
    start_router({"--replication-token", kReplication});
    ::unsetenv("FENEC_TEST_FEED_STALL");
    start_standby();  // R's new port; S goes on from its file's position
    ASSERT_TRUE(eventually([&] {
        return on_r("GET", "/_replication/status", {}, kReplication)
                   .body.find(R"("keeping_up":true)") != std::string::npos;
    })) << on_r("GET", "/_replication/status", {}, kReplication).body
        << "\n"
        << on_s("GET", "/_replication/status", {}, kReplication).body;
    const double bounded = standbys_ms(acme, "n2");
    EXPECT_GE(bounded, 950) << "S was keeping up: it was waited for";
    EXPECT_LT(bounded, 1500) << "but at most a second";
}

// A move whose flip never reached S (R's feed holds each change 2 s; R killed once it flipped
// and a write landed on the target through it): promoted, S finds the target holding the
// tenant unfrozen past the source's seq, so the flip went through, and routes to the target.
// Before, it thawed the source and routed there: the write acknowledged on the target was gone.
TEST_F(StandbyMove, APromotedStandbyThatMissedAFlipRoutesToTheTargetThatTookWrites) {
    const std::string t = tenant("missed");
    ASSERT_NO_FATAL_FAILURE(missed_flip(t));
    const Reply p = on_s("POST", "/_replication/promote", {}, kReplication);
    ASSERT_EQ(p.status, 200) << p.body;
    const Reply row = on_s("GET", "/_shard/tenants/" + t);
    EXPECT_EQ(Json(row.body).text("node"), "n2") << row.body;
    EXPECT_EQ(Json(row.body).text("state"), "active") << row.body;
    Client c(standby_->port());
    const Reply read =
        c.request("GET", "/t/" + t + "/c/notes?count", {}, bearer(kData)).value_or(Reply{});
    EXPECT_EQ(read.body, R"({"count":2})") << read.status;
}

// As above, with the target n2 stopped when S is promoted: S cannot learn whether the flip went
// through, so it leaves the tenant frozen on n1 (a write is refused, none taken there that the
// target's acknowledged one would contradict; a move by hand is refused 409, since failing to
// reach n2 it would thaw n1) and asks again each settling round; once n2 answers
// it routes there, the write R acknowledged on n2 kept. Before, S thawed n1 and routed there,
// and the write acknowledged on n2 was gone.
TEST_F(StandbyMove, APromotedStandbyThatMissedAFlipToASilentTargetWaitsForIt) {
    const std::string t = tenant("silent");
    ASSERT_NO_FATAL_FAILURE(missed_flip(t, "300"));
    nodes_->procs[1]->signal(SIGSTOP);  // n2 lost as S is promoted (TearDown continues it)
    const Reply p = on_s("POST", "/_replication/promote", {}, kReplication);
    ASSERT_EQ(p.status, 200) << p.body;
    Reply row = on_s("GET", "/_shard/tenants/" + t);
    EXPECT_EQ(Json(row.body).text("node"), "n1") << row.body;
    EXPECT_EQ(Json(row.body).text("state"), "moving") << row.body;
    Client c(standby_->port());
    const Reply refused =
        c.request("POST", "/t/" + t + "/c/notes", R"({"title":"on n1"})", bearer(kData))
            .value_or(Reply{});
    EXPECT_EQ(refused.status, 503) << refused.body << " (the source is frozen)";
    // Nor may an operator's move take it on meanwhile: failing to reach n2 it would thaw n1.
    const Reply moved = on_s("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n2"})");
    EXPECT_EQ(moved.status, 409) << moved.body;
    // S killed and started again on its file (term 1), n2 still silent: the row was marked by R,
    // under term 0, so a start finds it inherited too and leaves the source frozen.
    standby_->signal(SIGKILL);
    ::setenv("FENEC_TEST_SETTLE_MS", "300", 1);
    start_standby({}, 1);
    ::unsetenv("FENEC_TEST_SETTLE_MS");
    Client again(standby_->port());
    const Reply still =
        again.request("POST", "/t/" + t + "/c/notes", R"({"title":"on n1"})", bearer(kData))
            .value_or(Reply{});
    EXPECT_EQ(still.status, 503) << still.body << " (the source is frozen still)";

    nodes_->procs[1]->signal(SIGCONT);
    EXPECT_TRUE(eventually(
        [&] {
            row = on_s("GET", "/_shard/tenants/" + t);
            return Json(row.body).text("node") == "n2" && Json(row.body).text("state") == "active";
        },
        8000))
        << row.body;
    const Reply read =
        again.request("GET", "/t/" + t + "/c/notes?count", {}, bearer(kData)).value_or(Reply{});
    EXPECT_EQ(read.body, R"({"count":2})") << read.status;
}

// A router promoted once (term 1) that is killed in its own move before the flip, and started
// again with the target down: the move is its own (marked under its term, TenantRow::moving_term),
// and a move the directory shows unflipped was never flipped (the flip is written first), so the
// source is thawed and takes writes, as on any router. Before, every row of a directory promoted
// once counted as inherited: the source was left frozen, writes refused 503, until the target
// answered.
TEST_F(StandbyMove, ARouterPromotedOnceThawsTheSourceOfItsOwnStoppedMove) {
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); }, 8000));
    const Reply p = on_s("POST", "/_replication/promote", {}, kReplication);
    ASSERT_EQ(p.status, 200) << p.body;
    router_->signal(SIGKILL);
    // S again, on its file (term 1), holding each move once the target has the image.
    ::setenv("FENEC_TEST_MOVE_STALL", "installed:60000", 1);
    start_standby({}, 1);
    ::unsetenv("FENEC_TEST_MOVE_STALL");
    ASSERT_EQ(term_of(on_s("GET", "/_health")), 1);
    const std::string t = tenant("own");
    const Reply made = on_s("PUT", "/_shard/tenants/" + t,
                            R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    auto write = [&](const std::string& title) {
        Client c(standby_->port());
        return c
            .request("POST", "/t/" + t + "/c/notes", "{\"title\":\"" + title + "\"}", bearer(kData))
            .value_or(Reply{});
    };
    ASSERT_EQ(write("before").status, 201);
    auto move = std::async(std::launch::async, [&] {
        return on_s("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n2"})");
    });
    ASSERT_TRUE(eventually([&] {
        return read_file(sdir_.path() + "/standby.err").find("test hook: held after `installed`") !=
               std::string::npos;
    })) << read_file(sdir_.path() + "/standby.err");
    standby_->signal(SIGKILL);
    (void)move.get();

    nodes_->procs[1]->signal(SIGSTOP);  // the target silent as S starts (TearDown continues it)
    start_standby({}, 1);
    const Reply row = on_s("GET", "/_shard/tenants/" + t);
    EXPECT_EQ(Json(row.body).text("node"), "n1") << row.body;
    EXPECT_EQ(Json(row.body).text("state"), "moving") << row.body;
    const Reply after = write("after");
    EXPECT_EQ(after.status, 201) << after.body << " (the source thawed)\n"
                                 << read_file(sdir_.path() + "/standby.err");
    EXPECT_EQ(count_on(0, t), R"({"count":2})");
}

// A move undone whose thaw its silent source never answered owes that thaw, recorded in the
// directory with the row put back. S follows that directory, so S, promoted once R is gone, asks
// the thaw when n1 answers again (here a repair's survey), and n1's copy takes writes. Before, the
// debt was in R's memory alone: n1's copy stayed frozen under its `active` row, writes refused.
TEST_F(StandbyMove, APromotedStandbyPaysTheThawItsOldPrimaryOwed) {
    const std::string t = tenant("owed");
    ASSERT_EQ(create(t, "n1").status, 201);
    // R bounds each call to a node at 1 s: the freeze and the undo's thaw to a stopped n1 end
    // unanswered there (no leases here to cut them sooner).
    start_router({"--replication-token", kReplication, "--upstream-timeout", "1"});
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); }, 8000));
    nodes_->procs[0]->signal(SIGSTOP);  // TearDown continues it
    const Reply m = on_r("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n2"})");
    EXPECT_GE(m.status, 500) << m.body;
    ASSERT_TRUE(logged(dir_.path() + "/router.err",
                       "the move of `" + t + "` is undone, but `n1` did not answer its thaw"))
        << read_file(dir_.path() + "/router.err");
    const std::string owed = R"("thaws_owed":[{"node":"n1","tenant":")" + t + R"("}])";
    ASSERT_TRUE(eventually(
        [&] { return on_s("GET", "/_shard/status").body.find(owed) != std::string::npos; }, 8000))
        << on_s("GET", "/_shard/status").body;

    router_->signal(SIGKILL);
    ASSERT_EQ(on_s("POST", "/_replication/promote", {}, kReplication).status, 200);
    nodes_->procs[0]->signal(SIGCONT);
    EXPECT_TRUE(eventually(
        [&] {
            (void)on_s("POST", "/_shard/replicas", "{}");
            return copy_on(0, t).body.find(R"("frozen":false)") != std::string::npos;
        },
        10000))
        << copy_on(0, t).body << read_file(sdir_.path() + "/standby.err");
    EXPECT_TRUE(
        logged(sdir_.path() + "/standby.err", "`: the thaw its undone move owed `n1`: thawed"))
        << read_file(sdir_.path() + "/standby.err");
    EXPECT_NE(on_s("GET", "/_shard/status").body.find(R"("thaws_owed":[])"), std::string::npos)
        << on_s("GET", "/_shard/status").body;
    Client c(standby_->port());
    const Reply w = c.request("POST", "/t/" + t + "/c/notes", R"({"title":"after"})", bearer(kData))
                        .value_or(Reply{});
    EXPECT_EQ(w.status, 201) << w.body;
}

}  // namespace
}  // namespace fenec::test::standby_move_test
