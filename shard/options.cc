// shard/options.cc: the flag table of router.md §2.2. One table drives both parsing and --help,
// so a flag cannot be read without being documented (the pattern of server/node/options.cc).
#include "shard/options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "server/runtime/loop.h"

namespace fenec::shard {

namespace {

struct Flag {
    const char* name;
    const char* value;  // nullptr: takes no value
    const char* help;
    std::function<bool(RouterOptions&, const std::string&)> set;
};

bool to_u64(const std::string& s, uint64_t& out, uint64_t max = UINT64_MAX) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size() && out <= max;
}

// Decimal seconds at millisecond resolution, greater than zero and at most a day.
std::function<bool(RouterOptions&, const std::string&)> seconds(uint64_t RouterOptions::*field) {
    return [field](RouterOptions& o, const std::string& v) {
        char* end = nullptr;
        const double s = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !std::isfinite(s) || s <= 0 || s > 86'400) return false;
        const auto ms = static_cast<uint64_t>(std::llround(s * 1000));
        if (ms == 0) return false;
        o.*field = ms;
        return true;
    };
}

// Bytes, or a k/m/g suffix (KiB, MiB, GiB).
std::function<bool(RouterOptions&, const std::string&)> size(uint64_t RouterOptions::*field) {
    return [field](RouterOptions& o, const std::string& v) {
        if (v.empty()) return false;
        uint64_t shift = 0;
        std::string digits = v;
        switch (v.back()) {
            case 'k': case 'K': shift = 10; break;
            case 'm': case 'M': shift = 20; break;
            case 'g': case 'G': shift = 30; break;
            default: break;
        }
        if (shift) digits.pop_back();
        uint64_t n = 0;
        if (!to_u64(digits, n, (1ull << 40) >> shift) || n == 0) return false;
        o.*field = n << shift;
        return true;
    };
}

std::function<bool(RouterOptions&, const std::string&)> count(uint32_t RouterOptions::*field,
                                                              uint64_t min, uint64_t max) {
    return [field, min, max](RouterOptions& o, const std::string& v) {
        uint64_t n = 0;
        if (!to_u64(v, n, max) || n < min) return false;
        o.*field = static_cast<uint32_t>(n);
        return true;
    };
}

const std::vector<Flag>& flags() {
    static const std::vector<Flag> table = {
        {"--listen", "<host:port>", "the HTTP listener (default 127.0.0.1:8090)",
         [](RouterOptions& o, const std::string& v) { return !v.empty() && (o.listen = v, true); }},
        {"--token", "<t>", "guards /_shard/ and /_metrics (env FENEC_SHARD_TOKEN)",
         [](RouterOptions& o, const std::string& v) { return !v.empty() && (o.token = v, true); }},
        {"--insecure", nullptr, "allow a non-loopback --listen without --token",
         [](RouterOptions& o, const std::string&) { return o.insecure = true; }},
        {"--directory", "<path>", "the directory file, created if missing (default shard.fenec)",
         [](RouterOptions& o, const std::string& v) { return !v.empty() && (o.directory = v, true); }},
        {"--upstream-timeout", "<s>",
         "bound on connecting to a node and on each read or write towards it (default 60)",
         seconds(&RouterOptions::upstream_timeout_ms)},
        {"--upstream-idle", "<s>", "a pooled connection idle longer is closed, not used (default 30)",
         seconds(&RouterOptions::upstream_idle_ms)},
        {"--upstream-pool", "<n>", "idle connections kept per node address (default 32)",
         count(&RouterOptions::upstream_pool, 0, 4096)},
        {"--max-connections", "<n>", "client connections at once (default 1000)",
         count(&RouterOptions::max_connections, 1, 1'000'000)},
        {"--max-body", "<size>", "request body ceiling, 413 past it (default 64m)",
         size(&RouterOptions::max_body_bytes)},
        {"--idle-timeout", "<s>", "a client connection silent this long is closed (default 60)",
         seconds(&RouterOptions::idle_timeout_ms)},
        {"--audit", "<path>", "append the audit log, JSON lines (default off)",
         [](RouterOptions& o, const std::string& v) { return !v.empty() && (o.audit = v, true); }},
        {"--auth-delay", "<ms>",
         "delay before a 401/403, doubling per refusal from one address within a minute, "
         "capped at 5 s; 0 disables (default 100)",
         [](RouterOptions& o, const std::string& v) {
             return to_u64(v, o.auth_delay_ms, 60'000);
         }},
        {"--fanout-concurrency", "<n>",
         "tenant calls out at once for one POST /_shard/query, 1-256 (default 16)",
         count(&RouterOptions::fanout_concurrency, 1, 256)},
        {"--fanout-max-rows", "<n>", "rows gathered from the tenants of one query (default 100000)",
         [](RouterOptions& o, const std::string& v) {
             return to_u64(v, o.fanout_max_rows, 1ull << 40) && o.fanout_max_rows > 0;
         }},
        {"--fanout-max-bytes", "<size>", "bytes of the tenants' answers to one query (default 64m)",
         size(&RouterOptions::fanout_max_bytes)},
        {"--trace", "<path>", "spans as JSON lines (default off)",
         [](RouterOptions& o, const std::string& v) { return !v.empty() && (o.trace = v, true); }},
        {"--upstream-poll-us", "<us>",
         "a loop awaiting a node's answer polls this long before it sleeps, up to 1000; "
         "0 = off (default 50)",
         [](RouterOptions& o, const std::string& v) {
             uint64_t us = 0;
             if (!to_u64(v, us, server::busy_poll_us_max)) return false;
             o.upstream_poll_us = static_cast<uint32_t>(us);
             return true;
         }},
        {"--workers", "<n>", "io_uring loops for clients, and as many for nodes (default CPUs)",
         count(&RouterOptions::workers, 1, 256)},
        {"--replicas", nullptr,
         "give each tenant on a node in no pair a replica of its own, in its region (default off)",
         [](RouterOptions& o, const std::string&) { return o.replicas = true; }},
    };
    return table;
}

}  // namespace

ParsedFlags parse_flags(const std::vector<std::string>& args) {
    ParsedFlags out;
    RouterOptions& o = out.options;
    if (const char* v = std::getenv("FENEC_SHARD_TOKEN"); v && *v) o.token = v;
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
    return out;
}

std::string flags_help() {
    std::string out =
        "fenec-shard: the router in front of fenec-node processes (router.md)\n\n"
        "usage: fenec-shard [flags]\n\n";
    for (const Flag& f : flags()) {
        std::string left = std::string("  ") + f.name + (f.value ? std::string(" ") + f.value : "");
        if (left.size() < 28) left.resize(28, ' ');
        else left += "  ";
        out += left + f.help + "\n";
    }
    out += "  --help                    this text\n";
    return out;
}

namespace {

bool is_loopback(const std::string& listen) {
    std::string host = listen.substr(0, listen.rfind(':'));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return host == "localhost" || host == "::1" || host.starts_with("127.");
}

}  // namespace

std::string check_options(const RouterOptions& o) {
    if (o.listen.rfind(':') == std::string::npos) {
        return "--listen: `" + o.listen + "` is not host:port";
    }
    if (!o.token && !o.insecure && !is_loopback(o.listen)) {
        return "--listen " + o.listen +
               " is not a loopback address and there is no --token: anyone reaching it could "
               "move or delete every tenant through /_shard/ (set --token, or --insecure)";
    }
    return "";
}

}  // namespace fenec::shard
