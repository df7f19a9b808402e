// shard/failover.cc: a node failed over, by hand or on a lease (router.md §9.1–§9.3); see
// shard/failover.h.
#include "shard/failover.h"

#include <algorithm>
#include <atomic>
#include <set>

#include "json/writer.h"
#include "server/obs/metrics.h"
#include "shard/standby.h"

namespace fenec::shard {

std::string failover_body(const std::string& node, const FailoverResult& r) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("node");
    w.string(node);
    auto pairs = [&](std::string_view key, const auto& list, std::string_view second) {
        w.key(key);
        w.begin_array();
        for (const auto& [tenant, value] : list) {
            w.begin_object();
            w.key("tenant");
            w.string(tenant);
            w.key(second);
            w.string(value);
            w.end_object();
        }
        w.end_array();
    };
    pairs("promoted", r.promoted, "to");
    pairs("failed", r.failed, "why");
    pairs("waiting", r.waiting, "held_by");
    w.key("unreplicated");
    w.begin_array();
    for (const std::string& t : r.unreplicated) w.string(t);
    w.end_array();
    w.end_object();
    return out;
}

void Failover::at_once(size_t n, const std::function<void(size_t)>& each) {
    const size_t threads = std::min(n, promotions_at_once);
    if (threads <= 1) {
        for (size_t i = 0; i < n; ++i) each(i);
        return;
    }
    std::atomic<size_t> next{0};
    auto run = [&] {
        for (size_t i = next++; i < n; i = next++) each(i);
    };
    std::vector<std::thread> helpers;
    helpers.reserve(threads - 1);
    for (size_t t = 1; t < threads; ++t) helpers.emplace_back(run);
    run();
    for (std::thread& h : helpers) h.join();
}

Failover::Failover(FailoverHost& host, obs::Registry& metrics) : host_(host) {
    failovers_ =
        &metrics.counter("fenec_router_failovers_total", "failovers", {"trigger", "outcome"});
    // Each series there at 0 from the start: an alert on increase() sees the first failover
    // (a series born at 1 increases by nothing).
    for (const char* trigger : {"hand", "lease"}) {
        for (const char* outcome : {"done", "failed"}) failovers_->with({trigger, outcome});
    }
    worker_ = std::thread([this] { work(); });
}

Failover::~Failover() { stop(); }

void Failover::stop() {
    {
        std::lock_guard lock(mu_);
        if (stopping_) return;
        stopping_ = true;
        queue_.clear();
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    // No settling runs any more: the tenants still parked are let go, or no other operation
    // (the requests the router's drain still serves) could claim them.
    std::map<std::string, Waiting, std::less<>> parked;
    {
        std::lock_guard lock(mu_);
        parked.swap(waiting_);
    }
    for (const auto& [tenant, w] : parked) host_.unreserve(tenant);
}

void Failover::post(std::function<void()> job) {
    {
        std::lock_guard lock(mu_);
        if (stopping_) return;
        queue_.push_back(std::move(job));
    }
    cv_.notify_one();
}

void Failover::work() {
    std::unique_lock lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        auto job = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        job();
        lock.lock();
    }
}

void Failover::lapsed(const std::string& node) {
    post([this, node] {
        host_.note("node `" + node + "`'s lease has certainly lapsed: failing it over", "", {});
        const FailoverResult r = fail_over(node, false, "lease");
        if (r.status == 404 || r.status == 409) {
            host_.note("node `" + node + "` was not failed over on its lapse: " + r.error, "", {});
        }
        host_.failover_ended(node, !r.promoted.empty());
    });
}

void Failover::wait_for_claim(const std::string& tenant, Waiting w) {
    bool held = false;
    {
        // Reserved with the entry in, under mu_: stop() takes the entries and ends their
        // reservations, and one parked as it stops is neither (the router's claims lock is
        // taken under mu_, never the other way round).
        std::lock_guard lock(mu_);
        if (stopping_) return;  // nothing would settle it
        waiting_[tenant] = std::move(w);
        held = host_.reserve(tenant);
    }
    // Settled once: whichever settle_waiting takes the entry out first runs it.
    if (!held) post([this, tenant] { settle_waiting(tenant); });
}

void Failover::released(const std::string& tenant) {
    {
        std::lock_guard lock(mu_);
        if (!waiting_.contains(tenant)) return;
    }
    post([this, tenant] { settle_waiting(tenant); });
}

