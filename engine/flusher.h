// engine/flusher.h: the one background thread of the engine, owned by whoever wires a process
// together (the node's main, a tool). It syncs every database opened with the `interval` policy
// once per interval, and about once a minute sweeps expired rows (TTL) from every primary in
// batches of limits::ttl_sweep_batch and writes a graph record for each vector field written
// since its last one (Database::checkpoint_graphs), so a reopen restores graphs, not rebuilds. Databases register on open and leave on close; the
// engine itself owns no threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>

namespace fenec::engine {

class Database;

class Flusher {
public:
    // `interval_ms`: how often databases under SyncPolicy::interval are synced;
    // `sweep_interval_ms`: how often expired rows are swept (0: never).
    explicit Flusher(int64_t interval_ms = 250, int64_t sweep_interval_ms = 60'000);
    ~Flusher();  // stops and joins the thread
    Flusher(const Flusher&) = delete;
    Flusher& operator=(const Flusher&) = delete;

    void add(Database* db);
    void remove(Database* db);  // returns once no pass is using `db`
    uint64_t passes() const;

private:
    void run();

    const int64_t interval_ms_;
    const int64_t sweep_interval_ms_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::set<Database*> dbs_;
    Database* busy_ = nullptr;  // the database a pass is working on, outside mu_
    bool stop_ = false;
    uint64_t passes_ = 0;
    std::thread thread_;
};

}  // namespace fenec::engine
