// shard/adopt.h: a region moved out of the global directory into its own (router.md §11.9).
//
// `PUT /_shard/regions/<r>` on the global router while the global directory still keeps r's
// nodes: once r's first router has answered `GET /_health` as the primary of scope r
// (shard/regions.h), the global router relays `POST /_shard/adopt` to it with r's node, pair,
// replica and tenant rows, the nodes' tokens with them (the routers share a private network);
// that router records them in one synced block and answers; the global router then, in one
// synced block, writes r's `regions` row, rewrites those tenants to `@r` and removes r's nodes
// with their pairs and replicas; it stops granting them and releases their leases (`DELETE
// /_admin/lease {"authority","term"}`), so the region's router's first grants are taken at once
// rather than after a lapse.
//
// Refused before anything changes: a tenant of r that is not `active` (a move, create or delete
// in progress: 409 naming it), one held by another operation (409), a pair or replica that
// crosses into another region (409: copies stay in their tenant's region), the region's router
// unreachable (503 `Retry-After: 5`) or refusing (its status and error). The adoption is
// idempotent on the region's side (each row replaces one of its name), so a PUT whose answer
// was lost is asked again.
//
// `POST /_shard/adopt` is a relay's only: a region's router takes it with a valid `Fenec-Relay`
// mark (or, among routers without --token, `Via: … fenec-shard`), else 403; for its own scope
// only (409). Both sides run on an API worker: they block on a router, the nodes and fsync.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/runtime/http_server.h"
#include "shard/directory.h"
#include "shard/router.h"

namespace fenec::shard {

// The body of `POST /_shard/adopt`: {"region", "nodes":[{"name","addr","zone","lease",
// "token"|"token_env"|"token_file"}], "pairs":[{"node","standby"}], "replicas":[{"tenant",
// "node"}], "tenants":[{"name","node","state","moving_to","lineage","forked","failed_from",
// "quota"}]}. A node's `token` is written only when it names neither token_env nor token_file.
std::string adopt_body(const RegionRows& rows);

// The body read back: `rows`, or `error` (a 400's message naming the field). Every name is
// checked as the directory's names are, each node put in the body's region, and every pair,
// replica and tenant must name nodes the body carries.
struct ParsedRegionRows {
    RegionRows rows;
    std::string error;
};
ParsedRegionRows parse_adopt_body(std::string_view body);

// The global router's part, for `PUT /_shard/regions/<region>` (`request`) with `routers` (the
// first one checked already), under the region's claim: the answer to give.
http::Response move_region_out(Router& router, const server::Request& request,
                               const std::string& region,
                               const std::vector<std::string>& routers,
                               const Router::Answering& a);

// `POST /_shard/adopt`, the region's router's part.
http::Response serve_adopt(Router& router, const server::Request& request,
                           const Router::Answering& a);

}  // namespace fenec::shard