FailoverResult Failover::fail_over(const std::string& node, bool force, std::string_view trigger) {
    std::unique_lock run(run_mu_);
    FailoverResult r;
    auto maps = host_.maps();
    if (!maps->nodes.contains(node)) {
        r.status = 404;
        r.error = "no node `" + node + "`";
        return r;
    }
    // A failover by hand of this node waits for it to let its tenants go: it does what this one
    // would, and a second run meanwhile would park its claimed tenants unfenced (and a lease's
    // run, on the worker, would hold up other nodes' lapses behind it).
    if (fencing_.contains(node)) {
        r.status = 409;
        r.error = "a failover by hand of node `" + node +
                  "` is waiting for it to let its tenants go; it fails them over once it has";
        return r;
    }
    std::vector<std::string> tenants;  // the node's, in name order (the map's)
    bool any_copy = maps->standby_of(node) != nullptr;
    for (const auto& [name, t] : maps->tenants) {
        if (t.node != node) continue;
        tenants.push_back(name);
        any_copy = any_copy || maps->replicas.contains(name);
    }
    bool holds_replica = false;
    for (const auto& [tenant, on] : maps->replicas) holds_replica = holds_replica || on == node;
    if (!any_copy && !holds_replica) {
        r.status = 409;
        std::string paired_with;  // the node it is the standby of, if any
        for (const auto& [n, s] : maps->pairs) {
            if (s == node) paired_with = n;
        }
        if (tenants.empty() && !paired_with.empty()) {
            r.error = "node `" + node +
                      "` holds no tenant, only the copies it keeps as the standby of `" +
                      paired_with + "`: there is nothing to fail over; give `" + paired_with +
                      "` another standby to have those copies kept elsewhere";
        } else if (tenants.empty()) {
            r.error =
                "node `" + node + "` holds no tenant and no replica: there is nothing to fail over";
        } else {
            r.error = "node `" + node +
                      "` has no standby, none of its tenants has a replica and it "
                      "holds no replica of another's: there is nothing to fail over onto";
        }
        return r;
    }
    // The claims, in name order; then every claimed tenant's promotion at once (below).
    struct Claimed {
        TenantRow row;
        std::string copy;
        bool done = false;
        std::string why, history;
    };
    std::vector<Claimed> claimed;
    for (const std::string& name : tenants) {
        if (!host_.claim(name, failover_claim)) {
            const std::string held = host_.held_by(name);
            const auto fresh = host_.maps();
            const auto row = fresh->tenants.find(name);
            if (row == fresh->tenants.end() || row->second.node != node)
                continue;  // gone meanwhile
            r.waiting.emplace_back(name, held);
            // Parked once more (a lapse judged again, a failover by hand asked again): the entry
            // it replaces gives its withholding back, so one settling leaves none behind.
            if (std::optional<Waiting> before = take_waiting(name)) {
                host_.restore(before->node, name);
            }
            host_.withhold(node, name);
            wait_for_claim(name, Waiting{node, fresh->copy_of(row->second), force});
            continue;
        }
        const auto fresh = host_.maps();
        const auto row = fresh->tenants.find(name);
        if (row == fresh->tenants.end() || row->second.node != node) {  // moved or deleted
            host_.release(name);
            continue;
        }
        // Parked by an earlier failover and not settled yet (its holder let go just now): this
        // run fails it over, and the entry goes, so that it is not promoted again later, and
        // unfenced, should this run leave it on the node. Its withholding goes with it, as its
        // settling's would; a fence below withholds it again.
        if (std::optional<Waiting> stale = take_waiting(name)) host_.restore(stale->node, name);
        Claimed& c = claimed.emplace_back();
        c.row = row->second;
        c.copy = fresh->copy_of(row->second);
    }
    // By hand, the node may be running (behind a cut, or simply up) with a lease that names
    // these tenants: none is promoted until it has let them go or its lease has certainly
    // lapsed, as a lapse's failover waits for (§9.4). Not in time: nothing is done, 503.
    std::vector<std::string> fenced;
    if (trigger == "hand") {
        for (const Claimed& c : claimed) fenced.push_back(c.row.name);
        // The wait (up to a lease and a half) holds the claims, not the failover lock: another
        // node's lapse is failed over meanwhile, not after it. The claims keep every other
        // operation off these tenants; their copies are read again below, since a failover of
        // the node a copy lives on may have run meanwhile.
        // Meanwhile no other failover of this node runs (above) and no tenant parked by an
        // earlier one is settled (settle_waiting): each would change the node's withheld list
        // under the fence, or promote beside it.
        fencing_.insert(node);
        run.unlock();
        const bool let_go = fenced.empty() || host_.fence(node, fenced);
        run.lock();
        fencing_.erase(node);
        if (!let_go) {
            // Nothing is failed over, the parked tenants neither: promoted once their holders
            // let go, they would be promoted beside a lease the node may still hold.
            for (const auto& [name, w] : take_parked(node)) {
                host_.unreserve(name);
                host_.restore(node, name);
            }
            host_.unfence(node, fenced);
            for (const std::string& name : fenced) host_.release(name);
            host_.grant_now(node);
            r.status = 503;
            r.error = "node `" + node +
                      "` may still hold a lease for its tenants: it neither let them go nor "
                      "lapsed in time; nothing was failed over";
            return r;
        }
        settle_deferred(node);
        const auto fresh = host_.maps();
        for (Claimed& c : claimed) {
            const auto row = fresh->tenants.find(c.row.name);
            c.copy = row != fresh->tenants.end() ? fresh->copy_of(row->second) : std::string();
        }
    }
    // Each tenant's quota, promotion, directory row and cut, all tenants at once: a tenant's
    // writes wait for the slowest of its node's promotions, not for their sum (§9.1; seed 001's
    // figure is the node's last tenant writable again). Claimed, none is touched by another
    // operation meanwhile; the directory takes their rows one write at a time.
    at_once(claimed.size(), [&](size_t i) {
        Claimed& c = claimed[i];
        if (c.copy.empty()) {
            c.why = "it has no replica";
            return;
        }
        c.done = promote_one(c.row, c.copy, force, c.why, c.history);
    });
    // Those not promoted go back in the node's lists (the promoted ones are placed elsewhere).
    if (!fenced.empty()) host_.unfence(node, fenced);
    std::set<std::string> to_nodes;
    for (Claimed& c : claimed) {  // the answer in name order
        if (c.done) {
            r.promoted.emplace_back(c.row.name, c.copy);
            to_nodes.insert(c.copy);
        } else {
            r.failed.emplace_back(c.row.name, c.why);
        }
        host_.release(c.row.name);
    }
    after_promotions(node, {to_nodes.begin(), to_nodes.end()}, r);
    r.status = r.failed.empty() ? 200 : 502;
    failovers_->with({std::string(trigger), r.failed.empty() ? "done" : "failed"}).inc();
    host_.failed_over(node, trigger, r);
    host_.note("node `" + node + "` failed over (" + std::string(trigger) +
                   "): " + std::to_string(r.promoted.size()) + " promoted, " +
                   std::to_string(r.failed.size()) + " failed, " +
                   std::to_string(r.waiting.size()) + " waiting",
               "failover",
               {{"node", node},
                {"trigger", std::string(trigger)},
                {"promoted", static_cast<uint64_t>(r.promoted.size())},
                {"failed", static_cast<uint64_t>(r.failed.size())},
                {"waiting", static_cast<uint64_t>(r.waiting.size())}});
    return r;
}

