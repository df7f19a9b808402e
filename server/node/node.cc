// server/node/node.cc: the Handler: routes, credentials (node-http.md §3), the common answer
// headers (§4.2), metrics and the once-a-second tick. What each route does is in its own file.
#include "server/node/node.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <random>

#include "engine/huge_pages.h"
#include "engine/limits.h"
#include "json/writer.h"
#include "server/node/handlers.h"
#include "server/node/jwt.h"
#include "server/node/lease.h"
#include "server/node/parked.h"
#include "server/node/quota.h"
#include "server/node/replication.h"
#include "server/node/routes.h"
#include "server/node/subscriptions.h"
#include "server/runtime/flags.h"
#include "server/runtime/host.h"
#include "server/runtime/loop.h"
#include "server/runtime/mark.h"

namespace fenec::node {

namespace {

constexpr size_t worker_queue_max = 16384;  // requests waiting for a worker; past it, 503

// "" where syncfs(2) reports every error a sync of the file system can meet: write-back errors
// from Linux 5.8, the file system's own (a failed journal commit or cache flush) from 5.17. On an
// older kernel a failed flush could answer writes as durable: --sync-scope fs is refused there.
std::string syncfs_unreliable() {
    utsname u{};
    if (::uname(&u) != 0) return "uname(2) failed";
    int major = 0;
    int minor = 0;
    if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) {
        return std::string("cannot read the kernel's version `") + u.release + "`";
    }
    if (major > 5 || (major == 5 && minor >= 17)) return "";
    return std::string(
               "needs Linux 5.17 or later, where syncfs(2) reports every error of the "
               "flush; this kernel is ") +
           u.release;
}

// The descriptor budget (node-http.md "Limits"): what the process holds besides connections and
// tenants (the listener, each loop's ring and eventfds, logs, the data dir's lock, calls to other
// nodes, and the opens in flight past the bound), and what one open tenant holds (its file, and
// one more for a moment: a sidecar read, a rewrite's side file, an image).
constexpr uint64_t descriptors_reserved = 64;
constexpr uint64_t descriptors_per_tenant = 2;
constexpr size_t open_tenants_min = 16;  // fewer would close tenants on every request

// Newcomers past --max-connections answered 503 at once (ServerOptions::refusals_max), each on a
// descriptor until its client reads: an eighth of `descriptors` (0: no bound), at most the
// server's own bound. With more, a burst ran the node out of descriptors, and newcomers waited
// in the kernel's backlog answered nothing (seen under prlimit --nofile=64).
uint32_t refusals_max(uint64_t descriptors) {
    const uint32_t bound = server::ServerOptions{}.refusals_max;
    if (descriptors == 0) return bound;
    return static_cast<uint32_t>(std::clamp<uint64_t>(descriptors / 8, 1, bound));
}

// Open tenants at once under `descriptors` (0: no bound) beside `connections_max` connections
// and the refusals.
size_t open_tenants_max(uint64_t descriptors, uint64_t connections_max) {
    if (descriptors == 0) return 0;
    const uint64_t others = descriptors_reserved + refusals_max(descriptors) +
                            (connections_max ? connections_max : descriptors / 2);
    const uint64_t left = descriptors > others ? descriptors - others : 0;
    return std::max<size_t>(open_tenants_min, left / descriptors_per_tenant);
}

// What a crash leaves in the data directory that no one reads again (§11): an image received or
// built and not renamed into place, a deleted file not yet unlinked, a side file's replacement
// not yet renamed (engine::replace_durably's temp).
bool leftover(std::string_view file) {
    return file.ends_with(".fenec.incoming") || file.ends_with(".fenec.beside") ||
           file.ends_with(".fenec.deleted") || file.ends_with(engine::replace_temp_suffix);
}

std::vector<std::string> split_path(std::string_view path) {
    std::vector<std::string> out;
    out.reserve(8);  // /t/<t>/c/<collection>/<id>/changes is 6: one allocation, not four
    size_t i = 1;
    while (i <= path.size()) {
        size_t j = path.find('/', i);
        if (j == std::string_view::npos) j = path.size();
        out.emplace_back(path.substr(i, j - i));
        i = j + 1;
    }
    return out;
}

bool body_route(const http::RequestHead& h) {
    return h.method == http::Method::post || h.method == http::Method::put ||
           h.method == http::Method::patch;
}

bool json_type(std::string_view ct) {
    std::string lower(ct);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t semi = lower.find(';');
    std::string base = lower.substr(0, semi);
    while (!base.empty() && base.back() == ' ') base.pop_back();
    if (semi != std::string::npos) {
        std::string params = lower.substr(semi + 1);
        params.erase(0, params.find_first_not_of(' '));
        if (params != "charset=utf-8") return false;
    }
    return base == "application/json" || base == "application/x-ndjson";
}

// `/t/<t>/batch`, whose body is NDJSON or a JSON array (§2.2, §5.2).
bool batch_path(std::string_view path) {
    if (!path.starts_with("/t/")) return false;
    const size_t slash = path.find('/', 3);
    return slash != std::string_view::npos && path.substr(slash) == "/batch";
}

// §2.2's 415: the type sent and the ones the route takes. curl's --data and --data-binary send a
// form's type unless told otherwise, the usual way an NDJSON batch arrives without its own.
std::string content_type_refusal(const http::RequestHead& h, std::string_view sent, bool image) {
    std::string takes = image                ? "`application/octet-stream`"
                        : batch_path(h.path) ? "`application/x-ndjson` (a statement a line) or "
                                               "`application/json` (an array of statements)"
                                             : "`application/json`";
    std::string out =
        "Content-Type `" + std::string(sent) + "` is not taken by " + h.path + ": send " + takes;
    if (sent.starts_with("application/x-www-form-urlencoded")) {
        out +=
            " (curl's --data and --data-binary send this form type unless given -H "
            "'Content-Type: ...')";
    }
    return out;
}

std::string peer_host(std::string_view peer) {
    size_t colon = peer.rfind(':');
    return std::string(colon == std::string_view::npos ? peer : peer.substr(0, colon));
}

// §3.3: the client a router's `Fenec-Router` names, when its mark verifies for the request's
// `X-Request-Id` under the node's admin token; nullopt for no mark, a wrong one, or a node with
// no admin token (the mark's key is that token, so there nothing can verify).
std::optional<std::string> marked_client(const NodeOptions& o, const http::RequestHead& h) {
    const std::optional<std::string_view> mark = h.header("Fenec-Router");
    if (!mark || !o.admin_token) return std::nullopt;
    std::string client;
    if (!server::verify_router_mark(*o.admin_token, *mark, h.header("X-Request-Id").value_or(""),
                                    client)) {
        return std::nullopt;
    }
    return client;
}

// §3.1, open planes: whether a request admitted only because its plane is open may be served: its
// Host is localhost or a literal address, or a router whose mark verified judged the client's Host
// at its edge (router.md §3; the router sends the node its directory address as Host, not the
// client's).
bool open_plane_host_ok(const http::RequestHead& h, bool marked) {
    return marked || server::host_is_local_or_literal(h.header("Host"), h.version_minor);
}

std::string open_plane_refusal(auth::Credential plane) {
    const std::string_view name = plane == auth::Credential::admin         ? "admin"
                                  : plane == auth::Credential::replication ? "replication"
                                                                           : "data";
    return "the " + std::string(name) +
           " plane is open here: Host must be a loopback or literal address";
}

}  // namespace

