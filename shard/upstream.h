// shard/upstream.h: the router's calls to its nodes (router.md §5.4, §5.5, §13) over Fenec's one
// HTTP client (server/runtime/): the io_uring client for what runs on loops (a forwarded request,
// the query across tenants' calls), the blocking one for what runs on the API workers and at
// start (the admin plane, a move's image). What is the router's own stays here: which node a call
// goes to and how messages name it, the admin plane's credentials, and the metrics (§14).
//
// The rules every call keeps are the client's, said once in server/runtime/call.h: a pooled
// connection peeked before reuse; at most one resend, on a fresh connection, and only when
// harmless once the request was sent whole, else `may_have_run`; --upstream-timeout bounds the
// connect and each read or write, not a stream once its head came; a connection pooled again only
// after an answer framed by length, without `Connection: close`, nothing read past it. Both
// clients share one pool per node address (--upstream-pool, --upstream-idle).
//
// Threads: start() from any thread (a call runs on the calling server loop when there is one);
// admin() and blocking() from API workers or start-up, never a loop. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "server/runtime/cancel.h"
#include "server/runtime/client.h"
#include "server/runtime/ring_client.h"
#include "shard/directory.h"

namespace fenec::obs {
class CounterFamily;
class GaugeFamily;
class HistogramFamily;
}  // namespace fenec::obs

namespace fenec::shard {

struct UpstreamOptions {
    uint32_t loops = 1;
    uint64_t timeout_ms = 60'000;
    uint64_t idle_ms = 30'000;
    uint32_t pool_max = 32;
    // A loop that sent a request polls this long for its answer before it sleeps (RouterOptions).
    uint32_t poll_us = 0;
    // Metrics, optional: retries_total{reason}, upstream_idle_connections{node},
    // upstream_duration_seconds (the loops' calls: sent to answer head).
    obs::CounterFamily* retries = nullptr;
    obs::GaugeFamily* idle_connections = nullptr;
    obs::HistogramFamily* duration = nullptr;
};

// A call of the admin plane (§13) to one node, with the node's admin token.
struct AdminCall {
    std::string_view method{};
    std::string target{};
    std::string_view request_id{};  // X-Request-Id
    std::string_view body{};        // JSON, or empty
    bool resendable = false;        // running it twice is harmless (a GET, a delete, a thaw)
    uint64_t timeout_ms = 0;        // each connect, read or write; 0: --upstream-timeout
    server::Until until{};          // the whole call's deadline (a lease grant's), or none
    // Ended at once while the node's lease has certainly lapsed (Upstream::cut_calls). Not a
    // hello: it is how an operator adds back a node, and its answer lifts the cut.
    bool cut_on_lapse = true;
    std::vector<http::Header> headers{};  // besides the admin plane's own; views the caller keeps
};

class Upstream {
  public:
    // Starts the loops; nullptr and `error` when the kernel refuses a ring.
    static std::unique_ptr<Upstream> create(const UpstreamOptions& options, std::string& error);
    ~Upstream();

    // Any thread: a call on the loops; the sink's callbacks run on the loop it runs on.
    std::shared_ptr<server::RingCall> start(server::CallRequest request,
                                            std::shared_ptr<server::CallSink> sink);
    // Blocking (never on a loop): `call` to `node`, its whole answer or why there is none.
    server::CallResult admin(const NodeRow& node, const AdminCall& call);

