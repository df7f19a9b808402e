// test/server/node/fault_fs_node_test.cc: the node in process, on the fault-injecting file system
// (test/support/fault_fs.h) and fake clocks handed to it as main() hands it the real ones
// (NodeEnv, fault_node_fixture.h), spoken to over HTTP on a loopback port. Proves that every file
// the node keeps goes through the file system it is given, and that a side file or state file not
// kept is never answered as kept: a grant raising a term whose `fenec-node.state` fails is refused
// (500) and takes nothing; a quota whose `<t>.quota` fails is refused and not applied; a freeze or
// thaw whose `<t>.frozen` fails is refused and the tenant keeps its state; a follow whose
// `<t>.follows` fails is refused and starts nothing; a promotion whose `<t>.follows` cannot be
// removed says so. A term answered survives a power cut. A data directory that cannot be listed
// is answered 503, never as no tenants. Leases run on the injected boot clock and the node's files
// carry the injected wall clock: nothing here sleeps.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test/server/node/fault_node_fixture.h"
#include "test/support/temp_dir.h"
#include "test/support/wait.h"

namespace fenec::test::fault_fs_node_test {
namespace {

const std::string D1 = "9e2d41c07a5b3f18/eu";
const std::string H1 = "c04b7e1a9d2f6385";
constexpr int64_t wall_ms = fault_node_wall_ms;

std::string grant_body(uint64_t grant, uint64_t acked, uint64_t term,
                       const std::string& tenants = "[\"acme\"]") {
    std::string b = "{\"authority\":\"" + D1 + "\",\"term\":" + std::to_string(term) +
                    ",\"history\":\"" + H1 + "\",\"grant\":" + std::to_string(grant) +
                    ",\"acked\":" + std::to_string(acked) + ",\"lease_ms\":5000,\"list\":1";
    if (!tenants.empty()) b += ",\"tenants\":" + tenants;
    return b + "}";
}

TEST_F(FaultFsNode, EveryFileTheNodeKeepsIsOnTheFileSystemItWasGiven) {
    start(true);
    EXPECT_TRUE(fs_.has(dir_ + "/fenec-node.lock"));
    create("acme");
    EXPECT_TRUE(fs_.has(dir_ + "/acme.fenec"));
    ASSERT_EQ(call("POST", "/_admin/lease", grant_body(1, 0, 3)).status, 200);
    EXPECT_TRUE(has(text(dir_ + "/fenec-node.state"), "\"term\":3"))
        << text(dir_ + "/fenec-node.state");
    ASSERT_EQ(call("PUT", "/_admin/tenants/acme/quota", "{\"rows\":5}").status, 200);
    EXPECT_EQ(text(dir_ + "/acme.quota"), "{\"rows\":5}");
    ASSERT_EQ(call("POST", "/_admin/tenants/acme/freeze").status, 200);
    EXPECT_EQ(text(dir_ + "/acme.frozen"), "{\"frozen_ms\":" + std::to_string(wall_ms) + "}\n");
    auto r = call("POST", "/_admin/tenants/zeta/follow", R"J({"from":"http://127.0.0.1:9"})J");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(text(dir_ + "/zeta.follows"), "\"from\":\"http://127.0.0.1:9\""));
    EXPECT_TRUE(fs_.has(dir_ + "/zeta.fenec"));
    // The listing and a reopen read the same file system.
    EXPECT_TRUE(has(call("GET", "/_admin/tenants").body, "\"acme\"")) << "listed";
    stop();
    start(true);
    r = describe("acme");
    EXPECT_TRUE(has(r.body, "\"frozen\":true")) << r.body;
    EXPECT_TRUE(has(call("GET", "/_admin/tenants/acme/quota").body, "\"quota\":{\"rows\":5}"));
    EXPECT_EQ(call("POST", "/_admin/lease", grant_body(1, 0, 2)).status, 409);  // term 3 kept
    // The copy to follow is found again by listing the same file system: zeta's follower runs.
    const std::string listed = call("GET", "/_admin/tenants").body;
    const size_t zeta = listed.find("\"name\":\"zeta\"");
    ASSERT_NE(zeta, std::string::npos) << listed;
    EXPECT_TRUE(has(listed.substr(zeta, listed.find('}', zeta) - zeta), "\"role\":\"replica\""))
        << listed;
    for (const std::string& f : fs_.paths()) EXPECT_FALSE(f.ends_with(".new")) << f;
}

TEST_F(FaultFsNode, AGrantWhoseTermIsNotKeptIsRefusedAndTakesNothing) {
    start(true);
    create("acme");
    for (Step step : steps) {
        SCOPED_TRACE(static_cast<int>(step));
        arm(fs_, step);
        auto r = call("POST", "/_admin/lease", grant_body(1, 0, 3));
        EXPECT_EQ(r.status, 500) << r.body;
        EXPECT_FALSE(has(r.body, "\"took\"")) << r.body;
        EXPECT_FALSE(has(call("GET", "/_admin/lease").body, "\"holder\":{")) << "nothing held";
        EXPECT_EQ(put("acme", "a").status, 503);  // no list taken: no lease
    }
    auto r = call("POST", "/_admin/lease", grant_body(1, 0, 3));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, "\"took\":true")) << r.body;
}

TEST_F(FaultFsNode, ATermAnsweredSurvivesAPowerCut) {
    start(true);
    ASSERT_EQ(call("POST", "/_admin/lease", grant_body(1, 0, 4)).status, 200);
    fs_.crash(FaultFs::CrashMode::synced_only);  // the power goes right after the answer
    stop();
    start(true);
    auto r = call("POST", "/_admin/lease", grant_body(2, 0, 3));
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_TRUE(has(r.body, "at term 4")) << r.body;
}

TEST_F(FaultFsNode, LeasesRunOnTheInjectedBootClock) {
    start(true);
    create("acme");
    ASSERT_EQ(call("POST", "/_admin/lease", grant_body(1, 0, 3)).status, 200);
    auto r = call("POST", "/_admin/lease", grant_body(2, 1, 3, ""));
    ASSERT_TRUE(has(r.body, "\"ran\":true")) << r.body;
    EXPECT_EQ(put("acme", "a").status, 200);
    boot_clock_.advance_ms(4999);
    EXPECT_EQ(put("acme", "b").status, 200);
    boot_clock_.advance_ms(1);
    r = put("acme", "c");
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.header("Fenec-Lease").value_or(""), "lapsed");
}

