// shard/forward.cc: `/t/<tenant>/…` passed to the tenant's node (router.md §5): the tenant looked
// up in the directory's snapshot, the request sent with its original target and body byte for
// byte, the answer passed back — whole when it has a length, as it arrives when it has none (a
// subscription). The node checks credentials: the client's Authorization passes untouched
// (seed 000: the router holds no keys).
//
// Each forward stays registered in the router's InFlight (shard/in_flight.h) until its sink is
// done, so a failover can cut it by §9.10's table: the call taken from its sink on its own loop
// (RingCall::cut), then sent to the tenant's new primary, answered 502 `outcome: unknown`, or, a
// subscription, ended. A write a promoted copy refuses for its lease (503 `Fenec-Lease`) before
// the leading router's grant names the tenant there is asked again (Router::ask_again_for_lease):
// by the leading router at most twice, each once its grant was answered (§9.10's last
// paragraph); by a standby, which grants nothing, every 50 ms for a while (§9.12).
#include <charconv>
#include <mutex>
#include <optional>

#include "server/runtime/mark.h"
#include "shard/cluster.h"
#include "shard/global_copy.h"
#include "shard/handoff.h"
#include "shard/in_flight.h"
#include "shard/leases.h"
#include "shard/node_calls.h"
#include "shard/relay.h"
#include "shard/router.h"
#include "shard/test_hooks.h"

