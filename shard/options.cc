// shard/options.cc: the flag table of router.md §2.2, read by the runtime's one flag reader
// (server/runtime/flags.h), as the node's is. One table drives both parsing and --help, so a flag
// cannot be read without being documented.
#include "shard/options.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <utility>

#include "server/runtime/flags.h"
#include "server/runtime/loop.h"
#include "shard/directory.h"

namespace fenec::shard {

namespace {

namespace flags = server::flags;

// One table for reading and --help; its setters write `o`.
std::vector<flags::Flag> flag_table(RouterOptions& o) {
    return {
        {"--listen", "<host:port>", "the HTTP listener (default 127.0.0.1:8090)",
         flags::text(o.listen)},
        {"--token", "<t>", "guards /_shard/ and /_metrics (env FENEC_SHARD_TOKEN)",
         flags::text(o.token)},
        {"--insecure", nullptr, "allow a non-loopback --listen without --token",
         flags::on(o.insecure)},
        {"--directory", "<path>", "the directory file, created if missing (default shard.fenec)",
         flags::text(o.directory)},
        {"--upstream-timeout", "<s>",
         "bound on connecting to a node and on each read or write towards it (default 60)",
         flags::seconds_as_ms(o.upstream_timeout_ms)},
        {"--upstream-idle", "<s>",
         "a pooled connection idle longer is closed, not used (default 30)",
         flags::seconds_as_ms(o.upstream_idle_ms)},
        {"--upstream-pool", "<n>", "idle connections kept per node address (default 32)",
         flags::number(o.upstream_pool, 4096, 0)},
        {"--max-connections", "<n>", "client connections at once (default 1000)",
         flags::number(o.max_connections, 1'000'000, 1)},
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
         "(default 64)",
         flags::number(o.max_connections_per_address, UINT32_MAX)},
        {"--reserved-connections", "<pct>",
         "share of --max-connections that connections yet to send a whole request may not take, "
         "0-90 (default 25)",
         flags::number(o.reserved_connections_pct, server::connections_reserved_pct_max)},
        {"--max-body", "<MiB>", "largest request body, 413 past it (default 64)",
         flags::number(o.max_body_mib, 1ull << 20)},
        {"--idle-timeout", "<s>", "a client connection silent this long is closed (default 60)",
         flags::seconds_as_ms(o.idle_timeout_ms)},
        {"--audit", "<path>", "append the audit log, JSON lines (default off)",
         flags::text(o.audit)},
        {"--access-log", "<path>", "a JSON line per request answered; - for stderr (default off)",
         flags::text(o.access_log)},
        {"--auth-delay", "<ms>",
         "delay before a 401/403, doubling per refusal from one address within a minute, "
         "capped at 5 s; 0 disables (default 100)",
         flags::number(o.auth_delay_ms, 60'000)},
        {"--fanout-concurrency", "<n>",
         "tenant calls out at once for one POST /_shard/query, 1-256 (default 16)",
         flags::number(o.fanout_concurrency, 256, 1)},
        {"--fanout-max-rows", "<n>", "rows gathered from the tenants of one query (default 100000)",
         flags::number(o.fanout_max_rows, 1ull << 40, 1)},
        {"--fanout-max-bytes", "<size>", "bytes of the tenants' answers to one query (default 64m)",
         flags::size_bytes(o.fanout_max_bytes)},
        {"--trace", "<path>", "spans as JSON lines (default off)", flags::text(o.trace)},
        {"--upstream-poll-us", "<us>",
         "a loop awaiting a node's answer polls this long before it sleeps, up to 1000; "
         "0 = off (default 50)",
         flags::number(o.upstream_poll_us, server::busy_poll_us_max)},
        {"--workers", "<n>", "io_uring loops for clients, and as many for nodes (default CPUs)",
         flags::number(o.workers, 256, 1)},
        {"--replication-token", "<t>",
         "serve the directory at /_replication and present it when following (default none)",
         flags::text(o.replication_token)},
        {"--replica-of", "<url>",
         "be a standby of the router at http://host:port, following its directory (default "
         "none)",
         flags::text(o.replica_of)},
        {"--promote", nullptr,
         "open a standby's directory file as a primary, forking its history (default off)",
         flags::on(o.promote)},
        {"--replication-buffer", "<size>",
         "directory changes kept in memory for standbys that fall behind (default 8m)",
         flags::size_bytes(o.replication_buffer_bytes)},
        {"--region", "<r>",
         "keep region r's own directory, following the global one from --global (default none)",
         flags::text(o.region)},
        {"--global", "<url>[,<url>...]",
         "the global router, then its standbys: where a region's router follows its copy of the "
         "global directory; required with --region (default none)",
         flags::text(o.global)},
        {"--replicas", nullptr,
         "give each tenant on a node in no pair a replica of its own, in its region (default off)",
         flags::on(o.replicas)},
        {"--auto-failover", "<s>",
         "lease each node its tenants for s seconds (0.1 to 3600), renew every third, fail a node "
         "over once its lease has lapsed; nodes need --lease (default off)",
         flags::seconds_as_ms(o.auto_failover_ms)},
        {"--default-region", "<r>",
         "the region of a create that names neither region nor node (default none: the node "
         "with the fewest bytes, whatever its region)",
         flags::text(o.default_region)},
    };
}

}  // namespace

ParsedFlags parse_flags(const std::vector<std::string>& args) {
    RouterOptions defaults;
    if (const char* v = std::getenv("FENEC_SHARD_TOKEN"); v && *v) defaults.token = v;
    ParsedFlags parsed = flags::parse(std::move(defaults), flag_table, args);
    // §2.2: an empty --replication-token counts as absent.
    if (parsed.options.replication_token && parsed.options.replication_token->empty()) {
        parsed.options.replication_token.reset();
    }
    return parsed;
}

std::string flags_help() {
    RouterOptions scratch;
    return flags::help_text(
        "fenec-shard: the router in front of fenec-node processes (docs/http-router.md)\n\n"
        "usage: fenec-shard [flags]\n\n",
        flag_table(scratch), 28);
}

std::string replica_addr(std::string_view url) {
    if (!url.starts_with("http://")) return "";
    std::string_view rest = url.substr(7);
    if (rest.ends_with("/")) rest.remove_suffix(1);
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || rest.find('/') != std::string_view::npos) {
        return "";
    }
    unsigned port = 0;
    auto [end, ec] = std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), port);
    if (ec != std::errc() || end != rest.data() + rest.size() || port == 0 || port > 65535) {
        return "";
    }
    return std::string(rest);
}

