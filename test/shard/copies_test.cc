// test/shard/copies_test.cc: replicas of their own (router.md §8.2, §8.3; §18 cases 50–54)
// through fenec-shard --replicas, against four real fenec-node processes shared by the cases:
// the replica placed by zones and found following its primary on its node, `same_zone` answered
// and counted and moved by a zone change, `unreplicated` with its reason until a node added
// repairs it, a repair preferring a node that holds a stale copy and learning a lineage its
// primary and a copy both report, a node removed listing the tenants whose copy it kept, and a
// tenant's delete taking its replica with it.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <future>

#include "test/shard/cluster_fixture.h"

namespace fenec::test::copies_test {
namespace {

class Copies : public ClusterTest<4> {
  protected:
    void SetUp() override { start_router({"--replicas"}); }

    // n1–n4 added, and `t` created on n1: the node its replica went to.
    void four_nodes_and_a_replica(const std::string& t, std::string& replica) {
        for (int i = 0; i < 4; ++i) ASSERT_EQ(add(i, "n" + std::to_string(i + 1)).status, 201);
        Reply made = create(t, "n1");
        ASSERT_EQ(made.status, 201) << made.body;
        replica = Json(made.body).text("replica_on");
        ASSERT_FALSE(replica.empty()) << made.body;
    }
    // n1 and n2 added, and `t` created on n1, its replica on n2.
    void two_nodes_and_a_replica(const std::string& t) {
        ASSERT_EQ(add(0, "n1").status, 201);
        ASSERT_EQ(add(1, "n2").status, 201);
        Reply made = create(t, "n1");
        ASSERT_EQ(made.status, 201) << made.body;
        ASSERT_EQ(Json(made.body).text("replica_on"), "n2") << made.body;
    }
    // How many times a repair has claimed `t`, as FENEC_TEST_REPAIR_STALL says on stderr when
    // the claim is taken.
    size_t repair_claims(const std::string& t) {
        const std::string err = read_file(dir_.path() + "/router.err");
        const std::string holding = "test hook: repair holding `" + t + "`";
        size_t n = 0;
        for (size_t at = err.find(holding); at != std::string::npos;
             at = err.find(holding, at + 1)) {
            ++n;
        }
        return n;
    }
    // The index of node `n` (n1–n4).
    static int index_of(const std::string& n) { return std::stoi(n.substr(1)) - 1; }
    // `t`'s seq on node `i`, 0 when it has no copy there.
    uint64_t seq_on(int i, const std::string& t) {
        Reply d = node(i, "GET", "/_admin/tenants/" + t, {}, node_admin_token(i));
        simdjson::dom::parser parser;
        uint64_t seq = 0;
        if (d.status != 200 || parser.parse(d.body)["seq"].get_uint64().get(seq)) return 0;
        return seq;
    }
    // The node the directory names `t`'s copy on ("" for none).
    std::string recorded_copy(const std::string& t) {
        return Json(shard("GET", "/_shard/tenants/" + t).body).text("replica");
    }
    // n1 paired with `standby`, which takes `t` over from its own replica; then fifteen_blocks,
    // and the standby caught up with them.
    void paired_and_loaded(const std::string& t, const std::string& standby) {
        Reply paired = shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + standby + R"("})");
        ASSERT_EQ(paired.status, 200) << paired.body;
        // Handed over at once, or by a repair once caught up (a slow machine).
        ASSERT_TRUE(eventually([&] {
            if (recorded_copy(t) != standby) (void)shard("POST", "/_shard/replicas", "{}");
            return recorded_copy(t) == standby;
        })) << "the standby never took the tenant over";
        ASSERT_NO_FATAL_FAILURE(fifteen_blocks(t));
        const uint64_t primary_seq = seq_on(0, t);
        ASSERT_GT(primary_seq, 15u);
        ASSERT_TRUE(eventually([&] { return seq_on(index_of(standby), t) >= primary_seq; }));
    }
    // Of n2–n4, the two that do not hold `replica`: a first standby (n3 or n2) and a second.
    struct Standbys {
        int first, second;
        std::string first_name, second_name;
    };
    static Standbys two_standbys(const std::string& replica) {
        const int first = index_of(replica) == 1 ? 2 : 1;
        const int second = 6 - first - index_of(replica);  // n2–n4 are indexes 1–3
        return {first, second, "n" + std::to_string(first + 1), "n" + std::to_string(second + 1)};
    }
    // After n1's pair went from s.first to s.second: where `t`'s copy is still the first (the
    // second behind at the bound, on a slow machine), a repair hands it over once caught up.
    void handed_over_by_a_repair_if_kept(const std::string& t, const std::string& copy,
                                         const Standbys& s, uint64_t primary_seq) {
        if (copy != s.first_name) return;
        ASSERT_TRUE(eventually([&] { return seq_on(s.second, t) >= primary_seq; }));
        Reply repaired = shard("POST", "/_shard/replicas", "{}");
        EXPECT_EQ(repaired.status, 200) << repaired.body;
        EXPECT_EQ(recorded_copy(t), s.second_name);
    }
    // Fifteen blocks of 100 KB written to `t`: a copy told to follow it now takes a while.
    void fifteen_blocks(const std::string& t) {
        const std::string big(100'000, 'a');
        for (int i = 0; i < 15; ++i) {
            Reply put = data("PUT", "/t/" + t + "/c/notes/1", R"({"title":")" + big + R"("})");
            ASSERT_EQ(put.status / 100, 2) << put.body;
        }
    }
};

// Case 50: another zone of the same region first; the replica follows its primary, and a row
// written through the router reaches it.
TEST_F(Copies, ReplicaGoesToAnotherZoneOfTheRegion) {
    ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(1, "eu2", "eu", "fra").status, 201);
    ASSERT_EQ(add(2, "eu3", "eu", "ams").status, 201);
    ASSERT_EQ(add(3, "us1", "us", "iad").status, 201);
    const std::string t = tenant("acme");
    Reply r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    Json made(r.body);
    EXPECT_EQ(made.text("replica_on"), "eu3") << r.body;
    EXPECT_FALSE(made.has("same_zone")) << r.body;
    EXPECT_FALSE(made.has("unreplicated")) << r.body;
    EXPECT_TRUE(follows(2, t, 0)) << copy_on(2, t).body;
    EXPECT_EQ(copy_on(1, t).status, 404);
    ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"a"})").status, 201);
    EXPECT_TRUE(eventually([&] { return count_on(2, t) == R"({"count":1})"; })) << count_on(2, t);
    Reply got = shard("GET", "/_shard/tenants/" + t);
    EXPECT_EQ(Json(got.body).text("replica"), "eu3") << got.body;
    const std::string m = metrics();
    EXPECT_EQ(sample(m, R"(fenec_router_replicas{node="eu3"})"), "1") << m;
    EXPECT_EQ(sample(m, R"(fenec_router_replicas{node="eu2"})"), "0") << m;
    EXPECT_EQ(sample(m, R"(fenec_router_unreplicated_tenants{region="eu"})"), "0") << m;
}

