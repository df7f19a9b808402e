// shard/router.h: fenec-shard's Handler (server/runtime/http_server.h) and what it wires together:
// the directory (shard/directory.h), the connections to nodes (shard/upstream.h), the `/_shard/`
// API (shard/api.cc), metrics and the audit log. Routes (router.md §3): `/t/<tenant>/…` forwarded
// to the tenant's node (shard/forward.cc), `/_shard/` and `/_metrics` behind --token, `/_health`
// open, `/_replication` behind --replication-token (shard/standby.h), anything else 404 naming
// the served prefixes.
//
// Threads: check_head and handle run on the HTTP server's loops and never block: a lookup is a
// snapshot of the directory, a forward is handed to an upstream loop, and the `/_shard/` API runs
// on a small worker pool, since it waits on nodes and on the directory's fsync.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "engine/clock.h"
#include "server/obs/access.h"
#include "server/obs/audit.h"
#include "server/obs/metrics.h"
#include "server/runtime/http_server.h"
#include "server/runtime/version.h"
#include "shard/directory.h"
#include "shard/log_line.h"
#include "shard/options.h"
#include "shard/upstream.h"

namespace fenec::server {
class WorkerPool;
class Timers;
}
namespace fenec::server {
class RefusalDelay;
}

namespace fenec::shard {

class Cluster;
class Copies;
class Fanout;
class GlobalCopy;
class Handoffs;
class InFlight;
class Standby;
class NodeCalls;
class Relays;
class TwoLevel;
struct QueryRequest;

inline constexpr std::string_view shard_version = server::fenec_version;
// Threads of the `/_shard/` API: changes are serialised by the directory anyway; a few let a
// slow node's call not hold up a read of the directory.
inline constexpr size_t api_threads = 4;
// `/_shard/` requests waiting for a thread before 503: an operator's API, not a data plane.
inline constexpr size_t api_queue_max = 256;
// A write refused for its lease is asked again by the leading router at most this often, each
// after a grant (§9.10), and by a standby this often, for a while (§9.12).
inline constexpr int lease_retries_max = 2;
inline constexpr int64_t standby_lease_ask_ms = 50;

enum class Route : uint8_t { tenant, shard, query, metrics, health, other, replication, console };

class Router final : public server::Handler {
  public:
    // `clock` (main(): the system's; outlives the Router) is every time the router reads: the
    // wall clock of audit and span lines and of the start time, the monotonic clock of
    // durations, refusal delays and the answers' timing.
    Router(RouterOptions options, const engine::Clock& clock);
    ~Router() override;

    // Opens the directory and the audit log, starts the upstream loops, binds. "" when fine,
    // else why (exit 2).
    std::string prepare();
    // Starts serving; the port bound.
    void serve();
    uint16_t port() const;
    // SIGTERM: stop accepting, let requests in flight finish (up to 10 s), sync, stop.
    void drain();

    server::HeadVerdict check_head(const server::Request& request) override;
    void handle(server::Request request, std::shared_ptr<server::Exchange> exchange) override;
    http::Response over_capacity(std::string_view reason) override;
    // --access-log: the answer's line queued (never written here, on the loop).
    void on_answered(const server::Answered& answered) override;

    // Shared with api.cc and forward.cc.
    struct Answering {
        Route route = Route::other;
        uint64_t start_ms = 0;
        std::string request_id;
    };
    // Adds X-Request-Id, counts the answer, hands it over.
    void answer(server::Exchange& exchange, const Answering& a, http::Response response);
    // Counts an answer given by other means (a stream's head).
    void count(const Answering& a, int status);
    // `{"error": message}`, and text members beside it where given (§6.1's case fields: `step`,
    // `router`, ...).
    static http::Response error(
        int status, std::string message,
        std::initializer_list<std::pair<const char*, std::string>> fields = {});
    // The audit log's lines (§15), through the one audit-line builder (server/obs/audit.h):
    // `admin` for a change to /_shard/, `refused` for a 401/403 answered or relayed.
    void audit_admin(const server::Request& request, const Answering& a, int status);
    void audit_refused(const server::Request& request, std::string_view request_id);
    // Writes `line` to the audit log, when there is one, with its time, peer and request id.
    void audit(obs::AuditLine line, std::string_view peer, std::string_view request_id);
    // The --trace log, or nullptr (§16).
    obs::LineLog* trace_log() { return trace_.get(); }
    // UTC ms and a monotonic ms, both read from the injected clock.
    int64_t wall_ms() const { return clock_.wall_ms(); }
    Directory& directory() { return *directory_; }
    Upstream& upstream() { return *upstream_; }
    const RouterOptions& options() const { return options_; }
    uint64_t now_ms() const { return static_cast<uint64_t>(clock_.steady_ns() / 1'000'000); }
    const engine::Clock& clock() const { return clock_; }
    std::string new_request_id(std::optional<std::string_view> sent);

