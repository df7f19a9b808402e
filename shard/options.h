// shard/options.h: fenec-shard's flags (router.md §2.2), read left to right. An unknown flag, a
// missing value or one that does not parse is refused naming the flag (exit 2); `--help` prints
// every flag with its default. The checks of the whole set (a public listener without --token,
// a zero timeout, an --auto-failover out of range, a standby without the replication token) are
// check_options'. The regions' flags: --default-region (§6.4), and a region's router (--region,
// --global: §11.3), whose work is shard/regions.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/runtime/flags.h"

namespace fenec::shard {

struct RouterOptions {
    std::string listen = "127.0.0.1:8090";
    std::optional<std::string> token;  // env FENEC_SHARD_TOKEN; guards /_shard/ and /_metrics
    bool insecure = false;
    std::string directory = "shard.fenec";
    uint64_t upstream_timeout_ms = 60'000;
    uint64_t upstream_idle_ms = 30'000;
    uint32_t upstream_pool = 32;  // idle connections kept per node address
    uint32_t max_connections = 1000;
    // Slow clients (router.md §2.2, server::ServerOptions): a head's deadline after its first
    // byte, a body's rate floor, connections per client address, the share of --max-connections
    // kept for connections that have sent a whole request.
    uint32_t head_timeout_ms = 5'000;
    uint32_t body_rate_min = 4'096;  // bytes/s
    uint32_t max_connections_per_address = 64;
    uint32_t reserved_connections_pct = 25;
    // A request body's ceiling in MiB, the unit of the node's --max-body (413 past it).
    uint64_t max_body_mib = 64;
    uint64_t idle_timeout_ms = 60'000;
    std::optional<std::string> audit;
    std::optional<std::string> access_log;  // a JSON line per request answered (obs/access.h)
    uint32_t workers = 0;  // io_uring loops for clients (and as many for nodes); 0: CPU count
    // A loop that has sent a request to a node polls its ring this long for the answer before
    // it sleeps (server::Loop::poll_next_turn): a node's answer then usually lands while the
    // thread still runs, and the wake-up of a sleeping thread is saved (`make shard-bench`).
    // Only while an answer is awaited, never to wait for clients; the poll yields the CPU every
    // few microseconds, as the node's --busy-poll-us does. On by default: with the machine not
    // saturated it took the router's added p50 from 1.39–1.54 loopback round trips to 0.52–0.86
    // (five runs each, in turns). On a machine whose cores are all taken (2 vCPUs, the node,
    // the client and builds beside the router) the spin can delay the node it waits for (p50
    // 58 → 100 µs as often as 61 → 58): set 0 there, to sleep at once.
    uint32_t upstream_poll_us = 50;
    uint64_t auth_delay_ms = 100;        // before a refusal, doubling per address (§3); 0: none
    uint32_t fanout_concurrency = 16;    // tenant calls out at once for one query (§12.4)
    uint64_t fanout_max_rows = 100'000;  // rows gathered for one query (§12.7)
    uint64_t fanout_max_bytes = 64ull << 20;  // bytes of the tenants' answers for one query
    std::optional<std::string> trace;         // spans as JSON lines (§16), like the node's
    bool replicas = false;  // --replicas: a replica of its own for a tenant in no pair (§8.2)
    // --auto-failover <s>: lease each node its tenants for this long, renew every third, fail a
    // node over once its lease has certainly lapsed (§9); 0: off. 100 ms to an hour.
    uint64_t auto_failover_ms = 0;
    // Standby routers (§10): the token that guards /_replication and is presented when following
    // (empty counts as absent); the primary followed (http://host:port); a standby's file opened
    // as a primary; the directory's changes kept in memory for followers that fall behind.
    std::optional<std::string> replication_token;
    std::optional<std::string> replica_of;
    bool promote = false;
    uint64_t replication_buffer_bytes = 8ull << 20;
    // --default-region <r> (§6.4 step 2, seed 002): the region of a create that names neither
    // region nor node; none: the node with the fewest bytes whatever its region.
    std::optional<std::string> default_region;
    // Two levels (§11.3): the region whose own directory this router keeps (none: the global
    // directory), and the global router then its standbys, where the region's router follows its
    // copy of the global directory: `http://host:port` URLs joined by commas.
    std::optional<std::string> region;
    std::optional<std::string> global;
};

using ParsedFlags = server::flags::Parsed<RouterOptions>;

// Reads argv (argv[0] skipped) and FENEC_SHARD_TOKEN (the flag wins).
ParsedFlags parse_flags(const std::vector<std::string>& args);

// Every flag with its default, for --help.
std::string flags_help();

// The start-up refusals of §2.2 that need the whole set: a non-loopback --listen without --token
// unless --insecure; --replica-of without --replication-token, with --promote, or not
// http://host:port; a --default-region that is not a region's name, or given to a region's router;
// --region without --global (or the reverse), a --region that is no region name, a --global URL
// that is not http://host:port, --region without --replication-token (the global directory's
// feed is guarded by it). "" when fine.
std::string check_options(const RouterOptions& options);

// --replica-of's `http://host:port` (no path) as host:port; "" when it is not that.
std::string replica_addr(std::string_view url);

// --global's URLs in the order given (empty items dropped), each as written.
std::vector<std::string> global_urls(std::string_view list);

// The directory's scope this router keeps (§4.1): its --region, else "global".
std::string scope_of(const RouterOptions& options);

}  // namespace fenec::shard
