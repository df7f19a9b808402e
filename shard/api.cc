// shard/api.cc: the `/_shard/` API (router.md §6): nodes registered (with their pair's standby),
// listed and removed; tenants created on a node (the one named, else the fewest bytes of the
// region named, of --default-region's, or of all: shard/placement.h) with their copy, read,
// listed and deleted with their copies; and the routes to the moves (shard/move.h), pairs, the
// repair (shard/copies.h), quotas (shard/quota.h) and failover by hand (shard/cluster.h). Runs
// on the router's API workers: it waits on nodes (shard/node_calls.h) and on the directory's
// fsync. Every change is one audit line, and grants the nodes their lists at once under leases.
// The query across tenants runs on the loops (shard/query.cc); the `regions` collection is
// shard/regions.h's. A change another level's router owns (§11.4, shard/whose.h) is relayed to
// it once (shard/relay.h); on the global router a tenant at home in a region keeping its own
// directory (`@<r>`) is created and deleted in two levels (shard/two_level.h).
#include <simdjson.h>

#include <algorithm>
#include <iostream>
#include <optional>

#include "json/writer.h"
#include "shard/adopt.h"
#include "shard/cluster.h"
#include "shard/copies.h"
#include "shard/global_copy.h"
#include "shard/handoff.h"
#include "shard/move.h"
#include "shard/node_calls.h"
#include "shard/node_tokens.h"
#include "shard/placement.h"
#include "shard/quota.h"
#include "shard/region_move.h"
#include "shard/regions.h"
#include "shard/relay.h"
#include "shard/router.h"
#include "shard/routes.h"
#include "shard/standby.h"
#include "shard/status.h"
#include "shard/two_level.h"
#include "shard/whose.h"

namespace fenec::shard {

namespace {

using Response = http::Response;

// A node's admin token is sent in a header line of every call to it: this long covers any token
// an operator makes (a JWT-sized one included); longer is a mistake, not a credential.
constexpr size_t node_token_bytes_max = 4096;

// §6.3: a node's `addr` is host:port (a name or IPv4 of [A-Za-z0-9.-], or [IPv6]) with a port of
// 1-65535, and its `token` 1-4096 visible ASCII bytes (0x21-0x7E): both go into the head of
// every request to the node, so a CR or LF in either would let a registration forge headers.
// The problem in words, or "" when both are fine (an absent field is not checked).
std::string node_addr_token_error(const std::optional<std::string>& addr,
                                  const std::optional<std::string>& token) {
    if (addr) {
        const std::string& a = *addr;
        const size_t colon = a.rfind(':');
        std::string_view host =
            colon == std::string::npos ? "" : std::string_view(a).substr(0, colon);
        const std::string_view port =
            colon == std::string::npos ? "" : std::string_view(a).substr(colon + 1);
        bool ok =
            !host.empty() && !port.empty() && port.size() <= 5 &&
            std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (ok) ok = std::stoul(std::string(port)) >= 1 && std::stoul(std::string(port)) <= 65535;
        const bool v6 = host.size() > 2 && host.front() == '[' && host.back() == ']';
        if (v6) host = host.substr(1, host.size() - 2);
        for (char c : host) {
            const bool name = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '.' || c == '-';
            if (!(v6 ? name || c == ':' : name && c != ':')) ok = false;
        }
        if (!ok) {
            std::string shown;  // the value named without its control bytes
            for (char c : a) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
            return "field `addr`: `" + shown + "` is not host:port (a port of 1-65535)";
        }
    }
    if (token) {
        const bool visible = std::all_of(token->begin(), token->end(),
                                         [](char c) { return c >= 0x21 && c <= 0x7e; });
        if (token->empty() || token->size() > node_token_bytes_max || !visible) {
            return "field `token`: 1 to " + std::to_string(node_token_bytes_max) +
                   " bytes of visible ASCII (no space, CR, LF or other control byte)";
        }
    }
    return "";
}

std::vector<std::string> segments(std::string_view path) {
    std::vector<std::string> out;
    size_t at = 1;
    while (at <= path.size()) {
        const size_t slash = path.find('/', at);
        const size_t end = slash == std::string_view::npos ? path.size() : slash;
        if (end > at) out.emplace_back(path.substr(at, end - at));
        at = end + 1;
    }
    return out;
}

// A body: a JSON object, empty counting as {}. The fields and their kinds are checked by the
// caller through `take`.
struct Body {
    simdjson::dom::parser parser;
    simdjson::dom::object object;
    bool empty = true;
    std::string error;