std::string_view route_label(Route r) {
    static constexpr std::string_view names[] = {"query",       "batch",   "rest",   "changes",
                                                  "admin",       "admin_query", "lease",
                                                  "replication", "metrics", "health", "other"};
    return names[static_cast<size_t>(r)];
}

Node::Node(NodeOptions options, NodeEnv env) : options_(std::move(options)), env_(env) {
    random_state_ = std::random_device{}() ^ (static_cast<uint64_t>(env_.clock.steady_ns()) << 1);
    started_ms_ = now_ms();
    init_metrics();
}

void Node::init_metrics() {
    obs::Registry& m = metrics_;
    m.gauge("fenec_build_info", "the node's version", {"version"}).with({fenec_version}).set(1);
    m.gauge_fn("fenec_start_time_seconds", "when the node started (Unix seconds)",
               [this] { return static_cast<double>(started_ms_) / 1000; });
    counters_.requests = &m.counter("fenec_http_requests_total", "requests answered", {"route", "code"});
    counters_.durations = &m.histogram("fenec_http_request_duration_seconds",
                                       "time from the head read to the answer queued", {"route"});
    m.gauge_fn("fenec_http_connections", "open connections",
               [this] { return server_ ? static_cast<double>(server_->connections()) : 0; });
    m.gauge_fn(
        "fenec_http_connections_unproven", "open connections yet to send a whole request",
        [this] { return server_ ? static_cast<double>(server_->connections_unproven()) : 0; });
    counters_.refused = &m.counter("fenec_http_refused_total", "requests or connections refused",
                                   {"reason"});
    counters_.statements = &m.counter("fenec_statements_total", "statements run", {"kind"});
    counters_.slow = &m.counter("fenec_slow_requests_total", "requests at or over --slow-ms").with({});
    counters_.writes_refused = &m.counter("fenec_writes_refused_total", "writes refused unrun (503)",
                                          {"reason"});
    counters_.quota_refusals = &m.counter("fenec_quota_refusals_total", "writes refused by a quota",
                                          {"quota"});
    counters_.replays = &m.counter("fenec_idempotent_replays_total", "answers replayed from a key").with({});
    counters_.conflicts = &m.counter("fenec_idempotency_conflicts_total",
                                     "keys reused for another request (422)").with({});
    counters_.subscriptions = &m.gauge("fenec_subscriptions", "open subscriptions").with({});
    counters_.reseeds = &m.counter("fenec_subscription_reseeds_total", "seeds sent again").with({});
    counters_.subscriptions_ended = &m.counter("fenec_subscriptions_ended_total",
                                               "subscriptions ended, by reason", {"reason"});
    counters_.tenant_closes = &m.counter("fenec_tenant_closes_total", "tenants closed, by reason",
                                         {"reason"});
    // The series the deploy kit's alerts read, at 0 from the start: rate() and increase() see
    // the first event only over a series that was there before it (one born at 1 adds nothing).
    for (CloseReason r : {CloseReason::idle, CloseReason::memory, CloseReason::shutdown,
                          CloseReason::descriptors, CloseReason::latched}) {
        counters_.tenant_closes->with({close_reason_name(r)});
    }
    for (const char* reason :
         {"stopping", "frozen", "gone", "lease-lapsed", "lease-elsewhere", "lease-none"}) {
        counters_.writes_refused->with({reason});
    }
    counters_.graphs_opened = &m.counter("fenec_vector_graphs_opened_total",
                                         "vector graphs loaded as tenants opened, by how", {"how"});
    counters_.spans = &m.counter("fenec_trace_spans_total", "spans written").with({});
    counters_.outcome_unknown = &m.counter("fenec_outcome_unknown_total",
                                           "writes landed and answered 500 outcome unknown").with({});
    counters_.lease_grants = &m.counter("fenec_lease_grants_total", "grants answered, by outcome",
                                        {"outcome"});
    counters_.over_budget = &m.counter("fenec_statements_over_budget_total",
                                       "requests whose statements passed a budget", {"budget"});
    m.gauge_fn("fenec_worker_jobs_waiting", "jobs queued for the worker pool, every tenant's",
               [this] { return workers_ ? static_cast<double>(workers_->queued()) : 0; });
    m.counter_fn("fenec_worker_jobs_total", "jobs the worker pool has started, every tenant's",
                 [this] { return workers_ ? static_cast<double>(workers_->started()) : 0; });
    m.gauge_fn("fenec_lease_left_seconds", "lease left (-1 without --lease)", [this] {
        return leases() ? static_cast<double>(leases()->left_ms()) / 1000 : -1.0;
    });
    m.gauge_fn("fenec_lease_term", "the holder's term (0: none)", [this] {
        const std::optional<Holder> h = leases() ? leases()->holder() : std::nullopt;
        return h ? static_cast<double>(h->term) : 0.0;
    });
    m.counter_fn("fenec_trace_spans_dropped_total", "spans dropped with the queue full",
                 [this] { return trace_ ? static_cast<double>(trace_->lines_dropped()) : 0; });
    m.counter_fn(
        "fenec_slow_lines_dropped_total",
        "--slow-ms lines dropped: the queue full, or given up at a stop", [this] {
            return slow_ ? static_cast<double>(slow_->lines_dropped() + slow_->lines_failed()) : 0;
        });
    m.counter_fn(
        "fenec_log_lines_dropped_total",
        "the node's own stderr lines dropped: the queue full, or given up at a stop", [this] {
            return lines_ ? static_cast<double>(lines_->lines_dropped() + lines_->lines_failed())
                          : 0;
        });
    m.counter_fn("fenec_audit_lines_total", "audit lines written",
                 [this] { return audit_ ? static_cast<double>(audit_->lines_written()) : 0; });
    // NaN, not 0, when the directory cannot be listed (out of descriptors): a count it cannot tell.
    m.gauge_fn("fenec_tenants", "tenant files in --data-dir (NaN: it could not be listed)", [this] {
        if (!registry_) return 0.0;
        // Names only: the loop renders this, and list() would wait for each open tenant's lock.
        auto tenants = registry_->file_count();
        return tenants.is_ok() ? static_cast<double>(*tenants)
                               : std::numeric_limits<double>::quiet_NaN();
    });
    m.gauge_fn("fenec_tenants_open", "open tenants",
               [this] { return registry_ ? static_cast<double>(registry_->open_count()) : 0; });
    m.gauge_fn("fenec_tenants_open_max", "open tenants the descriptor budget allows (0: no bound)",
               [this] {
                   return static_cast<double>(
                       open_tenants_max(env_.descriptors, options_.max_connections));
               });
    m.counter_fn("fenec_tenant_opens_total", "tenants opened",
                 [this] { return registry_ ? static_cast<double>(registry_->opens()) : 0; });
    m.gauge_fn("fenec_memory_bytes", "the open tenants' memory",
               [this] { return registry_ ? static_cast<double>(registry_->memory_bytes()) : 0; });
    m.gauge_fn("fenec_memory_limit_bytes", "--max-memory (0: none)",
               [this] { return static_cast<double>(options_.max_memory_mib << 20); });
    m.counter_fn("fenec_sync_group_rounds_total",
                 "syncs of the whole file system for several tenants (--sync-scope fs)",
                 [this] { return syncer_ ? static_cast<double>(syncer_->group_rounds()) : 0; });
    m.counter_fn("fenec_sync_group_tenants_total", "tenants those syncs covered",
                 [this] { return syncer_ ? static_cast<double>(syncer_->group_covered()) : 0; });
    m.gauge_fn("fenec_huge_pool_bytes", "freed huge pages kept for reuse (--huge-pool)",
               [] { return static_cast<double>(engine::huge_pool_stats().bytes); });
    m.counter_fn("fenec_huge_pages_reused_total", "huge pages taken from the pool, already backed",
                 [] { return static_cast<double>(engine::huge_pool_stats().reused); });
    m.counter_fn("fenec_huge_pages_fresh_total", "huge pages mapped afresh (the pool had none)",
                 [] { return static_cast<double>(engine::huge_pool_stats().fresh); });
}

