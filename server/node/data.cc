// server/node/data.cc: the data plane's statements (node-http.md §5.1, §5.2, §5.5, §5.6, §5.8):
// `/t/<t>/query` and `/t/<t>/batch`, the tenant's description, and the dispatch of `/t/<t>/...`
// to REST (rest.cc) and subscriptions (subscriptions.cc). A call arrives here on a worker, or on
// its loop for a point read or a small write (serve_inline, serve_inline_write), its credential
// checked; it leaves through Node::answer.
#include <algorithm>
#include <charconv>

#include "ql/answer.h"
#include "ql/describe.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "server/node/handlers.h"
#include "server/node/json_body.h"
#include "server/node/parked.h"
#include "server/node/quota.h"
#include "server/node/routes.h"
#include "server/node/subscriptions.h"
#include "server/node/test_hooks.h"

namespace fenec::node {

void serve_rest(Node& node, const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& t);

namespace {

// §5: the tenant's collections (not the server's `_` ones), each field as ql::describe_field gives
// it, the one description `fenec inspect` and the shell print too.
void describe(Node& node, Call& call, Tenant& t) {
    engine::ReadView view = t.db().read();
    http::Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("tenant");
    w.string(t.name());
    w.key("seq");
    w.uint64(view.seq().v);
    w.key("history");
    w.string(engine::format::hex16(t.db().history().current().v));
    w.key("collections");
    w.begin_array();
    for (const engine::CollectionInfo& c : view.collections()) {
        if (c.name.starts_with("_")) continue;
        w.begin_object();
        w.key("name");
        w.string(c.name);
        w.key("fields");
        w.begin_array();
        for (const engine::FieldDesc& f : view.schema(c.id)->fields) {
            if (f.dropped) continue;
            const ql::FieldDescription d = ql::describe_field(f);
            w.begin_object();
            w.key("name");
            w.string(d.name);
            w.key("type");
            w.string(d.type);
            if (d.collate) {
                w.key("collate");
                w.string(*d.collate);
            }
            if (d.nocase) {
                w.key("nocase");
                w.boolean(true);
            }
            if (d.index) {
                w.key("index");
                w.string(*d.index);
            }
            w.key("definition");
            w.string(d.definition);
            w.end_object();
        }
        w.end_array();
        w.end_object();
    }
    w.end_array();
    w.end_object();
    r.header("Fenec-Seq", std::to_string(view.seq().v));
    r.header("Fenec-History", engine::format::hex16(t.db().history().current().v));
    node.answer(call, std::move(r));
}

bool schema_statement(const ql::Statement& st) {
    using K = ql::StatementKind;
    const K k = st.kind();
    return k == K::create || k == K::alter || k == K::drop || k == K::compact;
}

}  // namespace

// What §5.8 checks before a statement runs, for the credential: a JWT runs no schema statement,
// and one of scope "read" runs reads only (§3.2).
std::optional<http::Response> scope_refusal(
    Node& node, const Call& call, std::span<const std::shared_ptr<const ql::ParsedStatement>> all) {
    if (call.who.credential != auth::Credential::jwt) return std::nullopt;
    for (const auto& ptr : all) {
        const ql::ParsedStatement& p = *ptr;
        if (schema_statement(p.statement)) {
            return node.refusal(403, "a JWT does not run `" + std::string(p.statement.first_word()) +
                                         "`: schema and maintenance statements need the data token");
        }
        if (call.who.read_only_scope && p.statement.writes()) {
            return node.refusal(403, "this JWT has scope \"read\" and `" +
                                         std::string(p.statement.first_word()) + "` writes");
        }
    }
    return std::nullopt;
}

// The headers of §4.1 that bear on reading and holding: Fenec-After, Fenec-History, Fenec-Wait.
std::optional<http::Response> read_after_headers(Node& node, const Call& call, ReadAfter& out) {
    const http::RequestHead& h = call.request.head;
    if (auto v = h.header("Fenec-After")) {
        out.after = parse_decimal(*v);
        if (!out.after) return node.refusal(400, "Fenec-After must be a decimal seq, not `" + std::string(*v) + "`");
    }
    if (auto v = h.header("Fenec-History")) {
        if (!out.after) return node.refusal(400, "Fenec-History goes with Fenec-After");
        out.history = engine::format::parse_hex16(*v);
        if (!out.history) return node.refusal(400, "Fenec-History must be 16 lowercase hex digits");
    }
    if (auto v = h.header("Fenec-Wait")) {
        out.wait_ms = parse_decimal(*v);
        if (!out.wait_ms) return node.refusal(400, "Fenec-Wait must be a decimal number of ms");
        out.wait_ms = std::min<uint64_t>(*out.wait_ms, node.options().wait_max_ms);
    }
    return std::nullopt;
}

// Whether this copy holds write `after` of `history` (§5.6): yes, not yet (wait), or never.
Holds holds_write(Tenant& t, uint64_t after, std::optional<uint64_t> history) {
    // A write a power cut could take back is not held (N22).
    const uint64_t seq = t.visible_seq().v;
    if (!history) return seq >= after ? Holds::yes : Holds::not_yet;
    const engine::History h = t.db().history();
    if (h.current().v == *history) return seq >= after ? Holds::yes : Holds::not_yet;
    for (size_t i = 0; i + 1 < h.forks.size(); ++i) {
        if (h.forks[i].history.v == *history) {
            // It left that history where the next fork began.
            return h.forks[i + 1].seq.v >= after ? Holds::yes : Holds::never;
        }
    }
    // A primary never on that history lacks the write for good.
    return h.replica ? Holds::not_yet : Holds::never;
}

http::Response not_held(Node& node, Tenant& t, uint64_t after, std::optional<uint64_t> history) {
    std::string msg = t.name() + ": this copy does not hold write " + std::to_string(after);
    if (history) msg += " of history " + engine::format::hex16(*history);
    http::Response r = node.refusal(504, "");
    r.body.clear();
    json::Writer w(r.body);
    w.begin_object();
    w.key("error");
    w.string(msg);
    w.key("seq");
    w.uint64(t.visible_seq().v);
    w.key("history");
    w.string(engine::format::hex16(t.db().history().current().v));
    w.end_object();
    return r;
}

// Runs a request's statements as one block (or, for a batch holding `compact`, one by one) and
// answers. `batch` shapes the answer as /batch's.
void run_statements(Node& node, const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& t,
                    std::vector<QueryBody> bodies, bool batch);

namespace {

// The tenant a call may be served for on its event loop (serve_inline, serve_inline_write), or
// null: open now (try_get never waits on an open or a close), with no `requests` quota (it counts
// every request, quota.h: the pool's path), and the call waiting on no later write (Fenec-After,
// Fenec-Wait, Fenec-History).
std::shared_ptr<Tenant> loop_tenant(Node& node, const Call& call) {
    const http::RequestHead& h = call.request.head;
    if (h.header("Fenec-After") || h.header("Fenec-Wait") || h.header("Fenec-History")) {
        return nullptr;
    }
    std::shared_ptr<Tenant> t = node.registry().try_get(call.tenant);
    if (!t || t->requests_max.load(std::memory_order_relaxed) != Tenant::quota_none) return nullptr;
    return t;
}

}  // namespace

// Point reads on an open tenant are answered on the event loop (§2.1 keeps statements off the
// loop so a long one never stalls it; these cost what a hash lookup costs, and a worker hop costs
// more than they do). Anything else, or a tenant not open, or a writer holding the lock: false,
// and the call goes to the pool as every other.
bool serve_inline(Node& node, const std::shared_ptr<Call>& call) {
    const http::RequestHead& h = call->request.head;
    const bool query = call->route == Route::query && h.method == http::Method::post &&
                       call->rest.size() == 1;
    const bool document = call->route == Route::rest && h.method == http::Method::get &&
                          call->rest.size() == 3 && call->rest[0] == "c";
    if (!query && !document) return false;
    std::shared_ptr<Tenant> t = loop_tenant(node, *call);
    if (!t) return false;
    ql::Executor ex(t->db(), t->indexes());
    ql::BlockOutcome o;
    if (query) {
        static thread_local BodyReader reader;
        auto body = reader.query_body(call->request.body);
        if (!body) return false;  // the pool answers the 400
        ql::Error error;
        std::shared_ptr<const ql::ParsedStatement> parsed =
            node.statements().get(body->query, error);
        if (!parsed || parsed->statement.writes()) return false;
        std::optional<engine::ReadView> view = t->db().try_read();
        if (!view || !ql::is_point_read(parsed->statement, *view)) return false;
        o = ex.run_read(*view, ql::Item{parsed.get(), body->params});
    } else {
        // The document's statement is always document_read(coll): read without parsing or
        // compiling it.
        const std::string& coll = call->rest[1];
        const std::optional<uint64_t> id = parse_doc_id(call->rest[2]);
        if (coll.starts_with("_") || !plain_name(coll) || !id) return false;  // the pool refuses
        std::optional<engine::ReadView> view = t->db().try_read();
        if (!view) return false;
        o = ex.read_by_id(*view, coll, *id);
    }
    node.counters().statements->with({"read"}).inc();
    if (o.error) {
        node.answer(*call, error_response(node, *o.error));
        return true;
    }
    http::Response r;
    r.headers.reserve(3);  // Fenec-Seq, Fenec-History, and Node::answer's X-Request-Id
    if (query) {
        r.body = ql::to_json(o.answers.front());
    } else if (o.answers.front().table.rows.empty()) {
        r = node.refusal(404, "`" + call->rest[1] + "` holds no _id " + call->rest[2]);
        node.answer(*call, std::move(r));
        return true;
    } else {
        r.body = ql::row_json(o.answers.front().table, 0);
    }
    r.header("Fenec-Seq", std::to_string(o.seq.v));
    r.header("Fenec-History", engine::format::hex16(o.history.v));
    node.answer(*call, std::move(r));
    return true;
}

namespace {

// A request to an open tenant, on a worker (serve_data) or on the loop (serve_inline_write).
void serve_open(Node& node, const std::shared_ptr<Call>& call, std::shared_ptr<Tenant> t);

}  // namespace

void serve_data(Node& node, const std::shared_ptr<Call>& call) {
    Acquired a = node.registry().acquire(call->tenant);
    if (!a.tenant) {
        return node.answer(*call, acquire_refusal(node, a));
    }
    serve_open(node, call, std::move(a.tenant));
}

// A durable single write's own work is small: its body parsed, a few index entries, an append to
// the page cache. What it crossed to a worker for cost more than that on these machines (a
// wake-up and a context switch a write, docs/benchmarks.md, node-bench ARGS=writes), and under
// --sync always the answer waits for the Syncer anyway, whose thread gives it (outcome.cc). So a
// write that cannot run long is landed here, on the loop, as a point read is answered
// (serve_inline): a REST write to an open tenant, its body at most inline_write_body_max, into a
// collection without text or vector indexes (whose upkeep grows with the document), and nothing
// that waits: no Idempotency-Key (a key in flight waits for its twin), no Fenec-After/Wait/History,
// no `requests` quota, no test stall. Its block begins only if the writer lock is free
// (RunOptions::no_wait): where another block holds it, the call goes to the pool (rest.cc).
// Under --sync <ms> or off there is no Syncer, and an answer may wait for the followers' streams
// on the thread that lands it (outcome.cc): those writes stay on the pool.
bool serve_inline_write(Node& node, const std::shared_ptr<Call>& call) {
    constexpr size_t inline_write_body_max = 8 << 10;
    if (!node.syncer() || call->route != Route::rest) return false;
    const http::RequestHead& h = call->request.head;
    const std::vector<std::string>& rest = call->rest;
    const bool insert = rest.size() == 2 && h.method == http::Method::post;
    const bool change =
        rest.size() == 3 && (h.method == http::Method::put || h.method == http::Method::patch ||
                             h.method == http::Method::del);
    if ((!insert && !change) || rest[0] != "c") return false;
    if (call->request.body.size() > inline_write_body_max) return false;
    if (h.header("Idempotency-Key") || test_hooks::stalls_landed(h)) return false;
    std::shared_ptr<Tenant> t = loop_tenant(node, *call);
    if (!t) return false;
    {
        std::optional<engine::ReadView> view = t->db().try_read();
        if (!view) return false;
        engine::Result<engine::CollectionId> c = view->find(rest[1]);
        if (c.is_ok()) {
            auto grows = [](const engine::IndexDesc& i) {
                return i.kind == engine::IndexKind::text || i.kind == engine::IndexKind::hnsw;
            };
            for (const engine::FieldDesc& f : view->schema(*c)->fields) {
                if (f.dropped) continue;
                if (grows(f.index)) return false;
                for (const engine::PathIndex& p : f.paths) {
                    if (grows(p.index)) return false;
                }
            }
        }
    }
    call->on_loop = true;
    serve_open(node, call, std::move(t));
    return true;
}

namespace {

void serve_open(Node& node, const std::shared_ptr<Call>& call, std::shared_ptr<Tenant> t) {
    if (auto refused = admit_request(node, *call, t)) {
        return node.answer(*call, std::move(*refused));
    }
    // Idle is counted from when a request lets go of its tenant, not from when it took it (§11).
    struct Touch {
        Node& node;
        Tenant& t;
        ~Touch() { node.registry().touch(t); }
    } touch{node, *t};
    const http::RequestHead& h = call->request.head;
    const NodeRoute* row = route_of(*call);
    if (!row) return node.answer(*call, node.refusal(404, "no route " + h.path));
    if (!route_takes(*call)) return node.answer(*call, method_refusal(node, *call));
    switch (row->id) {
        case RouteId::query:
        case RouteId::batch: {
            std::vector<QueryBody> bodies;
            static thread_local BodyReader reader;  // one simdjson parser per thread
            if (call->route == Route::query) {
                auto body = reader.query_body(call->request.body);
                if (!body) return node.answer(*call, node.refusal(body.error().status, body.error().message));
                bodies.push_back(std::move(body.value()));
            } else {
                const auto ct = h.header("Content-Type");
                const bool ndjson = !ct || ct->find("ndjson") != std::string_view::npos;
                auto list = parse_batch(call->request.body, ndjson);
                if (!list) {
                    const std::optional<uint32_t> line = list.error().line;
                    return node.answer(*call,
                                       node.refusal(list.error().status, list.error().message, {},
                                                    [&](json::Writer& w) {
                                                        if (!line) return;
                                                        w.key("line");
                                                        w.uint64(*line);
                                                    }));
                }
                if (list->empty()) return node.answer(*call, node.refusal(400, "the batch holds no statement"));
                bodies = std::move(list.value());
            }
            return run_statements(node, call, t, std::move(bodies), call->route == Route::batch);
        }
        case RouteId::changes:
            return node.subscriptions().open(call, t);
        case RouteId::collection:
        case RouteId::document:
            return serve_rest(node, call, t);
        case RouteId::describe:
            return describe(node, *call, *t);
        default:
            break;
    }
    node.answer(*call, node.refusal(404, "no route " + h.path));
}

}  // namespace

}  // namespace fenec::node
