// ql/parse_read.cc: reads, `get` and `select ... from` (fenecql.md §3 "reads", §7 to §10): their
// clauses, select lists, order keys and lookup chains, then the clause rules of §7.2 that need no
// schema. Each rule's error carries the position of the clause or item that breaks it: for `near`
// with `match` the later of the two; for a ranked or aggregate read, the clause or item that does
// not combine with it (an `order`, a `limit`'s value, a plain column, a lookup).
#include <algorithm>
#include <limits>
#include <unordered_set>

#include "ql/limits.h"
#include "ql/parse_state.h"

namespace fenec::ql::detail {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int64_t>::max();

std::optional<AggregateFunc> aggregate_func(std::string_view word) {
    constexpr AggregateFunc kFuncs[] = {AggregateFunc::count, AggregateFunc::sum,
                                        AggregateFunc::avg, AggregateFunc::min,
                                        AggregateFunc::max};
    for (AggregateFunc f : kFuncs) {
        if (keyword_equals(word, aggregate_func_name(f))) return f;
    }
    return std::nullopt;
}

}  // namespace

// get = "get" NAME { clause } [ lookup ];  select_first = "select" select_list "from" NAME ...
QlResult<Statement> Parser::parse_get(bool select_first) {
    Get get;
    get.select_first = select_first;
    select_first_ = select_first;
    get.pos = peek().pos;
    if (select_first) {
        QL_ASSIGN(get.select, parse_select_list(false));
        QL_TRY(expect_word("from", "`,` or `from` after the select list"));
        QL_ASSIGN(get.collection, expect_name("a collection name after `from`"));
    } else {
        take();
        QL_ASSIGN(get.collection, expect_name("a collection name after `get`"));
    }
    for (bool done = false; !done;) QL_TRY(parse_get_clause(get, done));
    while (at_word("lookup")) {
        if (get.lookups.size() == limits::lookup_depth_max) {
            return limit_error(peek().pos, Limit::lookup_depth, limits::lookup_depth_max,
                               "a lookup chain goes at most " +
                                   std::to_string(limits::lookup_depth_max) + " levels deep");
        }
        QL_ASSIGN(Lookup lookup, parse_lookup());
        get.lookups.push_back(std::move(lookup));
    }
    QL_TRY(check_read(get));
    return Statement{std::move(get)};
}

// One clause of a read level, or done = true when the next token starts none.
Failure Parser::parse_get_clause(Get& get, bool& done) {
    if (at_word("select")) {
        if (get.select && select_first_) {
            return error_at(peek().pos, "a `select ... from` read takes no second `select`");
        }
        return parse_once(get.select, [&] { return parse_select_list(false); });
    }
    if (at_word("where")) return parse_once(get.where, [&] { return parse_where(); });
    if (at_word("near")) return parse_once(get.near, [&] { return parse_near(); });
    if (at_word("match")) return parse_once(get.match, [&] { return parse_match(); });
    if (at_word("group")) return parse_once(get.group, [&] { return parse_group(); });
    if (at_word("order")) return parse_once(get.order, [&] { return parse_order_by(); });
    if (at_word("limit")) {
        return parse_once(get.limit, [&] { take(); return parse_int_arg("limit", 0, kIntMax); });
    }
    if (at_word("offset")) {
        return parse_once(get.offset, [&] { take(); return parse_int_arg("offset", 0, kIntMax); });
    }
    done = true;
    return std::nullopt;
}

// lookup = "lookup" NAME [ "as" NAME ] "on" NAME [ "=" NAME ] { lookup_clause }.
QlResult<Lookup> Parser::parse_lookup() {
    Lookup lookup;
    lookup.pos = take().pos;
    QL_ASSIGN(lookup.collection, expect_name("a collection name after `lookup`"));
    if (accept_word("as")) {
        QL_ASSIGN(lookup.alias, expect_name("a name after `as`"));
    }
    QL_TRY(expect_word("on", "`on` after `lookup " + lookup.collection.text + "`"));
    QL_ASSIGN(lookup.child_key, expect_name("the child's key field after `on`"));
    if (accept(TokenKind::eq)) {
        QL_ASSIGN(lookup.parent_key, expect_name("the parent's key field after `=`"));
    }
    for (bool done = false; !done;) QL_TRY(parse_lookup_clause(lookup, done));
    return lookup;
}

