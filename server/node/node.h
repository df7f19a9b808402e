// server/node/node.h: fenec-node wired together: the HttpServer's Handler. A request's head is
// judged on the loop thread (route, credential, body bound); everything that touches a tenant
// runs on the worker pool and answers through its Exchange. main() builds one Node, handing it
// the file system and the clocks it reads the world through (NodeEnv).
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/clock.h"
#include "engine/flusher.h"
#include "engine/io.h"
#include "engine/syncer.h"
#include "json/writer.h"
#include "server/node/auth.h"
#include "server/node/compactor.h"
#include "server/node/options.h"
#include "server/node/registry.h"
#include "server/node/statement_cache.h"
#include "server/obs/access.h"
#include "server/obs/audit.h"
#include "server/obs/metrics.h"
#include "server/runtime/http_server.h"
#include "server/runtime/refusal_delay.h"
#include "server/runtime/timers.h"
#include "server/runtime/version.h"
#include "server/runtime/workers.h"

namespace fenec::node {

class Subscriptions;
class Parked;
class Leases;
class Replication;

// The routes a request can take, as fenec_http_requests_total labels them.
enum class Route : uint8_t {
    query, batch, rest, changes, admin, admin_query, lease, replication, metrics, health, other
};
std::string_view route_label(Route r);

// One request on its way through the node.
struct Call {
    server::Request request;
    std::shared_ptr<server::Exchange> exchange;
    Route route = Route::other;
    auth::Identity who;
    // §3.3: set by authorize when the request carries a router's mark that verifies: the client
    // the router names (the audit's `peer`) and the router's own address (`via`). Empty when the
    // request came straight from its client.
    std::string client;
    std::string via;
    std::string request_id;
    std::string tenant;           // /t/<tenant>/ or /_admin/tenants/<tenant>
    std::vector<std::string> rest;  // the path's segments after the tenant
    std::string shape;            // the statement with literals removed, for the slow log
    int64_t start_ns = 0;
    int64_t start_ms = 0;         // wall clock, for the span
    // W3C trace context (§4.1, §13.5): set when this request is traced.
    std::optional<obs::TraceParent> parent;
    std::string trace_id;         // empty: not traced
    std::string span_id;
    // quota.cc: the tenant's count of requests in flight, held until the call is answered.
    std::shared_ptr<void> admitted;
    // Being served on its event loop (serve_inline_write), where nothing may wait: its block
    // begins only if the writer lock is free, and goes to the pool otherwise (rest.cc).
    bool on_loop = false;
};

// The peer an audit line names (§13.3): the client a verified router's mark names, else the
// connection's own address; the line's `via` is Call::via.
inline std::string_view audit_peer(const Call& call) {
    return call.client.empty() ? std::string_view(call.request.peer)
                               : std::string_view(call.client);
}

inline constexpr std::string_view fenec_version = server::fenec_version;

// What the node reads the world through, passed in by main() (the POSIX file system, the
// system's clocks) or by a test (test::FaultFs, fake clocks); each must outlive the Node.
// - fs: every file of the data directory, read or written: tenant files (the engine's
//   OpenOptions::fs), side files, `fenec-node.state`, the lock; each side file replaced with
//   engine::replace_durably, so the fault-injecting double reaches node state as it reaches
//   tenant files.
// - clock: every instant the node keeps or decides on: wall time in answers, files and logs,
//   the monotonic reading of a request's duration and of the tenants' idle times; also the
//   engine's clock for each tenant. A wait on a condition variable or a socket measures its own
//   timeout (the OS's), as does the run of the once-a-second ticker.
// - boot_clock: what leases run on (CLOCK_BOOTTIME in main()).
// - boot_id: the machine's boot id `GET /_admin/hello` answers (§8.8), read once by main() at
//   start: a read per call answered "" once the node ran out of descriptors. "" when unknown.
struct NodeEnv {
    engine::Fs& fs;
    const engine::Clock& clock;
    const engine::BootClock& boot_clock;
    std::string boot_id = {};
    // The descriptors the process may hold (its soft RLIMIT_NOFILE, which main() raised to the
    // hard one); 0: unbounded (a node in a test's process). Bounds the open tenants (prepare).
    uint64_t descriptors = 0;
};

class Node final : public server::Handler {
public:
    Node(NodeOptions options, NodeEnv env);
    ~Node() override;

    // Everything but the listener: data dir (created, locked), audit log, metrics. "" or why not.
    std::string prepare();
    // Binds, starts the loops and the once-a-second sweeper. "" or why not.
    std::string serve();
    uint16_t port() const;
    // SIGTERM: stop accepting, end streams, let requests finish (10 s), close every tenant.
    void drain();

    // server::Handler
    server::HeadVerdict check_head(const server::Request& request) override;
    void handle(server::Request request, std::shared_ptr<server::Exchange> exchange) override;
    http::Response over_capacity(std::string_view reason) override;
    void on_refused(std::string_view reason) override;
    http::Response framing_error(int status, std::string_view message) override;
    // --access-log: the answer's line queued (never written here, on the loop).
    void on_answered(const server::Answered& answered) override;

