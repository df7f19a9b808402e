// test/server/node/parts/lease_test.cc: the node's grant logic (server/node/lease.h, node-http.md
// §9.3, §9.5) on a fake boot clock and the fault-injecting file system, without HTTP: a lease runs
// from the acknowledged grant's answer instant and never from when a grant is read, only a newer
// grant is taken, a list not held is asked for again, terms fence and survive a reload of
// fenec-node.state and a crash, a term whose state file was not kept (a failed write, fsync,
// rename or directory fsync) is neither taken nor fences, a restart or a suspend leaves no lease,
// and only the last 16 answers are remembered. §14 cases named where they match.
#include "server/node/lease.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "test/support/fault_fs.h"

namespace fenec::node::lease_test {
namespace {

using engine::LeaseVerdict;

const std::string D1 = "9e2d41c07a5b3f18/eu";
const std::string D2 = "1111222233334444/us";
const std::string H1 = "c04b7e1a9d2f6385";

const std::string state_path = "/data/fenec-node.state";

Grant grant(uint64_t n, uint64_t acked, int64_t lease_ms = 1000, uint64_t list = 1,
            std::optional<std::vector<std::string>> tenants = std::vector<std::string>{"acme"},
            const std::string& authority = D1, uint64_t term = 3, const std::string& history = H1) {
    Grant g;
    g.authority = authority;
    g.term = term;
    g.history = history;
    g.grant = n;
    g.acked = acked;
    g.lease_ms = lease_ms;
    g.list = list;
    g.tenants = std::move(tenants);
    return g;
}

class LeasesTest : public ::testing::Test {
  protected:
    LeasesTest() { reopen(); }

    // A node started again on the same data dir: a fresh Leases reading the state file.
    void reopen() {
        leases_.reset();
        leases_ = std::make_unique<Leases>("n1", state_path, fs_, clock_);
        ASSERT_TRUE(leases_->load().is_ok());
    }

    // Posts `g` and answers it (§9.3 step 5), as the route does; the answer.
    GrantAnswer post(const Grant& g) {
        GrantOutcome out = leases_->take(g);
        EXPECT_TRUE(out.fence.ok()) << (out.fence.fenced ? out.fence.fenced->message : "");
        if (out.fence.ok()) leases_->answered(g.authority, g.term, g.grant);
        return out.answer;
    }

    // Grants 1 (acked 0) and 2 (acked 1): a running lease naming acme.
    void lease_of(int64_t lease_ms) {
        post(grant(1, 0, lease_ms));
        GrantAnswer a = post(grant(2, 1, lease_ms));
        ASSERT_TRUE(a.ran);
    }

    test::FaultFs fs_;
    engine::FakeBootClock clock_;
    std::unique_ptr<Leases> leases_;
};

TEST_F(LeasesTest, StartsWithNoLease) {
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::no_lease);
    EXPECT_EQ(leases_->refusal_message(LeaseVerdict::no_lease, "acme"), "n1 holds no lease yet");
    EXPECT_EQ(leases_->left_ms(), 0);
    EXPECT_FALSE(leases_->holder());
}

TEST_F(LeasesTest, FirstGrantTakesTheListAndTheSecondRunsTheLease) {  // case 66
    GrantAnswer a = post(grant(1, 0));
    EXPECT_TRUE(a.took);
    EXPECT_FALSE(a.ran);
    EXPECT_EQ(a.left_ms, 0);
    EXPECT_EQ(a.list, 1u);
    EXPECT_EQ(a.tenants, 1u);
    EXPECT_FALSE(a.lease);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::no_lease);
    a = post(grant(2, 1, 1000, 1, std::nullopt));  // the list held, not sent again
    EXPECT_TRUE(a.took);
    EXPECT_TRUE(a.ran);
    EXPECT_EQ(a.left_ms, 1000);
    ASSERT_TRUE(a.lease);
    EXPECT_EQ(a.lease->grant, 2u);
    EXPECT_EQ(a.lease->acked, 1u);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::ok);
    EXPECT_EQ(leases_->check("globex"), LeaseVerdict::not_named);  // case 67
    EXPECT_EQ(leases_->refusal_message(LeaseVerdict::not_named, "globex"),
              "n1's lease does not name globex");
    ASSERT_TRUE(leases_->holder());
    EXPECT_EQ(leases_->holder()->authority, D1);
    EXPECT_EQ(leases_->holder()->term, 3u);
}

TEST_F(LeasesTest, LeftCountsFromTheAcknowledgedAnswerNotFromTheRead) {  // case 69
    post(grant(1, 0));
    clock_.advance_ms(600);
    GrantAnswer a = post(grant(2, 1, 1000));
    EXPECT_TRUE(a.ran);
    EXPECT_EQ(a.left_ms, 400);
    clock_.advance_ms(399);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::ok);
    clock_.advance_ms(1);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::lapsed);  // case 68
    clock_.advance_ms(120);
    EXPECT_EQ(leases_->refusal_message(LeaseVerdict::lapsed, "acme"),
              "n1's lease lapsed 120 ms ago");
}

