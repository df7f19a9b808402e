// ql/exec_read.cc: `get` (fenecql.md §7, §10) from the top: the filter compiled, the read sent to
// its steps (candidates, order or an index walk, groups, lookups, ranked search: a file each,
// sharing ql/exec_read_internal.h), then paged and projected; and the REST read of one row.
#include "ql/exec_read.h"

#include <algorithm>
#include <set>

#include "ql/exec_read_internal.h"
#include "ql/plan.h"

namespace fenec::ql {

using engine::DocId;
using engine::DocView;

Error not_found_collection(const Name& name) {
    Error e = error_at(name.pos, "no collection `" + name.text + "`");
    e.position.reset();
    e.status_code = 404;
    e.collection = name.text;
    return e;
}

QlResult<uint64_t> int_arg(const IntArg& arg, const Context& ctx) {
    if (const int64_t* v = std::get_if<int64_t>(&arg.value)) return static_cast<uint64_t>(*v);
    const uint32_t n = std::get<Param>(arg.value).index;
    if (n > ctx.params.size()) return error_at(arg.pos, "$" + std::to_string(n) + " is not bound");
    const int64_t* v = std::get_if<int64_t>(&ctx.params[n - 1].rep);
    if (!v || *v < 0)
        return error_at(arg.pos, "$" + std::to_string(n) + " must be an int of 0 or more");
    return static_cast<uint64_t>(*v);
}

QlResult<Page> page_of(const std::optional<IntArg>& offset, const std::optional<IntArg>& limit,
                       size_t size, const Context& ctx) {
    uint64_t skip = 0, keep = UINT64_MAX;
    if (offset) {
        QlResult<uint64_t> v = int_arg(*offset, ctx);
        if (!v) return v.take_error();
        skip = v.value();
    }
    if (limit) {
        QlResult<uint64_t> v = int_arg(*limit, ctx);
        if (!v) return v.take_error();
        keep = v.value();
    }
    Page page;
    page.from = static_cast<size_t>(std::min<uint64_t>(skip, size));
    page.to = page.from + static_cast<size_t>(std::min<uint64_t>(keep, size - page.from));
    return page;
}

// Up to this many columns, names are compared pairwise: no set to allocate for every answer (a
// point read's answer is a few columns, and project() runs once per read).
constexpr size_t unique_names_pairwise_max = 32;

Failure unique_names(const std::vector<std::string>& names, uint32_t pos) {
    const auto twice = [pos](const std::string& n) -> Failure {
        return error_at(pos, "two columns of the answer are named `" + n + "` (use `as`)");
    };
    if (names.size() <= unique_names_pairwise_max) {
        for (size_t i = 1; i < names.size(); ++i) {
            for (size_t j = 0; j < i; ++j) {
                if (names[i] == names[j]) return twice(names[i]);
            }
        }
        return std::nullopt;
    }
    std::set<std::string> seen;
    for (const std::string& n : names) {
        if (!seen.insert(n).second) return twice(n);
    }
    return std::nullopt;
}

QlResult<Table> project(const Rows& rows, const std::optional<SelectList>& select,
                        const engine::Schema& schema, const std::string& collection,
                        const std::vector<double>* scores) {
    std::vector<FieldRef> refs;
    std::vector<bool> is_score;  // per column: the row's score rather than a field
    auto names = std::make_shared<std::vector<std::string>>();
    if (!select || select->star) {
        // `_id` and every live field, straight from the schema: its names are unique and none is
        // `_id`, so there is nothing to resolve or check (the REST read of a row comes here).
        refs.reserve(schema.fields.size() + 1);
        names->reserve(schema.fields.size() + 1);
        refs.emplace_back().is_id = true;
        names->emplace_back("_id");
        for (size_t slot = 0; slot < schema.fields.size(); ++slot) {
            const engine::FieldDesc& f = schema.fields[slot];
            if (f.dropped) continue;
            FieldRef& ref = refs.emplace_back();
            ref.slot = static_cast<uint16_t>(slot);
            ref.field = &f;
            names->push_back(f.name);
        }
    } else {
        refs.reserve(select->items.size());
        names->reserve(select->items.size());
        for (const SelectItem& item : select->items) {
            const Column* col = std::get_if<Column>(&item.what);
            if (!col) return error_at(item.pos, "an aggregate cannot stand here");
            names->push_back(item.answer_name());
            if (scores && !col->is_path() && col->field == "_score") {
                refs.emplace_back().is_id = true;  // reads no slot; the cell is the score
                is_score.push_back(true);
                continue;
            }
            QlResult<FieldRef> ref = resolve_column(schema, *col, item.pos, collection);
            if (!ref) return ref.take_error();
            refs.push_back(std::move(ref.value()));
            is_score.push_back(false);
        }
        if (auto f = unique_names(*names, select->pos)) return *f;
    }
    // Every row is read in one pass over its body up to the last slot a column names, not one
    // pass per column (DocView::raw re-skips the fields before the one it reads).
    size_t slots = 0;
    for (const FieldRef& ref : refs) {
        if (!ref.is_id) slots = std::max<size_t>(slots, size_t(ref.slot) + 1);
    }
    std::vector<std::span<const std::byte>> raws(slots);
    is_score.resize(refs.size(), false);  // `*` names no score
    Table t;
    t.columns = names;
    t.scored = scores && std::find(is_score.begin(), is_score.end(), true) == is_score.end();
    t.rows.reserve(rows.rows.size());
    for (size_t i = 0; i < rows.rows.size(); ++i) {
        const auto& [id, doc] = rows.rows[i];
        doc.raw_slots(raws);
        Row r;
        r.cells.reserve(refs.size());
        if (t.scored) r.score = (*scores)[i];
        for (size_t c = 0; c < refs.size(); ++c) {
            const FieldRef& ref = refs[c];
            if (is_score[c]) {
                r.cells.emplace_back((*scores)[i]);
            } else if (ref.is_id || !ref.keys.empty()) {
                r.cells.push_back(read_column(ref, id, doc));
            } else {
                r.cells.push_back(DocView::value_of(raws[ref.slot]));
            }
        }
        t.rows.push_back(std::move(r));
    }
    return t;
}

QlResult<Answer> run_get(const Get& g, const engine::ReadView& view, const index::IndexSet& indexes,
                         const Context& ctx) {
    engine::Result<engine::CollectionId> c = view.find(g.collection.text);
    if (!c.is_ok() || g.collection.text.starts_with("_")) return not_found_collection(g.collection);
    const engine::Schema& schema = *view.schema(*c);
    const std::string& name = g.collection.text;
    std::optional<CNode> where;
    if (g.where) {
        QlResult<CNode> w = compile_where(g.where->expr, schema, name, ctx);
        if (!w) return w.take_error();
        where = std::move(w.value());
    }
    if (g.near || g.match) {
        return run_ranked(g, view, indexes, *c, schema, where ? &*where : nullptr, ctx);
    }
    QlResult<std::vector<LookupLevel>> levels = plan_lookups(g, view, indexes, schema, ctx);
    if (!levels) return levels.take_error();
    if (!g.lookups.empty() && (g.group || has_aggregate(g.select))) {
        return error_at(g.lookups[0].pos, "a lookup cannot follow aggregates or groups");
    }
    const bool grouped = g.group || has_aggregate(g.select);
    const std::vector<SelectItem>* aliases = g.select ? &g.select->items : nullptr;
    std::optional<Rows> walked;
    if (!grouped && g.order && g.limit && g.lookups.empty()) {
        // `order k limit n` over an ordered index: walk it and stop after offset + n rows.
        QlResult<uint64_t> limit = int_arg(*g.limit, ctx);
        if (!limit) return limit.take_error();
        uint64_t offset = 0;
        if (g.offset) {
            QlResult<uint64_t> o = int_arg(*g.offset, ctx);
            if (!o) return o.take_error();
            offset = o.value();
        }
        const uint64_t want =
            limit.value() > UINT64_MAX - offset ? UINT64_MAX : offset + limit.value();
        walked = ordered_by_index(view, indexes, *c, schema, where ? &*where : nullptr, *g.order,
                                  aliases, want, ctx);
    }
    Rows rows = walked ? std::move(*walked)
                       : select_rows(view, indexes, *c, where ? &*where : nullptr, ctx);
    if (grouped) return run_grouped(g, rows, schema, name, ctx);
    if (g.order && !walked) {
        if (auto f = order_rows(rows, *g.order, schema, name, aliases)) return *f;
    }
    Lookups lookups{view, ctx, levels.value()};
    std::vector<Table> children;
    if (!g.lookups.empty()) {
        QlResult<std::vector<Table>> a = lookups.attach(0, rows);
        if (!a) return a.take_error();
        children = std::move(a.value());
    }
    QlResult<Page> page = page_of(g.offset, g.limit, rows.rows.size(), ctx);
    if (!page) return page.take_error();
    Rows kept;
    kept.rows.assign(rows.rows.begin() + page.value().from, rows.rows.begin() + page.value().to);
    QlResult<Table> t = project(kept, g.select, schema, name);
    if (!t) return t.take_error();
    if (!g.lookups.empty()) {
        attach_tables(t.value(), g.lookups[0].answer_name(), children, page.value().from);
    }
    Answer a;
    a.kind = Answer::Kind::rows;
    a.table = std::move(t.value());
    return a;
}

QlResult<Answer> read_by_id(const engine::ReadView& view, const std::string& collection,
                            uint64_t id) {
    engine::Result<engine::CollectionId> c = view.find(collection);
    if (!c.is_ok() || collection.starts_with("_")) return not_found_collection(Name{collection, 0});
    Rows rows;
    if (id > 0 && id <= uint64_t(INT64_MAX)) {
        std::optional<DocView> doc = view.get(*c, DocId{id});
        if (doc) rows.rows.emplace_back(DocId{id}, *doc);
    }
    QlResult<Table> t = project(rows, std::nullopt, *view.schema(*c), collection);
    if (!t) return t.take_error();
    Answer a;
    a.kind = Answer::Kind::rows;
    a.table = std::move(t.value());
    return a;
}

}  // namespace fenec::ql
