// shard/regions.h: the global directory's `regions` collection through the API (router.md §11.3,
// §6.2): `GET /_shard/regions` (each region named by a `regions` row or by a node, with its
// routers, nodes and tenants), `PUT /_shard/regions/<r> {"routers":[…]}` and `DELETE
// /_shard/regions/<r>`, changes the global router's alone.
//
// Rules: the unnamed region keeps no directory of its own (400); the first router named must
// answer `GET /_health` as the primary keeping scope `r` before the row is written (409 when it
// answers otherwise, 502 when it does not answer); a region is removed only once no node or
// tenant is at home there (409). A PUT while the global directory still keeps r's nodes moves
// the region out to its router (shard/adopt.h). A change is claimed as `@<r>`, which no tenant can be named, so
// two changes of one region do not cross. On an API worker: the health call blocks.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/runtime/http_server.h"
#include "shard/router.h"

namespace fenec::shard {

// Routers a region's row may name: its router and a few standbys; more is a mistake.
inline constexpr size_t region_routers_max = 16;

// The body of `PUT /_shard/regions/<r>`, `{"routers":["http://host:port",…]}`: 1 to
// region_routers_max URLs, each once and each as replica_addr reads one, and no other member.
// `urls` in the order given, or `error` (a 400's message, naming the field) and no URL.
struct RegionRouters {
    std::vector<std::string> urls;
    std::string error;
};
RegionRouters parse_region_routers(std::string_view body);

// What a router says of itself at `GET /_health` (router.md §3): its role and scope, or nullopt
// when the answer is not a JSON object with both as strings.
struct RouterSelf {
    std::string role;
    std::string scope;
};
std::optional<RouterSelf> parse_router_health(std::string_view body);

// `GET /_shard/regions` (region ""), `PUT` and `DELETE /_shard/regions/<region>`; the method was
// checked against the route's row.
http::Response serve_regions(Router& router, const server::Request& request,
                             const Router::Answering& a, const std::string& region);

// `PUT /_shard/regions/` names the unnamed region, which keeps no directory of its own: its 400.
http::Response unnamed_region_refused();

}  // namespace fenec::shard