// Case 51: every free node of the region in the primary's zone: the replica goes there all the
// same, answered and counted as same_zone, until a zone change moves it at once.
TEST_F(Copies, SameZoneCopyIsAnsweredAndCounted) {
    ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(1, "eu2", "eu", "fra").status, 201);
    ASSERT_EQ(add(2, "us1", "us", "iad").status, 201);
    const std::string t = tenant("acme");
    Reply r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(Json(r.body).text("replica_on"), "eu2") << r.body;
    EXPECT_TRUE(Json(r.body).boolean("same_zone")) << r.body;
    Reply got = shard("GET", "/_shard/tenants/" + t);
    EXPECT_TRUE(Json(got.body).boolean("same_zone")) << got.body;
    EXPECT_EQ(sample(metrics(), R"(fenec_router_same_zone_copies{region="eu"})"), "1");
    EXPECT_EQ(sample(metrics(), R"(fenec_router_same_zone_copies{region="us"})"), "0");

    ASSERT_EQ(shard("PUT", "/_shard/nodes/eu2", R"({"zone":"ams"})").status, 200);
    got = shard("GET", "/_shard/tenants/" + t);
    EXPECT_FALSE(Json(got.body).has("same_zone")) << got.body;
    EXPECT_EQ(Json(got.body).text("replica"), "eu2") << got.body;
    EXPECT_EQ(sample(metrics(), R"(fenec_router_same_zone_copies{region="eu"})"), "0");
}

// A create tries two nodes for the replica, so a request waits for two calls at most. With both
// first-ranked nodes down (another zone, no leases: nothing fails them over), the tenant is left
// unreplicated, and looked at again 10 s later (1 s here: FENEC_TEST_REPAIR_LOOK_MS) by a repair
// whose survey leaves the silent nodes out: the replica goes to the node left, in the primary's
// zone. Before, it stayed unreplicated until a repair was asked for.
TEST_F(Copies, ATenantWhoseFirstRankedNodesAreDownGetsAReplicaByALookAfter) {
    {
        HookEnv looks("FENEC_TEST_REPAIR_LOOK_MS", "1000");
        start_router({"--replicas"});
    }
    ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(1, "eu2", "eu", "ams").status, 201);
    ASSERT_EQ(add(2, "eu3", "eu", "ams").status, 201);
    ASSERT_EQ(add(3, "eu4", "eu", "fra").status, 201);
    const uint16_t port1 = nodes_->port(1), port2 = nodes_->port(2);
    nodes_->procs[1]->kill(SIGKILL);
    nodes_->procs[2]->kill(SIGKILL);
    const std::string t = tenant("acme");
    Reply r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_TRUE(Json(r.body).has("unreplicated")) << r.body;
    EXPECT_EQ(copy_on(3, t).status, 404) << "eu4 was the third choice";
    const bool placed = eventually(
        [&] { return Json(shard("GET", "/_shard/tenants/" + t).body).text("replica") == "eu4"; },
        20'000);
    nodes_->start(1, port1);
    nodes_->start(2, port2);
    ASSERT_TRUE(placed) << shard("GET", "/_shard/tenants/" + t).body;
    Json got(shard("GET", "/_shard/tenants/" + t).body);
    EXPECT_TRUE(got.boolean("same_zone"));
    EXPECT_FALSE(got.has("unreplicated"));
    EXPECT_TRUE(follows(3, t, 0)) << copy_on(3, t).body;
    EXPECT_EQ(sample(metrics(), R"(fenec_router_unreplicated_tenants{region="eu"})"), "0");
}

// A scheduled look that finds no node to keep the copy keeps the tenant on the schedule: the
// next look places it once a node answers again (FENEC_TEST_REPAIR_LOOK_MS: the looks at 1, 3,
// 6, 12 and 30 s rather than 10 s to 5 min). Were a look's failure to take the tenant off, it
// would stay unreplicated until a repair was asked for.
TEST_F(Copies, AScheduledLookThatPlacesNothingLeavesTheNextLook) {
    {
        HookEnv looks("FENEC_TEST_REPAIR_LOOK_MS", "1000");
        start_router({"--replicas"});
    }
    for (int i = 0; i < 4; ++i) ASSERT_EQ(add(i, "n" + std::to_string(i + 1)).status, 201);
    std::vector<uint16_t> ports;
    for (int i = 1; i < 4; ++i) {
        ports.push_back(nodes_->port(i));
        nodes_->procs[i]->kill(SIGKILL);
    }
    const std::string t = tenant("acme");
    Reply r = create(t, "n1");
    const bool looked =
        logged(dir_.path() + "/router.err", "the scheduled look at 1 tenants", 10'000);
    nodes_->start(3, ports[2]);
    const bool placed = eventually([&] { return recorded_copy(t) == "n4"; }, 20'000);
    nodes_->start(1, ports[0]);
    nodes_->start(2, ports[1]);
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_TRUE(Json(r.body).has("unreplicated")) << r.body;
    EXPECT_TRUE(looked) << read_file(dir_.path() + "/router.err");
    ASSERT_TRUE(placed) << shard("GET", "/_shard/tenants/" + t).body << "\n"
                        << read_file(dir_.path() + "/router.err");
    EXPECT_TRUE(follows(3, t, 0)) << copy_on(3, t).body;
    EXPECT_FALSE(Json(shard("GET", "/_shard/tenants/" + t).body).has("unreplicated"));
}

// Case 52: a region with no other node gives none, with the reason, until a node added there
// runs a repair that gives it one.
TEST_F(Copies, UnreplicatedUntilANodeIsAdded) {
    ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(1, "us1", "us", "iad").status, 201);
    const std::string t = tenant("acme");
    Reply r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string why = "there is no other node in region `eu` to keep it";
    EXPECT_EQ(Json(r.body).text("unreplicated"), why) << r.body;
    EXPECT_FALSE(Json(r.body).has("replica_on")) << r.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("unreplicated"), why);
    EXPECT_EQ(sample(metrics(), R"(fenec_router_unreplicated_tenants{region="eu"})"), "1");

    ASSERT_EQ(add(2, "eu2", "eu", "ams").status, 201);
    EXPECT_TRUE(eventually([&] {
        return Json(shard("GET", "/_shard/tenants/" + t).body).text("replica") == "eu2";
    })) << shard("GET", "/_shard/tenants/" + t).body;
    EXPECT_TRUE(follows(2, t, 0)) << copy_on(2, t).body;
    EXPECT_FALSE(Json(shard("GET", "/_shard/tenants/" + t).body).has("unreplicated"));
    EXPECT_EQ(sample(metrics(), R"(fenec_router_unreplicated_tenants{region="eu"})"), "0");
}

