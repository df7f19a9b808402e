// ql/exec_lookups.cc: `lookup` (fenecql.md §10): each level planned against its collection before
// any row is read, then children found per parent row through the child key's @hash or @unique
// index (or `_id`), filtered, ordered, paged and attached under the lookup's name. Invariant: a
// `required` lookup judges a parent by its children before their offset and limit.
#include "index/key.h"
#include "ql/exec_read_internal.h"

namespace fenec::ql {

using engine::BaseType;
using engine::DocId;
using engine::DocView;
using engine::Value;

namespace {

std::vector<SelectItem> all_fields(const engine::Schema& schema) {
    std::vector<SelectItem> items;
    items.reserve(schema.fields.size() + 1);
    items.push_back(SelectItem{0, Column{"_id", {}}, std::nullopt});
    for (const engine::FieldDesc& f : schema.fields) {
        if (!f.dropped) items.push_back(SelectItem{0, Column{f.name, {}}, std::nullopt});
    }
    return items;
}

const std::vector<SelectItem>& items_of(const std::optional<SelectList>& select,
                                        const engine::Schema& schema,
                                        std::vector<SelectItem>& storage) {
    if (select && !select->star) return select->items;
    storage = all_fields(schema);
    return storage;
}

bool numeric_ref(const FieldRef& f) {
    return f.is_id || (f.field && (f.field->type.base == BaseType::Int ||
                                   f.field->type.base == BaseType::Float));
}

// A lookup's children go under its name after the columns of the level it attaches to, so the
// name must not be one of them (§7.2); `*` and no select stand for `_id` and every field.
Failure check_lookup_name(const Lookup& l, const std::optional<SelectList>& parent_select,
                          const engine::Schema& parent_schema) {
    std::vector<SelectItem> storage;
    for (const SelectItem& item : items_of(parent_select, parent_schema, storage)) {
        if (item.answer_name() == l.answer_name()) {
            return error_at(l.pos, "the lookup `" + l.answer_name() +
                                       "` is named like a column; name it with `as`");
        }
    }
    return std::nullopt;
}

QlResult<LookupLevel> plan_lookup(const Lookup& l, const engine::ReadView& view,
                                  const index::IndexSet& indexes, const engine::Schema& parent,
                                  const std::string& parent_name, const Context& ctx) {
    LookupLevel lv{&l, {}, nullptr, {}, {}, nullptr, std::nullopt};
    engine::Result<engine::CollectionId> c = view.find(l.collection.text);
    if (!c.is_ok() || l.collection.text.starts_with("_")) return not_found_collection(l.collection);
    lv.collection = *c;
    lv.schema = view.schema(*c);
    QlResult<FieldRef> ck = resolve_column(*lv.schema, Column{l.child_key.text, {}},
                                           l.child_key.pos, l.collection.text);
    if (!ck) return ck.take_error();
    lv.child_key = ck.value();
    if (!lv.child_key.is_id) {
        lv.index = indexes.find(*c, lv.child_key.slot);
        if (!lv.index || (lv.index->kind() != engine::IndexKind::hash &&
                          lv.index->kind() != engine::IndexKind::unique)) {
            return error_at(l.child_key.pos,
                            "`" + l.child_key.text + "` needs @hash or @unique to be a lookup key");
        }
    }
    const Name pk = l.parent_key.value_or(Name{"_id", l.child_key.pos});
    QlResult<FieldRef> pr = resolve_column(parent, Column{pk.text, {}}, pk.pos, parent_name);
    if (!pr) return pr.take_error();
    lv.parent_key = pr.value();
    const bool same = (lv.child_key.is_id && lv.parent_key.is_id) ||
                      (lv.child_key.field && lv.parent_key.field &&
                       lv.child_key.field->type == lv.parent_key.field->type);
    if (!same && !(numeric_ref(lv.child_key) && numeric_ref(lv.parent_key))) {
        return error_at(l.child_key.pos,
                        "`" + l.child_key.text + "` and `" + pk.text + "` are of different types");
    }
    if (l.where) {
        QlResult<CNode> w = compile_where(l.where->expr, *lv.schema, l.collection.text, ctx);
        if (!w) return w.take_error();
        lv.where = std::move(w.value());
    }
    return lv;
}

}  // namespace

QlResult<std::vector<LookupLevel>> plan_lookups(const Get& g, const engine::ReadView& view,
                                                const index::IndexSet& indexes,
                                                const engine::Schema& top, const Context& ctx) {
    std::vector<LookupLevel> levels;
    const engine::Schema* parent = &top;
    const std::optional<SelectList>* parent_select = &g.select;
    std::string parent_name = g.collection.text;
    for (const Lookup& l : g.lookups) {
        if (auto f = check_lookup_name(l, *parent_select, *parent)) return *f;
        QlResult<LookupLevel> lv = plan_lookup(l, view, indexes, *parent, parent_name, ctx);
        if (!lv) return lv.take_error();
        levels.push_back(std::move(lv.value()));
        parent = levels.back().schema;
        parent_select = &l.select;
        parent_name = l.collection.text;
    }
    return levels;
}

void attach_tables(Table& t, const std::string& name, std::vector<Table>& tables, size_t from) {
    t.lookup_names = std::make_shared<std::vector<std::string>>(std::vector<std::string>{name});
    for (size_t i = 0; i < t.rows.size(); ++i) {
        t.rows[i].children.push_back(std::move(tables[from + i]));
    }
}

Rows Lookups::matching(size_t level, DocId parent_id, const DocView& parent_doc) const {
    const LookupLevel& lv = levels[level];
    Rows rows;
    const Value key = read_column(lv.parent_key, parent_id, parent_doc);
    if (key.is_null()) return rows;  // a null parent key has no children
    std::vector<uint64_t> ids;
    if (lv.child_key.is_id) {
        if (const int64_t* i = std::get_if<int64_t>(&key.rep); i && *i > 0) ids.push_back(*i);
        if (const double* d = std::get_if<double>(&key.rep);
            d && *d >= 1 && *d == double(int64_t(*d))) {
            ids.push_back(static_cast<uint64_t>(*d));
        }
    } else {
        ids = lv.index->equal(index::key_of(key, lv.index->rule()));
    }
    for (uint64_t id : ids) {
        if (!ctx.visit()) break;  // the run's budget is passed: the executor refuses it
        std::optional<DocView> doc = view.get(lv.collection, DocId{id});
        if (!doc) continue;
        if (lv.where && !matches(*lv.where, DocId{id}, *doc, ctx)) continue;
        rows.rows.emplace_back(DocId{id}, *doc);
    }
    return rows;
}

QlResult<Children> Lookups::children(size_t level, DocId parent_id, const DocView& parent_doc) {
    const LookupLevel& lv = levels[level];
    const Lookup& l = *lv.lookup;
    Rows rows = matching(level, parent_id, parent_doc);
    if (l.order) {
        if (auto f = order_rows(rows, *l.order, *lv.schema, l.collection.text,
                                l.select ? &l.select->items : nullptr)) {
            return *f;
        }
    }
    std::vector<Table> grand;
    const bool next = level + 1 < levels.size();
    if (next) {
        QlResult<std::vector<Table>> a = attach(level + 1, rows);
        if (!a) return a.take_error();
        grand = std::move(a.value());
    }
    QlResult<Page> page = page_of(l.offset, l.limit, rows.rows.size(), ctx);
    if (!page) return page.take_error();
    Children out;
    out.any = !rows.rows.empty();
    Rows kept;
    kept.rows.assign(rows.rows.begin() + page.value().from, rows.rows.begin() + page.value().to);
    QlResult<Table> t = project(kept, l.select, *lv.schema, l.collection.text);
    if (!t) return t.take_error();
    out.table = std::move(t.value());
    if (next) {
        attach_tables(out.table, levels[level + 1].lookup->answer_name(), grand, page.value().from);
    }
    return out;
}

QlResult<std::vector<Table>> Lookups::attach(size_t level, Rows& rows) {
    std::vector<Table> out;
    Rows kept;
    for (const auto& [id, doc] : rows.rows) {
        QlResult<Children> c = children(level, id, doc);
        if (!c) return c.take_error();
        if (levels[level].lookup->required && !c.value().any) continue;
        kept.rows.emplace_back(id, doc);
        out.push_back(std::move(c.value().table));
    }
    rows = std::move(kept);
    return out;
}

}  // namespace fenec::ql