    // The refusal delay (§3): `fn` (which answers a 401 or 403 to `peer`, host:port) runs after
    // the delay this refusal earns its address, on the timer thread, or at once when there is
    // none. `accepted`: a request from `peer` whose token was not refused clears its address.
    void after_refusal(std::string_view peer, std::function<void()> fn);
    void accepted(std::string_view peer);

    // Tenants claimed by an operation in progress (§6.1): false when already claimed; `what`
    // (create, delete, move) is what held_by answers while it holds the claim. A release lets a
    // failover that waited for the tenant go on (§9.3).
    bool claim(const std::string& tenant, std::string_view what = "");
    // As claim, but where an operation named in `waits_for` holds the tenant, waits up to
    // `bound_ms` in all for it to let go first (one that does the same work, so the caller finds
    // it done; or a repair's step, AskedClaim). A failover, holding the tenant or reserved it,
    // is waited for as well.
    bool claim_after(const std::string& tenant, std::string_view what,
                     std::initializer_list<std::string_view> waits_for, uint64_t bound_ms);
    void release(const std::string& tenant);
    // What holds `tenant`: its claim's `what`, else failover_claim while a failover is reserved
    // it, else "".
    std::string held_by(const std::string& tenant);
    // A failover parked on `tenant` (§9.3) is the next to claim it: once its holder lets go, no
    // other operation takes it (claim and claim_after refuse or wait) until a failover claims it
    // or unreserve. True when a claim holds it still (its release settles the failover); false
    // when none does, and the failover settles it now.
    bool reserve_for_failover(const std::string& tenant);
    void unreserve(const std::string& tenant);
    // Moves inherited `moving` through a promotion whose target did not say whether it took
    // writes (shard/move.h, settle_move): left frozen on their source, settled again each round
    // by the settling thread (TwoLevel::settle, Handoffs::settle_moving). take_moves_to_settle
    // empties the set: settle_move keeps those it leaves again.
    void keep_settling_move(const std::string& tenant);
    std::vector<std::string> take_moves_to_settle();
    bool settling_move(const std::string& tenant);  // kept for a later round

    struct Metrics {
        obs::CounterFamily* requests = nullptr;
        obs::HistogramFamily* durations = nullptr;
        obs::CounterFamily* upstream_errors = nullptr;
        obs::Counter* refused = nullptr;
        obs::GaugeFamily* tenants = nullptr;
        obs::CounterFamily* fanouts = nullptr;        // {merge, outcome}
        obs::CounterFamily* fanout_calls = nullptr;   // {outcome}
        obs::HistogramFamily* fanout_duration = nullptr;  // {merge}
        obs::CounterFamily* moves = nullptr;            // {outcome, scope} (shard/move.cc)
        obs::HistogramFamily* move_duration = nullptr;  // successful moves
        obs::CounterFamily* cut_requests = nullptr;     // {outcome} (§9.10)
    };
    Metrics& metrics() { return metrics_; }