    explicit Body(std::string_view text) {
        if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return;
        empty = false;
        simdjson::dom::element doc;
        if (parser.parse(text.data(), text.size()).get(doc)) {
            error = "the body is not JSON";
        } else if (doc.get_object().get(object)) {
            error = "the body is not a JSON object";
        }
    }
    // The first member not in `known`, or "".
    std::string unknown(std::initializer_list<std::string_view> known) const {
        if (empty) return "";
        for (auto field : object) {
            if (std::find(known.begin(), known.end(), field.key) == known.end()) {
                return std::string(field.key);
            }
        }
        return "";
    }
    // A text member: nullopt when absent (or null); `bad` set when of another kind.
    std::optional<std::string> text(std::string_view key, std::string& bad) const {
        if (empty) return std::nullopt;
        simdjson::dom::element e;
        if (object.at_key(key).get(e) || e.is_null()) return std::nullopt;
        std::string_view s;
        if (e.get_string().get(s)) {
            bad = std::string(key);
            return std::nullopt;
        }
        return std::string(s);
    }
    // Whether the member is there, null included.
    bool present(std::string_view key) const {
        simdjson::dom::element e;
        return !empty && !object.at_key(key).get(e);
    }
    // A member as JSON text, for passing on.
    std::optional<std::string> raw(std::string_view key) const {
        if (empty) return std::nullopt;
        simdjson::dom::element e;
        if (object.at_key(key).get(e) || e.is_null()) return std::nullopt;
        return simdjson::minify(e);
    }
};

}  // namespace

namespace {

// What a node holds, as the directory has it: primaries, copies kept for others, and its pair.
struct Holds {
    size_t tenants = 0;
    size_t replicas = 0;  // copies of other nodes' tenants: its own replicas and a standby's
    size_t pairs = 0;
};
Holds holds(const DirectoryMaps& maps, std::string_view node) {
    Holds h;
    for (const auto& [name, t] : maps.tenants) {
        h.tenants += t.node == node;
        h.replicas += maps.copy_of(t) == node;
    }
    h.pairs = (maps.standby_of(node) ? 1 : 0) + (maps.is_standby(node) ? 1 : 0);
    return h;
}

// `lease` where leasing runs (§6.2): whether the node takes leases, the age of its last counted
// answer, whether it is failed over and not heard from since.
void write_node(json::Writer& w, const NodeRow& n, const DirectoryMaps& maps,
                const Leases* leases) {
    const Holds h = holds(maps, n.name);
    w.begin_object();
    w.key("name");
    w.string(n.name);
    w.key("addr");
    w.string(n.addr);
    w.key("region");
    w.string(n.region);
    w.key("zone");
    w.string(n.zone);
    if (const std::string* s = maps.standby_of(n.name)) {
        w.key("standby");
        w.string(*s);
    }
    for (const auto& [node, standby] : maps.pairs) {
        if (standby != n.name) continue;
        w.key("standby_of");
        w.string(node);
    }
    w.key("tenants");
    w.uint64(h.tenants);
    w.key("replicas");
    w.uint64(h.replicas);
    if (auto v = leases ? leases->view(n.name) : std::nullopt) {
        w.key("lease");
        w.begin_object();
        w.key("takes");
        w.boolean(v->takes);
        w.key("age_ms");
        w.int64(v->age_ms);
        w.key("failed_over");
        w.boolean(v->failed_over);
        w.end_object();
    }
    w.end_object();
}

// A tenant as §6.2 answers it; `one` for GET /_shard/tenants/<t>. Its copy (`replica`: its own
// replica or its node's standby) with `same_zone` where so, or `unreplicated` with the reason.
void write_tenant(json::Writer& w, const TenantRow& t, const DirectoryMaps& maps, bool one,
                  std::optional<uint64_t> bytes, const Copies& copies) {
    if (std::optional<std::string_view> home = home_region(t.node)) {
        // §11.3: at home in a region keeping its own directory; its placement is that region's
        // router's to answer.
        w.begin_object();
        w.key("name");
        w.string(t.name);
        w.key("node");
        w.string(t.node);
        w.key("state");
        w.string(t.state);
        w.key("region");
        w.string(*home);
        w.end_object();
        return;
    }
    auto n = maps.nodes.find(t.node);
    // A list says only where a copy is; the reason for none is worked out for one tenant.
    const std::optional<std::string> unreplicated =
        one ? copies.unreplicated(maps, t) : copies.failed(t.name);
    const std::string copy = unreplicated ? std::string() : maps.copy_of(t);
    w.begin_object();
    w.key("name");
    w.string(t.name);
    w.key("node");
    w.string(t.node);
    w.key("state");
    w.string(t.state);
    w.key("region");
    w.string(n == maps.nodes.end() ? "" : n->second.region);
    if (!copy.empty()) {
        w.key("replica");
        w.string(copy);
    }
    if (one) {
        w.key("zone");
        w.string(n == maps.nodes.end() ? "" : n->second.zone);
        if (!copy.empty() && same_zone(maps, t.node, copy)) {
            w.key("same_zone");
            w.boolean(true);
        }
        if (unreplicated) {
            w.key("unreplicated");
            w.string(*unreplicated);
        }
        if (!t.moving_to.empty()) {
            w.key("moving_to");
            w.string(t.moving_to);
        }
        if (!t.moving_from.empty()) {
            w.key("moving_from");
            w.string(t.moving_from);
        }
        w.key("lineage");
        if (t.lineage.empty()) w.null();
        else w.string(t.lineage);
    }
    if (bytes) {
        w.key("bytes");
        w.uint64(*bytes);
    }
    w.end_object();
}

// `body`, a JSON object, with `"region": <region>` as its first member; anything else as it is
// (the router it goes to refuses it as it would from a client).
std::string with_region(const std::string& body, const std::string& region) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::object o;
    if (parser.parse(body.data(), body.size()).get(doc) || doc.get_object().get(o)) return body;
    // One naming a region, whatever its type, is sent as it is, for its owner to judge: a second
    // `region` in front of a wrong one (`5`) was read first, and the wrong one went unrefused.
    simdjson::dom::element named;
    if (!o["region"].get(named)) return body;
    std::string out = "{\"region\":";
    json::Writer(out).string(region);
    const size_t open = body.find('{');
    const std::string rest = body.substr(open + 1);
    const bool empty = rest.find_first_not_of(" \t\r\n") == std::string::npos ||
                       rest[rest.find_first_not_of(" \t\r\n")] == '}';
    out += empty ? "" : ",";
    out += rest;
    return out;
}

Response json(int status, std::string body) {
    Response r;
    r.status = status;
    r.body = std::move(body);
    return r;
}

class Api {
  public:
    Api(Router& router, const server::Request& request, const Router::Answering& a)
        : router_(router), request_(request), a_(a) {}

