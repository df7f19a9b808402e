// server/node/rest_filter.cc: the REST filter grammar (rest_filter.h) read from query pairs, and
// its translation into one FenecQL `get` whose values all travel as parameters.
#include "server/node/rest_filter.h"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <iterator>

#include "ql/convert.h"
#include "ql/eval.h"
#include "ql/limits.h"
#include "ql/parser.h"

namespace fenec::node {

namespace {

using engine::BaseType;
using engine::Value;

std::optional<FilterOp> op_named(std::string_view name) {
    if (name == "eq") return FilterOp::eq;
    if (name == "ne") return FilterOp::ne;
    if (name == "lt") return FilterOp::lt;
    if (name == "le") return FilterOp::le;
    if (name == "gt") return FilterOp::gt;
    if (name == "ge") return FilterOp::ge;
    if (name == "in") return FilterOp::in;
    if (name == "is") return FilterOp::is_null;
    if (name == "has") return FilterOp::has;
    return std::nullopt;
}

// Words people write for an op (PostgREST's neighbours, SQL's, other filter languages'), each
// with the op it would be. A value starting `<word>.` with one of them is refused with the hint
// rather than read as `eq` of the whole text, which would keep no row and say nothing.
constexpr std::pair<std::string_view, std::string_view> kNearMisses[] = {
    {"gte", "ge"},    {"geq", "ge"},     {"gteq", "ge"},      {"lte", "le"},       {"leq", "le"},
    {"lteq", "le"},   {"neq", "ne"},     {"nq", "ne"},        {"not_eq", "ne"},    {"eql", "eq"},
    {"equals", "eq"}, {"nin", "not.in"}, {"notin", "not.in"}, {"contains", "has"}, {"isnull", "is"},
};

// PostgREST's pattern and text-search ops, which have no REST filter here: refused the same way,
// pointing at FenecQL, rather than compared as text. Only these words, as PostgREST spells them
// (lower case): its short ops (`cs`, `sw`, `cd`, `sr`, …) begin too many values before a dot
// (`cs.AI`, `Sr. Engineer`, `Cd. Juárez`), which stay `eq` as node-http.md §5.3 says.
constexpr std::string_view kNoSuchOps[] = {"like", "ilike", "fts", "plfts", "phfts", "wfts"};

bool no_such_op(std::string_view word) {
    return std::find(std::begin(kNoSuchOps), std::end(kNoSuchOps), word) != std::end(kNoSuchOps);
}

std::optional<std::string_view> near_miss(std::string_view word) {
    for (const auto& [typed, meant] : kNearMisses) {
        if (word.size() != typed.size()) continue;
        bool same = true;
        for (size_t i = 0; i < word.size() && same; ++i) {
            same = std::tolower(static_cast<unsigned char>(word[i])) == typed[i];
        }
        if (same) return meant;
    }
    return std::nullopt;
}

// The op that `text` starts with as `<op>.`, if any.
std::optional<FilterOp> leading_op(std::string_view text) {
    const size_t dot = text.find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    return op_named(text.substr(0, dot));
}

// `(a,"b,c",d)` into its items.
BodyResult<std::vector<std::string>> in_items(std::string_view field, std::string_view list) {
    const auto malformed = [&](const std::string& why) {
        return bad_request("the filter on " + quote_name(field) + " is `in.(a,b,...)`: " + why);
    };
    if (list.size() < 2 || list.front() != '(' || list.back() != ')') {
        return malformed("the list goes in parentheses");
    }
    std::vector<std::string> items;
    const std::string_view inner = list.substr(1, list.size() - 2);
    if (inner.empty()) return items;  // `in.()`: matches nothing
    size_t at = 0;
    while (true) {
        std::string item;
        if (at < inner.size() && inner[at] == '"') {
            ++at;
            bool closed = false;
            while (at < inner.size()) {
                const char c = inner[at++];
                if (c == '"') {
                    closed = true;
                    break;
                }
                if (c == '\\' && at < inner.size() && (inner[at] == '"' || inner[at] == '\\')) {
                    item.push_back(inner[at++]);
                    continue;
                }
                item.push_back(c);
            }
            if (!closed) return malformed("an unterminated quoted item");
            if (at < inner.size() && inner[at] != ',') {
                return malformed("a quoted item ends at `,` or `)`");
            }
        } else {
            const size_t end = std::min(inner.find(',', at), inner.size());
            item = std::string(inner.substr(at, end - at));
            if (item.find_first_of("()\"") != std::string::npos) {
                return malformed("an item holding `(`, `)` or `\"` goes in double quotes");
            }
            at = end;
        }
        items.push_back(std::move(item));
        if (at >= inner.size()) return items;
        ++at;  // the `,`
    }
}

// One filter's value, `[not.]<op>.<v>` or a plain value.
BodyResult<Condition> read_condition(const std::string& field, std::string_view value) {
    Condition c;
    c.field = field;
    std::string_view rest = value;
    if (rest.substr(0, 4) == "not." && leading_op(rest.substr(4))) {
        c.negate = true;
        rest.remove_prefix(4);
    }
    const std::optional<FilterOp> op = leading_op(rest);
    if (!op) {
        const std::string_view unnegated = rest.substr(0, 4) == "not." ? rest.substr(4) : rest;
        const size_t dot = unnegated.find('.');
        const std::optional<std::string_view> meant =
            dot == std::string_view::npos ? std::nullopt : near_miss(unnegated.substr(0, dot));
        if (meant) {
            const std::string_view prefix = rest.substr(0, rest.size() - unnegated.size());
            const std::string_view operand = unnegated.substr(dot + 1);
            const std::string hint =
                *meant == "is" ? "is.null" : std::string(*meant) + "." + std::string(operand);
            return bad_request(
                "the filter on " + quote_name(field) + ": " + quote_name(unnegated.substr(0, dot)) +
                " is not an op; did you mean " + quote_name(std::string(prefix) + hint) +
                "? The ops are eq, ne, lt, le, gt, ge, in, is, has (and not. before "
                "one); " +
                quote_name("eq." + std::string(value)) + " matches the text as written");
        }
        if (dot != std::string_view::npos && no_such_op(unnegated.substr(0, dot))) {
            return bad_request(
                "the filter on " + quote_name(field) + ": " + quote_name(unnegated.substr(0, dot)) +
                " is not an op: a REST filter has no patterns or text search (a FenecQL query "
                "has `match` for full text). The ops are eq, ne, lt, le, gt, ge, in, is, has (and "
                "not. before one); " +
                quote_name("eq." + std::string(value)) + " matches the text as written");
        }
        // no op: `eq` of the whole text
        c.values.emplace_back(value);
        return c;
    }
    c.op = *op;
    const std::string_view operand = rest.substr(rest.find('.') + 1);
    switch (c.op) {
        case FilterOp::is_null:
            if (operand != "null") {
                return bad_request("the filter on " + quote_name(field) +
                                   " takes `is.null`, found " + quote_name(value));
            }
            return c;
        case FilterOp::in: {
            BodyResult<std::vector<std::string>> items = in_items(field, operand);
            if (!items) return items.take_error();
            c.values = std::move(items.value());
            return c;
        }
        default:
            c.values.emplace_back(operand);
            return c;
    }
}

// A decimal count 0..max (no sign, no spaces).
std::optional<uint64_t> read_count(std::string_view text, uint64_t max) {
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n > max) {
        return std::nullopt;
    }
    return n;
}

// `a,b,c` into its parts; an empty part is a 400.
BodyResult<std::vector<std::string>> comma_list(std::string_view key, std::string_view text) {
    std::vector<std::string> parts;
    size_t at = 0;
    while (true) {
        const size_t end = std::min(text.find(',', at), text.size());
        if (end == at) return bad_request("`" + std::string(key) + "` names an empty column");
        parts.emplace_back(text.substr(at, end - at));
        if (end == text.size()) return parts;
        at = end + 1;
    }
}

bool is_utf8(std::string_view text) { return simdjson::validate_utf8(text.data(), text.size()); }

}  // namespace

