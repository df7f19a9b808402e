// test/shard/lease_check_test.cc: the lease-safety checker (test/support/lease_check.h) on
// records made up by hand: a safe failover passes; a node that writes past its lease, two nodes
// holding one tenant at once, a lost write and a write whose id changed are each named.
#include "test/support/lease_check.h"

#include <gtest/gtest.h>

namespace fenec::test::lease_check_test {
namespace {

constexpr int64_t ms = 1'000'000;

LeaseReport report(const std::string& node, int64_t at_ms, int64_t left_ms,
                   std::vector<std::string> tenants) {
    return {node, at_ms * ms, at_ms * ms + ms / 2, left_ms, std::move(tenants), std::nullopt};
}
AckedWrite acked(const std::string& node, int64_t id, const std::string& key, int64_t at_ms) {
    return {"acme", node, id, key, at_ms * ms - ms, at_ms * ms};
}

// n1 leases acme for 1 s, renewed at 0, 300 and 600 ms, then is cut: its lease ends at 1600 ms.
// n2 is promoted 1.1 leases after n1's last answer and leased from 1800 ms.
void safe_failover(LeaseLedger& l) {
    for (int64_t t = 0; t <= 1600; t += 20) {
        l.lease(report("n1", t, t <= 600 ? 1000 : std::max<int64_t>(0, 1600 - t), {"acme"}));
        l.lease(report("n2", t, 0, {}));
    }
    for (int64_t t = 1620; t <= 3000; t += 20) {
        l.lease(report("n1", t, 0, {}));
        l.lease(report("n2", t, t < 1800 ? 0 : 1000,
                       t < 1800 ? std::vector<std::string>{} : std::vector<std::string>{"acme"}));
    }
    l.write(acked("n1", 1, "w1", 100));
    l.write(acked("n1", 2, "w2", 1500));
    l.write(acked("n2", 3, "w3", 1900));
}

TEST(LeaseCheck, ASafeFailoverPasses) {
    LeaseLedger l;
    safe_failover(l);
    const auto v = l.check({{"acme", {{"w1", 1}, {"w2", 2}, {"w3", 3}}}});
    EXPECT_TRUE(v.empty()) << v.front();
    EXPECT_EQ(l.writes(), 3u);
}

TEST(LeaseCheck, ANodeThatIgnoresItsLeaseIsNamed) {
    LeaseLedger l;
    safe_failover(l);
    l.write(acked("n1", 4, "w4", 2000));  // n1 woke and wrote with no lease
    const auto v = l.check({{"acme", {{"w1", 1}, {"w2", 2}, {"w3", 3}, {"w4", 4}}}});
    ASSERT_EQ(v.size(), 1u);
    EXPECT_NE(v[0].find("node `n1` acknowledged write w4"), std::string::npos) << v[0];
    EXPECT_NE(v[0].find("outside any lease"), std::string::npos) << v[0];
}

TEST(LeaseCheck, TwoNodesLeasingOneTenantAtOnceAreNamed) {
    LeaseLedger l;
    safe_failover(l);
    l.lease(report("n2", 1500, 1000, {"acme"}));  // n2 granted while n1's lease still ran
    const auto v = l.check({{"acme", {{"w1", 1}, {"w2", 2}, {"w3", 3}}}});
    ASSERT_EQ(v.size(), 1u);
    EXPECT_NE(v[0].find("nodes `n1` and `n2` both held a lease"), std::string::npos) << v[0];
}

TEST(LeaseCheck, ALostWriteAndAMovedIdAreNamed) {
    LeaseLedger l;
    safe_failover(l);
    const auto v = l.check({{"acme", {{"w1", 1}, {"w3", 2}}}});
    ASSERT_EQ(v.size(), 2u);
    EXPECT_NE(v[0].find("write w2 acknowledged by `n1`"), std::string::npos) << v[0];
    EXPECT_NE(v[0].find("is missing"), std::string::npos) << v[0];
    EXPECT_NE(v[1].find("write w3 was acknowledged as id 3 and is id 2"), std::string::npos)
        << v[1];
}

// A write n1 checked inside its lease and answered just before it was stopped: the answer
// arrives when n1 is woken, long after the lease ended, and is no write past the lease.
TEST(LeaseCheck, AnAnswerHeldByAStoppedNodePastItsLeaseIsNotNamed) {
    LeaseLedger l;
    safe_failover(l);
    AckedWrite w = acked("n1", 4, "w4", 2700);
    w.sent_ns = 1590 * ms;  // sent inside the lease, which ends at 1600 ms
    l.write(std::move(w));
    const auto v = l.check({{"acme", {{"w1", 1}, {"w2", 2}, {"w3", 3}, {"w4", 4}}}});
    EXPECT_TRUE(v.empty()) << v.front();
}

TEST(LeaseCheck, ALeaseBegunJustAfterAPollStillCoversItsWrites) {
    LeaseLedger l;
    l.lease(report("n1", 0, 0, {}));
    l.write(acked("n1", 1, "w1", 10));  // granted at 5 ms, written at 10, first seen at 20
    l.lease(report("n1", 20, 990, {"acme"}));
    EXPECT_TRUE(l.check({{"acme", {{"w1", 1}}}}).empty());
}

// A poll slow to answer took its view before the grant naming acme and answered after a write
// under that grant (a loaded machine: FailoverOnLease.ALapsedLeaseFailsTheNodeOver): the next
// report, naming acme, still covers the write, its lease no earlier than the slow poll's asking.
TEST(LeaseCheck, APollSlowToAnswerDoesNotHideALeaseBegunAfterItsView) {
    LeaseLedger l;
    l.lease(report("n1", 0, 0, {}));
    l.lease({"n1", 20 * ms, 56 * ms, 0, {}, std::nullopt});  // asked at 20 ms, its view then,
                                                             // answered at 56
    l.write(acked("n1", 1, "w1", 47));  // granted at 40 ms, written at 46 to 47
    l.lease(report("n1", 80, 960, {"acme"}));
    const auto v = l.check({{"acme", {{"w1", 1}}}});
    EXPECT_TRUE(v.empty()) << v.front();
}

// Over nodes that take no lease (a failover by hand), writes are not held to leases none
// reported; a lost one is still named.
TEST(LeaseCheck, OverNodesWithoutLeasesOnlyALostWriteIsNamed) {
    LeaseLedger l(false);
    l.write(acked("n1", 1, "w1", 100));
    l.write(acked("n2", 2, "w2", 200));
    EXPECT_TRUE(l.check({{"acme", {{"w1", 1}, {"w2", 2}}}}).empty());
    const auto v = l.check({{"acme", {{"w2", 2}}}});
    ASSERT_EQ(v.size(), 1u);
    EXPECT_NE(v[0].find("write w1 acknowledged by `n1`"), std::string::npos) << v[0];
    // The same writes, leases taken and none reported: both outside any lease.
    LeaseLedger leased;
    leased.write(acked("n1", 1, "w1", 100));
    EXPECT_EQ(leased.check({{"acme", {{"w1", 1}}}}).size(), 1u);
}

std::string all(const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& line : v) out += line + "\n";
    return out;
}

// A move of acme from n1 to n2 (both up throughout, 1 s leases renewed every 300 ms, polled
// every 20 ms): n1's lease names acme under list 1 until the release's grant at `released_ms`
// takes list 2 without it; n2 is granted acme under its list 2 at `granted_ms`. The move was
// asked at 100 ms. Writes: n1's before the move, n2's after its grant.
void a_move(LeaseLedger& l, int64_t released_ms, int64_t granted_ms, bool declared = true) {
    auto lease = [](const std::string& node, int64_t at, int64_t left, std::vector<std::string> t,
                    uint64_t list) {
        LeaseReport r = report(node, at, left, std::move(t));
        r.list = list;
        return r;
    };
    for (int64_t t = 0; t <= 2000; t += 20) {
        const int64_t left = 1000 - t % 300;
        l.lease(t < released_ms ? lease("n1", t, left, {"acme", "zeta"}, 1)
                                : lease("n1", t, left, {"zeta"}, 2));
        l.lease(t < granted_ms ? lease("n2", t, left, {"beta"}, 1)
                               : lease("n2", t, left, {"acme", "beta"}, 2));
    }
    if (declared) l.moved("acme", "n1", 100 * ms);
    l.write(acked("n1", 1, "w1", 50));
    l.write(acked("n2", 2, "w2", granted_ms + 30));
}

// The release's grant dropped acme from n1 (seen by the poll at 500 ms) before n2's grant named
// it (seen at 520): no two leases held it at once, though n1's last report naming it had
// 820 ms left.
TEST(LeaseCheck, AMoveWhoseSourceWasReleasedBeforeItsTargetWasGrantedPasses) {
    LeaseLedger l;
    a_move(l, 500, 520);
    const auto v = l.check({{"acme", {{"w1", 1}, {"w2", 2}}}});
    EXPECT_TRUE(v.empty()) << v.front();
}

// The same move undeclared: nothing tells the checker n1's lease could end before it ran out, and
// the overlap is named.
TEST(LeaseCheck, AnUndeclaredMoveIsHeldToItsSourcesWholeLease) {
    LeaseLedger l;
    a_move(l, 500, 520, false);
    const auto v = l.check({{"acme", {{"w1", 1}, {"w2", 2}}}});
    ASSERT_EQ(v.size(), 1u) << all(v);
    EXPECT_NE(v[0].find("nodes `n1` and `n2` both held a lease naming it"), std::string::npos)
        << v[0];
}

// n2 granted acme at 400 ms while n1, polled since, still held it under the list that named it
// until 500: the overlap (400 to 480, n1's last report naming it asked then) is named, the move
// declared or not.
TEST(LeaseCheck, AMoveWhoseTargetWasGrantedBeforeItsSourceWasReleasedIsNamed) {
    LeaseLedger l;
    a_move(l, 500, 400);
    const auto v = l.check({{"acme", {{"w1", 1}, {"w2", 2}}}});
    ASSERT_EQ(v.size(), 1u) << all(v);
    EXPECT_NE(v[0].find("nodes `n1` and `n2` both held a lease naming it at 400 ms"),
              std::string::npos)
        << v[0];
}

}  // namespace
}  // namespace fenec::test::lease_check_test
