// test/server/node/group_commit_node_test.cc: the node's writes under --sync always (the
// default), in process on the fault-injecting file system (fault_node_fixture.h), proving the
// group commit of node-http.md §1.1 / engine.md §5.4 as a client meets it:
// - writes from more connections than the node has workers share fsyncs beyond the workers (a
//   worker no longer waits through an fsync: answer_write_durable), every one is answered 201,
//   and every one answered is there after a power cut;
// - a small REST write is landed on the event loop, no worker job, and one that finds the
//   tenant's lock held (by a reader or a block) goes to a worker while the loop goes on;
// - a failed fsync answers every write waiting on it 500 "outcome":"unknown", never 201, and
//   none of them is there after a power cut;
// - under --sync-scope fs, writes to many tenants at once are made durable by flushes of the
//   whole file system, each covering several tenants, and every one answered is there after a
//   power cut.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
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

// A small REST write to an open tenant is landed on the event loop and answered by the Syncer once
// durable (serve_inline_write): no worker job at all. Writes that could wait or run long go to the
// pool as before, one job each: an Idempotency-Key, a body past 8 KiB, a collection with a text
// index. Every one is answered after its fsync, so a power cut keeps them all.
TEST_F(FaultFsNode, ASmallRestWriteIsLandedOnTheLoopAndOthersOnTheWorkers) {
    start();
    create("acme", R"J({"schema":["create collection notes (title text)",
                                  "create collection pages (body text @text)"]})J");
    auto jobs = [&] {
        return metric_value(call("GET", "/_metrics").body, "fenec_worker_jobs_total");
    };
    uint64_t before = jobs();
    constexpr int kWrites = 40;
    for (int i = 0; i < kWrites; ++i) {
        auto r = call("POST", "/t/acme/c/notes", "{\"title\":\"t" + std::to_string(i) + "\"}");
        ASSERT_EQ(r.status, 201) << r.body;
        ASSERT_TRUE(r.header("Fenec-Seq").has_value());
    }
    EXPECT_EQ(jobs() - before, 0u);  // /_metrics is answered on the loop too

    before = jobs();
    auto keyed =
        call("POST", "/t/acme/c/notes", R"J({"title":"keyed"})J", {{"Idempotency-Key", "k1"}});
    ASSERT_EQ(keyed.status, 201) << keyed.body;
    EXPECT_EQ(jobs() - before, 1u) << "a keyed write";
    before = jobs();
    auto large = call("POST", "/t/acme/c/notes", "{\"title\":\"" + std::string(9000, 'x') + "\"}");
    ASSERT_EQ(large.status, 201) << large.body;
    EXPECT_EQ(jobs() - before, 1u) << "a body past 8 KiB";
    before = jobs();
    auto indexed = call("POST", "/t/acme/c/pages", R"J({"body":"the quick brown fox"})J");
    ASSERT_EQ(indexed.status, 201) << indexed.body;
    EXPECT_EQ(jobs() - before, 1u) << "a collection with a text index";

    fs_.crash(FaultFs::CrashMode::synced_only);
    stop();
    start();
    auto r = call("POST", "/t/acme/query", count_body());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, ":" + std::to_string(kWrites + 2) + "}")) << r.body;
    r = call("POST", "/t/acme/query", R"J({"query":"get pages select count(*)"})J");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, ":1}")) << r.body;
}

// The loop never waits for a tenant's lock. A small write that finds it held goes to a worker,
// which waits its turn, while the loop goes on answering; once the lock is let go the write lands
// and is answered. Held two ways, as a worker holds it: shared by a reader (a long query), which
// the loop's own look at the schema passes and the block's begin finds (RunOptions::no_wait, the
// call handed over from rest.cc); and by another block, which that look already finds.
TEST_F(FaultFsNode, ASmallWriteFindingTheTenantsLockHeldGoesToAWorkerAndTheLoopGoesOn) {
    start();
    create("acme");
    ASSERT_EQ(call("POST", "/t/acme/c/notes", R"J({"title":"first"})J").status, 201);
    std::shared_ptr<node::Tenant> t = node_->registry().try_get("acme");
    ASSERT_TRUE(t);
    // Every probe is answered on the loop; a loop waiting for the lock would time them out.
    Client probe(node_->port(), 2'000);
    auto jobs = [&]() -> std::optional<uint64_t> {
        auto r = probe.request("GET", "/_metrics");
        if (!r || r->status != 200) return std::nullopt;
        return metric_value(r->body, "fenec_worker_jobs_total");
    };
    // One write sent while the lock is held, `release` letting it go.
    auto write_while_held = [&](const std::string& held_by, const std::function<void()>& release) {
        SCOPED_TRACE("the lock held by " + held_by);
        const std::optional<uint64_t> before = jobs();
        std::atomic<int> status{-1};
        std::thread writer([&] {
            Client c(node_->port());
            auto r = c.request("POST", "/t/acme/c/notes", R"J({"title":"held"})J");
            status = r ? r->status : 0;
        });
        // A worker took it (and waits for the lock) while the loop answered every probe.
        bool probes_answered = before.has_value();
        const bool taken = wait_until([&] {
            std::optional<uint64_t> n = jobs();
            probes_answered &= n.has_value();
            return !n || !before || *n == *before + 1;
        });
        EXPECT_TRUE(probes_answered) << "the loop stopped answering while the lock was held";
        EXPECT_TRUE(taken) << "no worker took the write";
        EXPECT_EQ(status.load(), -1) << "answered while the lock was held";
        auto health = probe.request("GET", "/_health");
        EXPECT_EQ(health ? health->status : 0, 200);
        release();
        writer.join();
        EXPECT_EQ(status.load(), 201);
    };
    std::optional<engine::ReadView> view = t->db().read();
    write_while_held("a reader", [&] { view.reset(); });
    engine::Result<engine::Block> block = t->db().begin();
    ASSERT_TRUE(block.is_ok());
    write_while_held("a block", [&] { block->rollback(); });
    auto r = call("POST", "/t/acme/query", count_body());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, ":3}")) << r.body;
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
