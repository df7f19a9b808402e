// shard/leases.h: the primary router's leasing (router.md §9.4–§9.9): a thread per node sending
// numbered grants every third of the lease over a connection of its own, a judge that fails a
// node over once its lease has certainly lapsed, and the longest-lease record. The rules of one
// node's lease are LeaseBook's (shard/lease_book.h); this file owns the threads, the clock, the
// record and what each answer sets off.
//
// Threads: one per node in the directory (no node waits for another: each call — name lookup,
// connect, send, answer — is bounded by a third of the lease, and only that node's renewal and
// failover wait on it), and one judge, looking every min(50 ms, L/20). A node's lapse is judged
// only while no grant to it is out. What a lapse or a return sets off (a failover, a repair)
// runs on the host's workers, never on these threads.
//
// The record (§9.7): before its first grant a router whose lease is longer than the record (or
// finds none) raises it, synced, and waits until every standby keeping up was sent the change (at
// most a second); a node is counted by the longer of the record and the lease until it has run
// one of this router's leases; after leading 1.1 × the record, the record is lowered to the
// lease. Where the record cannot be raised, grants run no longer than it.
//
// Thread-safe. `LeaseHost` is called from the lease threads and the judge.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/clock.h"
#include "engine/status.h"
#include "server/obs/audit.h"
#include "shard/directory.h"
#include "shard/lease_book.h"

namespace fenec::obs {
class CounterFamily;
class GaugeFamily;
class Gauge;
class Registry;
}  // namespace fenec::obs

namespace fenec::shard {

// What leasing asks of the router around it.
class LeaseHost {
  public:
    virtual ~LeaseHost() = default;
    virtual std::shared_ptr<const DirectoryMaps> maps() const = 0;
    // POST /_admin/lease to `node`, the whole call done by `deadline_ns` (the clock's steady
    // time); anything but an answer in time is a silent reply.
    virtual GrantReply grant(const NodeRow& node, const GrantWire& grant, int64_t deadline_ns) = 0;
    virtual engine::Status put_lease_record(const LeaseRecord& record) = 0;
    // Waits (at most `bound_ms`) until every standby router keeping up with the directory was
    // sent everything written so far; returns at once where there is none.
    virtual void wait_for_standbys(int64_t bound_ms) = 0;
    // The node's lease has certainly lapsed: fail it over (on a worker; do not block).
    virtual void lapsed(const std::string& node) = 0;
    // Under the leases' lock, so the two are ordered as the judge and the answers are: the node
    // judged lapsed (its calls are cut, Upstream::cut_calls), and an answer to a grant recorded
    // (its calls go again, Upstream::heard). Neither may block or take a lock but a leaf.
    virtual void cut_calls(const std::string& node) { (void)node; }
    virtual void heard(const std::string& node) { (void)node; }
    // This router was promoted over (Router::superseded): it fails nothing over, so no node is
    // judged lapsed (nor marked failed over) from then on.
    virtual bool superseded() const { return false; }
    // The node answered a grant: `returned` when it is its first counted answer since a failover
    // (§9.11: a repair has its stale copies follow the new primaries).
    virtual void answered(const std::string& node, bool returned) = 0;
    // One line for the log (stderr) and, where `event` is not empty, an audit line of that
    // event with `fields` (§15: `lease_record`, `fenced`).
    virtual void note(const std::string& line, std::string_view event,
                      std::vector<obs::JsonField> fields) = 0;
};

struct LeaseOptions {
    int64_t lease_ms = 0;  // L, from --auto-failover
    std::string by;        // this router's listen address, for the record's `by`
};

// For GET /_shard/nodes' `lease` (§6.2).
struct LeaseView {
    bool takes = true;
    int64_t age_ms = 0;  // since the last counted answer
    bool failed_over = false;
    bool fenced = false;  // another term or authority holds the node (LeaseStanding::fenced)
};

class Leases {
  public:
    Leases(LeaseOptions options, LeaseHost& host, const engine::Clock& clock,
           obs::Registry& metrics);
    ~Leases();
    Leases(const Leases&) = delete;
    Leases& operator=(const Leases&) = delete;

    // Raises the record where needed, counts every node as answered now (§9.4) and starts the
    // threads. Call once, after the directory is open and before serving.
    void start();
    // Whether start() ran: this router leads and grants (a standby's Leases, made for the
    // --auto-failover it will use once promoted, has not).
    bool started() const;
    // Stops granting; joins every thread. Idempotent.
    void stop();

