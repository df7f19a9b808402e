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

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

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
