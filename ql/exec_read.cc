// ql/exec_read.cc: `get` and `select ... from` (fenecql.md §7, §10).
#include "ql/exec_read.h"

#include "ql/plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "index/key.h"
#include "ql/compare.h"
#include "ql/limits.h"
#include "ql/plan.h"

namespace fenec::ql {

using engine::BaseType;
using engine::DocId;
using engine::DocView;
using engine::Value;

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

namespace {

// The rows [from, to) of `size` that `offset` and `limit` keep (§7.1 step 3).
struct Page {
    size_t from = 0;
    size_t to = 0;
};

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

// ---- candidates from an index

struct Bound {
    std::string key;
    bool inclusive = true;
};

// Ids an indexed equality, `in` or range term narrows to; nullopt when it does not apply.
std::optional<std::vector<uint64_t>> index_term(const CNode& n, const index::IndexSet& indexes,
                                                engine::CollectionId c) {
    if (n.kind == CNode::Kind::in && !n.negated && n.kids[0].kind == CNode::Kind::column) {
        const FieldRef& ref = n.kids[0].column;
        if (ref.is_id || !ref.keys.empty()) return std::nullopt;
        const index::FieldIndex* ix = indexes.find(c, ref.slot);
        if (!ix) return std::nullopt;
        std::vector<uint64_t> ids;
        for (const Value& v : n.set) {
            std::vector<uint64_t> part = ix->equal(index::key_of(v, ix->rule()));
            ids.insert(ids.end(), part.begin(), part.end());
        }
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        return ids;
    }
    if (n.kind != CNode::Kind::compare) return std::nullopt;
    const CNode* col = &n.kids[0];
    const CNode* val = &n.kids[1];
    CompareOp op = n.op;
    if (col->kind != CNode::Kind::column) {
        std::swap(col, val);
        switch (op) {  // c < x is x > c
            case CompareOp::lt:
                op = CompareOp::gt;
                break;
            case CompareOp::le:
                op = CompareOp::ge;
                break;
            case CompareOp::gt:
                op = CompareOp::lt;
                break;
            case CompareOp::ge:
                op = CompareOp::le;
                break;
            default:
                break;
        }
    }
    if (col->kind != CNode::Kind::column || val->kind != CNode::Kind::constant) return std::nullopt;
    const FieldRef& ref = col->column;
    if (!ref.keys.empty()) return std::nullopt;
    if (ref.is_id) {
        if (op != CompareOp::eq) return std::nullopt;
        const int64_t* i = std::get_if<int64_t>(&val->constant.rep);
        if (i && *i > 0) return std::vector<uint64_t>{static_cast<uint64_t>(*i)};
        return std::nullopt;  // a float id or another kind: the filter decides
    }
    const index::FieldIndex* ix = indexes.find(c, ref.slot);
    if (!ix || !(ix->rule() == n.rule || !ref.is_text())) return std::nullopt;
    const std::string key = index::key_of(val->constant, ix->rule());
    if (op == CompareOp::eq) return ix->equal(key);
    if (!ix->ordered() || val->constant.is_null()) return std::nullopt;
    if (op != CompareOp::lt && op != CompareOp::le && op != CompareOp::gt && op != CompareOp::ge) {
        return std::nullopt;
    }
    // Ranges stay within the constant's kind: across kinds `<` is false (§6.2).
    const std::string kind_lo(1, key[0]);
    const std::string kind_hi(1, static_cast<char>(key[0] + 1));
    const auto& entries = ix->entries();
    auto lo = entries.lower_bound({kind_lo, 0});
    auto hi = entries.lower_bound({kind_hi, 0});
    if (op == CompareOp::gt) lo = entries.upper_bound({key, UINT64_MAX});
    if (op == CompareOp::ge) lo = entries.lower_bound({key, 0});
    if (op == CompareOp::lt) hi = entries.lower_bound({key, 0});
    if (op == CompareOp::le) hi = entries.upper_bound({key, UINT64_MAX});
    std::vector<uint64_t> ids;
    for (auto it = lo; it != hi && it != entries.end(); ++it) {
        if (it->first >= kind_hi) break;
        ids.push_back(it->second);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

std::optional<std::vector<uint64_t>> candidates(const CNode* where, const index::IndexSet& indexes,
                                                engine::CollectionId c) {
    if (!where) return std::nullopt;
    if (where->kind != CNode::Kind::and_) return index_term(*where, indexes, c);
    std::optional<std::vector<uint64_t>> best;
    for (const CNode& term : where->kids) {
        std::optional<std::vector<uint64_t>> ids = index_term(term, indexes, c);
        if (ids && (!best || ids->size() < best->size())) best = std::move(ids);
    }
    return best;
}

}  // namespace

Rows select_rows(const engine::ReadView& view, const index::IndexSet& indexes,
                 engine::CollectionId c, const CNode* where, const Context& ctx) {
    Rows out;
    std::optional<std::vector<uint64_t>> ids = candidates(where, indexes, c);
    if (ids) {
        for (uint64_t id : *ids) {
            std::optional<DocView> doc = view.get(c, DocId{id});
            if (!doc) continue;
            if (!where || matches(*where, DocId{id}, *doc, ctx))
                out.rows.emplace_back(DocId{id}, *doc);
        }
        return out;
    }
    view.scan(c, [&](DocId id, DocView doc) {
        if (!where || matches(*where, id, doc, ctx)) out.rows.emplace_back(id, doc);
        return true;
    });
    return out;
}

namespace {

// One order key resolved against a collection: the column it reads and the rule it compares by.
struct SortKey {
    FieldRef ref;
    index::TextRule rule;
    bool desc = false;
};

QlResult<SortKey> resolve_order_key(const OrderKey& k, const engine::Schema& schema,
                                    const std::string& collection,
                                    const std::vector<SelectItem>* aliases) {
    const Column* col = std::get_if<Column>(&k.what);
    if (!col) return error_at(k.pos, "an aggregate orders only a grouped read");
    Column target = *col;
    if (aliases && col->keys.empty()) {
        for (const SelectItem& item : *aliases) {
            if (item.alias && item.alias->text == col->field) {
                if (const Column* real = std::get_if<Column>(&item.what)) target = *real;
            }
        }
    }
    QlResult<FieldRef> ref = resolve_column(schema, target, k.pos, collection);
    if (!ref) return ref.take_error();
    SortKey key{ref.value(), ref.value().rule, k.desc};
    if (k.collate) {
        if (!ref.value().is_text()) {
            return error_at(k.collate_pos,
                            "`collate` needs a text column, and `" + col->text() + "` is not one");
        }
        key.rule.collation = *k.collate;
    }
    return key;
}

void append_id(std::string& out, uint64_t id) {
    for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>(id >> (8 * i)));
}

void append_sort_key(std::string& out, const Value& v, const index::TextRule& rule, bool desc) {
    const size_t at = out.size();
    index::append_key(v, rule, out);
    if (desc) {
        for (size_t i = at; i < out.size(); ++i) out[i] = static_cast<char>(~out[i]);
    }
}

}  // namespace

Failure order_rows(Rows& rows, const OrderBy& order, const engine::Schema& schema,
                   const std::string& collection, const std::vector<SelectItem>* aliases) {
    std::vector<SortKey> keys;
    for (const OrderKey& k : order.keys) {
        QlResult<SortKey> key = resolve_order_key(k, schema, collection, aliases);
        if (!key) return key.take_error();
        keys.push_back(std::move(key.value()));
    }
    std::vector<std::pair<std::string, size_t>> sorted;
    sorted.reserve(rows.rows.size());
    for (size_t i = 0; i < rows.rows.size(); ++i) {
        std::string s;
        for (const SortKey& k : keys) {
            append_sort_key(s, read_column(k.ref, rows.rows[i].first, rows.rows[i].second), k.rule,
                            k.desc);
        }
        append_id(s, rows.rows[i].first.v);
        sorted.emplace_back(std::move(s), i);
    }
    std::sort(sorted.begin(), sorted.end());
    Rows out;
    out.rows.reserve(rows.rows.size());
    for (const auto& [s, i] : sorted) out.rows.push_back(rows.rows[i]);
    rows = std::move(out);
    return std::nullopt;
}

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

}  // namespace

QlResult<Table> project(const Rows& rows, const std::optional<SelectList>& select,
                        const engine::Schema& schema, const std::string& collection) {
    std::vector<FieldRef> refs;
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
            QlResult<FieldRef> ref = resolve_column(schema, *col, item.pos, collection);
            if (!ref) return ref.take_error();
            refs.push_back(std::move(ref.value()));
            names->push_back(item.answer_name());
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
    Table t;
    t.columns = names;
    t.rows.reserve(rows.rows.size());
    for (const auto& [id, doc] : rows.rows) {
        doc.raw_slots(raws);
        Row r;
        r.cells.reserve(refs.size());
        for (const FieldRef& ref : refs) {
            if (ref.is_id || !ref.keys.empty()) {
                r.cells.push_back(read_column(ref, id, doc));
            } else {
                r.cells.push_back(DocView::value_of(raws[ref.slot]));
            }
        }
        t.rows.push_back(std::move(r));
    }
    return t;
}

namespace {

// ---- aggregates and groups

struct AggSpec {
    AggregateFunc func;
    std::optional<FieldRef> field;  // none: count(*)
    std::string name;               // as written, normalised
};

struct AggState {
    uint64_t count = 0;
    int64_t isum = 0;
    bool overflow = false;
    __int128 wide = 0;
    double fsum = 0;
    bool any = false;
    Value best;
};

struct GroupState {
    std::vector<Value> keys;
    std::vector<AggState> aggs;
};

bool numeric_field(const FieldRef& f) {
    return f.field &&
           (f.field->type.base == BaseType::Int || f.field->type.base == BaseType::Float);
}

QlResult<AggSpec> resolve_aggregate(const Aggregate& a, uint32_t pos, const engine::Schema& schema,
                                    const std::string& collection) {
    AggSpec spec{a.func, std::nullopt, a.text()};
    if (!a.field) return spec;
    QlResult<FieldRef> ref =
        resolve_column(schema, Column{a.field->text, {}}, a.field->pos, collection);
    if (!ref) return ref.take_error();
    const FieldRef& f = ref.value();
    if ((a.func == AggregateFunc::sum || a.func == AggregateFunc::avg) && !numeric_field(f)) {
        return error_at(pos, spec.name + ": " + std::string(aggregate_func_name(a.func)) +
                                 " needs an int or float field");
    }
    if (a.func == AggregateFunc::min || a.func == AggregateFunc::max) {
        const BaseType b = f.is_id ? BaseType::Int : f.field->type.base;
        if (b != BaseType::Bool && b != BaseType::Int && b != BaseType::Float &&
            b != BaseType::Text && b != BaseType::Timestamp) {
            return error_at(pos, spec.name +
                                     ": min and max need a bool, int, float, text or "
                                     "timestamp field");
        }
    }
    spec.field = f;
    return spec;
}

void accumulate(AggState& s, const AggSpec& spec, DocId id, const DocView& doc) {
    if (!spec.field) {
        ++s.count;
        return;
    }
    const Value v = read_column(*spec.field, id, doc);
    if (v.is_null()) return;
    ++s.count;
    switch (spec.func) {
        case AggregateFunc::count:
            break;
        case AggregateFunc::sum:
        case AggregateFunc::avg:
            s.any = true;
            if (const int64_t* i = std::get_if<int64_t>(&v.rep)) {
                if (__builtin_add_overflow(s.isum, *i, &s.isum)) s.overflow = true;
                s.wide += *i;
            } else if (const double* d = std::get_if<double>(&v.rep)) {
                s.fsum += *d;  // rows come in ascending id: reproducible (§5.3)
            }
            break;
        case AggregateFunc::min:
        case AggregateFunc::max: {
            if (!s.any) {
                s.best = v;
                s.any = true;
                break;
            }
            const int c = compare_values(v, s.best, spec.field->rule);
            // Strictly better only: among equals the lowest id's value stands (§6.4).
            if ((spec.func == AggregateFunc::min && c < 0) ||
                (spec.func == AggregateFunc::max && c > 0)) {
                s.best = v;
            }
            break;
        }
    }
}

// sum / count rounded once, to the nearest double (ties to even): the avg of an int field (§5.3,
// §7.4). Long division gives at least 55 significant bits of the quotient, with a sticky last bit
// for any remainder, so the one rounding, in the conversion, is exact. `count` is not 0.
double exact_quotient(__int128 sum, uint64_t count) {
    using U128 = unsigned __int128;
    const bool negative = sum < 0;
    const U128 magnitude = negative ? U128(0) - static_cast<U128>(sum) : static_cast<U128>(sum);
    U128 q = magnitude / count;
    U128 r = magnitude % count;
    int shift = 0;
    while (q < (U128(1) << 55)) {  // r < count < 2^64: `r << 1` cannot overflow
        r <<= 1;
        q <<= 1;
        if (r >= count) {
            r -= count;
            q |= 1;
        }
        ++shift;
    }
    if (r != 0) q |= 1;
    const double d = std::ldexp(static_cast<double>(q), -shift);
    return negative ? -d : d;
}

QlResult<Value> result_of(const AggState& s, const AggSpec& spec) {
    switch (spec.func) {
        case AggregateFunc::count:
            return Value(static_cast<int64_t>(s.count));
        case AggregateFunc::sum:
            if (!s.any) return Value();
            if (spec.field->field->type.base == BaseType::Float) return Value(s.fsum);
            if (s.overflow) {
                Error e;
                e.message = "`" + spec.name + "` overflows a 64-bit int";
                return e;
            }
            return Value(s.isum);
        case AggregateFunc::avg:
            if (!s.any) return Value();
            if (spec.field->field->type.base == BaseType::Float)
                return Value(s.fsum / double(s.count));
            return Value(exact_quotient(s.wide, s.count));
        case AggregateFunc::min:
        case AggregateFunc::max:
            return s.any ? s.best : Value();
    }
    return Value();
}

struct OutCol {
    std::string name;
    int group_key = -1;  // index into the group keys
    int agg = -1;        // index into the aggregates
};

// A grouped read, or a read of aggregates alone, resolved against the schema.
struct GroupPlan {
    std::vector<FieldRef> keys;
    std::vector<AggSpec> aggs;
    std::vector<OutCol> out;  // the answer's columns, in select order
};

// An order key of a grouped read: a column of the answer, or a group key it does not select.
struct GroupOrderKey {
    int column = -1;
    int group_key = -1;
    index::TextRule rule;
    bool desc = false;
};

// One group of the answer, with its key values for the order keys that name a group key.
struct GroupRow {
    Row row;
    std::vector<Value> keys;
};

QlResult<std::vector<FieldRef>> resolve_group_keys(const Group& group, const engine::Schema& schema,
                                                   const std::string& collection) {
    std::vector<FieldRef> keys;
    for (const Name& k : group.keys) {
        QlResult<FieldRef> ref = resolve_column(schema, Column{k.text, {}}, k.pos, collection);
        if (!ref) return ref.take_error();
        const FieldRef& f = ref.value();
        if (f.is_id || !f.field || f.field->type.base == BaseType::Vector ||
            f.field->type.base == BaseType::List || f.field->type.base == BaseType::Json) {
            return error_at(k.pos, "`" + k.text + "` cannot be a group key");
        }
        keys.push_back(f);
    }
    return keys;
}

// Each select item is an aggregate or a group key (§7.2).
QlResult<OutCol> resolve_group_item(const SelectItem& item, GroupPlan& plan,
                                    const engine::Schema& schema, const std::string& collection) {
    OutCol col{item.answer_name()};
    if (const Aggregate* a = std::get_if<Aggregate>(&item.what)) {
        QlResult<AggSpec> spec = resolve_aggregate(*a, item.pos, schema, collection);
        if (!spec) return spec.take_error();
        col.agg = static_cast<int>(plan.aggs.size());
        plan.aggs.push_back(std::move(spec.value()));
        return col;
    }
    const Column& c = std::get<Column>(item.what);
    for (size_t i = 0; i < plan.keys.size(); ++i) {
        if (c.keys.empty() && plan.keys[i].name == c.field) col.group_key = static_cast<int>(i);
    }
    if (col.group_key < 0) {
        return error_at(item.pos, "`" + c.text() + "` is neither grouped by nor aggregated");
    }
    return col;
}

QlResult<GroupPlan> plan_grouped(const Get& g, const engine::Schema& schema,
                                 const std::string& collection) {
    if (!g.select || g.select->star) {
        return error_at(g.group ? g.group->pos : g.pos, "a grouped read needs a select list");
    }
    GroupPlan plan;
    if (g.group) {
        QlResult<std::vector<FieldRef>> keys = resolve_group_keys(*g.group, schema, collection);
        if (!keys) return keys.take_error();
        plan.keys = std::move(keys.value());
    } else if (g.order || g.limit || g.offset) {
        uint32_t pos = g.order ? g.order->pos : g.limit ? g.limit->pos : g.offset->pos;
        return error_at(pos,
                        "aggregates without `group` answer one row: no order, limit or offset");
    }
    std::vector<std::string> names;
    for (const SelectItem& item : g.select->items) {
        QlResult<OutCol> col = resolve_group_item(item, plan, schema, collection);
        if (!col) return col.take_error();
        names.push_back(col.value().name);
        plan.out.push_back(std::move(col.value()));
    }
    if (auto f = unique_names(names, g.select->pos)) return *f;
    return plan;
}

// The column `text` names: a select column by name or alias, else an aggregate as written
// (`order sum(amount)` when it is selected `as total`); -1 if none.
int group_column(const GroupPlan& plan, const std::string& text) {
    for (size_t i = 0; i < plan.out.size(); ++i) {
        if (plan.out[i].name == text) return static_cast<int>(i);
    }
    for (size_t i = 0; i < plan.out.size(); ++i) {
        const int agg = plan.out[i].agg;
        if (agg >= 0 && plan.aggs[agg].name == text) return static_cast<int>(i);
    }
    return -1;
}

// Keys name a select column (by name or alias) or a group key, selected or not (§7.2, §7.3).
// Text orders by the key's rule, or `collate`, for group keys and text min/max only.
QlResult<GroupOrderKey> resolve_group_order_key(const OrderKey& k, const GroupPlan& plan) {
    const std::string text = target_text(k.what);
    GroupOrderKey key;
    key.desc = k.desc;
    key.column = group_column(plan, text);
    for (size_t i = 0; key.column < 0 && i < plan.keys.size(); ++i) {
        if (!is_aggregate(k.what) && plan.keys[i].name == text) key.group_key = static_cast<int>(i);
    }
    if (key.column < 0 && key.group_key < 0) {
        return error_at(k.pos, "`" + text + "` is not a column of this grouped read");
    }
    const FieldRef* src = nullptr;
    bool text_col = false;
    if (key.group_key >= 0 || plan.out[key.column].group_key >= 0) {
        src = &plan.keys[key.group_key >= 0 ? key.group_key : plan.out[key.column].group_key];
        text_col = src->is_text();
    } else {
        const AggSpec& agg = plan.aggs[plan.out[key.column].agg];
        src = agg.field ? &*agg.field : nullptr;
        text_col = src && src->is_text() &&
                   (agg.func == AggregateFunc::min || agg.func == AggregateFunc::max);
    }
    if (text_col) key.rule = src->rule;
    if (k.collate) {
        if (!text_col) {
            return error_at(k.collate_pos,
                            "`collate` needs a text column, and `" + text + "` is not one");
        }
        key.rule.collation = *k.collate;
    }
    return key;
}

// Groups in the default order: by their keys ascending, in the order `group` names them, null
// first (the map's order is the keys' order, index/key.h).
std::map<std::string, GroupState> group_rows(const Rows& rows, const GroupPlan& plan) {
    std::map<std::string, GroupState> groups;
    for (const auto& [id, doc] : rows.rows) {
        std::string gk;
        std::vector<Value> kv;
        for (const FieldRef& k : plan.keys) {
            kv.push_back(read_column(k, id, doc));
            index::append_key(kv.back(), k.rule, gk);
        }
        auto [it, fresh] = groups.try_emplace(gk);
        if (fresh) {
            it->second.keys = std::move(kv);  // the lowest id's text stands for its fold (§6.4)
            it->second.aggs.resize(plan.aggs.size());
        }
        for (size_t a = 0; a < plan.aggs.size(); ++a) {
            accumulate(it->second.aggs[a], plan.aggs[a], id, doc);
        }
    }
    // Without `group`, aggregates answer exactly one row, also over zero rows (§7.4).
    if (plan.keys.empty() && groups.empty()) {
        groups.try_emplace(std::string()).first->second.aggs.resize(plan.aggs.size());
    }
    return groups;
}

// Every group's row; one overflowing sum fails the statement, whatever the paging (§7.4).
QlResult<std::vector<GroupRow>> group_answers(std::map<std::string, GroupState>& groups,
                                              const GroupPlan& plan) {
    std::vector<GroupRow> out;
    out.reserve(groups.size());
    for (auto& [gk, state] : groups) {
        GroupRow g;
        for (const OutCol& c : plan.out) {
            if (c.group_key >= 0) {
                g.row.cells.push_back(state.keys[c.group_key]);
                continue;
            }
            QlResult<Value> v = result_of(state.aggs[c.agg], plan.aggs[c.agg]);
            if (!v) return v.take_error();
            g.row.cells.push_back(std::move(v.value()));
        }
        g.keys = std::move(state.keys);
        out.push_back(std::move(g));
    }
    return out;
}

void order_groups(std::vector<GroupRow>& groups, const std::vector<GroupOrderKey>& keys) {
    std::vector<std::pair<std::string, size_t>> sorted;
    sorted.reserve(groups.size());
    for (size_t i = 0; i < groups.size(); ++i) {
        std::string s;
        for (const GroupOrderKey& k : keys) {
            const Value& v =
                k.column >= 0 ? groups[i].row.cells[k.column] : groups[i].keys[k.group_key];
            append_sort_key(s, v, k.rule, k.desc);
        }
        append_id(s, i);  // ties keep the default group order
        sorted.emplace_back(std::move(s), i);
    }
    std::sort(sorted.begin(), sorted.end());
    std::vector<GroupRow> ordered;
    ordered.reserve(groups.size());
    for (const auto& [s, i] : sorted) ordered.push_back(std::move(groups[i]));
    groups = std::move(ordered);
}

QlResult<Answer> run_grouped(const Get& g, const Rows& rows, const engine::Schema& schema,
                             const std::string& collection, const Context& ctx) {
    QlResult<GroupPlan> plan = plan_grouped(g, schema, collection);
    if (!plan) return plan.take_error();
    std::vector<GroupOrderKey> order;
    for (size_t i = 0; g.order && i < g.order->keys.size(); ++i) {
        QlResult<GroupOrderKey> key = resolve_group_order_key(g.order->keys[i], plan.value());
        if (!key) return key.take_error();
        order.push_back(key.value());
    }
    std::map<std::string, GroupState> groups = group_rows(rows, plan.value());
    QlResult<std::vector<GroupRow>> answers = group_answers(groups, plan.value());
    if (!answers) return answers.take_error();
    if (!order.empty()) order_groups(answers.value(), order);
    QlResult<Page> page = page_of(g.offset, g.limit, answers.value().size(), ctx);
    if (!page) return page.take_error();
    Answer answer;
    answer.kind = Answer::Kind::rows;
    auto names = std::make_shared<std::vector<std::string>>();
    for (const OutCol& c : plan.value().out) names->push_back(c.name);
    answer.table.columns = std::move(names);
    for (size_t i = page.value().from; i < page.value().to; ++i) {
        answer.table.rows.push_back(std::move(answers.value()[i].row));
    }
    return answer;
}

bool has_aggregate(const std::optional<SelectList>& s) {
    if (!s) return false;
    for (const SelectItem& i : s->items) {
        if (is_aggregate(i.what)) return true;
    }
    return false;
}

// ---- lookups

struct LookupLevel {
    const Lookup* lookup;
    engine::CollectionId collection;
    const engine::Schema* schema;
    FieldRef child_key;
    FieldRef parent_key;
    const index::FieldIndex* index = nullptr;  // on child_key, unless it is `_id`
    std::optional<CNode> where;
};

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

// Puts the children tables under the lookup's name in each row of `t`; `tables` holds one per
// row of the level before paging, `from` being the first row kept.
void attach_tables(Table& t, const std::string& name, std::vector<Table>& tables, size_t from) {
    t.lookup_names = std::make_shared<std::vector<std::string>>(std::vector<std::string>{name});
    for (size_t i = 0; i < t.rows.size(); ++i) {
        t.rows[i].children.push_back(std::move(tables[from + i]));
    }
}

// The children of one parent row, and whether any passed the lookup's `where` (and kept their
// own required children) before its offset and limit: what `required` judges (§10).
struct Children {
    Table table;
    bool any = false;
};

struct Lookups {
    const engine::ReadView& view;
    const Context& ctx;
    std::vector<LookupLevel>& levels;