    Response serve() {
        const std::vector<std::string> seg = segments(request_.head.path);  // "_shard", ...
        const http::Method m = request_.head.method;
        const ShardRoute* row = find_shard_route(request_.head.path);
        if (!row && request_.head.path == "/_shard/regions/") {
            return changed(unnamed_region_refused());  // §11.3: "" keeps no directory
        }
        if (!row || row->plane != ShardPlane::shard) {
            return Router::error(404, "no route " + request_.head.path +
                                          ": /_shard/ serves nodes, pairs, tenants, replicas, "
                                          "regions, query and status");
        }
        // A named node or tenant is judged before the method (seg[2] is its name).
        const bool node_named = row->id == ShardRouteId::node || row->id == ShardRouteId::failover;
        const bool tenant_named = row->id == ShardRouteId::tenant_row ||
                                  row->id == ShardRouteId::move || row->id == ShardRouteId::quota ||
                                  row->id == ShardRouteId::handoff;
        if ((node_named || tenant_named) && !valid_name(seg[2])) {
            return Router::error(400, std::string(node_named ? "node" : "tenant") + " name `" +
                                          seg[2] + "` is not [a-z0-9_-]{1,64}");
        }
        relayed_ = relayed_for(request_, a_.request_id, router_.options().token);
        if (std::optional<Response> r = relay_if_not_ours(*row, seg)) {
            return m == http::Method::get ? std::move(*r) : changed(std::move(*r));
        }
        if (row->id == ShardRouteId::handoff) {  // §11.7: shard/handoff.h
            const std::optional<HandoffStep> step = handoff_step(seg[3]);
            if (!step) {
                return Router::error(404, "no handoff step `" + seg[3] + "`: export, undo-export, "
                                          "import, release, undo-release, drop, activate, home");
            }
            return changed(serve_handoff(router_, request_, a_, seg[2], *step));
        }
        if (row->id == ShardRouteId::move && m == http::Method::post) {
            // §11.7: across two regions keeping their own directories (shard/region_move.h).
            if (auto r = serve_region_move(router_, request_, a_, seg[2])) {
                return changed(std::move(*r));
            }
        }
        if (tenant_named && !(row->id == ShardRouteId::tenant_row &&
                              (m == http::Method::get || m == http::Method::put ||
                               (m == http::Method::del && two_level_home(seg[2]))))) {
            if (std::optional<Response> r = elsewhere(seg[2])) return changed(std::move(*r));
        }
        switch (row->id) {
            case ShardRouteId::move:  // §7: shard/move.cc
                return changed(serve_move(router_, request_, a_, seg[2]));
            case ShardRouteId::quota: {  // shard/quota.h
                Response r = serve_quota(router_, request_, a_, seg[2]);
                return m == http::Method::get ? r : changed(std::move(r));
            }
            case ShardRouteId::pairs:
                return serve_pairs(router_, request_);
            case ShardRouteId::replicas:  // the repair (§8.3): shard/repair.cc
                return changed(serve_replicas(router_, request_, a_));
            case ShardRouteId::shard_status:  // shard/status.h
                return serve_status(router_, request_, a_);
            default:
                break;
        }
        if (auto r = method_refusal(request_.head)) return std::move(*r);
        switch (row->id) {
            case ShardRouteId::regions:  // §11.3: shard/regions.h
                return serve_regions(router_, request_, a_, "");
            case ShardRouteId::region:
                return changed(serve_regions(router_, request_, a_, seg[2]));
            case ShardRouteId::adopt:  // §11.9: shard/adopt.h
                return changed(serve_adopt(router_, request_, a_));
            case ShardRouteId::nodes:
                return list_nodes();
            case ShardRouteId::node:
                if (m == http::Method::get) return get_node(seg[2]);
                if (m == http::Method::put) return changed(put_node(seg[2]));
                return changed(delete_node(seg[2]));
            case ShardRouteId::failover:  // §9.1
                return changed(fail_over(seg[2]));
            case ShardRouteId::tenants:
                return list_tenants();
            case ShardRouteId::tenant_row:
                if (m == http::Method::get) return get_tenant(seg[2]);
                if (m == http::Method::put) return changed(put_tenant(seg[2]));
                return changed(delete_tenant(seg[2]));
            default:
                break;
        }
        return Router::error(404, "no route " + request_.head.path);
    }

  private:
    // §11.4: a change another level's router owns (shard/whose.h), relayed to it once, its
    // answer passed back (503 `Retry-After: 5` when none of its routers took it); one relayed
    // here that is not this router's either, refused 409 naming the router that owns it.
    // nullopt for a change of this router's own, and for a method the route does not take.
    std::optional<Response> relay_if_not_ours(const ShardRoute& row,
                                              const std::vector<std::string>& seg) {
        const http::RequestHead& h = request_.head;
        if (method_refusal(h)) return std::nullopt;
        auto maps = router_.directory().maps();
        std::shared_ptr<const DirectoryMaps> global;
        if (const GlobalCopy* copy = router_.global_copy()) global = copy->maps();
        const ChangeContext at{*maps, global.get(),
                               global_urls(router_.options().global.value_or(""))};
        const Whose whose = whose_change(
            at, {.route = row.id,
                 .method = h.method,
                 .name = seg.size() > 2 ? std::string_view(seg[2]) : std::string_view(),
                 .body = request_.body,
                 .relayed = !relayed_.empty()});
        if (whose.here) return std::nullopt;
        if (!relayed_.empty()) return refused_relayed(whose);
        // §11.4: a create asked of a region's router is that region's unless it names another:
        // the global router is told which, since it knows none of the region's nodes.
        std::string body = request_.body;
        if (const std::optional<std::string>& own = router_.options().region;
            own && row.id == ShardRouteId::tenant_row && h.method == http::Method::put &&
            !region_named(body)) {
            body = with_region(body, *own);
        }
        const Relayed r = router_.relays().relay(whose.to, {.method = h.method_text,
                                                            .target = h.target,
                                                            .body = body,
                                                            .client = peer_host(request_.peer),
                                                            .request_id = a_.request_id});
        return r.answered ? passed_on(r) : none_took(whose.to, r);
    }

    // Who asked, for a relay this router makes on its own account (a two-level create's second
    // half): the client a valid mark names, else the peer.
    Asker asker() const {
        return {relayed_.empty() ? peer_host(request_.peer) : relayed_, a_.request_id};
    }