    // Calls to a node whose lease has certainly lapsed, cut (§9.3, ours). An operation that holds
    // a tenant's claim while it waits on a node gone silent (a quota sent, a move's step) would
    // otherwise hold the tenant's failover, or a healthy source frozen, for --upstream-timeout.
    // cut_calls(node) ends every admin call and image connection to `node` that nothing but that
    // timeout bounds, in flight and made later; what has a bound of its own (a lease grant, a
    // status survey) or says so (a hello) goes on. Any answer from the node to a call asked after
    // the cut (its next grant's, within a third of a lease, whatever it says: taken, fenced, no
    // lease) lifts the cut, so a node back in any standing, or removed and added again, is cut no
    // longer than a grant's round. A status survey has a bound of its own; a repair's has not.
    // A cut call fails as one the node never answered, which every caller already handles.
    void cut_calls(const std::string& node);
    // What an image connection to `node` waits on (BlockingClient::connect's Until::cancel):
    // cancelled by cut_calls and stop_calls. Held for as long as the connection lives.
    std::shared_ptr<const server::Cancel> node_cancel(const std::string& node);
    // The router stopping, past its drain's grace (Router::drain): every admin call and image
    // connection to a node still out is cut (those bounded by --upstream-timeout alone, as
    // cut_calls cuts them, and those with a bound of their own: a hello, a grant's round), and
    // every admin call asked from now on is bounded at stopping_call_ms and at stop_end(),
    // whatever its own bound, and a new image connection fails at once: nothing waiting on a
    // silent node holds the stop for that timeout, per call. A move cut so is undone as on any
    // failed step: its thaw gets what is left of that bound, and is owed where the source does
    // not answer within it. Calls to other routers (a region's) are Relays::stop_calls's. Any
    // thread; idempotent.
    void stop_calls();
    static constexpr uint64_t stopping_call_ms = 1000;
    // When the last call stop_calls bounds ends: 2 × stopping_call_ms after the first stop_calls.
    server::Clock::time_point stop_end() const;
    // What a failed call to `node` says: its own message, or, where it was cut, that the node's
    // lease has certainly lapsed (cut_calls) or that this router is stopping (stop_calls).
    std::string said(const server::CallError& error, std::string_view node) const;
    std::string cut_said(std::string_view node) const;
    // The node answered a call asked when `cuts_before` cuts had been made (any number: an
    // answer the caller knows came after every cut, a lease grant's recorded under the leases'
    // lock): calls to it are not cut (from the next one on).
    void heard(const std::string& node,
               uint64_t cuts_before = std::numeric_limits<uint64_t>::max());
    // The blocking client itself, for a caller that relays a body (a move's image).
    server::BlockingClient& blocking() { return *blocking_; }

    // The router's `Fenec-Fence` value, `<authority> <term>` of its directory as it stands (""
    // for none): sent on every admin call and every image put, so a node refuses a change from a
    // router a standby was promoted over (§9.5). Set once, before any call.
    void set_fence(std::function<std::string()> fence) { fence_ = std::move(fence); }
    std::string fence() const { return fence_ ? fence_() : std::string(); }

    // Stops the loops. Idempotent.
    void stop();

    class Observer;

  private:
    Upstream();
    std::unique_ptr<Observer> observer_;
    std::shared_ptr<server::ConnectionPool> pool_;
    std::unique_ptr<server::RingClient> ring_;
    std::unique_ptr<server::BlockingClient> blocking_;
    std::function<std::string()> fence_;
    std::mutex cut_mu_;  // a leaf
    // node → what its calls bounded by --upstream-timeout alone wait on; cancelled while cut.
    std::map<std::string, std::shared_ptr<server::Cancel>, std::less<>> cuts_;
    std::map<std::string, uint64_t, std::less<>> cut_at_;  // node → its last cut's number
    std::atomic<uint64_t> cuts_made_{0};
    std::atomic<bool> stopping_{false};            // stop_calls; set under cut_mu_
    std::atomic<server::Clock::rep> stop_end_{0};  // stop_end(), since the clock's epoch
    server::Cancel
        stop_cut_;  // cancelled by stop_calls: what calls with a bound of their own watch
};

// A call to `node` with no bytes yet: its name (counts, finding calls), how messages name it
// ("node `n1`"), its address.
server::CallRequest to_node(const NodeRow& node);

// `r` written as a request of the admin plane to `node` (§13): Host is the node's address, and
// `Authorization: Bearer <its admin token>` and `X-Request-Id` go before r's own headers, and
// `Fenec-Fence` when `fence` is given (Upstream::fence).
std::string admin_request(const NodeRow& node, std::string_view request_id, http::OutRequest r,
                          std::string_view fence = {});

}  // namespace fenec::shard
