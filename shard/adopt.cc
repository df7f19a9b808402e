// shard/adopt.cc: a region moved out of the global directory (shard/adopt.h, router.md §11.9).
#include "shard/adopt.h"

#include <simdjson.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <variant>

#include "json/writer.h"
#include "server/runtime/client.h"
#include "server/runtime/mark.h"
#include "shard/cluster.h"
#include "shard/log_line.h"
#include "shard/node_calls.h"
#include "shard/quota.h"
#include "shard/relay.h"
#include "shard/test_hooks.h"

namespace fenec::shard {

namespace {

using Response = http::Response;

constexpr std::string_view adopt_target = "/_shard/adopt";

void write_text(json::Writer& w, std::string_view key, const std::string& value) {
    if (value.empty()) return;
    w.key(key);
    w.string(value);
}

}  // namespace

std::string adopt_body(const RegionRows& rows) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("region");
    w.string(rows.region);
    w.key("nodes");
    w.begin_array();
    for (const NodeRow& n : rows.nodes) {
        w.begin_object();
        w.key("name");
        w.string(n.name);
        w.key("addr");
        w.string(n.addr);
        write_text(w, "zone", n.zone);
        w.key("lease");
        w.string(n.lease);
        write_text(w, "token_env", n.token_env);
        write_text(w, "token_file", n.token_file);
        if (n.token_env.empty() && n.token_file.empty()) write_text(w, "token", n.token);
        w.end_object();
    }
    w.end_array();
    w.key("pairs");
    w.begin_array();
    for (const auto& [node, standby] : rows.pairs) {
        w.begin_object();
        w.key("node");
        w.string(node);
        w.key("standby");
        w.string(standby);
        w.end_object();
    }
    w.end_array();
    w.key("replicas");
    w.begin_array();
    for (const auto& [tenant, node] : rows.replicas) {
        w.begin_object();
        w.key("tenant");
        w.string(tenant);
        w.key("node");
        w.string(node);
        w.end_object();
    }
    w.end_array();
    w.key("tenants");
    w.begin_array();
    for (const TenantRow& t : rows.tenants) {
        w.begin_object();
        w.key("name");
        w.string(t.name);
        w.key("node");
        w.string(t.node);
        w.key("state");
        w.string(t.state);
        write_text(w, "moving_to", t.moving_to);
        write_text(w, "moving_from", t.moving_from);
        write_text(w, "lineage", t.lineage);
        write_text(w, "forked", t.forked);
        write_text(w, "failed_from", t.failed_from);
        if (t.quota) {
            w.key("quota");
            w.raw(quota_body(t.quota));
        }
        w.end_object();
    }
    w.end_array();
    w.end_object();
    return out;
}

namespace {

// Reads one array of objects whose members are all strings (but `quota`, an object, handed to
// `quota_of` as text), each member named in `allowed`; `take` gets each object's members.
using Members = std::map<std::string, std::string, std::less<>>;

std::string read_objects(simdjson::dom::object doc, std::string_view field,
                         std::initializer_list<std::string_view> allowed,
                         std::initializer_list<std::string_view> required,
                         const std::function<std::string(Members&)>& take) {
    simdjson::dom::element e;
    if (doc[field].get(e)) return "";  // absent: none
    simdjson::dom::array a;
    if (e.get_array().get(a)) return "field `" + std::string(field) + "` must be an array";
    for (simdjson::dom::element item : a) {
        simdjson::dom::object o;
        if (item.get_object().get(o)) {
            return "field `" + std::string(field) + "`: each must be a JSON object";
        }
        Members m;
        for (auto member : o) {
            bool known = false;
            for (std::string_view k : allowed) known = known || member.key == k;
            if (!known) {
                return "field `" + std::string(field) + "`: unknown member `" +
                       std::string(member.key) + "`";
            }
            if (member.key == "quota") {
                if (!member.value.is_object()) return "field `tenants`: `quota` must be an object";
                m.emplace(member.key, simdjson::minify(member.value));
                continue;
            }
            std::string_view s;
            if (member.value.get_string().get(s)) {
                return "field `" + std::string(field) + "`: member `" + std::string(member.key) +
                       "` must be a string";
            }
            m.emplace(member.key, s);
        }
        for (std::string_view k : required) {
            if (!m.contains(k)) {
                return "field `" + std::string(field) + "`: each needs `" + std::string(k) + "`";
            }
        }
        if (std::string why = take(m); !why.empty()) return why;
    }
    return "";
}

std::string member(Members& m, std::string_view key) {
    auto it = m.find(key);
    return it == m.end() ? std::string() : std::move(it->second);
}

std::string check_name(std::string_view what, const std::string& name) {
    return valid_name(name) ? "" : std::string(what) + " `" + name + "` is not [a-z0-9_-]{1,64}";
}

}  // namespace