    // §11.4: on the global router, the routers of the region keeping its own directory that
    // `tenant` is at home in, when there is a `regions` row for it.
    std::optional<RelayTo> two_level_home(const std::string& tenant) const {
        if (router_.options().region) return std::nullopt;
        auto maps = router_.directory().maps();
        auto it = maps->tenants.find(tenant);
        if (it == maps->tenants.end()) return std::nullopt;
        const std::optional<std::string_view> home = home_region(it->second.node);
        if (!home) return std::nullopt;
        auto r = maps->regions.find(*home);
        if (r == maps->regions.end()) return std::nullopt;
        return RelayTo{std::string(*home), r->second};
    }

    // §11.4: a tenant at home in a region keeping its own directory (`@<r>`) whose change was
    // not relayed there (a move across regions' directories, or a region with no `regions` row)
    // is refused naming the region and its routers. nullopt for any other tenant.
    std::optional<Response> elsewhere(const std::string& tenant) {
        auto maps = router_.directory().maps();
        auto it = maps->tenants.find(tenant);
        if (it == maps->tenants.end()) return std::nullopt;
        const std::optional<std::string_view> home = home_region(it->second.node);
        if (!home) return std::nullopt;
        std::string routers;
        if (auto r = maps->regions.find(*home); r != maps->regions.end()) {
            for (const std::string& url : r->second) routers += (routers.empty() ? "" : ", ") + url;
        }
        Response r = Router::error(
            501, "tenant `" + tenant + "` is at home in region `" + std::string(*home) +
                     "`, which keeps its own directory: ask its router (" +
                     (routers.empty() ? std::string("none recorded") : routers) +
                     "); this change is not built across the levels");
        r.body.pop_back();
        json::Writer w(r.body);
        r.body += ",\"region\":";
        w.string(*home);
        r.body += "}";
        return r;
    }

    // A change's audit line; a change done grants every node its list at once where leasing
    // runs, since a create, delete, pair or node change may have changed any node's (§9.5).
    Response changed(Response r) {
        router_.audit_admin(request_, a_, r.status);
        if (r.status < 300) router_.cluster().changed();
        return r;
    }

    // §9.1: `{}` or `{"force": true}`.
    Response fail_over(const std::string& node) {
        Body body(request_.body);
        if (!body.error.empty()) return Router::error(400, body.error);
        if (std::string u = body.unknown({"force"}); !u.empty()) {
            return Router::error(400, "unknown field `" + u + "`: a failover takes force");
        }
        bool force = false;
        if (body.present("force")) {
            simdjson::dom::element e;
            if (body.object.at_key("force").get(e) || e.get_bool().get(force)) {
                return Router::error(400, "field `force` must be true or false");
            }
        }
        const FailoverResult r = router_.cluster().failover().fail_over(node, force, "hand");
        if (r.status == 404 || r.status == 409) return Router::error(r.status, r.error);
        if (r.status == 503) {
            Response refused = Router::error(503, r.error);
            refused.header("Retry-After", "5");
            return refused;
        }
        return json(r.status, failover_body(node, r));
    }

    Response list_nodes() {
        auto maps = router_.directory().maps();
        Response r;
        json::Writer w(r.body);
        w.begin_array();
        for (const auto& [name, n] : maps->nodes) {
            write_node(w, n, *maps, router_.cluster().leases());
        }
        w.end_array();
        return r;
    }

    Response get_node(const std::string& name) {
        auto maps = router_.directory().maps();
        auto it = maps->nodes.find(name);
        if (it == maps->nodes.end()) return Router::error(404, "no node `" + name + "`");
        Response r;
        json::Writer w(r.body);
        write_node(w, it->second, *maps, router_.cluster().leases());
        return r;
    }

