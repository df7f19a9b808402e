// test/shard/lease_book_test.cc: the router's lease state for one node (shard/lease_book.h),
// driven by hand with made-up instants: grant numbers, the grant each acknowledges, when the
// tenant list rides along, and when a node has certainly lapsed (router.md §9.4–§9.7).
#include "shard/lease_book.h"

#include <gtest/gtest.h>

namespace fenec::shard::lease_book_test {
namespace {

constexpr int64_t ms = 1'000'000;  // ns
constexpr int64_t lease_ms = 1000;
constexpr int64_t lease_ns = lease_ms * ms;

GrantReply taken(bool took, bool ran, std::optional<uint64_t> list) {
    GrantReply r;
    r.kind = GrantReply::Kind::taken;
    r.took = took;
    r.ran = ran;
    r.list = list;
    return r;
}
GrantReply of_kind(GrantReply::Kind k) {
    GrantReply r;
    r.kind = k;
    return r;
}

GrantWire next(LeaseBook& b) {
    return b.next("0123456789abcdef/global", 2, "fedcba9876543210", lease_ms);
}

TEST(LeaseBook, GrantsAreNumberedByStartsAndAcknowledgeOnlyAnswersBackInTime) {
    LeaseBook b(/*starts=*/3, /*start_ns=*/0);
    GrantWire g1 = next(b);
    EXPECT_EQ(g1.grant, (uint64_t{3} << 32) + 1);
    EXPECT_EQ(g1.acked, 0u);  // nothing answered yet in this incarnation
    EXPECT_EQ(g1.authority, "0123456789abcdef/global");
    EXPECT_EQ(g1.term, 2);
    EXPECT_EQ(g1.lease_ms, lease_ms);
    EXPECT_TRUE(b.out());
    b.answered(taken(true, false, g1.list), 10 * ms);
    EXPECT_FALSE(b.out());
    GrantWire g2 = next(b);
    EXPECT_EQ(g2.grant, g1.grant + 1);
    EXPECT_EQ(g2.acked, g1.grant);
    b.answered(of_kind(GrantReply::Kind::silent), 0);  // not back in time: acknowledged by none
    GrantWire g3 = next(b);
    EXPECT_EQ(g3.acked, g1.grant);
    b.answered(taken(true, true, g3.list), 700 * ms);
    EXPECT_EQ(next(b).acked, g3.grant);
}

TEST(LeaseBook, TheListRidesUntilTheNodeHoldsItAndAfterANotTaken) {
    LeaseBook b(1, 0);
    b.set_tenants({"beta", "acme", "acme"});
    GrantWire g1 = next(b);
    ASSERT_TRUE(g1.tenants.has_value());
    EXPECT_EQ(*g1.tenants, (std::vector<std::string>{"acme", "beta"}));
    EXPECT_EQ(g1.list, g1.grant);  // numbered by the grant that first carries it
    b.answered(of_kind(GrantReply::Kind::silent), 0);
    GrantWire g2 = next(b);
    EXPECT_TRUE(g2.tenants.has_value());  // not yet held: it rides again, same number
    EXPECT_EQ(g2.list, g1.grant);
    b.answered(taken(true, false, g1.grant), 5 * ms);
    GrantWire g3 = next(b);
    EXPECT_FALSE(g3.tenants.has_value());  // held now
    EXPECT_EQ(g3.list, g1.grant);
    // Not newer than the lease the node holds: the next grant goes at once, with the list.
    GrantEffect e = b.answered(taken(false, false, g1.grant), 6 * ms);
    EXPECT_TRUE(e.again_now);
    EXPECT_EQ(e.outcome, "not_taken");
    GrantWire g4 = next(b);
    EXPECT_TRUE(g4.tenants.has_value());
    EXPECT_EQ(g4.acked, g3.grant);  // a took:false answer is counted and acknowledged
    // A list the node does not hold (it restarted): sent at once.
    e = b.answered(taken(false, false, std::nullopt), 7 * ms);
    EXPECT_EQ(e.outcome, "list_sent");
    EXPECT_TRUE(e.again_now);
    EXPECT_TRUE(next(b).tenants.has_value());
    b.answered(taken(true, true, g1.grant), 8 * ms);
    // A new list is numbered by the next grant and carried.
    b.set_tenants({"acme"});
    GrantWire g6 = next(b);
    EXPECT_EQ(g6.list, g6.grant);
    EXPECT_EQ(*g6.tenants, std::vector<std::string>{"acme"});
    // The same list again is no change.
    b.answered(taken(true, true, g6.grant), 9 * ms);
    b.set_tenants({"acme"});
    EXPECT_FALSE(next(b).tenants.has_value());
}

TEST(LeaseBook, ATakenListWithoutALeaseAsksForTheAcknowledgingGrantAtOnce) {
    LeaseBook b(1, 0);
    next(b);
    GrantEffect e = b.answered(taken(true, false, std::nullopt), ms);
    EXPECT_EQ(e.outcome, "list_only");
    EXPECT_TRUE(e.again_now);
    next(b);
    e = b.answered(taken(true, true, std::nullopt), 2 * ms);
    EXPECT_EQ(e.outcome, "ran");
    EXPECT_FALSE(e.again_now);
    EXPECT_TRUE(b.ran());
}

TEST(LeaseBook, ALapseIsJudgedFromTheLastCountedAnswerPlusATenth) {
    LeaseBook b(1, /*start_ns=*/100 * ms);  // leasing began: counted as answered then
    EXPECT_FALSE(b.lapsed(100 * ms + 1100 * ms, lease_ns, 0));
    EXPECT_TRUE(b.lapsed(100 * ms + 1100 * ms + 1, lease_ns, 0));
    next(b);
    b.answered(taken(true, true, std::nullopt), 500 * ms);
    EXPECT_FALSE(b.lapsed(1600 * ms, lease_ns, 0));
    EXPECT_TRUE(b.lapsed(1600 * ms + 1, lease_ns, 0));
    // A grant out may still come back and be counted: no lapse while it is out.
    next(b);
    EXPECT_FALSE(b.lapsed(5000 * ms, lease_ns, 0));
    b.answered(of_kind(GrantReply::Kind::silent), 0);  // given up on: the clock ran on
    EXPECT_TRUE(b.lapsed(5000 * ms, lease_ns, 0));
}

TEST(LeaseBook, UntilItRunsOneOfOurLeasesANodeIsCountedByTheRecord) {
    const int64_t record_ns = 5000 * ms;  // the router before leased 5 s
    LeaseBook b(2, 0);
    next(b);
    b.answered(taken(true, false, std::nullopt), 0);  // list only: runs nothing
    EXPECT_FALSE(b.lapsed(5500 * ms, lease_ns, record_ns));
    EXPECT_TRUE(b.lapsed(5500 * ms + 1, lease_ns, record_ns));
    next(b);
    b.answered(taken(true, true, std::nullopt), 0);  // it ran ours: the longer one was cut
    EXPECT_TRUE(b.lapsed(1100 * ms + 1, lease_ns, record_ns));
}

TEST(LeaseBook, AFencedNodeOrOneWithoutLeasesIsNeverFailedOver) {
    LeaseBook b(1, 0);
    next(b);
    GrantEffect e = b.answered(of_kind(GrantReply::Kind::fenced), ms);
    EXPECT_TRUE(e.first_fence);
    EXPECT_EQ(e.outcome, "fenced");
    EXPECT_EQ(b.standing(), LeaseStanding::fenced);
    EXPECT_FALSE(b.lapsed(100'000 * ms, lease_ns, 0));
    next(b);
    EXPECT_FALSE(b.answered(of_kind(GrantReply::Kind::fenced), ms).first_fence);  // logged once
    next(b);
    e = b.answered(of_kind(GrantReply::Kind::takes_none), ms);
    EXPECT_TRUE(e.first_takes_none);
    EXPECT_FALSE(b.lapsed(100'000 * ms, lease_ns, 0));
    // Taking grants again (restarted with --lease), it is judged again.
    next(b);
    b.answered(taken(true, false, std::nullopt), 200'000 * ms);
    EXPECT_EQ(b.standing(), LeaseStanding::leasing);
    EXPECT_TRUE(b.lapsed(200'000 * ms + 1100 * ms + 1, lease_ns, 0));
}

TEST(LeaseBook, ANodeFailedOverReturnsWithItsFirstCountedAnswer) {
    LeaseBook b(1, 0);
    b.mark_failed_over();
    next(b);
    EXPECT_FALSE(b.answered(of_kind(GrantReply::Kind::silent), 0).returned);
    EXPECT_TRUE(b.failed_over());
    next(b);
    EXPECT_TRUE(b.answered(taken(true, false, std::nullopt), 5 * ms).returned);
    EXPECT_FALSE(b.failed_over());
}

TEST(LeaseBook, TheGrantBodyIsTheNodesWireFormat) {
    GrantWire g;
    g.authority = "9c1e5a0b7d3f2e11/eu";
    g.term = 3;
    g.history = "4be0c1d2e3f40516";
    g.grant = 30064771077;
    g.acked = 30064771076;
    g.lease_ms = 5000;
    g.list = 30064771070;
    g.tenants = std::vector<std::string>{"acme", "globex"};
    EXPECT_EQ(grant_body(g),
              R"({"authority":"9c1e5a0b7d3f2e11/eu","term":3,"history":"4be0c1d2e3f40516",)"
              R"("grant":30064771077,"acked":30064771076,"lease_ms":5000,"list":30064771070,)"
              R"("tenants":["acme","globex"]})");
    g.tenants.reset();
    EXPECT_EQ(grant_body(g).find("tenants"), std::string::npos);
}

}  // namespace
}  // namespace fenec::shard::lease_book_test