bool Failover::promote_one(const TenantRow& tenant, const std::string& copy, bool force,
                           std::string& why, std::string& history) {
    const auto maps = host_.maps();
    const auto copy_node = maps->nodes.find(copy);
    if (copy_node == maps->nodes.end()) {
        why = "its copy's node `" + copy + "` is not in the directory";
        return false;
    }
    // §6.4: the quota before the tenant's lease names the copy.
    if (!host_.send_quota(copy_node->second, tenant)) {
        host_.note("`" + copy + "` did not take `" + tenant.name +
                       "`'s quota before its promotion; it is sent again when the node answers",
                   "", {});
    }
    PromoteWire ask;
    ask.lineage = tenant.lineage;
    ask.forked = tenant.forked;
    ask.authority = maps->authority();
    ask.term = maps->term;
    ask.force = force;
    const PromoteReply reply = host_.promote(copy_node->second, tenant.name, ask);
    if (!reply.ok()) {
        why = !reply.answered ? "node `" + copy + "` did not answer: " + reply.error
                                : "node `" + copy + "` refused (" + std::to_string(reply.status) +
                                      "): " + reply.error;
        return false;
    }
    history = reply.history;
    // Named by none of the copy's grants until every standby router keeping up was sent the
    // row (after_promotions): a write acknowledged there before would be lost to a standby
    // promoted without the row, which routes the tenant to its old node.
    host_.withhold(copy, tenant.name);
    const engine::Status st =
        host_.directory().fail_over_tenant(tenant.name, copy, tenant.node, history);
    if (!st.is_ok()) {
        host_.restore(copy, tenant.name);
        // Promoted on the node, not in the directory: still routed to the old node, and under
        // leases named by no grant of the copy's, so the copy takes no write.
        why = "promoted on `" + copy +
              "`, but the directory could not point the tenant at it: " + st.to_string();
        return false;
    }
    if (force) {
        host_.note("`" + tenant.name + "` promoted on `" + copy + "` by force", "force",
                   {{"tenant", tenant.name},
                    {"node", copy},
                    {"lineage_was", tenant.lineage},
                    {"lineage", reply.lineage}});
        if (!reply.lineage.empty() && reply.lineage != tenant.lineage) {
            (void)host_.directory().set_lineage(tenant.name, reply.lineage);
        }
    }
    host_.cut(tenant.name, tenant.node);
    return true;
}