Node::~Node() {
    if (server_) server_->shutdown();
    stopping_ = true;
    if (ticker_.joinable()) ticker_.join();
    if (subscriptions_) subscriptions_->end_all("shutdown");
    // Every holder of a tenant stops before close_all, which closes each whatever references
    // remain: a follower still running would read its copy's closed database (drain's order).
    if (replication_) replication_->stop();
    if (compactor_) compactor_->stop();
    if (workers_) workers_->shutdown();
    if (registry_) registry_->close_all();
    if (audit_) audit_->close();
    if (access_) access_->close();
    if (slow_) slow_->close();
    if (lines_) lines_->close();
}

std::string Node::prepare() {
    engine::Fs& fs = env_.fs;
    // A --max-connections the descriptor limit cannot hold: past the descriptors, accept fails and
    // a newcomer waits in the kernel's backlog, answered nothing (a black-box pass under
    // prlimit --nofile=64). Lowered to half the descriptors, the rest kept for tenants and the
    // node's own, so a newcomer past it is accepted and answered 503; said on stderr.
    if (env_.descriptors != 0 && options_.max_connections > env_.descriptors / 2) {
        const uint32_t fit = static_cast<uint32_t>(std::max<uint64_t>(1, env_.descriptors / 2));
        say("--max-connections " + std::to_string(options_.max_connections) +
            " does not fit under the descriptor limit " + std::to_string(env_.descriptors) +
            ": lowered to " + std::to_string(fit) + " (raise the limit, or set it lower)");
        options_.max_connections = fit;
    }
    if (engine::Status st = fs.make_dirs(options_.data_dir); !st.is_ok()) {
        return "--data-dir " + options_.data_dir + ": " + st.to_string();
    }
    // Empty, and only ever locked: emptying one another node holds changes nothing of it.
    const std::string lock_path = options_.data_dir + "/fenec-node.lock";
    auto lock = fs.open(lock_path, engine::OpenMode::create_truncate);
    if (!lock.is_ok()) {
        return "--data-dir " + options_.data_dir +
               " cannot be written: " + lock.status().to_string();
    }
    if (engine::Status st = fs.lock(**lock); !st.is_ok()) {
        if (st.code() == engine::Code::busy) {
            return "--data-dir " + options_.data_dir + " is held by another fenec-node (" +
                   lock_path + ")";
        }
        return "--data-dir " + options_.data_dir + ": " + st.to_string();
    }
    lock_ = std::move(lock.value());
    auto files = fs.list(options_.data_dir);
    if (!files.is_ok())
        return "--data-dir " + options_.data_dir + ": " + files.status().to_string();
    for (const std::string& f : *files) {
        if (leftover(f)) fs.remove(options_.data_dir + "/" + f).ignore();  // tried again next start
    }
    auth::AuthConfig ac;
    ac.data_token = options_.token;
    ac.admin_token = options_.admin_token;
    ac.replication_token = options_.replication_token;
    ac.jwt_secret = options_.jwt_secret;
    ac.jwks_path = options_.jwt_jwks;
    // A key file rotated, emptied or broken is said where an operator looks (say: straight to
    // stderr until lines_ opens below).
    ac.on_jwks_reload = [this](const std::string& line) { say(line); };
    std::string error;
    auth_ = auth::Authenticator::create(ac, error);
    if (!auth_) return error;
    delay_ = std::make_unique<server::RefusalDelay>(options_.auth_delay_ms);
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
        lo.queue_lines_max = obs::trace_queue_lines_max;  // full: dropped and counted, never waited on
        auto log = obs::LineLog::open(*options_.trace, lo);
        if (!log.is_ok()) return "--trace " + *options_.trace + ": " + log.status().to_string();
        trace_ = std::move(log.value());
    }
    if (!lines_) {
        auto log = obs::LineLog::open("-");
        if (!log.is_ok()) return "stderr: " + log.status().to_string();
        lines_ = std::move(log.value());
    }
    if (options_.slow_ms) {
        obs::LineLogOptions lo;
        lo.queue_lines_max =
            obs::trace_queue_lines_max;  // full: dropped and counted, never waited on
        auto log = obs::LineLog::open("-", lo);
        if (!log.is_ok()) return "--slow-ms: stderr: " + log.status().to_string();
        slow_ = std::move(log.value());
    }
    // The process's one pool (engine/huge_pages.h): the last node prepared sets it.
    engine::set_huge_pool_bytes(options_.huge_pool_mib << 20);
    engine::SyncPolicy sync = engine::SyncPolicy::every_block();
    if (options_.sync == NodeOptions::Sync::interval) sync = engine::SyncPolicy::interval(options_.sync_ms);
    if (options_.sync == NodeOptions::Sync::off) sync = engine::SyncPolicy::at_close();
    flusher_ = std::make_unique<engine::Flusher>(options_.sync_ms ? options_.sync_ms : 250);
    if (sync.kind == engine::SyncPolicy::Kind::every_block) {
        if (options_.sync_scope == NodeOptions::SyncScope::fs) {
            if (std::string why = syncfs_unreliable(); !why.empty()) {
                return "--sync-scope fs: " + why;
            }
            // One thread, so every tenant that gets a write while a flush runs is in the next.
            syncer_ = std::make_unique<engine::Syncer>(
                1, [this] { return env_.fs.sync_fs(options_.data_dir); });
        } else {
            syncer_ = std::make_unique<engine::Syncer>(engine::limits::sync_threads);
        }
    }
    // Terms fence promotions and follows with or without --lease; the guard gates only with it.
    leases_ = std::make_unique<Leases>(options_.node_name, options_.data_dir + "/fenec-node.state",
                                       env_.fs, env_.boot_clock);
    if (engine::Status st = leases_->load(); !st.is_ok()) return st.to_string();
    RegistryOptions ro;
    ro.data_dir = options_.data_dir;
    ro.fs = &env_.fs;
    ro.clock = &env_.clock;
    ro.gate = leases() ? &leases()->gate() : nullptr;
    ro.sync = sync;
    ro.close_idle_ms = int64_t{options_.close_idle_s} * 1000;
    ro.memory_max_bytes = options_.max_memory_mib << 20;
    ro.open_max = open_tenants_max(env_.descriptors, options_.max_connections);
    ro.changes_max = options_.changes;
    ro.flusher = flusher_.get();
    ro.syncer = syncer_.get();
    ro.on_open = [this](Tenant& t) {
        load_idempotency_keys(t);
        return load_quota(*this, t);  // never served without the quota it was given
    };
    ro.on_close = [this](std::string_view reason) { counters_.tenant_closes->with({reason}).inc(); };
    ro.on_graphs = [this](std::string_view how, uint64_t graphs) {
        counters_.graphs_opened->with({how}).inc(graphs);
    };
    // Its requests are answered 500 (or 503) with the same words; stderr is where an operator
    // who reads no answers learns a file is damaged.
    ro.on_open_failed = [this](std::string_view, const std::string& why) { say(why); };
    ro.feed_bytes = options_.feed_buffer_mib << 20;
    registry_ = std::make_unique<Registry>(std::move(ro));
    // Before anything opens a tenant (replication_->start below resumes the copies that follow):
    // one syncfs, and a first open after a restart need not sync its file (engine.md §6.1 step 5,
    // departed from as docs/benchmarks.md says). Failed, each first open syncs as before.
    if (engine::Status st = registry_->mark_durable_at_start(); !st.is_ok()) {
        std::fprintf(stderr, "fenec-node: warning: the data directory's sync at start failed (%s): "
                     "each tenant's first open syncs its file\n", st.to_string().c_str());
    }
    CompactorOptions co;
    co.dead_share_min = options_.compact_dead;
    co.file_bytes_min = options_.compact_min_mib << 20;
    compactor_ = std::make_unique<Compactor>(*registry_, metrics_, audit_.get(),
                                             [this] { return now_ms(); }, co);
    const uint32_t threads = std::max<uint32_t>(2, options_.workers * 2);
    workers_ = std::make_unique<server::WorkerPool>(threads, worker_queue_max);
    subscriptions_ = std::make_unique<Subscriptions>(*this);
    replication_ = std::make_unique<Replication>(*this);
    if (engine::Status st = replication_->start(); !st.is_ok()) {
        return "--data-dir " + options_.data_dir +
               ": the copies to follow could not be listed: " + st.to_string();
    }
    return "";
}