namespace fenec::shard {

namespace {

// True when `name` is one of `names`, case-insensitively; the lengths are compared first, so a
// header of a length none has costs one pass of size comparisons (headers are many per request).
template <size_t N>
bool one_of(std::string_view name, const std::string_view (&names)[N]) {
    for (std::string_view d : names) {
        if (d.size() == name.size() && http::iequals(name, d)) return true;
    }
    return false;
}

// Headers the router sets itself or that belong to one hop (§5.3).
bool dropped_request_header(std::string_view name) {
    static constexpr std::string_view dropped[] = {
        "Connection", "Keep-Alive", "TE", "Trailer", "Upgrade", "Transfer-Encoding",
        "Proxy-Authorization", "Proxy-Authenticate", "Host", "Content-Length", "Fenec-Router",
        "Fenec-Relay", "X-Request-Id", "Expect", "Fenec-Relay-Hop",
    };
    return one_of(name, dropped);
}

// Answer headers not passed back (§5.6): hop-by-hop, framing, and the router's own.
bool dropped_answer_header(std::string_view name) {
    static constexpr std::string_view dropped[] = {
        "Connection", "Keep-Alive", "TE", "Trailer", "Upgrade", "Transfer-Encoding",
        "Proxy-Authenticate", "Content-Length", "X-Request-Id", "Server",
    };
    return one_of(name, dropped);
}

// A HEAD answer keeps the node's length (§5.6), which write_response takes from the body; the
// padding is never sent. Past this a HEAD answers a length of 0 rather than allocate more.
constexpr uint64_t head_length_kept_max = 64ull << 20;

using Forwarding = Router::Forwarding;

// The answer's head as the client gets it: hop-by-hop and the router's own fields dropped (§5.6).
http::Response passed_back(server::Answer& answer, const std::string& request_id) {
    http::Response r;
    r.status = answer.status;
    r.content_type = "";
    r.headers.reserve(answer.headers.size() + 1);
    for (auto& [name, value] : answer.headers) {
        if (!dropped_answer_header(name)) r.header(std::move(name), std::move(value));
    }
    r.header("X-Request-Id", request_id);
    return r;
}

// One forward: the client's request kept for a resend, the call, and what its answer goes to.
class ForwardSink final : public server::CallSink,
                          public Cuttable,
                          public std::enable_shared_from_this<ForwardSink> {
  public:
    ForwardSink(Router& router, std::shared_ptr<server::Exchange> exchange, Router::Answering a,
                Forwarding f, std::string tenant, std::string node, bool head_only,
                bool resendable)
        : router_(router), exchange_(std::move(exchange)), a_(std::move(a)), f_(std::move(f)),
          tenant_(std::move(tenant)), node_(std::move(node)), head_only_(head_only),
          resendable_(resendable) {}

    // Before the call starts: its place in the in-flight record.
    void registered(uint64_t id) { id_ = id; }
    // Never started: out of the record, and forwarded again where the directory points now.
    void not_started(std::string_view reason) {
        done();
        router_.forward_again(std::move(f_), std::move(exchange_), std::move(a_), reason);
    }
    // Once it started (maybe on another thread than the one its callbacks run on). A cut that
    // came before it (cut_pending_) is made now.
    void started(std::weak_ptr<server::RingCall> call) {
        bool pending = false;
        {
            std::lock_guard lock(call_mu_);
            call_ = call;
            started_ = true;
            pending = cut_pending_;
        }
        if (pending) cut_call(call.lock());
    }

    void on_answer(server::Answer answer) override {
        if (!answer.stream) done();
        // §7.4: a tenant is never nowhere. A request looked up just before a move's flip reaches
        // the source after its copy was deleted: the node ran nothing (404), and the directory
        // names another node now, so it goes there, once.
        if (answer.status == 404 && !answer.stream && !f_.again &&
            router_.placed_elsewhere(tenant_, node_)) {
            router_.forward_again(std::move(f_), std::move(exchange_), std::move(a_), "moved");
            return;
        }
        // Issue 20: the row of a move across regions is written `importing` before its image is
        // installed; until the install ends the node has no copy (404): the move's refusal.
        if (answer.status == 404 && !answer.stream && router_.handoffs().installing(tenant_)) {
            if (auto moving = importing_refusal(*router_.directory().maps(), tenant_)) {
                http::Response r = Router::error(503, "");
                r.body = std::move(*moving);
                r.header("Retry-After", "1");
                router_.count(a_, 503);
                router_.accepted(f_.request->peer);
                exchange_->reply(std::move(r));
                return;
            }
        }
        const bool unleased = answer.status == 503 && answer.header("Fenec-Lease").has_value();
        if (unleased || (answer.status == 503 && !answer.stream)) {
            // Issue 20: imported by a move across regions, frozen and not yet leased until it is
            // activated: the move's refusal. The row is looked up first, so the body of another
            // 503 (a move's freeze, a node at capacity) is never read.
            auto moving = importing_refusal(*router_.directory().maps(), tenant_);
            if (moving && (unleased || node_answers::reason_of(answer.body) == "frozen")) {
                http::Response r = passed_back(answer, a_.request_id);
                r.body = std::move(*moving);
                router_.count(a_, answer.status);
                router_.accepted(f_.request->peer);
                exchange_->reply(std::move(r));
                return;
            }
            if (unleased && router_.ask_again_for_lease(node_, tenant_, f_, exchange_, a_)) return;
        }
        http::Response r = passed_back(answer, a_.request_id);
        router_.count(a_, answer.status);
        const std::string& peer = f_.request->peer;
        if (answer.stream) {
            router_.accepted(peer);
            r.stream = true;
            r.close = true;
            exchange_->start(std::move(r));
            return;
        }
        if (head_only_ && answer.content_length && *answer.content_length <= head_length_kept_max) {
            r.body.assign(*answer.content_length, ' ');
        } else {
            r.body = std::move(answer.body);
        }
        // The node refused the client's token: delayed here (§3), unless another router relayed
        // it, which delays it by the client's address (§11.5).
        if (answer.status == 401 && f_.relayed_for.empty()) {
            auto later = std::make_shared<http::Response>(std::move(r));
            return router_.after_refusal(peer, [exchange = exchange_, later] {
                exchange->reply(std::move(*later));
            });
        }
        router_.accepted(peer);
        exchange_->reply(std::move(r));
    }

    void on_failure(server::CallError failure) override {
        done();
        const int status = failure.failure == server::CallFailure::timeout ? 504 : 502;
        // §5.5: a write the node may have run says so. Cut before its answer (may_have_run), and
        // also once sent whole, when the answer began and was cut short (the node ran it, then
        // died answering) or did not come within the bound: a 502 or 504 saying no more reads as
        // "not run", and a client sending it again would run it twice. A resendable request
        // (a read, a keyed write) runs harmlessly again.
        using F = server::CallFailure;
        const bool may_have_run = failure.failure == F::may_have_run ||
                                  (!resendable_ && failure.sent_whole &&
                                   (failure.failure == F::cut || failure.failure == F::timeout));
        answer_failed(status, failure.message, may_have_run);
    }

    bool on_data(std::string bytes) override { return exchange_->write(std::move(bytes)); }
    void on_end() override {
        done();
        exchange_->end();
    }

    // §9.10, from the failover's thread: the call cut on its loop, then decided there. One not
    // started yet (registered, its call being made) is cut as it starts: a cut then found no
    // call and the request went on to the old node, to wait out --upstream-timeout.
    void cut() override {
        std::shared_ptr<server::RingCall> call;
        {
            std::lock_guard lock(call_mu_);
            if (!started_) {
                cut_pending_ = true;
                return;
            }
            call = call_.lock();
        }
        cut_call(std::move(call));
    }

  private:
    void cut_call(std::shared_ptr<server::RingCall> call) {
        if (!call) return;
        call->cut([self = shared_from_this()](server::CallPhase phase, bool sent_whole) {
            self->cut_decided(phase, sent_whole);
        });
    }

    void cut_decided(server::CallPhase phase, bool sent_whole) {
        if (phase == server::CallPhase::answer) return;  // an answer begun is left to the node
        done();
        if (phase == server::CallPhase::streaming) {  // on_end ended the client's stream
            router_.count_cut("subscription_ended");
            return;
        }
        if (!sent_whole || resendable_) {
            router_.count_cut("resent");
            router_.forward_again(std::move(f_), std::move(exchange_), std::move(a_), "moved");
            return;
        }
        router_.count_cut("answered_502");
        answer_failed(502,
                      "node `" + node_ +
                          "` was failed over while this write was out to it: it may have run",
                      true);
    }

    // §5.5: the body gains the node, and the outcome where it may have run.
    void answer_failed(int status, const std::string& message, bool may_have_run) {
        http::Response r = Router::error(status, message);
        r.body.pop_back();
        r.body += ",\"node\":\"" + node_ + "\"";  // node names are [a-z0-9_-]
        if (may_have_run) r.body += ",\"outcome\":\"unknown\"";
        r.body += "}";
        // A node this router leases is failed over within a lease of going silent (§9.4): the
        // client is told to ask again, as a move's refusal tells it. Not for a request that may
        // have run (sent again, a write would run twice), nor once the node was failed over (a
        // tenant still on it has no copy to go to: a second later is no different).
        if (const Leases* leases = router_.cluster().leases(); leases && !may_have_run) {
            if (auto v = leases->view(node_); v && v->takes && !v->failed_over) {
                r.header("Retry-After", "1");
            }
        }
        router_.metrics().upstream_errors->with({node_}).inc();
        router_.answer(*exchange_, a_, std::move(r));
    }

    // Out of the in-flight record: nothing is left to cut.
    void done() {
        if (id_ != 0) router_.in_flight().remove(node_, id_);
        id_ = 0;
    }

    Router& router_;
    std::shared_ptr<server::Exchange> exchange_;
    Router::Answering a_;
    Forwarding f_;
    std::string tenant_;
    std::string node_;
    bool head_only_;
    bool resendable_;
    std::mutex call_mu_;
    std::weak_ptr<server::RingCall> call_;  // under call_mu_
    bool started_ = false;                  // under call_mu_: started() ran
    bool cut_pending_ = false;              // under call_mu_: cut before it started
    uint64_t id_ = 0;                       // the call's loop once it started
};

// §11.6: on a relayed request passed to a region one more time; the router there passes it no
// further. A client setting it only keeps its own request from being passed again.
constexpr std::string_view relay_hop_header = "Fenec-Relay-Hop";

// A request relayed to a region's router (§11.6): its answer passed back as a node's is; a
// router that could not be reached passes the request to the next one.
class RelaySink final : public server::CallSink {
  public:
    RelaySink(Router& router, std::shared_ptr<server::Exchange> exchange, Router::Answering a,
              Forwarding f, std::string tenant, std::string region,
              std::vector<std::string> routers, size_t at, bool head_only, bool resendable)
        : router_(router),
          exchange_(std::move(exchange)),
          a_(std::move(a)),
          f_(std::move(f)),
          tenant_(std::move(tenant)),
          region_(std::move(region)),
          routers_(std::move(routers)),
          at_(at),
          head_only_(head_only),
          resendable_(resendable) {}