    // A forward's request, kept whole for a resend (§9.10's cut, a lease refusal).
    struct Forwarding {
        std::shared_ptr<server::Request> request;
        int lease_retries = 0;  // lease refusals asked again so far (at most 2 when leading)
        int64_t lease_refused_ms = 0;  // the first lease refusal (a standby's window, §9.12)
        bool again = false;     // a resend: Fenec-Wait keeps what is left of its wait
        // Relayed by another router (§11.5, §11.6): the client its valid `Fenec-Relay` mark names
        // (or, among routers without --token, the relaying router's address, from `Via`); ""
        // for a request from a client. A relayed request is placed by this router's own
        // directory alone, and its node's 401 is not delayed here.
        std::string relayed_for;
        // §11.6: a relayed request for a tenant its row here says went to another region in a
        // move across regions, passed there one more time (`Fenec-Relay-Hop: 2` on it, so the
        // router there passes it no further).
        bool passed_again = false;
        // Routers of the region it is relayed to that refused it as promoted over (§10): every
        // one of them so, not "out of reach" (502) but a `regions` row to put right (503).
        int superseded_routers = 0;
        // The tenant's row came from the copy of the global directory (a region's router): its
        // node is the global router's to lease, never this router's (ask_again_for_lease).
        bool by_global = false;
    };
    // Sends `f` again to where the directory places its tenant now; `reason` is counted in
    // fenec_router_retries_total. Nothing when the client is gone.
    void forward_again(Forwarding f, std::shared_ptr<server::Exchange> exchange, Answering a,
                       std::string_view reason);
    // §11.6: `f` sent to region `region`'s routers, from the `at`th of `routers` on, the next
    // tried when one cannot be reached or refuses as promoted over; none answering is 502 naming
    // the region, every one of them refusing as promoted over 503 naming it (forward.cc).
    void forward_to_region(Forwarding f, std::shared_ptr<server::Exchange> exchange, Answering a,
                           std::string tenant, std::string region,
                           std::vector<std::string> routers, size_t at);
    InFlight& in_flight() { return *in_flight_; }
    // Whether the directory places `tenant` on another node than `node` now (a move's flip or a
    // failover since a request was sent there).
    bool placed_elsewhere(const std::string& tenant, const std::string& node) const;
    void count_cut(std::string_view outcome);
    // `node` refused `f`'s write for its lease (503 `Fenec-Lease`): true when it is sent again
    // (forward_again, "lease"), false when the refusal is to be passed on.
    // - Leading (§9.10): at most lease_retries_max times, each on an API worker once the node
    //   was granted its list now and answered (or a lease's time passed); while `tenant` is
    //   withheld from the node (a move's or a failover's wait for the standby routers), every
    //   standby_lease_ask_ms on the timers instead, uncounted, within the same bound.
    // - A standby, or a region's router to a node of the global directory's (§9.12), which
    //   grant nothing: every standby_lease_ask_ms, until two thirds of the lease recorded in
    //   the directory placing the node or --upstream-timeout, whichever is sooner, has passed
    //   since the first refusal, and only while the client is there.
    // Neither, or the workers full: false.
    bool ask_again_for_lease(const std::string& node, const std::string& tenant, Forwarding& f,
                             const std::shared_ptr<server::Exchange>& exchange, const Answering& a);
    // §9.10: what is out to `from` for `tenant` cut; the directory points at its new primary.
    void cut(const std::string& tenant, const std::string& from);
    // Leasing and failover (shard/cluster.h), made in prepare().
    Cluster& cluster() { return *cluster_; }
    Cluster* cluster_if_made() { return cluster_.get(); }  // null in prepare() before it is
    // A node's bytes on disk for placing a tenant (shard/placement.h): its `GET /_admin/hello`,
    // nullopt when it does not answer. A node this router's leases failed over (lapsed, not back)
    // is not asked: it is not a place for a tenant, and asking it would hold the create or move
    // for --upstream-timeout.
    std::optional<uint64_t> placement_bytes(const NodeRow& node, std::string_view request_id);
    // Whether this router's leases failed `node` over (lapsed, not answered since): no copy is
    // placed there, as no tenant is (placement_bytes).
    bool failed_over(const std::string& node);
    obs::Registry& registry() { return registry_; }