TEST_F(LeasesTest, AnAcknowledgedAnswerOlderThanTheLeaseRunsNone) {
    post(grant(1, 0));
    clock_.advance_ms(1000);
    GrantAnswer a = post(grant(2, 1, 1000));
    EXPECT_TRUE(a.took);
    EXPECT_FALSE(a.ran);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::no_lease);
}

TEST_F(LeasesTest, ALateGrantIsNotTaken) {  // case 70
    for (uint64_t n = 1; n <= 5; ++n) post(grant(n, n - 1, 5000));
    ASSERT_EQ(leases_->view().lease->grant, 5u);
    GrantAnswer a = post(grant(3, 2, 5000, 3, std::vector<std::string>{"acme", "globex"}));
    EXPECT_FALSE(a.took);
    EXPECT_FALSE(a.ran);
    EXPECT_EQ(a.list, 1u);
    EXPECT_EQ(leases_->check("globex"), LeaseVerdict::not_named);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::ok);
    // Not newer by its own number either: the same acknowledged answer, an older grant.
    a = post(grant(4, 4, 5000));
    EXPECT_FALSE(a.took);
    // Newer by the answer it acknowledges.
    a = post(grant(6, 5, 5000, 6, std::vector<std::string>{"acme", "globex"}));
    EXPECT_TRUE(a.took);
    EXPECT_EQ(leases_->check("globex"), LeaseVerdict::ok);
}

// §9.6–§9.7 across a router's restart: grants number `starts × 2^32 + n`. The router restarted
// with a 1 s lease (the one before granted 5 s): its first grant acknowledges nothing and is not
// newer than the running lease's; the second, acknowledging it, is, and cuts the lease to 1 s.
// A grant of the router before, read late, is not newer than that and is not taken. Once no
// lease runs, though, such a grant is taken and runs its longer lease again from the answer it
// acknowledges: why the router counts a node by the longest-lease record until it says `ran`.
TEST_F(LeasesTest, AGrantOfTheRouterBeforeARestartIsNotTakenOverTheNewOnesLease) {
    const uint64_t before = 1ull << 32, after = 2ull << 32;
    post(grant(before + 1, 0, 5000));
    ASSERT_TRUE(post(grant(before + 2, before + 1, 5000)).ran);
    GrantAnswer a = post(grant(after + 1, 0, 1000));
    EXPECT_FALSE(a.took);
    a = post(grant(after + 2, after + 1, 1000));
    EXPECT_TRUE(a.ran);
    EXPECT_EQ(a.left_ms, 1000);
    a = post(grant(before + 3, before + 2, 5000, 2, std::vector<std::string>{"acme", "globex"}));
    EXPECT_FALSE(a.took);
    EXPECT_EQ(leases_->view().lease->grant, after + 2);
    EXPECT_EQ(leases_->check("globex"), LeaseVerdict::not_named);
    clock_.advance_ms(1000);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::lapsed);  // 1 s, not the 5 s before
    a = post(grant(before + 4, before + 2, 5000));
    EXPECT_TRUE(a.took);
    EXPECT_TRUE(a.ran);
    EXPECT_EQ(a.left_ms, 4000);
}

TEST_F(LeasesTest, AShorterLeaseShortensTheOneHeld) {  // case 71
    for (uint64_t n = 1; n <= 5; ++n) post(grant(n, n - 1, 5000));
    clock_.advance_ms(10);
    GrantAnswer a = post(grant(6, 5, 1000));
    EXPECT_TRUE(a.ran);
    EXPECT_LT(a.left_ms, 1000);
    EXPECT_EQ(a.left_ms, 990);
}

TEST_F(LeasesTest, AListNotHeldIsAskedForAgain) {  // case 74
    post(grant(1, 0, 1000, 6));
    GrantAnswer a = post(grant(2, 1, 1000, 7, std::nullopt));
    EXPECT_FALSE(a.took);
    EXPECT_FALSE(a.ran);
    EXPECT_EQ(a.list, 6u);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::no_lease);  // nothing changed
    // The grant acknowledging that answer, with the list, runs the lease.
    a = post(grant(3, 2, 1000, 7, std::vector<std::string>{"acme"}));
    EXPECT_TRUE(a.ran);
    EXPECT_EQ(a.list, 7u);
}

