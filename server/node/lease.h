// server/node/lease.h: the node's side of leases and fencing (node-http.md §9), without HTTP.
// Leases takes grants (§9.3), keeps the boot-clock instants at which it answered the last
// grant_answers_max grants of each (authority, term), runs the lease from the acknowledged
// grant's answer instant (never from when a grant is read), fences by term (§9.5) and owns the
// engine's LeaseGuard, the landing gate of every tenant the node opens under `--lease`.
//
// Invariants:
// - A lease runs only from an answer instant this process recorded (answered()) for the grant a
//   later grant acknowledges; a restart forgets them all, so a node holds no lease after its
//   first grant since it started (§9.1).
// - The highest term taken from an authority, and its history, are in `<data-dir>/
//   fenec-node.state` (engine::replace_durably through the node's file system) before the call
//   that raised it returns; if that fails, the term is not raised and the call is refused, so a
//   grant answered under a term is never forgotten by a restart.
// - Writes to the guard (take, take_list, drop) happen under mu_; checks never take mu_.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/clock.h"
#include "engine/io.h"
#include "engine/lease_guard.h"
#include "engine/status.h"

namespace fenec::node {

// §9.3: the answer instants kept per (authority, term). Sixteen rounds of a third of a lease each
// outlast five leases; a grant acknowledging an answer older than that could run no lease anyway.
inline constexpr size_t grant_answers_max = 16;
// (authority, term) pairs whose answer instants are kept, the least recently answered dropped
// first: one directory leases a node at a time (§9.5), so a few suffice for its terms and for a
// second directory taking turns with it.
inline constexpr size_t answer_windows_max = 16;
// Authorities whose highest term the state file keeps. Each is a directory that ever granted,
// promoted or followed here; past this bound a new authority is refused rather than an old
// one's fence forgotten.
inline constexpr size_t authorities_max = 1024;

// Who holds the node for an authority: its highest term taken and that term's history ("" when
// the call that raised it carried none: a promotion or a follow).
struct Holder {
    std::string authority;
    uint64_t term = 0;
    std::string history;
};

// A grant as §9.2 spells it. `tenants` is absent when the grant carries no list.
struct Grant {
    std::string authority;
    uint64_t term = 0;
    std::string history;
    uint64_t grant = 0;
    uint64_t acked = 0;  // 0: none acknowledged
    int64_t lease_ms = 0;
    uint64_t list = 0;
    std::optional<std::vector<std::string>> tenants;
};

// The grant a running lease came from (§9.2 answer's `lease`).
struct LeaseFrom {
    std::string authority;
    uint64_t term = 0;
    std::string history;
    uint64_t grant = 0;
    uint64_t acked = 0;
    int64_t lease_ms = 0;
};

// A 409 by term or holder (§9.5): `message` names the holder ("n1 is held by D at term 4").
struct Fenced {
    std::string message;
    Holder holder;
};

// The outcome of a fenced call: refused (`fenced`), failed to persist a raised term (`status`,
// a 500: nothing was taken), or ok.
struct FenceOutcome {
    std::optional<Fenced> fenced;
    engine::Status status;
    bool ok() const { return !fenced && status.is_ok(); }
};

// §9.2's answer to a grant taken (or not taken) — everything but `node`.
struct GrantAnswer {
    // fenec_lease_grants_total's outcome: "ran", "took" (its list alone), "not_newer",
    // "list_needed" (§13.1).
    std::string_view outcome = "not_newer";
    uint64_t grant = 0;
    bool took = false;
    bool ran = false;
    int64_t left_ms = 0;
    std::optional<uint64_t> list;  // the list held: its number, or none
    size_t tenants = 0;            // its length
    std::optional<LeaseFrom> lease;
};

struct GrantOutcome {
    FenceOutcome fence;  // not ok: the grant is refused, nothing changed
    GrantAnswer answer;  // with fence ok
};

// `GET /_admin/lease` (§9.2).
struct LeaseView {
    std::optional<Holder> holder;
    std::optional<LeaseFrom> lease;  // while one runs
    int64_t left_ms = 0;
    std::optional<uint64_t> list;
    std::vector<std::string> tenants;  // sorted
};

class Leases {
public:
    // `fs` and `clock` must outlive this. `state_path` is `<data-dir>/fenec-node.state`, read and
    // written through `fs`; nothing is read until load().
    Leases(std::string node_name, std::string state_path, engine::Fs& fs,
           const engine::BootClock& clock);
    Leases(const Leases&) = delete;
    Leases& operator=(const Leases&) = delete;

    // Reads the state file: absent is a node that never took a term. One that does not parse is
    // an error naming the file (the node refuses to start rather than forget a fence).
    engine::Status load();