    void on_answer(server::Answer answer) override {
        if (answer.status == 503 && answer.header(superseded_header)) {
            // A router promoted over refuses unrun (Router::superseded): the next one is asked,
            // as one out of reach is.
            ++f_.superseded_routers;
            return router_.forward_to_region(std::move(f_), std::move(exchange_), std::move(a_),
                                             std::move(tenant_), std::move(region_),
                                             std::move(routers_), at_ + 1);
        }
        router_.relays().answered(region_, routers_[at_]);
        http::Response r = passed_back(answer, a_.request_id);
        router_.count(a_, answer.status);
        if (answer.stream) {
            r.stream = true;
            r.close = true;
            exchange_->start(std::move(r));
            return;
        }
        if (head_only_ && answer.content_length && *answer.content_length <= head_length_kept_max) {
            r.body.assign(*answer.content_length, ' ');
        } else {
            r.body = std::move(answer.body);
        }
        const std::string& peer = f_.request->peer;
        if (answer.status == 401) {  // §11.5: a refused token waits here, the first router
            auto later = std::make_shared<http::Response>(std::move(r));
            return router_.after_refusal(peer, [exchange = exchange_, later] {
                exchange->reply(std::move(*later));
            });
        }
        router_.accepted(peer);
        exchange_->reply(std::move(r));
    }
    void on_failure(server::CallError failure) override {
        // §11.4: a router that cannot be reached passes the relay to the next; so does one that
        // ended the connection without an answer, when the request is harmless to run twice
        // (GET, HEAD, OPTIONS, or a write with an Idempotency-Key).
        if (failure.failure == server::CallFailure::unreachable ||
            (failure.failure == server::CallFailure::may_have_run && resendable_)) {
            return router_.forward_to_region(std::move(f_), std::move(exchange_), std::move(a_),
                                             std::move(tenant_), std::move(region_),
                                             std::move(routers_), at_ + 1);
        }
        const int status = failure.failure == server::CallFailure::timeout ? 504 : 502;
        // The message names the router already (its peer_text, forward_to_region).
        http::Response r = Router::error(status, failure.message);
        r.body.pop_back();
        r.body += ",\"region\":\"" + region_ + "\"";  // region names are [a-z0-9_-]
        // §5.5, as a node's: a write sent whole whose answer was cut short or did not come in
        // time may have run there (the region's router forwarded it on), so it says so.
        using F = server::CallFailure;
        const bool may_have_run = failure.failure == F::may_have_run ||
                                  (!resendable_ && failure.sent_whole &&
                                   (failure.failure == F::cut || failure.failure == F::timeout));
        if (may_have_run) r.body += ",\"outcome\":\"unknown\"";
        r.body += "}";
        router_.answer(*exchange_, a_, std::move(r));
    }
    bool on_data(std::string bytes) override { return exchange_->write(std::move(bytes)); }
    void on_end() override { exchange_->end(); }

