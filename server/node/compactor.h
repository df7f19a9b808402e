// server/node/compactor.h: compaction in the background (node-http.md §11.4). Appends only grow a
// tenant's file: every superseded version, every deleted row and every superseded graph record
// stays in it until a rewrite. The compactor rewrites the open tenant with the most dead bytes,
// once its dead share reaches `dead_share_min` of a file of at least `file_bytes_min`, or once the
// engine left a vector graph stale rather than append one more graph record past its budget
// (engine::Database::checkpoint_graphs: a rewrite writes every graph once), on a thread
// of its own, one tenant at a time, so no request ever waits behind it (the engine's rewrite holds
// the writer lock only for its snapshot and its rename, engine.md §8).
//
// Invariant: at most one background compaction runs on a node (compactions_at_once_max): a
// rewrite holds the tenant's live image in memory while it writes the side file, so two at once
// could double the node's peak.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/status.h"
#include "server/obs/metrics.h"

namespace fenec::obs {
class LineLog;
}

namespace fenec::node {

class Registry;
class Tenant;

struct CompactorOptions {
    double dead_share_min = 0.5;        // --compact-dead; 0: never in the background
    uint64_t file_bytes_min = 1 << 20;  // --compact-min: smaller files are left as they are
    int64_t check_ms = 1000;            // how often the open tenants are looked over
    // A tenant whose compaction failed (read-only, a full disk, an I/O error) is left alone this
    // long before it is tried again, so one bad file is not rewritten every check.
    int64_t retry_after_failure_ms = 600'000;
};

class Compactor {
  public:
    // `registry` and `metrics` outlive the Compactor; `audit` may be null (no --audit) and, when
    // set, outlives it too. `now_ms` is the wall clock of the audit lines.
    Compactor(Registry& registry, obs::Registry& metrics, obs::LineLog* audit,
              std::function<int64_t()> now_ms, CompactorOptions options);
    ~Compactor();
    Compactor(const Compactor&) = delete;
    Compactor& operator=(const Compactor&) = delete;

    // Starts the thread; a no-op when dead_share_min is 0.
    void start();
    // Stops the thread after the compaction in progress, if any, ends. Idempotent.
    void stop();

    // A `compact` statement's outcome, counted beside the background's (trigger="statement"):
    // `error` its engine code, nullopt when it succeeded.
    void count_statement(std::optional<engine::Code> error, uint64_t before_bytes,
                         uint64_t after_bytes);

  private:
    // A rewrite cancelled (its tenant left service: a delete, an install) is no failure: the
    // tenant is not set aside for retry_after_failure_ms.
    enum class Outcome { ok, failed, cancelled };
    static Outcome outcome_of(std::optional<engine::Code> error);
    void run();
    // Compacts `t` now: counted, audited.
    Outcome compact(Tenant& t);
    void count(const char* trigger, Outcome outcome, uint64_t before_bytes, uint64_t after_bytes);

    Registry& registry_;
    obs::LineLog* audit_;
    std::function<int64_t()> now_ms_;
    CompactorOptions options_;
    obs::CounterFamily* compactions_;  // trigger, outcome
    obs::Counter* reclaimed_bytes_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::map<std::string, int64_t> failed_until_ms_;  // the compactor thread's own
    std::atomic<uint64_t> checks_{0};                 // looks over the open tenants so far
    std::thread thread_;
};

}  // namespace fenec::node
