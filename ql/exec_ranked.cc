// ql/exec_ranked.cc: ranked reads, `match` (BM25, fenecql.md §8) and `near` (HNSW, §9): the
// best offset + limit rows the index ranks among those passing `where`, `_score` last in each.
// Invariant: the filter is applied inside the ranking, never after it, so a filter never starves
// the answer of rows that pass it.
#include "ql/exec_read_internal.h"
#include "ql/limits.h"

namespace fenec::ql {

using engine::Value;

namespace {

Error ranked_limit() {
    Error e;
    e.message = "match and near rank at most " + std::to_string(limits::ranked_rows_max) + " rows";
    e.limit = Limit::ranked_rows;
    e.max = limits::ranked_rows_max;
    return e;
}

// The field a ranked clause names, which must carry `kind`.
QlResult<uint16_t> ranked_field(const Name& field, const engine::Schema& schema,
                                engine::IndexKind kind, const char* clause) {
    const std::optional<uint16_t> slot = schema.slot_of(field.text);
    const char* needs = kind == engine::IndexKind::text ? "@text" : "@hnsw";
    if (!slot || schema.fields[*slot].index.kind != kind) {
        return error_at(field.pos, "`" + std::string(clause) + "` needs a field with " + needs +
                                       ", and `" + field.text + "` has none");
    }
    return *slot;
}

QlResult<std::vector<float>> query_vector(const Expr& e, const Context& ctx,
                                          const std::string& field) {
    QlResult<Value> v = eval_constant(e, ctx);
    if (!v) return v.take_error();
    std::vector<float> out;
    if (const auto* vf = std::get_if<engine::VectorF32>(&v.value().rep)) return vf->v;
    const auto* l = std::get_if<engine::List>(&v.value().rep);
    if (!l) return error_at(e.pos, "`near " + field + "` takes a list of numbers");
    for (const Value& item : l->items) {
        if (const int64_t* i = std::get_if<int64_t>(&item.rep))
            out.push_back(static_cast<float>(*i));
        else if (const double* d = std::get_if<double>(&item.rep))
            out.push_back(static_cast<float>(*d));
        else
            return error_at(e.pos,
                            "`near " + field + "` takes a list of numbers, found " + kind_of(item));
    }
    return out;
}

}  // namespace

QlResult<Answer> run_ranked(const Get& g, const engine::ReadView& view,
                            const index::IndexSet& indexes, engine::CollectionId c,
                            const engine::Schema& schema, const CNode* where, const Context& ctx) {
    uint64_t offset = 0, limit = limits::ranked_rows_max;
    if (g.offset) {
        QlResult<uint64_t> o = int_arg(*g.offset, ctx);
        if (!o) return o.take_error();
        offset = o.value();
    }
    if (g.limit) {
        QlResult<uint64_t> l = int_arg(*g.limit, ctx);
        if (!l) return l.take_error();
        limit = l.value();
    }
    if (offset > limits::ranked_rows_max || limit > limits::ranked_rows_max - offset)
        return ranked_limit();
    const size_t k = static_cast<size_t>(offset + limit);
    std::vector<std::pair<uint64_t, double>> hits;
    if (g.match) {
        QlResult<uint16_t> slot =
            ranked_field(g.match->field, schema, engine::IndexKind::text, "match");
        if (!slot) return slot.take_error();
        QlResult<Value> q = eval_constant(g.match->query, ctx);
        if (!q) return q.take_error();
        const auto* text = std::get_if<std::string>(&q.value().rep);
        if (!text)
            return error_at(g.match->query.pos,
                            "`match` takes a text, found " + kind_of(q.value()));
        auto keep = [&](uint64_t id) {
            if (!ctx.visit()) return false;  // the budget is passed: the executor refuses it
            std::optional<engine::DocView> doc = view.get(c, engine::DocId{id});
            return doc && (!where || matches(*where, engine::DocId{id}, *doc, ctx));
        };
        engine::Result<std::vector<std::pair<uint64_t, double>>> found =
            indexes.text().match(c, slot.value(), *text, keep, k);
        if (!found.is_ok())  // a prefix standing for too many terms
            return error_at(g.match->query.pos, std::string(found.status().message()));
        hits = std::move(found.value());
    } else {
        QlResult<uint16_t> slot =
            ranked_field(g.near->field, schema, engine::IndexKind::hnsw, "near");
        if (!slot) return slot.take_error();
        if (g.order) {  // the parser let through `order _score`, asc or desc
            const bool l2 = schema.fields[slot.value()].index.hnsw.metric == engine::Metric::l2;
            const OrderKey& key = g.order->keys[0];
            if (key.desc == l2) {
                return error_at(key.pos,
                                std::string("`near` ranks the nearest first, which over ") +
                                    (l2 ? "an l2 field is the lowest `_score`: `order _score`"
                                        : "a cosine or dot field is the highest `_score`: "
                                          "`order _score desc`"));
            }
        }
        QlResult<std::vector<float>> q = query_vector(g.near->vector, ctx, g.near->field.text);
        if (!q) return q.take_error();
        uint64_t ef = 0;
        if (g.near->ef) {
            QlResult<uint64_t> e = int_arg(*g.near->ef, ctx);
            if (!e) return e.take_error();
            ef = e.value();
        }
        std::optional<std::vector<uint64_t>> filter;
        if (where || schema.ttl_slot()) {  // rows passing `where`, expired ones left out
            Rows passing = select_rows(view, indexes, c, where, ctx);
            filter.emplace();
            for (const auto& [id, doc] : passing.rows) filter->push_back(id.v);
        }
        engine::Result<std::vector<index::VectorIndexes::Hit>> found =
            indexes.vectors().near(c, slot.value(), q.value(), k, ef, filter ? &*filter : nullptr);
        if (!found.is_ok())
            return error_at(g.near->vector.pos, std::string(found.status().message()));
        hits = std::move(found.value());
    }
    Rows rows;
    std::vector<double> scores;
    for (size_t i = offset; i < hits.size(); ++i) {
        std::optional<engine::DocView> doc = view.get(c, engine::DocId{hits[i].first});
        if (!doc) continue;
        rows.rows.emplace_back(engine::DocId{hits[i].first}, *doc);
        scores.push_back(hits[i].second);
    }
    QlResult<Table> t = project(rows, g.select, schema, g.collection.text, &scores);
    if (!t) return t.take_error();
    Answer a;
    a.kind = Answer::Kind::rows;
    a.table = std::move(t.value());
    return a;
}

}  // namespace fenec::ql