  private:
    Router& router_;
    std::shared_ptr<server::Exchange> exchange_;
    Router::Answering a_;
    Forwarding f_;
    std::string tenant_;
    std::string region_;
    std::vector<std::string> routers_;
    size_t at_;
    bool head_only_;
    bool resendable_;  // the call's resend_after_sent
};

// Fenec-Wait's value with `spent_ms` taken off (a held request resent after a cut keeps what is
// left of its wait, §9.10), or nullopt when it has none or it does not read.
std::optional<std::string> wait_left(const http::RequestHead& h, uint64_t spent_ms) {
    auto v = h.header("Fenec-Wait");
    if (!v) return std::nullopt;
    uint64_t ms = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), ms);
    if (ec != std::errc() || end != v->data() + v->size()) return std::nullopt;
    return std::to_string(ms > spent_ms ? ms - spent_ms : 0);
}

}  // namespace

void Router::forward(server::Request request, std::shared_ptr<server::Exchange> exchange,
                     Answering a) {
    Forwarding f;
    f.relayed_for = relayed_for(request, a.request_id, options_.token);
    f.request = std::make_shared<server::Request>(std::move(request));
    forward_to_node(std::move(f), std::move(exchange), std::move(a));
}

bool Router::placed_elsewhere(const std::string& tenant, const std::string& node) const {
    auto maps = directory_->maps();
    auto t = maps->tenants.find(tenant);
    return t != maps->tenants.end() && t->second.node != node;
}

