// server/runtime/workers.cc: the bounded worker pool (server/runtime/workers.h). Jobs run in FIFO
// order; the queue never holds more than queue_max_ jobs; shutdown drains what was accepted, then
// joins.
#include "server/runtime/workers.h"

#include <algorithm>
#include <utility>

namespace fenec::server {

WorkerPool::WorkerPool(size_t threads, size_t queue_max)
    : queue_max_(std::max<size_t>(1, queue_max)) {
    threads = std::max<size_t>(1, threads);
    threads_.reserve(threads);
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() { shutdown(); }

bool WorkerPool::submit(std::function<void()> job) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || queue_.size() >= queue_max_) return false;
        queue_.push_back(std::move(job));
    }
    ready_.notify_one();
    return true;
}

size_t WorkerPool::queued() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
}

void WorkerPool::shutdown() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ && threads_.empty()) return;
        stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& thread : threads_) {
        if (thread.joinable()) thread.join();
    }
    threads_.clear();
}

void WorkerPool::work() {
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lock(mutex_);
            ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping, and everything accepted has run
            job = std::move(queue_.front());
            queue_.pop_front();
        }
        job();
    }
}

}  // namespace fenec::server
