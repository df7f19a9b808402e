// engine/lease_guard.h: the lease guard (engine.md §12, §13.4). A node started with `--lease`
// writes a tenant only while its lease names it and has not lapsed; one LeaseGuard per node
// answers that question for every landing, from any thread.
//
// Invariant: the guard's whole state (none or a lease, the sorted tenant list, the expiry on the
// boot clock) lives in one immutable snapshot, replaced whole by `take`, `take_list` and `drop`.
// A check sees one snapshot, never half of an old one and half of a new one. Time is read only
// through the BootClock passed in, which keeps counting through a suspend: a node that wakes
// past its expiry holds a lapsed lease, never a running one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/clock.h"
#include "engine/status.h"

namespace fenec::engine {

// What the engine asks before a block begins and again as it lands (§5.3 step 4). Implementations
// must be safe to call from any thread and must not block.
class LandingGate {
public:
    virtual ~LandingGate() = default;
    virtual LeaseVerdict check(std::string_view tenant) const = 0;
};

enum class LeaseState : uint8_t {
    none,    // at start, after drop(), or after take_list() on a guard that held none
    leased,  // a lease is held and the boot clock is before its expiry
    lapsed,  // a lease is held and the boot clock is at or past its expiry
};

class LeaseGuard final : public LandingGate {
public:
    // `clock` must outlive the guard. The guard starts with no lease: every write is refused.
    explicit LeaseGuard(const BootClock& clock);
    // No check may be running on another thread.
    ~LeaseGuard() override;
    LeaseGuard(const LeaseGuard&) = delete;
    LeaseGuard& operator=(const LeaseGuard&) = delete;

    struct Lease {
        std::vector<std::string> tenants;  // any order; duplicates are harmless
        int64_t runs_from_ns;  // boot-clock moment the grant was answered, not when it was read
        int64_t length_ms;     // >= 0; expiry = runs_from_ns + length_ms
    };

    // Writers (take, take_list, drop) are serialized among themselves and may wait for checks
    // already in flight, never for later ones; they never make a check wait.
    //
    // Replaces the list and the lease whole. An earlier `runs_from_ns` may shorten a running
    // lease, or start one already lapsed.
    void take(Lease lease);
    // Replaces the list and ends any lease still running (its expiry becomes now; one already
    // lapsed keeps its earlier expiry). Never starts one: on a guard with none it stays none.
    void take_list(std::vector<std::string> tenants);
    // Releases the lease: back to none.
    void drop();

    // no_lease when none; lapsed when now >= expiry (the expiry instant is lapsed), before
    // looking at the list; not_named when the list lacks the tenant; else ok. One atomic load
    // of the snapshot (pinned, never locked), one clock read, one binary search.
    LeaseVerdict check(std::string_view tenant) const override;

    LeaseState state() const;
    // nullopt when none; 0 when lapsed; else the whole milliseconds left, rounded up (so a
    // leased guard never reports 0).
    std::optional<int64_t> left_ms() const;

private:
    struct Snapshot {
        bool leased = false;               // false: state none, the rest unused
        std::vector<std::string> tenants;  // sorted, unique
        int64_t expiry_ns = 0;
    };
    class Pin;  // a reader's hold on the current snapshot (lease_guard.cc)

    // Installs `next` and frees the snapshot it replaces once no reader can still hold it.
    // Caller holds write_mu_.
    void publish(std::unique_ptr<const Snapshot> next);

    const BootClock& clock_;
    // Readers take no lock and never wait. A reader counts itself in readers_[epoch_ % 2] and
    // then loads current_; a writer swaps current_, moves epoch_ on (new readers count in the
    // other slot) and waits for the old slot to empty before freeing the old snapshot — a
    // grace period as short as one check. std::atomic<std::shared_ptr> would do, but
    // libstdc++ 12's load() releases its internal lock with a relaxed order, a data race that
    // ThreadSanitizer reports.
    std::atomic<const Snapshot*> current_;
    mutable std::atomic<uint64_t> readers_[2] = {0, 0};
    std::atomic<uint64_t> epoch_{0};
    std::mutex write_mu_;  // serializes writers: take_list reads then replaces
};

}  // namespace fenec::engine