TEST_F(FaultFsNode, AQuotaNotKeptIsRefusedAndNotApplied) {
    start();
    create("acme");
    ASSERT_EQ(put("acme", "a").status, 200);
    for (Step step : steps) {
        SCOPED_TRACE(static_cast<int>(step));
        arm(fs_, step);
        auto r = call("PUT", "/_admin/tenants/acme/quota", "{\"rows\":1}");
        EXPECT_EQ(r.status, 500) << r.body;
        EXPECT_TRUE(has(r.body, "could not be kept")) << r.body;
        r = call("GET", "/_admin/tenants/acme/quota");
        EXPECT_TRUE(has(r.body, "\"quota\":{}")) << r.body;
        EXPECT_EQ(put("acme", "more").status, 200);  // past rows 1: no quota runs
    }
    ASSERT_EQ(call("PUT", "/_admin/tenants/acme/quota", "{\"rows\":1}").status, 200);
    EXPECT_EQ(put("acme", "refused").status, 507);
}

TEST_F(FaultFsNode, AFreezeOrThawWhoseMarkIsNotKeptIsRefused) {
    start();
    create("acme");
    for (Step step : steps) {
        SCOPED_TRACE(static_cast<int>(step));
        arm(fs_, step);
        auto r = call("POST", "/_admin/tenants/acme/freeze");
        EXPECT_EQ(r.status, 500) << r.body;
        EXPECT_TRUE(has(r.body, "freeze mark could not be written")) << r.body;
        EXPECT_TRUE(has(describe("acme").body, "\"frozen\":false"));
        EXPECT_EQ(put("acme", "a").status, 200);
    }
    ASSERT_EQ(call("POST", "/_admin/tenants/acme/freeze").status, 200);
    // A thaw removes the mark; one whose removal is not made durable is refused.
    fs_.fail_sync_dir(1);
    auto r = call("POST", "/_admin/tenants/acme/thaw");
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_TRUE(has(describe("acme").body, "\"frozen\":true"));
    EXPECT_EQ(put("acme", "b").status, 503);
    ASSERT_EQ(call("POST", "/_admin/tenants/acme/thaw").status, 200);
    EXPECT_FALSE(fs_.has(dir_ + "/acme.frozen"));
    EXPECT_EQ(put("acme", "c").status, 200);
}

