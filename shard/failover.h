// shard/failover.h: failing a node over (router.md §9.1–§9.3), by hand (`POST /_shard/nodes/<n>/
// failover`) or on a lease that has certainly lapsed (shard/leases.h): each of the node's tenants,
// claimed in name order, promoted on its copy — the node's standby, else its own replica — after
// its quota was sent there; the directory pointed at the copy in one synced statement; what is
// out to the old node for it cut (§9.10). The promotions run at once (up to promotions_at_once
// threads), so the node's last tenant is writable again after the slowest promotion rather than
// after all of them in turn; the answer still lists the tenants in name order. A tenant another
// operation holds waits, named by none of the node's grants meanwhile, and is failed over when that
// operation ends, onto the copy it had when the failover came and no other.
//
// A copy that is not its tenant as its primary has it is never promoted (§9.2): the node refuses
// it given the tenant's lineage and the history its primary forked at its last failover, and the
// refusal is a `failed` entry naming the node's reason. `force` promotes whatever the copy holds.
//
// Threads: `fail_over` runs on the caller's thread (an API worker, for a failover by hand);
// `lapsed` and `released` queue their work on a worker of its own, so neither the lease threads
// nor the operation releasing a claim wait on a promotion. One failover at a time, but for a
// failover by hand's wait for its node to let its tenants go (FailoverHost::fence), which holds
// only those tenants' claims: another node's lapse is failed over meanwhile, not a lease later.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/status.h"
#include "server/obs/audit.h"
#include "shard/directory.h"
#include "shard/node_calls.h"

namespace fenec::obs {
class CounterFamily;
class Registry;
}  // namespace fenec::obs

namespace fenec::shard {

struct FailoverResult;

// What a failover's claim is named (`held_by`).
inline constexpr std::string_view failover_claim = "failover";

// What a failover asks of the router around it.
class FailoverHost {
  public:
    virtual ~FailoverHost() = default;
    virtual std::shared_ptr<const DirectoryMaps> maps() const = 0;
    virtual Directory& directory() = 0;
    // Claims (§6.1): false when another operation holds the tenant; held_by names it.
    virtual bool claim(const std::string& tenant, std::string_view what) = 0;
    virtual void release(const std::string& tenant) = 0;
    virtual std::string held_by(const std::string& tenant) = 0;
    // A failover parked on `tenant` is the next to claim it (Router::reserve_for_failover): true
    // when a claim holds it still, false when none does. unreserve: the failover stopped waiting
    // without claiming it. By default no reservation, only the question.
    virtual bool reserve(const std::string& tenant) { return !held_by(tenant).empty(); }
    virtual void unreserve(const std::string& tenant) { (void)tenant; }
    // `POST /_admin/tenants/<t>/promote` (node-http's §8.6), as NodeCalls::promote makes it.
    virtual PromoteReply promote(const NodeRow& node, const std::string& tenant,
                                 const PromoteWire& ask) = 0;
    // The tenant's recorded quota to `node` (§6.4: before a promoted copy's lease names it), or
    // the removal of one the node still holds; false when the node did not take it (logged by
    // the caller), which is then owed and sent again when the node answers (QuotaSync).
    virtual bool send_quota(const NodeRow& node, const TenantRow& tenant) = 0;
    // What is out to `from` for `tenant` is cut by §9.10's table; the directory points at the
    // new primary already.
    virtual void cut(const std::string& tenant, const std::string& from) = 0;
    // Leasing, where it runs: grant `node` its list now; keep `tenant` out of `node`'s lists.
    virtual void grant_now(const std::string& node) = 0;
    virtual void withhold(const std::string& node, const std::string& tenant) = 0;
    // A failover by hand (§9.1), before any promotion: `tenants` kept out of `node`'s lists, and
    // a wait until the node has taken a list without them, or has certainly lapsed, or takes no
    // lease of this router's (nothing to wait for), bounded by a lease and a half (at most a
    // minute). False when the bound passed first: the node may still write them.
    virtual bool fence(const std::string& node, const std::vector<std::string>& tenants) = 0;
    // The fence ended: `tenants` back in `node`'s lists where the directory still places them.
    virtual void unfence(const std::string& node, const std::vector<std::string>& tenants) = 0;
    // A failover that a lapse started (Failover::lapsed) has ended, whatever came of it;
    // `promoted_any`: it promoted a copy of at least one tenant.
    virtual void failover_ended(const std::string& node, bool promoted_any) = 0;
    virtual void restore(const std::string& node, const std::string& tenant) = 0;
    // §7.2 step 10's wait: every standby router keeping up sent all the directory holds so far,
    // at most `bound_ms`. A promoted copy's node is granted its tenant only after it, so no
    // write lands there that a standby promoted next would route elsewhere.
    virtual void wait_for_standbys(int64_t bound_ms) = 0;
    // A repair (§8.3), started on its own worker.
    virtual void repair(std::string_view why) = 0;
    // A log line, and an audit line of `event` (§15: `failover`, `force`) with `fields`.
    virtual void note(const std::string& line, std::string_view event,
                      std::vector<obs::JsonField> fields) = 0;
    // A failover of `node` ran (`trigger`: "hand" or "lease") and ended with `result`: the router
    // keeps the last few for GET /_shard/status (shard/status.h). Nothing by default.
    virtual void failed_over(const std::string& node, std::string_view trigger,
                             const FailoverResult& result) {
        (void)node, (void)trigger, (void)result;
    }
    // A tenant that failover left `waiting` (another operation held it) was settled later:
    // promoted onto `to`, or not, for `why` (`to` empty). Nothing by default.
    virtual void settled_waiting(const std::string& node, const std::string& tenant,
                                 const std::string& to, const std::string& why) {
        (void)node, (void)tenant, (void)to, (void)why;
    }
};

// How many of a failed-over node's tenants are promoted at once: each promotion is a call to a
// node and a directory write, mostly waiting on fsyncs.
inline constexpr size_t promotions_at_once = 16;

struct FailoverResult {
    int status = 200;   // 200, 502 (`failed` not empty), 404, 409
    std::string error;  // 404 and 409
    std::vector<std::pair<std::string, std::string>> promoted;  // tenant, the node it is on now
    std::vector<std::pair<std::string, std::string>> failed;    // tenant, why
    std::vector<std::pair<std::string, std::string>> waiting;   // tenant, what holds it
    std::vector<std::string> unreplicated;  // tenants whose replica lived on the node
};

// The §6.2 answer body of a failover.
std::string failover_body(const std::string& node, const FailoverResult& r);

class Failover {
  public:
    Failover(FailoverHost& host, obs::Registry& metrics);
    ~Failover();
    Failover(const Failover&) = delete;
    Failover& operator=(const Failover&) = delete;

