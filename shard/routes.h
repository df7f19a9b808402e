// shard/routes.h: every route fenec-shard serves, as data: its path pattern, the methods it takes
// and the credential that guards it. The router finds a request's row here (route_of in
// router.cc) to pick its handler and its credential; a method the row does not take is answered
// 405 with the row's `Allow` (method_refusal); a path no row names is 404. test/routes/ checks
// that docs/http-router.md documents exactly these rows.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "server/runtime/http.h"
#include "server/runtime/route_table.h"

namespace fenec::shard {

enum class ShardRouteId : uint8_t {
    tenant,  // /t/<tenant>/…, forwarded
    nodes,
    node,
    failover,
    pairs,
    tenants,
    tenant_row,
    move,
    quota,
    replicas,
    regions,  // GET /_shard/regions (shard/regions.h)
    region,   // PUT, DELETE /_shard/regions/<region>
    adopt,    // POST /_shard/adopt, relayed (shard/adopt.h)
    handoff,  // /_shard/handoff/<tenant>/<step>, relay-only (shard/handoff.h)
    query,
    metrics,
    health,
    feed,
    tokens,
    status,
    promote,
    shard_status,   // GET /_shard/status (shard/status.h)
    console,        // the operator console's page (shard/console.h)
    console_asset,  // its script, stylesheet and icon
};

// Who judges a route's credential.
enum class ShardPlane : uint8_t {
    none,         // `/_health`, the console's files (they carry no data): no credential
    node,         // `/t/`: the tenant's node, which the request is forwarded to with its own
    shard,        // `/_shard/`, `/_metrics`: the router's --token
    replication,  // `/_replication`: the router's --replication-token
};

struct ShardRoute {
    ShardRouteId id;
    std::string_view pattern;  // server::path_matches' patterns
    server::MethodSet methods;
    ShardPlane plane;
};

// The table, in match order.
std::span<const ShardRoute> shard_routes();

// The row `path` (no query) is, or nullptr.
const ShardRoute* find_shard_route(std::string_view path);

// The 405 for a request whose row does not take its method, its message and `Allow` from the
// row; nullopt when it does, or when no row names the path.
std::optional<http::Response> method_refusal(const http::RequestHead& head);

}  // namespace fenec::shard