// lookup_clause = select | where | order | limit | offset | "required".
Failure Parser::parse_lookup_clause(Lookup& lookup, bool& done) {
    if (at_word("select")) return parse_once(lookup.select, [&] { return parse_select_list(false); });
    if (at_word("where")) return parse_once(lookup.where, [&] { return parse_where(); });
    if (at_word("order")) return parse_once(lookup.order, [&] { return parse_order_by(); });
    if (at_word("limit")) {
        return parse_once(lookup.limit, [&] { take(); return parse_int_arg("limit", 0, kIntMax); });
    }
    if (at_word("offset")) {
        return parse_once(lookup.offset,
                          [&] { take(); return parse_int_arg("offset", 0, kIntMax); });
    }
    if (at_word("required")) {
        if (lookup.required) return repeated_clause(peek());
        lookup.required = take().pos;
        return std::nullopt;
    }
    if (at_word("near") || at_word("match") || at_word("group")) {
        return error_at(peek().pos, "`" + std::string(peek().raw) +
                                        "` cannot follow a `lookup`: the clauses after a lookup "
                                        "are its own (select, where, order, limit, offset, "
                                        "required)");
    }
    done = true;
    return std::nullopt;
}

// select_list = "*" | item { "," item }, item = ( column | aggregate ) [ "as" NAME ]. The cursor
// is on `select` or `returning`; `returning` lists columns only (§4.2).
QlResult<SelectList> Parser::parse_select_list(bool columns_only) {
    Token keyword = take();
    SelectList list;
    list.pos = keyword.pos;
    if (accept(TokenKind::star)) {
        list.star = true;
        return list;
    }
    std::string expected = "a column or an aggregate after `" + std::string(keyword.raw) + "`";
    do {
        SelectItem item;
        item.pos = peek().pos;
        QL_ASSIGN(item.what, parse_target(expected));
        if (columns_only && is_aggregate(item.what)) {
            return error_at(item.pos, "`returning` lists columns, not aggregates");
        }
        if (accept_word("as")) {
            QL_ASSIGN(item.alias, expect_name("a name after `as`"));
        }
        list.items.push_back(std::move(item));
        expected = "a column or an aggregate after `,`";
    } while (accept(TokenKind::comma));
    return list;
}

// column | aggregate: `count`, `sum`, `avg`, `min`, `max` are aggregates only before `(` (§3 rule 4).
QlResult<Target> Parser::parse_target(std::string_view expected) {
    const Token& t = peek();
    if (t.kind == TokenKind::word && aggregate_func(t.raw) && at(TokenKind::lparen, 1)) {
        QL_ASSIGN(Aggregate agg, parse_aggregate());
        return Target{std::move(agg)};
    }
    if (!at_name()) return unexpected_name(expected);
    if (at(TokenKind::lparen, 1)) {
        return error_at(t.pos, "expected a column or an aggregate, found a call of `" + t.text +
                                   "`: computed columns are not supported");
    }
    QL_ASSIGN(Column column, parse_column());
    return Target{std::move(column)};
}

// aggregate = "count" "(" ( "*" | NAME ) ")" | ( "sum" | "avg" | "min" | "max" ) "(" NAME ")".
QlResult<Aggregate> Parser::parse_aggregate() {
    Token fn = take();
    take();  // (
    Aggregate agg;
    agg.func = *aggregate_func(fn.raw);
    std::string call = std::string(aggregate_func_name(agg.func)) + "(";
    if (agg.func != AggregateFunc::count || !accept(TokenKind::star)) {
        bool count = agg.func == AggregateFunc::count;
        if (!at_name()) return unexpected((count ? "a field or `*` in `" : "a field in `") + call + "`");
        uint32_t pos = peek().pos;
        QL_ASSIGN(Column column, parse_column());
        if (column.is_path()) {
            return error_at(pos, "an aggregate takes a field, not the path `" + column.text() + "`");
        }
        agg.field = Name{std::move(column.field), pos};
    }
    QL_TRY(expect(TokenKind::rparen, "`)` to close `" + call + "`"));
    return agg;
}