ParsedRegionRows parse_adopt_body(std::string_view body) {
    ParsedRegionRows out;
    auto refuse = [&](std::string why) {
        out.rows = {};
        out.error = std::move(why);
        return out;
    };
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::object o;
    if (parser.parse(body.data(), body.size()).get(doc)) return refuse("the body is not JSON");
    if (doc.get_object().get(o)) return refuse("the body is not a JSON object");
    for (auto field : o) {
        if (field.key != "region" && field.key != "nodes" && field.key != "pairs" &&
            field.key != "replicas" && field.key != "tenants") {
            return refuse("unknown field `" + std::string(field.key) +
                          "`: an adoption takes region, nodes, pairs, replicas and tenants");
        }
    }
    std::string_view region;
    if (o["region"].get_string().get(region) || !valid_name(region)) {
        return refuse("field `region` must be a region's name, [a-z0-9_-]{1,64}");
    }
    RegionRows& rows = out.rows;
    rows.region = std::string(region);
    std::set<std::string, std::less<>> nodes;
    std::string why = read_objects(
        o, "nodes", {"name", "addr", "zone", "lease", "token", "token_env", "token_file"},
        {"name", "addr"}, [&](Members& m) -> std::string {
            NodeRow n;
            n.name = member(m, "name");
            n.addr = member(m, "addr");
            n.region = rows.region;
            n.zone = member(m, "zone");
            n.lease = m.contains("lease") ? member(m, "lease") : "unknown";
            n.token = member(m, "token");
            n.token_env = member(m, "token_env");
            n.token_file = member(m, "token_file");
            if (std::string bad = check_name("node", n.name); !bad.empty()) return bad;
            if (!n.zone.empty() && !valid_name(n.zone)) return "zone `" + n.zone + "` is not valid";
            if (n.lease != "takes" && n.lease != "none" && n.lease != "unknown") {
                return "node `" + n.name + "`: lease must be takes, none or unknown";
            }
            if (!nodes.insert(n.name).second) return "node `" + n.name + "` is named twice";
            rows.nodes.push_back(std::move(n));
            return "";
        });
    if (!why.empty()) return refuse(why);
    auto known_node = [&](const std::string& node) {
        return nodes.contains(node) ? "" : "node `" + node + "` is not among the nodes adopted";
    };
    why = read_objects(o, "pairs", {"node", "standby"}, {"node", "standby"},
                       [&](Members& m) -> std::string {
                           std::string node = member(m, "node"), standby = member(m, "standby");
                           if (std::string bad = known_node(node); !bad.empty()) return bad;
                           if (std::string bad = known_node(standby); !bad.empty()) return bad;
                           rows.pairs.emplace_back(std::move(node), std::move(standby));
                           return "";
                       });
    if (!why.empty()) return refuse(why);
    why = read_objects(o, "replicas", {"tenant", "node"}, {"tenant", "node"},
                       [&](Members& m) -> std::string {
                           std::string tenant = member(m, "tenant"), node = member(m, "node");
                           if (std::string bad = check_name("tenant", tenant); !bad.empty()) {
                               return bad;
                           }
                           if (std::string bad = known_node(node); !bad.empty()) return bad;
                           rows.replicas.emplace_back(std::move(tenant), std::move(node));
                           return "";
                       });
    if (!why.empty()) return refuse(why);
    std::set<std::string, std::less<>> tenants;
    why = read_objects(
        o, "tenants",
        {"name", "node", "state", "moving_to", "moving_from", "lineage", "forked", "failed_from",
         "quota"},
        {"name", "node"}, [&](Members& m) -> std::string {
            TenantRow t;
            t.name = member(m, "name");
            t.node = member(m, "node");
            t.state = m.contains("state") ? member(m, "state") : "active";
            t.moving_to = member(m, "moving_to");
            t.moving_from = member(m, "moving_from");
            t.lineage = member(m, "lineage");
            t.forked = member(m, "forked");
            t.failed_from = member(m, "failed_from");
            if (std::string bad = check_name("tenant", t.name); !bad.empty()) return bad;
            if (std::string bad = known_node(t.node); !bad.empty()) return bad;
            if (t.state != "active") {
                return "tenant `" + t.name + "` is " + t.state + ": only active tenants move";
            }
            if (m.contains("quota")) {
                std::string error;
                t.quota = parse_quota(m.at("quota"), error);
                if (!t.quota) return "tenant `" + t.name + "`'s quota: " + error;
            }
            if (!tenants.insert(t.name).second) return "tenant `" + t.name + "` is named twice";
            rows.tenants.push_back(std::move(t));
            return "";
        });
    if (!why.empty()) return refuse(why);
    for (const auto& [tenant, node] : rows.replicas) {
        if (!tenants.contains(tenant)) {
            return refuse("replica of `" + tenant + "`: no such tenant among those adopted");
        }
    }
    return out;
}