    // The gate every tenant opened under `--lease` is given (engine::OpenOptions::gate).
    const engine::LandingGate& gate() const { return guard_; }
    // From any thread, lock-free: the guard's verdict for a write to `tenant` now.
    engine::LeaseVerdict check(std::string_view tenant) const { return guard_.check(tenant); }
    // §9.4's message for a refusal: "n1 holds no lease yet", "n1's lease lapsed 120 ms ago",
    // "n1's lease does not name acme".
    std::string refusal_message(engine::LeaseVerdict verdict, std::string_view tenant) const;

    // §9.3 steps 1 to 4 for `g`, whose fields are already checked (lease_ms > 0, names valid).
    // The caller answers it and then calls answered() for every 200.
    GrantOutcome take(const Grant& g);
    // §9.3 step 5: reads the boot clock now and keeps it as `grant`'s answer instant for
    // (authority, term). Call as close before the answer's first byte as the caller can.
    void answered(std::string_view authority, uint64_t term, uint64_t grant);

    // `DELETE /_admin/lease` (§9.2): fenced as a grant is; then drops the lease and list taken
    // from `authority` at once. `released` tells whether anything from it was held.
    FenceOutcome release(std::string_view authority, uint64_t term, bool& released);

    // §9.5 for a promotion or a follow carrying `authority` and `term` (and a grant's history
    // when it has one): a lower term from that authority, or the same term with another
    // history, is refused naming the holder; a higher term is taken and persisted before this
    // returns. Without `authority` the caller does not call this (an operator's call).
    FenceOutcome fence(std::string_view authority, uint64_t term,
                       std::optional<std::string_view> history = std::nullopt);
    // The refusal alone, nothing raised or persisted: a router's change to a tenant (a create, a
    // delete, an image, a freeze, a quota) carrying `Fenec-Fence: <authority> <term>` is refused
    // when a higher term of that authority is known here (a standby router promoted over the
    // router that sent it). Grants, follows and promotions raise the term; a change only asks.
    FenceOutcome check_fence(std::string_view authority, uint64_t term) const;

    LeaseView view() const;
    // The holder `GET /_admin/hello` names: the authority the list or lease was last taken from,
    // at its highest term; none when nothing is held.
    std::optional<Holder> holder() const;
    // Lease left now, 0 when none runs (the fenec_lease_left_ms gauge).
    int64_t left_ms() const;

private:
    struct Answered {
        uint64_t grant = 0;
        int64_t at_ns = 0;
    };
    struct Window {
        std::deque<Answered> answers;  // oldest first, at most grant_answers_max
        uint64_t used = 0;             // recency among windows (a counter, not a clock)
    };
    using WindowKey = std::pair<std::string, uint64_t>;  // authority, term

    // Caller holds mu_ for all of these.
    std::optional<Fenced> term_refusal(std::string_view authority, uint64_t term,
                                       std::optional<std::string_view> history) const;
    engine::Status raise(std::string_view authority, uint64_t term,
                         std::optional<std::string_view> history);
    engine::Status persist(const std::map<std::string, Holder, std::less<>>& terms) const;
    bool lease_runs(int64_t now_ns) const;
    std::optional<int64_t> answer_instant(const WindowKey& key, uint64_t grant) const;
    Fenced held_by(const Holder& h) const;
    void fill_answer(GrantAnswer& a, int64_t now_ns) const;

    const std::string node_;
    const std::string state_path_;
    engine::Fs& fs_;
    const engine::BootClock& clock_;
    engine::LeaseGuard guard_;

    mutable std::mutex mu_;
    std::map<std::string, Holder, std::less<>> terms_;  // authority -> highest term taken
    // terms_ as last persisted, for check_fence on a loop thread: mu_ is held across a raise's
    // fsync, and a change's head must not wait on it. Swapped under its own short lock.
    mutable std::mutex terms_seen_mu_;
    std::shared_ptr<const std::map<std::string, Holder, std::less<>>> terms_seen_ =
        std::make_shared<const std::map<std::string, Holder, std::less<>>>();
    void publish_terms();  // under mu_: terms_seen_ made terms_
    std::map<WindowKey, Window> windows_;
    uint64_t window_uses_ = 0;
    // The list held and the authority it (and any lease) was taken from; none before a grant.
    std::optional<uint64_t> list_;
    std::vector<std::string> tenants_;  // sorted, unique
    std::optional<std::string> from_;
    // The lease: the grant it came from and its end on the boot clock. end_ns_ stays after the
    // lease lapses or is cut (for "lapsed N ms ago"); lease_ is reset when it is cut or dropped.
    std::optional<LeaseFrom> lease_;
    std::optional<int64_t> end_ns_;
};

}  // namespace fenec::node
