// test/engine/lease_guard_test.cc: proves the lease guard's rules at the guard itself (engine.md
// §12; §16 tests 64-69 minus the landing, which the database tests cover): no lease refuses with
// no_lease; a lease names its tenants; the boot clock moving past the expiry (a suspend) lapses it,
// the expiry instant included; take replaces the lease whole and may move its expiry earlier;
// take_list never starts a lease and ends a running one; drop returns to none; left_ms reports
// what is left; and concurrent checks during takes and drops only ever see whole snapshots.
#include "engine/lease_guard.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "engine/clock.h"

namespace fenec::engine::lease_guard_test {
namespace {

TEST(LeaseGuardTest, NoLeaseRefusesEveryTenant) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    EXPECT_EQ(guard.state(), LeaseState::none);
    EXPECT_EQ(guard.check("a"), LeaseVerdict::no_lease);
    EXPECT_EQ(guard.check(""), LeaseVerdict::no_lease);
    EXPECT_EQ(guard.left_ms(), std::nullopt);
}

TEST(LeaseGuardTest, LeaseNamesItsTenants) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take({{"c", "a"}, clock.now_ns(), 2000});
    EXPECT_EQ(guard.state(), LeaseState::leased);
    EXPECT_EQ(guard.check("a"), LeaseVerdict::ok);
    EXPECT_EQ(guard.check("c"), LeaseVerdict::ok);
    EXPECT_EQ(guard.check("b"), LeaseVerdict::not_named);
    // A prefix or an extension of a named tenant is another tenant.
    EXPECT_EQ(guard.check("aa"), LeaseVerdict::not_named);
    EXPECT_EQ(guard.check(""), LeaseVerdict::not_named);
}

TEST(LeaseGuardTest, ManyTenantsFoundByBinarySearchWhateverTheirOrder) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    std::vector<std::string> tenants;
    for (int i = 999; i >= 0; i -= 2) tenants.push_back("t" + std::to_string(i));
    tenants.push_back("t1");  // a duplicate
    guard.take({tenants, clock.now_ns(), 1000});
    for (int i = 0; i < 1000; ++i) {
        const std::string t = "t" + std::to_string(i);
        EXPECT_EQ(guard.check(t), i % 2 == 1 ? LeaseVerdict::ok : LeaseVerdict::not_named) << t;
    }
}

TEST(LeaseGuardTest, SuspendPastExpiryLapsesAndTheExpiryInstantIsLapsed) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take({{"a"}, clock.now_ns(), 2000});
    clock.advance_ms(1999);
    EXPECT_EQ(guard.check("a"), LeaseVerdict::ok);
    EXPECT_EQ(guard.left_ms(), 1);
    clock.advance_ms(1);  // exactly at runs_from + 2000 ms
    EXPECT_EQ(guard.check("a"), LeaseVerdict::lapsed);
    EXPECT_EQ(guard.state(), LeaseState::lapsed);
    EXPECT_EQ(guard.left_ms(), 0);
    clock.advance_ms(60'000);  // a long suspend: the boot clock counted it
    EXPECT_EQ(guard.check("a"), LeaseVerdict::lapsed);
}