BodyResult<RestQuery> parse_rest_query(const QueryPairs& query, bool shape) {
    RestQuery out;
    bool have_select = false;
    bool have_order = false;
    for (const auto& [key, value] : query) {
        if (!is_utf8(key) || !is_utf8(value)) return bad_request("the query string is not UTF-8");
        const bool window = key == "order" || key == "limit" || key == "offset" || key == "count";
        if (shape && window) {
            return bad_request("a subscription's shape is a set of rows: `" + key +
                               "` has no place in it");
        }
        if (shape && (key == "since" || key == "history")) continue;  // the cursor's
        if (key == "select") {
            if (have_select) return bad_request("`select` is given twice");
            have_select = true;
            BodyResult<std::vector<std::string>> cols = comma_list(key, value);
            if (!cols) return cols.take_error();
            out.select = std::move(cols.value());
            for (size_t i = 1; i < out.select.size(); ++i) {
                for (size_t j = 0; j < i; ++j) {
                    if (out.select[i] == out.select[j]) {
                        return bad_request("`select` names " + quote_name(out.select[i]) +
                                           " twice");
                    }
                }
            }
        } else if (key == "order") {
            if (have_order) return bad_request("`order` is given twice");
            have_order = true;
            BodyResult<std::vector<std::string>> keys = comma_list(key, value);
            if (!keys) return keys.take_error();
            for (const std::string& k : keys.value()) {
                OrderTerm term;
                const size_t dot = k.find('.');
                term.field = k.substr(0, dot);
                if (dot != std::string::npos) {
                    const std::string_view dir = std::string_view(k).substr(dot + 1);
                    if (dir != "asc" && dir != "desc") {
                        return bad_request(
                            "an order key is `field`, `field.asc` or `field.desc`, found " +
                            quote_name(k));
                    }
                    term.desc = dir == "desc";
                }
                if (term.field.empty()) return bad_request("`order` names an empty column");
                out.order.push_back(std::move(term));
            }
        } else if (key == "limit") {
            if (out.limit) return bad_request("`limit` is given twice");
            out.limit = read_count(value, rest_limit_max);
            if (!out.limit) {
                return bad_request("`limit` is a count from 0 to " +
                                   std::to_string(rest_limit_max) + ", found " + quote_name(value));
            }
        } else if (key == "offset") {
            if (out.offset) return bad_request("`offset` is given twice");
            out.offset = read_count(value, uint64_t(INT64_MAX));
            if (!out.offset)
                return bad_request("`offset` is a count from 0, found " + quote_name(value));
        } else if (key == "count") {
            if (out.count) return bad_request("`count` is given twice");
            if (value == "" || value == "true") {
                out.count = true;
            } else if (value != "false") {
                return bad_request("`count` takes no value (or `true`/`false`), found " +
                                   quote_name(value));
            }
        } else {
            BodyResult<Condition> c = read_condition(key, value);
            if (!c) return c.take_error();
            out.conditions.push_back(std::move(c.value()));
        }
    }
    if (out.count && (out.limit || out.offset || have_order || have_select)) {
        return bad_request(
            "`count` answers one number: it takes no `limit`, `offset`, `order` or "
            "`select`");
    }
    if (!shape && !out.count && !out.limit) out.limit = rest_limit_default;
    return out;
}