std::string Node::serve() {
    server::ServerOptions so;
    so.listen = options_.listen;
    so.loops = options_.workers;
    so.busy_poll_us = options_.busy_poll_us;
    so.connections_max = options_.max_connections;
    so.idle_timeout_ms = options_.idle_timeout_s * 1000;
    so.head_timeout_ms = options_.head_timeout_ms;
    so.body_bytes_per_s_min = options_.body_rate_min;
    so.connections_per_peer_max = options_.max_connections_per_address;
    so.connections_reserved_pct = options_.reserved_connections_pct;
    so.refusals_max = refusals_max(env_.descriptors);
    so.report_answers = access_ != nullptr;
    std::string error;
    server_ = server::HttpServer::bind(so, *this, error);
    if (!server_) return error;
    server_->start();
    compactor_->start();
    ticker_ = std::thread([this] {
        while (!stopping_) {
            for (int i = 0; i < Registry::sweep_period_ms / 100 && !stopping_; ++i) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            if (!stopping_) tick();
        }
    });
    return "";
}

uint16_t Node::port() const { return server_ ? server_->port() : 0; }

void Node::tick() {
    const std::vector<std::string> latched =
        registry_->sweep([this](std::string_view t) { return replication_->following(t); });
    subscriptions_->tick();
    reopen_latched(latched);
}

// node-http.md §5.8: a tenant latched by a failed write refuses writes until it is closed and
// opened again from its file (the open cuts what the failed write left). The sweep closes one
// that nothing holds, and one that requests hold once they let go (Registry::close_latched_held);
// a follower's stream, a subscriber or a held request would hold it for good, so each is ended
// here (streams and subscribers `closing`, new ones refused while it stays latched; a held
// request answered as its deadline would answer it), and the next sweep closes it. Reads go on
// meanwhile. A followed copy's follower does the same for its own (Follower::run).
void Node::reopen_latched(const std::vector<std::string>& latched) {
    for (const std::string& name : latched) {
        if (stopping_ || replication_->following(name)) continue;
        subscriptions_->end_tenant(name, "closing");
        replication_->end_streams(name, "closing");
        finish_parked(name);
    }
}

void Node::freezing(const std::string& tenant, const std::string& id) {
    std::lock_guard lock(freezes_mu_);
    frozen_by_[tenant] = id;
}

void Node::thawing(const std::string& tenant, const std::string& id) {
    if (id.empty()) return;
    std::lock_guard lock(freezes_mu_);
    thawed_.emplace_back(tenant, id);
    while (thawed_.size() > thawed_freezes_max) thawed_.pop_front();
}

bool Node::thawed_before(const std::string& tenant, const std::string& id) {
    if (id.empty()) return false;
    std::lock_guard lock(freezes_mu_);
    return std::any_of(thawed_.begin(), thawed_.end(),
                       [&](const auto& t) { return t.first == tenant && t.second == id; });
}

