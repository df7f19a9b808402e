// engine/lease_guard.cc: the lease guard's snapshots and verdicts (engine.md §12). Writers build
// a new immutable snapshot and publish it with one atomic store; readers pin the current one,
// read the boot clock once and search it, so a verdict always describes one coherent lease.
//
// Reclamation (why a snapshot is never freed under a reader): a reader increments
// readers_[e % 2], checks epoch_ is still e, and only then loads current_. A writer exchanges
// current_, then moves epoch_ from e to e + 1, then waits for readers_[e % 2] to reach zero.
// All these operations are seq_cst, so in their single total order a reader that loaded the old
// snapshot loaded it before the exchange, hence saw epoch e before the move, hence incremented
// readers_[e % 2] before the writer looks at it: the writer waits for it. A reader that sees
// e + 1 counts in the other slot and loads the new snapshot (or a later one, whose own writer
// waits for it). Readers never block; a writer waits only for checks begun before its move.
#include "engine/lease_guard.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <thread>
#include <utility>

namespace fenec::engine {
namespace {

// runs_from_ns + length_ms, saturating: a huge length is a lease that never lapses in practice,
// not a wrapped expiry in the past.
int64_t expiry_of(int64_t runs_from_ns, int64_t length_ms) {
    assert(length_ms >= 0);
    length_ms = std::max<int64_t>(length_ms, 0);  // release builds: a negative length is zero
    constexpr int64_t max = std::numeric_limits<int64_t>::max();
    if (length_ms > max / kNsPerMs) return max;
    const int64_t length_ns = length_ms * kNsPerMs;
    if (runs_from_ns > max - length_ns) return max;
    return runs_from_ns + length_ns;
}

std::vector<std::string> sorted_unique(std::vector<std::string> tenants) {
    std::sort(tenants.begin(), tenants.end());
    tenants.erase(std::unique(tenants.begin(), tenants.end()), tenants.end());
    return tenants;
}

}  // namespace

// A reader's hold on the current snapshot, from construction to destruction. Never blocks:
// it retries only if a writer moved the epoch between its two loads.
class LeaseGuard::Pin {
public:
    explicit Pin(const LeaseGuard& guard) : guard_(guard) {
        for (;;) {
            const uint64_t epoch = guard_.epoch_.load();
            slot_ = static_cast<size_t>(epoch % 2);
            guard_.readers_[slot_].fetch_add(1);
            if (guard_.epoch_.load() == epoch) break;
            guard_.readers_[slot_].fetch_sub(1);
        }
        snapshot_ = guard_.current_.load();
    }
    ~Pin() { guard_.readers_[slot_].fetch_sub(1); }
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;

    const Snapshot& operator*() const { return *snapshot_; }
    const Snapshot* operator->() const { return snapshot_; }

private:
    const LeaseGuard& guard_;
    size_t slot_ = 0;
    const Snapshot* snapshot_ = nullptr;
};

LeaseGuard::LeaseGuard(const BootClock& clock) : clock_(clock), current_(new Snapshot()) {}

LeaseGuard::~LeaseGuard() { delete current_.load(); }

void LeaseGuard::publish(std::unique_ptr<const Snapshot> next) {
    std::unique_ptr<const Snapshot> old(current_.exchange(next.release()));
    const uint64_t epoch = epoch_.fetch_add(1);
    while (readers_[epoch % 2].load() != 0) std::this_thread::yield();
    // `old` is freed here: every reader that could hold it has left.
}

void LeaseGuard::take(Lease lease) {
    auto next = std::make_unique<Snapshot>();
    next->leased = true;
    next->tenants = sorted_unique(std::move(lease.tenants));
    next->expiry_ns = expiry_of(lease.runs_from_ns, lease.length_ms);
    std::lock_guard<std::mutex> lock(write_mu_);
    publish(std::move(next));
}

void LeaseGuard::take_list(std::vector<std::string> tenants) {
    auto next = std::make_unique<Snapshot>();
    next->tenants = sorted_unique(std::move(tenants));
    std::lock_guard<std::mutex> lock(write_mu_);
    // Writers are serialized, so current_ cannot be freed while this writer reads it.
    const Snapshot& current = *current_.load();
    next->leased = current.leased;
    if (next->leased) {
        // A grant taken for its list alone runs no lease [seed 001]: end the running one now;
        // one already lapsed keeps its expiry, which is earlier.
        next->expiry_ns = std::min(current.expiry_ns, clock_.now_ns());
    }
    publish(std::move(next));
}

void LeaseGuard::drop() {
    std::lock_guard<std::mutex> lock(write_mu_);
    publish(std::make_unique<Snapshot>());
}

LeaseVerdict LeaseGuard::check(std::string_view tenant) const {
    const Pin snap(*this);
    if (!snap->leased) return LeaseVerdict::no_lease;
    if (clock_.now_ns() >= snap->expiry_ns) return LeaseVerdict::lapsed;
    const bool named =
        std::binary_search(snap->tenants.begin(), snap->tenants.end(), tenant,
                           [](std::string_view a, std::string_view b) { return a < b; });
    return named ? LeaseVerdict::ok : LeaseVerdict::not_named;
}

LeaseState LeaseGuard::state() const {
    const Pin snap(*this);
    if (!snap->leased) return LeaseState::none;
    return clock_.now_ns() >= snap->expiry_ns ? LeaseState::lapsed : LeaseState::leased;
}

std::optional<int64_t> LeaseGuard::left_ms() const {
    const Pin snap(*this);
    if (!snap->leased) return std::nullopt;
    const int64_t now_ns = clock_.now_ns();
    if (now_ns >= snap->expiry_ns) return 0;
    // Rounded up, so a lease still running never reports 0 left. expiry > now, and a boot clock
    // is never negative, so the difference does not overflow.
    const int64_t left_ns = snap->expiry_ns - now_ns;
    return left_ns / kNsPerMs + (left_ns % kNsPerMs != 0 ? 1 : 0);
}

}  // namespace fenec::engine
