// shard/api.cc: the `/_shard/` API's first part (router.md §6): nodes registered, listed and
// removed; tenants created on a node (by the fewest bytes, or the one named), read, listed and
// deleted. Runs on the router's API workers: it waits on nodes (shard/upstream.h) and on the
// directory's fsync. Every change is one audit line. Moves, copies, failover, quotas, regions
// and the query across tenants are later work and answer 404 naming the route.
#include <simdjson.h>

#include <algorithm>
#include <optional>

#include "json/writer.h"
#include "shard/move.h"
#include "shard/router.h"

namespace fenec::shard {

namespace {

using Response = http::Response;

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
    // A member as JSON text, for passing on.
    std::optional<std::string> raw(std::string_view key) const {
        if (empty) return std::nullopt;
        simdjson::dom::element e;
        if (object.at_key(key).get(e) || e.is_null()) return std::nullopt;
        return simdjson::minify(e);
    }
};

struct Hello {
    bool answered = false;
    int status = 0;          // the node's, when it refused
    std::string why;         // when not answered or refused
    uint64_t disk_bytes = 0;
    std::string lease = "unknown";
};

}  // namespace

namespace {

// GET /_admin/hello with the node's token (§6.3, §13). A node that does not have it yet answers
// 404, and then GET /_admin/tenants proves the token and gives the bytes as their sum.
Hello hello(Router& router, const std::string& node, const std::string& addr,
            const std::string& token, const std::string& request_id) {
    Hello h;
    NodeRow row;
    row.name = node;
    row.addr = addr;
    row.token = token;
    auto ask = [&](std::string target) {
        return router.upstream().admin(row, {.method = "GET",
                                             .target = std::move(target),
                                             .request_id = request_id,
                                             .resendable = true});
    };
    server::CallResult w = ask("/_admin/hello");
    if (w.answer && w.answer->status == 404) w = ask("/_admin/tenants");
    if (!w.answer) {
        h.why = w.error.message;
        return h;
    }
    h.status = w.answer->status;
    if (h.status != 200) {
        h.why = "node `" + node + "` (" + addr + ") answered " + std::to_string(h.status) +
                (h.status == 401 || h.status == 403 ? ": it refused the token" : "");
        return h;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(w.answer->body).get(doc)) {
        h.why = "node `" + node + "` answered something that is not JSON";
        return h;
    }
    h.answered = true;
    if (doc.is_array()) {  // /_admin/tenants: the bytes of each
        for (auto t : doc.get_array()) {
            uint64_t b = 0;
            if (!t["bytes"].get_uint64().get(b)) h.disk_bytes += b;
        }
        return h;
    }
    uint64_t b = 0;
    if (!doc["disk_bytes"].get_uint64().get(b)) h.disk_bytes = b;
    bool takes = false;
    if (!doc["takes_leases"].get_bool().get(takes)) h.lease = takes ? "takes" : "none";
    return h;
}

void write_node(json::Writer& w, const NodeRow& n, const DirectoryMaps& maps) {
    size_t tenants = 0;
    for (const auto& [name, t] : maps.tenants) tenants += t.node == n.name;
    w.begin_object();
    w.key("name");
    w.string(n.name);
    w.key("addr");
    w.string(n.addr);
    w.key("region");
    w.string(n.region);
    w.key("zone");
    w.string(n.zone);
    w.key("tenants");
    w.uint64(tenants);
    w.key("replicas");
    w.uint64(0);
    w.end_object();
}

void write_tenant(json::Writer& w, const TenantRow& t, const DirectoryMaps& maps, bool one,
                  std::optional<uint64_t> bytes) {
    auto n = maps.nodes.find(t.node);
    w.begin_object();
    w.key("name");
    w.string(t.name);
    w.key("node");
    w.string(t.node);
    w.key("state");
    w.string(t.state);
    w.key("region");
    w.string(n == maps.nodes.end() ? "" : n->second.region);
    if (one) {
        w.key("zone");
        w.string(n == maps.nodes.end() ? "" : n->second.zone);
        if (!t.moving_to.empty()) {
            w.key("moving_to");
            w.string(t.moving_to);
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

Response json(int status, std::string body) {
    Response r;
    r.status = status;
    r.body = std::move(body);
    return r;
}

Response method_not_allowed(std::string_view path, std::string_view allow) {
    Response r = Router::error(405, std::string(path) + " takes " + std::string(allow));
    r.header("Allow", std::string(allow));
    return r;
}

class Api {
  public:
    Api(Router& router, const server::Request& request, const Router::Answering& a)
        : router_(router), request_(request), a_(a) {}

    Response serve() {
        const std::vector<std::string> seg = segments(request_.head.path);  // "_shard", ...
        const http::Method m = request_.head.method;
        if (seg.size() == 2 && seg[1] == "nodes") {
            if (m != http::Method::get) return method_not_allowed(request_.head.path, "GET");
            return list_nodes();
        }
        if (seg.size() == 3 && seg[1] == "nodes") {
            if (!valid_name(seg[2])) {
                return Router::error(400, "node name `" + seg[2] + "` is not [a-z0-9_-]{1,64}");
            }
            if (m == http::Method::get) return get_node(seg[2]);
            if (m == http::Method::put) return changed(put_node(seg[2]));
            if (m == http::Method::del) return changed(delete_node(seg[2]));
            return method_not_allowed(request_.head.path, "GET, PUT, DELETE");
        }
        if (seg.size() == 2 && seg[1] == "tenants") {
            if (m != http::Method::get) return method_not_allowed(request_.head.path, "GET");
            return list_tenants();
        }
        if (seg.size() == 3 && seg[1] == "tenants") {
            if (!valid_name(seg[2])) {
                return Router::error(400, "tenant name `" + seg[2] + "` is not [a-z0-9_-]{1,64}");
            }
            if (m == http::Method::get) return get_tenant(seg[2]);
            if (m == http::Method::put) return changed(put_tenant(seg[2]));
            if (m == http::Method::del) return changed(delete_tenant(seg[2]));
            return method_not_allowed(request_.head.path, "GET, PUT, DELETE");
        }
        if (seg.size() == 4 && seg[1] == "tenants" && seg[3] == "move") {  // §7: shard/move.cc
            if (!valid_name(seg[2])) {
                return Router::error(400, "tenant name `" + seg[2] + "` is not [a-z0-9_-]{1,64}");
            }
            return changed(serve_move(router_, request_, a_, seg[2]));
        }
        return Router::error(404, "no route " + request_.head.path +
                                      ": /_shard/ serves nodes and tenants in this version");
    }

  private:
    Response changed(Response r) {
        router_.audit_admin(request_, a_, r.status);
        return r;
    }

    Response list_nodes() {
        auto maps = router_.directory().maps();
        Response r;
        json::Writer w(r.body);
        w.begin_array();
        for (const auto& [name, n] : maps->nodes) write_node(w, n, *maps);
        w.end_array();
        return r;
    }

    Response get_node(const std::string& name) {
        auto maps = router_.directory().maps();
        auto it = maps->nodes.find(name);
        if (it == maps->nodes.end()) return Router::error(404, "no node `" + name + "`");
        Response r;
        json::Writer w(r.body);
        write_node(w, it->second, *maps);
        return r;
    }

    // §6.3: addr and token required for a new node; a field left out is the one recorded.
    Response put_node(const std::string& name) {
        Body body(request_.body);
        if (!body.error.empty()) return Router::error(400, body.error);
        if (std::string u = body.unknown({"addr", "token", "region", "zone", "standby"}); !u.empty()) {
            return Router::error(400, "unknown field `" + u + "`: a node takes addr, token, region, "
                                      "zone and standby");
        }
        std::string bad;
        auto addr = body.text("addr", bad);
        auto token = body.text("token", bad);
        auto region = body.text("region", bad);
        auto zone = body.text("zone", bad);
        if (!bad.empty()) return Router::error(400, "field `" + bad + "` must be a string");
        if (body.raw("standby")) {
            return Router::error(400, "field `standby`: pairs are not served by this version");
        }
        auto maps = router_.directory().maps();
        auto it = maps->nodes.find(name);
        const bool fresh = it == maps->nodes.end();
        if (fresh && (!addr || !token)) {
            return Router::error(400, std::string("a new node needs `") +
                                          (!addr ? "addr" : "token") + "`");
        }
        NodeRow row = fresh ? NodeRow{} : it->second;
        row.name = name;
        if (addr) row.addr = *addr;
        if (token) row.token = *token;
        if (zone) row.zone = *zone;
        if (addr && (addr->rfind(':') == std::string::npos || addr->find('/') != std::string::npos)) {
            return Router::error(400, "field `addr`: `" + *addr + "` is not host:port");
        }
        for (const auto& [field, v] : {std::pair{"region", region}, std::pair{"zone", zone}}) {
            if (v && !v->empty() && !valid_name(*v)) {
                return Router::error(400, std::string("field `") + field + "`: `" + *v +
                                              "` is not [a-z0-9_-]{1,64}");
            }
        }
        if (region && *region != row.region) {
            size_t held = 0;
            for (const auto& [tn, t] : maps->tenants) held += t.node == name;
            if (held > 0) {
                Response r = Router::error(409, "node `" + name + "` holds " + std::to_string(held) +
                                                    " tenants and 0 replicas: move them off "
                                                    "before changing its region");
                return r;
            }
            row.region = *region;
        }
        // The node is asked before anything is written (§6.3).
        Hello h = hello(router_, name, row.addr, row.token, a_.request_id);
        if (!h.answered) {
            Response r = Router::error(502, h.why.empty() ? "node `" + name + "` did not answer" : h.why);
            return r;
        }
        row.lease = h.lease;
        if (engine::Status st = router_.directory().put_node(row); !st.is_ok()) {
            return Router::error(500, "the directory could not record node `" + name +
                                          "`: " + st.to_string());
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
        w.end_array();
        w.end_object();
        return r;
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
        if (engine::Status st = router_.directory().remove_node(name); !st.is_ok()) {
            return Router::error(500, "the directory could not forget node `" + name +
                                          "`: " + st.to_string());
        }
        Response r;
        json::Writer w(r.body);
        w.begin_object();
        w.key("node");
        w.string(name);
        w.key("unreplicated");
        w.begin_array();
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
                server::CallResult whole = router_.upstream().admin(n, {.method = "GET",
                                                                        .target = "/_admin/tenants",
                                                                        .request_id = a_.request_id,
                                                                        .resendable = true});
                if (!whole.answer || whole.answer->status != 200) continue;
                simdjson::dom::parser parser;
                simdjson::dom::element doc;
                if (parser.parse(whole.answer->body).get(doc) || !doc.is_array()) continue;
                auto& of = bytes[name];
                for (auto t : doc.get_array()) {
                    std::string_view tn;
                    uint64_t b = 0;
                    if (!t["name"].get_string().get(tn) && !t["bytes"].get_uint64().get(b)) {
                        of[std::string(tn)] = b;
                    }
                }
            }
        }
        Response r;
        json::Writer w(r.body);
        w.begin_array();
        for (const auto& [name, t] : maps->tenants) {
            auto n = maps->nodes.find(t.node);
            const std::string node_region = n == maps->nodes.end() ? "" : n->second.region;
            if (region && *region != node_region) continue;
            std::optional<uint64_t> b;
            if (auto of = bytes.find(t.node); of != bytes.end()) {
                if (auto x = of->second.find(name); x != of->second.end()) b = x->second;
            }
            write_tenant(w, t, *maps, false, b);
        }
        w.end_array();
        return r;
    }

    Response get_tenant(const std::string& name) {
        auto maps = router_.directory().maps();
        auto it = maps->tenants.find(name);
        if (it == maps->tenants.end()) {
            return Router::error(404, "tenant `" + name + "` is not in the directory");
        }
        Response r;
        json::Writer w(r.body);
        write_tenant(w, it->second, *maps, true, std::nullopt);
        return r;
    }

    // Claims the tenant for the life of the object (§6.1).
    struct Claim {
        Router& router;
        std::string tenant;
        bool held;
        Claim(Router& r, std::string t, std::string_view what)
            : router(r), tenant(std::move(t)), held(r.claim(tenant, what)) {}
        ~Claim() {
            if (held) router.release(tenant);
        }
    };

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

    // §6.4 Create: the node named, or the one with the fewest bytes (ties by name); the node's
    // PUT /_admin/tenants/<t> with the schema passed through; then the row, synced.
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
        std::optional<std::string> schema = body.raw("schema");
        if (schema && (schema->empty() || schema->front() != '[')) {
            return Router::error(400, "field `schema` must be an array of FenecQL statements");
        }
        Claim claim(router_, name, "create");
        if (!claim.held) return busy(name, "create");
        auto maps = router_.directory().maps();
        if (maps->tenants.contains(name)) {
            return Router::error(409, "tenant `" + name + "` exists, on node `" +
                                          maps->tenants.at(name).node + "`");
        }
        const NodeRow* node = nullptr;
        if (auto refused = place(name, node_name, region, *maps, node)) return *refused;
        return create_on(name, *node, schema);
    }

    // Where a new tenant goes: the node named (in the region, when one is named too), else the
    // region's node (or any) with the fewest bytes, by name on a tie; or the refusal.
    std::optional<Response> place(const std::string& name,
                                  const std::optional<std::string>& node_name,
                                  const std::optional<std::string>& region,
                                  const DirectoryMaps& maps, const NodeRow*& node) {
        if (node_name) {
            auto it = maps.nodes.find(*node_name);
            if (it == maps.nodes.end()) return Router::error(404, "no node `" + *node_name + "`");
            if (region && it->second.region != *region) {
                return Router::error(409, "node `" + *node_name + "` is in region `" +
                                              it->second.region + "`, not `" + *region + "`");
            }
            node = &it->second;
            return std::nullopt;
        }
        std::optional<std::pair<uint64_t, const NodeRow*>> best;
        bool any = false;
        for (const auto& [n, row] : maps.nodes) {  // by name: ties go to the first
            if (region && row.region != *region) continue;
            any = true;
            Hello h = hello(router_, n, row.addr, row.token, a_.request_id);
            if (!h.answered) continue;
            if (!best || h.disk_bytes < best->first) best = {h.disk_bytes, &row};
        }
        if (!any) {
            return region ? Router::error(404, "no region `" + *region + "`")
                          : Router::error(409, "there is no node to place `" + name +
                                                   "` on: "
                                                   "add one with PUT /_shard/nodes/<n>");
        }
        if (!best) {
            Response r = Router::error(503, "no node answered: `" + name + "` was not created");
            r.header("Retry-After", "1");
            return r;
        }
        node = best->second;
        return std::nullopt;
    }

    // The tenant made on `node` (its schema passed through), then its row written and synced;
    // a row that cannot be written takes the node's file away again.
    Response create_on(const std::string& name, const NodeRow& node,
                       const std::optional<std::string>& schema) {
        const std::string node_body = schema ? "{\"schema\":" + *schema + "}" : "";
        server::CallResult whole =
            router_.upstream().admin(node, {.method = "PUT",
                                            .target = "/_admin/tenants/" + name,
                                            .request_id = a_.request_id,
                                            .body = node_body});
        if (!whole.answer) return Router::error(502, whole.error.message);
        const int status = whole.answer->status;
        if (status >= 400 && status < 500) {
            // The node's refusal passes through (a refused schema statement created nothing).
            return json(status, std::move(whole.answer->body));
        }
        if (status != 201 && status != 200) {
            return Router::error(502, "node `" + node.name + "` answered " +
                                          std::to_string(status) + " to the create");
        }
        TenantRow row;
        row.name = name;
        row.node = node.name;
        simdjson::dom::parser parser;
        simdjson::dom::element doc;
        std::string_view lineage;
        if (!parser.parse(whole.answer->body).get(doc) && !doc["lineage"].get_string().get(lineage)) {
            row.lineage = std::string(lineage);
        }
        if (engine::Status st = router_.directory().put_tenant(row); !st.is_ok()) {
            // Not recorded: the file on the node goes, so nothing serves a tenant nobody routes.
            (void)router_.upstream().admin(node, {.method = "DELETE",
                                                  .target = "/_admin/tenants/" + name,
                                                  .request_id = a_.request_id});
            return Router::error(500, "the directory could not record tenant `" + name +
                                          "`: " + st.to_string());
        }
        Response r;
        r.status = 201;
        json::Writer w(r.body);
        w.begin_object();
        w.key("tenant");
        w.string(name);
        w.key("node");
        w.string(node.name);
        w.key("region");
        w.string(node.region);
        if (schema) {
            w.key("schema");
            w.raw(*schema);
        }
        w.end_object();
        return r;
    }

    // §6.4 Delete: the node first (204 or 404 is done), then the row, so a tenant is never
    // unroutable while its file still serves.
    Response delete_tenant(const std::string& name) {
        Claim claim(router_, name, "delete");
        if (!claim.held) return busy(name, "delete");
        auto maps = router_.directory().maps();
        auto it = maps->tenants.find(name);
        if (it == maps->tenants.end()) {
            return Router::error(404, "tenant `" + name + "` is not in the directory");
        }
        auto n = maps->nodes.find(it->second.node);
        if (n != maps->nodes.end()) {
            // Deleting twice is harmless: the second is a 404.
            server::CallResult whole =
                router_.upstream().admin(n->second, {.method = "DELETE",
                                                     .target = "/_admin/tenants/" + name,
                                                     .request_id = a_.request_id,
                                                     .resendable = true});
            if (!whole.answer) return Router::error(502, whole.error.message);
            const int status = whole.answer->status;
            if (status != 204 && status != 200 && status != 404) {
                if (status >= 500) {
                    return Router::error(502, "node `" + n->second.name + "` answered " +
                                                  std::to_string(status) + " to the delete");
                }
                return json(status, std::move(whole.answer->body));
            }
        }
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
};

}  // namespace

http::Response Router::serve_api(const server::Request& request, const Answering& a) {
    return Api(*this, request, a).serve();
}

}  // namespace fenec::shard
