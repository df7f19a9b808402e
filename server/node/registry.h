// server/node/registry.h: the tenants of one node (node-http.md §11, seed 003's registry). A tenant
// is one file `<data-dir>/<t>.fenec`; it is opened on first use (on the caller's thread, which is
// a worker, never a loop), shared by every request and stream that holds it, and closed once
// nothing holds it and it has been idle `close_idle_ms`, or sooner, least recently used first,
// while the open tenants' memory passes `memory_max_bytes`.
//
// Invariant: at most one Database per file. A name's slot is locked while its tenant opens or
// closes, and a request for it waits on that lock; the slot leaves the map only after its
// database has closed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/database.h"
#include "engine/flusher.h"
#include "server/node/tenant.h"

namespace fenec::node {

// `[a-z0-9_-]{1,64}` (spec README 5).
bool valid_tenant_name(std::string_view name);

struct RegistryOptions {
    std::string data_dir;
    engine::SyncPolicy sync = engine::SyncPolicy::every_block();
    int64_t close_idle_ms = 300'000;   // 0: never
    uint64_t memory_max_bytes = 0;     // 0: no bound
    size_t changes_max = 4096;         // change-ring entries per tenant
    engine::Flusher* flusher = nullptr;
    std::function<int64_t()> now_ms;   // the wall clock, passed in
    std::function<void(Tenant&)> on_open;  // after the tenant opened, before it is served
    std::function<void(std::string_view reason)> on_close;  // "idle", "memory", "shutdown"
    uint64_t feed_bytes = 64ull << 20;  // --feed-buffer (engine.md §11)
};

enum class AcquireError : uint8_t { none, not_found, open_failed, memory };

struct Acquired {
    std::shared_ptr<Tenant> tenant;
    AcquireError error = AcquireError::none;
    std::string message;  // names the tenant and the failure
};

struct TenantInfo {
    std::string name;
    uint64_t bytes = 0;
    bool open = false;
};

// Why a tenant closed, as fenec_tenant_closes_total labels it.
enum class CloseReason : uint8_t { idle, memory, shutdown };

class Registry {
public:
    explicit Registry(RegistryOptions options);
    ~Registry();

    // The open tenant, opening it if needed. Blocks while it opens: call from a worker.
    Acquired acquire(std::string_view name);
    // The tenant if it is open now, else null; never waits on an open or a close (the event
    // loop's point reads).
    std::shared_ptr<Tenant> try_get(std::string_view name);
    // Creates `<t>.fenec` and lands `schema` (FenecQL statements) as its first blocks before the
    // tenant is served; `run_schema` runs them and answers the failing statement's error.
    // Exists → already_exists.
    engine::Status create(std::string_view name,
                          const std::function<engine::Status(Tenant&)>& run_schema,
                          engine::LineageId& lineage);
    std::vector<TenantInfo> list() const;
    // Puts a new file in the tenant's place (a follower's image, node-http.md §10.4): with the
    // slot locked, the open tenant (if any) leaves the map and its database closes (holders keep
    // reading what it held; it takes no write), `install` renames the new file in, and the next
    // acquire opens it.
    engine::Status replace(std::string_view name, const std::function<engine::Status()>& install);
    // Closes idle tenants (and, past the memory bound, the least recently used idle ones). The
    // node calls it once a second.
    void sweep();
    // Syncs, checkpoints and closes every open tenant (SIGTERM).
    void close_all();

    uint64_t memory_bytes() const;
    size_t open_count() const;
    uint64_t opens() const { return opens_; }
    uint64_t closes(CloseReason r) const { return closes_[static_cast<int>(r)]; }
    std::string path_of(std::string_view name) const;

private:
    // Lock order: a slot's mu, then mu_. `tenant` changes under both, so it may be read under
    // either.
    struct Slot {
        std::mutex mu;                    // held while the tenant opens or closes
        std::shared_ptr<Tenant> tenant;   // null: not open (or failed)
        bool dead = false;                // closed and leaving the map: look again
        int64_t failed_ms = 0;            // an open failure kept 10 s
        std::string failure;
    };

    Acquired open_locked(Slot& slot, std::string_view name);
    engine::OpenOptions open_options(std::string_view name, Tenant& tenant,
                                     index::IndexSet& indexes) const;
    void close_tenant(const std::shared_ptr<Tenant>& t);
    bool evict_one(CloseReason reason, int64_t now, bool idle_only_past_timeout);

    RegistryOptions options_;
    mutable std::mutex mu_;
    std::map<std::string, std::shared_ptr<Slot>, std::less<>> slots_;
    std::atomic<uint64_t> opens_{0};
    std::atomic<uint64_t> opening_bytes_{0};  // twice the file of each tenant being opened (§11)
    std::atomic<uint64_t> closes_[3] = {};
};

}  // namespace fenec::node
