// server/node/admin.cc: the admin plane (node-http.md §8) as far as the data plane needs it:
// tenants listed, created (with a schema landing as their first block), described, and the
// read-only query (§8.4). Images, freeze, quotas, promotion, following and leases are the admin
// plane's own work (issue 6) and answer 404 naming the route until then.
#include "ql/answer.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "server/audit.h"
#include "server/json_body.h"
#include "server/node/handlers.h"
#include "server/node/replication.h"
#include <simdjson.h>

namespace fenec::node {

namespace {

void audit_admin(Node& node, const Call& call, int status) {
    obs::LineLog* log = node.audit();
    if (!log) return;
    obs::AuditLine line;
    line.at_ms = node.now_ms();
    line.event = obs::AuditEvent::admin;
    line.who.credential = static_cast<obs::Credential>(call.who.credential);
    line.peer = call.request.peer;
    line.request_id = call.request_id;
    line.fields = {{"method", std::string(call.request.head.method_text)},
                   {"path", call.request.head.path},
                   {"tenant", call.tenant},
                   {"status", status}};
    log->write(obs::audit_line(line));
}

// `{"schema":["create collection …",…]}` or an empty body.
std::optional<std::string> schema_of(std::string_view body, std::vector<std::string>& out) {
    if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return std::nullopt;
    simdjson::dom::parser parser;
    simdjson::padded_string padded(body);
    simdjson::dom::element doc;
    if (parser.parse(padded).get(doc)) return "the body is not JSON";
    simdjson::dom::object obj;
    if (doc.get(obj)) return "the body must be an object {\"schema\": [...]}";
    for (auto [key, value] : obj) {
        if (key != "schema") return "unknown member `" + std::string(key) + "`";
        simdjson::dom::array arr;
        if (value.get(arr)) return "`schema` must be an array of statements";
        for (simdjson::dom::element e : arr) {
            std::string_view s;
            if (e.get(s)) return "`schema` must hold statements as strings";
            out.emplace_back(s);
        }
    }
    return std::nullopt;
}

void create_tenant(Node& node, Call& call) {
    std::vector<std::string> schema;
    if (auto e = schema_of(call.request.body, schema)) return node.answer(call, node.refusal(400, *e));
    std::vector<ql::ParsedStatement> parsed;
    for (const std::string& text : schema) {
        auto p = ql::parse(text);
        if (!p) return node.answer(call, error_response(node, p.error()));
        if (p->statement.kind() != ql::StatementKind::create &&
            p->statement.kind() != ql::StatementKind::alter) {
            return node.answer(call, node.refusal(400, "a tenant's schema holds create and alter "
                                                       "statements, not `" +
                                                           std::string(p->statement.first_word()) + "`"));
        }
        parsed.push_back(std::move(p.value()));
    }
    std::optional<ql::Error> failed;
    engine::LineageId lineage;
    engine::Status st = node.registry().create(
        call.tenant,
        [&](Tenant& t) {
            if (parsed.empty()) return engine::Status::ok();
            std::vector<ql::Item> items;
            for (const auto& p : parsed) items.push_back(ql::Item{&p, {}});
            ql::Executor ex(t.db(), t.indexes());
            ql::BlockOutcome o = ex.run_block(items, ql::RunOptions{});
            if (!o.error) return engine::Status::ok();
            failed = *o.error;
            return engine::Status::error(engine::Code::invalid_argument, o.error->message);
        },
        lineage);
    http::Response r;
    if (failed) {
        r = error_response(node, *failed);
    } else if (st.code() == engine::Code::already_exists) {
        r = node.refusal(409, "tenant " + call.tenant + " exists");
    } else if (!st.is_ok()) {
        r = node.refusal(500, "tenant " + call.tenant + " could not be created: " + st.to_string());
    } else {
        r.status = 201;
        ql::JsonWriter w(r.body);
        w.begin_object();
        w.key("created");
        w.string(call.tenant);
        w.key("lineage");
        w.string(hex16(lineage.v));
        w.end_object();
    }
    audit_admin(node, call, r.status);
    node.answer(call, std::move(r));
}

void list_tenants(Node& node, Call& call) {
    http::Response r;
    ql::JsonWriter w(r.body);
    w.begin_array();
    for (const TenantInfo& t : node.registry().list()) {
        w.begin_object();
        w.key("name");
        w.string(t.name);
        w.key("bytes");
        w.uint64(t.bytes);
        w.key("role");
        w.string("primary");
        w.key("open");
        w.boolean(t.open);
        w.key("frozen");
        w.boolean(false);
        w.end_object();
    }
    w.end_array();
    node.answer(call, std::move(r));
}

void describe_tenant(Node& node, Call& call, Tenant& t) {
    http::Response r;
    ql::JsonWriter w(r.body);
    const engine::History h = t.db().history();
    const engine::Usage u = t.db().usage();
    w.begin_object();
    w.key("name");
    w.string(t.name());
    w.key("lineage");
    w.string(hex16(t.db().lineage().v));
    w.key("history");
    w.string(hex16(h.current().v));
    w.key("forks");
    w.begin_array();
    for (const engine::Fork& f : h.forks) {
        w.begin_object();
        w.key("history");
        w.string(hex16(f.history.v));
        w.key("at");
        w.uint64(f.seq.v);
        w.end_object();
    }
    w.end_array();
    w.key("seq");
    w.uint64(u.seq.v);
    w.key("durable");
    w.uint64(u.durable_seq.v);
    w.key("bytes");
    w.uint64(u.file_bytes);
    w.key("role");
    w.string(h.replica || node.replication().following(t.name()) ? "replica" : "primary");
    w.key("open");
    w.boolean(true);
    w.key("frozen");
    w.boolean(t.db().frozen());
    w.key("followers");
    node.replication().write_followers(t.name(), w);
    w.key("following");
    node.replication().write_following(t.name(), w);
    w.end_object();
    node.answer(call, std::move(r));
}

// §8.4: a writing statement is refused before it runs; the rest runs read-only.
void admin_query(Node& node, Call& call, Tenant& t) {
    auto body = json::parse_query_body(call.request.body);
    if (!body) return node.answer(call, node.refusal(body.error().status, body.error().message));
    auto parsed = ql::parse(body->query);
    if (!parsed) return node.answer(call, error_response(node, parsed.error()));
    ql::Executor ex(t.db(), t.indexes());
    ql::Item item{&parsed.value(), body->params};
    ql::RunOptions o;
    o.read_only = true;
    ql::BlockOutcome out = ex.run_block(std::span(&item, 1), o);
    if (out.error) return node.answer(call, error_response(node, *out.error));
    http::Response r;
    r.body = ql::to_json(out.answers.front());
    r.header("Fenec-Seq", std::to_string(out.seq.v));
    r.header("Fenec-History", hex16(out.history.v));
    node.answer(call, std::move(r));
}

}  // namespace

void serve_admin(Node& node, const std::shared_ptr<Call>& call) {
    const std::vector<std::string>& seg = call->rest;  // after "_admin"
    const http::Method m = call->request.head.method;
    if (seg.size() == 1 && seg[0] == "tenants") {
        if (m != http::Method::get) {
            return node.answer(*call, node.refusal(405, "/_admin/tenants takes GET").header("Allow", "GET"));
        }
        return list_tenants(node, *call);
    }
    if (seg.size() >= 2 && seg[0] == "tenants") {
        if (!valid_tenant_name(call->tenant)) {
            return node.answer(*call, node.refusal(400, "tenant name `" + call->tenant +
                                                            "` is not [a-z0-9_-]{1,64}"));
        }
        if (seg.size() == 2 && m == http::Method::put) return create_tenant(node, *call);
        const bool describe = seg.size() == 2 && m == http::Method::get;
        const bool query = seg.size() == 3 && seg[2] == "query" && m == http::Method::post;
        if (describe || query) {
            Acquired a = node.registry().acquire(call->tenant);
            if (!a.tenant) {
                return node.answer(*call, acquire_refusal(node, a));
            }
            return describe ? describe_tenant(node, *call, *a.tenant) : admin_query(node, *call, *a.tenant);
        }
    }
    // A path of §8 asked with another method: 405 naming the ones it takes.
    if (seg.size() == 2 && seg[0] == "tenants") {
        return node.answer(*call, node.refusal(405, "/_admin/tenants/<t> takes GET and PUT")
                                      .header("Allow", "GET, PUT"));
    }
    if (seg.size() == 3 && seg[0] == "tenants" && seg[2] == "query") {
        return node.answer(*call, node.refusal(405, "/_admin/tenants/<t>/query takes POST")
                                      .header("Allow", "POST"));
    }
    node.answer(*call, node.refusal(404, "no admin route " + call->request.head.path));
}

}  // namespace fenec::node
