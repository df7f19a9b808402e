// server/runtime/workers.cc: the bounded, fair worker pool (server/runtime/workers.h). One FIFO
// per key; a ring of the keys with jobs waiting; a free worker serves the key with the fewest
// jobs running, first in the ring among equals, then moves it to the ring's back. The queues
// never hold more than queue_max_ jobs together but for those taken past the bound
// (submit_past_bound); shutdown drains what was accepted, then joins.
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

bool WorkerPool::submit(uint64_t key, std::function<void()> job) {
    return push(key, std::move(job), queue_max_);
}

bool WorkerPool::submit_past_bound(uint64_t key, std::function<void()> job) {
    return push(key, std::move(job), SIZE_MAX);
}

bool WorkerPool::push(uint64_t key, std::function<void()> job, size_t queue_max) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || queued_ >= queue_max) return false;
        Lane& lane = lanes_[key];
        if (lane.jobs.empty()) ring_.push_back(key);
        lane.jobs.push_back(std::move(job));
        ++queued_;
    }
    ready_.notify_one();
    return true;
}

size_t WorkerPool::queued() const {
    std::lock_guard lock(mutex_);
    return queued_;
}

uint64_t WorkerPool::started() const {
    std::lock_guard lock(mutex_);
    return started_;
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

std::function<void()> WorkerPool::take(uint64_t& key) {
    // The ring holds only the keys waiting, a handful at a time: a walk is cheaper than an index.
    auto best = ring_.begin();
    size_t least = lanes_.at(*best).running;
    for (auto it = std::next(best); it != ring_.end() && least > 0; ++it) {
        const size_t running = lanes_.at(*it).running;
        if (running < least) {
            best = it;
            least = running;
        }
    }
    key = *best;
    Lane& lane = lanes_.at(key);
    std::function<void()> job = std::move(lane.jobs.front());
    lane.jobs.pop_front();
    --queued_;
    ++started_;
    ++lane.running;
    ring_.erase(best);
    if (!lane.jobs.empty()) ring_.push_back(key);  // its turn is used: to the back
    return job;
}

void WorkerPool::work() {
    for (;;) {
        std::function<void()> job;
        uint64_t key = 0;
        {
            std::unique_lock lock(mutex_);
            ready_.wait(lock, [this] { return stopping_ || !ring_.empty(); });
            if (ring_.empty()) return;  // stopping, and everything accepted has run
            job = take(key);
        }
        job();
        job = nullptr;  // what it captured goes before the lane is told
        std::lock_guard lock(mutex_);
        Lane& lane = lanes_.at(key);
        if (--lane.running == 0 && lane.jobs.empty()) lanes_.erase(key);
    }
}

}  // namespace fenec::server