    // For the handlers (node/*.cc).
    const NodeOptions& options() const { return options_; }
    // The data directory's file system (NodeEnv::fs).
    engine::Fs& fs() const { return env_.fs; }
    const engine::Clock& clock() const { return env_.clock; }
    Registry& registry() { return *registry_; }
    obs::Registry& metrics() { return metrics_; }
    bool stopping() const { return stopping_.load(); }
    // The wall clock (NodeEnv::clock), UTC ms.
    int64_t now_ms() const { return env_.clock.wall_ms(); }
    int64_t started_ms() const { return started_ms_; }
    const std::string& boot_id() const { return env_.boot_id; }
    // Finishes a call: headers every answer carries, metrics, slow log, then the reply.
    void answer(Call& call, http::Response response);
    // A JSON refusal {"error": message[, "reason": reason]} with `status` and the headers its
    // status needs (WWW-Authenticate on 401, Retry-After on 429 and 503). A 503 names its reason
    // (§6: frozen, stopping, connections, streams, memory, ...). `more` writes members of the
    // case after those (`line`, `key`, `limit`).
    http::Response refusal(int status, std::string_view message, std::string_view reason = {},
                           const std::function<void(json::Writer&)>& more = {}) const;

    // Freeze ids (`Fenec-Freeze-Id`, a router's own for one move's attempt), in memory
    // (lifecycle.cc). A thaw of `tenant` under an id is remembered (the last
    // thawed_freezes_max): a freeze of that id that comes after it is one its router gave up on
    // and undid (left in this node's socket while it was stopped, read once it ran again), and
    // is refused. A freeze marks the tenant as its id's (`freezing`, before it freezes; "" for
    // one without an id), and a thaw under an id thaws only a freeze of that id (or one this
    // process did not see): a stale thaw does not undo a later move's freeze. One owner a
    // tenant: a late freeze read after another's took it over (the router holds the tenant's
    // claim meanwhile, so its own owed thaw cannot come then; a thaw already in the socket can).
    void freezing(const std::string& tenant, const std::string& id);
    void thawing(const std::string& tenant, const std::string& id);  // records `id`; none: ""
    bool thawed_before(const std::string& tenant, const std::string& id);
    // Whether `tenant` is frozen by a freeze other than `id`'s, that this process saw.
    bool frozen_by_another(const std::string& tenant, const std::string& id);
    void unfrozen(const std::string& tenant);

    // §5.5, §5.6: a request that waited (a held write's every run, a read after its wait) meets
    // its credential's times again, as at the door: a JWT that expired meanwhile gets this 401,
    // counted and audited as a refused credential, and what it asked for is not run.
    std::optional<http::Response> expired_meanwhile(const Call& call);

    // Runs `fn` on the worker pool under the call's tenant's fair share; 503 when its queue is
    // full.
    void submit(const std::shared_ptr<Call>& call,
                std::function<void(const std::shared_ptr<Call>&)> fn);
    // Work that answers no call directly (a parked request's retry); false when the pool is full.
    bool submit_task(std::function<void()> fn) { return workers_->submit(std::move(fn)); }
    // As submit_task, under `call`'s tenant's fair share (an answer that waited for its fsync).
    bool submit_task(const Call& call, std::function<void()> fn);
    // As that, taken past the queue's bound (WorkerPool::submit_past_bound): the answer of a write
    // landed on the loop, which must neither wait nor be dropped. False only as the node stops.
    bool submit_answer(const Call& call, std::function<void()> fn);
    // The group commit's threads for writes answered after their fsync (engine/syncer.h); null
    // unless --sync always.
    engine::Syncer* syncer() { return syncer_.get(); }
    server::Timers& timers() { return timers_; }
    StatementCache& statements() { return statements_; }
    // A parked request (parked.h): a drain answers it at once (§1.3).
    void track(const std::shared_ptr<Parked>& p);
    // A call that ends without an answer (its client went away while parked).
    void abandoned() { in_flight_.fetch_sub(1); }
    Subscriptions& subscriptions() { return *subscriptions_; }
    Replication& replication() { return *replication_; }
    Compactor& compactor() { return *compactor_; }
    obs::LineLog* audit() { return audit_.get(); }
    // The node's leases (§9): null when started without --lease, so writes ask no lease.
    Leases* leases() { return options_.lease ? leases_.get() : nullptr; }
    const Leases* leases() const { return options_.lease ? leases_.get() : nullptr; }
    // Fencing by term (§9.5), with or without --lease: promote and follow call fence() on it
    // and answer a refusal with fence_refusal (handlers.h). Set from prepare() on.
    Leases& fencing() { return *leases_; }