void Failover::after_promotions(const std::string& node, const std::vector<std::string>& to_nodes,
                                FailoverResult& r) {
    // §9.1 step 3: each node that took tenants is granted its new list at once, and the old
    // node its list without them; the new list once the standby routers were sent the rows.
    if (!r.promoted.empty()) {
        host_.wait_for_standbys(standby_wait_ms_max);
        for (const auto& [tenant, copy] : r.promoted) host_.restore(copy, tenant);
    }
    for (const std::string& n : to_nodes) host_.grant_now(n);
    host_.grant_now(node);
    const auto maps = host_.maps();
    for (const auto& [tenant, on] : maps->replicas) {
        if (on != node) continue;
        if (host_.directory().remove_replica(tenant).is_ok()) r.unreplicated.push_back(tenant);
    }
    if (maps->standby_of(node)) {
        bool left = false;
        for (const auto& [name, t] : host_.maps()->tenants) left = left || t.node == node;
        // Every tenant moved: the standby is a primary now; else kept for a second call.
        if (!left) (void)host_.directory().remove_pair(node);
    }
    host_.repair("the failover of node `" + node + "`");
}

std::optional<Failover::Waiting> Failover::take_waiting(const std::string& tenant) {
    std::lock_guard lock(mu_);
    auto it = waiting_.find(tenant);
    if (it == waiting_.end()) return std::nullopt;
    Waiting w = std::move(it->second);
    waiting_.erase(it);
    return w;
}

std::vector<std::pair<std::string, Failover::Waiting>> Failover::take_parked(
    const std::string& node) {
    std::vector<std::pair<std::string, Waiting>> out;
    std::lock_guard lock(mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        if (it->second.node == node) {
            out.emplace_back(it->first, std::move(it->second));
            it = waiting_.erase(it);
        } else {
            ++it;
        }
    }
    return out;
}

void Failover::settle_deferred(const std::string& node) {
    std::vector<std::string> parked;
    {
        std::lock_guard lock(mu_);
        for (const auto& [tenant, w] : waiting_) {
            if (w.node == node) parked.push_back(tenant);
        }
    }
    // Queued: each settles under run_mu_, once this run has let it go. One whose holder has not
    // let go yet finds its claim held and waits again.
    for (const std::string& tenant : parked) post([this, tenant] { settle_waiting(tenant); });
}

void Failover::settle_waiting(const std::string& tenant) {
    std::lock_guard run(run_mu_);
    Waiting w;
    {
        std::lock_guard lock(mu_);
        auto it = waiting_.find(tenant);
        if (it == waiting_.end()) return;
        // Its node's failover by hand is waiting in its fence: settled once that ends.
        if (fencing_.contains(it->second.node)) return;
        w = it->second;
        waiting_.erase(it);
    }
    const auto maps = host_.maps();
    const auto row = maps->tenants.find(tenant);
    if (row == maps->tenants.end() || row->second.node != w.node) {
        host_.unreserve(tenant);
        host_.restore(w.node, tenant);  // moved off (or deleted) meanwhile: nothing left to do
        host_.settled_waiting(w.node, tenant, "",
                              "moved off its node (or deleted) while it waited: not promoted");
        return;
    }
    if (maps->copy_of(row->second) != w.copy) {
        host_.unreserve(tenant);
        host_.restore(w.node, tenant);
        host_.note("`" + tenant + "` waited to be failed over onto `" + w.copy +
                       "`, which is no longer its copy: not promoted",
                   "", {});
        host_.settled_waiting(w.node, tenant, "",
                              "`" + w.copy + "` is no longer its copy: not promoted");
        return;
    }
    if (!host_.claim(tenant, failover_claim)) {  // another operation came first: wait for it too
        wait_for_claim(tenant, std::move(w));
        return;
    }
    std::string why, history;
    const bool done = !w.copy.empty() && promote_one(row->second, w.copy, w.force, why, history);
    host_.release(tenant);
    host_.restore(w.node, tenant);
    host_.settled_waiting(w.node, tenant, done ? w.copy : "",
                          w.copy.empty() ? std::string("it has no replica") : why);
    if (done) {
        host_.wait_for_standbys(standby_wait_ms_max);  // as after_promotions
        host_.restore(w.copy, tenant);
        host_.grant_now(w.copy);
        host_.note("`" + tenant +
                       "`, waiting for another operation, failed over "
                       "onto `" +
                       w.copy + "`",
                   "", {});
    } else {
        host_.note("`" + tenant +
                       "`, waiting for another operation, could not be "
                       "failed over onto `" +
                       w.copy + "`: " + (w.copy.empty() ? std::string("it has no replica") : why),
                   "", {});
    }
    host_.grant_now(w.node);
}

}  // namespace fenec::shard