    // §6.3: addr and token required for a new node; a field left out is the one recorded.
    Response put_node(const std::string& name) {
        Body body(request_.body);
        if (!body.error.empty()) return Router::error(400, body.error);
        if (std::string u = body.unknown(
                {"addr", "token", "token_env", "token_file", "region", "zone", "standby"});
            !u.empty()) {
            return Router::error(400, "unknown field `" + u + "`: a node takes addr, token, "
                                      "token_env, token_file, region, zone and standby");
        }
        std::string bad;
        auto addr = body.text("addr", bad);
        auto token = body.text("token", bad);
        const NodeToken given{token, body.text("token_env", bad), body.text("token_file", bad)};
        auto region = body.text("region", bad);
        auto zone = body.text("zone", bad);
        // §8.1: a name records the pair, null removes it, absent leaves it as it is.
        const bool standby_given = body.present("standby");
        const std::optional<std::string> standby = body.text("standby", bad);
        if (!bad.empty()) return Router::error(400, "field `" + bad + "` must be a string");
        auto maps = router_.directory().maps();
        auto it = maps->nodes.find(name);
        const bool fresh = it == maps->nodes.end();
        if (fresh && (!addr || !given.any())) {
            return Router::error(400, std::string("a new node needs `") +
                                          (!addr ? "addr" : "token") + "`");
        }
        NodeRow row = fresh ? NodeRow{} : it->second;
        row.name = name;
        if (addr) row.addr = *addr;
        if (std::optional<Response> refused = take_token(given, row)) return *refused;
        if (zone) row.zone = *zone;
        if (std::string why = node_addr_token_error(addr, token); !why.empty()) {
            return Router::error(400, why);
        }
        for (const auto& [field, v] : {std::pair{"region", region}, std::pair{"zone", zone},
                                       std::pair{"standby", standby}}) {
            if (v && !v->empty() && !valid_name(*v)) {
                return Router::error(400, std::string("field `") + field + "`: `" + *v +
                                              "` is not [a-z0-9_-]{1,64}");
            }
        }
        if (region && *region != row.region && !fresh) {
            // A node is kept by one directory: into a region keeping its own (or out of this
            // region's router's), it is deleted here and added there.
            std::shared_ptr<const DirectoryMaps> global;
            if (const GlobalCopy* copy = router_.global_copy()) global = copy->maps();
            const DirectoryMaps& regions = global ? *global : *maps;
            if (maps->scope != "global" ? *region != maps->scope
                                        : regions.regions.contains(*region)) {
                return Router::error(
                    409, "node `" + name + "` is kept by this router's directory" +
                             (row.region.empty() ? "" : " (region `" + row.region + "`)") +
                             ", and region `" + *region +
                             "` keeps its own: delete it here once it holds nothing, then add "
                             "it to that region's router");
            }
        }
        if (region && *region != row.region) {
            // Its tenants' residency would change under them (seed 002).
            const Holds h = holds(*maps, name);
            if (h.tenants + h.replicas + h.pairs > 0) {
                Response r =
                    Router::error(409, "node `" + name + "` holds " + std::to_string(h.tenants) +
                                           " tenants and " + std::to_string(h.replicas) +
                                           " replicas: move them off before changing "
                                           "its region");
                r.body.pop_back();
                r.body += ",\"tenants\":" + std::to_string(h.tenants) +
                          ",\"replicas\":" + std::to_string(h.replicas) +
                          ",\"pairs\":" + std::to_string(h.pairs) + "}";
                return r;
            }
            row.region = *region;
        }
        if (standby) {
            if (std::optional<Response> refused = check_standby(*maps, row, *standby)) {
                return *refused;
            }
        }
        // The node is asked before anything is written (§6.3).
        HelloReply h = router_.node_calls().hello(row, a_.request_id);
        if (h.status != 200) return Router::error(502, h.said(row));
        router_.copies().node_answered(name);  // quotas it did not take go again
        row.lease = h.lease;
        if (engine::Status st = router_.directory().put_node(row); !st.is_ok()) {
            return Router::error(500, "the directory could not record node `" + name +
                                          "`: " + st.to_string());
        }
        std::vector<std::string> unreplicated;
        const std::string* before = maps->standby_of(name);
        if (std::optional<Response> failed =
                change_pair(row, before ? *before : "", standby_given, standby, unreplicated)) {
            return *failed;
        }
        // A node added runs a repair of its region, so a tenant left unreplicated finds its copy.
        if (fresh && router_.options().replicas) {
            router_.copies().repair("node `" + name + "` added", row.region);
        }
        Response r;
        r.status = fresh ? 201 : 200;
        json::Writer w(r.body);
        w.begin_object();
        w.key("node");
        w.string(name);
        w.key("region");
        w.string(row.region);
        w.key("zone");
        w.string(row.zone);
        w.key("unreplicated");
        w.begin_array();
        for (const std::string& t : unreplicated) w.string(t);
        w.end_array();
        w.end_object();
        return r;
    }

    // How a PUT names a node's admin token: at most one of the three (shard/node_tokens.h).
    struct NodeToken {
        std::optional<std::string> token, env, file;
        bool any() const { return token || env || file; }
    };

    // `row` given the token `given` names, read now so the node can be asked with it (§6.3);
    // nothing given keeps the row's way (a variable or file read again). 400 for two at once, a
    // name or path that cannot be one, or a variable or file this router cannot read.
    static std::optional<Response> take_token(const NodeToken& given, NodeRow& row) {
        if (int(bool(given.token)) + int(bool(given.env)) + int(bool(given.file)) > 1) {
            return Router::error(400, "give one of `token`, `token_env` and `token_file`");
        }
        if (given.token) {
            row.token = *given.token;
            row.token_env.clear();
            row.token_file.clear();
            return std::nullopt;
        }
        if (given.env && !valid_env_name(*given.env)) {
            return Router::error(400, "field `token_env`: `" + *given.env +
                                          "` is not an environment variable's name");
        }
        if (given.file && (!given.file->starts_with('/') ||
                           given.file->find_first_of("\r\n") != std::string::npos)) {
            return Router::error(
                400, "field `token_file`: `" + *given.file + "` is not an absolute path");
        }
        if (given.env || given.file) {
            row.token_env = given.env.value_or("");
            row.token_file = given.file.value_or("");
        }
        // A row naming where its token is read is read again, so a PUT takes a changed token.
        if (row.token_env.empty() && row.token_file.empty()) return std::nullopt;
        auto read = read_node_token(row.token_env, row.token_file);
        if (!read.is_ok()) {
            return Router::error(400, std::string("field `") +
                                          (row.token_env.empty() ? "token_file" : "token_env") +
                                          "`: " + std::string(read.status().message()));
        }
        row.token = std::move(read.value());
        return std::nullopt;
    }

