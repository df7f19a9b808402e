// test/server/node/group_commit_node_test.cc: the node's writes under --sync always (the
// default), in process on the fault-injecting file system (fault_node_fixture.h), proving the
// group commit of node-http.md §1.1 / engine.md §5.4 as a client meets it:
// - writes from more connections than the node has workers share fsyncs beyond the workers (a
//   worker no longer waits through an fsync: answer_write_durable), every one is answered 201,
//   and every one answered is there after a power cut;
// - a failed fsync answers every write waiting on it 500 "outcome":"unknown", never 201, and
//   none of them is there after a power cut;
// - under --sync-scope fs, writes to many tenants at once are made durable by flushes of the
//   whole file system, each covering several tenants, and every one answered is there after a
//   power cut.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test/server/node/fault_node_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::group_commit_node_test {
namespace {

// The tenant's seq as its description gives it (`"seq":n`).
uint64_t seq_of(const std::string& body) {
    const size_t at = body.find("\"seq\":");
    return at == std::string::npos ? 0 : std::stoull(body.substr(at + 6));
}

std::string count_body() { return R"J({"query":"get notes select count(*)"})J"; }

TEST_F(FaultFsNode, WritesFromMoreConnectionsThanWorkersShareFsyncsAndSurviveAPowerCut) {
    start();  // one loop, two pool workers (fault_node_fixture.h: workers = 1)
    create("acme");
    // Each fsync takes long enough that the writes of every connection arrive while it runs.
    fs_.set_sync_delay(std::chrono::milliseconds(5));
    constexpr int kConnections = 8;
    constexpr int kPerConnection = 8;
    constexpr int kWrites = kConnections * kPerConnection;
    const uint64_t syncs0 = fs_.syncs();
    std::vector<std::vector<int>> statuses(kConnections);
    std::vector<std::thread> threads;
    for (int c = 0; c < kConnections; ++c) {
        threads.emplace_back([&, c] {
            Client client(node_->port());
            for (int i = 0; i < kPerConnection; ++i) {
                auto r = client.request("POST", "/t/acme/c/notes",
                                        "{\"title\":\"c" + std::to_string(c) + "-" +
                                            std::to_string(i) + "\"}");
                statuses[c].push_back(r ? r->status : 0);
            }
        });
    }
    for (auto& t : threads) t.join();
    const uint64_t syncs = fs_.syncs() - syncs0;
    fs_.set_sync_delay(std::chrono::microseconds(0));
    for (int c = 0; c < kConnections; ++c) {
        ASSERT_EQ(statuses[c].size(), size_t(kPerConnection));
        for (int s : statuses[c]) EXPECT_EQ(s, 201) << "connection " << c;
    }
    // A worker waiting through each fsync lets at most two writes share one (two workers).
    EXPECT_LT(syncs, uint64_t(kWrites / 2)) << "the fsyncs were not shared beyond the workers";
    // Every write was answered after its fsync: a power cut keeps them all.
    fs_.crash(FaultFs::CrashMode::synced_only);
    stop();
    start();
    auto r = call("POST", "/t/acme/query", count_body());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(":" + std::to_string(kWrites) + "}"), std::string::npos) << r.body;
}

// A write answered after its fsync costs the worker pool one job, its landing: with no follower
// stream to wait for, the fsync's own thread answers it, where waking a worker for the answer
// cost each write a second job and a thread crossing.
TEST_F(FaultFsNode, ADurableWriteWithNoFollowerIsAnsweredWithoutASecondWorkerJob) {
    start();
    create("acme");
    auto jobs = [&] {
        return metric_value(call("GET", "/_metrics").body, "fenec_worker_jobs_total");
    };
    const uint64_t before = jobs();
    constexpr int kWrites = 40;
    for (int i = 0; i < kWrites; ++i) {
        auto r = put("acme", "t" + std::to_string(i));
        ASSERT_EQ(r.status, 200) << r.body;
        ASSERT_TRUE(r.header("Fenec-Seq").has_value());
    }
    EXPECT_EQ(jobs() - before, uint64_t(kWrites));  // /_metrics is answered on the loop
    // Answered after their fsync all the same: a power cut keeps every one.
    fs_.crash(FaultFs::CrashMode::synced_only);
    stop();
    start();
    auto r = call("POST", "/t/acme/query", count_body());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, ":" + std::to_string(kWrites) + "}")) << r.body;
}

