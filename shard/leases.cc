// shard/leases.cc: the primary router's leasing (router.md §9.4–§9.9); see shard/leases.h.
#include "shard/leases.h"

#include <algorithm>
#include <chrono>

#include "server/obs/metrics.h"

namespace fenec::shard {

namespace {

constexpr int64_t ns_per_ms = 1'000'000;
// The judge looks every min(50 ms, L/20) (§9.9).
constexpr int64_t judge_every_max_ms = 50;
// Raising the record waits at most this long for the standbys to be sent it (§9.7).
constexpr int64_t record_standby_wait_ms = 1000;
// A failover that left tenants on a node still silent is tried again after a lease, the wait
// doubling up to this on each one that ends so.
constexpr int64_t retry_max_ms = 60'000;
// A failover by hand waits at most this long for the node to let its tenants go (Leases::fence),
// looking again for its lapse this often.
constexpr int64_t fence_max_ms = 60'000;
constexpr int64_t fence_poll_ms = 10;

GrantReply silent() { return GrantReply{}; }

}  // namespace

struct Leases::Node {
    Node(std::string n, uint64_t starts, int64_t now_ns)
        : name(std::move(n)), book(starts, now_ns) {}
    std::string name;
    LeaseBook book;
    std::thread thread;
    std::condition_variable cv;  // wakes the thread (poke, stop) and grant_and_wait's waiters
    bool poke = true;            // send at once: the first grant goes as leasing starts
    bool removed = false;
    int64_t next_due_ns = 0;
    uint64_t answers = 0;  // counted answers so far
    // Judged lapsed and its failover not ended (failover_ended): its grants name no tenant, so
    // a node heard again just as its tenants are being promoted elsewhere takes no lease for
    // them (its lease would overlap the promoted copies').
    bool failing_over = false;
    // A failover ended with the node still silent and tenants left on it (a promotion that
    // failed: its copy's node did not answer, the directory's write failed): judged again from
    // then, so they are not left refusing writes until the node comes back. Backs off from a
    // lease, doubling to retry_max_ms; 0 when none is due. Cleared when the node answers.
    int64_t retry_at_ns = 0;
    int64_t retry_after_ms = 0;
    // A grant to the node went out at this instant more than a grant's period past its due time
    // (this router stopped, or the thread starved): the node is judged again only once that
    // grant has come back or been given up on (overdue_locked). 0: no such grant out.
    int64_t late_sent_ns = 0;
    // The lapse in progress (failing_over) was the node's first since it last answered, which
    // marked it failed over; false for a retry of a failover that ran (lapse_undone keeps that).
    bool lapse_marked = false;
    obs::Gauge* age = nullptr;
    obs::Gauge* failed_over = nullptr;
};

Leases::Leases(LeaseOptions options, LeaseHost& host, const engine::Clock& clock,
               obs::Registry& metrics)
    : options_(std::move(options)), host_(host), clock_(clock) {
    grants_ = &metrics.counter("fenec_router_grants_total", "grant answers", {"node", "outcome"});
    age_ = &metrics.gauge("fenec_router_lease_age_seconds", "since the node's last counted answer",
                          {"node"});
    failed_over_ = &metrics.gauge("fenec_router_node_failed_over",
                                  "1 while failed over and not heard from", {"node"});
    metrics.gauge_fn("fenec_router_lease_record_seconds", "the longest-lease record",
                     [this] { return static_cast<double>(record_ms()) / 1000; });
}

Leases::~Leases() { stop(); }

int64_t Leases::record_ms() const {
    std::lock_guard lock(mu_);
    return record_ms_;
}

bool Leases::started() const {
    std::lock_guard lock(mu_);
    return started_;
}

void Leases::start() {
    raise_record();
    std::lock_guard lock(mu_);
    started_ns_ = clock_.steady_ns();
    starts_ = static_cast<uint64_t>(host_.maps()->starts);
    started_ = true;
    sync_nodes_locked();
    judge_ = std::thread([this] { judge(); });
}

void Leases::stop() {
    std::vector<std::thread> threads;
    {
        std::lock_guard lock(mu_);
        if (stopping_) return;
        stopping_ = true;
        for (auto& [name, n] : nodes_) {
            n->cv.notify_all();
            if (n->thread.joinable()) threads.push_back(std::move(n->thread));
        }
        for (auto& t : retired_) threads.push_back(std::move(t));
        retired_.clear();
        judge_cv_.notify_all();
    }
    for (auto& t : threads) t.join();
    if (judge_.joinable()) judge_.join();
}

void Leases::raise_record() {
    const auto maps = host_.maps();
    const int64_t lease = options_.lease_ms;
    const int64_t before = maps->lease_record ? maps->lease_record->ms : 0;
    int64_t granted = lease;
    if (!maps->lease_record || lease > before) {
        const engine::Status st = host_.put_lease_record({lease, clock_.wall_ms(), options_.by});
        if (st.is_ok()) {
            host_.note("the longest-lease record raised from " + std::to_string(before) +
                           " ms to " + std::to_string(lease) + " ms",
                       "lease_record", {{"from_ms", before}, {"to_ms", lease}});
            host_.wait_for_standbys(record_standby_wait_ms);
        } else {
            // §9.7: where the record cannot be written, grants run no longer than it.
            granted = maps->lease_record ? std::min(lease, before) : lease;
            host_.note("the longest-lease record could not be raised (" + st.to_string() +
                           "); grants run " + std::to_string(granted) + " ms",
                       "", {});
        }
    }
    std::lock_guard lock(mu_);
    lease_ms_ = granted;
    record_ms_ = std::max(granted, before);
}

void Leases::lower_record_if_due(std::unique_lock<std::mutex>& lock, int64_t now_ns) {
    if (record_ms_ <= lease_ms_) return;
    const int64_t led_ms = (now_ns - started_ns_) / ns_per_ms;
    if (led_ms * 10 <= record_ms_ * 11) return;  // not yet led 1.1 × the record
    const int64_t from = record_ms_;
    const int64_t to = lease_ms_;
    lock.unlock();
    const engine::Status st = host_.put_lease_record({to, clock_.wall_ms(), options_.by});
    if (st.is_ok()) {
        host_.note("the longest-lease record lowered from " + std::to_string(from) + " ms to " +
                       std::to_string(to) + " ms",
                   "lease_record", {{"from_ms", from}, {"to_ms", to}});
    }
    lock.lock();
    if (st.is_ok()) record_ms_ = to;
}

void Leases::sync_nodes_locked() {
    if (!started_ || stopping_) return;
    const auto maps = host_.maps();
    const int64_t now = clock_.steady_ns();
    for (const auto& [name, row] : maps->nodes) {
        if (nodes_.contains(name)) continue;
        // A node added while leasing runs is counted as answered when it is first seen.
        auto n = std::make_unique<Node>(name, starts_, now);
        n->age = &age_->with({name});
        n->failed_over = &failed_over_->with({name});
        n->failed_over->set(0);
        Node* raw = n.get();
        nodes_.emplace(name, std::move(n));
        raw->thread = std::thread([this, raw] { run(*raw); });
    }
    for (auto it = nodes_.begin(); it != nodes_.end();) {
        if (maps->nodes.contains(it->first)) {
            ++it;
            continue;
        }
        it->second->removed = true;
        it->second->cv.notify_all();
        retired_.push_back(std::move(it->second->thread));
        graveyard_.push_back(std::move(it->second));  // its thread may still hold a reference
        it = nodes_.erase(it);
    }
}

std::vector<std::string> Leases::list_locked(const DirectoryMaps& maps,
                                             const std::string& node) const {
    std::vector<std::string> out;
    const auto held = withheld_.find(node);
    for (const auto& [name, t] : maps.tenants) {
        if (t.node != node || (t.state != "active" && t.state != "moving")) continue;
        if (held != withheld_.end() && held->second.contains(name)) continue;
        out.push_back(name);
    }
    return out;
}

void Leases::changed(const std::string& node) {
    std::lock_guard lock(mu_);
    sync_nodes_locked();
    for (auto& [name, n] : nodes_) {
        if (!node.empty() && name != node) continue;
        n->poke = true;
        n->cv.notify_all();
    }
}

bool Leases::grant_and_wait(const std::string& node, int64_t bound_ms) {
    std::unique_lock lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end() || stopping_) return false;
    Node& n = *it->second;
    const uint64_t before = n.answers;
    n.poke = true;
    n.cv.notify_all();
    return n.cv.wait_for(lock, std::chrono::milliseconds(bound_ms), [&] {
        return stopping_ || n.removed || n.answers > before;
    }) && n.answers > before;
}