    // §8.1, once the node is recorded: the pair recorded or changed when `standby` names a node
    // other than `old_standby`, removed when it was given as null. A directory failure, or the
    // tenants left without a copy in `unreplicated`.
    std::optional<Response> change_pair(const NodeRow& node, const std::string& old_standby,
                                        bool given, const std::optional<std::string>& standby,
                                        std::vector<std::string>& unreplicated) {
        const std::string& name = node.name;
        if (standby && *standby != old_standby) {
            // A standby replaced: the tenants it kept the copies of keep them, as replicas of
            // their own, until the new one has caught up with each (Copies::paired).
            const std::vector<std::string> kept =
                old_standby.empty() ? std::vector<std::string>{}
                                    : router_.copies().copied_by_pair(name, old_standby);
            if (engine::Status st = router_.directory().put_pair(name, *standby, kept, old_standby);
                !st.is_ok()) {
                return Router::error(500, "the directory could not record the pair of `" + name +
                                              "`: " + st.to_string());
            }
            if (same_zone(*router_.directory().maps(), name, *standby)) {
                log_line("the standby `" + *standby + "` of `" + name + "` is in its zone `" +
                         node.zone + "`: a zone lost would take both");
            }
            unreplicated =
                router_.copies().paired(name, *standby, old_standby, kept, a_.request_id);
            log_line("node `" + name + "` is paired with the standby `" + *standby + "`" +
                     (old_standby.empty() ? "" : " (was `" + old_standby + "`)") + "; " +
                     std::to_string(unreplicated.size()) + " of its tenants not taken there");
        } else if (given && !standby && !old_standby.empty()) {
            // Under --replicas, the old standby's copies stay where they are, caught up, as the
            // tenants' replicas of their own (Copies::unpaired).
            const std::vector<std::string> kept =
                router_.options().replicas ? router_.copies().copied_by_pair(name, old_standby)
                                           : std::vector<std::string>{};
            if (engine::Status st = router_.directory().remove_pair(name, kept, old_standby);
                !st.is_ok()) {
                return Router::error(500, "the directory could not remove the pair of `" + name +
                                              "`: " + st.to_string());
            }
            unreplicated = router_.copies().unpaired(name, old_standby, kept, a_.request_id);
            size_t on_node = 0, without = 0;
            const auto now = router_.directory().maps();
            for (const auto& [t, row] : now->tenants) {
                if (row.node != name) continue;
                ++on_node;
                without += now->copy_of(row).empty();
            }
            log_line("the pair of node `" + name + "` with `" + old_standby + "` is removed; " +
                     std::to_string(without) + " of its " + std::to_string(on_node) +
                     " tenants have no copy now" +
                     (router_.options().replicas ? "" : " (the router runs without --replicas)"));
        }
        return std::nullopt;
    }

    // §8.1's checks of `standby` for `node` (its region as the request leaves it).
    static std::optional<Response> check_standby(const DirectoryMaps& maps, const NodeRow& node,
                                                 const std::string& standby) {
        if (standby == node.name) {
            return Router::error(400, "node `" + node.name + "` cannot be its own standby");
        }
        auto s = maps.nodes.find(standby);
        if (s == maps.nodes.end()) return Router::error(404, "no node `" + standby + "`");
        if (s->second.region != node.region) {
            return Router::error(409, "the standby `" + standby + "` is in region `" +
                                          s->second.region + "`, not `" + node.region +
                                          "`: a failover onto it would carry the tenants out of "
                                          "their region");
        }
        const Holds h = holds(maps, standby);
        if (h.tenants > 0) {
            return Router::error(409, "node `" + standby + "` holds " + std::to_string(h.tenants) +
                                          " tenants: a standby holds none of its own");
        }
        if (maps.standby_of(standby)) {
            return Router::error(409, "node `" + standby + "` has a standby of its own");
        }
        for (const auto& [n, st] : maps.pairs) {
            if (st == standby && n != node.name) {
                return Router::error(409, "node `" + standby + "` is the standby of `" + n + "`");
            }
            if (st == node.name) {
                return Router::error(409, "node `" + node.name + "` is the standby of `" + n +
                                              "`: a standby has none");
            }
        }
        return std::nullopt;
    }

    Response delete_node(const std::string& name) {
        auto maps = router_.directory().maps();
        if (!maps->nodes.contains(name)) return Router::error(404, "no node `" + name + "`");
        size_t held = 0;
        for (const auto& [tn, t] : maps->tenants) held += t.node == name;
        if (held > 0) {
            return Router::error(409, "node `" + name + "` holds " + std::to_string(held) +
                                          " tenants: move or delete them first");
        }
        // The directory drops the node's pair and the replica records on it with the node.
        if (engine::Status st = router_.directory().remove_node(name); !st.is_ok()) {
            return Router::error(500, "the directory could not forget node `" + name +
                                          "`: " + st.to_string());
        }
        const std::vector<std::string> unreplicated =
            router_.copies().node_removed(*maps, name, a_.request_id);
        // Under --replicas the tenants whose copy it kept get another, as after a failover.
        if (router_.options().replicas && !unreplicated.empty()) {
            router_.copies().repair("node `" + name + "` removed", maps->nodes.at(name).region);
        }
        Response r;
        json::Writer w(r.body);
        w.begin_object();
        w.key("node");
        w.string(name);
        w.key("unreplicated");
        w.begin_array();
        for (const std::string& t : unreplicated) w.string(t);
        w.end_array();
        w.end_object();
        return r;
    }

    Response list_tenants() {
        auto maps = router_.directory().maps();
        const bool with_bytes = request_.head.query_value("bytes") != nullptr;
        const std::string* region = request_.head.query_value("region");
        if (region && !region->empty() && !valid_name(*region)) {
            return Router::error(400, "region name `" + *region + "` is not [a-z0-9_-]{1,64}");
        }
        // ?bytes: each node's GET /_admin/tenants; a node that does not answer leaves its
        // tenants without bytes.
        std::map<std::string, std::map<std::string, uint64_t>> bytes;
        if (with_bytes) {
            for (const auto& [name, n] : maps->nodes) {
                SurveyReply listed = router_.node_calls().tenants(n, false, a_.request_id);
                if (listed.status != 200) continue;
                auto& of = bytes[name];
                for (const CopyInfo& c : listed.copies) of[c.name] = c.bytes;
            }
        }
        Response r;
        json::Writer w(r.body);
        w.begin_array();
        for (const auto& [name, t] : maps->tenants) {
            if (region && *region != maps->region_of(t)) continue;
            std::optional<uint64_t> b;
            if (auto of = bytes.find(t.node); of != bytes.end()) {
                if (auto x = of->second.find(name); x != of->second.end()) b = x->second;
            }
            write_tenant(w, t, *maps, false, b, router_.copies());
        }
        w.end_array();
        return r;
    }