TEST_F(FaultFsNode, AFailedFsyncAnswersEveryWriteWaitingOnItUnknown) {
    start();
    create("acme");
    const uint64_t seq0 = seq_of(describe("acme").body);
    fs_.stall_syncs(true);
    fs_.fail_sync(1, ENOSPC);
    constexpr int kWrites = 4;
    std::vector<int> statuses(kWrites);
    std::vector<std::string> bodies(kWrites);
    std::vector<std::thread> threads;
    for (int i = 0; i < kWrites; ++i) {
        threads.emplace_back([&, i] {
            Client client(node_->port());
            auto r = client.request("POST", "/t/acme/c/notes",
                                    "{\"title\":\"w" + std::to_string(i) + "\"}");
            statuses[i] = r ? r->status : 0;
            bodies[i] = r ? r->body : "";
        });
    }
    // All four landed (reads go on while the fsync is stalled), none answered yet.
    ASSERT_TRUE(fs_.wait_for_stalled_syncs(1, wait_default));
    ASSERT_TRUE(wait_until([&] { return seq_of(describe("acme").body) == seq0 + kWrites; }));
    fs_.release_syncs();
    for (auto& t : threads) t.join();
    for (int i = 0; i < kWrites; ++i) {
        EXPECT_EQ(statuses[i], 500) << bodies[i];
        EXPECT_TRUE(has(bodies[i], "\"outcome\":\"unknown\"")) << bodies[i];
    }
    fs_.crash(FaultFs::CrashMode::synced_only);
    stop();
    start();
    auto r = call("POST", "/t/acme/query", count_body());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, ":0}")) << r.body;
}

TEST_F(FaultFsNode, UnderSyncScopeFsWritesToManyTenantsShareFlushesAndSurviveAPowerCut) {
    options_ = [](node::NodeOptions& o) { o.sync_scope = node::NodeOptions::SyncScope::fs; };
    start();
    constexpr int kTenants = 4;
    for (int t = 0; t < kTenants; ++t) create("t" + std::to_string(t));
    // A round of one tenant is its own fsync, slowed so that the others' writes queue meanwhile
    // and the next round covers them together.
    fs_.set_sync_delay(std::chrono::milliseconds(5));
    constexpr int kConnections = 8;
    constexpr int kPerConnection = 8;
    const uint64_t flushes0 = fs_.sync_fses();
    std::vector<std::vector<int>> statuses(kConnections);
    std::vector<std::thread> threads;
    for (int c = 0; c < kConnections; ++c) {
        threads.emplace_back([&, c] {
            Client client(node_->port());
            const std::string target = "/t/t" + std::to_string(c % kTenants) + "/c/notes";
            for (int i = 0; i < kPerConnection; ++i) {
                auto r = client.request(
                    "POST", target,
                    "{\"title\":\"c" + std::to_string(c) + "-" + std::to_string(i) + "\"}");
                statuses[c].push_back(r ? r->status : 0);
            }
        });
    }
    for (auto& t : threads) t.join();
    fs_.set_sync_delay(std::chrono::microseconds(0));
    for (int c = 0; c < kConnections; ++c) {
        ASSERT_EQ(statuses[c].size(), size_t(kPerConnection));
        for (int s : statuses[c]) EXPECT_EQ(s, 201) << "connection " << c;
    }
    const std::string metrics = call("GET", "/_metrics").body;
    const uint64_t rounds = metric_value(metrics, "fenec_sync_group_rounds_total");
    const uint64_t covered = metric_value(metrics, "fenec_sync_group_tenants_total");
    EXPECT_GT(rounds, 0u) << metrics;
    EXPECT_GT(covered, rounds) << "no flush covered more than one tenant";
    EXPECT_GE(fs_.sync_fses() - flushes0, rounds);
    // Every write was answered after a flush or an fsync covered it: a power cut keeps them all.
    fs_.crash(FaultFs::CrashMode::synced_only);
    stop();
    start();
    for (int t = 0; t < kTenants; ++t) {
        auto r = call("POST", "/t/t" + std::to_string(t) + "/query", count_body());
        ASSERT_EQ(r.status, 200) << r.body;
        const int per_tenant = kConnections / kTenants * kPerConnection;
        EXPECT_TRUE(has(r.body, ":" + std::to_string(per_tenant) + "}")) << t << ": " << r.body;
    }
}

}  // namespace
}  // namespace fenec::test::group_commit_node_test