namespace {

// An error answer with `fields` (text) beside `error`.
Response with_members(Response r, std::initializer_list<std::pair<const char*, std::string>> f) {
    r.body.pop_back();  // the error object's `}`
    for (const auto& [key, value] : f) {
        r.body += ",";
        json::Writer(r.body).string(key);
        r.body += ":";
        json::Writer(r.body).string(value);
    }
    r.body += "}";
    return r;
}

// `sent`: the adoption went whole and no answer came, so the region's router may hold the rows
// already; this directory has changed nothing either way, and the adoption asked again is taken
// as once (rows that replace rows of their name).
Response unreachable(const std::string& region, const std::string& url, const std::string& why,
                     bool sent = false) {
    Response r = with_members(
        Router::error(503, "region `" + region + "`'s router " + url +
                               " did not take the adoption (" + why + "): " +
                               (sent ? "this directory changed nothing, but that router may have "
                                       "recorded the rows; ask again before any other change of "
                                       "the region"
                                     : "nothing changed; ask again")),
        {{"region", region}, {"router", url}});
    r.header("Retry-After", "5");
    return r;
}

// r's rows in the global directory, or the 409 that keeps them there.
std::variant<RegionRows, Response> rows_of(const DirectoryMaps& maps, const std::string& region) {
    RegionRows rows;
    rows.region = region;
    std::set<std::string, std::less<>> nodes;
    for (const auto& [name, n] : maps.nodes) {
        if (n.region != region) continue;
        nodes.insert(name);
        rows.nodes.push_back(n);
    }
    for (const auto& [node, standby] : maps.pairs) {
        if (nodes.contains(node) != nodes.contains(standby)) {
            return Router::error(409, "node `" + node + "`'s pair with `" + standby +
                                          "` crosses out of region `" + region +
                                          "`: remove the pair first");
        }
        if (nodes.contains(node)) rows.pairs.emplace_back(node, standby);
    }
    // A thaw owed there is paid by this router when the node answers; the region's router would
    // never hear of it, and the copy would stay frozen.
    for (const auto& [node, tenants] : maps.thaws) {
        if (!nodes.contains(node) || tenants.empty()) continue;
        return Router::error(409, "node `" + node + "` of region `" + region +
                                      "` is owed the thaw of `" + tenants.begin()->first +
                                      "`, left frozen by a move undone: let it answer (the thaw " +
                                      "is asked then) or remove it first");
    }
    for (const auto& [name, t] : maps.tenants) {
        if (!nodes.contains(t.node)) continue;
        if (t.state != "active") {
            return Router::error(409, "tenant `" + name + "` of region `" + region + "` is " +
                                          t.state + ": let it settle first");
        }
        rows.tenants.push_back(t);
        if (auto r = maps.replicas.find(name); r != maps.replicas.end()) {
            if (!nodes.contains(r->second)) {
                return Router::error(409, "tenant `" + name + "`'s replica is on `" + r->second +
                                              "`, outside region `" + region +
                                              "`: remove it first");
            }
            rows.replicas.emplace_back(name, r->second);
        }
    }
    // A replica on r's nodes of a tenant placed outside r would be left naming a node this
    // directory no longer keeps.
    for (const auto& [tenant, node] : maps.replicas) {
        auto t = maps.tenants.find(tenant);
        if (nodes.contains(node) && t != maps.tenants.end() && !nodes.contains(t->second.node)) {
            return Router::error(409, "tenant `" + tenant + "` outside region `" + region +
                                          "` has its replica on `" + node +
                                          "`: remove it first");
        }
    }
    return rows;
}

}  // namespace