TEST_F(LeasesTest, ALowerTermIsRefusedAlsoAfterARestart) {  // case 72
    post(grant(1, 0, 1000, 1, std::vector<std::string>{"acme"}, D1, 4));
    GrantOutcome out = leases_->take(grant(2, 1, 1000, 1, std::nullopt, D1, 3));
    ASSERT_TRUE(out.fence.fenced);
    EXPECT_EQ(out.fence.fenced->message, "n1 is held by " + D1 + " at term 4");
    EXPECT_EQ(out.fence.fenced->holder.authority, D1);
    EXPECT_EQ(out.fence.fenced->holder.term, 4u);
    EXPECT_EQ(out.fence.fenced->holder.history, H1);
    reopen();
    out = leases_->take(grant(3, 0, 1000, 1, std::nullopt, D1, 3));
    ASSERT_TRUE(out.fence.fenced);
    EXPECT_EQ(out.fence.fenced->holder.term, 4u);
    // A follow or a promotion carrying D1's term 3.
    FenceOutcome f = leases_->fence(D1, 3);
    ASSERT_TRUE(f.fenced);
    EXPECT_EQ(f.fenced->holder.term, 4u);
    EXPECT_TRUE(leases_->fence(D1, 4).ok());
    // A promotion raising the term is persisted too.
    EXPECT_TRUE(leases_->fence(D1, 5).ok());
    reopen();
    EXPECT_TRUE(leases_->fence(D1, 4).fenced);
}

TEST_F(LeasesTest, TheSameTermWithAnotherHistoryIsRefused) {
    post(grant(1, 0));
    GrantOutcome out = leases_->take(grant(2, 1, 1000, 1, std::nullopt, D1, 3, "0000000000000001"));
    ASSERT_TRUE(out.fence.fenced);
    EXPECT_EQ(out.fence.fenced->holder.history, H1);
}

TEST_F(LeasesTest, AnotherAuthorityWaitsForTheLeaseToLapse) {  // case 73
    lease_of(1000);
    GrantOutcome out =
        leases_->take(grant(1, 0, 1000, 1, std::vector<std::string>{"globex"}, D2, 1));
    ASSERT_TRUE(out.fence.fenced);
    EXPECT_EQ(out.fence.fenced->holder.authority, D1);
    EXPECT_EQ(out.fence.fenced->holder.term, 3u);
    clock_.advance_ms(1000);
    GrantAnswer a = post(grant(1, 0, 1000, 1, std::vector<std::string>{"globex"}, D2, 1));
    EXPECT_TRUE(a.took);
    EXPECT_EQ(leases_->holder()->authority, D2);
    a = post(grant(2, 1, 1000, 1, std::nullopt, D2, 1));
    EXPECT_TRUE(a.ran);
    EXPECT_EQ(leases_->check("globex"), LeaseVerdict::ok);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::not_named);
}

TEST_F(LeasesTest, ARestartForgetsTheAnswers) {  // case 77
    lease_of(5000);
    reopen();
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::no_lease);
    GrantAnswer a = post(grant(3, 2, 5000));
    EXPECT_TRUE(a.took);
    EXPECT_FALSE(a.ran);
    a = post(grant(4, 3, 5000, 1, std::nullopt));
    EXPECT_TRUE(a.ran);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::ok);
}

TEST_F(LeasesTest, ASuspendLongerThanTheLeaseLeavesNone) {
    lease_of(1000);
    clock_.advance_ms(30'000);  // the boot clock counts the suspend
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::lapsed);
    EXPECT_EQ(leases_->left_ms(), 0);
    // The grant read on waking acknowledges an answer from before the suspend: no lease.
    GrantAnswer a = post(grant(3, 2, 1000, 1, std::nullopt));
    EXPECT_TRUE(a.took);
    EXPECT_FALSE(a.ran);
    EXPECT_EQ(a.left_ms, 0);
    EXPECT_FALSE(a.lease);
    EXPECT_NE(leases_->check("acme"), LeaseVerdict::ok);
    a = post(grant(4, 3, 1000, 1, std::nullopt));
    EXPECT_TRUE(a.ran);
}

TEST_F(LeasesTest, OnlyTheLastSixteenAnswersAreKept) {
    for (uint64_t n = 1; n <= 17; ++n) post(grant(n, 0));
    GrantAnswer a = post(grant(18, 1));  // grant 1's answer was the 17th back: forgotten
    EXPECT_TRUE(a.took);
    EXPECT_FALSE(a.ran);
    a = post(grant(19, 3));  // still among the last 16
    EXPECT_TRUE(a.ran);
}

TEST_F(LeasesTest, AnswersAreKeptPerTerm) {
    post(grant(1, 0, 1000, 1, std::vector<std::string>{"acme"}, D1, 3));
    // A router promoted to term 4 acknowledging grant 1: answered under term 3, not 4.
    GrantAnswer a = post(grant(2, 1, 1000, 1, std::nullopt, D1, 4));
    EXPECT_TRUE(a.took);
    EXPECT_FALSE(a.ran);
}

