// server/node/lease_admin.cc: `POST`, `GET` and `DELETE /_admin/lease` (node-http.md §9.2): the
// grant's one wire format read and answered. The grant logic is Leases' (lease.h); this file
// reads bodies (400 naming the field), answers 409 for a fence or a node without `--lease`, and
// records each 200's answer instant as the last thing before the answer is handed to the loop.
#include "server/node/lease_admin.h"

#include <algorithm>
#include <array>

#include <simdjson.h>

#include "server/node/handlers.h"
#include "server/node/routes.h"

namespace fenec::node {

namespace {

// Authorities are `<16 hex>/<scope>` (router.md §4.1), compared as text; this bounds what a
// body may make the node keep and persist.
constexpr size_t authority_bytes_max = 128;

}  // namespace

void write_holder(json::Writer& w, const std::optional<Holder>& h) {
    if (!h) return w.null();
    w.begin_object();
    w.key("authority");
    w.string(h->authority);
    w.key("term");
    w.uint64(h->term);
    w.key("history");
    if (h->history.empty()) {
        w.null();
    } else {
        w.string(h->history);
    }
    w.end_object();
}

namespace {

void write_lease(json::Writer& w, const std::optional<LeaseFrom>& l) {
    if (!l) return w.null();
    w.begin_object();
    w.key("authority");
    w.string(l->authority);
    w.key("term");
    w.uint64(l->term);
    w.key("history");
    w.string(l->history);
    w.key("grant");
    w.uint64(l->grant);
    w.key("acked");
    w.uint64(l->acked);
    w.key("lease_ms");
    w.int64(l->lease_ms);
    w.end_object();
}

void write_list(json::Writer& w, const std::optional<uint64_t>& list) {
    if (list) {
        w.uint64(*list);
    } else {
        w.null();
    }
}

http::Response fenced_answer(const Node& node, const Fenced& f) {
    return node.refusal(409, f.message, {}, [&](json::Writer& w) {
        w.key("holder");
        write_holder(w, f.holder);
    });
}

bool valid_authority(std::string_view s) {
    if (s.empty() || s.size() > authority_bytes_max) return false;
    for (char c : s) {
        if (c < 0x21 || c > 0x7e) return false;
    }
    return true;
}

// Reads one body member into `out`; a message naming the field when it is missing or wrong.
struct Fields {
    simdjson::dom::object obj;

    std::optional<std::string> authority(std::string& out) {
        std::string_view v;
        if (obj["authority"].get(v) || !valid_authority(v)) {
            return "`authority` must be a string of 1 to " + std::to_string(authority_bytes_max) +
                   " printable bytes";
        }
        out = std::string(v);
        return std::nullopt;
    }
    std::optional<std::string> count(const char* name, uint64_t& out) {
        if (obj[name].get(out)) return "`" + std::string(name) + "` must be a whole number >= 0";
        return std::nullopt;
    }
};

constexpr std::array<std::string_view, 8> grant_fields = {"authority", "term",     "history", "grant",
                                                          "acked",     "lease_ms", "list",    "tenants"};

}  // namespace

std::optional<Grant> read_grant(std::string_view body, std::string& error) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(body);
    simdjson::dom::element doc;
    Fields r;
    if (parser.parse(padded).get(doc) || doc.get(r.obj)) {
        error = "a grant is a JSON object {\"authority\",\"term\",\"history\",\"grant\",\"acked\","
                "\"lease_ms\",\"list\",\"tenants\"}";
        return std::nullopt;
    }
    for (auto [key, value] : r.obj) {
        if (std::find(grant_fields.begin(), grant_fields.end(), key) == grant_fields.end()) {
            error = "a grant has no member `" + std::string(key) + "`";
            return std::nullopt;
        }
    }
    Grant g;
    std::string_view history;
    int64_t lease_ms = 0;
    std::optional<std::string> e = r.authority(g.authority);
    if (!e) e = r.count("term", g.term);
    if (!e && (r.obj["history"].get(history) || !engine::format::parse_hex16(history))) {
        e = "`history` must be 16 lowercase hex digits";
    }
    if (!e) e = r.count("grant", g.grant);
    if (!e) e = r.count("acked", g.acked);
    if (!e && (r.obj["lease_ms"].get(lease_ms) || lease_ms <= 0)) {
        e = "`lease_ms` must be a whole number > 0";
    }
    if (!e) e = r.count("list", g.list);
    simdjson::dom::element tenants;
    if (!e && !r.obj["tenants"].get(tenants) && !tenants.is_null()) {
        simdjson::dom::array arr;
        if (tenants.get(arr)) {
            e = "`tenants` must be an array of tenant names";
        } else {
            g.tenants.emplace();
            for (simdjson::dom::element t : arr) {
                std::string_view name;
                if (t.get(name) || !valid_tenant_name(name)) {
                    e = "`tenants` holds a name that is not [a-z0-9_-]{1,64}";
                    break;
                }
                g.tenants->emplace_back(name);
            }
        }
    }
    if (e) {
        error = std::move(*e);
        return std::nullopt;
    }
    g.history = std::string(history);
    g.lease_ms = lease_ms;
    return g;
}

