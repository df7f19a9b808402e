// server/node/admin.cc: the admin plane's routes (node-http.md §8) and its reads: the node's hello
// (§8.8), tenants listed (with `?detail`), created (a schema landing as their first block) and
// described, and the read-only query (§8.4). Delete, freeze and thaw are lifecycle.cc's, the file
// image image.cc's. Promotion, following and leases answer 404 naming the route until they exist.
#include "server/node/admin.h"

#include <simdjson.h>

#include "json/timestamp.h"
#include "ql/answer.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "server/node/handlers.h"
#include "server/node/routes.h"
#include "server/node/json_body.h"
#include "server/node/lease.h"
#include "server/node/quota.h"
#include "server/node/replication.h"
#include "server/obs/audit.h"

namespace fenec::node {

void audit_admin(Node& node, const Call& call, int status) {
    obs::LineLog* log = node.audit();
    if (!log) return;
    obs::AuditLine line;
    line.at_ms = node.now_ms();
    line.event = obs::AuditEvent::admin;
    line.who = obs::AuditWho{static_cast<obs::Credential>(call.who.credential)};
    line.peer = audit_peer(call);
    line.via = call.via;
    line.request_id = call.request_id;
    line.fields = {{"method", std::string(call.request.head.method_text)},
                   {"path", call.request.head.path},
                   {"tenant", call.tenant},
                   {"status", status}};
    log->write(obs::audit_line(line));
}

void answer_audited(Node& node, Call& call, http::Response r) {
    audit_admin(node, call, r.status);
    node.answer(call, std::move(r));
}

namespace {

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
    if (auto e = schema_of(call.request.body, schema)) {
        return answer_audited(node, call, node.refusal(400, *e));
    }
    std::vector<ql::ParsedStatement> parsed;
    for (const std::string& text : schema) {
        auto p = ql::parse(text);
        if (!p) return answer_audited(node, call, error_response(node, p.error()));
        if (p->statement.kind() != ql::StatementKind::create &&
            p->statement.kind() != ql::StatementKind::alter) {
            return answer_audited(node, call,
                                  node.refusal(400, "a tenant's schema holds create and alter "
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
        r = node.refusal(409, "tenant `" + call.tenant + "` exists");
    } else if (st.code() == engine::Code::limit_exceeded) {  // the descriptor budget
        r = node.refusal(503, std::string(st.message()), "descriptors");
    } else if (!st.is_ok()) {
        r = node.refusal(500,
                         "tenant `" + call.tenant + "` could not be created: " + st.to_string());
    } else {
        r.status = 201;
        json::Writer w(r.body);
        w.begin_object();
        w.key("created");
        w.string(call.tenant);
        w.key("lineage");
        w.string(engine::format::hex16(lineage.v));
        w.end_object();
    }
    answer_audited(node, call, std::move(r));
}

void write_forks(json::Writer& w, const engine::History& h) {
    w.begin_array();
    for (const engine::Fork& f : h.forks) {
        w.begin_object();
        w.key("history");
        w.string(engine::format::hex16(f.history.v));
        w.key("at");
        w.uint64(f.seq.v);
        w.end_object();
    }
    w.end_array();
}

// `?detail` (§8): lineage, history, forks and following of each copy, for a router's repair
// survey. A closed tenant is opened to tell (it closes again when idle); one that cannot be
// opened now says null for each.
void write_detail(Node& node, json::Writer& w, const std::string& name) {
    Acquired a = node.registry().acquire(name);
    if (!a.tenant) {
        for (const char* k : {"lineage", "history", "forks"}) {
            w.key(k);
            w.null();
        }
    } else {
        const engine::History h = a.tenant->db().history();
        w.key("lineage");
        w.string(engine::format::hex16(a.tenant->db().lineage().v));
        w.key("history");
        w.string(engine::format::hex16(h.current().v));
        w.key("forks");
        write_forks(w, h);
    }
    w.key("following");
    node.replication().write_following(name, w);
}

void list_tenants(Node& node, Call& call) {
    const bool detail = call.request.head.query_value("detail") != nullptr;
    const engine::Result<std::vector<TenantInfo>> tenants = node.registry().list();
    if (!tenants.is_ok()) return node.answer(call, listing_refusal(node, tenants.status()));
    http::Response r;
    json::Writer w(r.body);
    w.begin_array();
    for (const TenantInfo& t : *tenants) {
        w.begin_object();
        w.key("name");
        w.string(t.name);
        w.key("bytes");
        w.uint64(t.bytes);
        w.key("role");
        w.string(node.replication().following(t.name) ? "replica" : "primary");
        w.key("open");
        w.boolean(t.open);
        w.key("frozen");
        w.boolean(t.frozen);
        if (detail) write_detail(node, w, t.name);
        w.end_object();
    }
    w.end_array();
    node.answer(call, std::move(r));
}

// A tenant count or disk bytes the node could not tell is answered 503, never a wrong number: a
// router reads `tenants: 0` as a node that lost its tenants.
void hello(Node& node, Call& call) {
    const engine::Result<std::vector<TenantInfo>> tenants = node.registry().list();
    if (!tenants.is_ok()) return node.answer(call, listing_refusal(node, tenants.status()));
    uint64_t disk = 0;
    for (const TenantInfo& t : *tenants) disk += t.bytes;
    http::Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("node");
    w.string(node.options().node_name);
    w.key("version");
    w.string(fenec_version);
    w.key("boot_id");  // so a router tells a reboot from a restart (§8.8)
    w.string(node.boot_id());
    w.key("started");
    w.string(obs::iso_time_ms(node.started_ms()));
    w.key("takes_leases");
    w.boolean(node.options().lease);
    w.key("holder");
    write_holder(w, node.fencing().holder());
    w.key("tenants");
    w.uint64(tenants->size());
    w.key("open");
    w.uint64(node.registry().open_count());
    w.key("disk_bytes");
    w.uint64(disk);
    w.key("memory_bytes");
    w.uint64(node.registry().memory_bytes());
    w.key("memory_limit_bytes");
    w.uint64(node.options().max_memory_mib << 20);
    w.end_object();
    node.answer(call, std::move(r));
}

// When the file was created: `created_ms`, as the header holds it, and beside it `created_at`,
// the same instant as ISO-8601 UTC text, as FenecQL writes a timestamp (none for a time outside
// the years 0000 to 9999, which only a damaged header holds).
void write_created(json::Writer& w, int64_t created_ms) {
    w.key("created_ms");
    w.int64(created_ms);
    if (!json::timestamp_in_range(created_ms)) return;
    w.key("created_at");
    w.string(json::format_timestamp(created_ms));
}

void describe_tenant(Node& node, Call& call, Tenant& t) {
    http::Response r;
    json::Writer w(r.body);
    const engine::History h = t.db().history();
    const engine::Usage u = t.db().usage();
    w.begin_object();
    w.key("name");
    w.string(t.name());
    w.key("lineage");
    w.string(engine::format::hex16(t.db().lineage().v));
    write_created(w, t.db().created_ms());
    w.key("history");
    w.string(engine::format::hex16(h.current().v));
    w.key("forks");
    write_forks(w, h);
    w.key("seq");
    w.uint64(u.seq.v);
    w.key("durable");
    w.uint64(u.durable_seq.v);
    w.key("bytes");
    w.uint64(u.file_bytes);
    w.key("dead_bytes");  // what a compaction would take off (compactor.h)
    w.uint64(u.dead_bytes);
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
    auto body = parse_query_body(call.request.body);
    if (!body) return node.answer(call, node.refusal(body.error().status, body.error().message));
    auto parsed = ql::parse(body->query);
    if (!parsed) return node.answer(call, error_response(node, parsed.error()));
    ql::Executor ex(t.db(), t.indexes());
    ql::Item item{&parsed.value(), body->params};
    ql::RunOptions o;
    o.read_only = true;
    o.budget = statement_budget(node);
    ql::BlockOutcome out = ex.run_block(std::span(&item, 1), o);
    if (out.error) return node.answer(call, error_response(node, *out.error));
    http::Response r;
    r.body = ql::to_json(out.answers.front());
    r.header("Fenec-Seq", std::to_string(out.seq.v));
    r.header("Fenec-History", engine::format::hex16(out.history.v));
    node.answer(call, std::move(r));
}


// /_admin/tenants/<t>[/<what>]: the routes on one tenant. A change's 405 is audited, as every
// refused change on the admin plane is.
void serve_tenant(Node& node, const std::shared_ptr<Call>& call) {
    const http::Method m = call->request.head.method;
    Call& c = *call;
    const RouteId id = route_of(c)->id;  // serve_admin found the row
    if (!route_takes(c)) {
        http::Response r = method_refusal(node, c);
        if (id == RouteId::quota || id == RouteId::tenant_query) return node.answer(c, std::move(r));
        return answer_audited(node, c, std::move(r));
    }
    switch (id) {
        case RouteId::tenant:
            if (m == http::Method::put) return create_tenant(node, c);
            if (m == http::Method::del) return delete_tenant(node, c, true);
            {
                Acquired a = node.registry().acquire(c.tenant);
                if (!a.tenant) return node.answer(c, acquire_refusal(node, a));
                return describe_tenant(node, c, *a.tenant);
            }
        case RouteId::quota:
            return serve_quota(node, call);  // quota.cc
        case RouteId::tenant_query: {
            Acquired a = node.registry().acquire(c.tenant);
            if (!a.tenant) return node.answer(c, acquire_refusal(node, a));
            return admin_query(node, c, *a.tenant);
        }
        case RouteId::freeze:
            return freeze_tenant(node, c);
        case RouteId::thaw:
            return thaw_tenant(node, c);
        case RouteId::file:
            if (m == http::Method::get) return get_image(node, call);
            if (m == http::Method::put) return put_image(node, c);
            return delete_tenant(node, c, false);
        default:
            break;
    }
    node.answer(c, node.refusal(404, "no admin route " + c.request.head.path));
}

}  // namespace

void serve_admin(Node& node, const std::shared_ptr<Call>& call) {
    const NodeRoute* row = route_of(*call);
    switch (row ? row->id : RouteId::health) {
        case RouteId::hello:
        case RouteId::tenants:
            if (!route_takes(*call)) return node.answer(*call, method_refusal(node, *call));
            return row->id == RouteId::hello ? hello(node, *call) : list_tenants(node, *call);
        case RouteId::tenant:
        case RouteId::tenant_query:
        case RouteId::quota:
        case RouteId::freeze:
        case RouteId::thaw:
        case RouteId::file:
            if (!valid_tenant_name(call->tenant)) {
                return node.answer(*call, node.refusal(400, "tenant name `" + call->tenant +
                                                                "` is not [a-z0-9_-]{1,64}"));
            }
            return serve_tenant(node, call);
        default:
            break;
    }
    node.answer(*call, node.refusal(404, "no admin route " + call->request.head.path));
}

}  // namespace fenec::node
