// server/node/options.cc: the flag table of node-http.md §1.1. One table drives both parsing and
// --help, so a flag cannot be read without being documented.
#include "server/node/options.h"

#include <charconv>
#include <cstdlib>
#include <functional>
#include <unistd.h>

namespace fenec::node {

namespace {

struct Flag {
    const char* name;
    const char* value;  // nullptr: takes no value
    const char* help;
    std::function<bool(NodeOptions&, const std::string&)> set;
};

bool to_u64(const std::string& s, uint64_t& out, uint64_t max = UINT64_MAX) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size() && out <= max;
}

template <class T>
std::function<bool(NodeOptions&, const std::string&)> number(T NodeOptions::*field,
                                                             uint64_t max = UINT32_MAX) {
    return [field, max](NodeOptions& o, const std::string& v) {
        uint64_t n = 0;
        if (!to_u64(v, n, max)) return false;
        o.*field = static_cast<T>(n);
        return true;
    };
}

std::function<bool(NodeOptions&, const std::string&)> text(std::string NodeOptions::*field) {
    return [field](NodeOptions& o, const std::string& v) {
        if (v.empty()) return false;
        o.*field = v;
        return true;
    };
}

std::function<bool(NodeOptions&, const std::string&)> opt_text(
    std::optional<std::string> NodeOptions::*field) {
    return [field](NodeOptions& o, const std::string& v) {
        if (v.empty()) return false;
        o.*field = v;
        return true;
    };
}

const std::vector<Flag>& flags() {
    static const std::vector<Flag> table = {
        {"--listen", "<host:port>", "the one HTTP listener (default 127.0.0.1:8081)",
         text(&NodeOptions::listen)},
        {"--data-dir", "<path>", "tenant files, created if missing (default ./fenec-data)",
         text(&NodeOptions::data_dir)},
        {"--token", "<v>", "the data token, every tenant's data plane (env FENEC_TOKEN)",
         opt_text(&NodeOptions::token)},
        {"--admin-token", "<v>", "the admin token: /_admin/, /_metrics, usage (env FENEC_ADMIN_TOKEN)",
         opt_text(&NodeOptions::admin_token)},
        {"--replication-token", "<v>", "guards /_replication/ (env FENEC_REPLICATION_TOKEN)",
         opt_text(&NodeOptions::replication_token)},
        {"--jwt-secret", "<v>", "HS256 key of at least 32 bytes", opt_text(&NodeOptions::jwt_secret)},
        {"--jwt-secret-file", "<path>", "the HS256 key read from a file",
         [](NodeOptions& o, const std::string& v) {
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
         opt_text(&NodeOptions::jwt_jwks)},
        {"--lease", nullptr, "write a tenant only under a running lease naming it (default off)",
         [](NodeOptions& o, const std::string&) { return o.lease = true; }},
        {"--max-memory", "<MiB>", "memory for the open tenants together; 0 = off (default 0)",
         number(&NodeOptions::max_memory_mib, 1ull << 30)},
        {"--idle-timeout", "<s>", "close a connection silent this long; 0 = never (default 60)",
         number(&NodeOptions::idle_timeout_s)},
        {"--close-idle", "<s>", "close a tenant unused this long; 0 = never (default 300)",
         number(&NodeOptions::close_idle_s)},
        {"--sync", "<always|ms|off>",
         "always: answer after the fsync (group commit); <ms> 1-10000: fsync within that; off: at "
         "close (default always)",
         [](NodeOptions& o, const std::string& v) {
             if (v == "always") { o.sync = NodeOptions::Sync::always; return true; }
             if (v == "off") { o.sync = NodeOptions::Sync::off; return true; }
             uint64_t ms = 0;
             if (!to_u64(v, ms, 10000) || ms == 0) return false;
             o.sync = NodeOptions::Sync::interval;
             o.sync_ms = static_cast<uint32_t>(ms);
             return true;
         }},
        {"--slow-ms", "<ms>", "log requests at least this slow on stderr; 0 = all (default off)",
         [](NodeOptions& o, const std::string& v) {
             uint64_t ms = 0;
             if (!to_u64(v, ms, UINT32_MAX)) return false;
             o.slow_ms = static_cast<uint32_t>(ms);
             return true;
         }},
        {"--audit", "<path>", "audit log, JSON lines (default off)", opt_text(&NodeOptions::audit)},
        {"--feed-buffer", "<MiB>", "landed blocks kept per tenant for followers (default 64)",
         number(&NodeOptions::feed_buffer_mib, 1ull << 20)},
        {"--upstream-timeout", "<s>", "connect and read bound when following a node (default 10)",
         number(&NodeOptions::upstream_timeout_s, 3600)},
        {"--replica-wait", "<ms>",
         "under --sync always, how long an answer waits for its block to reach each connected "
         "follower's stream (default 50)",
         number(&NodeOptions::replica_wait_ms, 60000)},
        {"--trace", "<path>", "spans as JSON lines (default off)", opt_text(&NodeOptions::trace)},
        {"--trace-sample", "<0..1>", "share of requests traced without a sampled traceparent (default 0)",
         [](NodeOptions& o, const std::string& v) {
             char* end = nullptr;
             const double d = std::strtod(v.c_str(), &end);
             if (v.empty() || *end != '\0' || !(d >= 0 && d <= 1)) return false;
             o.trace_sample = d;
             return true;
         }},
        {"--max-body", "<MiB>", "largest request body (default 64)",
         number(&NodeOptions::max_body_mib, 1ull << 20)},
        {"--max-image", "<MiB>", "largest image an install takes (default 16384)",
         number(&NodeOptions::max_image_mib, 1ull << 30)},
        {"--max-connections", "<n>", "open connections, streams included; 0 = no limit (default 1024)",
         number(&NodeOptions::max_connections)},
        {"--max-streams", "<n>", "open subscriptions on the node (default 4096)",
         number(&NodeOptions::max_streams)},
        {"--tenant-streams", "<n>", "open subscriptions per tenant (default 256)",
         number(&NodeOptions::tenant_streams)},
        {"--keepalive", "<s>", "a subscription silent this long gets a comment (default 20)",
         number(&NodeOptions::keepalive_s)},
        {"--changes", "<n>", "change-ring entries per open tenant (default 4096)",
         number(&NodeOptions::changes)},
        {"--idempotency-ttl", "<s>", "how long an Idempotency-Key is kept (default 86400)",
         number(&NodeOptions::idempotency_ttl_s)},
        {"--wait-max", "<ms>", "cap on Fenec-Wait (default 30000)", number(&NodeOptions::wait_max_ms)},
        {"--auth-delay", "<ms>", "delay before a 401, doubled per refusal; 0 = off (default 100)",
         number(&NodeOptions::auth_delay_ms)},
        {"--cors", "<origin>", "answer browsers from this origin (default off)",
         opt_text(&NodeOptions::cors)},
        {"--node-name", "<name>", "how the node names itself (default the host name)",
         text(&NodeOptions::node_name)},
        {"--workers", "<n>", "io_uring event loops (default the CPU count)",
         number(&NodeOptions::workers, 256)},
        {"--busy-poll-us", "<us>", "a loop polls this long before it sleeps; 0 = off (default 50)",
         number(&NodeOptions::busy_poll_us, 1000)},
        {"--insecure", nullptr, "allow a non-loopback --listen with an unguarded data plane",
         [](NodeOptions& o, const std::string&) { return o.insecure = true; }},
    };
    return table;
}

}  // namespace

ParsedFlags parse_flags(const std::vector<std::string>& args) {
    ParsedFlags out;
    NodeOptions& o = out.options;
    if (const char* v = std::getenv("FENEC_TOKEN"); v && *v) o.token = v;
    if (const char* v = std::getenv("FENEC_ADMIN_TOKEN"); v && *v) o.admin_token = v;
    if (const char* v = std::getenv("FENEC_REPLICATION_TOKEN"); v && *v) o.replication_token = v;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string name = args[i];
        std::optional<std::string> inline_value;
        if (name == "--help" || name == "-h") {
            out.help = true;
            return out;
        }
        if (size_t eq = name.find('='); eq != std::string::npos && name.starts_with("--")) {
            inline_value = name.substr(eq + 1);
            name = name.substr(0, eq);
        }
        const Flag* flag = nullptr;
        for (const Flag& f : flags()) {
            if (name == f.name) flag = &f;
        }
        if (!flag) {
            out.error = "unknown flag " + name + " (see --help)";
            return out;
        }
        std::string value;
        if (flag->value) {
            if (inline_value) {
                value = *inline_value;
            } else if (i + 1 < args.size()) {
                value = args[++i];
            } else {
                out.error = name + " needs a value " + flag->value;
                return out;
            }
        } else if (inline_value) {
            out.error = name + " takes no value";
            return out;
        }
        if (!flag->set(o, value)) {
            out.error = name + ": cannot use `" + value + "` (" + (flag->value ? flag->value : "") + ")";
            return out;
        }
    }
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
    std::string out = "usage: fenec-node [flags]\n\nServes many tenants, one file each, over HTTP/1.1.\n\n";
    for (const Flag& f : flags()) {
        std::string left = std::string("  ") + f.name + (f.value ? std::string(" ") + f.value : "");
        if (left.size() < 34) left.resize(34, ' ');
        else left += "\n" + std::string(34, ' ');
        out += left + f.help + "\n";
    }
    out += "  --help                          this text\n";
    return out;
}

bool is_loopback(const std::string& listen) {
    std::string host = listen.substr(0, listen.rfind(':'));
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    return host == "localhost" || host == "::1" || host.starts_with("127.");
}

std::string check_options(const NodeOptions& o) {
    if (!is_loopback(o.listen) && !o.token && !o.jwt_secret && !o.jwt_jwks && !o.insecure) {
        return "--listen " + o.listen +
               " is not loopback and neither --token nor a JWT key is set (or pass --insecure)";
    }
    if (o.replication_token && o.sync == NodeOptions::Sync::off) {
        return "--replication-token cannot go with --sync off: followers are sent fsynced blocks only";
    }
    return "";
}

}  // namespace fenec::node