TEST(LeaseGuardTest, OneNanosecondBeforeExpiryStillLeased) {
    FakeBootClock clock(5'000'000'000);
    LeaseGuard guard(clock);
    guard.take({{"a"}, 5'000'000'001, 1000});  // expiry at 6'000'000'001
    clock.advance_ms(1000);                    // now 6'000'000'000
    EXPECT_EQ(guard.check("a"), LeaseVerdict::ok);
    EXPECT_EQ(guard.left_ms(), 1);  // 1 ns left rounds up: leased never reports 0
}

TEST(LeaseGuardTest, LapsedIsReportedBeforeNotNamed) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take({{"a"}, clock.now_ns(), 1000});
    clock.advance_ms(1000);
    EXPECT_EQ(guard.check("b"), LeaseVerdict::lapsed);
}

TEST(LeaseGuardTest, TakeFromAnEarlierMomentMovesExpiryEarlier) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    const int64_t t0 = clock.now_ns();
    clock.advance_ms(1000);
    guard.take({{"a"}, clock.now_ns(), 5000});  // expiry t0 + 6 s
    EXPECT_EQ(guard.left_ms(), 5000);
    // The grant answered at t0 runs from t0: 2 s from then, expiry t0 + 2 s, 1 s from now.
    guard.take({{"a"}, t0, 2000});
    EXPECT_EQ(guard.left_ms(), 1000);
    clock.advance_ms(1000);
    EXPECT_EQ(guard.check("a"), LeaseVerdict::lapsed);
}

TEST(LeaseGuardTest, TakeReplacesTheListWhole) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take({{"a", "b"}, clock.now_ns(), 5000});
    guard.take({{"c"}, clock.now_ns(), 5000});
    EXPECT_EQ(guard.check("a"), LeaseVerdict::not_named);
    EXPECT_EQ(guard.check("b"), LeaseVerdict::not_named);
    EXPECT_EQ(guard.check("c"), LeaseVerdict::ok);
}

TEST(LeaseGuardTest, TakeRevivesALapsedLease) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take({{"a"}, clock.now_ns(), 1000});
    clock.advance_ms(3000);
    ASSERT_EQ(guard.check("a"), LeaseVerdict::lapsed);
    guard.take({{"a"}, clock.now_ns(), 1000});
    EXPECT_EQ(guard.check("a"), LeaseVerdict::ok);
}

TEST(LeaseGuardTest, TakeListOnAGuardWithNoneLeavesWritesRefused) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take_list({"a"});
    EXPECT_EQ(guard.state(), LeaseState::none);
    EXPECT_EQ(guard.check("a"), LeaseVerdict::no_lease);
    EXPECT_EQ(guard.left_ms(), std::nullopt);
}

TEST(LeaseGuardTest, TakeListEndsARunningLease) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take({{"a"}, clock.now_ns(), 5000});
    ASSERT_EQ(guard.check("a"), LeaseVerdict::ok);
    guard.take_list({"a", "b"});
    EXPECT_EQ(guard.state(), LeaseState::lapsed);
    EXPECT_EQ(guard.check("a"), LeaseVerdict::lapsed);
    EXPECT_EQ(guard.check("b"), LeaseVerdict::lapsed);
    EXPECT_EQ(guard.left_ms(), 0);
    // The new list is the one a later lease would be checked against only if a take brings it;
    // take replaces the list again, so nothing of the old one survives.
    guard.take({{"b"}, clock.now_ns(), 1000});
    EXPECT_EQ(guard.check("a"), LeaseVerdict::not_named);
    EXPECT_EQ(guard.check("b"), LeaseVerdict::ok);
}

TEST(LeaseGuardTest, TakeListKeepsALapsedLeaseLapsed) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take({{"a"}, clock.now_ns(), 1000});
    clock.advance_ms(2000);
    guard.take_list({"a"});
    EXPECT_EQ(guard.check("a"), LeaseVerdict::lapsed);
    clock.advance_ms(10'000);
    EXPECT_EQ(guard.check("a"), LeaseVerdict::lapsed);
}

TEST(LeaseGuardTest, DropReturnsToNone) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take({{"a"}, clock.now_ns(), 5000});
    guard.drop();
    EXPECT_EQ(guard.state(), LeaseState::none);
    EXPECT_EQ(guard.check("a"), LeaseVerdict::no_lease);
    EXPECT_EQ(guard.left_ms(), std::nullopt);
    // After a drop take_list still starts nothing.
    guard.take_list({"a"});
    EXPECT_EQ(guard.check("a"), LeaseVerdict::no_lease);
}

