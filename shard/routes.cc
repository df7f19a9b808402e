// shard/routes.cc: fenec-shard's route table (routes.h).
#include "shard/routes.h"

#include <array>

#include "shard/router.h"

namespace fenec::shard {

namespace {

using M = http::Method;
using P = ShardPlane;
using Id = ShardRouteId;

constexpr std::array<ShardRoute, 24> table{{
    {Id::tenant, "/t/<tenant>/…", server::MethodSet::any(), P::node},
    {Id::nodes, "/_shard/nodes", {M::get}, P::shard},
    {Id::node, "/_shard/nodes/<node>", {M::get, M::put, M::del}, P::shard},
    {Id::failover, "/_shard/nodes/<node>/failover", {M::post}, P::shard},
    {Id::pairs, "/_shard/pairs", {M::get}, P::shard},
    {Id::tenants, "/_shard/tenants", {M::get}, P::shard},
    {Id::tenant_row, "/_shard/tenants/<tenant>", {M::get, M::put, M::del}, P::shard},
    {Id::move, "/_shard/tenants/<tenant>/move", {M::post}, P::shard},
    {Id::quota, "/_shard/tenants/<tenant>/quota", {M::get, M::put, M::del}, P::shard},
    {Id::replicas, "/_shard/replicas", {M::post}, P::shard},
    {Id::regions, "/_shard/regions", {M::get}, P::shard},
    {Id::region, "/_shard/regions/<region>", {M::put, M::del}, P::shard},
    {Id::adopt, "/_shard/adopt", {M::post}, P::shard},
    {Id::handoff, "/_shard/handoff/<tenant>/<step>", {M::post, M::put, M::del}, P::shard},
    {Id::query, "/_shard/query", {M::post}, P::shard},
    {Id::shard_status, "/_shard/status", {M::get}, P::shard},
    {Id::metrics, "/_metrics", {M::get, M::head}, P::shard},
    {Id::health, "/_health", {M::get, M::head}, P::none},
    {Id::feed, "/_replication", {M::get}, P::replication},
    {Id::tokens, "/_replication/tokens", {M::get}, P::replication},
    {Id::status, "/_replication/status", {M::get}, P::replication},
    {Id::promote, "/_replication/promote", {M::post}, P::replication},
    {Id::console, "/_console", {M::get, M::head}, P::none},
    {Id::console_asset, "/_console/<asset>", {M::get, M::head}, P::none},
}};

}  // namespace

std::span<const ShardRoute> shard_routes() { return table; }

const ShardRoute* find_shard_route(std::string_view path) {
    for (const ShardRoute& r : table) {
        if (server::path_matches(r.pattern, path)) return &r;
    }
    return nullptr;
}

std::optional<http::Response> method_refusal(const http::RequestHead& head) {
    const ShardRoute* r = find_shard_route(head.path);
    if (!r || r->methods.has(head.method)) return std::nullopt;
    http::Response out = Router::error(405, head.path + " takes " + r->methods.allow());
    out.header("Allow", r->methods.allow());
    return out;
}

}  // namespace fenec::shard