Response move_region_out(Router& router, const server::Request& request, const std::string& region,
                         const std::vector<std::string>& routers, const Router::Answering& a) {
    auto maps = router.directory().maps();
    auto got = rows_of(*maps, region);
    if (Response* refused = std::get_if<Response>(&got)) return std::move(*refused);
    RegionRows rows = std::move(std::get<RegionRows>(got));
    // Every tenant held for the whole of it: no move, failover or delete crosses the hand-over.
    std::vector<std::unique_ptr<TenantClaim>> claims;
    for (const TenantRow& t : rows.tenants) {
        claims.push_back(std::make_unique<TenantClaim>(router, t.name, "region"));
        if (!claims.back()->held) {
            return Router::error(409, "tenant `" + t.name + "` is held by " +
                                          router.held_by(t.name) + ": ask again once it is done");
        }
    }
    // A row may have changed before the claims: read them again under them.
    maps = router.directory().maps();
    got = rows_of(*maps, region);
    if (Response* refused = std::get_if<Response>(&got)) return std::move(*refused);
    rows = std::move(std::get<RegionRows>(got));

    // 1. The region's router records them (a relay: marked, with the shared token).
    const std::string& url = routers.front();
    const std::string addr = replica_addr(url);
    server::CallRequest c;
    c.peer = url;
    c.peer_text = "the router " + url;
    c.addr = addr;
    c.resend_after_sent = true;  // rows that replace rows of their name: twice is once
    c.timeout_ms = router.options().upstream_timeout_ms;
    c.body_bytes_max = 64 << 10;
    http::OutRequest post{.method = "POST", .target = adopt_target, .host = addr};
    post.headers.push_back({"User-Agent", "fenec-shard"});
    post.headers.push_back({"X-Request-Id", a.request_id});
    post.headers.push_back({"Content-Type", "application/json"});
    // http::Header holds views: the values below live until write_request has run.
    std::string relay, bearer;
    if (const std::optional<std::string>& token = router.options().token) {
        const std::string client = peer_host(request.peer);
        relay = client + " " + server::relay_mark(*token, client, a.request_id, "POST", adopt_target);
        bearer = "Bearer " + *token;
        post.headers.push_back({"Fenec-Relay", relay});
        post.headers.push_back({"Authorization", bearer});
    } else {
        post.headers.push_back({"Via", relay_via});
    }
    const std::string body = adopt_body(rows);
    post.body = body;
    http::write_request(post, c.bytes);
    server::BlockingClient client(server::BlockingClient::Options{});
    // Cut by this router's stop (Relays::stop_calls), as a relay is. Sent whole, the adoption may
    // have run there: it is asked again whole (rows that replace rows of their name).
    const server::CallResult answer = client.call(c, {.cancel = &router.relays().stopping()});
    if (!answer.answer) {
        return unreachable(region, url,
                           answer.error.failure == server::CallFailure::cancelled
                               ? Relays::stopped_call(url)
                               : answer.error.message,
                           answer.error.sent_whole);
    }
    if (answer.answer->status >= 500) {
        return unreachable(region, url, "it answered " + std::to_string(answer.answer->status));
    }
    if (answer.answer->status != 200) {
        Response r = with_members(
            Router::error(answer.answer->status == 403 ? 502 : answer.answer->status,
                          "region `" + region + "`'s router " + url + " refused the adoption (" +
                              std::to_string(answer.answer->status) +
                              "): " + node_answers::error_of(answer.answer->body)),
            {{"region", region}, {"router", url}});
        return r;
    }

    test_hooks::stall_after_two_level_step("adopted");  // adopted there, not yet given up here
    // 2. This directory hands them over, one synced block.
    const bool created = !maps->regions.contains(region);
    if (engine::Status st = router.directory().move_region_out(rows, routers); !st.is_ok()) {
        if (st.code() == engine::Code::busy) {  // a tenant created or moved in meanwhile
            log_line("region `" + region + "`: " + st.to_string());
            Response r = Router::error(409, "region `" + region +
                                                "`'s nodes or tenants changed while its "
                                                "router adopted them (a create or a move into it): "
                                                "ask again, and they go too");
            return r;
        }
        log_line("region `" + region + "`: its router " + url +
                 " adopted its rows but this directory could not give them up (" +
                 st.to_string() + "): both keep them until the PUT is asked again");
        return Router::error(500, "the directory could not give region `" + region +
                                      "` up: " + st.to_string() + "; ask again");
    }
    // 3. No grant to them from here on, then the leases they hold from here released.
    router.cluster().changed();
    for (const NodeRow& n : rows.nodes) {
        NodeAnswer released =
            router.node_calls().release_lease(n, maps->authority(), maps->term, a.request_id);
        if (!released.ok()) {
            log_line("region `" + region + "`: node `" + n.name + "`'s lease from this " +
                     "directory was not released (" + released.said(n) +
                     "): it lapses on its own");
        }
    }
    log_line("region `" + region + "` moved out to " + url + ": " +
             std::to_string(rows.nodes.size()) + " nodes, " + std::to_string(rows.tenants.size()) +
             " tenants");

    Response r;
    r.status = created ? 201 : 200;
    json::Writer w(r.body);
    w.begin_object();
    w.key("region");
    w.string(region);
    w.key("routers");
    w.begin_array();
    for (const std::string& u : routers) w.string(u);
    w.end_array();
    w.key("adopted");
    w.begin_object();
    w.key("nodes");
    w.uint64(rows.nodes.size());
    w.key("tenants");
    w.uint64(rows.tenants.size());
    w.end_object();
    w.end_object();
    return r;
}