void Router::forward_again(Forwarding f, std::shared_ptr<server::Exchange> exchange, Answering a,
                           std::string_view reason) {
    if (exchange->closed()) return;  // the client is gone: nothing to send it on for
    if (auto* retries = upstream_options_.retries) retries->with({reason}).inc();
    f.again = true;
    forward_to_node(std::move(f), std::move(exchange), std::move(a));
}

void Router::forward_to_node(Forwarding f, std::shared_ptr<server::Exchange> exchange,
                             Answering a) {
    const server::Request& request = *f.request;
    const http::RequestHead& h = request.head;
    // `/t/<tenant>/…`: the tenant is the second segment (§5.1).
    std::string_view rest = std::string_view(h.path).substr(3);
    const std::string tenant(rest.substr(0, rest.find('/')));
    if (h.path.size() <= 3 || tenant.empty()) {
        return answer(*exchange, a, error(404, "no tenant in " + h.path + ": use /t/<tenant>/…"));
    }
    if (!valid_name(tenant)) {
        return answer(*exchange, a,
                      error(400, "tenant name `" + tenant + "` is not [a-z0-9_-]{1,64}"));
    }
    // §11.6: a tenant this router's directory does not place is looked up in the global
    // directory's copy (a region's router); a tenant at home in a region keeping its own
    // directory goes to that region's routers. A relayed request goes no further.
    const bool relay_in = !f.relayed_for.empty();
    std::shared_ptr<const DirectoryMaps> maps = directory_->maps();
    const std::shared_ptr<const DirectoryMaps> looked_up = maps;  // for the look again below
    const std::string scope = maps->scope;
    const TenantRow* row = nullptr;
    if (auto t = maps->tenants.find(tenant); t != maps->tenants.end()) row = &t->second;
    if (!row && global_ && !relay_in) {
        if (!global_->ready()) {
            http::Response r = error(503,
                                     "this router has not received the global directory yet: "
                                     "tenant `" +
                                         tenant + "` may well exist");
            r.header("Retry-After", "1");
            return answer(*exchange, a, std::move(r));
        }
        std::shared_ptr<const DirectoryMaps> global = global_->maps();
        auto t = global->tenants.find(tenant);
        if (t != global->tenants.end() && home_region(t->second.node) != scope) {
            maps = std::move(global);
            row = &t->second;
        }
    }
    f.by_global = row && maps != looked_up;
    if (!row && relay_in && global_) {
        // §11.6: relayed here by another router, and placed by no directory of this region's.
        return answer(*exchange, a,
                      error(404, "tenant `" + tenant + "` is not placed in region `" + scope +
                                     "`'s directory"));
    }
    if (!row) {
        return answer(*exchange, a, error(404, "tenant `" + tenant + "` is not in the directory"));
    }
    if (std::optional<std::string_view> home = home_region(row->node)) {
        // §11.6: a row `@<r>` in a region's own directory is a tenant it let go of in a move
        // across regions (shard/handoff.h) while the global directory may still send it here:
        // a relayed request is passed to `r` one more time, and no further.
        const bool again = relay_in && global_ && *home != scope && !h.header(relay_hop_header);
        if (again) f.passed_again = true;
        if ((relay_in && !again) || *home == scope) {
            return answer(*exchange, a,
                          error(404, "tenant `" + tenant + "` is not placed in region `" +
                                         std::string(*home) + "`'s directory"));
        }
        // The region's routers: a `regions` row of the global directory (this router's own, or
        // its copy's).
        std::vector<std::string> routers;
        if (auto r = maps->regions.find(*home); r != maps->regions.end()) {
            routers = r->second;
        } else if (global_) {
            auto global = global_->maps();
            if (auto g = global->regions.find(*home); g != global->regions.end()) {
                routers = g->second;
            }
        }
        // §11.6: the one that answered last first (shard/relay.h keeps it).
        routers = relays_->ordered(std::string(*home), routers);
        return forward_to_region(std::move(f), std::move(exchange), std::move(a), tenant,
                                 std::string(*home), std::move(routers), 0);
    }
    auto n = maps->nodes.find(row->node);
    if (n == maps->nodes.end()) {
        http::Response r = error(502, "tenant `" + tenant + "` is placed on node `" + row->node +
                                          "`, which is not in the directory");
        return answer(*exchange, a, std::move(r));
    }
    const NodeRow& node = n->second;

    server::CallRequest up = to_node(node);
    up.about = tenant;
    up.head_only = h.method == http::Method::head;
    up.allow_stream = true;
    up.resend_after_sent = h.method == http::Method::get || h.method == http::Method::head ||
                           h.method == http::Method::options ||
                           h.header("Idempotency-Key").has_value();
    // The original target bytes, the client's method, its headers in order but the hop's own
    // and the router's (§5.3), then the router's. Sent again after a cut, a held request keeps
    // what is left of its wait.
    const std::optional<std::string> wait =
        f.again ? wait_left(h, now_ms() - a.start_ms) : std::nullopt;
    http::OutRequest out{.method = h.method_text, .target = h.target, .host = node.addr};
    out.headers.reserve(h.headers.size() + 2);
    for (const http::Header& field : h.headers) {
        if (dropped_request_header(field.name)) continue;
        if (wait && http::iequals(field.name, "Fenec-Wait")) {
            out.headers.push_back({field.name, *wait});
        } else {
            out.headers.push_back(field);
        }
    }
    // §11.5: a relayed request's node hears of the client the first router saw.
    const std::string client = relay_in ? f.relayed_for : peer_host(request.peer);
    const std::string mark = client + " " + server::router_mark(node.token, client, a.request_id);
    out.headers.push_back({"X-Request-Id", a.request_id});
    out.headers.push_back({"Fenec-Router", mark});
    out.body = request.body;
    http::write_request(out, up.bytes);

    const bool head_only = up.head_only;
    const bool resendable = up.resend_after_sent;
    test_hooks::stall_forward(tenant);  // between the lookup and the record, for a test
    auto sink = std::make_shared<ForwardSink>(*this, exchange, a, std::move(f), tenant, node.name,
                                              head_only, resendable);
    sink->registered(in_flight_->add(node.name, tenant, sink));
    // §9.10: a failover that pointed the tenant elsewhere after the lookup above took what was
    // out to the node before this request was in the record, so it cut nothing of it. Not sent
    // at all, it goes where the directory points now (a cut once started could find it sent
    // whole on a pooled connection, and an unkeyed write would be answered "may have run").
    // Unchanged since the lookup (the usual case), the directory is not searched again.
    if (directory_->maps() != looked_up && placed_elsewhere(tenant, node.name)) {
        return sink->not_started("moved");
    }
    std::shared_ptr<server::RingCall> call = upstream_->start(std::move(up), sink);
    std::weak_ptr<server::RingCall> weak = call;
    sink->started(weak);
    // A client gone ends what the router has out for it (a subscription above all).
    exchange->on_close([weak] {
        if (auto c = weak.lock()) c->cancel();
    });
}