    struct Counters {
        obs::CounterFamily* requests = nullptr;     // route, code
        obs::HistogramFamily* durations = nullptr;  // route
        obs::CounterFamily* refused = nullptr;      // reason
        obs::CounterFamily* statements = nullptr;   // kind
        obs::Counter* slow = nullptr;
        obs::Counter* replays = nullptr;
        obs::Counter* conflicts = nullptr;
        obs::CounterFamily* writes_refused = nullptr;  // reason
        obs::CounterFamily* quota_refusals = nullptr;  // quota
        obs::Gauge* subscriptions = nullptr;
        obs::Counter* reseeds = nullptr;
        obs::CounterFamily* subscriptions_ended = nullptr;  // reason
        obs::CounterFamily* tenant_closes = nullptr;        // reason
        obs::CounterFamily* graphs_opened = nullptr;        // how
        obs::Counter* spans = nullptr;
        obs::Counter* outcome_unknown = nullptr;
        obs::CounterFamily* lease_grants = nullptr;  // outcome
        obs::CounterFamily* over_budget = nullptr;   // budget: rows, time (ql/budget.h)
    };
    Counters& counters() { return counters_; }

private:
    void dispatch(std::shared_ptr<Call> call);
    // check_head: whether authorize() will refuse this head (credentials before bodies).
    bool refused_by_head(const http::RequestHead& h);
    bool authorize(const std::shared_ptr<Call>& call, auth::Credential plane);
    bool admin_credential(const http::RequestHead& head);
    void audit_refusal(const Call& call, int status, std::string_view why);
    void slow_log(const Call& call, int status, double seconds);
    // One line on stderr, "fenec-node: " before it (lines_; straight to stderr before prepare).
    void say(const std::string& line);
    void span(const Call& call, int status, double seconds);
    http::Response preflight() const;
    void init_metrics();
    uint64_t next_random();
    void tick();
    // Once a tick, with the latched tenants the sweep left open: node-http.md §5.8's reopen.
    void reopen_latched(const std::vector<std::string>& latched);
    // Answers now every held request that waits on `tenant`, as its deadline would.
    void finish_parked(std::string_view tenant);

    NodeOptions options_;
    NodeEnv env_;
    std::unique_ptr<auth::Authenticator> auth_;
    std::unique_ptr<server::RefusalDelay> delay_;
    // `fenec-node.lock`, held (Fs::lock) while the node lives: one node per data directory.
    std::unique_ptr<engine::File> lock_;
    // Before registry_: every tenant it opens holds the guard as its gate, so it goes after them.
    std::unique_ptr<Leases> leases_;
    std::unique_ptr<engine::Flusher> flusher_;
    std::unique_ptr<engine::Syncer> syncer_;  // before registry_: its databases leave it on close
    // The node's own lines for people on stderr (a tenant that cannot be opened), through a
    // queue, so a full stderr pipe drops them (counted) rather than blocking the worker that
    // opened the tenant. Before registry_: its on_open_failed writes here.
    std::unique_ptr<obs::LineLog> lines_;
    std::unique_ptr<Registry> registry_;
    std::unique_ptr<server::WorkerPool> workers_;
    std::unique_ptr<server::HttpServer> server_;
    std::unique_ptr<obs::LineLog> audit_;
    std::unique_ptr<obs::LineLog> access_;  // --access-log
    std::unique_ptr<obs::LineLog> trace_;
    // --slow-ms: its lines go to stderr through this queue, so a full stderr pipe drops them
    // (counted) rather than blocking the thread that answered (a loop, a worker, a Syncer).
    std::unique_ptr<obs::LineLog> slow_;
    std::unique_ptr<Subscriptions> subscriptions_;
    std::unique_ptr<Replication> replication_;  // streams and followers (replication.h)
    std::unique_ptr<Compactor> compactor_;      // after registry_ and audit_: it uses both
    obs::Registry metrics_;
    Counters counters_;
    // The per-answer metric children, looked up once per (route, status) and kept: the family's
    // lookup takes a lock and builds label strings, which every answer would otherwise pay.
    static constexpr size_t routes_max = 11;
    std::array<std::array<std::atomic<obs::Counter*>, 500>, routes_max> answered_{};
    std::array<std::atomic<obs::Histogram*>, routes_max> durations_{};
    server::Timers timers_;
    StatementCache statements_;
    std::atomic<int64_t> in_flight_{0};
    std::mutex parked_mu_;
    std::vector<std::weak_ptr<Parked>> parked_;
    static constexpr size_t thawed_freezes_max = 256;
    std::mutex freezes_mu_;                                      // a leaf
    std::deque<std::pair<std::string, std::string>> thawed_;     // tenant, freeze id; newest last
    std::map<std::string, std::string, std::less<>> frozen_by_;  // tenant → its freeze's id
    std::atomic<uint64_t> random_state_{0};
    int64_t started_ms_ = 0;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> ticking_{false};
    std::thread ticker_;
};

}  // namespace fenec::node
