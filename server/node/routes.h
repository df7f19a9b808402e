// server/node/routes.h: every route fenec-node serves, as data: its path pattern, the methods it
// takes and the plane (the credential) it belongs to. Node::dispatch finds a request's row here
// and hands it to the row's handler; a method the row does not take is answered 405 with the
// row's `Allow`; a path no row names is 404. test/routes/ checks that docs/http-node.md documents
// exactly these rows.
#pragma once

#include <span>
#include <string_view>

#include "server/node/auth.h"
#include "server/runtime/route_table.h"

namespace fenec::node {

struct Call;
class Node;

enum class RouteId : uint8_t {
    health,
    describe,
    query,
    batch,
    changes,
    collection,
    document,
    hello,
    tenants,
    tenant,
    tenant_query,
    quota,
    freeze,
    thaw,
    file,
    follow,
    promote,
    lease,
    metrics,
    feed,
};

struct NodeRoute {
    RouteId id;
    std::string_view pattern;  // server::path_matches' patterns
    server::MethodSet methods;
    auth::Credential plane;  // none: no credential asked (`/_health`)
};

// The table, in match order (a literal before a wildcard in the same place).
std::span<const NodeRoute> node_routes();

// The row `path` (no query) is, or nullptr.
const NodeRoute* find_node_route(std::string_view path);

// node.cc: the row a call's path is (nullptr: a path no row names); whether that row takes the
// call's method; and the 405 for one it does not, its message and `Allow` from the row.
const NodeRoute* route_of(const Call& call);
bool route_takes(const Call& call);
http::Response method_refusal(Node& node, const Call& call);

// The plane a path under no row is judged on before its 404 (its first segment's), so an unknown
// path under `/_admin/` asks the admin credential as a known one does: none outside the planes.
auth::Credential plane_of_prefix(std::string_view path);

}  // namespace fenec::node
