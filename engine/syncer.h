// engine/syncer.h: the group commit's threads for writers that do not wait (engine.md §5.4),
// owned by whoever wires a process together (the node's main), as the Flusher is.
//
// A database opened with a Syncer answers Database::when_durable(seq, done) without blocking its
// caller: `done` is queued on the database and the database on the Syncer, whose threads take the
// databases queued in turn and run one sync round on each (Database::sync_round): one fsync covers
// everything the database had landed when it began, every waiter it covers is called, and the
// database is queued again if waiters landed while it ran; that next round runs at once on the
// same thread while no other database waits for one, without waking another thread. So each fsync
// of a file holds every block that landed while the previous one ran, however many writers there
// are (a worker that waits in wait_durable can hold only as many as there are workers), and the
// rounds of different databases run at once on up to `threads` threads, so their fsyncs meet in one
// journal commit of the file system rather than queueing behind each other.
//
// A group round (across files): given a flush of the whole file system the databases' files are
// on (`flush_all`, Fs::sync_fs of the node's data directory), a thread that takes a database
// while others are queued takes every queued database not in a round (up to group_max) and covers
// them all with that one flush instead of an fsync each (Database::begin_group_round and the
// calls beside it); each file's own write-back errors are then asked of it (File::check_written).
// A failed flush may have been any file's (another program's included), so each file is then
// fsynced, and only those whose own fsync fails latch. Where only one of the databases taken is
// left to sync, it gets its own fsync and no flush.
// With one thread, every database that gets a waiter while a flush runs goes into the next one:
// the group commit across the tenants of a node. A round of one database is an fsync of its file
// as before.
//
// Invariant: a database is run by at most one round at a time, and the rounds of one database
// never overlap with another sync of it (Database keeps its one `syncing_` flag either way).
// Thread-safe. Databases queue themselves (when_durable, or a round that leaves waiters) and
// leave on close (remove), before the Syncer is destroyed.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/status.h"

namespace fenec::engine {

class Database;

class Syncer {
public:
    // The most databases one group round covers: the rest wait for the next.
    static constexpr size_t group_max = 256;

    // Starts `threads` threads (at least one; engine::limits::sync_threads is the node's). With
    // `flush_all`, rounds over several queued databases are group rounds (above): it must make
    // durable every byte written to every file of the databases queued on this Syncer.
    explicit Syncer(size_t threads, std::function<Status()> flush_all = {});
    ~Syncer();  // runs the rounds still queued, then joins the threads
    Syncer(const Syncer&) = delete;
    Syncer& operator=(const Syncer&) = delete;

    // Asks for a round of `db`; a database already queued is not queued twice. Database calls it
    // under its sync_mu_ (the lock order is the database's sync_mu_, then the Syncer's).
    void queue(Database* db);
    // Drops `db` from the queue and returns once no round runs on it: from its close, after which
    // it is never queued again.
    void remove(Database* db);
    // Rounds run so far (each at most one fsync, or one flush_all and, after a failed one, an
    // fsync a database).
    uint64_t rounds() const;
    // Group rounds that ran a flush so far, and the databases they covered (two or more each).
    uint64_t group_rounds() const;
    uint64_t group_covered() const;

private:
    void run();
    // Whether a database other than `db` is queued and free for a round (mu_ held).
    bool other_waiting(Database* db) const;
    // Takes every queued database not in a round (up to group_max) off the queue into busy_.
    std::vector<Database*> take_group();
    // One flush_all for those of `dbs` with waiters left (mu_ not held); the count it covered (0
    // when it did not run).
    size_t group_round(const std::vector<Database*>& dbs);

    const std::function<Status()> flush_all_;

    mutable std::mutex mu_;
    std::condition_variable work_cv_;  // a database queued, or stopping
    std::condition_variable idle_cv_;  // a round ended (remove waits on it)
    std::deque<Database*> queue_;
    std::unordered_set<Database*> queued_;  // the members of queue_
    std::unordered_set<Database*> busy_;    // databases a round runs on, outside mu_
    bool stop_ = false;
    uint64_t rounds_ = 0;
    uint64_t group_rounds_ = 0;
    uint64_t group_covered_ = 0;
    std::vector<std::thread> threads_;
};

}  // namespace fenec::engine