Response serve_adopt(Router& router, const server::Request& request, const Router::Answering& a) {
    // The relay's mark (§11.5), verified as every router verifies it (shard/relay.h).
    if (relayed_for(request, a.request_id, router.options().token).empty()) {
        return Router::error(403, "POST /_shard/adopt is the global router's, relayed with a "
                                  "valid Fenec-Relay mark: move a region out with PUT "
                                  "/_shard/regions/<r> on the global router");
    }
    const std::optional<std::string>& scope = router.options().region;
    ParsedRegionRows parsed = parse_adopt_body(request.body);
    if (!parsed.error.empty()) return Router::error(400, parsed.error);
    const RegionRows& rows = parsed.rows;
    if (!scope || *scope != rows.region) {
        return Router::error(409, "this router keeps " +
                                      (scope ? "region `" + *scope + "`" : std::string("the global directory")) +
                                      ", not region `" + rows.region + "`");
    }
    auto maps = router.directory().maps();
    // A row of one name here already is this adoption asked again, or a conflict.
    for (const NodeRow& n : rows.nodes) {
        auto it = maps->nodes.find(n.name);
        if (it != maps->nodes.end() && it->second.addr != n.addr) {
            return Router::error(409, "node `" + n.name + "` is here already, at " +
                                          it->second.addr + ", not " + n.addr);
        }
    }
    for (const TenantRow& t : rows.tenants) {
        auto it = maps->tenants.find(t.name);
        if (it != maps->tenants.end() && it->second.node != t.node) {
            return Router::error(409, "tenant `" + t.name + "` is here already, on `" +
                                          it->second.node + "`, not `" + t.node + "`");
        }
    }
    if (engine::Status st = router.directory().adopt_rows(rows); !st.is_ok()) {
        return Router::error(500, "the directory could not record the adoption: " +
                                      st.to_string());
    }
    log_line("region `" + rows.region + "`: adopted " + std::to_string(rows.nodes.size()) +
             " nodes and " + std::to_string(rows.tenants.size()) +
             " tenants from the global directory");
    Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("nodes");
    w.uint64(rows.nodes.size());
    w.key("tenants");
    w.uint64(rows.tenants.size());
    w.end_object();
    return r;
}

}  // namespace fenec::shard