    Response get_tenant(const std::string& name) {
        auto maps = router_.directory().maps();
        auto it = maps->tenants.find(name);
        // §11.6: a region's router answers a tenant it does not place from its copy of the
        // global directory (its home, or its node there), as it forwards its requests; one at
        // home in its own region is placed nowhere here, and a relayed read (a two-level create's
        // settling asks one) is answered from this router's own directory alone.
        if (it == maps->tenants.end() && relayed_.empty()) {
            if (const GlobalCopy* copy = router_.global_copy(); copy && copy->ready()) {
                auto global = copy->maps();
                auto g = global->tenants.find(name);
                if (g != global->tenants.end() && home_region(g->second.node) != maps->scope) {
                    maps = std::move(global);
                    it = g;
                }
            }
        }
        if (it == maps->tenants.end()) {
            // A relayed read is another router's settling, which takes 404 for "not here": a
            // create (or an import) still running here has claimed the name and not yet written
            // its row, and the router asking may have stopped waiting for it. Busy, so that it
            // asks again rather than remove its own row of a tenant about to exist here.
            if (!relayed_.empty() && !router_.held_by(name).empty()) return busy(name, "create");
            return Router::error(404, "tenant `" + name + "` is not in the directory");
        }
        // A released row (`@<r>`) asked by another router's settling, which activates its import
        // on this word: said once this router's standbys were sent the row (as the release
        // itself is answered), so none promoted after it thaws the copy the tenant left.
        if (router_.options().region && !relayed_.empty() && home_region(it->second.node)) {
            router_.standby().wait_for_standbys(standby_wait_ms_max);
        }
        Response r;
        json::Writer w(r.body);
        write_tenant(w, it->second, *maps, true, std::nullopt, router_.copies());
        return r;
    }

    // §6.1: `held_by` names the operation holding the claim, not the one refused.
    Response busy(const std::string& tenant, std::string_view what) {
        std::string holder = router_.held_by(tenant);
        if (holder.empty()) holder = std::string(what);
        Response r = Router::error(409, "another operation on `" + tenant + "` is in progress: " +
                                            holder);
        r.body.pop_back();
        r.body += ",\"held_by\":\"" + holder + "\"}";
        return r;
    }

    // §6.4 Create: the node named, or the one with the fewest bytes (ties by name) of the region
    // named or --default-region's; the node's PUT /_admin/tenants/<t> with the schema passed
    // through; then the row, synced.
    Response put_tenant(const std::string& name) {
        Body body(request_.body);
        if (!body.error.empty()) return Router::error(400, body.error);
        if (std::string u = body.unknown({"node", "region", "schema"}); !u.empty()) {
            return Router::error(400, "unknown field `" + u + "`: a tenant takes node, region and "
                                      "schema");
        }
        std::string bad;
        auto node_name = body.text("node", bad);
        auto region = body.text("region", bad);
        if (!bad.empty()) return Router::error(400, "field `" + bad + "` must be a string");
        if (region && !region->empty() && !valid_name(*region)) {  // "" is the unnamed region
            return Router::error(400, "field `region`: `" + *region + "` is not [a-z0-9_-]{1,64}");
        }
        std::optional<std::string> schema = body.raw("schema");
        if (schema && (schema->empty() || schema->front() != '[')) {
            return Router::error(400, "field `schema` must be an array of FenecQL statements");
        }
        TenantClaim claim(router_, name, "create");  // §6.1
        if (!claim.held) return busy(name, "create");
        auto maps = router_.directory().maps();
        // A region's router, a create the global router relayed (it has no home for the name):
        // a row `@<r>` here is what a move out left where its drop never came, and goes first
        // with the frozen copy it kept, as an import back would take it (shard/handoff.h).
        if (auto t = maps->tenants.find(name); t != maps->tenants.end() &&
                                               router_.options().region && !relayed_.empty() &&
                                               home_region(t->second.node)) {
            const TenantRow leftover = t->second;
            bool removed = false;
            if (std::optional<Response> refused =
                    drop_leftover(router_, *maps, leftover, name, a_.request_id, removed, true)) {
                return *refused;
            }
            log_line("create of `" + name + "`: the row `" + leftover.node +
                     "` a move out left here dropped first" +
                     (removed ? ", its frozen copy deleted" : ""));
            maps = router_.directory().maps();
        }
        if (maps->tenants.contains(name)) {
            // `exists`: a two-level create keeps the name where the region says so (§11.4).
            // One half-way through a create or delete in two levels says so: it may not be there
            // yet (or any more), and its settling says which within a minute (§11.4).
            const TenantRow& row = maps->tenants.at(name);
            const bool halfway = row.state == "creating" || row.state == "deleting";
            Response r = Router::error(
                409, "tenant `" + name + "` exists, on node `" + row.node + "`" +
                         (halfway ? ", " + row.state +
                                        ": its outcome is not known yet, and the row is settled "
                                        "within a minute (send the create again then)"
                                  : ""));
            r.body.pop_back();
            r.body += ",\"exists\":true}";
            return r;
        }
        // §11.4: in a region keeping its own directory, created in two levels.
        if (!router_.options().region) {
            std::optional<std::string> home = region;
            if (!home && !node_name) home = router_.options().default_region;
            if (auto r = home ? maps->regions.find(*home) : maps->regions.end();
                r != maps->regions.end()) {
                return router_.two_level()->create(name, RelayTo{r->first, r->second}, node_name,
                                                   schema, asker());
            }
        }
        const NodeRow* node = nullptr;
        if (std::optional<Response> refused = choose_node(*maps, name, node_name, region, node)) {
            return *refused;
        }
        CreateReply made = router_.node_calls().create(*node, name, schema, a_.request_id);
        if (!made.answered) return Router::error(502, made.said(*node));
        if (made.status >= 400 && made.status < 500) {
            // The node's refusal passes through (a refused schema statement created nothing).
            return json(made.status, std::move(made.body));
        }
        if (made.status != 201 && made.status != 200) {
            return Router::error(502, "node `" + node->name + "` answered " +
                                          std::to_string(made.status) + " to the create");
        }
        TenantRow row;
        row.name = name;
        row.node = node->name;
        row.lineage = made.lineage;
        if (engine::Status st = router_.directory().put_tenant(row); !st.is_ok()) {
            // Not recorded: the file on the node goes, so nothing serves a tenant nobody routes.
            (void)router_.node_calls().remove(*node, name, a_.request_id);
            return Router::error(500, "the directory could not record tenant `" + name +
                                          "`: " + st.to_string());
        }
        // Step 8: its copy. Its failure fails nothing: the answer says why there is none.
        const CopyOutcome copy = router_.copies().created(name, a_.request_id);
        Response r;
        r.status = 201;
        json::Writer w(r.body);
        w.begin_object();
        w.key("tenant");
        w.string(name);
        w.key("node");
        w.string(node->name);
        w.key("region");
        w.string(node->region);
        write_copy(w, copy);
        if (schema) {
            w.key("schema");
            w.raw(*schema);
        }
        w.end_object();
        return r;
    }