bool Node::frozen_by_another(const std::string& tenant, const std::string& id) {
    std::lock_guard lock(freezes_mu_);
    auto it = frozen_by_.find(tenant);
    return it != frozen_by_.end() && it->second != id;
}

void Node::unfrozen(const std::string& tenant) {
    std::lock_guard lock(freezes_mu_);
    frozen_by_.erase(tenant);
}

void Node::finish_parked(std::string_view tenant) {
    std::vector<std::shared_ptr<Parked>> waiting;
    {
        std::lock_guard lock(parked_mu_);
        for (const auto& w : parked_) {
            if (auto p = w.lock()) waiting.push_back(std::move(p));
        }
    }
    for (const auto& p : waiting) {
        if (!p->waits_on(tenant)) continue;
        // Its answer may run a held write once more: on a worker, as its deadline's would.
        if (!submit_task([p] { p->finish(); })) p->finish();
    }
}

void Node::track(const std::shared_ptr<Parked>& p) {
    std::lock_guard lock(parked_mu_);
    std::erase_if(parked_, [](const std::weak_ptr<Parked>& w) {
        auto s = w.lock();
        return !s || s->done();
    });
    parked_.push_back(p);
}

void Node::drain() {
    stopping_ = true;
    if (server_) server_->stop_accepting();
    subscriptions_->end_all("shutdown");
    if (replication_) replication_->stop();  // streams end `closing`; followers let go
    // Held requests are answered at once with their last run's answer (§1.3).
    std::vector<std::weak_ptr<Parked>> parked;
    {
        std::lock_guard lock(parked_mu_);
        parked.swap(parked_);
    }
    for (const auto& w : parked) {
        if (auto p = w.lock()) p->finish();
    }
    // Requests in flight get up to 10 s (§1.3).
    for (int i = 0; i < 100 && in_flight_.load() > 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (server_) server_->shutdown();
    if (ticker_.joinable()) ticker_.join();
    compactor_->stop();
    workers_->shutdown();
    registry_->close_all();
    if (audit_) audit_->close();
    if (access_) access_->close();
    if (trace_) trace_->close();
    if (slow_) slow_->close();
    if (lines_) lines_->close();
}

http::Response Node::refusal(int status, std::string_view message, std::string_view reason,
                             const std::function<void(json::Writer&)>& more) const {
    http::Response r;
    r.status = status;
    json::Writer w(r.body);
    w.begin_object();
    w.key("error");
    w.string(message);
    if (!reason.empty()) {
        w.key("reason");
        w.string(reason);
    }
    if (more) more(w);
    w.end_object();
    if (status == 401) r.header("WWW-Authenticate", "Bearer");
    if (status == 503 || status == 429) r.header("Retry-After", "1");
    return r;
}

http::Response Node::over_capacity(std::string_view reason) {
    const bool per_address = reason == "per_address";
    http::Response r = refusal(
        503,
        per_address
            ? "the node is at --max-connections-per-address (" +
                  std::to_string(options_.max_connections_per_address) + ") for this client address"
            : "the node is at --max-connections (" + std::to_string(options_.max_connections) +
                  "), or at its share for connections yet to send a whole request (" +
                  std::to_string(uint64_t{options_.max_connections} *
                                 (100 - std::min<uint32_t>(options_.reserved_connections_pct,
                                                           server::connections_reserved_pct_max)) /
                                 100) +
                  ")",
        std::string(reason));
    r.header("X-Request-Id", obs::request_id(std::nullopt, next_random()));
    r.close = true;
    counters_.refused->with({reason}).inc();
    return r;
}

// Connections the server cut for slowness or to make room (slow_head, slow_body, evicted).
void Node::on_refused(std::string_view reason) { counters_.refused->with({reason}).inc(); }

// The answers the server writes itself (400, 408, 411, 413, 431, 501): the node's body and the
// X-Request-Id every answer carries (§4.2).
http::Response Node::framing_error(int status, std::string_view message) {
    http::Response r = refusal(status, message);
    r.header("X-Request-Id", obs::request_id(std::nullopt, next_random()));
    counters_.requests->with({"other", std::to_string(status)}).inc();
    return r;
}

void Node::on_answered(const server::Answered& a) {
    if (!access_) return;
    access_->write(obs::access_line({.at_ms = now_ms(),
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

namespace {

// `PUT /_admin/tenants/<t>/file` (§8.3): the one route whose body is an image. Its tenant name,
// or "" for any other request.
std::string image_put_tenant(const http::RequestHead& h) {
    if (h.method != http::Method::put || !h.path.starts_with("/_admin/tenants/")) return "";
    const std::vector<std::string> seg = split_path(h.path);
    return seg.size() == 4 && seg[3] == "file" && valid_tenant_name(seg[2]) ? seg[2] : "";
}

bool octet_stream_type(std::string_view ct) {
    std::string lower(ct);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lower == "application/octet-stream";
}

}  // namespace

// Whether the head carries what the admin plane takes (or the plane is open here): the image
// route's larger bound and its 409 before the body are for the admin alone.
bool Node::admin_credential(const http::RequestHead& h) {
    if (auth_->plane_open(auth::Credential::admin) &&
        (server::flags::is_loopback(options_.listen) || options_.insecure)) {
        // Open, but not to a foreign Host (§3.1, open planes): authorize answers that one 400
        // after the --max-body bound.
        return open_plane_host_ok(h, marked_client(options_, h).has_value());
    }
    auth::Verdict v = auth_->identify(h.header("Authorization").value_or(""), now_ms());
    return v.ok && v.identity.credential == auth::Credential::admin;
}

server::HeadVerdict Node::check_head(const server::Request& request) {
    server::HeadVerdict v;
    v.body_bytes_max = options_.max_body_mib << 20;
    const http::RequestHead& h = request.head;
    auto refuse = [&](int status, std::string message) {
        http::Response r = refusal(status, message);
        r.close = true;
        v.refuse = std::move(r);
        return v;
    };
    if (h.transfer_encoding) {
        return refuse(411, "Transfer-Encoding is not taken: send the body with Content-Length");
    }
    // §9.5 for a router's changes: one to a tenant carrying the term of a router since promoted
    // over is refused here, before its body (an image) is read. Grants were fenced so, but a
    // fenced router's move, delete or create still ran (a black-box pass: a tenant's file
    // deleted under the router that leads). Only the admin's: anyone else gets authorize's 401.
    if (h.method != http::Method::get && h.method != http::Method::head &&
        h.path.starts_with("/_admin/tenants/")) {
        if (const auto fence = h.header("Fenec-Fence"); fence && admin_credential(h)) {
            const std::string_view f = *fence;
            const size_t space = f.rfind(' ');
            uint64_t term = 0;
            const std::string_view digits =
                space == std::string_view::npos ? "" : f.substr(space + 1);
            auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), term);
            if (space == 0 || space == std::string_view::npos || digits.empty() ||
                ec != std::errc() || end != digits.data() + digits.size()) {
                return refuse(400, "Fenec-Fence must be `<authority> <term>`");
            }
            const FenceOutcome out = fencing().check_fence(f.substr(0, space), term);
            if (!out.ok()) {
                http::Response r = fence_refusal(*this, out);
                r.close = true;
                v.refuse = std::move(r);
                return v;
            }
        }
    }
    // An image install (§8.3) takes application/octet-stream up to --max-image, and is refused
    // 409 before its body when the tenant has a file. Anyone but the admin gets --max-body, so
    // no unauthenticated client can make the node read gigabytes before its 401.
    const std::string image_tenant = image_put_tenant(h);
    const bool image = !image_tenant.empty() && admin_credential(h);
    if (image) {
        v.body_bytes_max = options_.max_image_mib << 20;
        v.stream_body = true;  // to the file as it comes (image.cc), never whole in memory
    }
    if (body_route(h)) {
        if (!h.content_length && (h.path.starts_with("/t/") || image)) {
            return refuse(411, "a " + std::string(h.method_text) + " to " + h.path +
                                   " needs Content-Length");
        }
        if (h.content_length && *h.content_length > v.body_bytes_max) {
            return refuse(413, "the body is " + std::to_string(*h.content_length) +
                                   " bytes, over " + (image ? "--max-image" : "--max-body") +
                                   " of " + std::to_string(v.body_bytes_max) + " bytes");
        }
        if (auto ct = h.header("Content-Type"); ct && h.content_length && *h.content_length > 0) {
            if (!image_tenant.empty() ? !octet_stream_type(*ct) : !json_type(*ct)) {
                return refuse(415, content_type_refusal(h, *ct, !image_tenant.empty()));
            }
        }
        if (image && registry_->file_exists(image_tenant)) {
            return refuse(409, "tenant `" + image_tenant + "` has a file here: delete it first");
        }
    }
    // Credentials before bodies: on a guarded plane, a head without what the plane takes has
    // its body streamed, so dispatch's authorize refuses it (401 after --auth-delay, or 403)
    // with not a byte of it read and no 100 Continue sent; the connection then closes.
    if (!v.stream_body && h.content_length.value_or(0) > 0 && refused_by_head(h)) {
        v.stream_body = true;
    }
    return v;
}

// Whether authorize() will refuse this head (§3.1), judged from the head alone: a guarded plane
// and no credential that reaches it, or a plane absent on this listener. Mirrors authorize's
// rules; a scope (a read-only JWT writing) is judged later, with the statement.
bool Node::refused_by_head(const http::RequestHead& h) {
    const std::vector<std::string> seg = split_path(h.path);
    const std::string& first = seg.empty() ? std::string() : seg[0];
    auth::Credential plane;
    if (first == "t" && seg.size() >= 2) {
        plane = auth::Credential::data;
    } else if (first == "_admin" || first == "_metrics") {
        plane = auth::Credential::admin;
    } else if (first == "_replication") {
        plane = auth::Credential::replication;
    } else {
        return false;
    }
    if (auth_->plane_open(plane)) {  // no credential asked for; 404 where the plane is absent
        return !(server::flags::is_loopback(options_.listen) || options_.insecure ||
                 plane == auth::Credential::data);
    }
    const auth::Verdict v = auth_->identify(h.header("Authorization").value_or(""), now_ms());
    if (!v.ok) return true;
    const auth::Credential got = v.identity.credential;
    if (plane != auth::Credential::data) return got != plane;
    if (got == auth::Credential::jwt) {
        return v.identity.tenant.empty() || v.identity.tenant != seg[1];
    }
    return got != auth::Credential::data;
}

void Node::handle(server::Request request, std::shared_ptr<server::Exchange> exchange) {
    auto call = std::make_shared<Call>();
    call->start_ns = env_.clock.steady_ns();
    call->request = std::move(request);
    call->exchange = std::move(exchange);
    const http::RequestHead& h = call->request.head;
    call->request_id = obs::request_id(h.header("X-Request-Id"), next_random());
    if (trace_) {
        call->start_ms = now_ms();
        if (auto tp = h.header("traceparent")) call->parent = obs::parse_traceparent(*tp);
        const double share = options_.trace_sample;
        if (obs::should_trace(call->parent, share, next_random())) {
            call->trace_id = call->parent ? call->parent->trace_id
                                          : obs::trace_id(next_random(), next_random());
            call->span_id = obs::span_id(next_random());
        }
    }
    in_flight_.fetch_add(1);
    dispatch(std::move(call));
}

uint64_t Node::next_random() {
    // splitmix64 over a counter seeded once per process: ids need to differ, not to be secret.
    uint64_t z = (random_state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void Node::dispatch(std::shared_ptr<Call> call) {
    const http::RequestHead& h = call->request.head;
    // A browser's preflight is answered before any credential is asked for (§2.3).
    if (options_.cors && h.method == http::Method::options && h.header("Origin") == *options_.cors) {
        return answer(*call, preflight());
    }
    if (h.method == http::Method::other) {
        http::Response r = refusal(501, "method " + std::string(h.method_text) + " is not served");
        r.close = true;
        return answer(*call, std::move(r));
    }
    // The row this path is (routes.h); a path under a plane's prefix that no row names is judged
    // on that plane before its 404, as a served one would be.
    const NodeRoute* served = find_node_route(h.path);
    const auth::Credential plane = served ? served->plane : plane_of_prefix(h.path);
    const std::vector<std::string> seg = split_path(h.path);
    switch (plane) {
        case auth::Credential::none: {
            if (!served) break;
            call->route = Route::health;
            if (!route_takes(*call)) return answer(*call, method_refusal(*this, *call));
            http::Response r;
            r.status = stopping_ ? 503 : 200;
            json::Writer w(r.body);
            w.begin_object();
            w.key("ok");
            w.boolean(!stopping_);
            if (stopping_) {
                w.key("reason");
                w.string("stopping");
            } else {
                w.key("node");
                w.string(options_.node_name);
                w.key("version");
                w.string(fenec_version);
            }
            w.end_object();
            return answer(*call, std::move(r));
        }
        case auth::Credential::data:
            call->tenant = seg[1];
            call->rest.assign(seg.begin() + 2, seg.end());
            call->route = !served                               ? Route::other
                          : served->id == RouteId::query        ? Route::query
                          : served->id == RouteId::batch        ? Route::batch
                          : served->id == RouteId::changes      ? Route::changes
                          : served->id == RouteId::describe     ? Route::other
                                                                : Route::rest;
            if (!authorize(call, auth::Credential::data)) return;
            if (!valid_tenant_name(call->tenant)) {
                return answer(*call, refusal(400, "tenant name `" + call->tenant +
                                                      "` is not [a-z0-9_-]{1,64}"));
            }
            if (stopping_) return answer(*call, refusal(503, "the node is stopping", "stopping"));
            if (serve_inline(*this, call) || serve_inline_write(*this, call)) return;
            return submit(call, [this](const std::shared_ptr<Call>& c) { serve_data(*this, c); });
        case auth::Credential::admin:
            call->route = !served                                ? Route::admin
                          : served->id == RouteId::metrics       ? Route::metrics
                          : served->id == RouteId::tenant_query  ? Route::admin_query
                          : served->id == RouteId::lease         ? Route::lease
                                                                 : Route::admin;
            if (!authorize(call, auth::Credential::admin)) return;
            if (served && served->id == RouteId::metrics) {
                if (!route_takes(*call)) return answer(*call, method_refusal(*this, *call));
                http::Response r;
                r.body = metrics_.render();
                r.content_type = std::string(obs::metrics_content_type);
                return answer(*call, std::move(r));
            }
            if (served && served->id == RouteId::lease) {
                return submit(call, [this](const std::shared_ptr<Call>& c) { serve_lease(*this, c); });
            }
            if (seg.size() >= 3 && seg[1] == "tenants") call->tenant = seg[2];
            call->rest.assign(seg.begin() + 1, seg.end());
            if (served && (served->id == RouteId::follow || served->id == RouteId::promote)) {
                const bool follow = served->id == RouteId::follow;
                return submit(call, [this, follow](const std::shared_ptr<Call>& c) {
                    follow ? replication_->serve_follow(c) : replication_->serve_promote(c);
                });
            }
            return submit(call, [this](const std::shared_ptr<Call>& c) { serve_admin(*this, c); });
        case auth::Credential::replication:
            call->route = Route::replication;
            if (!authorize(call, auth::Credential::replication)) return;
            return replication_->serve_stream(call);
        case auth::Credential::jwt:
            break;
    }
    answer(*call, refusal(404, "no route " + h.path +
                                   ": the node serves /t/, /_admin/, /_replication/, /_metrics and "
                                   "/_health"));
}

const NodeRoute* route_of(const Call& call) { return find_node_route(call.request.head.path); }

bool route_takes(const Call& call) {
    const NodeRoute* row = route_of(call);
    return row && row->methods.has(call.request.head.method);
}

http::Response method_refusal(Node& node, const Call& call) {
    const NodeRoute* row = route_of(call);
    const std::string allow = row ? row->methods.allow() : "";
    return node.refusal(405, std::string(row ? row->pattern : "") + " takes " + allow)
        .header("Allow", allow);
}

// The pool shares its workers fairly between keys (workers.h): one per tenant, so a tenant's
// heavy requests wait behind each other, not in front of another tenant's; 0 for the node's own
// routes. The pool sees an opaque number only.
static uint64_t pool_key(const Call& call) {
    return call.tenant.empty() ? 0 : std::hash<std::string>{}(call.tenant) | 1;
}

void Node::submit(const std::shared_ptr<Call>& call,
                  std::function<void(const std::shared_ptr<Call>&)> fn) {
    const bool queued = workers_->submit(pool_key(*call), [call, fn = std::move(fn)] { fn(call); });
    if (!queued) answer(*call, refusal(503, "the node's workers are busy", "connections"));
}

bool Node::submit_task(const Call& call, std::function<void()> fn) {
    return workers_->submit(pool_key(call), std::move(fn));
}

bool Node::submit_answer(const Call& call, std::function<void()> fn) {
    return workers_->submit_past_bound(pool_key(call), std::move(fn));
}

// §3.1: the credential a plane takes; 401 for none or an unknown one (delayed, §3.3), 403 for a
// known one where it does not reach, 400 for a foreign Host on a plane admitted only because it
// is open (§3.1, open planes). False when the call was answered.
//
// The refusal delay (§3.3) is keyed by the peer's address. A request whose router's mark
// verifies is neither delayed nor counted, nor does it reset anything: the router delays at its
// edge, and a client must not clear its own delay here by going round through a router. Only a
// credential that reaches the plane it asked for resets the address (a data token sent to
// /_admin/ is a 403 and leaves the count of bad admin tokens as it was).
bool Node::authorize(const std::shared_ptr<Call>& c, auth::Credential plane) {
    Call& call = *c;
    const http::RequestHead& h = call.request.head;
    const std::string_view value = h.header("Authorization").value_or("");
    auth::Verdict v = auth_->identify(value, now_ms());
    const bool open =
        auth_->plane_open(plane) && (server::flags::is_loopback(options_.listen) ||
                                     options_.insecure || plane == auth::Credential::data);
    if (auth_->plane_open(plane) && !open) {
        // An unguarded plane on a public listener is absent there.
        answer(call, refusal(404, "no route " + h.path));
        return false;
    }
    if (std::optional<std::string> client = marked_client(options_, h)) {
        call.client = std::move(*client);
        call.via = call.request.peer;
    }
    const bool marked = !call.via.empty();
    const std::string peer = peer_host(call.request.peer);
    auto open_admits = [&] {
        if (open_plane_host_ok(h, marked)) return true;
        const std::string why = open_plane_refusal(plane);
        counters_.refused->with({"host"}).inc();
        audit_refusal(call, 400, why);
        answer(call, refusal(400, why));
        return false;
    };
    if (!v.ok) {
        if (open) {
            call.who.credential = plane;  // an open plane takes any request
            return open_admits();
        }
        const std::string why = value.empty() ? "no credential: send Authorization: Bearer <token>"
                                              : v.why;
        counters_.refused->with({"credential"}).inc();
        audit_refusal(call, 401, why);
        const int64_t delay = marked ? 0 : delay_->refused(peer, now_ms());
        http::Response r = refusal(401, why);
        auto later = std::make_shared<http::Response>(std::move(r));
        if (delay <= 0 || !timers_.after(delay, [this, c, later] { answer(*c, std::move(*later)); })) {
            answer(call, std::move(*later));
        }
        return false;
    }
    call.who = v.identity;
    const auth::Credential got = v.identity.credential;
    std::string why;
    if (plane == auth::Credential::data) {
        if (got == auth::Credential::jwt) {
            if (v.identity.tenant.empty()) why = "the JWT names no tenant (a string `tenant` claim)";
            else if (v.identity.tenant != call.tenant)
                why = "the JWT reaches tenant `" + v.identity.tenant + "` only";
        } else if (got == auth::Credential::admin) {
            why = "the admin token does not reach /t/; use POST /_admin/tenants/" + call.tenant + "/query";
        } else if (got != auth::Credential::data) {
            why = "the " + std::string(auth::credential_name(got)) + " does not reach /t/";
        }
    } else if (got != plane && !open) {
        why = "the " + std::string(auth::credential_name(got)) + " does not reach " +
              (plane == auth::Credential::admin ? "/_admin/ or /_metrics" : "/_replication/");
    }
    if (!why.empty()) {
        counters_.refused->with({"scope"}).inc();
        audit_refusal(call, 403, why);
        answer(call, refusal(403, why));
        return false;
    }
    // On the data plane every credential left reaches it; elsewhere another plane's credential
    // got here only because the plane is open, and resets nothing.
    const bool reaches = plane == auth::Credential::data || got == plane;
    if (!reaches) return open_admits();
    if (!marked) delay_->accepted(peer);
    return true;
}

std::optional<http::Response> Node::expired_meanwhile(const Call& call) {
    if (!auth::expired(call.who, now_ms())) return std::nullopt;
    const std::string why = "the JWT expired while the request waited";
    counters_.refused->with({"credential"}).inc();
    audit_refusal(call, 401, why);
    return refusal(401, why, "expired");
}

void Node::audit_refusal(const Call& call, int status, std::string_view why) {
    if (!audit_) return;
    obs::AuditLine line;
    line.at_ms = now_ms();
    line.event = obs::AuditEvent::refused;
    line.who = obs::AuditWho{static_cast<obs::Credential>(call.who.credential), call.who.sub,
                             call.who.tenant};
    line.peer = audit_peer(call);
    line.via = call.via;
    line.request_id = call.request_id;
    line.fields = {{"method", std::string(call.request.head.method_text)},
                   {"path", call.request.head.path},
                   {"status", status},
                   {"why", std::string(why)}};
    audit_->write(obs::audit_line(line));
}

void Node::answer(Call& call, http::Response response) {
    call.admitted.reset();  // in flight no more (§7 `requests`)
    response.header("X-Request-Id", call.request_id);
    if (options_.cors) {
        response.header("Access-Control-Allow-Origin", *options_.cors);
        response.header("Vary", "Origin");
        response.header("Access-Control-Expose-Headers",
                        "Fenec-Seq, Fenec-History, Fenec-Lease, Fenec-Lineage, Fenec-Image-Digest, "
                        "Idempotent-Replayed, X-Request-Id, Retry-After");
    }
    const int64_t took_ns = env_.clock.steady_ns() - call.start_ns;
    const double seconds = static_cast<double>(took_ns) / 1e9;
    const int status = response.status;
    // A stream is counted at its head (§13.1).
    const size_t route = static_cast<size_t>(call.route);
    if (status >= 100 && status < 600) {
        std::atomic<obs::Counter*>& slot = answered_[route][static_cast<size_t>(status - 100)];
        obs::Counter* c = slot.load(std::memory_order_acquire);
        if (!c) {
            c = &counters_.requests->with({route_label(call.route), std::to_string(status)});
            slot.store(c, std::memory_order_release);
        }
        c->inc();
    }
    if (!response.stream) {
        obs::Histogram* d = durations_[route].load(std::memory_order_acquire);
        if (!d) {
            d = &counters_.durations->with({route_label(call.route)});
            durations_[route].store(d, std::memory_order_release);
        }
        d->observe_us(static_cast<uint64_t>(took_ns / 1000));
    }
    if (!call.trace_id.empty() && call.route != Route::health && call.route != Route::metrics) {
        span(call, status, seconds);
    }
    if (options_.slow_ms && seconds * 1000 >= *options_.slow_ms) {
        counters_.slow->inc();
        slow_log(call, status, seconds);
    }
    if (response.stream) {
        call.exchange->start(std::move(response));
        in_flight_.fetch_sub(1);
    } else {
        call.exchange->reply(std::move(response));
        in_flight_.fetch_sub(1);
    }
}

http::Response Node::preflight() const {
    http::Response r;
    r.status = 204;
    r.content_type.clear();
    r.header("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
    r.header("Access-Control-Allow-Headers",
             "Authorization, Content-Type, Idempotency-Key, Fenec-After, Fenec-History, Fenec-Wait, "
             "Fenec-Router, Last-Event-ID, X-Request-Id, traceparent, tracestate");
    r.header("Access-Control-Max-Age", "600");
    return r;
}

// The node's server span (§13.5), a child of the incoming traceparent.
void Node::span(const Call& call, int status, double seconds) {
    const http::RequestHead& h = call.request.head;
    std::string name = std::string(h.method_text) + " ";
    switch (call.route) {
        case Route::query: name += "/t/{tenant}/query"; break;
        case Route::batch: name += "/t/{tenant}/batch"; break;
        case Route::rest: name += "/t/{tenant}/c/{collection}"; break;
        case Route::changes: name += "/t/{tenant}/c/{collection}/changes"; break;
        case Route::admin_query: name += "/_admin/tenants/{tenant}/query"; break;
        default:
            name += !call.tenant.empty() && h.path.starts_with("/t/") ? "/t/{tenant}/"
                    : h.path.starts_with("/_admin/")                 ? "/_admin/…"
                                                                     : h.path;
            break;
    }
    obs::Span s;
    s.trace_id = call.trace_id;
    s.span_id = call.span_id;
    if (call.parent) s.parent_id = call.parent->parent_id;
    s.name = name;
    s.start_ms = call.start_ms;
    s.us = static_cast<int64_t>(seconds * 1e6);
    s.request_id = call.request_id;
    if (!call.tenant.empty()) s.attrs.push_back({"tenant", call.tenant});
    s.attrs.push_back({"status", status});
    if (trace_->write(obs::span_line(s))) counters_.spans->inc();
}

void Node::say(const std::string& line) {
    if (lines_) {
        (void)lines_->write("fenec-node: " + line);  // dropped and counted when the queue is full
        return;
    }
    std::cerr << ("fenec-node: " + line + "\n");  // one write: lines from threads stay whole
}

void Node::slow_log(const Call& call, int status, double seconds) {
    obs::SlowRequest s;
    s.at_ms = now_ms();
    s.request_id = call.request_id;
    s.peer = call.request.peer;
    s.route = route_label(call.route);
    s.tenant = call.tenant;
    s.status = status;
    s.ms = static_cast<int64_t>(seconds * 1000);
    s.statement = call.shape;
    (void)slow_->write(obs::slow_line(s));  // dropped and counted when the queue is full
}

}  // namespace fenec::node