// "order" [ "by" ] order_key { "," order_key }.
QlResult<OrderBy> Parser::parse_order_by() {
    OrderBy order;
    order.pos = take().pos;
    accept_word("by");
    do {
        QL_ASSIGN(OrderKey key, parse_order_key());
        order.keys.push_back(std::move(key));
    } while (accept(TokenKind::comma));
    return order;
}

// order_key = ( column | aggregate ) [ "collate" COLLATION ] [ "asc" | "desc" ].
QlResult<OrderKey> Parser::parse_order_key() {
    OrderKey key;
    key.pos = peek().pos;
    QL_ASSIGN(key.what, parse_target("a column or an aggregate to order by"));
    if (accept_word("collate")) {
        key.collate_pos = peek().pos;
        QL_ASSIGN(key.collate, parse_collation());
        const auto* column = std::get_if<Column>(&key.what);
        const auto* agg = std::get_if<Aggregate>(&key.what);
        bool never_text = (column && !column->is_path() && column->field == "_id") ||
                          (agg && agg->func != AggregateFunc::min && agg->func != AggregateFunc::max);
        if (never_text) {
            return error_at(key.pos, "`collate` orders text; `" + target_text(key.what) +
                                         "` is a number");
        }
    }
    if (accept_word("desc")) {
        key.desc = true;
    } else {
        accept_word("asc");
    }
    return key;
}

QlResult<Where> Parser::parse_where() {
    Where where;
    where.pos = take().pos;
    QL_ASSIGN(where.expr, parse_top_expr());
    return where;
}

// "near" NAME ( list | PARAM ) [ "ef" ( INT | PARAM ) ]; the list holds numbers only.
QlResult<Near> Parser::parse_near() {
    Near near;
    near.pos = take().pos;
    QL_ASSIGN(near.field, expect_name("a vector field after `near`"));
    if (at(TokenKind::param)) {
        Token p = take();
        note_param(static_cast<uint32_t>(p.integer));
        near.vector.pos = p.pos;
        near.vector.node = Param{static_cast<uint32_t>(p.integer)};
    } else if (at(TokenKind::lbracket)) {
        QL_ASSIGN(near.vector, parse_value());
        for (const Expr& item : near.vector.as<ListExpr>().items) {
            const auto* lit = std::get_if<Literal>(&item.node);
            bool number = lit && (std::holds_alternative<int64_t>(lit->value.rep) ||
                                  std::holds_alternative<double>(lit->value.rep));
            if (!number) return error_at(item.pos, "`near` takes a vector: a list of numbers");
        }
    } else {
        return unexpected("a vector `[x, y, ...]` or a parameter after `near " +
                          near.field.text + "`");
    }
    if (accept_word("ef")) {
        QL_ASSIGN(near.ef, parse_int_arg("ef", limits::ef_min, limits::ef_max));
    }
    return near;
}

// "match" NAME ( STRING | PARAM ).
QlResult<Match> Parser::parse_match() {
    Match match;
    match.pos = take().pos;
    QL_ASSIGN(match.field, expect_name("a text field after `match`"));
    const Token& t = peek();
    match.query.pos = t.pos;
    if (t.kind == TokenKind::string) {
        match.query.node = Literal{take().text};
    } else if (t.kind == TokenKind::param) {
        auto index = static_cast<uint32_t>(take().integer);
        note_param(index);
        match.query.node = Param{index};
    } else {
        return unexpected("a string or a parameter after `match " + match.field.text + "`");
    }
    return match;
}

// "group" [ "by" ] NAME { "," NAME }: fields only, never a path or `_id` (§7.2).
QlResult<Group> Parser::parse_group() {
    Group group;
    group.pos = take().pos;
    accept_word("by");
    do {
        uint32_t pos = peek().pos;
        if (!at_name() || at(TokenKind::lparen, 1)) return unexpected_name("a field to group by");
        QL_ASSIGN(Column column, parse_column());
        if (column.is_path()) {
            return error_at(pos, "a group key is a field, not the path `" + column.text() + "`");
        }
        if (column.field == "_id") {
            return error_at(pos, "`_id` is no group key: every row has its own");
        }
        group.keys.push_back(Name{std::move(column.field), pos});
    } while (accept(TokenKind::comma));
    return group;
}

// ---------------------------------------------------------------------------------------------
// The clause rules of §7.2 that need no schema.