void Router::forward_to_region(Forwarding f, std::shared_ptr<server::Exchange> exchange,
                               Answering a, std::string tenant, std::string region,
                               std::vector<std::string> routers, size_t at) {
    if (exchange->closed()) return;
    if (at >= routers.size() && !routers.empty() &&
        f.superseded_routers >= static_cast<int>(routers.size())) {
        // Not out of reach: every router of the region answered, each refusing as promoted over,
        // so its `regions` row names none that leads it now (a promotion the row was not told
        // of). As a change no router takes (§11.4): 503, asked again once the row is put right.
        // (Some not reached: the one leading may be among them, and 502 below says so.)
        http::Response r = error(
            503, "region `" + region + "`'s routers were each promoted over: its " +
                     "`regions` row names none that leads it (PUT /_shard/regions/" + region + ")");
        r.body.pop_back();
        r.body += ",\"region\":\"" + region + "\"}";
        r.header("Retry-After", std::string(relay_retry_after_s));
        return answer(*exchange, a, std::move(r));
    }
    if (at >= routers.size()) {
        // §11.10: a region out of reach is answered as a node out of reach is; the client asks
        // again.
        // Some answered promoted over and the rest were not reached: out of reach all the same
        // (the one leading may be among those), but not "none answered".
        const std::string what =
            routers.empty() ? "region `" + region + "` has no router recorded"
            : f.superseded_routers == 0
                ? "region `" + region + "` is out of reach: none of its routers answered"
                : "region `" + region +
                      "` is out of reach: " + std::to_string(f.superseded_routers) + " of its " +
                      std::to_string(routers.size()) +
                      " routers answered as promoted over and the others did not answer";
        http::Response r = error(502, what);
        r.body.pop_back();
        r.body += ",\"region\":\"" + region + "\"}";
        return answer(*exchange, a, std::move(r));
    }
    const http::RequestHead& h = f.request->head;
    const std::string& url = routers[at];
    server::CallRequest up;
    up.peer = url;
    up.peer_text = "region `" + region + "`'s router " + url;
    up.addr = replica_addr(url);
    up.about = tenant;
    up.head_only = h.method == http::Method::head;
    up.allow_stream = true;
    up.resend_after_sent = h.method == http::Method::get || h.method == http::Method::head ||
                           h.method == http::Method::options ||
                           h.header("Idempotency-Key").has_value();
    // Another region's router is across the link between regions: its answer is never back
    // within --upstream-poll-us, and polling for it only takes a CPU from what it waits on.
    up.poll_for_answer = false;
    http::OutRequest out{.method = h.method_text, .target = h.target, .host = up.addr};
    out.headers.reserve(h.headers.size() + 2);
    for (const http::Header& field : h.headers) {
        if (!dropped_request_header(field.name)) out.headers.push_back(field);
    }
    out.headers.push_back({"X-Request-Id", a.request_id});
    if (f.passed_again) out.headers.push_back({relay_hop_header, "2"});
    // The header's bytes outlive write_request below.
    std::string relay;
    if (const std::optional<std::string>& token = options_.token) {
        // Passed on once more (a relayed request for a tenant this region let go of): the client
        // is the one the incoming mark names, not the router that relayed it here.
        const std::string client =
            f.relayed_for.empty() ? peer_host(f.request->peer) : f.relayed_for;
        relay = client + " " +
                server::relay_mark(*token, client, a.request_id, h.method_text, h.target);
        out.headers.push_back({"Fenec-Relay", relay});
    } else {
        out.headers.push_back({"Via", relay_via});
    }
    out.body = f.request->body;
    http::write_request(out, up.bytes);
    const bool head_only = up.head_only;
    const bool resendable = up.resend_after_sent;
    auto sink = std::make_shared<RelaySink>(*this, exchange, a, std::move(f), std::move(tenant),
                                            std::move(region), std::move(routers), at, head_only,
                                            resendable);
    std::shared_ptr<server::RingCall> call = upstream_->start(std::move(up), sink);
    std::weak_ptr<server::RingCall> weak = call;
    exchange->on_close([weak] {
        if (auto c = weak.lock()) c->cancel();
    });
}

}  // namespace fenec::shard
