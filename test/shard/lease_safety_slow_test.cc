// test/shard/lease_safety_slow_test.cc: the lease-safety checker (test/support/lease_check.h)
// run over a real failover on a lapsed lease, with real fenec-node and fenec-shard processes on
// loopback. Slow label (`make test-slow`), not the unit suite: on a loaded machine it finds, in
// some runs, a write the old primary acknowledged around the moment it was stopped that the
// promoted copy does not hold (see docs/INVARIANTS.md, "not yet holding"). It stays here, failing
// when it finds that, until the cause is fixed; it is not a test that can pass by skipping.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "test/shard/cluster_fixture.h"
#include "test/support/lease_check.h"

namespace fenec::test::lease_safety_slow_test {
namespace {

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

using LeaseSafety = LeasedClusterTest<2>;

// The lease-safety checker over a lapse (test/support/lease_check.h): while n1 is stopped and its
// tenant failed over, a writer sends writes straight to both nodes, as a router that still
// believed either would, and pollers record each node's lease as it reports it. Every write
// acknowledged was acknowledged inside a lease naming the tenant, never by two nodes in
// overlapping lease time, and none is missing from the new primary afterwards.
TEST_F(LeaseSafety, NoTwoNodesAcknowledgeWritesInOverlappingLeases) {
    start_router({"--auto-failover", "1"});
    const std::string t = tenant("ledger");
    ASSERT_EQ(add(0, "n1").status, 201);
    ASSERT_EQ(add(1, "n2").status, 201);
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n1", R"({"standby":"n2"})").status, 200);
    ASSERT_EQ(create(t, "n1").status, 201);
    ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"first"})").status, 201);

    LeaseLedger ledger;
    std::atomic<bool> done{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
        threads.emplace_back([&, i] {
            const std::string name = "n" + std::to_string(i + 1);
            while (!done) {
                LeaseReport r;
                r.node = name;
                r.asked_ns = now_ns();
                Client c(nodes_->port(i), 3000);
                auto got = c.request("GET", "/_admin/lease", {}, bearer(node_admin_token(i)));
                r.answered_ns = now_ns();
                Json j(got ? got->body : "");
                int64_t left = 0;
                simdjson::dom::array names;
                if (got && got->status == 200 && !j.doc["left_ms"].get_int64().get(left) &&
                    !j.doc["tenants"].get_array().get(names)) {
                    r.left_ms = left;
                    for (auto n : names) r.tenants.emplace_back(std::string_view(n.get_string()));
                    ledger.lease(std::move(r));
                }
                // Often: a write acknowledged under a renewal that no report shows before the
                // node is stopped is outside every reported lease (the checker's first rule).
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
            }
        });
    }
    for (int i = 0; i < 2; ++i) {  // a writer per node: one stopped holds up only its own
        threads.emplace_back([&, i] {
            for (int k = 0; !done; ++k) {
                AckedWrite w;
                w.tenant = t;
                w.node = "n" + std::to_string(i + 1);
                w.key = w.node + "-" + std::to_string(k);
                w.sent_ns = now_ns();
                Client c(nodes_->port(i), 3000);
                auto got = c.request("POST", "/t/" + t + "/c/notes",
                                     "{\"title\":\"" + w.key + "\"}", bearer(kData));
                w.acked_ns = now_ns();
                Json j(got ? got->body : "");
                simdjson::dom::array ids;
                if (got && got->status == 201 && !j.doc["ids"].get_array().get(ids)) {
                    w.id = int64_t(ids.at(0));
                    ledger.write(std::move(w));
                }
            }
        });
    }
    // Whatever an assertion below does, the threads end before the ledger does.
    struct Join {
        std::atomic<bool>& done;
        std::vector<std::thread>& threads;
        ~Join() {
            done = true;
            for (auto& th : threads) {
                if (th.joinable()) th.join();
            }
        }
    } join{done, threads};

    ASSERT_TRUE(eventually([&] { return ledger.writes() >= 10; }));
    nodes_->procs[0]->signal(SIGSTOP);
    ASSERT_TRUE(eventually(
        [&] { return Json(shard("GET", "/_shard/tenants/" + t).body).text("node") == "n2"; },
        8000));
    const size_t before = ledger.writes();
    ASSERT_TRUE(eventually([&] { return ledger.writes() >= before + 10; }))
        << "n2 took no write after the failover";
    nodes_->procs[0]->signal(SIGCONT);
    done = true;
    for (auto& th : threads) th.join();  // the writes out to n1 while it was stopped answered

    // Afterwards: the rows n2, the new primary, holds.
    FinalRows final;
    const Reply held = node(1, "GET", "/t/" + t + "/c/notes", {}, kData);
    Json rows(held.body);
    simdjson::dom::array list;  // the collection's rows, an array
    ASSERT_TRUE(rows.ok && !rows.doc.get_array().get(list)) << held.status << " " << held.body;
    for (auto row : list) {
        final[t][Json::text(row, "title")] = int64_t(row["_id"]);
    }
    const std::vector<std::string> violations = ledger.check(final);
    std::string said;
    for (const std::string& v : violations) said += v + "\n";
    EXPECT_TRUE(violations.empty()) << said;
    EXPECT_GT(ledger.leases(), 20u);
}

}  // namespace
}  // namespace fenec::test::lease_safety_slow_test
