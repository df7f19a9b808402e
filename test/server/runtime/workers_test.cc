// test/server/runtime/workers_test.cc: proves the worker pool's fair share
// (server/runtime/workers.h) without timing anything: jobs block on latches, and the order in
// which they start is the evidence. Keys waiting are served round-robin; a key holding workers
// waits behind a key holding none; a key alone takes every worker; one key's jobs keep their
// order; the queue bound counts every key's jobs together, and a job past the bound is taken
// beyond it.
#include "server/runtime/workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test/support/wait.h"

namespace fenec::server::workers_test {
namespace {

// The names of jobs in the order they started.
struct Starts {
    std::mutex mu;
    std::vector<std::string> names;
    void add(const std::string& n) {
        std::lock_guard lock(mu);
        names.push_back(n);
    }
    std::vector<std::string> get() {
        std::lock_guard lock(mu);
        return names;
    }
    size_t size() { return get().size(); }
};

TEST(WorkerPool, RoundRobinsKeys) {
    WorkerPool pool(1, 64);
    Starts starts;
    std::latch gate(1);
    ASSERT_TRUE(pool.submit(9, [&] { gate.wait(); }));
    ASSERT_TRUE(
        fenec::test::wait_until([&] { return pool.queued() == 0; }));  // the one worker is held
    // Key 1 queues three jobs before keys 2 and 3 queue any: FIFO would run all of key 1 first.
    for (const char* n : {"a1", "a2", "a3"}) ASSERT_TRUE(pool.submit(1, [&, n] { starts.add(n); }));
    for (const char* n : {"b1", "b2"}) ASSERT_TRUE(pool.submit(2, [&, n] { starts.add(n); }));
    ASSERT_TRUE(pool.submit(3, [&] { starts.add("c1"); }));
    gate.count_down();
    pool.shutdown();
    EXPECT_EQ(starts.get(), (std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3"}));
}

TEST(WorkerPool, AKeyHoldingWorkersWaitsBehindOneHoldingNone) {
    WorkerPool pool(2, 64);
    Starts starts;
    std::latch release_a1(1), release_a2(1);
    ASSERT_TRUE(pool.submit(1, [&] {
        starts.add("a1");
        release_a1.wait();
    }));
    ASSERT_TRUE(pool.submit(1, [&] {
        starts.add("a2");
        release_a2.wait();
    }));
    ASSERT_TRUE(fenec::test::wait_until(
        [&] { return starts.size() == 2; }));  // alone, key 1 took both workers
    ASSERT_TRUE(pool.submit(1, [&] { starts.add("a3"); }));
    ASSERT_TRUE(pool.submit(1, [&] { starts.add("a4"); }));
    ASSERT_TRUE(pool.submit(2, [&] { starts.add("b1"); }));  // after key 1's waiting jobs
    release_a1.count_down();
    // The freed worker goes to key 2 (none running), not to key 1's older a3.
    ASSERT_TRUE(fenec::test::wait_until([&] { return starts.size() >= 3; }));
    EXPECT_EQ(starts.get()[2], "b1");
    release_a2.count_down();
    pool.shutdown();
    EXPECT_EQ(starts.get(), (std::vector<std::string>{"a1", "a2", "b1", "a3", "a4"}));
}

TEST(WorkerPool, AKeyAloneTakesEveryWorker) {
    WorkerPool pool(3, 64);
    std::atomic<int> running{0};
    std::latch release(1);
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(pool.submit(7, [&] {
            running++;
            release.wait();
        }));
    }
    EXPECT_TRUE(fenec::test::wait_until([&] { return running.load() == 3; }));
    release.count_down();
    pool.shutdown();
}

TEST(WorkerPool, QueueBoundCountsEveryKey) {
    WorkerPool pool(1, 3);
    std::latch gate(1);
    std::atomic<int> ran{0};
    ASSERT_TRUE(pool.submit(1, [&] { gate.wait(); }));
    ASSERT_TRUE(fenec::test::wait_until([&] { return pool.queued() == 0; }));
    EXPECT_TRUE(pool.submit(1, [&] { ran++; }));
    EXPECT_TRUE(pool.submit(2, [&] { ran++; }));
    EXPECT_TRUE(pool.submit(3, [&] { ran++; }));
    EXPECT_EQ(pool.queued(), 3u);
    EXPECT_FALSE(pool.submit(4, [&] { ran++; }));  // three wait, over three keys: full
    gate.count_down();
    pool.shutdown();
    EXPECT_EQ(ran, 3);
}

// A job past the bound (a landed write's answer, which must neither wait nor be dropped) is taken
// with the queue full, and runs; after shutdown it is refused like any other.
TEST(WorkerPool, AJobPastTheBoundIsTakenWithTheQueueFullButNotAfterShutdown) {
    WorkerPool pool(1, 1);
    std::latch gate(1);
    std::atomic<int> ran{0};
    ASSERT_TRUE(pool.submit(1, [&] { gate.wait(); }));
    ASSERT_TRUE(fenec::test::wait_until([&] { return pool.queued() == 0; }));
    EXPECT_TRUE(pool.submit(1, [&] { ran++; }));
    EXPECT_FALSE(pool.submit(2, [&] { ran++; }));  // full
    EXPECT_TRUE(pool.submit_past_bound(2, [&] { ran += 10; }));
    EXPECT_EQ(pool.queued(), 2u);
    gate.count_down();
    pool.shutdown();
    EXPECT_EQ(ran, 11);
    EXPECT_FALSE(pool.submit_past_bound(2, [&] { ran += 100; }));
}

}  // namespace
}  // namespace fenec::server::workers_test
