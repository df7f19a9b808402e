// shard/regions.cc: the `regions` collection through the API (shard/regions.h, router.md §11.3).
// The list is read from this router's directory and, on a region's router, from its copy of the
// global one (shard/global_copy.h); a change is the global router's, checked against what the
// region's first router says of itself at `GET /_health` before it is written, synced.
#include "shard/regions.h"

#include <simdjson.h>

#include <map>
#include <set>

#include "json/writer.h"
#include "server/runtime/client.h"
#include "shard/adopt.h"
#include "shard/global_copy.h"
#include "shard/relay.h"

namespace fenec::shard {

namespace {

using Response = http::Response;

struct RegionView {
    std::optional<std::vector<std::string>> routers;  // none: no `regions` row
    size_t nodes = 0;
    size_t tenants = 0;
};

// Each region of `maps` counted into `out`. `skip_home` leaves out the `@<r>` rows of the region
// whose own directory is counted too (a region's router's own), so no tenant counts twice.
void count(const DirectoryMaps& maps, std::string_view skip_home,
           std::map<std::string, RegionView>& out) {
    for (const auto& [name, routers] : maps.regions) out[name].routers = routers;
    for (const auto& [name, n] : maps.nodes) out[n.region].nodes += 1;
    for (const auto& [name, t] : maps.tenants) {
        std::optional<std::string_view> home = home_region(t.node);
        if (home && *home == skip_home) continue;
        out[maps.region_of(t)].tenants += 1;
    }
}

Response list(Router& router) {
    std::map<std::string, RegionView> regions;
    auto own = router.directory().maps();
    count(*own, "", regions);
    if (const GlobalCopy* global = router.global_copy()) {
        count(*global->maps(), own->scope, regions);
    }
    Response r;
    json::Writer w(r.body);
    w.begin_array();
    for (const auto& [name, v] : regions) {
        w.begin_object();
        w.key("name");
        w.string(name);
        w.key("routers");
        if (v.routers) {
            w.begin_array();
            for (const std::string& url : *v.routers) w.string(url);
            w.end_array();
        } else {
            w.null();
        }
        w.key("nodes");
        w.uint64(v.nodes);
        w.key("tenants");
        w.uint64(v.tenants);
        w.end_object();
    }
    w.end_array();
    return r;
}

// §11.4: `regions` rows are the global router's. The API relays a change of them there before it
// comes here (shard/whose.h); this is the guard should one reach here all the same.
Response not_ours(const Router& router) {
    const std::vector<std::string> urls = global_urls(router.options().global.value_or(""));
    const std::string global = urls.empty() ? std::string() : urls.front();
    return Router::error(409,
                         "regions are the global directory's and this router keeps region `" +
                             *router.options().region + "`: send the change to the global router " +
                             global,
                         {{"global", global}});
}

}  // namespace

RegionRouters parse_region_routers(std::string_view body) {
    RegionRouters out;
    auto refuse = [&](std::string why) {
        out.urls.clear();
        out.error = std::move(why);
        return out;
    };
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::object o;
    if (parser.parse(body.data(), body.size()).get(doc)) return refuse("the body is not JSON");
    if (doc.get_object().get(o)) return refuse("the body is not a JSON object");
    for (auto field : o) {
        if (field.key != "routers") {
            return refuse("unknown field `" + std::string(field.key) + "`: a region takes routers");
        }
    }
    simdjson::dom::array a;
    if (o["routers"].get_array().get(a)) {
        return refuse(
            "field `routers` must be an array of http://host:port URLs, the router "
            "keeping the region's directory first");
    }
    std::set<std::string, std::less<>> seen;
    for (simdjson::dom::element e : a) {
        std::string_view url;
        if (e.get_string().get(url) || replica_addr(url).empty()) {
            return refuse("field `routers`: each must be a http://host:port URL");
        }
        if (out.urls.size() == region_routers_max) {
            return refuse("field `routers`: at most " + std::to_string(region_routers_max) +
                          " routers");
        }
        if (!seen.emplace(url).second) {
            return refuse("field `routers`: `" + std::string(url) + "` is named twice");
        }
        out.urls.emplace_back(url);
    }
    if (out.urls.empty()) {
        return refuse("field `routers` is empty: name the router keeping the region's directory");
    }
    return out;
}

std::optional<RouterSelf> parse_router_health(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view role, scope;
    if (parser.parse(body.data(), body.size()).get(doc) || doc["role"].get_string().get(role) ||
        doc["scope"].get_string().get(scope)) {
        return std::nullopt;
    }
    return RouterSelf{std::string(role), std::string(scope)};
}

namespace {

// §11.3: `url`'s GET /_health must say `"role":"primary"` and `"scope":"<region>"`. nullopt when
// it does; else the 409 or the 502.
std::optional<Response> check_first_router(Router& router, const std::string& url,
                                           const std::string& region,
                                           const std::string& request_id) {
    const std::string addr = replica_addr(url);
    server::CallRequest c;
    c.peer = url;
    c.peer_text = "the router " + url;
    c.addr = addr;
    c.resend_after_sent = true;  // a GET
    c.timeout_ms = router.options().upstream_timeout_ms;
    c.body_bytes_max = 64 << 10;
    http::OutRequest get{.method = "GET", .target = "/_health", .host = addr};
    get.headers.push_back({"User-Agent", "fenec-shard"});
    get.headers.push_back({"X-Request-Id", request_id});
    http::write_request(get, c.bytes);
    server::BlockingClient client(server::BlockingClient::Options{});
    // Cut by this router's stop (Relays::stop_calls), as a relay is.
    const server::CallResult got = client.call(c, {.cancel = &router.relays().stopping()});
    if (!got.answer) {
        const bool cut = got.error.failure == server::CallFailure::cancelled;
        return Router::error(502,
                             "the router " + url + " did not answer GET /_health: " +
                                 (cut ? Relays::stopped_call(url) : got.error.message),
                             {{"router", url}});
    }
    const std::optional<RouterSelf> self =
        got.answer->status == 200 ? parse_router_health(got.answer->body) : std::nullopt;
    if (!self) {
        return Router::error(409,
                             "the router " + url + " answered GET /_health with " +
                                 std::to_string(got.answer->status) +
                                 " and no role and scope: it is no fenec-shard router of "
                                 "this version",
                             {{"router", url}});
    }
    if (self->role != "primary" || self->scope != region) {
        return Router::error(409,
                             "the router " + url + " is the " + self->role + " of scope `" +
                                 self->scope +
                                 "`: the first of routers must be the primary keeping region `" +
                                 region + "`'s directory (fenec-shard --region " + region + ")",
                             {{"router", url}, {"role", self->role}, {"scope", self->scope}});
    }
    return std::nullopt;
}

// What is still at home in `region` in this (the global) directory: its nodes, and its tenants
// (on those nodes, or `@<region>` rows).
std::pair<size_t, size_t> at_home(const DirectoryMaps& maps, const std::string& region) {
    size_t nodes = 0, tenants = 0;
    for (const auto& [name, n] : maps.nodes) nodes += n.region == region;
    for (const auto& [name, t] : maps.tenants) tenants += maps.region_of(t) == region;
    return {nodes, tenants};
}

Response put(Router& router, const server::Request& request, const Router::Answering& a,
             const std::string& region) {
    const RegionRouters parsed = parse_region_routers(request.body);
    if (!parsed.error.empty()) return Router::error(400, parsed.error);
    const std::vector<std::string>& routers = parsed.urls;
    TenantClaim claim(router, "@" + region, "region");
    if (!claim.held) {
        return Router::error(409, "another change of region `" + region + "` is in progress");
    }
    if (auto refused = check_first_router(router, routers.front(), region, a.request_id)) {
        return std::move(*refused);
    }
    auto maps = router.directory().maps();
    // §11.9: the global directory still keeping the region's nodes hands them to its router.
    if (at_home(*maps, region).first > 0) {
        return move_region_out(router, request, region, routers, a);
    }
    const bool created = !maps->regions.contains(region);
    if (engine::Status st = router.directory().put_region(region, routers); !st.is_ok()) {
        return Router::error(
            500, "the directory could not record region `" + region + "`: " + st.to_string());
    }
    Response r;
    r.status = created ? 201 : 200;
    json::Writer w(r.body);
    w.begin_object();
    w.key("region");
    w.string(region);
    w.key("routers");
    w.begin_array();
    for (const std::string& url : routers) w.string(url);
    w.end_array();
    w.key("adopted");
    w.begin_object();
    w.key("nodes");
    w.uint64(0);
    w.key("tenants");
    w.uint64(0);
    w.end_object();
    w.end_object();
    return r;
}

Response remove(Router& router, const std::string& region) {
    TenantClaim claim(router, "@" + region, "region");
    if (!claim.held) {
        return Router::error(409, "another change of region `" + region + "` is in progress");
    }
    auto maps = router.directory().maps();
    if (!maps->regions.contains(region)) {
        return Router::error(404, "no region `" + region + "` keeps a directory of its own");
    }
    const auto [nodes, tenants] = at_home(*maps, region);
    if (nodes > 0 || tenants > 0) {
        Response r = Router::error(
            409, "region `" + region + "` is still home to " + std::to_string(tenants) +
                     " tenants and " + std::to_string(nodes) + " nodes: move or delete them first");
        r.body.pop_back();
        r.body +=
            ",\"tenants\":" + std::to_string(tenants) + ",\"nodes\":" + std::to_string(nodes) + "}";
        return r;
    }
    if (engine::Status st = router.directory().remove_region(region); !st.is_ok()) {
        return Router::error(
            500, "the directory could not remove region `" + region + "`: " + st.to_string());
    }
    Response r;
    r.status = 204;
    r.content_type = "";
    return r;
}

}  // namespace

Response unnamed_region_refused() {
    return Router::error(400,
                         "the unnamed region cannot keep a directory of its own: the global "
                         "directory keeps it");
}

Response serve_regions(Router& router, const server::Request& request, const Router::Answering& a,
                       const std::string& region) {
    const http::Method m = request.head.method;
    if (m == http::Method::get || m == http::Method::head) return list(router);
    if (!valid_name(region)) {
        return Router::error(400, "region name `" + region + "` is not [a-z0-9_-]{1,64}");
    }
    if (router.options().region) return not_ours(router);
    if (m == http::Method::put) return put(router, request, a, region);
    return remove(router, region);
}

}  // namespace fenec::shard