// Case 53: a zone not recorded ranks between another zone and the same one.
TEST_F(Copies, UnrecordedZoneRanksBetween) {
    ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(1, "eu2", "eu", "").status, 201);
    ASSERT_EQ(add(2, "eu3", "eu", "fra").status, 201);
    const std::string t = tenant("acme");
    Reply r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(Json(r.body).text("replica_on"), "eu2") << r.body;
    EXPECT_FALSE(Json(r.body).has("same_zone")) << r.body;
}

// A tenant moved onto the node of its replica, where the only node left to keep a replica is the
// one it left (the others a pair): the replica goes to the source once the move has deleted its
// copy there. Before, the move answered `unreplicated` "there is no other node to keep it", and
// nothing placed one until a repair was asked for.
TEST_F(Copies, AMoveOntoItsReplicasNodePlacesTheReplicaOnTheSourceWhenNoOtherNodeIsLeft) {
    for (int i = 0; i < 4; ++i) ASSERT_EQ(add(i, "n" + std::to_string(i + 1)).status, 201);
    const std::string t = tenant("x");
    Reply made = create(t, "n4");
    ASSERT_EQ(made.status, 201) << made.body;
    const std::string replica = Json(made.body).text("replica_on");
    ASSERT_FALSE(replica.empty()) << made.body;
    std::vector<std::string> others;
    for (const char* n : {"n1", "n2", "n3"}) {
        if (n != replica) others.push_back(n);
    }
    Reply paired =
        shard("PUT", "/_shard/nodes/" + others[0], R"({"standby":")" + others[1] + R"("})");
    ASSERT_EQ(paired.status, 200) << paired.body;
    ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"a"})").status, 201);

    Reply moved = shard("POST", "/_shard/tenants/" + t + "/move", R"({"to":")" + replica + R"("})");
    ASSERT_EQ(moved.status, 200) << moved.body;
    EXPECT_TRUE(Json(moved.body).boolean("source_removed")) << moved.body;
    EXPECT_EQ(Json(moved.body).text("replica_on"), "n4") << moved.body;
    EXPECT_FALSE(Json(moved.body).has("unreplicated")) << moved.body;
    EXPECT_EQ(recorded_copy(t), "n4");
    EXPECT_TRUE(follows(3, t, index_of(replica))) << copy_on(3, t).body;
    EXPECT_TRUE(eventually([&] { return count_on(3, t) == R"({"count":1})"; })) << count_on(3, t);
    // Said on stderr (from the log's queue, within 200 ms), as operations.md says moves are.
    const std::string said = "moved `" + t + "` from `n4` to `" + replica + "`: ";
    EXPECT_TRUE(eventually([&] {
        const std::string err = read_file(dir_.path() + "/router.err");
        const size_t at = err.find(said);
        return at != std::string::npos && err.find("; its copy on `n4`", at) < err.find('\n', at);
    })) << read_file(dir_.path() + "/router.err");
}

// A node's arrival starts a repair, which claims each tenant it looks at for its own step. A
// client's change of a tenant meanwhile waits that claim out (up to 2 s) rather than being refused
// for housekeeping it never asked for; a repair holding it longer still gets the 409. Before, a
// move asked just after a node was added was 409 `held_by: repair` whenever the repair came
// first, as one did in CI.
TEST_F(Copies, AClientsChangeWaitsOutARepairsClaimOfItsTenant) {
    ::setenv("FENEC_TEST_REPAIR_STALL", "1200", 1);
    start_router({"--replicas"});
    ::unsetenv("FENEC_TEST_REPAIR_STALL");
    const std::string t = tenant("x");
    ASSERT_NO_FATAL_FAILURE(two_nodes_and_a_replica(t));
    auto claims = [&] { return repair_claims(t); };
    const size_t before = claims();  // a repair of n2's arrival may have looked at it already
    ASSERT_EQ(add(2, "n3").status, 201);
    ASSERT_TRUE(eventually([&] { return claims() > before; }))
        << read_file(dir_.path() + "/router.err");
    Reply moved = shard("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n3"})");
    EXPECT_EQ(moved.status, 200) << moved.body;

    // Held past the bound: the quota change is refused, naming the repair.
    ::setenv("FENEC_TEST_REPAIR_STALL", "3000", 1);
    start_router({"--replicas"});
    ::unsetenv("FENEC_TEST_REPAIR_STALL");
    auto repair = std::async(std::launch::async, [&] {
        Client c(router_->port());
        return c.request("POST", "/_shard/replicas", "{}", bearer(kRoot)).value_or(Reply{});
    });
    ASSERT_TRUE(eventually([&] { return claims() > 0; })) << read_file(dir_.path() + "/router.err");
    Reply quota = shard("PUT", "/_shard/tenants/" + t + "/quota", R"({"rows":5})");
    EXPECT_EQ(quota.status, 409) << quota.body;
    EXPECT_EQ(Json(quota.body).text("held_by"), "repair") << quota.body;
    EXPECT_EQ(repair.get().status, 200);
}

// A failover parked on a tenant a repair holds (§9.3) comes before a client's change that
// waited on the same repair: the change reads the row the failover leaves. Before, the change,
// woken at once by the repair's release, took the claim while the failover's settling was still
// queued: here the move to n2 ran on the n1 row, and the failover found the tenant moved and did
// nothing.
TEST_F(Copies, AFailoverParkedOnARepairsTenantComesBeforeAChangeWaitingOnTheSameRepair) {
    // Every repair's claim of a tenant is held until the gate file is made.
    const std::string gate = dir_.path() + "/repair.gate";
    ::setenv("FENEC_TEST_REPAIR_STALL", ("gate:" + gate).c_str(), 1);
    start_router({"--replicas"});
    ::unsetenv("FENEC_TEST_REPAIR_STALL");
    const std::string t = tenant("x");
    ASSERT_NO_FATAL_FAILURE(two_nodes_and_a_replica(t));
    auto repair = std::async(std::launch::async, [&] {
        Client c(router_->port());
        return c.request("POST", "/_shard/replicas", "{}", bearer(kRoot)).value_or(Reply{});
    });
    // A repair holds t (the gate shut, every hold said is one still held).
    ASSERT_TRUE(eventually([&] { return repair_claims(t) > 0; }))
        << read_file(dir_.path() + "/router.err");
    Reply failed = shard("POST", "/_shard/nodes/n1/failover", "{}");
    ASSERT_EQ(failed.status, 200) << failed.body;
    ASSERT_NE(failed.body.find(R"("held_by":"repair")"), std::string::npos) << failed.body;
    // The move sent, and then the repair let go: the move waits on the repair's claim beside the
    // parked failover.
    Client mover(router_->port());
    const std::string body = R"({"to":"n2"})";
    ASSERT_TRUE(mover.send_raw("POST /_shard/tenants/" + t +
                               "/move HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                               kRoot + "\r\nContent-Length: " + std::to_string(body.size()) +
                               "\r\n\r\n" + body));
    ASSERT_TRUE(std::ofstream(gate).good());
    const Reply moved = mover.read_reply().value_or(Reply{});
    EXPECT_EQ(moved.status, 409) << moved.body;
    EXPECT_NE(moved.body.find("is on node `n2` already"), std::string::npos) << moved.body;
    // Said once the failover has let the claim go.
    EXPECT_TRUE(eventually([&] {
        return read_file(dir_.path() + "/router.err")
                   .find("`" + t + "`, waiting for another operation, failed over onto `n2`") !=
               std::string::npos;
    })) << read_file(dir_.path() + "/router.err");
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), "n2");
    // The failover's entry in the status no longer lists it waiting, but promoted.
    const std::string status = shard("GET", "/_shard/status").body;
    EXPECT_NE(status.find(R"("promoted":[{"tenant":")" + t + R"(","to":"n2"}])"), std::string::npos)
        << status;
    EXPECT_NE(status.find(R"("waiting":[])"), std::string::npos) << status;
    EXPECT_EQ(repair.get().status, 200);
}

