// shard/upstream.cc: the router's side of its calls to nodes (shard/upstream.h): the one pool both
// clients share, the metrics they count into (§14), and the admin plane's requests.
#include "shard/upstream.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "server/obs/metrics.h"
#include "server/runtime/pool.h"

namespace fenec::shard {

// The client's events as §14's families: retries by reason, idle connections by node, the loops'
// calls from sent to answer head.
class Upstream::Observer final : public server::ClientObserver {
  public:
    explicit Observer(const UpstreamOptions& o)
        : retries_(o.retries),
          idle_(o.idle_connections),
          duration_(o.duration ? &o.duration->with({}) : nullptr) {}

    void resent(std::string_view reason) override {
        if (retries_) retries_->with({reason}).inc();
    }
    void answered(uint64_t ms) override {
        if (duration_) duration_->observe_us(ms * 1000);
    }
    server::IdleCount* idle_count(std::string_view node) override {
        if (!idle_) return nullptr;
        std::lock_guard lock(mu_);
        auto it = counts_.find(node);
        if (it == counts_.end()) {
            it = counts_.try_emplace(std::string(node), idle_->with({node})).first;
        }
        return &it->second;
    }

  private:
    struct Count final : server::IdleCount {
        explicit Count(obs::Gauge& g) : gauge(g) {}
        void add(int delta) override { gauge.add(delta); }
        obs::Gauge& gauge;
    };

