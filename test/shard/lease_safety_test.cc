// test/shard/lease_safety_test.cc: the lease-safety checker (test/support/lease_check.h)
// run over a real failover on a lapsed lease, with real fenec-node and fenec-shard processes on
// loopback, clients writing to both nodes straight as a router that still believed either would.
// The other tests that fail over run the checker over their own writes (RecordedWrites).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "test/shard/cluster_fixture.h"
#include "test/shard/recorded_writes.h"

namespace fenec::test::lease_safety_test {
namespace {

using LeaseSafety = LeasedClusterTest<2>;

// The lease-safety checker over a lapse (test/support/lease_check.h): while n1 is stopped and its
// tenant failed over, a writer sends writes straight to both nodes, as a router that still
// believed either would, and pollers record each node's lease as it reports it. Every write
// acknowledged was acknowledged inside a lease naming the tenant, never by two nodes in
// overlapping lease time, and none is missing from the new primary afterwards.
TEST_F(LeaseSafety, NoTwoNodesAcknowledgeWritesInOverlappingLeases) {
    RecordedWrites rec(first_nodes(*nodes_, 2), true);
    start_router({"--auto-failover", "1"});
    const std::string t = tenant("ledger");
    ASSERT_NO_FATAL_FAILURE(pair_n1_n2_with(t));
    ASSERT_EQ(rec.write_at(router_->port(), t, "n1").status, 201);

    std::atomic<bool> done{false};
    std::vector<std::thread> writers;
    for (int i = 0; i < 2; ++i) {  // a writer per node: one stopped holds up only its own
        writers.emplace_back([&, i] {
            while (!done) rec.write_at(nodes_->port(i), t, "n" + std::to_string(i + 1));
        });
    }
    // Whatever an assertion below does, the writers end before the record does.
    struct Join {
        std::atomic<bool>& done;
        std::vector<std::thread>& threads;
        ~Join() {
            done = true;
            for (auto& th : threads) {
                if (th.joinable()) th.join();
            }
        }
    } join{done, writers};

    ASSERT_TRUE(eventually([&] { return rec.writes() >= 10; }));
    // The writes so far are seen inside n1's lease by a report asked after them before n1 is
    // cut (a poller starved under a sanitizer's load was seen to miss every such report, and the
    // checker then rightly found writes it could not place in any lease).
    ASSERT_TRUE(rec.await_report("n1", t));
    nodes_->procs[0]->signal(SIGSTOP);
    ASSERT_TRUE(eventually(
        [&] { return Json(shard("GET", "/_shard/tenants/" + t).body).text("node") == "n2"; },
        8000));
    const size_t before = rec.writes();
    ASSERT_TRUE(eventually([&] { return rec.writes() >= before + 10; }))
        << "n2 took no write after the failover";
    nodes_->procs[0]->signal(SIGCONT);
    done = true;
    for (auto& th : writers) th.join();  // the writes out to n1 while it was stopped answered

    EXPECT_GT(rec.leases(), 20u);
    EXPECT_EQ(rec.check({{t, nodes_->port(1)}}), "");  // n2, the new primary
}

}  // namespace
}  // namespace fenec::test::lease_safety_test
