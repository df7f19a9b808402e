// engine/flusher.cc: the interval sync and TTL sweep thread of engine/flusher.h.
#include "engine/flusher.h"

#include <chrono>
#include <vector>

#include "engine/database.h"

namespace fenec::engine {

Flusher::Flusher(int64_t interval_ms, int64_t sweep_interval_ms)
    : interval_ms_(interval_ms), sweep_interval_ms_(sweep_interval_ms) {
    thread_ = std::thread([this] { run(); });
}

Flusher::~Flusher() {
    {
        std::lock_guard<std::mutex> g(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void Flusher::add(Database* db) {
    std::lock_guard<std::mutex> g(mu_);
    dbs_.insert(db);
}

void Flusher::remove(Database* db) {
    std::unique_lock<std::mutex> l(mu_);
    dbs_.erase(db);
    cv_.wait(l, [&] { return busy_ != db; });
}

uint64_t Flusher::passes() const {
    std::lock_guard<std::mutex> g(mu_);
    return passes_;
}

void Flusher::run() {
    using clock = std::chrono::steady_clock;
    auto next_sweep = clock::now() + std::chrono::milliseconds(sweep_interval_ms_);
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
        cv_.wait_for(l, std::chrono::milliseconds(interval_ms_), [&] { return stop_; });
        if (stop_) break;
        const bool sweep = sweep_interval_ms_ > 0 && clock::now() >= next_sweep;
        if (sweep) next_sweep = clock::now() + std::chrono::milliseconds(sweep_interval_ms_);
        std::vector<Database*> pass(dbs_.begin(), dbs_.end());
        for (Database* db : pass) {
            if (!dbs_.count(db)) continue;  // removed meanwhile
            busy_ = db;
            l.unlock();
            // Errors latch the database; its writers and readers learn of them there.
            db->sync().ignore();
            if (sweep && !db->history().replica) db->sweep_expired().status().ignore();
            if (sweep) db->checkpoint_graphs().status().ignore();
            l.lock();
            busy_ = nullptr;
            cv_.notify_all();
        }
        ++passes_;
    }
}

}  // namespace fenec::engine