    // The rows of `level` whose key matches the parent's and that pass the lookup's `where`,
    // in ascending id order.
    Rows matching(size_t level, DocId parent_id, const DocView& parent_doc) const;
    // The children at `level` of a parent row, each with its own children attached.
    QlResult<Children> children(size_t level, DocId parent_id, const DocView& parent_doc);
    // Attaches level `level` to `rows` (of the level above), dropping parents a `required`
    // lookup leaves childless. Children are computed before the caller pages `rows`.
    QlResult<std::vector<Table>> attach(size_t level, Rows& rows);
};

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

}  // namespace

namespace {

// ---- ranked reads: match and near (fenecql.md §8, §9)

constexpr uint64_t kRankedRowsMax = 10'000;

Error ranked_limit() {
    Error e;
    e.message = "match and near rank at most 10000 rows";
    e.limit = Limit::ranked_rows;
    e.max = kRankedRowsMax;
    return e;
}

// The field a ranked clause names, which must carry `kind`.
QlResult<uint16_t> ranked_field(const Name& field, const engine::Schema& schema,
                                engine::IndexKind kind, const char* clause) {
    const std::optional<uint16_t> slot = schema.slot_of(field.text);
    const char* needs = kind == engine::IndexKind::text ? "@text" : "@hnsw";
    if (!slot || schema.fields[*slot].index.kind != kind) {
        return error_at(field.pos, std::string("`") + clause + "` needs a field with " + needs +
                                       ", and `" + field.text + "` has none");
    }
    return *slot;
}

QlResult<std::vector<float>> query_vector(const Expr& e, const Context& ctx, const std::string& field) {
    QlResult<Value> v = eval_constant(e, ctx);
    if (!v) return v.take_error();
    std::vector<float> out;
    if (const auto* vf = std::get_if<engine::VectorF32>(&v.value().rep)) return vf->v;
    const auto* l = std::get_if<engine::List>(&v.value().rep);
    if (!l) return error_at(e.pos, "`near " + field + "` takes a list of numbers");
    for (const Value& item : l->items) {
        if (const int64_t* i = std::get_if<int64_t>(&item.rep)) out.push_back(static_cast<float>(*i));
        else if (const double* d = std::get_if<double>(&item.rep)) out.push_back(static_cast<float>(*d));
        else return error_at(e.pos, "`near " + field + "` takes a list of numbers, found " + kind_of(item));
    }
    return out;
}

}  // namespace

QlResult<Answer> run_ranked(const Get& g, const engine::ReadView& view, const index::IndexSet& indexes,
                            engine::CollectionId c, const engine::Schema& schema, const CNode* where,
                            const Context& ctx) {
    uint64_t offset = 0, limit = kRankedRowsMax;
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
    if (offset > kRankedRowsMax || limit > kRankedRowsMax - offset) return ranked_limit();
    const size_t k = static_cast<size_t>(offset + limit);
    std::vector<std::pair<uint64_t, double>> hits;
    if (g.match) {
        QlResult<uint16_t> slot = ranked_field(g.match->field, schema, engine::IndexKind::text, "match");
        if (!slot) return slot.take_error();
        QlResult<Value> q = eval_constant(g.match->query, ctx);
        if (!q) return q.take_error();
        const auto* text = std::get_if<std::string>(&q.value().rep);
        if (!text) return error_at(g.match->query.pos, "`match` takes a text, found " + kind_of(q.value()));
        auto keep = [&](uint64_t id) {
            std::optional<engine::DocView> doc = view.get(c, engine::DocId{id});
            return doc && (!where || matches(*where, engine::DocId{id}, *doc, ctx));
        };
        hits = indexes.text().match(c, slot.value(), *text, keep, k);
    } else {
        QlResult<uint16_t> slot = ranked_field(g.near->field, schema, engine::IndexKind::hnsw, "near");
        if (!slot) return slot.take_error();
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
        if (!found.is_ok()) return error_at(g.near->vector.pos, std::string(found.status().message()));
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
    QlResult<Table> t = project(rows, g.select, schema, g.collection.text);
    if (!t) return t.take_error();
    t.value().scored = true;
    for (size_t i = 0; i < t.value().rows.size(); ++i) t.value().rows[i].score = scores[i];
    Answer a;
    a.kind = Answer::Kind::rows;
    a.table = std::move(t.value());
    return a;
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
        const uint64_t want = limit.value() > UINT64_MAX - offset ? UINT64_MAX : offset + limit.value();
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