    // By hand (trigger "hand") or on a lease ("lease"); blocking.
    FailoverResult fail_over(const std::string& node, bool force, std::string_view trigger);
    // Queued on the worker: a node whose lease certainly lapsed.
    void lapsed(const std::string& node);
    // A claim on `tenant` ended: a tenant waiting for it is failed over now (on the worker).
    void released(const std::string& tenant);
    // Stops the worker (work queued is dropped). Idempotent.
    void stop();

  private:
    struct Waiting {
        std::string node;  // the node failed over
        std::string copy;  // the copy it had when the failover came
        bool force = false;
    };
    // One tenant's promotion onto `copy`: true when promoted; else `why`.
    bool promote_one(const TenantRow& tenant, const std::string& copy, bool force, std::string& why,
                     std::string& history);
    void after_promotions(const std::string& node, const std::vector<std::string>& to_nodes,
                          FailoverResult& r);
    void settle_waiting(const std::string& tenant);
    // `tenant`'s parked entry taken out, if any; every entry parked for `node` taken out.
    std::optional<Waiting> take_waiting(const std::string& tenant);
    std::vector<std::pair<std::string, Waiting>> take_parked(const std::string& node);
    // The tenants an earlier failover of `node` parked, whose settling its failover by hand's
    // fence deferred, queued to settle now. Caller holds run_mu_.
    void settle_deferred(const std::string& node);
    // `tenant`, whose claim another operation held, put to wait for it (released() settles it),
    // and reserved, so that no other operation's claim comes first once the holder lets go.
    // The holder may have let go before the entry was in, when released() found none: a claim
    // no one holds by then is settled at once, so no wake-up is lost. Every way out of the wait
    // but the failover's own claim unreserves it.
    void wait_for_claim(const std::string& tenant, Waiting w);
    // each(0) … each(n - 1) on up to promotions_at_once threads, this one among them; returns
    // when all have.
    static void at_once(size_t n, const std::function<void(size_t)>& each);
    void post(std::function<void()> work);
    void work();

    FailoverHost& host_;
    obs::CounterFamily* failovers_ = nullptr;
    std::mutex run_mu_;  // one failover at a time (a hand failover's fence waits without it)
    // Nodes whose failover by hand waits in its fence, without run_mu_: no other failover of
    // such a node runs (409) and none of its parked tenants is settled until it ends. Under
    // run_mu_ (read in settle_waiting with run_mu_ held too).
    std::set<std::string, std::less<>> fencing_;
    std::mutex mu_;  // the queue and the waiting map; held over host_.reserve, never taken under it
    std::condition_variable cv_;
    std::deque<std::function<void()>> queue_;
    std::map<std::string, Waiting, std::less<>> waiting_;  // tenant → its failover
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace fenec::shard