namespace {

// One level of a read: the read's own, or a lookup's.
struct Level {
    const std::optional<SelectList>& select;
    const std::optional<OrderBy>& order;
    const std::optional<IntArg>& limit;
    const std::optional<IntArg>& offset;
    const Group* group;    // lookups have none
    const Lookup* child;   // the lookup attached to this level's rows
};

const SelectItem* first_aggregate(const std::optional<SelectList>& select) {
    if (!select) return nullptr;
    for (const SelectItem& item : select->items) {
        if (is_aggregate(item.what)) return &item;
    }
    return nullptr;
}

bool is_group_key(const Group* group, const Column& column) {
    if (group == nullptr || column.is_path()) return false;
    return std::any_of(group->keys.begin(), group->keys.end(),
                       [&](const Name& k) { return k.text == column.field; });
}

// Whether an order key names the ranked read's score: `_score`, or a select alias of it.
bool names_score(const OrderKey& key, const std::optional<SelectList>& select) {
    const auto* column = std::get_if<Column>(&key.what);
    if (column == nullptr || column->is_path()) return false;
    if (select) {
        for (const SelectItem& item : select->items) {
            if (!item.alias || item.alias->text != column->field) continue;
            const auto* real = std::get_if<Column>(&item.what);
            return real != nullptr && !real->is_path() && real->field == "_score";
        }
    }
    return column->field == "_score";
}

// A ranked read's `order` restates its ranking and nothing more: one key, `_score`. `match`
// ranks the highest score first, so its key is `desc`; `near`'s direction depends on the
// field's metric, which the executor checks.
Failure check_ranked_order(const Get& get, const std::string& ranker) {
    const OrderBy& order = *get.order;
    for (size_t i = 0; i < order.keys.size(); ++i) {
        const OrderKey& key = order.keys[i];
        if (i > 0 || !names_score(key, get.select) || key.collate) {
            return Parser::error_at(order.pos, ranker +
                                                 " ranks the rows by their score; its "
                                                 "`order` may name `_score` alone");
        }
    }
    if (get.match && !order.keys[0].desc) {
        return Parser::error_at(order.keys[0].pos,
                                "`match` ranks the highest score first: `order _score desc`");
    }
    return std::nullopt;
}

// `near`/`match` rank rows: they take neither each other nor group, aggregates, lookups, and an
// `order` only of `_score`.
Failure check_ranking(const Get& get) {
    if (get.near && get.match) {
        uint32_t later = std::max(get.near->pos, get.match->pos);
        return Parser::error_at(later, "`near` and `match` each rank the rows; use one");
    }
    if (!get.near && !get.match) return std::nullopt;
    std::string ranker = get.near ? "`near`" : "`match`";
    std::string why = ranker + " ranks the rows; it does not combine with ";
    if (get.order) QL_TRY(check_ranked_order(get, ranker));
    if (get.group) return Parser::error_at(get.group->pos, why + "`group`");
    if (const SelectItem* agg = first_aggregate(get.select)) {
        return Parser::error_at(agg->pos, why + "an aggregate");
    }
    if (!get.lookups.empty()) return Parser::error_at(get.lookups[0].pos, why + "a `lookup`");
    return std::nullopt;
}

// Aggregates without `group` answer one row: no order/limit/offset, no plain column beside them.
// With `group`, every plain column is a group key.
Failure check_aggregates(const Level& level) {
    const SelectItem* agg = first_aggregate(level.select);
    if (agg != nullptr && level.group == nullptr) {
        std::string why = "aggregates without `group` answer one row; ";
        if (level.order) return Parser::error_at(level.order->pos, why + "`order` does not apply");
        if (level.limit) return Parser::error_at(level.limit->pos, why + "`limit` does not apply");
        if (level.offset) return Parser::error_at(level.offset->pos, why + "`offset` does not apply");
    }
    if (!level.select || (agg == nullptr && level.group == nullptr)) return std::nullopt;
    for (const SelectItem& item : level.select->items) {
        const auto* column = std::get_if<Column>(&item.what);
        if (column && !is_group_key(level.group, *column)) {
            return Parser::error_at(item.pos, "`" + column->text() +
                                                  "` is neither an aggregate nor a group key");
        }
    }
    return std::nullopt;
}

// `group` needs an explicit select list of its keys and aggregates.
Failure check_group(const Level& level) {
    if (level.group == nullptr) return std::nullopt;
    if (!level.select || level.select->star) {
        return Parser::error_at(level.group->pos,
                                "`group` needs a select list of its keys and aggregates");
    }
    return std::nullopt;
}

bool names_select_column(const SelectList& select, const std::string& name) {
    return std::any_of(select.items.begin(), select.items.end(), [&](const SelectItem& item) {
        return item.answer_name() == name || target_text(item.what) == name;
    });
}

// An aggregate order key needs `group`; a grouped read orders by select columns or group keys.
Failure check_order(const Level& level) {
    if (!level.order) return std::nullopt;
    for (const OrderKey& key : level.order->keys) {
        if (level.group == nullptr) {
            if (is_aggregate(key.what)) {
                return Parser::error_at(key.pos, "ordering by an aggregate needs `group`");
            }
            continue;
        }
        const auto* column = std::get_if<Column>(&key.what);
        bool known = names_select_column(*level.select, target_text(key.what)) ||
                     (column && is_group_key(level.group, *column));
        if (!known) {
            return Parser::error_at(key.pos, "the order key `" + target_text(key.what) +
                                                 "` is neither a selected column nor a group key");
        }
    }
    return std::nullopt;
}

// A lookup attaches to rows: not under aggregates or groups, not named like a column.
Failure check_child(const Level& level) {
    if (level.child == nullptr) return std::nullopt;
    if (first_aggregate(level.select) != nullptr || level.group != nullptr) {
        return Parser::error_at(level.child->pos,
                                "a lookup attaches to rows; a read of aggregates or groups has "
                                "none to attach to");
    }
    const std::string& name = level.child->answer_name();
    if (level.select && !level.select->star) {
        for (const SelectItem& item : level.select->items) {
            if (item.answer_name() == name) {
                return Parser::error_at(level.child->pos,
                                        "the lookup `" + name + "` is named like a column; " +
                                            "name it with `as`");
            }
        }
    }
    return std::nullopt;
}

Failure check_level(const Level& level) {
    if (level.select) QL_TRY(check_select_names(*level.select));
    QL_TRY(check_group(level));
    QL_TRY(check_aggregates(level));
    QL_TRY(check_order(level));
    return check_child(level);
}

// offset + limit of a ranked read, when both are literals (§9, §14 ranked_rows).
Failure check_ranked_rows(const Get& get) {
    if ((!get.near && !get.match) || !get.limit) return std::nullopt;
    const auto* limit = std::get_if<int64_t>(&get.limit->value);
    const int64_t* offset = get.offset ? std::get_if<int64_t>(&get.offset->value) : nullptr;
    if (limit == nullptr || (get.offset && offset == nullptr)) return std::nullopt;
    auto rows = static_cast<uint64_t>(*limit);
    if (offset != nullptr) rows += static_cast<uint64_t>(*offset);  // both < 2^63: no wrap
    if (rows <= limits::ranked_rows_max) return std::nullopt;
    return Parser::limit_error(std::nullopt, Limit::ranked_rows, limits::ranked_rows_max,
                               std::string(get.near ? "near" : "match") + " ranks at most " +
                                   std::to_string(limits::ranked_rows_max) + " rows");
}

}  // namespace

Failure check_select_names(const SelectList& select) {
    std::unordered_set<std::string> names;
    for (const SelectItem& item : select.items) {
        std::string name = item.answer_name();
        if (!names.insert(name).second) {
            return Parser::error_at(item.pos,
                                    "two columns are named `" + name + "`; rename one with `as`");
        }
    }
    return std::nullopt;
}

Failure check_read(const Get& get) {
    QL_TRY(check_ranking(get));
    const Lookup* first = get.lookups.empty() ? nullptr : &get.lookups[0];
    Level top{get.select, get.order, get.limit, get.offset, get.group ? &*get.group : nullptr, first};
    QL_TRY(check_level(top));
    for (size_t i = 0; i < get.lookups.size(); ++i) {
        const Lookup& l = get.lookups[i];
        const Lookup* child = i + 1 < get.lookups.size() ? &get.lookups[i + 1] : nullptr;
        QL_TRY(check_level(Level{l.select, l.order, l.limit, l.offset, nullptr, child}));
    }
    return check_ranked_rows(get);
}

}  // namespace fenec::ql::detail