    // A node's tenants changed (a create, move, delete or failover), or a node was added or
    // removed: the nodes named are granted their new list at once (an empty name: all of them).
    void changed(const std::string& node = "");
    // A write refused by `node` for its lease (503 `Fenec-Lease`) after a promotion there: grant
    // it now and wait (at most `bound_ms`) for that grant's answer. True when one came back.
    bool grant_and_wait(const std::string& node, int64_t bound_ms);
    // Whether `tenant` is withheld from `node`'s grants now (a move's target or a failover's copy
    // until the standby routers were sent the change; a failover's fence or parked tenant).
    bool withheld(const std::string& node, const std::string& tenant) const;

    // The failover of `node` that its lapse started (LeaseHost::lapsed) has ended, whatever its
    // outcome: from the time of the lapse until now its grants named no tenant; now they name
    // those still placed there, and one goes at once. A node not heard since is judged again
    // after a lease (doubling to a minute on each failover that ends so): where tenants are left
    // there (a promotion that failed) and it has certainly lapsed, its failover runs again.
    void failover_ended(const std::string& node);
    // The lapse of `node` was judged by a router promoted over before it could act on it
    // (LeaseHost::superseded turned true in between): no failover ran, so the node is not
    // failed over. Its mark and gauge are undone (a retry's, of a failover that ran, kept) and no
    // retry is due.
    void lapse_undone(const std::string& node);
    // §9.3: a tenant waiting for another operation while its node is failed over is named by
    // none of that node's grants meanwhile.
    void withhold(const std::string& node, const std::string& tenant);
    // A failover by hand (FailoverHost::fence): `tenants` withheld from `node`, its grant sent
    // now, and a wait until it holds a list without them or has certainly lapsed (LeaseBook's
    // test, or judged lapsed and not heard since), or leases from no grant of this router's; at
    // most 1.5 × the lease and a second, and a minute. False when that passed first, or when
    // the leases stop meanwhile. Each tenant is counted withheld whatever the answer; the caller
    // gives each back (restore) in every case.
    bool fence(const std::string& node, const std::vector<std::string>& tenants);
    void restore(const std::string& node, const std::string& tenant);

    std::optional<LeaseView> view(const std::string& node) const;
    int64_t lease_ms() const { return lease_ms_; }
    int64_t record_ms() const;

  private:
    struct Node;
    void run(Node& node);
    void judge();
    // Whether `node` lapsed at `now_ns` and was not failed over yet; marks it so (§9.4).
    bool judge_locked(Node& node, int64_t now_ns);
    // Whether `node`'s grant is overdue at `now_ns`: not sent for more than a grant's period past
    // its due time, or sent that late and not back yet (this router stopped, or its thread
    // starved). Such a node is not judged: a router woken past its lease after its standby was
    // promoted would fail every node over before the first grant's refusal told it
    // (Router::superseded), and one merely starved would judge nodes it had no chance to grant.
    bool overdue_locked(const Node& node, int64_t now_ns) const;
    // Starts a thread for each node the directory gained, retires those of nodes it lost.
    void sync_nodes_locked();
    // The tenants `node`'s grants name: placed there (active or moving), none withheld.
    std::vector<std::string> list_locked(const DirectoryMaps& maps, const std::string& node) const;
    void raise_record();
    void lower_record_if_due(std::unique_lock<std::mutex>& lock, int64_t now_ns);
    void count(const std::string& node, std::string_view outcome);

    const LeaseOptions options_;
    LeaseHost& host_;
    const engine::Clock& clock_;
    int64_t lease_ms_ = 0;   // the lease granted: L, or the record where it could not be raised
    int64_t record_ms_ = 0;  // a node not yet run a lease of ours is counted by max(this, lease)
    bool record_lowered_ = false;
    int64_t started_ns_ = 0;
    uint64_t starts_ = 0;
    int64_t late_said_ns_ = 0;  // under mu_: the last late grant said on stderr (once a lease)

    mutable std::mutex mu_;
    std::condition_variable judge_cv_;
    bool stopping_ = false;
    bool started_ = false;
    std::map<std::string, std::unique_ptr<Node>, std::less<>> nodes_;
    // Nodes removed from the directory: their threads end on their own and are joined by stop().
    std::vector<std::unique_ptr<Node>> graveyard_;
    std::vector<std::thread> retired_;
    // node → tenant → how many hold it out of the node's grants. Counted: a failover parking a
    // tenant and a move or promotion withholding it from the same node each give back only their
    // own, so one's restore never names the tenant again under the other's (a parked tenant
    // granted back to a node being failed over, beside its promoted copy).
    std::map<std::string, std::map<std::string, int, std::less<>>, std::less<>> withheld_;
    std::thread judge_;

    obs::CounterFamily* grants_ = nullptr;
    obs::GaugeFamily* age_ = nullptr;
    obs::GaugeFamily* failed_over_ = nullptr;
};

}  // namespace fenec::shard