std::vector<std::string> global_urls(std::string_view list) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at <= list.size()) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) out.emplace_back(list.substr(at, comma - at));
        at = comma + 1;
    }
    return out;
}

std::string scope_of(const RouterOptions& options) {
    return options.region ? *options.region : std::string("global");
}

namespace {

// §11.3's two flags, checked together. "" when fine.
std::string check_region(const RouterOptions& o) {
    if (o.region && !o.global) {
        return "--region needs --global: a region's router follows the global directory from "
               "the global router";
    }
    if (o.global && !o.region) {
        return "--global without --region: only a region's router follows the global directory "
               "(the global router is the one started without --region)";
    }
    if (!o.region) return "";
    if (!valid_name(*o.region)) {
        return "--region: `" + *o.region +
               "` is not a region name ([a-z0-9_-]{1,64}; the unnamed region keeps no directory "
               "of its own)";
    }
    if (*o.region == "global") {
        return "--region: `global` names the global directory's scope, not a region";
    }
    const std::vector<std::string> urls = global_urls(*o.global);
    if (urls.empty()) return "--global: no URL given";
    for (const std::string& url : urls) {
        if (replica_addr(url).empty()) return "--global: `" + url + "` is not http://host:port";
    }
    if (!o.replication_token) {
        return "--region needs --replication-token: the global directory's feed is guarded by it";
    }
    return "";
}

}  // namespace

std::string check_options(const RouterOptions& o) {
    if (o.listen.rfind(':') == std::string::npos) {
        return "--listen: `" + o.listen + "` is not host:port";
    }
    if (!o.token && !o.insecure && !flags::is_loopback(o.listen)) {
        return "--listen " + o.listen +
               " is not a loopback address and there is no --token: anyone reaching it could "
               "move or delete every tenant through /_shard/ (set --token, or --insecure)";
    }
    if (o.auto_failover_ms != 0 && (o.auto_failover_ms < 100 || o.auto_failover_ms > 3'600'000)) {
        return "--auto-failover: a lease runs 0.1 to 3600 seconds";
    }
    if (o.replica_of && !o.replication_token) {
        return "--replica-of needs --replication-token: the primary's feed is guarded by it";
    }
    if (o.replica_of && o.promote) {
        return "--replica-of with --promote: a router either follows its primary or is promoted "
               "over it; start it with one of the two";
    }
    if (o.replica_of && replica_addr(*o.replica_of).empty()) {
        return "--replica-of: `" + *o.replica_of + "` is not http://host:port";
    }
    if (o.default_region && !valid_name(*o.default_region)) {
        return "--default-region: `" + *o.default_region + "` is not a region's name, " +
               "[a-z0-9_-]{1,64}";
    }
    if (o.default_region && o.region) {
        return "--default-region is the global router's: a region's router (--region " +
               *o.region + ") places every create in its own region";
    }
    return check_region(o);
}

}  // namespace fenec::shard