bool Leases::withheld(const std::string& node, const std::string& tenant) const {
    std::lock_guard lock(mu_);
    auto w = withheld_.find(node);
    return w != withheld_.end() && w->second.contains(tenant);
}

void Leases::withhold(const std::string& node, const std::string& tenant) {
    std::lock_guard lock(mu_);
    ++withheld_[node][tenant];
}

bool Leases::fence(const std::string& node, const std::vector<std::string>& tenants) {
    std::unique_lock lock(mu_);
    // Counted whatever the answer: the caller gives it back (unfence) in every case, and a give-
    // back not counted here would lift another holder's (a move's) withholding.
    for (const std::string& t : tenants) ++withheld_[node][t];
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return true;  // no lease of this router's to wait for
    if (stopping_) return false;          // the router stops: nothing is known of the node
    Node& n = *it->second;
    n.poke = true;
    n.cv.notify_all();
    const int64_t bound_ms = std::min<int64_t>(fence_max_ms, lease_ms_ * 3 / 2 + 1000);
    const int64_t until = clock_.steady_ns() + bound_ms * ns_per_ms;
    auto fenced = [&] {
        if (stopping_ || n.removed || n.book.standing() != LeaseStanding::leasing) return true;
        const std::vector<std::string>& held = n.book.tenants();
        const bool none = std::none_of(tenants.begin(), tenants.end(), [&](const std::string& t) {
            return std::binary_search(held.begin(), held.end(), t);
        });
        if (none && n.book.holds_list()) return true;
        // Judged lapsed and not heard since: certainly lapsed still, though a grant sent since
        // is out (which lapsed() waits for; grants go out again and again to a node failed over,
        // so a wait for none out could last past the bound).
        if (n.book.failed_over()) return true;
        return n.book.lapsed(clock_.steady_ns(), lease_ms_ * ns_per_ms, record_ms_ * ns_per_ms);
    };
    // Woken by each answer (the lease thread notifies), and looking again for the lapse.
    while (!fenced()) {
        const int64_t now = clock_.steady_ns();
        if (now >= until) return false;
        n.cv.wait_for(lock, std::chrono::nanoseconds(std::min<int64_t>(until - now,
                                                                       fence_poll_ms * ns_per_ms)));
    }
    return !stopping_;  // a router stopping promotes nothing on a fence it did not see end
}