// §6.3: a node removed lists the tenants whose replica it kept, which then say why they have
// none; a tenant's delete takes its replica with it (§6.4).
// A pair gives each tenant of its node its copy on the standby, one tenant at a time, each
// claimed. A tenant moved off the node before its claim is left alone: it is not the node's any
// more, and its replica (re-pointed by the move) stays. Before, the pair used the row it listed
// first: the standby was told to follow the node the tenant had left, and the tenant's live
// replica was detached, leaving it no copy and none said.
TEST_F(Copies, APairLeavesATenantMovedOffTheNodeBeforeItsClaim) {
    ::setenv("FENEC_TEST_PAIR_STALL", "1500", 1);
    start_router({"--replicas"});
    ::unsetenv("FENEC_TEST_PAIR_STALL");
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    std::vector<std::string> free;
    for (const char* n : {"n2", "n3", "n4"}) {
        if (n != replica) free.push_back(n);
    }
    const std::string standby = free[0], target = free[1];
    auto pair = std::async(std::launch::async, [&] {
        Client c(router_->port());
        return c
            .request("PUT", "/_shard/nodes/n1", R"({"standby":")" + standby + R"("})",
                     bearer(kRoot))
            .value_or(Reply{});
    });
    ASSERT_TRUE(eventually([&] {
        return read_file(dir_.path() + "/router.err").find("test hook: pairing") !=
               std::string::npos;
    }));
    Client mover(router_->port());
    const Reply moved = mover
                            .request("POST", "/_shard/tenants/" + t + "/move",
                                     R"({"to":")" + target + R"("})", bearer(kRoot))
                            .value_or(Reply{});
    ASSERT_EQ(moved.status, 200) << moved.body;
    const Reply paired = pair.get();
    ASSERT_EQ(paired.status, 200) << paired.body;
    const Reply row = shard("GET", "/_shard/tenants/" + t);
    EXPECT_EQ(Json(row.body).text("node"), target) << row.body;
    EXPECT_FALSE(Json(row.body).text("replica").empty())
        << "the moved tenant kept a copy: " << row.body;
    const int on_standby = standby == "n2" ? 1 : standby == "n3" ? 2 : 3;
    EXPECT_EQ(copy_on(on_standby, t).status, 404) << "no copy of it made on the standby";
}

// A pair's standby still catching up is no copy yet: the pair gives up the tenant's own replica
// for it only once it has caught up. So when the pair's answer finds the replica gone, the standby
// is at the seq the primary had before the pair (its 15 blocks of 100 KB replayed); a standby
// still behind at the bound keeps the replica, and a repair hands it over once it has caught up.
// Before, the replica was deleted as soon as the standby was told to follow, and the answer found
// the standby a few blocks in: a failover then promoted a copy without the last writes.
TEST_F(Copies, APairGivesUpAReplicaOnlyOnceTheStandbyHasCaughtUp) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    ASSERT_NO_FATAL_FAILURE(fifteen_blocks(t));
    const uint64_t primary_seq = seq_on(0, t);
    ASSERT_GT(primary_seq, 15u);
    const int standby = replica == "n2" ? 2 : 1;  // node index: n3 or n2, not the replica's
    const std::string standby_name = "n" + std::to_string(standby + 1);
    Reply paired = shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + standby_name + R"("})");
    ASSERT_EQ(paired.status, 200) << paired.body;
    const uint64_t standby_seq = seq_on(standby, t);
    const int replica_index = index_of(replica);
    if (copy_on(replica_index, t).status == 404) {
        EXPECT_GE(standby_seq, primary_seq)
            << "the replica was given up for a standby short of the primary's writes";
    } else {
        // Behind at the bound (a slow machine): kept, and handed over by a repair once caught up.
        EXPECT_EQ(recorded_copy(t), replica);
        ASSERT_TRUE(eventually([&] { return seq_on(standby, t) >= primary_seq; }));
        Reply repaired = shard("POST", "/_shard/replicas", "{}");
        EXPECT_EQ(repaired.status, 200) << repaired.body;
        EXPECT_EQ(copy_on(replica_index, t).status, 404) << "not handed over once caught up";
    }
}

// A pair given a new standby: the old standby's copy stays the tenant's copy, recorded as a
// replica of its own, until the new standby has caught up, and is deleted only then. So at the
// answer the copy the directory names holds every write the primary had before the change, and
// the old one goes once the new one has caught up. Before, the new standby was the copy from the
// moment the pair was recorded and the old copy was deleted as soon as the new standby was told
// to follow: the answer found the copy a few of its 15 blocks of 100 KB in, and a failover then
// would have promoted it without the last writes.
TEST_F(Copies, APairGivenANewStandbyKeepsTheOldOnesCopyUntilTheNewOneHasCaughtUp) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    const Standbys s = two_standbys(replica);
    ASSERT_NO_FATAL_FAILURE(paired_and_loaded(t, s.first_name));
    const uint64_t primary_seq = seq_on(0, t);

    Reply paired = shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + s.second_name + R"("})");
    ASSERT_EQ(paired.status, 200) << paired.body;
    const std::string copy = recorded_copy(t);
    ASSERT_TRUE(copy == s.first_name || copy == s.second_name) << copy;
    EXPECT_GE(seq_on(index_of(copy), t), primary_seq)
        << "the tenant's copy, on " << copy << ", is short of the primary's writes";
    ASSERT_NO_FATAL_FAILURE(handed_over_by_a_repair_if_kept(t, copy, s, primary_seq));
    EXPECT_EQ(copy_on(s.first, t).status, 404) << "the old standby's copy was left behind";
}

