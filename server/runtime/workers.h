// server/runtime/workers.h: the worker pool the node runs statements on, so no loop thread waits on
// a statement, the disk or a lock held long (node-http.md §2.1). A plain bounded FIFO under one
// mutex: `queue_max` is the bound (STYLE.md), and a full queue refuses rather than grows — the
// caller answers 503 and nothing queues without limit. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fenec::server {

class WorkerPool {
  public:
    // Starts `threads` threads (at least one); at most `queue_max` jobs wait (at least one).
    explicit WorkerPool(size_t threads, size_t queue_max);
    ~WorkerPool();  // shutdown()
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    // Queues `job`; false, and `job` dropped, when `queue_max` jobs wait or after shutdown().
    bool submit(std::function<void()> job);
    // Refuses new jobs, runs the ones already queued, joins the threads. Idempotent; not from a
    // worker thread.
    void shutdown();

    size_t queued() const;  // jobs waiting (not running)
    size_t threads() const { return threads_.size(); }

  private:
    void work();

    const size_t queue_max_;
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> queue_;  // at most queue_max_
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace fenec::server