  private:
    void init_metrics();
    // prepare()'s work after lines_ opened: "" or why the router cannot start.
    std::string open_parts();
    // lines_ written out and closed; log_line writes straight to stderr after it.
    void close_lines();
    void forward_to_node(Forwarding f, std::shared_ptr<server::Exchange> exchange, Answering a);
    std::optional<http::Response> check_token(const server::Request& request);
    std::optional<http::Response> check_host(const server::Request& request, Route route);
    void forward(server::Request request, std::shared_ptr<server::Exchange> exchange,
                 Answering a);                                  // forward.cc
    http::Response serve_api(const server::Request& request, const Answering& a);  // api.cc
    http::Response serve_metrics();
    // POST /_shard/query (§12), on the client's loop: the tenants' calls start there, and the
    // query is answered from the callback of the call that ends it (query.cc).
    void serve_query(const server::Request& request, std::shared_ptr<server::Exchange> exchange,
                     const Answering& a);
    http::Response finish_query(Fanout& fanout, const QueryRequest& q, const Answering& a,
                                const std::string& peer, int64_t start_wall,
                                const std::string& root_span, const std::string& parent_span);

    RouterOptions options_;
    const engine::Clock& clock_;
    std::unique_ptr<Directory> directory_;
    std::unique_ptr<Upstream> upstream_;
    std::unique_ptr<server::HttpServer> server_;
    std::unique_ptr<server::WorkerPool> api_pool_;
    // §11.4: `/_shard/` requests relayed by another router (a valid mark) run here, never behind
    // direct ones on api_pool_: a direct change relayed to the other level waits on a worker
    // there, whose relay back here would otherwise wait on it in turn.
    std::unique_ptr<server::WorkerPool> relayed_pool_;
    std::unique_ptr<obs::LineLog> audit_;
    std::unique_ptr<obs::LineLog> access_;  // --access-log
    std::unique_ptr<obs::LineLog> trace_;
    std::shared_ptr<obs::LineLog> lines_;  // log_line's, on stderr (shared with log_line's callers)
    std::unique_ptr<server::RefusalDelay> delay_;
    std::unique_ptr<server::Timers> timers_;
    obs::Registry registry_;
    // The children count() adds to, looked up once (a family's `with` takes its mutex and
    // builds its key: four of them a request cost more than the rest of counting).
    static constexpr size_t routes_ = 8;         // Route's values
    static constexpr size_t code_classes_ = 5;   // 1xx … 5xx
    std::array<std::array<obs::Counter*, code_classes_>, routes_> request_counters_{};
    std::array<obs::Histogram*, routes_> request_durations_{};
    UpstreamOptions upstream_options_;  // metric families filled by init_metrics
    Metrics metrics_;
    int64_t started_ms_ = 0;
    uint64_t id_seed_ = 0;
    std::atomic<uint64_t> id_counter_{0};
    std::mutex claims_mu_;
    std::condition_variable claims_released_;    // under claims_mu_: a claim let go
    std::map<std::string, std::string> claims_;  // tenant → what holds it
    std::set<std::string> reserved_;             // under claims_mu_: reserve_for_failover
    std::set<std::string> moves_to_settle_;      // under claims_mu_

    // Copies and quotas through the router (router.md §6.4, §8): the admin calls to nodes
    // (shard/node_calls.h) and the copies with their worker (shard/copies.h). Made in prepare()
    // once the upstream loops run; the worker is stopped before them.
  public:
    NodeCalls& node_calls() { return *node_calls_; }
    Copies& copies() { return *copies_; }

  private:
    std::unique_ptr<NodeCalls> node_calls_;
    std::unique_ptr<Copies> copies_;
    std::unique_ptr<InFlight> in_flight_;
    std::unique_ptr<Cluster> cluster_;

    // Standby routers (router.md §10, shard/standby.h): the directory's feed served, or followed
    // from the primary; the role, promotion, and the waits for standbys. Made in prepare() once
    // the directory is open; stopped before it closes.
  public:
    Standby& standby() { return *standby_; }

    // §9.8 while running: a standby promoted over this router, as a node's refusal of a grant or
    // a promotion says (it holds this directory's authority at a term above the file's; the
    // start refuses the same, Standby::superseded_at_nodes). From then on, for good, this router
    // leads nothing: no grant, failover, repair or settling; its changes are refused 409, its
    // forwards and queries 503, its /_health 503, each naming why, so clients and balancers go
    // to the promoted router and an operator restarts this one with --replica-of it. "" while
    // not.
    std::string superseded() const;
    bool is_superseded() const { return superseded_flag_.load(std::memory_order_acquire); }
    // A holder node `node` named in a refusal: this router is superseded where it is this
    // directory's authority at a higher term. Logged and audited once.
    void heard_holder(const std::string& node, std::string_view authority, int64_t term);
    // The refusal of everything once superseded: `status` (409 for a change, 503 otherwise),
    // the reason, `"superseded":true` and the Fenec-Superseded header, the connection closed.
    http::Response refused_superseded(int status);