TEST(LeaseGuardTest, LeftMsCountsDownWithTheBootClock) {
    FakeBootClock clock;
    LeaseGuard guard(clock);
    guard.take({{"a"}, clock.now_ns(), 2000});
    EXPECT_EQ(guard.left_ms(), 2000);
    clock.advance_ms(750);
    EXPECT_EQ(guard.left_ms(), 1250);
    // A lease from a moment before now has already run part of its length.
    guard.take({{"a"}, clock.now_ns() - 300 * kNsPerMs, 1000});
    EXPECT_EQ(guard.left_ms(), 700);
    // A lease from a moment after now (never given by the grant logic) counts its length and
    // the wait until it starts.
    guard.take({{"a"}, clock.now_ns() + 100 * kNsPerMs, 1000});
    EXPECT_EQ(guard.left_ms(), 1100);
    // Zero length: lapsed at once.
    guard.take({{"a"}, clock.now_ns(), 0});
    EXPECT_EQ(guard.check("a"), LeaseVerdict::lapsed);
    EXPECT_EQ(guard.left_ms(), 0);
}

// A boot clock safe to advance from one thread while others read it.
class AtomicBootClock final : public BootClock {
public:
    int64_t now_ns() const override { return now_ns_.load(std::memory_order_relaxed); }
    void advance_ns(int64_t ns) { now_ns_.fetch_add(ns, std::memory_order_relaxed); }

private:
    std::atomic<int64_t> now_ns_{1'000'000'000};
};

TEST(LeaseGuardTest, ConcurrentChecksSeeOnlyWholeSnapshots) {
    AtomicBootClock clock;
    LeaseGuard guard(clock);
    constexpr int kReaders = 4;
    std::atomic<int> readers_started{0};
    std::atomic<bool> stop{false};
    std::atomic<int64_t> seen[4] = {0, 0, 0, 0};  // per verdict of "a", indexed by the enum
    std::atomic<int> bad{0};
    // No list the writer installs names "z": ok for it would be a torn or invented snapshot.
    // No lease it takes runs past 10 s: left_ms beyond that would be one too.
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r) {
        readers.emplace_back([&] {
            readers_started.fetch_add(1);
            while (!stop.load(std::memory_order_relaxed)) {
                const auto va = static_cast<size_t>(guard.check("a"));
                if (va < 4) seen[va].fetch_add(1, std::memory_order_relaxed);
                if (va >= 4 || guard.check("z") == LeaseVerdict::ok) bad.fetch_add(1);
                const std::optional<int64_t> left = guard.left_ms();
                if (left && (*left < 0 || *left > 10'000)) bad.fetch_add(1);
            }
        });
    }
    while (readers_started.load() < kReaders) std::this_thread::yield();
    // Write until the readers have seen every verdict while the snapshots were changing under
    // them; the bound only keeps a broken guard from hanging the suite.
    auto all_seen = [&] {
        for (const std::atomic<int64_t>& n : seen) {
            if (n.load() < 100) return false;
        }
        return true;
    };
    int64_t writes = 0;
    for (; writes < 20'000 || (!all_seen() && writes < 20'000'000); ++writes) {
        switch (writes % 4) {
            case 0:  // a named, running
                guard.take({{"a", "b", "c" + std::to_string(writes)}, clock.now_ns(), 10'000});
                break;
            case 1:  // ended: lapsed
                guard.take_list({"x", "y"});
                break;
            case 2:  // running, a not named
                guard.take({{"q"}, clock.now_ns(), 5});
                break;
            default:  // none
                guard.drop();
                break;
        }
        clock.advance_ns(1000);
    }
    stop.store(true);
    for (std::thread& t : readers) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_TRUE(all_seen()) << "after " << writes << " writes";
    guard.drop();
    EXPECT_EQ(guard.check("a"), LeaseVerdict::no_lease);
}

}  // namespace
}  // namespace fenec::engine::lease_guard_test
