// server/node/options.cc: the flag table of node-http.md §1.1, read by the runtime's one flag
// reader (server/runtime/flags.h). One table drives both parsing and --help, so a flag cannot be
// read without being documented.
#include "server/node/options.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "server/runtime/flags.h"
#include "server/runtime/loop.h"

namespace fenec::node {

namespace {

namespace flags = server::flags;

// One table for reading and --help; its setters write `o`.
std::vector<flags::Flag> flag_table(NodeOptions& o) {
    return {
        {"--listen", "<host:port>", "the one HTTP listener (default 127.0.0.1:8081)",
         flags::text(o.listen)},
        {"--data-dir", "<path>", "tenant files, created if missing (default ./fenec-data)",
         flags::text(o.data_dir)},
        {"--token", "<v>", "the data token, every tenant's data plane (env FENEC_TOKEN)",
         flags::text(o.token)},
        {"--admin-token", "<v>",
         "the admin token: /_admin/, /_metrics, usage (env FENEC_ADMIN_TOKEN)",
         flags::text(o.admin_token)},
        {"--replication-token", "<v>", "guards /_replication/ (env FENEC_REPLICATION_TOKEN)",
         flags::text(o.replication_token)},
        {"--jwt-secret", "<v>", "HS256 key of at least 32 bytes", flags::text(o.jwt_secret)},
        {"--jwt-secret-file", "<path>", "the HS256 key read from a file",
         [&o](const std::string& v) {
             FILE* f = std::fopen(v.c_str(), "rb");
             if (!f) return false;
             std::string s;
             char buf[4096];
             size_t n;
             while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
             std::fclose(f);
             while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
             o.jwt_secret = s;
             return true;
         }},
        {"--jwt-jwks", "<path>", "JWKS file: oct (HS256) and RSA (RS256) keys, re-read on change",
         flags::text(o.jwt_jwks)},
        {"--lease", nullptr, "write a tenant only under a running lease naming it (default off)",
         flags::on(o.lease)},
        {"--max-memory", "<MiB>", "memory for the open tenants together; 0 = off (default 0)",
         flags::number(o.max_memory_mib, 1ull << 30)},
        {"--huge-pool", "<MiB>",
         "freed huge pages kept for the next large buffer, so it arrives backed; 0 = none "
         "(default 256)",
         flags::number(o.huge_pool_mib, 1ull << 20)},
        {"--idle-timeout", "<s>", "close a connection silent this long; 0 = never (default 60)",
         flags::number(o.idle_timeout_s, UINT32_MAX)},
        {"--close-idle", "<s>", "close a tenant unused this long; 0 = never (default 300)",
         flags::number(o.close_idle_s, UINT32_MAX)},
        {"--sync", "<always|ms|off>",
         "always: answer after the fsync (group commit); <ms> 1-10000: fsync within that; off: at "
         "close (default always)",
         [&o](const std::string& v) {
             if (v == "always") {
                 o.sync = NodeOptions::Sync::always;
                 return true;
             }
             if (v == "off") {
                 o.sync = NodeOptions::Sync::off;
                 return true;
             }
             uint64_t ms = 0;
             if (!flags::read_u64(v, ms, 10000) || ms == 0) return false;
             o.sync = NodeOptions::Sync::interval;
             o.sync_ms = static_cast<uint32_t>(ms);
             return true;
         }},
        {"--sync-scope", "<file|fs>",
         "under --sync always, what one sync covers: file: one tenant's file; fs: every tenant "
         "with writes waiting, one syncfs of the data directory's file system (default file)",
         [&o](const std::string& v) {
             if (v != "file" && v != "fs") return false;
             o.sync_scope = v == "fs" ? NodeOptions::SyncScope::fs : NodeOptions::SyncScope::file;
             return true;
         }},
        {"--slow-ms", "<ms>", "log requests at least this slow on stderr; 0 = all (default off)",
         [&o](const std::string& v) {
             uint64_t ms = 0;
             if (!flags::read_u64(v, ms, UINT32_MAX)) return false;
             o.slow_ms = static_cast<uint32_t>(ms);
             return true;
         }},
        {"--audit", "<path>", "audit log, JSON lines (default off)", flags::text(o.audit)},
        {"--access-log", "<path>", "a JSON line per request answered; - for stderr (default off)",
         flags::text(o.access_log)},
        {"--feed-buffer", "<MiB>", "landed blocks kept per tenant for followers (default 64)",
         flags::number(o.feed_buffer_mib, 1ull << 20)},
        {"--upstream-timeout", "<s>", "connect and read bound when following a node (default 10)",
         flags::number(o.upstream_timeout_s, 3600)},
        {"--replica-wait", "<ms>",
         "under --sync always, how long an answer waits for its block to reach each connected "
         "follower's stream (default 50)",
         flags::number(o.replica_wait_ms, 60000)},
        {"--statement-rows", "<n>",
         "rows one request's statements may visit (read, filtered or not); past it 400; 0 = off "
         "(default 10000000)",
         flags::number(o.statement_rows, UINT64_MAX)},
        {"--statement-ms", "<ms>",
         "time one request's statements may run; past it 503, nothing written; 0 = off "
         "(default 10000)",
         flags::number(o.statement_ms, UINT32_MAX)},
        {"--trace", "<path>", "spans as JSON lines (default off)", flags::text(o.trace)},
        {"--trace-sample", "<0..1>",
         "share of requests traced without a sampled traceparent (default 0)",
         [&o](const std::string& v) {
             char* end = nullptr;
             const double d = std::strtod(v.c_str(), &end);
             if (v.empty() || *end != '\0' || !(d >= 0 && d <= 1)) return false;
             o.trace_sample = d;
             return true;
         }},
        {"--max-body", "<MiB>", "largest request body (default 64)",
         flags::number(o.max_body_mib, 1ull << 20)},
        {"--max-image", "<MiB>", "largest image an install takes (default 16384)",
         flags::number(o.max_image_mib, 1ull << 30)},
        {"--max-connections", "<n>",
         "open connections, streams included; 0 = no limit (default 1024)",
         flags::number(o.max_connections, UINT32_MAX)},
        {"--head-timeout", "<ms>",
         "a request head not whole this long after its first byte is answered 408; 0 = off "
         "(default 5000)",
         flags::number(o.head_timeout_ms, server::head_timeout_ms_max)},
        {"--body-rate-min", "<bytes/s>",
         "a body slower than this on average (after --head-timeout of grace) is answered 408; "
         "0 = off (default 4096)",
         flags::number(o.body_rate_min, server::body_bytes_per_s_min_max)},
        {"--max-connections-per-address", "<n>",
         "connections from one client address, loopback included; past it 503; 0 = no limit "
         "(default 0: a router in front is one address)",
         flags::number(o.max_connections_per_address, UINT32_MAX)},
        {"--reserved-connections", "<pct>",
         "share of --max-connections that connections yet to send a whole request may not take, "
         "0-90 (default 25)",
         flags::number(o.reserved_connections_pct, server::connections_reserved_pct_max)},
        {"--max-streams", "<n>", "open subscriptions on the node (default 4096)",
         flags::number(o.max_streams, UINT32_MAX)},
        {"--tenant-streams", "<n>", "open subscriptions per tenant (default 256)",
         flags::number(o.tenant_streams, UINT32_MAX)},
        {"--keepalive", "<s>", "a subscription silent this long gets a comment (default 20)",
         flags::number(o.keepalive_s, UINT32_MAX)},
        {"--changes", "<n>", "change-ring entries per open tenant (default 4096)",
         flags::number(o.changes, UINT32_MAX)},
        {"--idempotency-ttl", "<s>", "how long an Idempotency-Key is kept (default 86400)",
         flags::number(o.idempotency_ttl_s, UINT32_MAX)},
        {"--wait-max", "<ms>", "cap on Fenec-Wait (default 30000)",
         flags::number(o.wait_max_ms, UINT32_MAX)},
        {"--compact-dead", "<0..1>",
         "compact an open tenant in the background once this share of its file is dead; 0 = "
         "never (default 0.5)",
         [&o](const std::string& v) {
             char* end = nullptr;
             const double d = std::strtod(v.c_str(), &end);
             if (v.empty() || *end != '\0' || !(d >= 0 && d <= 1)) return false;
             o.compact_dead = d;
             return true;
         }},
        {"--compact-min", "<MiB>",
         "files smaller are never compacted in the background (default 1)",
         flags::number(o.compact_min_mib, 1ull << 30)},
        {"--auth-delay", "<ms>", "delay before a 401, doubled per refusal; 0 = off (default 100)",
         flags::number(o.auth_delay_ms, UINT32_MAX)},
        {"--cors", "<origin>", "answer browsers from this origin (default off)",
         flags::text(o.cors)},
        {"--node-name", "<name>", "how the node names itself (default the host name)",
         flags::text(o.node_name)},
        {"--workers", "<n>", "io_uring event loops (default the CPU count)",
         flags::number(o.workers, 256)},
        {"--busy-poll-us", "<us>", "a loop polls this long before it sleeps; 0 = off (default 50)",
         flags::number(o.busy_poll_us, 1000)},
        {"--insecure", nullptr, "allow a non-loopback --listen with an unguarded data plane",
         flags::on(o.insecure)},
    };
}

}  // namespace

ParsedFlags parse_flags(const std::vector<std::string>& args) {
    NodeOptions defaults;
    if (const char* v = std::getenv("FENEC_TOKEN"); v && *v) defaults.token = v;
    if (const char* v = std::getenv("FENEC_ADMIN_TOKEN"); v && *v) defaults.admin_token = v;
    if (const char* v = std::getenv("FENEC_REPLICATION_TOKEN"); v && *v) {
        defaults.replication_token = v;
    }
    ParsedFlags out = flags::parse(std::move(defaults), flag_table, args);
    if (out.help || !out.error.empty()) return out;
    NodeOptions& o = out.options;
    if (o.node_name.empty()) {
        char host[256] = {};
        o.node_name = gethostname(host, sizeof host - 1) == 0 && host[0] ? host : "fenec-node";
    }
    if (o.workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.workers = n > 1 ? static_cast<uint32_t>(n) : 1;  // node-http.md §1.1
    }
    return out;
}

std::string flags_help() {
    NodeOptions scratch;
    return flags::help_text(
        "usage: fenec-node [flags]\n\nServes many tenants, one file each, over HTTP/1.1.\n\n",
        flag_table(scratch), 34);
}

std::string check_options(const NodeOptions& o) {
    if (!flags::is_loopback(o.listen) && !o.token && !o.jwt_secret && !o.jwt_jwks && !o.insecure) {
        return "--listen " + o.listen +
               " is not loopback and neither --token nor a JWT key is set (or pass --insecure)";
    }
    if (o.sync_scope == NodeOptions::SyncScope::fs && o.sync != NodeOptions::Sync::always) {
        return "--sync-scope fs needs --sync always: only its writes wait for a sync";
    }
    if (o.replication_token && o.sync == NodeOptions::Sync::off) {
        return "--replication-token cannot go with --sync off: followers are sent fsynced blocks "
               "only";
    }
    return "";
}

}  // namespace fenec::node
