// server/node/options.h: fenec-node's flags (node-http.md §1.1), read left to right by the
// runtime's flag reader (server/runtime/flags.h). An unknown flag, a missing value or one that does
// not parse is refused naming the flag (exit 2); `--help` prints every flag with its default. The
// checks of the whole set (tokens equal, a public listener unguarded, ...) are check_options'.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/runtime/flags.h"

namespace fenec::node {

struct NodeOptions {
    std::string listen = "127.0.0.1:8081";
    std::string data_dir = "./fenec-data";
    std::optional<std::string> token;              // env FENEC_TOKEN
    std::optional<std::string> admin_token;        // env FENEC_ADMIN_TOKEN
    std::optional<std::string> replication_token;  // env FENEC_REPLICATION_TOKEN
    std::optional<std::string> jwt_secret;
    std::optional<std::string> jwt_jwks;
    bool lease = false;
    uint64_t max_memory_mib = 0;  // 0: off
    uint64_t huge_pool_mib = 256;  // --huge-pool: freed huge pages kept (engine/huge_pages.h)
    uint32_t idle_timeout_s = 60;
    uint32_t close_idle_s = 300;
    // --sync: always (every_block), <ms> (interval), off (at_close)
    enum class Sync : uint8_t { always, interval, off } sync = Sync::always;
    uint32_t sync_ms = 0;
    // --sync-scope: what one sync round covers under --sync always (engine/syncer.h): file, an
    // fdatasync of one tenant's file on one of engine::limits::sync_threads threads; fs, every
    // tenant with writes waiting, one syncfs of the data directory's file system on one thread.
    enum class SyncScope : uint8_t { file, fs } sync_scope = SyncScope::file;
    std::optional<uint32_t> slow_ms;
    std::optional<std::string> audit;
    std::optional<std::string> access_log;  // a JSON line per request answered (obs/access.h)
    std::optional<std::string> trace;  // spans as JSON lines (§13.5)
    double trace_sample = 0;           // 0..1: requests traced without a sampled traceparent
    uint64_t max_body_mib = 64;
    uint64_t max_image_mib = 16384;
    uint32_t max_connections = 1024;
    // Slow clients (node-http.md §2.1, server::ServerOptions): a head's deadline after its first
    // byte, a body's rate floor, connections per client address, the share of --max-connections
    // kept for connections that have sent a whole request.
    uint32_t head_timeout_ms = 5'000;
    uint32_t body_rate_min = 4'096;  // bytes/s
    uint32_t max_connections_per_address = 0;  // off: a router in front is one address
    uint32_t reserved_connections_pct = 25;
    uint32_t max_streams = 4096;
    uint32_t tenant_streams = 256;
    uint32_t keepalive_s = 20;
    uint32_t changes = 4096;
    uint32_t idempotency_ttl_s = 86400;
    uint32_t wait_max_ms = 30000;
    // A run of statements' budget (issue 17; ql/budget.h): rows visited, and time from its start.
    uint64_t statement_rows = 10'000'000;  // --statement-rows; 0: off
    uint32_t statement_ms = 10'000;        // --statement-ms; 0: off
    uint32_t auth_delay_ms = 100;
    std::optional<std::string> cors;
    std::string node_name;       // default: the host name
    uint32_t workers = 0;        // io_uring loops; 0: the CPU count
    uint32_t busy_poll_us = 50;  // a loop polls this long before it sleeps (ServerOptions)
    bool insecure = false;
    uint64_t feed_buffer_mib = 64;     // --feed-buffer: the replication feed per tenant (§10.3)
    uint32_t upstream_timeout_s = 10;  // --upstream-timeout: a follower's connect and read bound
    uint32_t replica_wait_ms = 50;     // --replica-wait: an answer waits for the streams (§5.8)
    double compact_dead = 0.5;         // --compact-dead: background compaction's dead share; 0 off
    uint64_t compact_min_mib = 1;      // --compact-min: files smaller are never compacted by it
};

using ParsedFlags = server::flags::Parsed<NodeOptions>;

// Reads argv (argv[0] skipped) and the three FENEC_*TOKEN variables (a flag wins).
ParsedFlags parse_flags(const std::vector<std::string>& args);

// Every flag with its default, for --help.
std::string flags_help();

// The start-up refusals of §1.1 that need the whole set: a non-loopback --listen with no data
// credential (unless --insecure), two equal tokens. "" when fine.
std::string check_options(const NodeOptions& options);

}  // namespace fenec::node
