// shard/whose.cc: §11.4's table (shard/whose.h) as rows, and the one function that reads it.
#include "shard/whose.h"

#include <simdjson.h>

#include "json/writer.h"
#include "shard/router.h"

namespace fenec::shard {

namespace {

// Where a row sends a change; resolved by whose_change against the directories and the body.
enum class Level : uint8_t {
    here,
    global,                 // the global router
    global_unless_relayed,  // the global router; relayed from it, the second half of its change
    named_region,           // the region the body's `region` names, when not this router's
    tenant_home,            // the tenant's home region (`@<r>`) on the global router
    move_across,            // a move: across regions the global router's, within one its region's
};

struct Row {
    ShardRouteId route;
    http::Method method;
    Level on_region;  // on a region's router
    Level on_global;  // on the global router
};

constexpr Row whose_rows[] = {
    {ShardRouteId::node, http::Method::put, Level::named_region, Level::named_region},
    {ShardRouteId::quota, http::Method::put, Level::here, Level::tenant_home},
    {ShardRouteId::quota, http::Method::del, Level::here, Level::tenant_home},
    {ShardRouteId::quota, http::Method::get, Level::here, Level::tenant_home},
    {ShardRouteId::move, http::Method::post, Level::move_across, Level::move_across},
    {ShardRouteId::replicas, http::Method::post, Level::here, Level::named_region},
    {ShardRouteId::tenant_row, http::Method::put, Level::global_unless_relayed, Level::here},
    {ShardRouteId::tenant_row, http::Method::del, Level::global_unless_relayed, Level::here},
    {ShardRouteId::region, http::Method::put, Level::global, Level::here},
    {ShardRouteId::region, http::Method::del, Level::global, Level::here},
};

Whose to_global(const ChangeContext& at) {
    return Whose{.here = false, .to = RelayTo{"global", at.global_routers}};
}

// Region `r`'s routers when it keeps its own directory (a `regions` row of the global directory:
// this router's own, or its copy's).
std::optional<RelayTo> keeping(const ChangeContext& at, std::string_view r) {
    const DirectoryMaps& global = at.global_copy ? *at.global_copy : at.own;
    auto it = global.regions.find(r);
    if (it == global.regions.end()) return std::nullopt;
    return RelayTo{std::string(r), it->second};
}

Whose to_region(RelayTo to) { return Whose{.here = false, .to = std::move(to)}; }

// The tenant's home region on this (the global) directory, or nullopt.
std::optional<std::string> home_of(const ChangeContext& at, std::string_view tenant) {
    auto it = at.own.tenants.find(tenant);
    if (it == at.own.tenants.end()) return std::nullopt;
    if (auto home = home_region(it->second.node)) return std::string(*home);
    return std::nullopt;
}

}  // namespace

std::optional<std::string> region_named(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::object o;
    std::string_view r;
    if (parser.parse(body.data(), body.size()).get(doc) || doc.get_object().get(o) ||
        o["region"].get_string().get(r)) {
        return std::nullopt;
    }
    return std::string(r);
}

Whose whose_change(const ChangeContext& at, const ChangeAsked& change) {
    const bool on_region = at.global_copy != nullptr;
    const std::string& scope = at.own.scope;
    for (const Row& row : whose_rows) {
        if (row.route != change.route || row.method != change.method) continue;
        switch (on_region ? row.on_region : row.on_global) {
            case Level::here:
                return {};
            case Level::global:
                return to_global(at);
            case Level::global_unless_relayed:
                return change.relayed ? Whose{} : to_global(at);
            case Level::named_region: {
                const std::optional<std::string> r = region_named(change.body);
                if (!r || *r == scope) return {};
                // A node this directory keeps, named into another region: its change is here,
                // where the API refuses it (a node is in one directory; relayed, the other
                // region's router added it as new, and the node was in two).
                if (change.route == ShardRouteId::node && at.own.nodes.contains(change.name)) {
                    return {};
                }
                if (std::optional<RelayTo> to = keeping(at, *r)) return to_region(std::move(*to));
                // Kept by the global directory: the global router's, or, there, its own.
                return on_region ? to_global(at) : Whose{};
            }
            case Level::tenant_home: {
                const std::optional<std::string> home = home_of(at, change.name);
                if (!home) return {};
                if (std::optional<RelayTo> to = keeping(at, *home)) {
                    return to_region(std::move(*to));
                }
                return {};
            }
            case Level::move_across: {
                const std::optional<std::string> r = region_named(change.body);
                if (on_region) {
                    if (r && *r != scope) return to_global(at);
                    // A tenant this directory does not place (another region's, or none): the
                    // global router knows its home, and moves it there or across.
                    const auto t = at.own.tenants.find(change.name);
                    if (t == at.own.tenants.end() || home_region(t->second.node)) {
                        return to_global(at);
                    }
                    return {};
                }
                const std::optional<std::string> home = home_of(at, change.name);
                if (!home || (r && *r != *home)) return {};  // across regions: the global's
                if (std::optional<RelayTo> to = keeping(at, *home)) {
                    return to_region(std::move(*to));
                }
                return {};
            }
        }
    }
    return {};
}

http::Response refused_relayed(const Whose& whose) {
    const std::string owner = whose.to.routers.empty() ? std::string() : whose.to.routers.front();
    const std::string who = whose.to.scope == "global" ? std::string("the global router")
                                                       : "region `" + whose.to.scope + "`'s router";
    http::Response r =
        Router::error(409, "this change was relayed here, and it is " + who + "'s (" +
                               (owner.empty() ? std::string("none recorded") : owner) +
                               "): a relayed change goes no further; send it there");
    r.body.pop_back();
    for (const auto& [key, value] :
         {std::pair{"owner", &owner}, std::pair{"region", &whose.to.scope}}) {
        r.body += std::string(",\"") + key + "\":";
        json::Writer w(r.body);  // one a value: a writer puts a comma between its own values
        w.string(*value);
    }
    r.body += "}";
    return r;
}

}  // namespace fenec::shard
