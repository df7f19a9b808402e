// server/runtime/timers.h: one thread that runs callbacks at their time, for the node (a 401's
// delay, node-http.md §3.3, a held request's deadline, a parked request's poll) and the router (its
// refusal delay, router.md §3). Callbacks must be short (hand work to the
// pool); at most timers_max wait at once. `after` refuses (false) past that bound or once stopped,
// and never runs the callback itself: the caller decides what a refusal means.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace fenec::server {

class Timers {
  public:
    static constexpr size_t timers_max = 1 << 16;  // bounded like every queue (STYLE.md)

    Timers() : thread_([this] { run(); }) {}
    ~Timers() { stop(); }
    Timers(const Timers&) = delete;
    Timers& operator=(const Timers&) = delete;

    [[nodiscard]] bool after(int64_t ms, std::function<void()> fn) {
        const auto at = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        std::lock_guard lock(mu_);
        if (stop_ || queue_.size() >= timers_max) return false;
        queue_.emplace(at, std::move(fn));
        cv_.notify_one();
        return true;
    }

    void stop() {
        {
            std::lock_guard lock(mu_);
            if (stop_) return;
            stop_ = true;
        }
        cv_.notify_one();
        thread_.join();
        queue_.clear();  // what waits at stop() is dropped: the owner answers it first
    }

  private:
    void run() {
        std::unique_lock lock(mu_);
        while (!stop_) {
            if (queue_.empty()) {
                cv_.wait(lock);
                continue;
            }
            auto first = queue_.begin();
            if (first->first > std::chrono::steady_clock::now()) {
                cv_.wait_until(lock, first->first);
                continue;
            }
            std::function<void()> fn = std::move(first->second);
            queue_.erase(first);
            lock.unlock();
            fn();
            lock.lock();
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> queue_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace fenec::server