std::optional<std::string> read_release(std::string_view body, std::string& authority,
                                        uint64_t& term) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(body);
    simdjson::dom::element doc;
    Fields r;
    if (parser.parse(padded).get(doc) || doc.get(r.obj)) {
        return "a release is a JSON object {\"authority\",\"term\"}";
    }
    for (auto [key, value] : r.obj) {
        if (key != "authority" && key != "term") return "a release has no member `" + std::string(key) + "`";
    }
    if (auto e = r.authority(authority)) return e;
    return r.count("term", term);
}

namespace {

void post_grant(Node& node, Call& call, Leases& leases) {
    std::string error;
    std::optional<Grant> g = read_grant(call.request.body, error);
    if (!g) return node.answer(call, node.refusal(400, error));
    GrantOutcome out = leases.take(*g);
    if (out.fence.fenced) node.counters().lease_grants->with({"fenced"}).inc();
    if (!out.fence.ok()) return node.answer(call, fence_refusal(node, out.fence));
    const GrantAnswer& a = out.answer;
    node.counters().lease_grants->with({a.outcome}).inc();
    std::string body;
    json::Writer w(body);
    w.begin_object();
    w.key("node");
    w.string(node.options().node_name);
    w.key("grant");
    w.uint64(a.grant);
    w.key("took");
    w.boolean(a.took);
    w.key("ran");
    w.boolean(a.ran);
    w.key("left_ms");
    w.int64(a.left_ms);
    w.key("list");
    write_list(w, a.list);
    w.key("tenants");
    w.uint64(a.tenants);
    w.key("lease");
    write_lease(w, a.lease);
    w.end_object();
    // §9.3 step 5: the answer instant, kept for every 200. It is read here, after the body is
    // built and just before the answer goes to the loop that writes its first byte, never after
    // it: an instant earlier than the bytes only shortens the lease a later grant runs from it.
    leases.answered(g->authority, g->term, g->grant);
    node.answer(call, json_answer(200, std::move(body)));
}

void get_lease(Node& node, Call& call, const Leases* leases) {
    std::string body;
    json::Writer w(body);
    w.begin_object();
    w.key("takes_leases");
    w.boolean(leases != nullptr);
    const LeaseView v = leases ? leases->view() : LeaseView{};
    w.key("holder");
    write_holder(w, v.holder);
    w.key("lease");
    write_lease(w, v.lease);
    w.key("left_ms");
    w.int64(v.left_ms);
    w.key("list");
    write_list(w, v.list);
    w.key("tenants");
    w.begin_array();
    for (const std::string& t : v.tenants) w.string(t);
    w.end_array();
    w.end_object();
    node.answer(call, json_answer(200, std::move(body)));
}

void delete_lease(Node& node, Call& call, Leases& leases) {
    std::string authority;
    uint64_t term = 0;
    if (auto e = read_release(call.request.body, authority, term)) return node.answer(call, node.refusal(400, *e));
    bool released = false;
    FenceOutcome f = leases.release(authority, term, released);
    if (!f.ok()) return node.answer(call, fence_refusal(node, f));
    node.answer(call, json_answer(200, released ? "{\"released\":true}" : "{\"released\":false}"));
}

}  // namespace

http::Response fence_refusal(const Node& node, const FenceOutcome& f) {
    if (f.fenced) return fenced_answer(node, *f.fenced);
    return node.refusal(500, std::string(f.status.message()));
}

void serve_lease(Node& node, const std::shared_ptr<Call>& call) {
    const http::Method m = call->request.head.method;
    Leases* leases = node.leases();
    if (!route_takes(*call)) return node.answer(*call, method_refusal(node, *call));
    if (m == http::Method::get || m == http::Method::head) return get_lease(node, *call, leases);
    if (!leases) {
        return node.answer(
            *call, node.refusal(
                       409, node.options().node_name + " takes no lease (started without --lease)",
                       {}, [](json::Writer& w) {
                           w.key("takes_leases");
                           w.boolean(false);
                       }));
    }
    if (m == http::Method::post) return post_grant(node, *call, *leases);
    delete_lease(node, *call, *leases);
}

}  // namespace fenec::node