// As above, with the old standby dead: it cannot say whether it holds the tenant, so its kept row
// stays until the new standby has caught up, as a live one's does. Were a silent old standby's
// row dropped at once, the new standby would be the copy from the moment it was told to follow,
// and the answer found it a few blocks in.
TEST_F(Copies, APairGivenANewStandbyBesideItsDeadOldOneHandsOverOnlyOnceCaughtUp) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    const Standbys s = two_standbys(replica);
    ASSERT_NO_FATAL_FAILURE(paired_and_loaded(t, s.first_name));
    const uint64_t primary_seq = seq_on(0, t);
    const uint16_t port = nodes_->port(s.first);
    nodes_->procs[s.first]->kill(SIGKILL);

    Reply paired = shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + s.second_name + R"("})");
    const std::string copy = recorded_copy(t);
    const uint64_t second_seq = seq_on(s.second, t);
    nodes_->start(s.first, port);
    ASSERT_EQ(paired.status, 200) << paired.body;
    ASSERT_TRUE(copy == s.first_name || copy == s.second_name) << copy;
    if (copy == s.second_name) {
        EXPECT_GE(second_seq, primary_seq)
            << "the new standby was made the copy short of the primary's writes";
    }
    ASSERT_NO_FATAL_FAILURE(handed_over_by_a_repair_if_kept(t, copy, s, primary_seq));
}

// An old standby down while its pair moved on keeps its copy, which follows the primary again
// once the node is back, though no row names it. A repair deletes it: the tenant's recorded copy
// follows it, and this one would stream from the primary for ever. Before, the repair answered
// nothing to do, and the primary kept a follower the directory knew nothing of.
TEST_F(Copies, ARepairDeletesACopyFollowingThePrimaryThatNoRowNames) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    const Standbys s = two_standbys(replica);
    ASSERT_NO_FATAL_FAILURE(paired_and_loaded(t, s.first_name));
    const uint16_t port = nodes_->port(s.first);
    nodes_->procs[s.first]->kill(SIGKILL);
    Reply paired = shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + s.second_name + R"("})");
    ASSERT_EQ(paired.status, 200) << paired.body;
    ASSERT_TRUE(eventually([&] {
        if (recorded_copy(t) != s.second_name) (void)shard("POST", "/_shard/replicas", "{}");
        return recorded_copy(t) == s.second_name;
    })) << recorded_copy(t);
    nodes_->start(s.first, port);
    ASSERT_TRUE(eventually([&] { return follows(s.first, t, 0); }, 10000))
        << "the old standby's copy did not follow again: " << copy_on(s.first, t).body;

    Reply repaired = shard("POST", "/_shard/replicas", "{}");
    ASSERT_EQ(repaired.status, 200) << repaired.body;
    EXPECT_NE(repaired.body.find(R"({"tenant":")" + t + R"(","node":")" + s.first_name + R"("})"),
              std::string::npos)
        << repaired.body;
    EXPECT_EQ(copy_on(s.first, t).status, 404) << "the unrecorded copy is still there";
    EXPECT_TRUE(follows(s.second, t, 0)) << "the recorded copy was touched";
    EXPECT_EQ(recorded_copy(t), s.second_name);
}

// Under --replicas, a pair removed leaves each tenant its copy on the old standby, caught up, as
// its replica of its own. Before, that copy was deleted and a replica placed afresh, which the
// answer found replaying the tenant's 15 blocks of 100 KB: a failover then would have promoted it
// without the last writes.
TEST_F(Copies, APairRemovedUnderReplicasKeepsTheStandbysCopyAsTheTenantsReplica) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    const int standby = index_of(replica) == 1 ? 2 : 1;  // n3 or n2, not the replica's node
    const std::string standby_name = "n" + std::to_string(standby + 1);
    ASSERT_NO_FATAL_FAILURE(paired_and_loaded(t, standby_name));
    const uint64_t primary_seq = seq_on(0, t);

    Reply unpaired = shard("PUT", "/_shard/nodes/n1", R"({"standby":null})");
    ASSERT_EQ(unpaired.status, 200) << unpaired.body;
    const std::string copy = recorded_copy(t);
    ASSERT_FALSE(copy.empty()) << "no copy after the pair was removed";
    EXPECT_EQ(copy, standby_name);
    EXPECT_GE(seq_on(index_of(copy), t), primary_seq)
        << "the tenant's copy, on " << copy << ", is short of the primary's writes";
    EXPECT_TRUE(follows(index_of(copy), t, 0)) << copy_on(index_of(copy), t).body;
}

// As above, with the standby dead as its pair is removed (the usual reason to remove it): its copy
// is no copy to keep, so the tenant gets a replica placed afresh on a node that answers. Before
// the check, the row named the dead standby and the tenant had no live copy, with nothing to
// repair it while the node stayed in the directory.
TEST_F(Copies, APairRemovedUnderReplicasWithItsStandbyDeadPlacesAReplicaAfresh) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    const int standby = index_of(replica) == 1 ? 2 : 1;  // n3 or n2, not the replica's node
    const std::string standby_name = "n" + std::to_string(standby + 1);
    ASSERT_NO_FATAL_FAILURE(paired_and_loaded(t, standby_name));
    const uint16_t port = nodes_->port(standby);
    nodes_->procs[standby]->kill(SIGKILL);
    Reply unpaired = shard("PUT", "/_shard/nodes/n1", R"({"standby":null})");
    const std::string copy = recorded_copy(t);
    nodes_->start(standby, port);
    ASSERT_EQ(unpaired.status, 200) << unpaired.body;
    EXPECT_NE(copy, standby_name) << "the tenant's copy is on its dead old standby";
    ASSERT_FALSE(copy.empty()) << "no replica placed: " << unpaired.body;
    EXPECT_TRUE(follows(index_of(copy), t, 0)) << copy_on(index_of(copy), t).body;
    EXPECT_TRUE(eventually([&] {
        return read_file(dir_.path() + "/router.err")
                   .find("the pair of node `n1` with `" + standby_name + "` is removed") !=
               std::string::npos;
    })) << read_file(dir_.path() + "/router.err");
}

// A pair whose standby did not take a tenant leaves that tenant's own replica its copy. Before,
// the pair's standby was the copy of every tenant on the node from the moment the pair was
// recorded: a failover asked the standby to promote a copy it did not have, and failed the tenant,
// while its own replica followed it on another node.
TEST_F(Copies, ATenantTheStandbyDidNotTakeFailsOverOntoItsOwnReplica) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    const int standby = replica == "n2" ? 2 : 1;  // node index: n3 or n2, not the replica's
    const std::string standby_name = "n" + std::to_string(standby + 1);
    const uint16_t port = nodes_->port(standby);
    nodes_->procs[standby]->kill(SIGKILL);
    Reply paired = shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + standby_name + R"("})");
    nodes_->start(standby, port);
    ASSERT_EQ(paired.status, 200) << paired.body;
    ASSERT_NE(paired.body.find(t), std::string::npos) << "listed unreplicated: " << paired.body;
    EXPECT_EQ(copy_on(standby, t).status, 404) << "the standby did not take it";
    Reply row = shard("GET", "/_shard/tenants/" + t);
    EXPECT_EQ(Json(row.body).text("replica"), replica) << row.body;

    Reply r = shard("POST", "/_shard/nodes/n1/failover", "{}");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(R"({"tenant":")" + t + R"(","to":")" + replica + R"("})"),
              std::string::npos)
        << r.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), replica);
}

