// engine/syncer.cc: the group commit's threads of engine/syncer.h.
#include "engine/syncer.h"

#include <algorithm>
#include <optional>

#include "engine/database.h"

namespace fenec::engine {

Syncer::Syncer(size_t threads, std::function<Status()> flush_all)
    : flush_all_(std::move(flush_all)) {
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
        // A database whose round is running is queued again by that round as it ends (its
        // waiters left): the thread running it takes the next round itself or wakes another
        // (run), so waking one now would only find it busy.
        if (busy_.contains(db)) return;
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

uint64_t Syncer::group_rounds() const {
    std::lock_guard<std::mutex> g(mu_);
    return group_rounds_;
}

uint64_t Syncer::group_covered() const {
    std::lock_guard<std::mutex> g(mu_);
    return group_covered_;
}

std::vector<Database*> Syncer::take_group() {
    std::vector<Database*> dbs;
    for (auto it = queue_.begin(); it != queue_.end() && dbs.size() < group_max;) {
        if (busy_.contains(*it)) {
            ++it;
            continue;
        }
        dbs.push_back(*it);
        busy_.insert(*it);
        queued_.erase(*it);
        it = queue_.erase(it);
    }
    return dbs;
}

size_t Syncer::group_round(const std::vector<Database*>& dbs) {
    for (Database* db : dbs) db->settle_covered();
    std::vector<Database::GroupRound> rounds;
    rounds.reserve(dbs.size());
    for (Database* db : dbs) {
        if (auto r = db->begin_group_round()) rounds.push_back(std::move(*r));
    }
    // One database left to sync: its own fsync, which no other file's error can fail.
    std::optional<Status> flushed;
    if (rounds.size() > 1) flushed = flush_all_();
    for (Database::GroupRound& r : rounds) r.db->end_group_round(r, flushed ? &*flushed : nullptr);
    for (const Database::GroupRound& r : rounds) r.db->tell_group_round(r);
    return flushed ? rounds.size() : 0;
}

bool Syncer::other_waiting(Database* db) const {
    return std::any_of(queue_.begin(), queue_.end(),
                       [&](Database* d) { return d != db && !busy_.contains(d); });
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
        if (flush_all_ && other_waiting(db)) {
            const std::vector<Database*> dbs = take_group();
            l.unlock();
            const size_t covered = group_round(dbs);
            l.lock();
            ++rounds_;
            if (covered > 0) {  // a flush ran (else one database's fsync, or nothing to sync)
                ++group_rounds_;
                group_covered_ += covered;
            }
            bool again = false;
            for (Database* d : dbs) {
                busy_.erase(d);
                again = again || queued_.contains(d);
            }
            idle_cv_.notify_all();
            // Waiters that came during the flush queued their databases again: with more than
            // one thread, another may take them now; this one looks again at once either way.
            if (again && threads_.size() > 1) work_cv_.notify_one();
            continue;
        }
        queue_.erase(next);
        queued_.erase(db);
        busy_.insert(db);
        for (;;) {
            l.unlock();
            db->sync_round(*this);
            l.lock();
            ++rounds_;
            // Writes that landed during the fsync queued the database again. While no other
            // database waits for a thread, its next round runs here at once, and no other
            // thread is woken for it (queue did not wake one either): a woken thread would only
            // find it taken, two needless context switches a round on a loaded machine.
            if (!queued_.contains(db) || other_waiting(db)) break;
            queue_.erase(std::find(queue_.begin(), queue_.end(), db));
            queued_.erase(db);
        }
        busy_.erase(db);
        idle_cv_.notify_all();
        // Queued again while it ran, with others waiting: the next thread free takes it in turn.
        if (queued_.contains(db)) work_cv_.notify_one();
    }
}

}  // namespace fenec::engine