    // A region's router's copy of the global directory (§11.3, shard/global_copy.h), read-only;
    // nullptr on a router without --region. Made in prepare(), stopped before the directory.
    const GlobalCopy* global_copy() const { return global_.get(); }
    // A region's router's half of moves across regions (§11.7, shard/handoff.h). Made in
    // prepare(); stopped before the upstream loops, whose calls its timer makes.
    Handoffs& handoffs() { return *handoffs_; }
    // §11.4: the relays of `/_shard/` requests to another level's routers (shard/relay.h), and,
    // on the global router, its creates and deletes in two levels with their settling
    // (shard/two_level.h; nullptr on a region's router). Made in prepare().
    Relays& relays() { return *relays_; }
    TwoLevel* two_level() { return two_level_.get(); }

  private:
    // §6.1: a change on a standby, or a read asked of the primary (`Fenec-Read: primary`),
    // refused 409 naming the primary; §5.1: `/t/` on a standby whose directory has not come, 503.
    http::Response refused_on_standby(bool read);
    http::Response directory_waiting();
    std::unique_ptr<Standby> standby_;
    mutable std::mutex superseded_mu_;
    std::string superseded_;  // under superseded_mu_
    std::atomic<bool> superseded_flag_{false};
    std::unique_ptr<GlobalCopy> global_;
    std::unique_ptr<Handoffs> handoffs_;
    std::unique_ptr<Relays> relays_;
    std::unique_ptr<TwoLevel> two_level_;
};

// A tenant claimed (Router::claim) for the scope of an operation: `held` is false when another
// held it already; a claim that was granted is released when the guard goes.
struct TenantClaim {
    Router& router;
    std::string tenant;
    bool held;
    TenantClaim(Router& r, std::string t, std::string_view what)
        : router(r), tenant(std::move(t)), held(r.claim(tenant, what)) {}
    // Router::claim_after's: waits up to `bound_ms` while `waits_for` holds it.
    TenantClaim(Router& r, std::string t, std::string_view what,
                std::initializer_list<std::string_view> waits_for, uint64_t bound_ms)
        : router(r), tenant(std::move(t)), held(r.claim_after(tenant, what, waits_for, bound_ms)) {}
    ~TenantClaim() {
        if (held) router.release(tenant);
    }
    TenantClaim(const TenantClaim&) = delete;
    TenantClaim& operator=(const TenantClaim&) = delete;
};

// What a repair's claim is named (`held_by`), and how long a change a client asked for waits for
// one to be let go before it is refused 409 (§6.1, ours). A repair holds a tenant for its own
// step alone (its lineage learnt, its copy asked about, attached or handed over: milliseconds
// where the nodes answer), one tenant after another, and starts by itself when a node is added:
// a move asked just after an add would otherwise be refused for housekeeping its client never
// asked for. A repair that keeps it longer (a node slow to answer) still gets the 409, `held_by`
// naming it.
inline constexpr std::string_view repair_claim = "repair";
inline constexpr uint64_t repair_claim_wait_ms = 2000;

// The claim of a change a client asked for (a delete, move or quota change, or a step of a move
// across regions another router asks for): as TenantClaim, past a repair's claim. A create needs
// none: a repair claims only tenants already in the directory.
struct AskedClaim : TenantClaim {
    AskedClaim(Router& r, std::string t, std::string_view what)
        : TenantClaim(r, std::move(t), what, {repair_claim}, repair_claim_wait_ms) {}
};

// A node's base URL, "http://<addr>".
std::string url_of(const NodeRow& node);

// "127.0.0.1:5123" → "127.0.0.1", "[::1]:5123" → "::1": the client address of the refusal delay
// and of Fenec-Router.
std::string peer_host(std::string_view peer);

// Route label of the metrics (§14).
std::string_view route_label(Route route);

}  // namespace fenec::shard