// A repair hands a tenant over to its node's standby, and a PUT of the pair names another standby
// meanwhile. The hand-over asks again whether the pair still names the standby it read, and
// leaves the tenant as the PUT wrote it (its kept row on the old standby, whose copy follows):
// `repair` before it starts, `caught-up` once the standby it attached has caught up, its own
// replica not yet detached. Before, the repair went on: it removed the kept row (`repair`) or
// detached the own replica (`caught-up`), and the copy the directory named was the new standby,
// which nothing had attached (its claim held by the repair). A later repair hands it over.
class CopiesHandOver : public Copies {
  protected:
    void SetUp() override {}
    // The router started with its hand-overs held 1.5 s at `step`, n1–n4 added, `t` on n1 with its
    // replica, and the two other nodes as standbys to be (two_standbys).
    void held_at(const std::string& step, const std::string& t, std::string& replica, Standbys& s) {
        ::setenv("FENEC_TEST_HANDOVER_STALL", (step + ":1500").c_str(), 1);
        start_router({"--replicas"});
        ::unsetenv("FENEC_TEST_HANDOVER_STALL");
        ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
        s = two_standbys(replica);
    }
    // With the hook at `step`: `t` on n1, and `prepare` (a pair made, a node killed, ...); then a
    // repair held at `step`, n1 paired with `next` meanwhile. Returns the pair's answer.
    Reply pair_changed_during(const std::string& step, const std::string& t,
                              const std::string& next) {
        Reply paired;
        const Reply repaired = repair_held_at(step, t, [&] {
            paired = shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + next + R"("})");
        });
        EXPECT_EQ(repaired.status, 200) << repaired.body;
        return paired;
    }
    // A repair, held at `step` for `t` while `meanwhile` runs: its answer.
    Reply repair_held_at(const std::string& step, const std::string& t,
                         const std::function<void()>& meanwhile) {
        const std::string said = "test hook: handing `" + t + "` over held after `" + step + "`";
        auto times_said = [&] {
            const std::string err = read_file(dir_.path() + "/router.err");
            size_t n = 0;
            for (size_t at = err.find(said); at != std::string::npos; at = err.find(said, at + 1)) {
                ++n;
            }
            return n;
        };
        const size_t before = times_said();  // a look or repair before may have been held too
        Client repairing(router_->port());
        auto repair = std::async(std::launch::async, [&] {
            return repairing.request("POST", "/_shard/replicas", "{}", bearer(kRoot))
                .value_or(Reply{});
        });
        EXPECT_TRUE(eventually([&] { return times_said() > before; }))
            << read_file(dir_.path() + "/router.err");
        meanwhile();
        return repair.get();
    }
    // The copy the directory names follows n1, and after a repair it is `next`'s, caught up.
    void copy_follows_then_handed_to(const std::string& t, const std::string& next) {
        const std::string copy = recorded_copy(t);
        ASSERT_FALSE(copy.empty()) << shard("GET", "/_shard/tenants/" + t).body;
        EXPECT_TRUE(follows(index_of(copy), t, 0))
            << "the directory names a copy on " << copy
            << " that does not follow the primary: " << copy_on(index_of(copy), t).body;
        ASSERT_TRUE(eventually([&] {
            if (recorded_copy(t) != next) (void)shard("POST", "/_shard/replicas", "{}");
            return recorded_copy(t) == next;
        })) << shard("GET", "/_shard/tenants/" + t).body;
        EXPECT_TRUE(follows(index_of(next), t, 0)) << copy_on(index_of(next), t).body;
    }
};

TEST_F(CopiesHandOver, APairChangedBeforeARepairsHandOverKeepsTheOldStandbysRow) {
    const std::string t = tenant("x");
    std::string replica;
    Standbys s{};
    ASSERT_NO_FATAL_FAILURE(held_at("repair", t, replica, s));
    ASSERT_NO_FATAL_FAILURE(paired_and_loaded(t, s.first_name));  // the pair's copy on s.first
    const Reply paired = pair_changed_during("repair", t, s.second_name);
    ASSERT_EQ(paired.status, 200) << paired.body;
    EXPECT_EQ(recorded_copy(t), s.first_name) << "the kept row on the old standby";
    ASSERT_NO_FATAL_FAILURE(copy_follows_then_handed_to(t, s.second_name));
}

TEST_F(CopiesHandOver, APairChangedOnceTheStandbyCaughtUpKeepsTheOwnReplica) {
    const std::string t = tenant("x");
    std::string replica;
    Standbys s{};
    ASSERT_NO_FATAL_FAILURE(held_at("caught-up", t, replica, s));
    // Paired while the standby is down: the tenant keeps its own replica.
    const uint16_t port = nodes_->port(s.first);
    nodes_->procs[s.first]->kill(SIGKILL);
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + s.first_name + R"("})").status,
              200);
    nodes_->start(s.first, port);
    EXPECT_EQ(recorded_copy(t), replica);
    const Reply paired = pair_changed_during("caught-up", t, s.second_name);
    ASSERT_EQ(paired.status, 200) << paired.body;
    EXPECT_EQ(recorded_copy(t), replica) << "its own replica, not detached";
    ASSERT_NO_FATAL_FAILURE(copy_follows_then_handed_to(t, s.second_name));
    EXPECT_EQ(copy_on(index_of(replica), t).status, 404) << "its own replica handed over";
}

