// engine/syncer.cc: the group commit's threads of engine/syncer.h.
#include "engine/syncer.h"

#include <algorithm>

#include "engine/database.h"

namespace fenec::engine {

Syncer::Syncer(size_t threads) {
    const size_t n = std::max<size_t>(1, threads);
    threads_.reserve(n);
    for (size_t i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
}

Syncer::~Syncer() {
    {
        std::lock_guard<std::mutex> g(mu_);
        stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
}

void Syncer::queue(Database* db) {
    {
        std::lock_guard<std::mutex> g(mu_);
        if (!queued_.insert(db).second) return;
        queue_.push_back(db);
    }
    work_cv_.notify_one();
}

void Syncer::remove(Database* db) {
    std::unique_lock<std::mutex> l(mu_);
    if (queued_.erase(db)) queue_.erase(std::find(queue_.begin(), queue_.end(), db));
    idle_cv_.wait(l, [&] { return !busy_.contains(db); });
}

uint64_t Syncer::rounds() const {
    std::lock_guard<std::mutex> g(mu_);
    return rounds_;
}

void Syncer::run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
        // A database whose round runs on another thread waits its turn: one round at a time.
        auto next = std::find_if(queue_.begin(), queue_.end(),
                                 [&](Database* db) { return !busy_.contains(db); });
        if (next == queue_.end()) {
            if (stop_ && queue_.empty()) return;
            work_cv_.wait(l);
            continue;
        }
        Database* db = *next;
        queue_.erase(next);
        queued_.erase(db);
        busy_.insert(db);
        l.unlock();
        db->sync_round(*this);
        l.lock();
        busy_.erase(db);
        ++rounds_;
        idle_cv_.notify_all();
        // The database may have been queued again while it ran; a thread that skipped it wakes.
        if (queued_.contains(db)) work_cv_.notify_one();
    }
}

}  // namespace fenec::engine