namespace {

// A column a filter, select or order names: `_id` (field null) or a live field.
struct Named {
    const engine::FieldDesc* field = nullptr;
};

BodyResult<Named> resolve(std::string_view name, std::string_view collection,
                          const engine::Schema& schema) {
    if (name == "_id") return Named{};
    if (std::optional<uint16_t> slot = schema.slot_of(name)) return Named{&schema.fields[*slot]};
    return BodyError{
        404,
        "collection `" + std::string(collection) + "` has no field " + quote_name(name),
        {},
        {},
        0};
}

bool is_int_text(std::string_view text, int64_t& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

bool is_float_text(std::string_view text, double& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return !text.empty() && ec == std::errc() && end == text.data() + text.size() &&
           std::isfinite(out);
}

BodyError misread(std::string_view name, std::string_view expected, std::string_view text) {
    return bad_request("`" + std::string(name) + "` expects " + std::string(expected) + ", found " +
                       quote_name(text));
}

// `text` read as a value of type `type` (of the field `name`; `field` gives its text rules).
BodyResult<Value> read_as(std::string_view name, const engine::FieldDesc& field,
                          const engine::TypeDesc& type, std::string_view text) {
    int64_t i = 0;
    double d = 0;
    switch (type.base) {
        case BaseType::Int:
            if (is_int_text(text, i)) return Value(i);
            return misread(name, "an int", text);
        case BaseType::Float:
            if (is_float_text(text, d)) return Value(d);
            return misread(name, "a float", text);
        case BaseType::Bool:
            if (text == "true") return Value(true);
            if (text == "false") return Value(false);
            return misread(name, "`true` or `false`", text);
        case BaseType::Text:
            return Value(std::string(text));
        case BaseType::Timestamp:
        case BaseType::Bytes: {
            // The write conversion (fenecql.md §5.2): ISO text or epoch ms; base64 text.
            engine::FieldDesc as = field;
            as.type = type;
            const bool ms = type.base == BaseType::Timestamp && is_int_text(text, i);
            ql::QlResult<Value> v = ql::convert_to(ms ? Value(i) : Value(std::string(text)), as, 0);
            if (!v) return bad_request(v.error().message);
            return std::move(v.value());
        }
        case BaseType::Json:
            if (text == "true") return Value(true);
            if (text == "false") return Value(false);
            if (is_int_text(text, i)) return Value(i);
            if (is_float_text(text, d)) return Value(d);
            return Value(std::string(text));
        case BaseType::Vector:
        case BaseType::List:
            break;
    }
    return bad_request("`" + std::string(name) + "` cannot be filtered here");
}

const char* compare_text(FilterOp op) {
    switch (op) {
        case FilterOp::eq:
            return " = ";
        case FilterOp::ne:
            return " != ";
        case FilterOp::lt:
            return " < ";
        case FilterOp::le:
            return " <= ";
        case FilterOp::gt:
            return " > ";
        case FilterOp::ge:
            return " >= ";
        case FilterOp::has:
            return " has ";
        default:
            return "";
    }
}

// A column as the statement writes it: `_id` bare, a field backquoted (a field may be called
// `order`).
std::string column_text(std::string_view name) {
    if (name == "_id") return "_id";
    return "`" + std::string(name) + "`";
}

class Builder {
  public:
    Builder(std::string_view collection, const engine::Schema& schema)
        : collection_(collection), schema_(schema) {}

    // `c`'s predicate, appended to out_.text; its value(s) appended to out_.params.
    std::optional<BodyError> condition(const Condition& c) {
        BodyResult<Named> named = resolve(c.field, collection_, schema_);
        if (!named) return named.take_error();
        const engine::FieldDesc* f = named->field;
        engine::FieldDesc id_field;
        id_field.name = "_id";
        id_field.type = engine::make_type(BaseType::Int);
        const engine::FieldDesc& field = f ? *f : id_field;
        const BaseType base = field.type.base;
        if (base == BaseType::Vector) {
            return bad_request("the vector field " + quote_name(c.field) +
                               " cannot be filtered here");
        }
        const std::string col = column_text(c.field);
        std::string& text = out_.text;
        if (c.op == FilterOp::is_null) {
            text += col + (c.negate ? " is not null" : " is null");
            return std::nullopt;
        }
        if (base == BaseType::List && c.op != FilterOp::has) {
            return bad_request("the list field " + quote_name(c.field) +
                               " is filtered by `has.` or `is.null`");
        }
        if (c.op == FilterOp::has && base != BaseType::List && base != BaseType::Json) {
            return bad_request("`has.` needs a list field; " + quote_name(c.field) + " is " +
                               field.type.to_string());
        }
        const engine::TypeDesc& type = base == BaseType::List ? *field.type.item : field.type;
        if (c.op == FilterOp::in) {
            engine::List list;
            for (const std::string& item : c.values) {
                BodyResult<Value> v = read_as(c.field, field, type, item);
                if (!v) return v.take_error();
                list.items.push_back(std::move(v.value()));
            }
            text += col + (c.negate ? " not in " : " in ") + param(Value(std::move(list)));
            return std::nullopt;
        }
        BodyResult<Value> v = read_as(c.field, field, type, c.values.at(0));
        if (!v) return v.take_error();
        const std::string predicate = col + compare_text(c.op) + param(std::move(v.value()));
        text += c.negate ? "not (" + predicate + ")" : predicate;
        return std::nullopt;
    }

    std::optional<BodyError> column(std::string_view name, bool ordered) {
        BodyResult<Named> named = resolve(name, collection_, schema_);
        if (!named) return named.take_error();
        if (ordered && named->field && named->field->type.base == BaseType::Vector) {
            return bad_request("the vector field " + quote_name(name) + " cannot be ordered here");
        }
        out_.text += column_text(name);
        return std::nullopt;
    }

    std::string param(Value v) {
        out_.params.push_back(std::move(v));
        return "$" + std::to_string(out_.params.size());
    }

    RestStatement& out() { return out_; }

  private:
    std::string_view collection_;
    const engine::Schema& schema_;
    RestStatement out_;
};

}  // namespace

BodyResult<RestStatement> build_statement(const RestQuery& query, std::string_view collection,
                                          const engine::Schema& schema) {
    if (!engine::is_identifier(collection) || collection.front() == '_') {
        return BodyError{404, "no collection " + quote_name(collection), {}, {}, 0};
    }
    Builder b(collection, schema);
    std::string& text = b.out().text;
    text = "get `" + std::string(collection) + "`";
    if (query.count) {
        text += " select count(*)";
    } else if (!query.select.empty()) {
        text += " select _id";
        for (const std::string& name : query.select) {
            if (name == "_id") continue;  // always first, once
            text += ", ";
            if (auto err = b.column(name, false)) return std::move(*err);
        }
    }
    for (size_t i = 0; i < query.conditions.size(); ++i) {
        text += i == 0 ? " where " : " and ";
        if (auto err = b.condition(query.conditions[i])) return std::move(*err);
    }
    for (size_t i = 0; i < query.order.size(); ++i) {
        text += i == 0 ? " order by " : ", ";
        if (auto err = b.column(query.order[i].field, true)) return std::move(*err);
        text += query.order[i].desc ? " desc" : " asc";
    }
    if (query.limit) text += " limit " + b.param(Value(int64_t(*query.limit)));
    if (query.offset) text += " offset " + b.param(Value(int64_t(*query.offset)));
    if (text.size() > ql::limits::statement_bytes_max) {
        return BodyError{413,
                         "the filters make a statement past 1 MiB",
                         {},
                         ql::Limit::statement_bytes,
                         ql::limits::statement_bytes_max};
    }
    if (b.out().params.size() > ql::limits::parameters_max) {
        return BodyError{413,
                         "the filters need more than 65535 parameters",
                         {},
                         ql::Limit::parameters,
                         ql::limits::parameters_max};
    }
    return std::move(b.out());
}

// ---------------------------------------------------------------------------------------------
// ShapeFilter

struct ShapeFilter::State {
    engine::Schema schema;  // the compiled tree points into it: never moved once compiled
    std::vector<Value> params;
    std::unique_ptr<ql::ParsedStatement> parsed;
    std::optional<ql::CNode> where;  // none: every row is in the shape
};

ShapeFilter::ShapeFilter() : state_(std::make_unique<State>()) {}
ShapeFilter::ShapeFilter(ShapeFilter&&) noexcept = default;
ShapeFilter& ShapeFilter::operator=(ShapeFilter&&) noexcept = default;
ShapeFilter::~ShapeFilter() = default;

BodyResult<ShapeFilter> ShapeFilter::compile(const RestQuery& query, std::string_view collection,
                                             const engine::Schema& schema) {
    RestQuery filters_only;
    filters_only.conditions = query.conditions;
    BodyResult<RestStatement> statement = build_statement(filters_only, collection, schema);
    if (!statement) return statement.take_error();
    ShapeFilter out;
    State& s = *out.state_;
    s.schema = schema;
    s.params = std::move(statement->params);
    ql::QlResult<ql::ParsedStatement> parsed = ql::parse(statement->text);
    if (!parsed)
        return BodyError{
            500, "a shape's statement does not parse: " + parsed.error().to_string(), {}, {}, 0};
    s.parsed = std::make_unique<ql::ParsedStatement>(std::move(parsed.value()));
    const ql::Get& get = std::get<ql::Get>(s.parsed->statement.node);
    if (get.where) {
        const ql::Context ctx{s.params, 0};
        ql::QlResult<ql::CNode> where =
            ql::compile_where(get.where->expr, s.schema, std::string(collection), ctx);
        if (!where) return BodyError{where.error().status(), where.error().message, {}, {}, 0};
        s.where = std::move(where.value());
    }
    return out;
}

bool ShapeFilter::matches(engine::DocId id, const engine::DocView& doc) const {
    if (!state_->where) return true;
    const ql::Context ctx{state_->params, 0};
    return ql::matches(*state_->where, id, doc, ctx);
}

}  // namespace fenec::node