// A copy that no row names and that followed the primary at the repair's survey, promoted on its
// node before the repair comes to delete it (an operator's promote by hand, say): the node is
// asked again just before, and a copy that no longer follows is left alone. Before, the survey's
// word was taken and the node's primary copy deleted.
TEST_F(CopiesHandOver, ARepairLeavesAnUnrecordedCopyPromotedSinceItsSurvey) {
    const std::string t = tenant("x");
    std::string replica;
    Standbys s{};
    ASSERT_NO_FATAL_FAILURE(held_at("repair", t, replica, s));
    ASSERT_NO_FATAL_FAILURE(paired_and_loaded(t, s.first_name));
    // The old standby down while the pair moves on: its copy, unrecorded, follows again after.
    const uint16_t port = nodes_->port(s.first);
    nodes_->procs[s.first]->kill(SIGKILL);
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + s.second_name + R"("})").status,
              200);
    ASSERT_TRUE(eventually([&] {
        if (recorded_copy(t) != s.second_name) (void)shard("POST", "/_shard/replicas", "{}");
        return recorded_copy(t) == s.second_name;
    })) << recorded_copy(t);
    nodes_->start(s.first, port);
    ASSERT_TRUE(eventually([&] { return follows(s.first, t, 0); }, 10000))
        << copy_on(s.first, t).body;

    Reply promoted;
    const Reply repaired = repair_held_at("repair", t, [&] {
        promoted = node(s.first, "POST", "/_admin/tenants/" + t + "/promote", R"({"force":true})");
    });
    ASSERT_EQ(promoted.status, 200) << promoted.body;
    ASSERT_EQ(repaired.status, 200) << repaired.body;
    EXPECT_EQ(repaired.body.find(R"({"tenant":")" + t + R"(","node":")" + s.first_name + R"("})"),
              std::string::npos)
        << "listed as dropped: " << repaired.body;
    EXPECT_EQ(copy_on(s.first, t).status, 200) << "the promoted copy was deleted";
    EXPECT_TRUE(follows(s.second, t, 0)) << "the recorded copy was touched";
}

// A repair finishes what the pair could not: once the standby answers it takes the tenant, and
// the tenant's own replica, its copy until then, is deleted; while the standby is silent the
// replica is left as it is. Before, the repair took the standby for the copy already and left
// the replica beside it for good (and, once the repair learnt of pairs, a silent standby was
// taken for one that followed, and the replica deleted).
TEST_F(Copies, ARepairHandsATenantThePairMissedToTheStandby) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    const int standby = replica == "n2" ? 2 : 1;
    const int on_replica = replica == "n2" ? 1 : replica == "n3" ? 2 : 3;
    const uint16_t port = nodes_->port(standby);
    nodes_->procs[standby]->kill(SIGKILL);
    const std::string pair = R"({"standby":"n)" + std::to_string(standby + 1) + R"("})";
    Reply paired = shard("PUT", "/_shard/nodes/n1", pair);
    ASSERT_EQ(paired.status, 200) << paired.body;
    // A repair while the standby is still silent knows nothing of it: the replica stays.
    Reply r = shard("POST", "/_shard/replicas");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("replica"), replica);
    EXPECT_TRUE(follows(on_replica, t, 0)) << copy_on(on_replica, t).body;
    nodes_->start(standby, port);
    r = shard("POST", "/_shard/replicas");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(follows(standby, t, 0)) << copy_on(standby, t).body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("replica"),
              "n" + std::to_string(standby + 1));
    EXPECT_EQ(copy_on(on_replica, t).status, 404) << "its own replica handed over";
}

// A pair removed leaves a tenant's own replica where it is, even on the old standby, when the
// standby never took the tenant over. Before, the copy there was deleted while its record stayed:
// the tenant had no copy and a failover would have found none where the directory said.
TEST_F(Copies, APairRemovedKeepsAReplicaOnTheOldStandbyItNeverReplaced) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    const int on_replica = replica == "n2" ? 1 : replica == "n3" ? 2 : 3;
    const uint16_t port = nodes_->port(on_replica);
    nodes_->procs[on_replica]->kill(SIGKILL);  // the pair's standby: the replica's own node
    Reply paired = shard("PUT", "/_shard/nodes/n1", R"({"standby":")" + replica + R"("})");
    nodes_->start(on_replica, port);
    ASSERT_EQ(paired.status, 200) << paired.body;
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n1", R"({"standby":null})").status, 200);
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("replica"), replica);
    EXPECT_TRUE(follows(on_replica, t, 0)) << copy_on(on_replica, t).body;
}

TEST_F(Copies, RemovedNodeListsItsReplicasAndDeleteTakesThem) {
    ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(1, "eu2", "eu", "ams").status, 201);
    const std::string a = tenant("a");
    const std::string b = tenant("b");
    ASSERT_EQ(create(a, "eu1").status, 201);
    ASSERT_EQ(create(b, "eu1").status, 201);
    EXPECT_TRUE(follows(1, b, 0));
    // The adds' repairs, queued, may come after the creates and hold the tenant a moment.
    ASSERT_EQ(shard_past_repair("DELETE", "/_shard/tenants/" + b).status, 204);
    EXPECT_EQ(copy_on(1, b).status, 404) << "the replica went with the tenant";
    EXPECT_EQ(copy_on(0, b).status, 404);

    EXPECT_TRUE(follows(1, a, 0)) << copy_on(1, a).body;
    Reply r = shard("DELETE", "/_shard/nodes/eu2");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"unreplicated\":[\"" + a + "\"]"), std::string::npos) << r.body;
    // Its copy there goes with it: no row names it, and it would follow eu1 for ever.
    EXPECT_EQ(copy_on(1, a).status, 404) << copy_on(1, a).body;
    Reply got = shard("GET", "/_shard/tenants/" + a);
    EXPECT_FALSE(Json(got.body).has("replica")) << got.body;
    // Said so, or, once the repair the removal runs has looked, that no node is left to keep it.
    const std::string why = Json(got.body).text("unreplicated");
    EXPECT_TRUE(why.find("`eu2` was removed") != std::string::npos ||
                why == "there is no other node in region `eu` to keep it")
        << got.body;
}

// A node removed while its tenants' primary is down keeps its copies: they may be the only data
// left (no failover ran). Only a copy whose primary answers, holding the tenant, is deleted.
TEST_F(Copies, ANodeRemovedKeepsItsCopiesWhereThePrimaryDoesNotAnswer) {
    const std::string t = tenant("x");
    ASSERT_NO_FATAL_FAILURE(two_nodes_and_a_replica(t));
    ASSERT_TRUE(eventually([&] { return follows(1, t, 0); })) << copy_on(1, t).body;
    const uint16_t port = nodes_->port(0);
    nodes_->procs[0]->kill(SIGKILL);
    Reply r = shard("DELETE", "/_shard/nodes/n2");
    nodes_->start(0, port);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(copy_on(1, t).status, 200) << "the copy of a tenant whose primary was down went";
}