    obs::CounterFamily* const retries_;
    obs::GaugeFamily* const idle_;
    obs::Histogram* const duration_;  // the family's one child, looked up once
    std::mutex mu_;
    std::map<std::string, Count, std::less<>> counts_;  // a node's, kept for the pool's pointer
};

Upstream::Upstream() = default;

Upstream::~Upstream() { stop(); }

std::unique_ptr<Upstream> Upstream::create(const UpstreamOptions& options, std::string& error) {
    std::unique_ptr<Upstream> up(new Upstream());
    up->observer_ = std::make_unique<Observer>(options);
    up->pool_ = std::make_shared<server::ConnectionPool>(
        server::ConnectionPool::Options{options.idle_ms, options.pool_max, up->observer_.get()});
    server::RingClientOptions ro;
    ro.loops = options.loops;
    ro.timeout_ms = options.timeout_ms;
    ro.poll_us = options.poll_us;
    ro.pool = up->pool_;
    ro.observer = up->observer_.get();
    up->ring_ = server::RingClient::create(ro, error);
    if (!up->ring_) return nullptr;
    server::BlockingClient::Options bo;
    bo.pool = up->pool_;
    bo.timeout_ms = options.timeout_ms;
    bo.observer = up->observer_.get();
    up->blocking_ = std::make_unique<server::BlockingClient>(std::move(bo));
    return up;
}

std::shared_ptr<server::RingCall> Upstream::start(server::CallRequest request,
                                                  std::shared_ptr<server::CallSink> sink) {
    return ring_->start(std::move(request), std::move(sink));
}

server::CallResult Upstream::admin(const NodeRow& node, const AdminCall& call) {
    server::CallRequest r = to_node(node);
    r.resend_after_sent = call.resendable;
    r.timeout_ms = call.timeout_ms;
    http::OutRequest out{.method = call.method, .target = call.target, .body = call.body};
    if (!call.body.empty()) out.headers.push_back({"Content-Type", "application/json"});
    out.headers.insert(out.headers.end(), call.headers.begin(), call.headers.end());
    r.bytes = admin_request(node, call.request_id, std::move(out), fence());
    // The cuts made so far: an answer to a call asked after the last of them is the node's word
    // since; one to a call already out may have come before the cut, and lifts nothing.
    const uint64_t cuts_before = cuts_made_.load(std::memory_order_acquire);
    const bool own_bound =
        call.until.cancel || call.until.deadline != server::Clock::time_point::max();
    server::CallResult got;
    if (stopping_.load(std::memory_order_acquire)) {
        server::Until until = call.until;
        until.deadline =
            std::min({until.deadline, stop_end(),
                      server::Clock::now() + std::chrono::milliseconds(stopping_call_ms)});
        got = blocking_->call(r, until);
        if (!got.answer && got.error.failure != server::CallFailure::cancelled) {
            got.error.message = "this router is stopping, and gives a call at most " +
                                std::to_string(stopping_call_ms) + " ms: " + got.error.message;
        }
    } else if (own_bound || !call.cut_on_lapse) {
        // Its own bound, and the stop's cut (a hello, or a grant's round under a long lease).
        got = blocking_->call(
            r, server::Until{.deadline = call.until.deadline,
                             .cancel = call.until.cancel ? call.until.cancel : &stop_cut_});
    } else {
        const std::shared_ptr<const server::Cancel> cut = node_cancel(node.name);
        got = blocking_->call(r, server::Until{.cancel = cut.get()});
        if (!got.answer) got.error.message = said(got.error, node.name);
    }
    if (!got.answer && got.error.failure == server::CallFailure::cancelled &&
        stopping_.load(std::memory_order_acquire)) {
        got.error.message = cut_said(node.name);
    }
    if (got.answer) heard(node.name, cuts_before);
    return got;
}

server::Clock::time_point Upstream::stop_end() const {
    return server::Clock::time_point(
        server::Clock::duration(stop_end_.load(std::memory_order_acquire)));
}

std::shared_ptr<const server::Cancel> Upstream::node_cancel(const std::string& node) {
    std::lock_guard lock(cut_mu_);
    auto [it, made] = cuts_.try_emplace(node);
    if (made) {
        it->second = std::make_shared<server::Cancel>();
        if (stopping_.load(std::memory_order_relaxed)) it->second->cancel();
    }
    return it->second;
}

void Upstream::stop_calls() {
    std::vector<std::shared_ptr<server::Cancel>> cut;
    {
        std::lock_guard lock(cut_mu_);
        if (!stopping_.load(std::memory_order_relaxed)) {
            const auto end = server::Clock::now() + std::chrono::milliseconds(2 * stopping_call_ms);
            stop_end_.store(end.time_since_epoch().count(), std::memory_order_release);
        }
        stopping_.store(true, std::memory_order_release);
        for (const auto& [node, c] : cuts_) cut.push_back(c);
    }
    for (const auto& c : cut) c->cancel();  // outside the lock: wakes every wait on it
    stop_cut_.cancel();
}

void Upstream::cut_calls(const std::string& node) {
    std::shared_ptr<server::Cancel> c;
    {
        std::lock_guard lock(cut_mu_);
        auto [it, made] = cuts_.try_emplace(node);
        if (made) it->second = std::make_shared<server::Cancel>();
        c = it->second;
        cut_at_[node] = cuts_made_.fetch_add(1, std::memory_order_acq_rel) + 1;
    }
    c->cancel();  // outside the lock: wakes every wait on it
}

void Upstream::heard(const std::string& node, uint64_t cuts_before) {
    std::lock_guard lock(cut_mu_);
    if (stopping_.load(std::memory_order_relaxed)) return;  // cut for good
    auto it = cuts_.find(node);
    if (it == cuts_.end() || !it->second->cancelled()) return;
    if (auto at = cut_at_.find(node); at != cut_at_.end() && at->second > cuts_before) return;
    // A fresh one for the calls from now on; those holding the cancelled one have ended.
    it->second = std::make_shared<server::Cancel>();
}

void Upstream::stop() {
    if (ring_) ring_->stop();
}

std::string Upstream::cut_said(std::string_view node) const {
    if (stopping_.load(std::memory_order_acquire)) {
        return "this router is stopping: its call to node `" + std::string(node) +
               "` was cut, as one the node never answered";
    }
    return "node `" + std::string(node) +
           "`'s lease has certainly lapsed (it answered no grant in time): the call to it was "
           "cut, as one it never answered";
}

std::string Upstream::said(const server::CallError& error, std::string_view node) const {
    return error.failure == server::CallFailure::cancelled ? cut_said(node) : error.message;
}

server::CallRequest to_node(const NodeRow& node) {
    server::CallRequest r;
    r.peer = node.name;
    r.peer_text = "node `" + node.name + "`";
    r.addr = node.addr;
    return r;
}

std::string admin_request(const NodeRow& node, std::string_view request_id, http::OutRequest r,
                          std::string_view fence) {
    const std::string bearer = "Bearer " + node.token;
    r.host = node.addr;
    r.headers.insert(r.headers.begin(), {http::Header{"Authorization", bearer},
                                         http::Header{"X-Request-Id", request_id}});
    if (!fence.empty()) r.headers.push_back({"Fenec-Fence", fence});  // a view: `fence` outlives it
    std::string out;
    http::write_request(r, out);
    return out;
}

}  // namespace fenec::shard
