// server/node/rest.cc: REST per collection (node-http.md §5.3), each request translated into
// FenecQL statements whose values travel as parameters, never spliced into the text, and run as
// one block like any other write: admission, Idempotency-Key, landing, answer.
#include "ql/answer.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "server/node/handlers.h"
#include "server/node/json_body.h"
#include "server/node/rest_filter.h"
#include "server/node/routes.h"

namespace fenec::node {

namespace {

struct Prepared {
    std::vector<ql::ParsedStatement> parsed;
    std::vector<std::vector<engine::Value>> params;
    std::string_view body;   // the client's document body, bound whole or member by member
    bool body_list = false;  // the body is an array of documents
    std::vector<ql::Item> items() const {
        std::vector<ql::Item> out;
        for (size_t i = 0; i < parsed.size(); ++i) out.push_back(ql::Item{&parsed[i], params[i]});
        return out;
    }
};

// Parses statements the node wrote itself; a failure is a programmer error surfaced as 500.
std::optional<ql::Error> prepare(Prepared& p, std::string_view text, std::vector<engine::Value> params) {
    ql::QlResult<ql::ParsedStatement> parsed = ql::parse(text);
    if (!parsed) return parsed.error();
    p.parsed.push_back(std::move(parsed.value()));
    p.params.push_back(std::move(params));
    return std::nullopt;
}

using Shape = std::function<http::Response(const ql::BlockOutcome&)>;

// A refusal of a statement the node wrote: its `position` counts in text the client never saw.
// A cause the executor traced into a bound document is pointed at in the client's body instead
// (counted as a statement's position is); any other cause loses its position.
ql::Error located_in_body(ql::Error e, const Prepared& p) {
    std::optional<uint32_t> at;
    if (e.site.known() && !p.body.empty()) {
        at = member_position(p.body, p.body_list ? e.site.item : std::nullopt, e.site.member);
    }
    e.position = at;
    e.site = ql::ValueSite{};
    return e;
}

// The outcome's error, or `shape`'s answer with the seq it stands at where it succeeded.
http::Response shaped(Node& node, const Tenant& t, const Prepared& p, const ql::BlockOutcome& o,
                      const Shape& shape) {
    if (o.error) return error_response(node, t.name(), located_in_body(*o.error, p));
    http::Response r = shape(o);
    if (r.status < 400) {
        r.header("Fenec-Seq", std::to_string(o.seq.v));
        r.header("Fenec-History", engine::format::hex16(o.history.v));
    }
    return r;
}

// A REST write: admission, key, one block whose key row stores the shaped answer, the answer.
void run_rest_write(Node& node, const std::shared_ptr<Call>& call, Tenant& t, const Prepared& p,
                    const Shape& shape) {
    // §4.1, as for a statement that writes: Fenec-After is a read's, refused on a write.
    ReadAfter ra;
    if (auto r = read_after_headers(node, *call, ra)) return node.answer(*call, std::move(*r));
    if (ra.after)
        return node.answer(*call,
                           node.refusal(400, "Fenec-After is for reads; this request writes"));
    if (call->who.credential == auth::Credential::jwt && call->who.read_only_scope) {
        return node.answer(*call, node.refusal(403, "this JWT has scope \"read\" and this request writes"));
    }
    Tenant::WriteTicket ticket = t.admit_write();  // until answered (§8.2)
    if (auto r = write_refusal(node, t)) return node.answer(*call, std::move(*r));
    std::optional<http::Response> refusal;
    std::optional<KeyedWrite> key = begin_key(node, *call, t, refusal);
    if (refusal) return node.answer(*call, std::move(*refusal));
    ql::Executor ex(t.db(), t.indexes());
    const std::vector<ql::Item> items = p.items();
    ql::BeforeCommit before;
    if (key) {
        before = [&](engine::Block& block, std::span<const ql::Answer> answers) {
            ql::BlockOutcome preview;
            preview.answers.assign(answers.begin(), answers.end());
            http::Response r = shape(preview);
            // A refusal (404 for no such document) stores no key: a retry runs (§5.7).
            if (r.status >= 400) return engine::Status::ok();
            return store_key(block, *key, r.status, r.body);
        };
    }
    // Answered once an fsync covers it, the worker going on meanwhile (answer_write_durable);
    // a keyed write waits here, so its key is released only once its answer is durable.
    ql::BlockOutcome o = ex.run_block(items,
                                      ql::RunOptions{.budget = statement_budget(node),
                                                     .defer_durable = defer_durable(node, key),
                                                     .no_wait = call->on_loop},
                                      before);
    if (o.busy) {
        // On the loop (serve_inline_write) with another block holding the writer lock: nothing
        // ran; a worker runs the request from the start and waits its turn. Its admission and
        // this ticket are let go as this returns; the worker takes its own.
        call->on_loop = false;
        call->admitted.reset();
        return node.submit(call, [&node](const std::shared_ptr<Call>& c) { serve_data(node, c); });
    }
    if (key) finish_key(t, *key, !o.error);
    node.counters().statements->with({"write"}).inc();
    answer_write_durable(
        node, call, t, std::move(o),
        [&](const ql::BlockOutcome& r) { return shaped(node, t, p, r, shape); }, std::nullopt,
        std::move(ticket));
}

// A REST read: run once this copy holds what Fenec-After asks (§4.1, §5.6), as a statement's is.
void run_rest_read(Node& node, const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& t,
                   Prepared p, Shape shape) {
    ReadAfter ra;
    if (auto r = read_after_headers(node, *call, ra)) return node.answer(*call, std::move(*r));
    auto run = [&node, call, t](const Prepared& prepared, const Shape& shaping) {
        ql::Executor ex(t->db(), t->indexes());
        const std::vector<ql::Item> items = prepared.items();
        ql::BlockOutcome o = ex.run_block(items, ql::RunOptions{.budget = statement_budget(node)});
        node.counters().statements->with({"read"}).inc();
        node.answer(*call, shaped(node, *t, prepared, o, shaping));
    };
    if (!ra.after) return run(p, shape);  // the common case: nothing held for a wait
    auto held = std::make_shared<Prepared>(std::move(p));
    run_when_held(node, call, t, ra, [run, held, shape = std::move(shape)] { run(*held, shape); });
}

void serve_document(Node& node, const std::shared_ptr<Call>& call,
                    const std::shared_ptr<Tenant>& owner, const std::string& coll, uint64_t id) {
    Tenant& t = *owner;
    const http::RequestHead& h = call->request.head;
    const std::string sel = document_read(coll);
    Prepared p;
    auto fail = [&](const ql::Error& e) { node.answer(*call, error_response(node, e)); };
    switch (h.method) {
        case http::Method::get:
        case http::Method::head: {
            if (auto e = prepare(p, sel, {engine::Value(int64_t(id))})) return fail(*e);
            // Run later where it waits for Fenec-After: what it needs, by value.
            return run_rest_read(
                node, call, owner, std::move(p), [&node, coll, id](const ql::BlockOutcome& o) {
                    if (o.answers.front().table.rows.empty()) {
                        return node.refusal(404,
                                            "`" + coll + "` holds no _id " + std::to_string(id));
                    }
                    return json_answer(200, ql::row_json(o.answers.front().table, 0));
                });
        }
        case http::Method::put: {
            auto body = parse_document_body(call->request.body);
            if (!body) return node.answer(*call, node.refusal(body.error().status, body.error().message));
            auto* obj = std::get_if<engine::Object>(&body->rep);
            if (!obj) return node.answer(*call, node.refusal(400, "PUT takes one object"));
            bool has_id = false;
            for (size_t i = 0; i < obj->keys.size(); ++i) {
                if (obj->keys[i] != "_id") continue;
                has_id = true;
                const auto* v = std::get_if<int64_t>(&obj->values[i].rep);
                if (!v || static_cast<uint64_t>(*v) != id) {
                    return node.answer(*call, node.refusal(400, "the body's _id is not the path's " +
                                                                    std::to_string(id)));
                }
            }
            if (!has_id) {
                obj->keys.insert(obj->keys.begin(), "_id");
                obj->values.insert(obj->values.begin(), engine::Value(int64_t(id)));
            }
            if (auto e = prepare(p, sel, {engine::Value(int64_t(id))})) return fail(*e);
            if (auto e = prepare(p, "put " + coll + " $1", {std::move(body.value())})) return fail(*e);
            p.body = call->request.body;
            return run_rest_write(node, call, t, p, [id](const ql::BlockOutcome& o) {
                const bool created = o.answers.front().table.rows.empty();
                return json_answer(created ? 201 : 200, "{\"id\":" + std::to_string(id) +
                                                            ",\"created\":" + (created ? "true" : "false") + "}");
            });
        }
        case http::Method::patch: {
            auto body = parse_document_body(call->request.body);
            if (!body) return node.answer(*call, node.refusal(body.error().status, body.error().message));
            const auto* obj = std::get_if<engine::Object>(&body->rep);
            if (!obj || obj->keys.empty()) {
                return node.answer(*call, node.refusal(400, "PATCH takes one object naming the fields to set"));
            }
            std::string text = "set " + coll + " {";
            std::vector<engine::Value> params{engine::Value(int64_t(id))};
            for (size_t i = 0; i < obj->keys.size(); ++i) {
                if (!plain_name(obj->keys[i]) || obj->keys[i] == "_id") {
                    return node.answer(*call, node.refusal(400, "PATCH cannot set `" + obj->keys[i] + "`"));
                }
                text += (i ? ", " : "") + obj->keys[i] + ": $" + std::to_string(i + 2);
                params.push_back(obj->values[i]);
            }
            text += "} where _id = $1";
            if (auto e = prepare(p, text, std::move(params))) return fail(*e);
            p.body = call->request.body;
            return run_rest_write(node, call, t, p, [&node, coll, id](const ql::BlockOutcome& o) {
                if (o.answers.front().affected == 0) {
                    return node.refusal(404, "`" + coll + "` holds no _id " + std::to_string(id));
                }
                return json_answer(200, "{\"updated\":1}");
            });
        }
        case http::Method::del: {
            if (auto e = prepare(p, "del " + coll + " where _id = $1", {engine::Value(int64_t(id))})) {
                return fail(*e);
            }
            return run_rest_write(node, call, t, p, [&node, coll, id](const ql::BlockOutcome& o) {
                if (o.answers.front().affected == 0) {
                    return node.refusal(404, "`" + coll + "` holds no _id " + std::to_string(id));
                }
                return json_answer(200, "{\"deleted\":1}");
            });
        }
        default:
            return node.answer(*call, method_refusal(node, *call));
    }
}

void serve_collection(Node& node, const std::shared_ptr<Call>& call,
                      const std::shared_ptr<Tenant>& owner, const std::string& coll) {
    Tenant& t = *owner;
    const http::RequestHead& h = call->request.head;
    Prepared p;
    if (h.method == http::Method::post) {
        auto body = parse_document_body(call->request.body);
        if (!body) return node.answer(*call, node.refusal(body.error().status, body.error().message));
        engine::Value docs = std::move(body.value());
        p.body = call->request.body;
        p.body_list = std::holds_alternative<engine::List>(docs.rep);
        if (std::holds_alternative<engine::Object>(docs.rep)) {
            engine::List one;
            one.items.push_back(std::move(docs));
            docs = engine::Value(std::move(one));
        }
        if (auto e = prepare(p, "insert " + coll + " $1", {std::move(docs)})) {
            return node.answer(*call, error_response(node, *e));
        }
        return run_rest_write(node, call, t, p, [](const ql::BlockOutcome& o) {
            std::string out = "{\"ids\":[";
            const auto& ids = o.answers.front().ids;
            for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
            return json_answer(201, out + "]}");
        });
    }
    if (h.method != http::Method::get && h.method != http::Method::head) {
        return node.answer(*call, method_refusal(node, *call));
    }
    auto q = parse_rest_query(h.query, false);
    if (!q) return node.answer(*call, node.refusal(q.error().status, q.error().message));
    engine::Schema schema;
    {
        engine::ReadView view = t.db().read();
        engine::Result<engine::CollectionId> c = view.find(coll);
        if (!c.is_ok())
            return node.answer(*call, node.refusal(404, "no collection `" + coll + "`"));
        schema = *view.schema(*c);
    }
    auto st = build_statement(q.value(), coll, schema);
    if (!st) return node.answer(*call, node.refusal(st.error().status, st.error().message));
    if (auto e = prepare(p, st->text, std::move(st->params))) {
        return node.answer(*call, error_response(node, *e));
    }
    const bool count = q->count;
    return run_rest_read(node, call, owner, std::move(p), [count](const ql::BlockOutcome& o) {
        const ql::Answer& a = o.answers.front();
        if (count) {  // one row, one cell: count(*)
            int64_t n = 0;
            if (!a.table.rows.empty() && !a.table.rows[0].cells.empty()) {
                if (const auto* v = std::get_if<int64_t>(&a.table.rows[0].cells[0].rep)) n = *v;
            }
            return json_answer(200, "{\"count\":" + std::to_string(n) + "}");
        }
        return json_answer(200, ql::rows_json(a.table));
    });
}

}  // namespace

std::string document_read(std::string_view collection) {
    return "get " + std::string(collection) + " where _id = $1";
}

void serve_rest(Node& node, const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& t) {
    const std::vector<std::string>& rest = call->rest;  // c, <collection>[, <id>]
    if (rest.size() < 2 || rest.size() > 3 || rest[0] != "c" || rest[1].empty()) {
        return node.answer(*call, node.refusal(404, "no route " + call->request.head.path));
    }
    const std::string& coll = rest[1];
    if (coll.starts_with("_") || !plain_name(coll)) {
        return node.answer(*call, node.refusal(404, "no collection `" + coll + "`"));
    }
    if (rest.size() == 2) return serve_collection(node, call, t, coll);
    const std::optional<uint64_t> id = parse_doc_id(rest[2]);
    if (!id) return node.answer(*call, node.refusal(400, "a document id is a positive decimal, not `" + rest[2] + "`"));
    serve_document(node, call, t, coll, *id);
}

}  // namespace fenec::node