void Leases::restore(const std::string& node, const std::string& tenant) {
    std::lock_guard lock(mu_);
    auto it = withheld_.find(node);
    if (it == withheld_.end()) return;
    auto t = it->second.find(tenant);
    if (t == it->second.end()) return;
    if (--t->second <= 0) it->second.erase(t);
    if (it->second.empty()) withheld_.erase(it);
}

std::optional<LeaseView> Leases::view(const std::string& node) const {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return std::nullopt;
    const LeaseBook& b = it->second->book;
    LeaseView v;
    v.takes = b.standing() == LeaseStanding::leasing;
    v.age_ms = (clock_.steady_ns() - b.last_answer_ns()) / ns_per_ms;
    v.failed_over = b.failed_over();
    v.fenced = b.standing() == LeaseStanding::fenced;
    return v;
}

void Leases::run(Node& n) {
    std::unique_lock lock(mu_);
    while (!stopping_ && !n.removed) {
        const int64_t now = clock_.steady_ns();
        if (!n.poke && now < n.next_due_ns) {
            n.cv.wait_for(lock, std::chrono::nanoseconds(n.next_due_ns - now));
            continue;
        }
        n.poke = false;
        const auto maps = host_.maps();
        const auto row = maps->nodes.find(n.name);
        if (row == maps->nodes.end()) break;  // removed; sync_nodes_locked retires this thread
        const NodeRow node = row->second;
        n.book.set_tenants(n.failing_over ? std::vector<std::string>{}
                                          : list_locked(*maps, n.name));
        const GrantWire grant =
            n.book.next(maps->authority(), maps->term, maps->history, lease_ms_);
        const int64_t bound_ns = lease_ms_ * ns_per_ms / 3;  // the whole call (§9.9)
        const int64_t sent = clock_.steady_ns();
        const int64_t late_ns = n.next_due_ns != 0 ? sent - n.next_due_ns : 0;
        if (late_ns > bound_ns) n.late_sent_ns = sent;
        // Never past the lapse point while the node is not failed over: a grant still out there
        // would keep the judge from failing over a node whose lease has certainly lapsed, up to
        // a third of a lease late. Giving up on it there is safe: an answer to it would run the
        // node's lease from the answer it acknowledges, an earlier one, so that lease ends
        // before the lapse point anyway. Once failed over, a grant has its whole third again,
        // so a node that comes back is heard (§9.11). Nor is a node that fences us or takes no
        // lease ever failed over by us: its grants have their third too. Cut at a lapse point
        // long past, every answer it gave once it took our grants again (another authority's
        // lease over) was counted as none, and it was never leased again.
        // A grant sent late (late_sent_ns) has its third too: it is what the judge waits for,
        // and cut at a lapse point long past it would ask nothing.
        const int64_t due =
            n.book.failed_over() || n.book.standing() != LeaseStanding::leasing ||
                    n.late_sent_ns == sent
                ? sent + bound_ns
                : std::min(sent + bound_ns,
                           n.book.lapse_point_ns(lease_ms_ * ns_per_ms, record_ms_ * ns_per_ms));
        const bool say_late = late_ns > bound_ns && sent - late_said_ns_ > lease_ms_ * ns_per_ms;
        if (say_late) late_said_ns_ = sent;
        lock.unlock();
        if (say_late) {
            host_.note("the grant to `" + n.name + "` went out " +
                           std::to_string(late_ns / ns_per_ms) +
                           " ms past its time (this router stopped or starved): each node is "
                           "judged again only once a grant sent to it since has come back or been "
                           "given up on",
                       "", {});
        }
        GrantReply reply = host_.grant(node, grant, due);
        const int64_t back = clock_.steady_ns();
        lock.lock();
        if (back > due) reply = silent();  // not back in time: counted as nothing
        if (n.late_sent_ns == sent) n.late_sent_ns = 0;
        const GrantEffect e = n.book.answered(reply, back);
        // After the answer is recorded, under the lock: a cut the judge made before it, on the
        // book as it was, is lifted; one after it needs a lapse since this answer.
        if (reply.kind != GrantReply::Kind::silent) host_.heard(n.name);
        n.next_due_ns = e.again_now ? back : sent + bound_ns;
        const bool counted = reply.kind == GrantReply::Kind::taken;
        if (counted) ++n.answers;
        n.cv.notify_all();  // grant_and_wait
        if (e.returned) {
            n.failed_over->set(0);
            n.retry_at_ns = 0;
            n.retry_after_ms = 0;
        }
        // No grant is out now: judged here too, before the next one goes, or a node whose every
        // call runs to its bound would always have one out when the judge looks.
        const bool lapsed = judge_locked(n, back);
        if (lapsed) host_.cut_calls(n.name);
        lock.unlock();
        if (lapsed) host_.lapsed(n.name);
        count(n.name, e.outcome);
        if (e.first_fence) {
            host_.note("fenced at `" + n.name + "`: " + reply.holder +
                           "; it is not failed over by this router",
                       "fenced",
                       {{"node", n.name}, {"authority", grant.authority}, {"term", grant.term}});
        }
        if (e.first_takes_none) {
            host_.note("node `" + n.name +
                           "` takes no lease (started without --lease): it is never failed "
                           "over on its own",
                       "", {});
        }
        if (counted) host_.answered(n.name, e.returned);
        lock.lock();
    }
}

