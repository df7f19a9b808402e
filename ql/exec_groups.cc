// ql/exec_groups.cc: grouped reads and aggregates (fenecql.md §7.2, §7.4): the select list and
// the order keys resolved against the groups, rows folded into their group in ascending id order
// (so a float sum and the text standing for a fold are reproducible), then ordered and paged.
// Without `group`, aggregates answer exactly one row.
#include <algorithm>
#include <cmath>
#include <map>

#include "index/key.h"
#include "ql/compare.h"
#include "ql/exec_read_internal.h"

namespace fenec::ql {

using engine::BaseType;
using engine::DocId;
using engine::DocView;
using engine::Value;

namespace {

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
        return error_at(pos, "`" + spec.name + "`: " + std::string(aggregate_func_name(a.func)) +
                                 " needs an int or float field");
    }
    if (a.func == AggregateFunc::min || a.func == AggregateFunc::max) {
        const BaseType b = f.is_id ? BaseType::Int : f.field->type.base;
        if (b != BaseType::Bool && b != BaseType::Int && b != BaseType::Float &&
            b != BaseType::Text && b != BaseType::Timestamp) {
            return error_at(pos, "`" + spec.name +
                                     "`: min and max need a bool, int, float, text or "
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

}  // namespace

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

}  // namespace fenec::ql