TEST_F(LeasesTest, ReleaseDropsWhatTheAuthorityGave) {
    lease_of(1000);
    bool released = true;
    EXPECT_TRUE(leases_->release(D2, 1, released).ok());
    EXPECT_FALSE(released);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::ok);
    EXPECT_TRUE(leases_->release(D1, 2, released).fenced);  // fenced as a grant is
    EXPECT_TRUE(leases_->release(D1, 3, released).ok());
    EXPECT_TRUE(released);
    EXPECT_EQ(leases_->check("acme"), LeaseVerdict::no_lease);
    EXPECT_FALSE(leases_->holder());
    // Another directory's grant is taken at once.
    EXPECT_TRUE(post(grant(1, 0, 1000, 1, std::vector<std::string>{"acme"}, D2, 1)).took);
}

TEST_F(LeasesTest, AStateFileThatDoesNotParseIsRefused) {
    const std::string_view text = "{\"authorities\":[{\"authority\":1}";
    fs_.set_contents(state_path, std::as_bytes(std::span(text.data(), text.size())));
    Leases l("n1", state_path, fs_, clock_);
    engine::Status st = l.load();
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.to_string().find("fenec-node.state"), std::string::npos);
}

TEST_F(LeasesTest, ARaisedTermSurvivesACrash) {  // the state file durably replaced
    post(grant(1, 0, 1000, 1, std::vector<std::string>{"acme"}, D1, 4));
    fs_.crash(test::FaultFs::CrashMode::synced_only);  // power lost right after the answer
    reopen();
    GrantOutcome out = leases_->take(grant(2, 0, 1000, 1, std::nullopt, D1, 3));
    ASSERT_TRUE(out.fence.fenced);
    EXPECT_EQ(out.fence.fenced->holder.term, 4u);
    EXPECT_EQ(out.fence.fenced->holder.history, H1);
}

// The term a grant raises is in fenec-node.state before the grant is answered (§9.5): when the
// file cannot be kept, at whichever step, the grant is refused (a 500 on the route), nothing is
// taken, and the term was not raised (a term between the held one and the refused one is taken).
TEST_F(LeasesTest, AGrantWhoseTermIsNotKeptIsNotTaken) {
    enum class Step { write, fsync, rename, dir_fsync };
    for (Step step : {Step::write, Step::fsync, Step::rename, Step::dir_fsync}) {
        SCOPED_TRACE(static_cast<int>(step));
        fs_.clear_faults();
        fs_.remove(state_path).ignore();  // no authority held yet
        reopen();
        lease_of(5000);  // D1 at term 3 holds a running lease on acme
        switch (step) {
            case Step::write:
                fs_.fail_append(1, ENOSPC);
                break;
            case Step::fsync:
                fs_.fail_sync(1);
                break;
            case Step::rename:
                fs_.fail_rename(1);
                break;
            case Step::dir_fsync:
                fs_.fail_sync_dir(1);
                break;
        }
        GrantOutcome out =
            leases_->take(grant(3, 2, 5000, 2, std::vector<std::string>{"globex"}, D1, 6));
        EXPECT_FALSE(out.fence.fenced);
        EXPECT_EQ(out.fence.status.code(), engine::Code::io_error) << out.fence.status.to_string();
        EXPECT_FALSE(out.answer.took);
        EXPECT_FALSE(out.answer.ran);
        // The lease and list held before are untouched, and D1 is still held at term 3.
        EXPECT_EQ(leases_->check("acme"), LeaseVerdict::ok);
        EXPECT_EQ(leases_->check("globex"), LeaseVerdict::not_named);
        ASSERT_TRUE(leases_->holder());
        EXPECT_EQ(leases_->holder()->term, 3u);
        // Term 6 never fenced anything: a promotion at term 5 is taken (and kept).
        EXPECT_TRUE(leases_->fence(D1, 5).ok());
        EXPECT_TRUE(leases_->fence(D1, 4).fenced);
    }
}

TEST_F(LeasesTest, AFenceWhoseTermIsNotKeptIsRefused) {
    post(grant(1, 0));
    fs_.fail_rename(1);
    FenceOutcome f = leases_->fence(D1, 7);
    EXPECT_FALSE(f.ok());
    EXPECT_FALSE(f.fenced);
    EXPECT_EQ(f.status.code(), engine::Code::io_error);
    bool released = false;
    fs_.fail_sync(1);
    FenceOutcome r = leases_->release(D1, 7, released);
    EXPECT_EQ(r.status.code(), engine::Code::io_error);
    EXPECT_FALSE(released);
    ASSERT_TRUE(leases_->holder());  // the list is still held from D1, at term 3
    EXPECT_EQ(leases_->holder()->term, 3u);
    EXPECT_TRUE(leases_->fence(D1, 4).ok());  // 7 was never raised
}

}  // namespace
}  // namespace fenec::node::lease_test