void Leases::judge() {
    std::unique_lock lock(mu_);
    const int64_t every_ms = std::max<int64_t>(1, std::min(judge_every_max_ms, lease_ms_ / 20));
    while (!stopping_) {
        judge_cv_.wait_for(lock, std::chrono::milliseconds(every_ms));
        if (stopping_) break;
        const int64_t now = clock_.steady_ns();
        std::vector<std::string> lapsed;
        for (auto& [name, n] : nodes_) {
            n->age->set(static_cast<double>(now - n->book.last_answer_ns()) / 1e9);
            if (judge_locked(*n, now)) {
                host_.cut_calls(name);
                lapsed.push_back(name);
            }
        }
        lower_record_if_due(lock, now);
        if (lapsed.empty()) continue;
        lock.unlock();
        for (const std::string& name : lapsed) host_.lapsed(name);
        lock.lock();
    }
}

bool Leases::overdue_locked(const Node& n, int64_t now_ns) const {
    if (n.late_sent_ns != 0) return true;  // that grant is out: judged once it is back
    const int64_t bound_ns = lease_ms_ * ns_per_ms / 3;
    return n.next_due_ns != 0 && now_ns - n.next_due_ns > bound_ns;
}

bool Leases::judge_locked(Node& n, int64_t now_ns) {
    if (overdue_locked(n, now_ns)) return false;
    if (host_.superseded()) return false;  // it fails nothing over: nothing lapses for it
    if (n.book.failed_over()) {
        // Judged again only for a failover that left tenants there, once its retry is due, and
        // under the same test as the first time: the node has certainly lapsed.
        if (n.failing_over || n.retry_at_ns == 0 || now_ns < n.retry_at_ns) return false;
        if (!n.book.lapsed(now_ns, lease_ms_ * ns_per_ms, record_ms_ * ns_per_ms)) return false;
        n.retry_at_ns = 0;
        const auto maps = host_.maps();
        const bool left = std::any_of(maps->tenants.begin(), maps->tenants.end(),
                                      [&](const auto& t) { return t.second.node == n.name; });
        if (!left) return false;
        n.failing_over = true;
        n.lapse_marked = false;
        return true;
    }
    if (!n.book.lapsed(now_ns, lease_ms_ * ns_per_ms, record_ms_ * ns_per_ms)) return false;
    n.book.mark_failed_over();
    n.failed_over->set(1);
    n.failing_over = true;
    n.lapse_marked = true;
    return true;
}

void Leases::failover_ended(const std::string& node) {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end() || !it->second->failing_over) return;
    Node& n = *it->second;
    n.failing_over = false;
    n.poke = true;  // its list now: the tenants the failover left there
    if (n.book.failed_over()) {  // not heard since: what the failover left is tried again
        n.retry_after_ms =
            n.retry_after_ms == 0 ? lease_ms_ : std::min(n.retry_after_ms * 2, retry_max_ms);
        n.retry_at_ns = clock_.steady_ns() + n.retry_after_ms * ns_per_ms;
    }
    it->second->cv.notify_all();
}

void Leases::lapse_undone(const std::string& node) {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(node);
    if (it == nodes_.end() || !it->second->failing_over) return;
    Node& n = *it->second;
    n.failing_over = false;
    // A retry of a failover that ran leaves it failed over (it was), and is tried no more.
    if (n.lapse_marked) {
        n.book.clear_failed_over();
        n.failed_over->set(0);
    }
    n.retry_at_ns = 0;
    n.retry_after_ms = 0;
    n.cv.notify_all();
}

void Leases::count(const std::string& node, std::string_view outcome) {
    grants_->with({node, std::string(outcome)}).inc();
}

}  // namespace fenec::shard
