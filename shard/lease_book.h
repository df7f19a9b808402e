// shard/lease_book.h: the router's side of one node's lease (router.md §9.4–§9.7) as state alone:
// no I/O, no thread, no clock of its own. It says what the next grant carries (its number, the
// grant it acknowledges, the tenant list when the node must be sent it), takes what came back
// (or that nothing did within the call's bound), and judges whether the node has certainly
// lapsed. The lease thread (shard/leases.cc) sends and reports; the judge asks `lapsed`.
//
// Times are the router's monotonic clock in nanoseconds (CLOCK_MONOTONIC: a suspend of the
// router's machine stops it, so a suspended router fails over later, never sooner).
//
// Why it is safe: a node runs its lease from the instant it answered the grant that a later grant
// acknowledges (`acked`), never from when it reads a grant. `acked` names only a grant whose
// answer came back within the call's bound, so that instant is no later than the instant that
// answer came back here, which is no later than `last_answer_ns`. The node's lease therefore ends
// by `last_answer_ns + lease`, and the router fails the node over only past
// `last_answer_ns + 1.1 × lease`, and only while no grant is out (a grant out may yet come back
// and be counted). Until the node has run a lease from one of this router's grants (`ran`), it
// may hold a longer lease from the router before, so it is counted by the longest-lease record.
//
// Not thread-safe: the lease thread and the judge share it under the caller's lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fenec::shard {

// The grant a router sends, node-http's one wire format of `POST /_admin/lease`.
struct GrantWire {
    std::string authority;  // `<id>/<scope>`
    int64_t term = 0;
    std::string history;  // 16 hex
    uint64_t grant = 0;   // starts × 2^32 + n
    uint64_t acked = 0;   // 0: none acknowledged yet
    int64_t lease_ms = 0;
    uint64_t list = 0;                                // the grant that first carried the list
    std::optional<std::vector<std::string>> tenants;  // sent until the node holds `list`
};

// Its JSON body.
std::string grant_body(const GrantWire& g);

// A grant's answer, as the lease thread read it.
struct GrantReply {
    enum class Kind : uint8_t {
        taken,       // 200 with `took` and `ran`
        fenced,      // 409 naming a holder: another term or authority holds the node
        takes_none,  // 409 `takes_leases: false`, or a 200 lacking `took` and `ran`
        silent,      // anything else, or nothing within the bound
    };
    Kind kind = Kind::silent;
    bool took = false;
    bool ran = false;
    std::optional<uint64_t> list;  // the list the node holds (taken answers)
    std::string holder;            // fenced: who holds the node, for the log
};

// What an answer did: the metric's outcome, and whether the next grant goes at once (§9.5:
// `took: false` or `ran: false` has the router send the grant acknowledging it straight away).
struct GrantEffect {
    // fenec_router_grants_total{outcome}: ran, list_only, not_taken, fenced, takes_none, silent.
    std::string_view outcome = "silent";
    bool again_now = false;
    bool first_fence = false;       // fenced now and not before: log it once
    bool first_takes_none = false;  // the same for a node that takes no lease
    bool returned = false;          // first counted answer since the node was failed over (§9.11)
};

// A node's standing with this router.
enum class LeaseStanding : uint8_t {
    leasing,     // takes leases (or has not said otherwise): judged, failed over on a lapse
    fenced,      // another term or authority holds it: never failed over by this router
    takes_none,  // started without --lease: never failed over on its own
};

class LeaseBook {
  public:
    // A router that starts leasing counts the node as answered at `start_ns` (§9.4): its
    // predecessor may have granted just before it stopped. `starts` numbers the grants (§9.5).
    LeaseBook(uint64_t starts, int64_t start_ns);

    // The node's tenant list changed (a create, move, failover or delete): the next grant
    // carries it, numbered by that grant, until an answer says the node holds it.
    void set_tenants(std::vector<std::string> tenants);
    const std::vector<std::string>& tenants() const { return tenants_; }

    // The next grant; marks it out. Only one grant is out at a time.
    GrantWire next(std::string authority, int64_t term, std::string history, int64_t lease_ms);

    // What came back for the grant out: `reply` read at `back_ns`, or silent when nothing came
    // back within the call's bound (`back_ns` is then ignored). The grant is no longer out.
    GrantEffect answered(const GrantReply& reply, int64_t back_ns);

    // Whether the node has certainly lapsed at `now_ns`: leasing, no grant out, and its last
    // counted answer more than 1.1 × the lease it may hold old — `lease_ns` once it has run one
    // of this router's leases, else the longer of `lease_ns` and `record_ns` (§9.7).
    bool lapsed(int64_t now_ns, int64_t lease_ns, int64_t record_ns) const;
    // The first instant at which `lapsed` would hold once no grant is out: the last counted
    // answer plus 1.1 × the lease it may hold, and a nanosecond.
    int64_t lapse_point_ns(int64_t lease_ns, int64_t record_ns) const;

    // A failover took the node's tenants: the gauge reads 1 until it answers again (§9.11).
    void mark_failed_over() { failed_over_ = true; }
    void clear_failed_over() { failed_over_ = false; }  // a lapse no failover followed
    bool failed_over() const { return failed_over_; }

    bool out() const { return out_.has_value(); }
    // The node holds tenants() (an answer took the grant that carried it).
    bool holds_list() const { return list_ != 0 && !send_list_; }
    bool ran() const { return ran_; }
    LeaseStanding standing() const { return standing_; }
    int64_t last_answer_ns() const { return last_answer_ns_; }
    uint64_t acked() const { return acked_; }

  private:
    const uint64_t starts_;
    uint32_t n_ = 0;               // grants numbered in this incarnation
    std::optional<uint64_t> out_;  // the grant out, awaiting its answer
    uint64_t acked_ = 0;           // newest grant whose answer came back in time
    int64_t last_answer_ns_;       // when the newest counted answer came back
    bool ran_ = false;             // the node ran a lease from one of this router's grants
    bool failed_over_ = false;
    LeaseStanding standing_ = LeaseStanding::leasing;

    std::vector<std::string> tenants_;
    uint64_t list_ = 0;      // the grant that first carried tenants_; 0: not sent yet
    bool send_list_ = true;  // carry tenants_ with the next grant
};

}  // namespace fenec::shard
