// server/runtime/workers.h: the worker pool the node runs statements on, so no loop thread waits on
// a statement, the disk or a lock held long (node-http.md §2.1). Bounded: `queue_max` jobs wait at
// most, over every key together (STYLE.md), and a full queue refuses rather than grows — the
// caller answers 503 and nothing queues without limit. Thread-safe.
//
// Fair share: every job carries an opaque key (the node passes a hash of the tenant's name; the
// pool knows nothing of tenants). Jobs of one key run in the order submitted. A free worker takes
// the next job of the key with the fewest jobs running, among keys with jobs waiting, ties going
// round-robin in the order the keys began to wait. So while k keys wait, none holds more than
// max(1, threads / k) workers for longer than its running jobs take, a key alone may use every
// worker, and no worker idles while a job waits.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace fenec::server {

class WorkerPool {
  public:
    // Starts `threads` threads (at least one); at most `queue_max` jobs wait (at least one).
    explicit WorkerPool(size_t threads, size_t queue_max);
    ~WorkerPool();  // shutdown()
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    // Queues `job` under `key`; false, and `job` dropped, when `queue_max` jobs wait or after
    // shutdown().
    bool submit(uint64_t key, std::function<void()> job);
    // As submit, taken past `queue_max` too: for a job that finishes what has already happened (a
    // landed write's answer) and whose count something else bounds. False only after shutdown().
    bool submit_past_bound(uint64_t key, std::function<void()> job);
    // Under key 0.
    bool submit(std::function<void()> job) { return submit(0, std::move(job)); }
    // Refuses new jobs, runs the ones already queued, joins the threads. Idempotent; not from a
    // worker thread.
    void shutdown();

    size_t queued() const;     // jobs waiting (not running)
    uint64_t started() const;  // jobs taken by a worker to run, since the pool began
    size_t threads() const { return threads_.size(); }

  private:
    struct Lane {
        std::deque<std::function<void()>> jobs;  // waiting, in submission order
        size_t running = 0;
    };

    // Queues `job` under `key` while fewer than `queue_max` wait; false after shutdown().
    bool push(uint64_t key, std::function<void()> job, size_t queue_max);
    void work();
    // The next job to run, its lane's running count raised; under mutex_, with a job waiting.
    std::function<void()> take(uint64_t& key);

    const size_t queue_max_;
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::unordered_map<uint64_t, Lane> lanes_;  // keys with jobs waiting or running
    std::list<uint64_t> ring_;                  // each key with jobs waiting once, in turn order
    size_t queued_ = 0;  // at most queue_max_, but for jobs taken past the bound
    uint64_t started_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace fenec::server
