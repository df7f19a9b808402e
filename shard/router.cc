// shard/router.cc: the router's Handler (shard/router.h): routes and tokens (router.md §3),
// request ids, the answer's common headers, metrics (§14) and the audit log (§15).
#include "shard/router.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "json/writer.h"
#include "server/obs/audit.h"
#include "server/runtime/host.h"
#include "server/runtime/refusal_delay.h"
#include "server/runtime/timers.h"
#include "server/runtime/workers.h"
#include "shard/cluster.h"
#include "shard/console.h"
#include "shard/copies.h"
#include "shard/global_copy.h"
#include "shard/handoff.h"
#include "shard/in_flight.h"
#include "shard/log_line.h"
#include "shard/move.h"
#include "shard/node_calls.h"
#include "shard/relay.h"
#include "shard/routes.h"
#include "shard/standby.h"
#include "shard/test_hooks.h"
#include "shard/two_level.h"

namespace fenec::shard {

namespace {

// Three base64url parts joined by two dots (§3): a JSON Web Token's shape.
bool jwt_shaped(std::string_view v) {
    size_t dots = 0;
    size_t part = 0;
    for (char c : v) {
        if (c == '.') {
            if (part == 0) return false;
            ++dots;
            part = 0;
            continue;
        }
        const bool b64 = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '-' || c == '_';
        if (!b64) return false;
        ++part;
    }
    return dots == 2 && part > 0;
}

bool equal_constant_time(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string first_segment(std::string_view path) {
    if (path.empty() || path[0] != '/') return "";
    path.remove_prefix(1);
    return std::string(path.substr(0, path.find('/')));
}

// The handler a request goes to, by its row (routes.h). A path no row names under `/_shard/` or
// `/_replication` is judged on that credential before its 404, as a served one would be.
Route route_of(std::string_view path) {
    if (const ShardRoute* r = find_shard_route(path)) {
        switch (r->id) {
            case ShardRouteId::tenant: return Route::tenant;
            case ShardRouteId::query: return Route::query;
            case ShardRouteId::metrics: return Route::metrics;
            case ShardRouteId::health: return Route::health;
            case ShardRouteId::feed:
            case ShardRouteId::tokens:
            case ShardRouteId::status:
            case ShardRouteId::promote: return Route::replication;
            case ShardRouteId::console:
            case ShardRouteId::console_asset: return Route::console;
            default: return Route::shard;
        }
    }
    const std::string first = first_segment(path);
    if (first == "_shard") return Route::shard;
    if (first == "_replication") return Route::replication;
    return Route::other;
}

constexpr std::string_view code_classes[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};

size_t code_class(int status) {
    if (status < 200) return 0;
    if (status < 300) return 1;
    if (status < 400) return 2;
    if (status < 500) return 3;
    return 4;
}

}  // namespace

namespace {

// The running router's own lines go through its LineLog on stderr, so a stderr nobody reads (a
// log shipper that stalled) holds no thread that logs; before a router starts and after it stops
// they are written straight to stderr.
std::mutex lines_mu;
std::shared_ptr<obs::LineLog> lines;

}  // namespace

void log_line(const std::string& line) {
    std::shared_ptr<obs::LineLog> log;
    {
        std::lock_guard<std::mutex> lock(lines_mu);
        log = lines;
    }
    if (log) {
        log->write("fenec-shard: " + line);  // refused when full: counted as dropped
        return;
    }
    std::cerr << ("fenec-shard: " + line + "\n");  // one write: lines from threads stay whole
}

bool Router::failed_over(const std::string& node) {
    Leases* leases = cluster_ ? cluster_->leases() : nullptr;
    if (!leases) return false;
    std::optional<LeaseView> v = leases->view(node);
    return v && v->failed_over;
}

std::optional<uint64_t> Router::placement_bytes(const NodeRow& node,
                                                std::string_view request_id) {
    if (failed_over(node.name)) return std::nullopt;
    HelloReply h = node_calls_->hello(node, request_id);
    return h.status == 200 ? std::optional<uint64_t>(h.disk_bytes) : std::nullopt;
}

std::string url_of(const NodeRow& node) { return "http://" + node.addr; }

std::string peer_host(std::string_view peer) {
    const size_t colon = peer.rfind(':');
    std::string_view host = colon == std::string_view::npos ? peer : peer.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    return std::string(host);
}

std::string_view route_label(Route route) {
    switch (route) {
        case Route::tenant: return "tenant";
        case Route::shard: return "shard";
        case Route::query: return "query";
        case Route::metrics: return "metrics";
        case Route::health: return "other";
        case Route::other: return "other";
        case Route::replication: return "replication";
        case Route::console: return "other";
    }
    return "other";
}

Router::Router(RouterOptions options, const engine::Clock& clock)
    : options_(std::move(options)), clock_(clock) {
    started_ms_ = wall_ms();
    std::random_device rd;
    id_seed_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    delay_ = std::make_unique<server::RefusalDelay>(static_cast<int64_t>(options_.auth_delay_ms));
    timers_ = std::make_unique<server::Timers>();
    in_flight_ = std::make_unique<InFlight>();
    init_metrics();
}

Router::~Router() {
    timers_->stop();  // its callbacks answer through this
    if (cluster_) cluster_->stop();  // its threads call nodes and promote through the rest
    if (two_level_) two_level_->stop();  // its thread relays and writes the directory
    if (server_) server_->shutdown();
    if (api_pool_) api_pool_->shutdown();
    if (relayed_pool_) relayed_pool_->shutdown();
    if (standby_) standby_->stop();  // its threads read the directory
    if (global_) global_->stop();
    if (handoffs_) handoffs_->stop();  // its timer thaws through the upstream loops
    if (copies_) copies_->stop();  // its worker calls nodes through the upstream loops
    if (upstream_) upstream_->stop();
    if (directory_) directory_->close();
    if (audit_) audit_->close();
    if (access_) access_->close();
    if (trace_) trace_->close();
    close_lines();
}

void Router::init_metrics() {
    obs::Registry& m = registry_;
    m.gauge("fenec_build_info", "the router's version", {"version"}).with({shard_version}).set(1);
    m.gauge_fn("fenec_start_time_seconds", "when the router started (Unix seconds)",
               [this] { return static_cast<double>(started_ms_) / 1000; });
    metrics_.requests = &m.counter("fenec_router_requests_total", "answered requests",
                                   {"route", "code"});
    metrics_.durations = &m.histogram("fenec_router_request_duration_seconds",
                                      "arrival to answer", {"route"});
    for (size_t r = 0; r < routes_; ++r) {
        const std::string_view route = route_label(static_cast<Route>(r));
        request_durations_[r] = &metrics_.durations->with({route});
        for (size_t c = 0; c < code_classes_; ++c) {
            request_counters_[r][c] = &metrics_.requests->with({route, code_classes[c]});
        }
    }
    UpstreamOptions& u = upstream_options_;
    u.duration = &m.histogram("fenec_router_upstream_duration_seconds",
                              "forwarded request: sent to answer head", {});
    metrics_.upstream_errors = &m.counter("fenec_router_upstream_errors_total",
                                          "forwarded requests answered 502 or 504", {"node"});
    u.retries = &m.counter("fenec_router_retries_total", "requests sent again", {"reason"});
    metrics_.refused = &m.counter("fenec_router_refused_total",
                                  "401 and 403 refusals, the router's and relayed").with({});
    m.gauge_fn("fenec_router_connections", "open client connections",
               [this] { return server_ ? static_cast<double>(server_->connections()) : 0; });
    u.idle_connections = &m.gauge("fenec_router_upstream_idle_connections", "pooled connections",
                                  {"node"});
    m.gauge_fn("fenec_router_nodes", "nodes in the directory", [this] {
        return directory_ ? static_cast<double>(directory_->maps()->nodes.size()) : 0;
    });
    metrics_.tenants = &m.gauge("fenec_router_tenants", "tenants placed, every node listed",
                                {"node"});
    m.gauge_fn("fenec_router_tenants_moving", "tenants marked moving", [this] {
        if (!directory_) return 0.0;
        double n = 0;
        for (const auto& [name, t] : directory_->maps()->tenants) n += t.state == "moving";
        return n;
    });
    // Copies::owed_thaws: each a tenant left frozen on a node until the node answers its thaw.
    m.gauge_fn("fenec_router_thaws_owed", "thaws owed to nodes that did not answer them", [this] {
        return copies_ ? static_cast<double>(copies_->owed_thaws().size()) : 0.0;
    });
    metrics_.moves = &m.counter("fenec_router_moves_total", "moves begun",
                                {"outcome", "scope"});
    // At 0 from the start, so an alert on increase() sees the first (a series born at 1 does not).
    for (const char* outcome : {"done", "failed"}) {
        for (const char* scope : {"directory", "regions"}) metrics_.moves->with({outcome, scope});
    }
    metrics_.move_duration = &m.histogram("fenec_router_move_duration_seconds",
                                          "successful moves", {},
                                          {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25,
                                           50, 100, 250, 500, 1000});
    m.gauge_fn("fenec_router_following", "1 on a standby", [this] {
        return standby_ && standby_->following() ? 1.0 : 0.0;
    });
    m.gauge_fn("fenec_router_superseded", "1 once a standby was promoted over this router",
               [this] { return is_superseded() ? 1.0 : 0.0; });
    m.gauge_fn("fenec_router_directory_term", "the directory's term", [this] {
        return directory_ ? static_cast<double>(directory_->maps()->term) : 0;
    });
    metrics_.cut_requests = &m.counter("fenec_router_cut_requests_total",
                                       "requests cut by failovers", {"outcome"});
    metrics_.fanouts = &m.counter("fenec_router_fanouts_total", "queries across tenants",
                                  {"merge", "outcome"});
    metrics_.fanout_calls = &m.counter("fenec_router_fanout_calls_total", "tenant calls",
                                       {"outcome"});
    metrics_.fanout_duration = &m.histogram("fenec_router_fanout_duration_seconds",
                                            "query across tenants: arrival to answer", {"merge"});
    m.counter_fn("fenec_router_audit_lines_total", "audit lines written",
                 [this] { return audit_ ? static_cast<double>(audit_->lines_written()) : 0; });
    m.counter_fn(
        "fenec_router_log_lines_dropped_total",
        "the router's own stderr lines dropped: the queue full, or given up at a stop", [this] {
            return lines_ ? static_cast<double>(lines_->lines_dropped() + lines_->lines_failed())
                          : 0;
        });
}

std::string Router::prepare() {
    if (!lines_) {
        auto log = obs::LineLog::open("-");
        if (!log.is_ok()) return "stderr: " + log.status().to_string();
        lines_ = std::shared_ptr<obs::LineLog>(std::move(log.value()));
        std::lock_guard<std::mutex> lock(lines_mu);
        lines = lines_;
    }
    std::string refused = open_parts();
    if (!refused.empty()) close_lines();  // what was said before the refusal comes before it
    return refused;
}

void Router::close_lines() {
    if (!lines_) return;
    {
        std::lock_guard<std::mutex> lock(lines_mu);
        if (lines == lines_) lines.reset();
    }
    lines_->close();
}

std::string Router::open_parts() {
    // §2.3 step 2: a standby opens its file to follow (none yet: it waits for the image); one
    // started with --promote opens it as a primary, forking it.
    DirectoryOpening how;
    how.role = options_.replica_of ? DirectoryOpening::Role::follower
               : options_.promote  ? DirectoryOpening::Role::promote
                                   : DirectoryOpening::Role::primary;
    how.feed_bytes = options_.replication_buffer_bytes;
    how.by = options_.listen;
    how.scope = scope_of(options_);
    auto dir = Directory::open(options_.directory, how);
    if (!dir.is_ok()) return dir.status().to_string();
    directory_ = std::move(dir.value());
    standby_ = std::make_unique<Standby>(*this);
    handoffs_ = std::make_unique<Handoffs>(*this);
    // §2.3 step 3: a region's router follows the global directory into a copy of its own.
    if (options_.region) {
        auto copy = GlobalCopy::open(options_, clock_);
        if (!copy.is_ok()) return copy.status().to_string();
        global_ = std::move(copy.value());
        // §9.12: what is out to a node the global router failed over, for a tenant forwarded by
        // this copy, is cut as the copy shows it, as a standby's is.
        global_->on_failover([this](const std::vector<FailedOver>& failovers) {
            for (const FailedOver& f : failovers) cut(f.tenant, f.failed_from);
        });
        global_->start();
    }
    if (options_.audit) {
        auto log = obs::LineLog::open(*options_.audit);
        if (!log.is_ok()) return "--audit " + *options_.audit + ": " + log.status().to_string();
        audit_ = std::move(log.value());
    }
    if (options_.access_log) {
        auto log = obs::LineLog::open(*options_.access_log);
        if (!log.is_ok()) {
            return "--access-log " + *options_.access_log + ": " + log.status().to_string();
        }
        access_ = std::move(log.value());
    }
    if (options_.trace) {
        obs::LineLogOptions lo;
        lo.queue_lines_max = obs::trace_queue_lines_max;  // full: dropped, never waited on
        auto log = obs::LineLog::open(*options_.trace, lo);
        if (!log.is_ok()) return "--trace " + *options_.trace + ": " + log.status().to_string();
        trace_ = std::move(log.value());
    }
    uint32_t loops = options_.workers;
    if (loops == 0) loops = std::max(1u, std::thread::hardware_concurrency());
    upstream_options_.loops = loops;
    upstream_options_.timeout_ms = options_.upstream_timeout_ms;
    upstream_options_.idle_ms = options_.upstream_idle_ms;
    upstream_options_.pool_max = options_.upstream_pool;
    upstream_options_.poll_us = options_.upstream_poll_us;
    std::string error;
    upstream_ = Upstream::create(upstream_options_, error);
    if (!upstream_) return "the upstream loops: " + error;
    // §9.5: every change this router asks of a node names its term, so a node refuses one from
    // a router a standby was promoted over (the directory's term raised by the promotion).
    upstream_->set_fence([directory = directory_.get()] {
        const auto maps = directory->maps();
        return maps->id.empty() ? std::string()
                                : maps->authority() + " " + std::to_string(maps->term);
    });
    node_calls_ = std::make_unique<NodeCalls>(*upstream_);
    node_calls_->on_holder([this](const NodeRow& node, std::string_view authority, int64_t term) {
        heard_holder(node.name, authority, term);
    });
    relays_ = std::make_unique<Relays>(options_.token, options_.upstream_timeout_ms);
    copies_ = std::make_unique<Copies>(*this, registry_);
    copies_->start();
    // §2.3 step 4, as a primary: sources of moves a stop left behind thawed. A standby thaws
    // nothing until it is promoted.
    if (!standby_->following()) {
        if (std::string over = standby_->superseded_at_nodes(); !over.empty()) return over;
        // A directory once promoted (term above 0) may hold rows its old primary marked and
        // flipped before this copy was sent the flip, unsettled still: they are inherited. Those
        // marked under its term now are this router's own (TenantRow::moving_term).
        settle_moves(*this, MoveRows::by_row);
    }
    // Leasing and failover (shard/cluster.h): a primary leases once bound (§2.3 step 5, below), a
    // standby once promoted, every node counted as answered then (§9.4); a standby cuts what it
    // has out to a node as soon as its copy of the directory shows the failover (§9.12).
    cluster_ = std::make_unique<Cluster>(*this);
    standby_->on_leading([this] { cluster_->start(); });
    standby_->on_failover([this](const std::vector<FailedOver>& failovers) {
        for (const FailedOver& f : failovers) cut(f.tenant, f.failed_from);
    });
    standby_->start();  // §2.3 step 3: a standby's follower
    api_pool_ = std::make_unique<server::WorkerPool>(api_threads, api_queue_max);
    relayed_pool_ = std::make_unique<server::WorkerPool>(api_threads, api_queue_max);
    server::ServerOptions so;
    so.listen = options_.listen;
    so.loops = loops;
    so.connections_max = options_.max_connections;
    so.idle_timeout_ms = static_cast<uint32_t>(options_.idle_timeout_ms);
    so.head_timeout_ms = options_.head_timeout_ms;
    so.body_bytes_per_s_min = options_.body_rate_min;
    so.connections_per_peer_max = options_.max_connections_per_address;
    so.connections_reserved_pct = options_.reserved_connections_pct;
    so.server_header = "fenec-shard/" + std::string(shard_version);
    so.report_answers = access_ != nullptr;
    server_ = server::HttpServer::bind(so, *this, error);
    if (!server_) return "--listen " + options_.listen + ": " + error;
    // §2.3 step 5: bound; with --auto-failover the record raised where needed, then leasing.
    if (!standby_->following()) cluster_->start();
    // §2.3 step 4, §11.4: on the global router, rows a stop left `creating` or `deleting` settled
    // by asking their regions, now and every settle_period_ms (a standby's only once promoted).
    if (!options_.region) {
        two_level_ = std::make_unique<TwoLevel>(*this);
        two_level_->start();
    } else {
        // Issue 20: a region's router settles imports left `importing` (shard/handoff.h).
        handoffs_->start_settling(test_hooks::settle_period_ms(settle_period_ms));
    }
    return "";
}

void Router::serve() { server_->start(); }

uint16_t Router::port() const { return server_ ? server_->port() : 0; }

void Router::drain() {
    server_->stop_accepting();
    // The directory's feed streams end first (`E closing`): a standby's stream would otherwise
    // hold its connection open through the whole wait below.
    standby_->stop();
    if (global_) global_->stop();
    // Requests in flight finish for up to 10 s (§2.3); subscriptions are cut after it. Idle
    // keep-alive connections hold nothing up, but are served until the shutdown: a request that
    // comes on one while the cluster's threads stop is waited for as well.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    // The same 10 s for the work of the router's own (a move, a repair, a failover): past them,
    // its calls to nodes still out are cut and later ones bounded at a second
    // (Upstream::stop_calls), so a call waiting on a silent node does not hold the stop for
    // --upstream-timeout, per call (a move on a stopped source held it two minutes: its freeze,
    // then its undo's thaw).
    std::mutex cut_mu;
    std::condition_variable cut_cv;
    bool drained = false, cut = false;
    std::thread cutter([&] {
        std::unique_lock lock(cut_mu);
        if (!cut_cv.wait_until(lock, deadline, [&] { return drained; })) {
            log_line("stopping: the calls to nodes and routers still out after 10 s are cut");
            upstream_->stop_calls();
            relays_->stop_calls();
            cut = true;
        }
    });
    const auto settle = [&](std::chrono::steady_clock::time_point until) {
        while (std::chrono::steady_clock::now() < until && server_->busy_connections() > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    };
    settle(deadline);
    cluster_->stop();
    if (two_level_) two_level_->stop();
    // A request whose calls the cut ended answers once the calls it asks after are over (a move
    // undone, its thaw asked): that answer goes out, rather than its connection closed on it. No
    // cut, no wait: a relayed subscription is cut at the 10 s.
    bool was_cut = false;
    {
        std::lock_guard lock(cut_mu);
        was_cut = cut;
    }
    settle(was_cut ? upstream_->stop_end() + std::chrono::milliseconds(200) : deadline);
    server_->shutdown();
    timers_->stop();
    api_pool_->shutdown();
    relayed_pool_->shutdown();
    handoffs_->stop();
    copies_->stop();
    {
        std::lock_guard lock(cut_mu);
        drained = true;
    }
    cut_cv.notify_all();
    cutter.join();
    upstream_->stop();
    directory_->close();
    if (audit_) audit_->close();
    if (access_) access_->close();
    if (trace_) trace_->close();
    close_lines();
}

std::string Router::new_request_id(std::optional<std::string_view> sent) {
    // A splitmix64 step over a per-process seed and a counter: unique in the process.
    uint64_t z = id_seed_ + 0x9e3779b97f4a7c15ull * (id_counter_.fetch_add(1) + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return obs::request_id(sent, z);
}

http::Response Router::error(int status, std::string message,
                             std::initializer_list<std::pair<const char*, std::string>> fields) {
    http::Response r;
    r.status = status;
    json::Writer w(r.body);
    w.begin_object();
    w.key("error");
    w.string(message);
    for (const auto& [key, value] : fields) {
        w.key(key);
        w.string(value);
    }
    w.end_object();
    return r;
}

void Router::count(const Answering& a, int status) {
    const auto r = static_cast<size_t>(a.route);
    request_counters_[r][code_class(status)]->inc();
    request_durations_[r]->observe_us((now_ms() - a.start_ms) * 1000);
    if (status == 401 || status == 403) metrics_.refused->inc();
}

void Router::answer(server::Exchange& exchange, const Answering& a, http::Response response) {
    response.header("X-Request-Id", a.request_id);
    count(a, response.status);
    exchange.reply(std::move(response));
}

void Router::audit_admin(const server::Request& request, const Answering& a, int status) {
    obs::AuditLine line;
    line.event = obs::AuditEvent::admin;
    line.fields = {{"method", std::string(request.head.method_text)},
                   {"path", request.head.path},
                   {"status", status}};
    audit(std::move(line), request.peer, a.request_id);
}

void Router::audit_refused(const server::Request& request, std::string_view request_id) {
    obs::AuditLine line;
    line.event = obs::AuditEvent::refused;
    line.fields = {{"method", std::string(request.head.method_text)}, {"path", request.head.path}};
    audit(std::move(line), request.peer, request_id);
}

void Router::audit(obs::AuditLine line, std::string_view peer, std::string_view request_id) {
    if (!audit_) return;
    line.at_ms = wall_ms();
    line.peer = peer;
    line.request_id = request_id;
    audit_->write(obs::audit_line(line));
}

std::string Router::superseded() const {
    std::lock_guard lock(superseded_mu_);
    return superseded_;
}

void Router::heard_holder(const std::string& node, std::string_view authority, int64_t term) {
    const auto maps = directory_->maps();
    if (standby_->following()) return;  // a standby leads nothing to step down from
    if (maps->id.empty() || authority != maps->authority() || term <= maps->term) return;
    const std::string why =
        "a standby was promoted over this router: node `" + node +
        "` is held by this directory's authority `" + std::string(authority) + "` at term " +
        std::to_string(term) + ", above this router's term " + std::to_string(maps->term) +
        "; send requests to the promoted router, and restart this one with --replica-of it";
    {
        std::lock_guard lock(superseded_mu_);
        if (!superseded_.empty()) return;
        superseded_ = why;
        superseded_flag_.store(true, std::memory_order_release);
    }
    log_line("superseded: " + why + "; this router leads nothing from now on");
    standby_->superseded();
    obs::AuditLine line;
    line.event = obs::AuditEvent::fenced;
    line.fields = {{"node", node},
                   {"authority", std::string(authority)},
                   {"term", term},
                   {"superseded", true}};
    audit(std::move(line), "", "");
}

http::Response Router::refused_superseded(int status) {
    http::Response r = error(status, "this router no longer leads: " + superseded());
    r.body.pop_back();
    r.body += ",\"superseded\":true}";  // a relay asks the next router (shard/relay.cc)
    r.header(std::string(superseded_header), "true");
    r.close = true;  // a client keeping its connection would come back here
    return r;
}

void Router::after_refusal(std::string_view peer, std::function<void()> fn) {
    const int64_t delay = delay_->refused(peer_host(peer), static_cast<int64_t>(now_ms()));
    if (delay > 0 && timers_->after(delay, fn)) return;
    fn();
}

void Router::accepted(std::string_view peer) { delay_->accepted(peer_host(peer)); }

namespace {
// Under claims_mu_: `what` takes `tenant` unless a claim holds it, or a failover is reserved it
// and `what` is not a failover's; a failover's claim ends its reservation.
bool take_claim(std::map<std::string, std::string>& claims, std::set<std::string>& reserved,
                const std::string& tenant, std::string_view what) {
    const bool failover = what == failover_claim;
    if (!failover && reserved.contains(tenant)) return false;
    if (!claims.emplace(tenant, std::string(what)).second) return false;
    if (failover) reserved.erase(tenant);
    return true;
}
}  // namespace

bool Router::claim(const std::string& tenant, std::string_view what) {
    std::lock_guard lock(claims_mu_);
    return take_claim(claims_, reserved_, tenant, what);
}

bool Router::claim_after(const std::string& tenant, std::string_view what,
                         std::initializer_list<std::string_view> waits_for, uint64_t bound_ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(bound_ms);
    std::unique_lock lock(claims_mu_);
    for (;;) {
        if (take_claim(claims_, reserved_, tenant, what)) return true;
        // A failover is waited for too, reserved (it comes next) or holding the claim: what
        // follows it reads the row it leaves.
        auto it = claims_.find(tenant);
        if (it != claims_.end() && it->second != failover_claim &&
            std::find(waits_for.begin(), waits_for.end(), it->second) == waits_for.end()) {
            return false;
        }
        if (claims_released_.wait_until(lock, until) == std::cv_status::timeout) {
            return take_claim(claims_, reserved_, tenant, what);
        }
    }
}

std::string Router::held_by(const std::string& tenant) {
    std::lock_guard lock(claims_mu_);
    auto it = claims_.find(tenant);
    if (it != claims_.end()) return it->second;
    return reserved_.contains(tenant) ? std::string(failover_claim) : std::string();
}

bool Router::reserve_for_failover(const std::string& tenant) {
    std::lock_guard lock(claims_mu_);
    reserved_.insert(tenant);
    return claims_.contains(tenant);
}

void Router::unreserve(const std::string& tenant) {
    {
        std::lock_guard lock(claims_mu_);
        if (reserved_.erase(tenant) == 0) return;
    }
    claims_released_.notify_all();  // a waiter may take it now
}

void Router::keep_settling_move(const std::string& tenant) {
    std::lock_guard lock(claims_mu_);
    moves_to_settle_.insert(tenant);
}

bool Router::settling_move(const std::string& tenant) {
    std::lock_guard lock(claims_mu_);
    return moves_to_settle_.contains(tenant);
}

std::vector<std::string> Router::take_moves_to_settle() {
    std::lock_guard lock(claims_mu_);
    std::vector<std::string> out(moves_to_settle_.begin(), moves_to_settle_.end());
    moves_to_settle_.clear();
    return out;
}

void Router::release(const std::string& tenant) {
    {
        std::lock_guard lock(claims_mu_);
        claims_.erase(tenant);
    }
    claims_released_.notify_all();
    if (cluster_) cluster_->released(tenant);
}

void Router::count_cut(std::string_view outcome) {
    metrics_.cut_requests->with({outcome}).inc();
}

bool Router::ask_again_for_lease(const std::string& node, const std::string& tenant, Forwarding& f,
                                 const std::shared_ptr<server::Exchange>& exchange,
                                 const Answering& a) {
    if (f.lease_refused_ms == 0) f.lease_refused_ms = static_cast<int64_t>(now_ms());
    auto again = [this, f, exchange, a]() mutable {
        ++f.lease_retries;
        forward_again(std::move(f), std::move(exchange), std::move(a), "lease");
    };
    // Leading: this router's own grant is asked for, where the node is its own to lease. A
    // standby's Leases (made for the --auto-failover it uses once promoted) grants nothing, nor
    // does a region's router to a node it forwards to by its copy of the global directory (the
    // global router leases that one): each asks again by that copy (§9.12).
    if (Leases* leases = cluster_ ? cluster_->leases() : nullptr;
        !f.by_global && leases && leases->started()) {
        const auto bound = static_cast<int64_t>(
            std::min<uint64_t>(options_.auto_failover_ms, options_.upstream_timeout_ms));
        // Withheld from the node for now (a move's target or a failover's copy until the standby
        // routers were sent the change, up to a second): no grant names it before that, so it is
        // looked at again every standby_lease_ask_ms on the timers (no worker held), uncounted,
        // within the bound, and asked again once it is given back.
        if (leases->withheld(node, tenant)) {
            const int64_t next = static_cast<int64_t>(now_ms()) + standby_lease_ask_ms;
            if (exchange->closed() || next - f.lease_refused_ms > bound) return false;
            return timers_->after(standby_lease_ask_ms, [this, f, exchange, a]() mutable {
                forward_again(std::move(f), std::move(exchange), std::move(a), "lease");
            });
        }
        if (f.lease_retries >= lease_retries_max) return false;
        return api_pool_->submit([leases, node, bound, again = std::move(again)]() mutable {
            (void)leases->grant_and_wait(node, bound);
            again();
        });
    }
    const bool by_global = f.by_global && global_;
    if (!(standby_ && standby_->following()) && !by_global) return false;
    if (exchange->closed()) return false;
    const auto maps = by_global ? global_->maps() : directory_->maps();
    if (!maps->lease_record) return false;  // no router has leased from this directory
    const int64_t window = std::min<int64_t>(maps->lease_record->ms * 2 / 3,
                                             static_cast<int64_t>(options_.upstream_timeout_ms));
    const int64_t next = static_cast<int64_t>(now_ms()) + standby_lease_ask_ms;
    if (next - f.lease_refused_ms > window) return false;
    return timers_->after(standby_lease_ask_ms, std::move(again));
}

void Router::cut(const std::string& tenant, const std::string& from) {
    if (test_hooks::skip_failover_cut()) return;  // fenec-shard-hooks only: `make drill`'s baseline
    for (const std::shared_ptr<Cuttable>& c : in_flight_->take(from, tenant)) c->cut();
}

// §3: `Authorization: Bearer <--token>`, compared in constant time; a JWT is refused whatever
// the router's token, since the router holds no keys.
std::optional<http::Response> Router::check_token(const server::Request& request) {
    const auto auth = request.head.header("Authorization");
    std::string_view value;
    if (auth && auth->size() > 7 && http::iequals(auth->substr(0, 7), "Bearer ")) {
        value = auth->substr(7);
    }
    const char* why = nullptr;
    if (!value.empty() && jwt_shaped(value)) {
        why = "a JSON Web Token is refused here: the router holds no keys, and /_shard/ reaches "
              "every tenant; use the router's --token";
    } else if (options_.token && !equal_constant_time(value, *options_.token)) {
        why = value.empty() ? "this route needs the router's token: Authorization: Bearer <token>"
                            : "the token is not the router's --token";
    }
    if (!why) return std::nullopt;
    http::Response r = error(401, why);
    r.header("WWW-Authenticate", "Bearer");
    return r;
}

// §3: a router without --token is open, and takes only a loopback or literal Host
// (server/runtime/host.h) on every route it serves but /_health, /t/ among them: it sends a node
// its directory address as Host (§5.3) with a mark that node trusts, so a DNS-rebinding browser
// is stopped here or nowhere. /_replication/ is guarded by --replication-token whenever served.
std::optional<http::Response> Router::check_host(const server::Request& request, Route route) {
    if (options_.token || route == Route::health || route == Route::replication) {
        return std::nullopt;
    }
    if (server::host_is_local_or_literal(request.head.header("Host"), request.head.version_minor)) {
        return std::nullopt;
    }
    return error(400,
                 "the router is open here (no --token): Host must be a loopback or literal "
                 "address");
}

server::HeadVerdict Router::check_head(const server::Request& request) {
    server::HeadVerdict v;
    v.body_bytes_max = options_.max_body_mib << 20;
    const Route route = route_of(request.head.path);
    if (std::optional<http::Response> foreign = check_host(request, route)) {
        const std::string id = new_request_id(request.head.header("X-Request-Id"));
        audit_refused(request, id);
        foreign->header("X-Request-Id", id);
        count({route, now_ms(), id}, foreign->status);
        v.refuse = std::move(foreign);
        return v;
    }
    std::optional<http::Response> refuse;
    const http::Method method = request.head.method;
    const bool body_method = method == http::Method::post || method == http::Method::put ||
                             method == http::Method::patch;
    if (request.head.header("Upgrade")) {
        refuse = error(501, "Upgrade is not supported by the router");
    } else if (route == Route::tenant && body_method && !request.head.content_length) {
        // §5.2: the router frames what it sends on with its own Content-Length; without one
        // from the client it would send an empty body the client did not mean.
        refuse = error(411, "a " + std::string(request.head.method_text) + " to " +
                                request.head.path + " needs Content-Length");
    } else if (route == Route::tenant && request.head.expect_continue) {
        // §5.2: `Expect: 100-continue` is answered only once the tenant is found, so a client
        // does not send a body to a tenant the router cannot place.
        std::string_view rest = std::string_view(request.head.path).substr(3);
        const std::string tenant(rest.substr(0, rest.find('/')));
        if (!valid_name(tenant)) {
            refuse = error(400, "tenant name `" + tenant + "` is not [a-z0-9_-]{1,64}");
        } else if (!directory_->serving()) {
            refuse = directory_waiting();
        } else if (!directory_->maps()->tenants.contains(tenant) &&
                   !(global_ && global_->maps()->tenants.contains(tenant))) {
            refuse = error(404, "tenant `" + tenant + "` is not in the directory");
        }
    } else if (route == Route::shard || route == Route::query || route == Route::metrics) {
        // With a refusal delay the token is judged in handle(), where an answer can wait; a
        // body it will refuse is streamed, so it is never read and no 100 Continue invites it.
        if (options_.auth_delay_ms > 0) {
            v.stream_body = check_token(request).has_value();
            return v;
        }
        refuse = check_token(request);
        if (refuse) {
            const std::string id = new_request_id(request.head.header("X-Request-Id"));
            audit_refused(request, id);
            refuse->header("X-Request-Id", id);
            count({route, now_ms(), id}, refuse->status);
        }
        return {std::move(refuse), v.body_bytes_max};
    }
    if (refuse) {
        const std::string id = new_request_id(request.head.header("X-Request-Id"));
        refuse->header("X-Request-Id", id);
        count({route, now_ms(), id}, refuse->status);
        v.refuse = std::move(refuse);
    }
    return v;
}

void Router::on_answered(const server::Answered& a) {
    if (!access_) return;
    access_->write(obs::access_line({.at_ms = wall_ms(),
                                     .peer = a.peer,
                                     .method = a.method,
                                     .target = a.target,
                                     .status = a.status,
                                     .bytes_in = a.bytes_in,
                                     .bytes_out = a.bytes_out,
                                     .us = a.us,
                                     .request_id = a.request_id,
                                     .stream = a.stream,
                                     .complete = a.complete}));
}

http::Response Router::over_capacity(std::string_view reason) {
    http::Response r =
        error(503, reason == "per_address" ? "the router has --max-connections-per-address open "
                                             "from this client address"
                                           : "the router has too many connections open");
    r.header("Retry-After", "1");
    r.close = true;
    return r;
}

void Router::handle(server::Request request, std::shared_ptr<server::Exchange> exchange) {
    Answering a;
    a.route = route_of(request.head.path);
    a.start_ms = now_ms();
    a.request_id = new_request_id(request.head.header("X-Request-Id"));
    if (a.route == Route::shard || a.route == Route::query || a.route == Route::metrics) {
        if (std::optional<http::Response> refuse = check_token(request)) {
            audit_refused(request, a.request_id);
            auto r = std::make_shared<http::Response>(std::move(*refuse));
            return after_refusal(request.peer, [this, exchange, a, r] {
                answer(*exchange, a, std::move(*r));
            });
        }
        accepted(request.peer);
    }
    switch (a.route) {
        case Route::tenant:
            if (!directory_->serving()) return answer(*exchange, a, directory_waiting());
            // Its directory is no longer the one the nodes follow: a forward could reach a copy
            // the promoted router moved away or failed over from.
            if (is_superseded()) return answer(*exchange, a, refused_superseded(503));
            return forward(std::move(request), std::move(exchange), std::move(a));
        case Route::replication:
            return standby_->serve(std::move(request), std::move(exchange), a,
                                   [this](std::function<void()> job) {
                                       return api_pool_->submit(std::move(job));
                                   });
        case Route::query:
            // Across tenants too: an empty directory is unknown, not zero tenants (§5.1).
            if (!directory_->serving()) return answer(*exchange, a, directory_waiting());
            if (is_superseded()) return answer(*exchange, a, refused_superseded(503));
            return serve_query(request, std::move(exchange), a);
        case Route::shard: {
            const http::Method m = request.head.method;
            const bool read = m == http::Method::get || m == http::Method::head;
            const std::optional<std::string_view> wanted = request.head.header(read_header);
            if (wanted && *wanted != read_from_primary) {
                return answer(*exchange, a,
                              error(400, std::string(read_header) + ": `" + std::string(*wanted) +
                                             "` is no read this router knows: `" +
                                             std::string(read_from_primary) + "` is"));
            }
            if (standby_->following() && (!read || wanted)) {
                return answer(*exchange, a, refused_on_standby(read));
            }
            if (is_superseded() && (!read || wanted)) {  // its reads say what it had
                return answer(*exchange, a, refused_superseded(409));
            }
            if (standby_->promoting() && !read) {
                http::Response r = error(503,
                                         "this router is being promoted: it takes changes once "
                                         "it leads (the moves left behind settled, its leases "
                                         "begun)");
                r.header("Retry-After", "1");
                return answer(*exchange, a, std::move(r));
            }
            auto req = std::make_shared<server::Request>(std::move(request));
            server::WorkerPool& pool =
                relayed_for(*req, a.request_id, options_.token).empty() ? *api_pool_
                                                                        : *relayed_pool_;
            const bool queued = pool.submit([this, req, exchange, a] {
                answer(*exchange, a, serve_api(*req, a));
            });
            if (!queued) {
                http::Response r = error(503, "the router's /_shard/ queue is full");
                r.header("Retry-After", "1");
                answer(*exchange, a, std::move(r));
            }
            return;
        }
        case Route::metrics: {
            if (auto r = method_refusal(request.head)) return answer(*exchange, a, std::move(*r));
            return answer(*exchange, a, serve_metrics());
        }
        case Route::health: {
            if (auto refused = method_refusal(request.head)) {
                return answer(*exchange, a, std::move(*refused));
            }
            http::Response r;
            const std::string superseded = this->superseded();
            if (!superseded.empty()) r.status = 503;  // a balancer's check drops it
            json::Writer w(r.body);
            w.begin_object();
            w.key("ok");
            w.boolean(superseded.empty());
            w.key("role");
            w.string(standby_->following() ? "standby"
                     : !superseded.empty() ? "superseded"
                                           : "primary");
            if (!superseded.empty()) {
                w.key("superseded");
                w.string(superseded);
            }
            // A standby waiting for its first image has no row yet: it keeps its flags' scope.
            w.key("scope");
            w.string(scope_of(options_));
            w.key("term");
            w.int64(directory_->maps()->term);
            w.key("directory");
            w.string(directory_->serving() ? "ready" : "waiting");
            if (global_) {  // a region's router: its copy of the global directory (§11.3)
                const std::string refused = global_->refused();
                w.key("global");
                w.string(!refused.empty() ? "refused" : global_->ready() ? "ready" : "waiting");
                if (!refused.empty()) {
                    w.key("global_error");
                    w.string(refused);
                }
            }
            w.end_object();
            return answer(*exchange, a, std::move(r));
        }
        case Route::console:
            return answer(*exchange, a, serve_console(request.head));
        case Route::other:
            return answer(*exchange, a,
                          error(404, "no route " + request.head.path +
                                         ": the router serves /t/<tenant>/, /_shard/, /_metrics, "
                                         "/_health and /_console"));
    }
}

http::Response Router::refused_on_standby(bool read) {
    const std::string& primary = standby_->primary();
    http::Response r;
    r.status = 409;
    json::Writer w(r.body);
    w.begin_object();
    w.key("error");
    w.string("this router follows " + primary +
             (read ? ": a read asked of the primary (" + std::string(read_header) + ": " +
                         std::string(read_from_primary) +
                         ") goes there, not to a copy that may lag it"
                   : ": send changes there, or promote this one with POST /_replication/promote"));
    w.key("primary");
    w.string(primary);
    w.end_object();
    return r;
}

http::Response Router::directory_waiting() {
    http::Response r = error(503, "this standby has not received its directory (and its nodes' "
                                  "tokens) from " + standby_->primary() +
                                      " yet: a tenant not found here may well exist");
    r.header("Retry-After", "1");
    return r;
}

http::Response Router::serve_metrics() {
    // Every node listed, even with no tenant (§14).
    auto maps = directory_->maps();
    std::map<std::string, double> per_node;
    for (const auto& [name, n] : maps->nodes) per_node[name] = 0;
    for (const auto& [name, t] : maps->tenants) {
        if (!home_region(t.node)) per_node[t.node] += 1;  // `@<r>`: no node of this directory's
    }
    for (const auto& [node, n] : per_node) metrics_.tenants->with({node}).set(n);
    copies_->publish_gauges(*maps);
    http::Response r;
    r.body = registry_.render();
    r.content_type = std::string(obs::metrics_content_type);
    return r;
}

}  // namespace fenec::shard