    // §6.4 step 2: the node named; else the one with the fewest bytes (ties by name) of the
    // region named, else of --default-region's, else of every region (shard/placement.h);
    // standbys are never candidates. A refusal, or `out` set.
    std::optional<Response> choose_node(const DirectoryMaps& maps, const std::string& name,
                                        const std::optional<std::string>& node_name,
                                        std::optional<std::string> region,
                                        const NodeRow*& out) {
        if (node_name) {
            auto it = maps.nodes.find(*node_name);
            if (it == maps.nodes.end()) {
                // With a region named whose nodes this directory keeps (a region's router's own,
                // or one the global directory keeps), a node not here is not in that region: the
                // two disagree (409), whether or not the node is another region's.
                if (region && maps.keeps_nodes_of(*region)) {
                    return Router::error(
                        409, "node `" + *node_name + "` is not in region `" + *region + "`");
                }
                return Router::error(404, "no node `" + *node_name + "`");
            }
            // A region's router keeps its region's nodes, a node recorded with none among them.
            const bool in_region = region && (it->second.region == *region ||
                                              (it->second.region.empty() && maps.scope == *region));
            if (region && !in_region) {
                return Router::error(409, "node `" + *node_name + "` is in region `" +
                                              it->second.region + "`, not `" + *region + "`");
            }
            if (maps.is_standby(*node_name)) {
                return Router::error(
                    409, "node `" + *node_name + "` is a standby: it holds no tenant of its own");
            }
            out = &it->second;
            return std::nullopt;
        }
        const bool by_default = !region && router_.options().default_region;
        if (by_default) region = router_.options().default_region;
        auto placed = place_tenant(maps, region, {}, [&](const NodeRow& n) {
            return router_.placement_bytes(n, a_.request_id);
        });
        if (const NodeRow* const* node = std::get_if<const NodeRow*>(&placed)) {
            out = *node;
            return std::nullopt;
        }
        switch (std::get<NoTenantPlace>(placed)) {
            case NoTenantPlace::no_node:
                if (!region && !maps.regions.empty()) {
                    // Every node is in a region keeping its own directory: which one is the
                    // caller's to say (the global directory knows none of their nodes' bytes).
                    return Router::error(
                        409, "there is no node in the global directory to place `" + name +
                                 "` on: every region keeps its own directory, so name one "
                                 "(`region`), or start the router with --default-region");
                }
                if (!region) {
                    return Router::error(409, "there is no node to place `" + name +
                                                  "` on: add one with PUT /_shard/nodes/<n>");
                }
                return Router::error(404, "no region `" + *region + "`" +
                                              (by_default ? ": --default-region names it, and "
                                                            "no node is in it"
                                                          : ""));
            case NoTenantPlace::only_excluded:  // nothing is excluded from a create
            case NoTenantPlace::standbys_only:
                return Router::error(409, "every node to place `" + name + "` on is a standby");
            case NoTenantPlace::none_answered:
                break;
        }
        Response r = Router::error(503, "no node answered: `" + name + "` was not created");
        r.header("Retry-After", "1");
        return r;
    }

    // §6.4 Delete: the node first (204 or 404 is done), then its copies (best effort), then the
    // row, so a tenant is never unroutable while its file still serves.
    Response delete_tenant(const std::string& name) {
        AskedClaim claim(router_, name, "delete");  // §6.1
        if (!claim.held) return busy(name, "delete");
        auto maps = router_.directory().maps();
        auto it = maps->tenants.find(name);
        if (it == maps->tenants.end()) {
            return Router::error(404, "tenant `" + name + "` is not in the directory");
        }
        if (std::optional<RelayTo> home = two_level_home(name)) {  // §11.4
            return router_.two_level()->remove(it->second, *home, asker());
        }
        auto n = maps->nodes.find(it->second.node);
        if (n != maps->nodes.end()) {
            NodeAnswer a = router_.node_calls().remove(n->second, name, a_.request_id);
            if (!a.answered) return Router::error(502, a.said(n->second));
            if (!a.gone()) {
                if (a.status >= 500) {
                    return Router::error(502, "node `" + n->second.name + "` answered " +
                                                  std::to_string(a.status) + " to the delete");
                }
                return json(a.status, std::move(a.body));
            }
        }
        router_.copies().deleted(it->second, *maps, a_.request_id);
        if (engine::Status st = router_.directory().remove_tenant(name); !st.is_ok()) {
            return Router::error(500, "the directory could not forget tenant `" + name +
                                          "`: " + st.to_string());
        }
        Response r;
        r.status = 204;
        r.content_type = "";
        return r;
    }

    Router& router_;
    const server::Request& request_;
    const Router::Answering& a_;
    std::string relayed_;  // the client a valid relay mark names (§11.5), "" for a direct request
};

}  // namespace

http::Response Router::serve_api(const server::Request& request, const Answering& a) {
    return Api(*this, request, a).serve();
}

}  // namespace fenec::shard
