// server/node/routes.cc: fenec-node's route table (routes.h). Each row's plane is its prefix's
// (`/t/` data, `/_admin/` and `/_metrics` admin, `/_replication/` replication).
#include "server/node/routes.h"

#include <array>

namespace fenec::node {

namespace {

using M = http::Method;
using C = auth::Credential;

constexpr std::array<NodeRoute, 20> table{{
    {RouteId::health, "/_health", {M::get, M::head}, C::none},
    {RouteId::describe, "/t/<tenant>/", {M::get, M::head}, C::data},
    {RouteId::query, "/t/<tenant>/query", {M::post}, C::data},
    {RouteId::batch, "/t/<tenant>/batch", {M::post}, C::data},
    {RouteId::changes, "/t/<tenant>/c/<collection>/changes", {M::get}, C::data},
    {RouteId::collection, "/t/<tenant>/c/<collection>", {M::get, M::head, M::post}, C::data},
    {RouteId::document,
     "/t/<tenant>/c/<collection>/<id>",
     {M::get, M::head, M::put, M::patch, M::del},
     C::data},
    {RouteId::hello, "/_admin/hello", {M::get}, C::admin},
    {RouteId::tenants, "/_admin/tenants", {M::get}, C::admin},
    {RouteId::tenant, "/_admin/tenants/<tenant>", {M::get, M::put, M::del}, C::admin},
    {RouteId::tenant_query, "/_admin/tenants/<tenant>/query", {M::post}, C::admin},
    {RouteId::quota, "/_admin/tenants/<tenant>/quota", {M::get, M::put}, C::admin},
    {RouteId::freeze, "/_admin/tenants/<tenant>/freeze", {M::post}, C::admin},
    {RouteId::thaw, "/_admin/tenants/<tenant>/thaw", {M::post}, C::admin},
    {RouteId::file, "/_admin/tenants/<tenant>/file", {M::get, M::put, M::del}, C::admin},
    {RouteId::follow, "/_admin/tenants/<tenant>/follow", {M::post}, C::admin},
    {RouteId::promote, "/_admin/tenants/<tenant>/promote", {M::post}, C::admin},
    {RouteId::lease, "/_admin/lease", {M::get, M::head, M::post, M::del}, C::admin},
    {RouteId::metrics, "/_metrics", {M::get, M::head}, C::admin},
    {RouteId::feed, "/_replication/tenants/<tenant>", {M::get}, C::replication},
}};

}  // namespace

std::span<const NodeRoute> node_routes() { return table; }

const NodeRoute* find_node_route(std::string_view path) {
    for (const NodeRoute& r : table) {
        if (server::path_matches(r.pattern, path)) return &r;
    }
    return nullptr;
}

auth::Credential plane_of_prefix(std::string_view path) {
    if (path.starts_with("/t/")) return C::data;
    if (path == "/_admin" || path.starts_with("/_admin/") || path == "/_metrics" ||
        path.starts_with("/_metrics/")) {
        return C::admin;
    }
    if (path == "/_replication" || path.starts_with("/_replication/")) return C::replication;
    return C::none;
}

}  // namespace fenec::node