// Under --replicas, a node removed that kept tenants' copies (here a pair's standby) runs a
// repair, which gives each of them a replica on a node left. Before, they stayed without a copy
// until a repair was asked for.
TEST_F(Copies, ANodeRemovedRunsARepairForTheTenantsWhoseCopyItKept) {
    const std::string t = tenant("x");
    std::string replica;
    ASSERT_NO_FATAL_FAILURE(four_nodes_and_a_replica(t, replica));
    const int standby = index_of(replica) == 1 ? 2 : 1;  // n3 or n2, not the replica's node
    const std::string standby_name = "n" + std::to_string(standby + 1);
    ASSERT_NO_FATAL_FAILURE(paired_and_loaded(t, standby_name));
    Reply removed = shard("DELETE", "/_shard/nodes/" + standby_name);
    ASSERT_EQ(removed.status, 200) << removed.body;
    EXPECT_NE(removed.body.find(t), std::string::npos) << removed.body;
    std::string copy;
    EXPECT_TRUE(eventually([&] {
        copy = recorded_copy(t);
        return !copy.empty() && copy != standby_name;
    })) << "no replica placed after the removal: "
        << shard("GET", "/_shard/tenants/" + t).body;
    if (!copy.empty() && copy != standby_name) {
        EXPECT_TRUE(eventually([&] { return follows(index_of(copy), t, 0); }))
            << copy_on(index_of(copy), t).body;
    }
}

class Repair : public ClusterTest<3> {};

// Case 54: a tenant with no replica record, and a node holding a stale copy of it: the repair
// has that copy follow the primary, though another node ranks first by name.
TEST_F(Repair, PrefersANodeHoldingACopy) {
    start_router();  // no --replicas: nothing is placed until the repair is asked for
    ASSERT_EQ(add(0, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(1, "eu2", "eu", "ams").status, 201);
    ASSERT_EQ(add(2, "eu3", "eu", "ams").status, 201);
    const std::string t = tenant("acme");
    Reply r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_FALSE(Json(r.body).has("replica_on")) << r.body;
    EXPECT_FALSE(Json(r.body).has("unreplicated")) << "none was asked for: " << r.body;
    ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"a"})").status, 201);
    // A stale copy on eu3: a file of the name the router never placed there.
    ASSERT_EQ(node(2, "PUT", "/_admin/tenants/" + t).status, 201);

    r = shard("POST", "/_shard/replicas");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("{\"tenant\":\"" + t + "\",\"replica\":\"eu3\"}"), std::string::npos)
        << r.body;
    // The follow was taken before the repair answered; the copy reopens as a replica on its own.
    EXPECT_TRUE(eventually([&] { return follows(2, t, 0); })) << copy_on(2, t).body;
    EXPECT_EQ(copy_on(1, t).status, 404);
    EXPECT_TRUE(eventually([&] { return count_on(2, t) == R"({"count":1})"; }))
        << "the stale copy took the primary's rows: " << count_on(2, t);
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("replica"), "eu3");
    // Asked again, there is nothing left to do.
    r = shard("POST", "/_shard/replicas", R"({"region":"eu"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(R"("replicated":[])"), std::string::npos) << r.body;
    EXPECT_EQ(shard("POST", "/_shard/replicas", R"({"zone":"x"})").status, 400);
    // A region no node is in: 404, not an answer of nothing to do.
    r = shard("POST", "/_shard/replicas", R"({"region":"zz"})");
    EXPECT_EQ(r.status, 404) << r.body;
    EXPECT_NE(r.body.find("no region `zz`"), std::string::npos) << r.body;
}

// §8.3 step 4: a file of another lineage put in the primary's place, which the copy following
// it takes too: the repair records the new lineage, since both report it.
TEST_F(Repair, LearnsTheLineageItsPrimaryAndACopyReport) {
    start_router();
    ASSERT_EQ(add(0, "n1").status, 201);
    ASSERT_EQ(add(1, "n2").status, 201);
    const std::string t = tenant("acme");
    Reply r = create(t, "n1");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string was = Json(shard("GET", "/_shard/tenants/" + t).body).text("lineage");
    ASSERT_EQ(was.size(), 16u);
    r = shard("POST", "/_shard/replicas");
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_TRUE(follows(1, t, 0)) << copy_on(1, t).body;

    // Made again under the name on n1 behind the router's back: a new lineage.
    ASSERT_EQ(node(0, "DELETE", "/_admin/tenants/" + t).status, 204);
    ASSERT_EQ(node(0, "PUT", "/_admin/tenants/" + t).status, 201);
    const std::string now = Json(copy_on(0, t).body).text("lineage");
    ASSERT_NE(now, was);
    ASSERT_TRUE(eventually([&] { return Json(copy_on(1, t).body).text("lineage") == now; }))
        << "the copy takes the new file's image: " << copy_on(1, t).body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("lineage"), was);

    r = shard("POST", "/_shard/replicas");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("lineage"), now);
}

// §8.3 step 3: a tenant whose primary does not answer is given no replica (one made now could
// follow a node that is gone) and is said to be looked at again; asked once it answers, it gets
// one.
TEST_F(Repair, SilentPrimaryGetsNoneUntilItAnswers) {
    start_router();
    ASSERT_EQ(add(0, "n1").status, 201);
    ASSERT_EQ(add(1, "n2").status, 201);
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "n1").status, 201);
    const uint16_t port = nodes_->port(0);
    nodes_->procs[0]->kill(SIGKILL);
    Reply r = shard("POST", "/_shard/replicas");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(R"("replicated":[],"failed":[],"unreplicated":[{"tenant":")" + t +
                          R"(","why":"its node `n1` did not answer)"),
              std::string::npos)
        << r.body;
    EXPECT_EQ(copy_on(1, t).status, 404);

    nodes_->start(0, port);
    r = shard("POST", "/_shard/replicas");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("{\"tenant\":\"" + t + "\",\"replica\":\"n2\"}"), std::string::npos)
        << r.body;
    EXPECT_TRUE(follows(1, t, 0)) << copy_on(1, t).body;
}

// A node that does not answer the survey is no place for a replica: the repair after a failover
// found the failed node first by name and waited its whole --upstream-timeout on it.
TEST_F(Repair, ANodeSilentInTheSurveyIsNoPlaceForAReplica) {
    start_router({"--upstream-timeout", "3"});
    ASSERT_EQ(add(0, "n1").status, 201);
    ASSERT_EQ(add(1, "n2").status, 201);  // first by name among the others
    ASSERT_EQ(add(2, "n3").status, 201);
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "n1").status, 201);
    nodes_->procs[1]->signal(SIGSTOP);  // n2 lost: it answers nothing (TearDown continues it)
    Reply r = shard("POST", "/_shard/replicas");
    nodes_->procs[1]->signal(SIGCONT);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("{\"tenant\":\"" + t + "\",\"replica\":\"n3\"}"), std::string::npos)
        << r.body;
    // The router's lines reach stderr from a queue; its stop writes every line queued.
    client_.reset();
    ASSERT_EQ(router_->kill(SIGTERM), 0);
    EXPECT_EQ(read_file(dir_.path() + "/router.err").find("got no replica on `n2`"),
              std::string::npos)
        << "the repair tried the silent node first: " << read_file(dir_.path() + "/router.err");
    EXPECT_TRUE(follows(2, t, 0)) << copy_on(2, t).body;
}

}  // namespace
}  // namespace fenec::test::copies_test
