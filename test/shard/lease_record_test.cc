// test/shard/lease_record_test.cc: the longest-lease record across a router's restart
// (router.md §9.7, §18 case 68), over real processes. A router that led with a 5 s lease and
// comes back with 1 s cannot know what its last grants gave: a node it granted 5 s may still be
// writing for up to 5 s. The record in its directory says so, and the router counts every node
// as answered at its start and judges a lapse against the record's 5 s, not its own 1 s, until
// it has led 1.1 × 5 s. The writes go through RecordedWrites, and the lease-safety checker is
// run over them at the end. Network traffic goes to 127.0.0.1 only.
#include <gtest/gtest.h>

#include <chrono>

#include "test/shard/cluster_fixture.h"
#include "test/shard/recorded_writes.h"

namespace fenec::test::lease_record_test {
namespace {

using namespace std::chrono_literals;

using LeaseRecordAcrossARestart = LeasedClusterTest<2>;

TEST_F(LeaseRecordAcrossARestart, AShorterLeaseAfterARestartIsHonouredThroughTheRecord) {
    RecordedWrites rec(first_nodes(*nodes_, 2), true);
    start_router({"--auto-failover", "5"});
    const std::string t = tenant("record");
    ASSERT_NO_FATAL_FAILURE(pair_n1_n2_with(t));
    // Taken on n1 under a grant of 5 s.
    ASSERT_EQ(rec.write_at(router_->port(), t, "n1").status, 201);
    // n2's copy has the row (not only heard n1: a copy still taking its image lacks it).
    ASSERT_TRUE(eventually([&] { return follows(1, t, 0) && count_on(1, t) == R"({"count":1})"; }));
    ASSERT_TRUE(rec.await_report("n1", t));  // the write's lease seen before n1 is cut

    client_.reset();
    router_.reset();                    // R gone; n1's 5 s lease runs on
    nodes_->procs[0]->signal(SIGSTOP);  // and n1 is cut before the new R reaches it
    const auto restarted = std::chrono::steady_clock::now();
    start_router({"--auto-failover", "1"});
    ASSERT_TRUE(eventually(
        [&] { return Json(shard("GET", "/_shard/tenants/" + t).body).text("node") == "n2"; },
        15000))
        << shard("GET", "/_shard/tenants/" + t).body;
    const auto took = std::chrono::steady_clock::now() - restarted;
    // 1.1 × the record's 5 s from the start, not 1.1 × the new 1 s.
    EXPECT_GE(took, 5500ms);
    const Reply after = rec.write_at(router_->port(), t, "n2");
    EXPECT_EQ(after.status, 201) << after.body << "\n" << shard("GET", "/_shard/tenants/" + t).body
                                 << "\n" << copy_on(1, t).body;
    EXPECT_EQ(rec.check({{t, nodes_->port(1)}}), "");
}

}  // namespace
}  // namespace fenec::test::lease_record_test