TEST_F(FaultFsNode, AFollowWhoseFileIsNotKeptIsRefusedAndStartsNothing) {
    start();
    for (Step step : steps) {
        SCOPED_TRACE(static_cast<int>(step));
        arm(fs_, step);
        auto r = call("POST", "/_admin/tenants/zeta/follow", R"J({"from":"http://127.0.0.1:9"})J");
        EXPECT_EQ(r.status, 500) << r.body;
        EXPECT_TRUE(has(r.body, "follows file of `zeta` cannot be written")) << r.body;
        EXPECT_FALSE(fs_.has(dir_ + "/zeta.fenec"));  // no empty copy made
        EXPECT_EQ(describe("zeta").status, 404);
    }
}

// fs_ with one exists() held: the first one asking about `held` after arm() waits until
// release(), so a case can hold a tenant's open between its look at `.follows` and its file.
class HeldExistsFs final : public engine::Fs {
  public:
    explicit HeldExistsFs(engine::Fs& fs) : fs_(fs) {}
    void arm(std::string path) {
        std::lock_guard lock(mu_);
        held_ = std::move(path);
    }
    bool wait_reached() {
        std::unique_lock lock(mu_);
        return cv_.wait_for(lock, std::chrono::seconds(5), [&] { return reached_; });
    }
    void release() {
        std::lock_guard lock(mu_);
        released_ = true;
        cv_.notify_all();
    }
    engine::Result<bool> exists(std::string_view path) override {
        {
            std::unique_lock lock(mu_);
            if (!held_.empty() && path == held_) {
                held_.clear();
                reached_ = true;
                cv_.notify_all();
                cv_.wait(lock, [&] { return released_; });
            }
        }
        return fs_.exists(path);
    }
    engine::Result<std::unique_ptr<engine::File>> open(std::string_view path,
                                                       engine::OpenMode mode) override {
        return fs_.open(path, mode);
    }
    engine::Status lock(engine::File& file) override { return fs_.lock(file); }
    engine::Status rename(std::string_view from, std::string_view to, bool replace) override {
        return fs_.rename(from, to, replace);
    }
    engine::Status sync_dir(std::string_view dir) override { return fs_.sync_dir(dir); }
    engine::Status sync_fs(std::string_view dir) override { return fs_.sync_fs(dir); }
    engine::Status remove(std::string_view path) override { return fs_.remove(path); }
    engine::Result<uint64_t> file_size(std::string_view path) override {
        return fs_.file_size(path);
    }
    engine::Result<std::vector<std::string>> list(std::string_view dir) override {
        return fs_.list(dir);
    }
    engine::Status make_dirs(std::string_view dir) override { return fs_.make_dirs(dir); }

  private:
    engine::Fs& fs_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::string held_;
    bool reached_ = false, released_ = false;
};

// A follow that arrives while a request opens the tenant (the open past its look at `.follows`,
// which it found absent): the follow waits for that open and closes it, so the copy opens again
// as a follower and a write is refused (503). Before, the follow saw nothing open and only wrote
// `.follows`; the open went on as a primary, which took writes the follower's image or feed
// would then lose.
TEST_F(FaultFsNode, AFollowRacingAnOpenLeavesNoPrimaryTakingWrites) {
    HeldExistsFs held(fs_);
    env_fs_ = &held;
    start();
    create("acme");
    ASSERT_EQ(put("acme", "a").status, 200);
    stop();
    start();  // acme closed
    held.arm(dir_ + "/acme.frozen");
    std::thread reader([&] {
        Client c(node_->port());
        (void)c.request("GET", "/t/acme/c/notes?count");
    });
    ASSERT_TRUE(held.wait_reached());
    Reply followed;
    std::thread follow([&] {
        Client c(node_->port());
        followed =
            c.request("POST", "/_admin/tenants/acme/follow", R"J({"from":"http://127.0.0.1:9"})J")
                .value_or(Reply{});
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the follow has run or waits
    held.release();
    reader.join();
    follow.join();
    EXPECT_EQ(followed.status, 200) << followed.body;
    const Reply w = put("acme", "b");
    EXPECT_EQ(w.status, 503) << w.body;
    EXPECT_TRUE(has(w.body, "replica")) << w.body;
    stop();
    env_fs_ = nullptr;
}

// node-http.md §5.8: a primary latched read-only by a failed fsync refuses writes only until the
// node has opened it again from its file, which it does within two ticks even while a subscriber
// (or a follower's stream) holds it: the holder is ended `closing`, the tenant closed once nothing
// holds it. Before, only an idle close reopened it, and a holder kept it refusing every write for
// good.
TEST_F(FaultFsNode, APrimaryLatchedByAFailedFsyncIsOpenedAgainThoughItIsHeld) {
    start();
    create("acme");
    auto sub = subscribe("");
    ASSERT_NE(sub->read_until("event: seed", 5000).find("event: seed"), std::string::npos);
    fs_.fail_sync(1);
    const Reply failed = put("acme", "unsure");
    EXPECT_EQ(failed.status, 500) << failed.body;
    // Reads go on meanwhile (I5), and are never told the tenant is not there.
    const Reply read = call("GET", "/t/acme/c/notes?count");
    EXPECT_EQ(read.status, 200) << read.body;
    Reply w;
    EXPECT_TRUE(wait_until(
        [&] {
            w = put("acme", "after");
            return w.status == 200;
        },
        std::chrono::milliseconds(5000)))
        << w.status << " " << w.body;
    EXPECT_NE(sub->read_until("\"closing\"", 5000).find("\"reason\":\"closing\""),
              std::string::npos)
        << sub->buffer();
}

// The same while requests hold it: reads that never stop, one held on `Fenec-After` for a write
// that will not come (held up to --wait-max), and held reads sent again as each is answered. The
// sweep takes the tenant out of its slot so no request takes it again, closes it once the reads in
// flight let go, and the held read is answered 504 as its deadline would answer it. Before, a
// tenant held at each sweep stayed latched, refusing every write, for as long as reads kept coming.
TEST_F(FaultFsNode, APrimaryLatchedUnderSteadyAndHeldReadsIsOpenedAgain) {
    start();
    create("acme");
    fs_.fail_sync(1);
    const Reply failed = put("acme", "unsure");
    ASSERT_EQ(failed.status, 500) << failed.body;
    Client held(node_->port());
    const std::string body = R"({"query":"get notes"})";
    held.send_raw(
        "POST /t/acme/query HTTP/1.1\r\nHost: 127.0.0.1\r\nFenec-After: 1000\r\n"
        "Fenec-Wait: 30000\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
    std::atomic<bool> reading{true};
    std::atomic<int> reads{0}, read_failures{0};
    std::vector<std::thread> readers;
    for (int i = 0; i < 2; ++i) {
        readers.emplace_back([&] {
            Client c(node_->port());
            while (reading) {
                auto r = c.request("GET", "/t/acme/c/notes?count", {}, {});
                if (!r || r->status != 200) ++read_failures;
                ++reads;
            }
        });
    }
    // And a client that sends its held read again as soon as it is answered: a held read parked
    // at every sweep kept the tenant from closing.
    readers.emplace_back([&] {
        Client c(node_->port());
        while (reading) {
            (void)c.request("POST", "/t/acme/query", body,
                            {{"Fenec-After", "1000"}, {"Fenec-Wait", "2000"}});
        }
    });
    Reply w;
    const bool written = wait_until(
        [&] {
            w = put("acme", "after");
            return w.status == 200;
        },
        std::chrono::milliseconds(5000));
    reading = false;
    for (auto& t : readers) t.join();
    EXPECT_TRUE(written) << w.status << " " << w.body;
    EXPECT_GT(reads.load(), 0);
    EXPECT_EQ(read_failures.load(), 0) << "a read was refused while the tenant was reopened";
    const std::string answer = held.read_until("\r\n\r\n", 5000);
    EXPECT_NE(answer.find(" 504 "), std::string::npos) << answer;
}

// node-http.md §5.8: the write whose fsync failed is 500 (it is in the file, its outcome
// unknown), but a write refused because the tenant is latched landed nothing: 503 `latched`, with
// Retry-After the wait until its reopen, so a client sends it again then. Latched again soon after
// its reopen (a disk that stays full), a tenant waits 2 s before it is opened again, and the
// refusal says so. Before, every write until the reopen was 500 with no Retry-After.
TEST_F(FaultFsNode, AWriteRefusedWhileTheTenantIsLatchedIs503WithTheWaitForItsReopen) {
    start();
    create("acme");
    // Written once the tenant is opened again, the node's wall clock moved on meanwhile.
    auto write_after = [&](const std::string& title) {
        Reply w;
        EXPECT_TRUE(wait_until(
            [&] {
                clock_.advance_ms(200);
                w = put("acme", title);
                return w.status == 200;
            },
            std::chrono::milliseconds(8000)))
            << w.status << " " << w.body;
    };
    fs_.fail_sync(1, ENOSPC);
    ASSERT_EQ(put("acme", "unsure").status, 500);
    write_after("reopened");
    fs_.fail_sync(1, ENOSPC);
    const Reply failed = put("acme", "unsure again");
    ASSERT_EQ(failed.status, 500) << failed.body;
    EXPECT_TRUE(has(failed.body, "\"outcome\":\"unknown\"")) << failed.body;
    // The statement and the REST write alike, each refused whole; and a subscription, which
    // would hold the tenant off its reopen.
    for (const Reply& r :
         {put("acme", "refused"), call("POST", "/t/acme/c/notes", R"({"title":"refused too"})"),
          call("GET", "/t/acme/c/notes/changes")}) {
        EXPECT_EQ(r.status, 503) << r.body;
        EXPECT_TRUE(has(r.body, "\"reason\":\"latched\"")) << r.body;
        EXPECT_TRUE(has(r.body, "failed write") || has(r.body, "storage failed")) << r.body;
        // The clock stands still here: 2 s to wait, and two sweeps' seconds.
        EXPECT_EQ(r.header("Retry-After").value_or(""), "4") << r.body;
    }
    write_after("reopened again");
    const Reply all = call("POST", "/t/acme/query", R"({"query":"get notes"})");
    EXPECT_TRUE(has(all.body, "reopened again")) << all.body;
    EXPECT_FALSE(has(all.body, "refused")) << "a refused write landed: " << all.body;
}

// A batch holding `compact` lands statement by statement (node-http.md §5.2). One of its later
// statements refused because the tenant was latched meanwhile (another write's fsync failed
// between them) is not a refusal the client may send again whole: an earlier statement landed, and
// may not survive the failed fsync, so the outcome is unknown (500), as for a lapsed lease.
TEST_F(FaultFsNode, ABatchLatchedAfterAnEarlierStatementLandedHasAnUnknownOutcome) {
    options_ = [](node::NodeOptions& o) { o.workers = 2; };  // the batch holds one
    start();
    create("acme");
    // The copy's `durable` seq (GET /_admin/tenants/acme): what its fsyncs have made durable.
    auto durable = [&] {
        const std::string body = describe("acme").body;
        const size_t at = body.find("\"durable\":");
        return at == std::string::npos ? uint64_t{0} : std::stoull(body.substr(at + 10));
    };
    const uint64_t before = durable();
    const uint16_t port = node_->port();
    auto batch = std::async(std::launch::async, [port] {
        Client c(port, 30'000);
        return c
            .request("POST", "/t/acme/batch",
                     "{\"query\":\"put notes {title: \\\"first\\\"}\"}\n{\"query\":\"compact\"}\n",
                     {{"Fenec-Test-Stall", "between=3000"}})
            .value_or(Reply{});
    });
    // The batch's put durable (its own fsync done): the next fsync, which fails, is another
    // write's, well inside the batch's 3 s between its statements.
    ASSERT_TRUE(wait_until([&] { return durable() > before; }, std::chrono::milliseconds(2000)))
        << describe("acme").body;
    fs_.fail_sync(1, ENOSPC);
    const Reply failed = put("acme", "unsure");
    EXPECT_EQ(failed.status, 500) << failed.body;
    const Reply r = batch.get();
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_TRUE(has(r.body, "\"outcome\":\"unknown\"")) << r.body;
}

// A promotion whose `.follows` could not be unlinked (500, the copy promoted): asked again, it
// removes the file and answers 200 without forking a second time, so neither a restart nor an
// idle reopen makes the promoted copy follow its old primary again. Before, every retry was 500
// ("not a replica"), force or not, and the file stayed.
TEST_F(FaultFsNode, APromotionAskedAgainRemovesTheFollowsFileItLeft) {
    TempDir logs;
    const std::string audit = logs.path() + "/audit.log";
    options_ = [&](node::NodeOptions& o) { o.audit = audit; };
    start();
    auto r = call("POST", "/_admin/tenants/zeta/follow", R"J({"from":"http://127.0.0.1:9"})J");
    ASSERT_EQ(r.status, 200) << r.body;
    fs_.fail_path(FaultFs::PathOp::remove, dir_ + "/zeta.follows");
    r = call("POST", "/_admin/tenants/zeta/promote", R"J({"force":true})J");
    EXPECT_EQ(r.status, 500) << r.body;
    ASSERT_TRUE(fs_.has(dir_ + "/zeta.follows"));
    // The forced fork is audited though the call failed after it (§8.6: before the answer).
    auto forced_lines = [&] {
        std::ifstream in(audit);
        std::string line;
        int n = 0;
        while (std::getline(in, line)) n += has(line, "\"forced\":true") ? 1 : 0;
        return n;
    };
    EXPECT_EQ(forced_lines(), 1);
    r = call("POST", "/_admin/tenants/zeta/promote", R"J({"force":true})J");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, "\"forked\":false")) << r.body;
    EXPECT_FALSE(fs_.has(dir_ + "/zeta.follows"));
    EXPECT_EQ(forced_lines(), 2);  // a line for each forced call that went through, never none
    stop();
    start();
    EXPECT_TRUE(has(describe("zeta").body, "\"role\":\"primary\"")) << describe("zeta").body;
}

// A promotion whose fork could not be made durable (its fsync failed) is answered 500, and so is
// the same promotion asked again: the copy in memory reads as a primary by then, and a retry
// took it for one a call before had promoted, answered 200 and removed `.follows`, though the
// fork on disk may be gone after a power cut.
TEST_F(FaultFsNode, APromotionWhoseForkWasNotSyncedIsNotAnsweredDoneWhenAskedAgain) {
    start();
    auto r = call("POST", "/_admin/tenants/zeta/follow", R"J({"from":"http://127.0.0.1:9"})J");
    ASSERT_EQ(r.status, 200) << r.body;
    fs_.fail_sync(1);
    r = call("POST", "/_admin/tenants/zeta/promote", R"J({"force":true})J");
    EXPECT_EQ(r.status, 500) << r.body;
    r = call("POST", "/_admin/tenants/zeta/promote", R"J({"force":true})J");
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_TRUE(has(r.body, "failed")) << r.body;
    EXPECT_TRUE(fs_.has(dir_ + "/zeta.follows"));
}

TEST_F(FaultFsNode, APromotionWhoseFollowsFileStaysSaysSo) {
    start();
    auto r = call("POST", "/_admin/tenants/zeta/follow", R"J({"from":"http://127.0.0.1:9"})J");
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_TRUE(fs_.has(dir_ + "/zeta.follows"));
    fs_.fail_sync_dir(1);
    r = call("POST", "/_admin/tenants/zeta/promote", R"J({"force":true})J");
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_TRUE(has(r.body, "follows file could not be removed")) << r.body;
    // Rightly not answered as done: what a crash now leaves still says to follow.
    EXPECT_FALSE(fs_.has(dir_ + "/zeta.follows"));
    fs_.crash(FaultFs::CrashMode::synced_only);
    EXPECT_TRUE(fs_.has(dir_ + "/zeta.follows"));
}

// A followed copy whose write failed once (ENOSPC on an apply) is latched read-only, and its
// follower's hold kept it open: every block after was refused and the copy never caught up until
// the node restarted. The follower now closes it, and the next session opens it from its file.
TEST_F(FaultFsNode, AFollowedCopyWhoseWriteFailedCatchesUpOnceTheDiskTakesWritesAgain) {
    TempDir primary_dir;
    NodeProcess primary(primary_dir.path(), {"--admin-token", "a", "--token", "d", "--auth-delay",
                                             "0"});
    ASSERT_NE(primary.port(), 0) << primary.first_line();
    auto on_primary = [&](std::string_view method, std::string_view target, std::string_view body,
                          const std::string& token) {
        Client c(primary.port());
        return c.request(method, target, body, {{"Authorization", "Bearer " + token}})
            .value_or(Reply{});
    };
    ASSERT_EQ(on_primary("PUT", "/_admin/tenants/acme",
                         R"J({"schema":["create collection notes (title text)"]})J", "a")
                  .status,
              201);
    auto put_on_primary = [&](const std::string& title) {
        return on_primary("POST", "/t/acme/query",
                          "{\"query\":\"put notes {title: $1}\",\"params\":[\"" + title + "\"]}",
                          "d")
            .status;
    };
    ASSERT_EQ(put_on_primary("a"), 200);
    start();
    const std::string from = "http://127.0.0.1:" + std::to_string(primary.port());
    auto f = call("POST", "/_admin/tenants/acme/follow",
                  "{\"from\":\"" + from + "\",\"wait_ms\":3000}");
    ASSERT_EQ(f.status, 200) << f.body;
    auto count = [&] { return call("GET", "/t/acme/c/notes?count").body; };
    ASSERT_TRUE(wait_until([&] { return count() == R"({"count":1})"; }, std::chrono::seconds(5)))
        << count();
    fs_.fail_append(1, ENOSPC);  // the next block's apply
    ASSERT_EQ(put_on_primary("b"), 200);
    ASSERT_EQ(put_on_primary("c"), 200);
    EXPECT_TRUE(wait_until([&] { return count() == R"({"count":3})"; }, std::chrono::seconds(10)))
        << count() << " " << describe("acme").body;
}

// A background compaction whose side file cannot take the tenant's place leaves the file as it
// was and the tenant served, is counted as failed, and is not tried again at once (compactor.h).
TEST_F(FaultFsNode, ABackgroundCompactionThatFailsLeavesTheTenantServed) {
    options_ = [](node::NodeOptions& o) {
        o.compact_dead = 0.3;
        o.compact_min_mib = 0;
    };
    start();
    create("acme");
    fs_.fail_rename(1);               // writes rename nothing: the first rename is the compaction's
    const std::string pad(400, 'x');  // rows large beside their blocks' framing
    for (int i = 0; i < 50; ++i) ASSERT_EQ(put("acme", pad + std::to_string(i)).status, 200);
    auto set = call("POST", "/t/acme/query",
                    R"J({"query":"set notes {title: \"u\"} where title != \"\""})J");
    ASSERT_EQ(set.status, 200) << set.body;
    const uint64_t grown = fs_.contents(dir_ + "/acme.fenec").size();
    std::string m;
    ASSERT_TRUE(wait_until([&] {
        m = call("GET", "/_metrics").body;
        return has(m, R"(fenec_compactions_total{trigger="auto",outcome="failed"} 1)");
    })) << m;
    EXPECT_TRUE(has(m, R"(fenec_compactions_total{trigger="auto",outcome="ok"} 0)")) << m;
    EXPECT_EQ(fs_.contents(dir_ + "/acme.fenec").size(), grown);
    EXPECT_FALSE(fs_.has(dir_ + "/acme.fenec.rewrite")) << "the side file is removed";
    EXPECT_EQ(put("acme", "after").status, 200) << "the tenant still takes writes";
    auto count = call("POST", "/t/acme/query", R"J({"query":"get notes select count(*)"})J");
    EXPECT_TRUE(has(count.body, "51")) << count.body;
}

// A delete of a tenant a background compaction holds cancels the compaction (engine::Database::
// cancel_rewrite): the delete goes through as soon as the rewrite's step in progress (here its
// side file's fsync, held back) ends, the rewrite renames nothing over the file and leaves no
// side file, and it is counted `cancelled`, not ok and not failed. Before, the compaction ran to
// its end while the delete waited, and a delete past 5 s of it was refused 409.
TEST_F(FaultFsNode, ADeleteCancelsTheCompactionHoldingItsTenant) {
    options_ = [](node::NodeOptions& o) {
        o.compact_dead = 0.3;
        o.compact_min_mib = 0;
    };
    start();
    create("acme");
    const std::string pad(400, 'x');
    for (int i = 0; i < 50; ++i) ASSERT_EQ(put("acme", pad + std::to_string(i)).status, 200);
    const uint64_t renames = fs_.renames();
    // The set makes most of the file dead; its fsync is done once it is answered, so the next
    // sync held back is the compaction's (the compactor looks once a second).
    auto set = call("POST", "/t/acme/query",
                    R"J({"query":"set notes {title: \"u\"} where title != \"\""})J");
    ASSERT_EQ(set.status, 200) << set.body;
    // A subscriber, ended `gone` by the delete's ask to leave, which cancels the rewrite first.
    auto sub = subscribe("");
    ASSERT_NE(sub->read_until("event: seed", 5000).find("event: seed"), std::string::npos);
    fs_.stall_syncs(true);
    ASSERT_TRUE(fs_.wait_for_stalled_syncs(1, std::chrono::seconds(10))) << "no compaction began";
    ASSERT_TRUE(fs_.has(dir_ + "/acme.fenec.rewrite")) << "the stalled sync is the side file's";
    int deleted = 0;
    std::thread del([&] { deleted = call("DELETE", "/_admin/tenants/acme").status; });
    EXPECT_NE(sub->read_until("gone", 5000).find("gone"), std::string::npos) << sub->buffer();
    fs_.release_syncs();
    del.join();
    EXPECT_EQ(deleted, 204);
    std::string m = call("GET", "/_metrics").body;
    EXPECT_TRUE(has(m, R"(fenec_compactions_total{trigger="auto",outcome="cancelled"} 1)")) << m;
    EXPECT_TRUE(has(m, R"(fenec_compactions_total{trigger="auto",outcome="ok"} 0)")) << m;
    EXPECT_TRUE(has(m, R"(fenec_compactions_total{trigger="auto",outcome="failed"} 0)")) << m;
    EXPECT_EQ(fs_.renames(), renames + 1) << "the delete's own rename to the trash, nothing else";
    EXPECT_FALSE(fs_.has(dir_ + "/acme.fenec.rewrite")) << "the side file is removed";
    EXPECT_FALSE(fs_.has(dir_ + "/acme.fenec"));
}

// The `id` of the last `seed` or `change` event in `bytes`; empty if none.
std::string last_event_id(const std::string& bytes) {
    std::string id;
    for (size_t at = bytes.find("\nid: "); at != std::string::npos;
         at = bytes.find("\nid: ", at + 1)) {
        id = bytes.substr(at + 5, bytes.find('\n', at + 1) - at - 5);
    }
    return id;
}

void sync_every_20_ms(node::NodeOptions& o) {
    o.sync = node::NodeOptions::Sync::interval;
    o.sync_ms = 20;
}

// INVARIANTS N22: a stream is fed what is durable only. Under --sync 20 a put is answered at
// landing; while the tenant file's fsync is held back, the stream says nothing of it, and the
// change comes once the fsync is let go.
TEST_F(FaultFsNode, SubscriberSeesOnlyDurableChanges) {
    options_ = sync_every_20_ms;
    start();
    create("acme");
    auto sub = subscribe("");
    ASSERT_NE(sub->read_until("event: seed", 5000).find("event: seed"), std::string::npos);
    fs_.stall_syncs(true);
    ASSERT_EQ(put("acme", "landed").status, 200);
    ASSERT_TRUE(fs_.wait_for_stalled_syncs(1, std::chrono::seconds(5)));
    EXPECT_EQ(sub->read_until("event: change", 300).find("event: change"), std::string::npos)
        << sub->buffer();
    fs_.release_syncs();
    EXPECT_NE(sub->read_until("\"landed\"", 5000).find("event: change"), std::string::npos)
        << sub->buffer();
}

// The issue's power cut: a block that landed and was never fsynced is gone after the restart,
// and the next block takes its seq with other data. The subscriber was never sent the lost
// block, so resuming from the cursor it holds brings it the new row (before: it held the lost
// row under a cursor equal to the new seq, and was told nothing).
TEST_F(FaultFsNode, PowerCutDoesNotDivergeAResumedCursor) {
    options_ = sync_every_20_ms;
    start();
    create("acme");
    ASSERT_EQ(put("acme", "kept").status, 200);
    // The flusher has fsynced it: the power cut below takes only what follows.
    const std::string file = dir_ + "/acme.fenec";
    ASSERT_TRUE(wait_until([&] { return fs_.synced_size(file) == fs_.contents(file).size(); }));
    auto sub = subscribe("");
    ASSERT_NE(sub->read_until("\"kept\"", 5000).find("event: seed"), std::string::npos);
    fs_.stall_syncs(true);
    auto lost = put("acme", "lost");
    ASSERT_EQ(lost.status, 200) << lost.body;
    ASSERT_TRUE(fs_.wait_for_stalled_syncs(1, std::chrono::seconds(5)));
    sub->read_until("\"lost\"", 300);  // what the stream sends before the power goes
    const std::string cursor = last_event_id(sub->buffer());
    ASSERT_FALSE(cursor.empty()) << sub->buffer();
    fs_.crash(FaultFs::CrashMode::synced_only);
    sub.reset();
    stop();
    fs_.release_syncs();
    start();
    auto other = put("acme", "other");
    ASSERT_EQ(other.status, 200) << other.body;
    ASSERT_EQ(other.header("Fenec-Seq"), lost.header("Fenec-Seq")) << "the lost seq, other data";
    sub = subscribe("?since=" + cursor);
    const std::string got = sub->read_until("\"other\"", 5000);
    EXPECT_NE(got.find("\"other\""), std::string::npos) << got;
    EXPECT_EQ(got.find("\"lost\""), std::string::npos) << got;
}

// A create that fails at any step of its file (written beside, fsynced, renamed into place, the
// folder fsynced, opened, its schema landed and fsynced) is answered 5xx and leaves no file
// behind, so the same create then succeeds (issue 17 item 9).
TEST_F(FaultFsNode, EveryCreateStepFailsCleanly) {
    start();
    const std::vector<std::function<void()>> arms = {
        [&] { fs_.fail_append(1, ENOSPC); }, [&] { fs_.fail_sync(1); },
        [&] { fs_.fail_rename(1); },         [&] { fs_.fail_sync_dir(1); },
        [&] { fs_.fail_sync(2); },           [&] { fs_.fail_append(2, ENOSPC); },
        [&] { fs_.fail_sync(3); },
    };
    const std::string schema = R"J({"schema":["create collection notes (title text)"]})J";
    int failed = 0;
    for (size_t i = 0; i < arms.size(); ++i) {
        SCOPED_TRACE("arm " + std::to_string(i));
        fs_.clear_faults();
        arms[i]();
        auto r = call("PUT", "/_admin/tenants/x", schema);
        fs_.clear_faults();
        if (r.status != 201) {
            ++failed;
            EXPECT_GE(r.status, 500) << r.body;
            EXPECT_FALSE(fs_.has(dir_ + "/x.fenec"));
            EXPECT_FALSE(fs_.has(dir_ + "/x.fenec.new"));
            r = call("PUT", "/_admin/tenants/x", schema);
            ASSERT_EQ(r.status, 201) << r.body;
        }
        EXPECT_EQ(put("x", "a").status, 200);
        ASSERT_EQ(call("DELETE", "/_admin/tenants/x").status, 204);
    }
    EXPECT_GE(failed, 5) << "most armed steps fail the create";
}

// A data directory that cannot be listed (out of descriptors, opendir fails EMFILE) is answered
// 503 naming it by hello and the tenant list, never as a node with no tenants (issue 17 item 9:
// hello said `tenants: 0`); the metric says NaN, not 0. Tenants are still served, and both answer
// again once the directory lists. hello's boot id is the one main() read at start (NodeEnv),
// never one read per call.
TEST_F(FaultFsNode, ADirectoryThatCannotBeListedIsAnswered503NeverAsNoTenants) {
    start();
    create("acme");
    fs_.fail_lists(true);
    for (const char* path : {"/_admin/hello", "/_admin/tenants", "/_admin/tenants?detail"}) {
        SCOPED_TRACE(path);
        auto r = call("GET", path);
        EXPECT_EQ(r.status, 503) << r.body;
        EXPECT_TRUE(has(r.body, "the data directory cannot be listed")) << r.body;
        EXPECT_TRUE(has(r.body, "Too many open files")) << r.body;
        EXPECT_TRUE(has(r.body, "\"reason\":\"descriptors\"")) << r.body;
        EXPECT_EQ(r.header("Retry-After").value_or(""), "1");
    }
    EXPECT_TRUE(has(call("GET", "/_metrics").body, "\nfenec_tenants NaN\n"));
    EXPECT_EQ(put("acme", "a").status, 200) << "its tenants are still served";
    fs_.fail_lists(true, EIO);
    auto r = call("GET", "/_admin/hello");
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_TRUE(has(r.body, "\"reason\":\"io\"")) << r.body;

    fs_.fail_lists(false);
    r = call("GET", "/_admin/hello");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, "\"tenants\":1,")) << r.body;
    EXPECT_TRUE(has(r.body, "\"boot_id\":\"" + boot_id_ + "\"")) << r.body;
    r = call("GET", "/_admin/tenants");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, "\"name\":\"acme\"")) << r.body;
    EXPECT_TRUE(has(call("GET", "/_metrics").body, "\nfenec_tenants 1\n"));
}

// Issue 17 item 9's crash (a UBSan report as a failed create's IndexSet was destroyed), driven
// here under the suite's ASan+UBSan build with @text and @hnsw in the schema: the `.new` not
// opened (out of descriptors: the early return in Registry::create after Database::create failed,
// the IndexSet's text and vector extensions never told anything), the file placed but not opened
// or not read (told on_open, then dropped), the schema landed but not fsynced (its indexes built,
// then dropped), a quota a deleted file of the name left that cannot be read. Each is 5xx and
// leaves no file; the same create then succeeds, under that quota. Before, the quota's case
// answered 503 with the file in place: the same create then answered 409, and the tenant was
// served at its next open.
TEST_F(FaultFsNode, ACreateWithSearchIndexesThatFailsLeavesNothing) {
    start();
    const std::string schema =
        R"J({"schema":["create collection notes (title text @text, v vector<3> @hnsw)"]})J";
    const std::string x = dir_ + "/x.fenec";
    using Op = FaultFs::PathOp;
    const std::vector<std::pair<std::string, std::function<void()>>> arms = {
        {"the new file's open", [&] { fs_.fail_path(Op::open, x + ".new", EMFILE); }},
        {"the placed file's open", [&] { fs_.fail_path(Op::open, x, EMFILE); }},
        {"the placed file's read", [&] { fs_.fail_path(Op::read, x); }},
        {"the schema's fsync", [&] { fs_.fail_sync(3); }},
        {"the quota's read", [&] { fs_.fail_path(Op::open, dir_ + "/x.quota", EMFILE); }},
    };
    for (const auto& [name, arm_step] : arms) {
        SCOPED_TRACE(name);
        fs_.set_contents(dir_ + "/x.quota",
                         std::as_bytes(std::span(std::string_view("{\"rows\":1}"))));
        arm_step();
        auto r = call("PUT", "/_admin/tenants/x", schema);
        fs_.clear_faults();
        EXPECT_GE(r.status, 500) << r.body;
        EXPECT_LT(r.status, 600) << r.body;
        EXPECT_TRUE(has(r.body, "{\"error\":\"")) << r.body;
        EXPECT_FALSE(fs_.has(x));
        EXPECT_FALSE(fs_.has(x + ".new"));
        EXPECT_EQ(put("x", "a").status, 404);
        r = call("PUT", "/_admin/tenants/x", schema);
        ASSERT_EQ(r.status, 201) << r.body;
        EXPECT_EQ(put("x", "a").status, 200);
        EXPECT_EQ(put("x", "b").status, 507) << "under the quota it was given";
        ASSERT_EQ(call("DELETE", "/_admin/tenants/x").status, 204);
    }
}

}  // namespace
}  // namespace fenec::test::fault_fs_node_test
