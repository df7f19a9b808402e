// ql/ast.h: the syntax tree of one FenecQL statement (fenecql.md §3), as ql::parse builds it.
//
// Invariants the parser keeps, so later stages need not check them again:
// - Every node carries `pos`: the code point offset (from 0) in the statement text of the token
//   that names it, so schema checks and conversions can name positions (fenecql.md §12.3).
// - Names are as written (backquotes removed), case-sensitive and at most 64 bytes; keywords,
//   function names and aggregate functions are folded to lower case.
// - The rules of §3 that need no schema hold: each clause at most once, clauses in a legal place,
//   `set`/`del` have a `where`, comparisons do not chain, `limit`/`offset`/`require` literals are
//   ≥ 0 and `ef` literals in 1..10 000, expression depth ≤ 512 and value nesting ≤ 64, a lookup
//   chain ≤ 8, and the schema-free clause rules of §7.2 (see parser.h).
// - Values in documents and `set` objects are constants: no node in them is a Column.
// - Create/alter field definitions are complete: annotation arguments are in range and filled
//   with FenecQL's defaults, and each annotation fits its field's type.
// The tree is move-only; parentheses group and leave no node of their own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "engine/schema.h"
#include "engine/value.h"

namespace fenec::ql {

struct Expr;
struct Member;

// A name as written, where it was written.
struct Name {
    std::string text;
    uint32_t pos = 0;
};

// ---------------------------------------------------------------------------------------------
// Expressions (fenecql.md §3 "expressions", §6)

// Null, bool, int64_t, double, std::string (text) or engine::Bytes.
struct Literal {
    engine::Value value;
};

// `$index`, 1 ≤ index ≤ 65 535.
struct Param {
    uint32_t index = 0;
};

// A field, `_id`, `_score` or a path into a json field: `meta.lang.code` is field "meta" and
// keys {"lang", "code"}.
struct Column {
    std::string field;
    std::vector<std::string> keys;
    bool is_path() const { return !keys.empty(); }
    // As written and as the answer names it: "meta.lang.code".
    std::string text() const {
        std::string out = field;
        for (const std::string& key : keys) out += "." + key;
        return out;
    }
};

// `+ n` or `- n` after a call (fenecql.md §6.1); `n` is an int literal or a parameter.
struct Shift {
    uint32_t pos = 0;  // the `+` or `-`
    bool negative = false;
    std::variant<int64_t, Param> by;
};

// `name(args)`, name in lower case (function names are case-insensitive).
struct Call {
    std::string name;
    std::vector<Expr> args;
    std::optional<Shift> shift;
};

// `[v, ...]`: items are values (literals, parameters, calls, lists, objects), never columns.
struct ListExpr {
    std::vector<Expr> items;
};

// `{key: v, ...}`: keys unique, in the order written.
struct ObjectExpr {
    std::vector<Member> members;
};

enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge, contains /* ~ */, has };

// `lhs op rhs`; pos is the operator's.
struct Compare {
    CompareOp op = CompareOp::eq;
    std::unique_ptr<Expr> lhs;
    std::unique_ptr<Expr> rhs;
};

// `lhs [not] in set`, set a ListExpr or a Param; pos is the `in` (or the `not` before it).
struct In {
    bool negated = false;
    std::unique_ptr<Expr> lhs;
    std::unique_ptr<Expr> set;
};

// `operand is [not] null`; pos is the `is`.
struct IsNull {
    bool negated = false;
    std::unique_ptr<Expr> operand;
};

// `not operand`; pos is the `not`.
struct Not {
    std::unique_ptr<Expr> operand;
};

// A flattened chain `a and b and c` (two terms or more); pos is the first `and`.
struct And {
    std::vector<Expr> terms;
};

// A flattened chain `a or b or c` (two terms or more); pos is the first `or`.
struct Or {
    std::vector<Expr> terms;
};

struct Expr {
    using Node = std::variant<Literal, Param, Column, Call, ListExpr, ObjectExpr, Compare, In,
                              IsNull, Not, And, Or>;
    uint32_t pos = 0;
    Node node;

    template <class T>
    bool is() const { return std::holds_alternative<T>(node); }
    template <class T>
    const T& as() const { return std::get<T>(node); }
    template <class T>
    T& as() { return std::get<T>(node); }
};

struct Member {
    Name key;  // a name or a string as written
    Expr value;
};

// ---------------------------------------------------------------------------------------------
// Reads (fenecql.md §3 "reads", §7 to §10)

enum class AggregateFunc : uint8_t { count, sum, avg, min, max };

inline std::string_view aggregate_func_name(AggregateFunc f) {
    switch (f) {
        case AggregateFunc::count: return "count";
        case AggregateFunc::sum: return "sum";
        case AggregateFunc::avg: return "avg";
        case AggregateFunc::min: return "min";
        case AggregateFunc::max: return "max";
    }
    return "";
}

// `count(*)`, `count(f)`, `sum(f)`, `avg(f)`, `min(f)`, `max(f)`.
struct Aggregate {
    AggregateFunc func = AggregateFunc::count;
    std::optional<Name> field;  // none: count(*)
    // The answer's column name, normalised as §7.4 says: "sum(amount)", "count(*)".
    std::string text() const {
        return std::string(aggregate_func_name(func)) + "(" + (field ? field->text : "*") + ")";
    }
};

// What a select item or an order key reads.
using Target = std::variant<Column, Aggregate>;

inline bool is_aggregate(const Target& t) { return std::holds_alternative<Aggregate>(t); }
inline std::string target_text(const Target& t) {
    if (const auto* c = std::get_if<Column>(&t)) return c->text();
    return std::get<Aggregate>(t).text();
}

struct SelectItem {
    uint32_t pos = 0;
    Target what;
    std::optional<Name> alias;  // `as name`
    // The answer's column name: the alias, else the column or aggregate as written (§12.1).
    std::string answer_name() const { return alias ? alias->text : target_text(what); }
};

// `select *` (star, no items) or `select item, ...`.
struct SelectList {
    uint32_t pos = 0;  // the `select` (or `returning`) keyword
    bool star = false;
    std::vector<SelectItem> items;
};

struct OrderKey {
    uint32_t pos = 0;
    Target what;
    std::optional<engine::Collation> collate;  // `collate tr|und`: und or tr, never bytes
    uint32_t collate_pos = 0;                  // the collation's name, when given
    bool desc = false;
};

struct OrderBy {
    uint32_t pos = 0;  // the `order` keyword
    std::vector<OrderKey> keys;
};

// An integer argument: `limit`, `offset`, `require`, `ef`. A literal is already in range.
struct IntArg {
    uint32_t pos = 0;  // the value
    std::variant<int64_t, Param> value;
};

struct Where {
    uint32_t pos = 0;  // the `where` keyword
    Expr expr;
};

// `near field vector [ef n]`; vector is a ListExpr of number literals or a Param.
struct Near {
    uint32_t pos = 0;
    Name field;
    Expr vector;
    std::optional<IntArg> ef;
};

// `match field query`; query is a text Literal or a Param.
struct Match {
    uint32_t pos = 0;
    Name field;
    Expr query;
};

// `group k1, k2`: keys are fields (never paths or `_id`).
struct Group {
    uint32_t pos = 0;
    std::vector<Name> keys;
};

// `lookup child [as name] on child_key [= parent_key] {clause} [required]`.
struct Lookup {
    uint32_t pos = 0;
    Name collection;
    std::optional<Name> alias;
    Name child_key;
    std::optional<Name> parent_key;  // none: the parent's `_id`
    std::optional<SelectList> select;
    std::optional<Where> where;
    std::optional<OrderBy> order;
    std::optional<IntArg> limit;
    std::optional<IntArg> offset;
    std::optional<uint32_t> required;  // the position of `required`, when given
    // The key the children go under in the parent's row.
    const std::string& answer_name() const { return alias ? alias->text : collection.text; }
};

// `get c {clause} [lookup]` and `select list from c {clause} [lookup]` (select_first).
struct Get {
    uint32_t pos = 0;
    bool select_first = false;
    Name collection;
    std::optional<SelectList> select;
    std::optional<Where> where;
    std::optional<Near> near;
    std::optional<Match> match;
    std::optional<Group> group;
    std::optional<OrderBy> order;
    std::optional<IntArg> limit;
    std::optional<IntArg> offset;
    // The chain, outermost first: lookups[0] attaches to this read's rows, lookups[i] to the
    // children of lookups[i - 1]. At most limits::lookup_depth_max.
    std::vector<Lookup> lookups;
};

// ---------------------------------------------------------------------------------------------
// Writes (fenecql.md §3 "writes", §4.2)

// `object`, `[object, ...]` or `$n`.
struct Documents {
    uint32_t pos = 0;
    bool listed = false;            // written as a list (possibly empty)
    std::vector<Expr> objects;      // each an ObjectExpr
    std::optional<Param> param;     // the documents are bound to this parameter
};

// `insert [into] c documents` and `put [into] c documents`.
struct Insert {
    uint32_t pos = 0;
    bool replace = false;  // put
    Name collection;
    Documents documents;
};

// What `set` and `del` share: the rows they write and what they report.
struct WriteFilter {
    Where where;
    std::optional<OrderBy> order;
    std::optional<IntArg> limit;
    std::optional<IntArg> require;
    std::optional<SelectList> returning;  // columns only
};

// `set c {f: v, ...} where e ...`; changes never names `_id`.
struct Set {
    uint32_t pos = 0;
    Name collection;
    Expr changes;  // an ObjectExpr
    WriteFilter filter;
};

// `del [from] c where e ...`.
struct Del {
    uint32_t pos = 0;
    Name collection;
    WriteFilter filter;
};

// ---------------------------------------------------------------------------------------------
// Schema (fenecql.md §4.1)

// FenecQL's defaults for annotation arguments left out (§4.1).
inline constexpr uint16_t text_k1_hundredths_default = 90;
inline constexpr uint16_t text_b_hundredths_default = 40;
inline constexpr uint16_t hnsw_m_default = 16;
inline constexpr uint16_t hnsw_ef_construction_default = 200;
inline constexpr uint16_t hnsw_ef_search_default = 100;

// `@hash`, `@unique`, `@sorted`, `@text(...)`, `@hnsw(...)`, `@ttl(D)`: index.kind is set and
// the arguments of its kind are filled (given or default); the rest of `index` is zero.
struct Annotation {
    uint32_t pos = 0;  // the `@`
    engine::IndexDesc index;
};

struct FieldDef {
    Name name;
    engine::TypeDesc type;
    uint32_t type_pos = 0;
    engine::Collation collation = engine::Collation::bytes;
    bool nocase = false;
    std::optional<Annotation> annotation;

    engine::FieldDesc to_field_desc() const {
        engine::FieldDesc d;
        d.name = name.text;
        d.type = type;
        d.collation = collation;
        d.nocase = nocase;
        if (annotation) d.index = annotation->index;
        return d;
    }
};

// `create collection [if not exists] c (field_def, ...)`: 1 to 1 024 fields, names distinct and
// not starting with `_`, at most one `@ttl`.
struct Create {
    uint32_t pos = 0;
    bool if_not_exists = false;
    Name collection;
    std::vector<FieldDef> fields;
};

enum class AlterAction : uint8_t { add_field, drop_field, rename_field, add_index, drop_index };

// `alter collection c ...`. `field` is the definition for add_field; `target` the field named
// by every other action; `new_name` for rename_field; `index` for add_index.
struct Alter {
    uint32_t pos = 0;
    Name collection;
    AlterAction action = AlterAction::add_field;
    std::optional<FieldDef> field;
    Name target;
    Name new_name;
    std::optional<Annotation> index;
};

// `drop collection [if exists] c`.
struct Drop {
    uint32_t pos = 0;
    bool if_exists = false;
    Name collection;
};

struct Compact {
    uint32_t pos = 0;
};

// ---------------------------------------------------------------------------------------------
// Statements

enum class StatementKind : uint8_t {
    create, alter, drop, compact, insert, put, set, del, get, select,
};

struct Statement {
    std::variant<Create, Alter, Drop, Compact, Insert, Set, Del, Get> node;

    StatementKind kind() const {
        switch (node.index()) {
            case 0: return StatementKind::create;
            case 1: return StatementKind::alter;
            case 2: return StatementKind::drop;
            case 3: return StatementKind::compact;
            case 4: return std::get<Insert>(node).replace ? StatementKind::put
                                                          : StatementKind::insert;
            case 5: return StatementKind::set;
            case 6: return StatementKind::del;
            default: return std::get<Get>(node).select_first ? StatementKind::select
                                                             : StatementKind::get;
        }
    }
    // fenecql.md §4 "writes": everything but get and select. The read-only endpoint refuses
    // these with 403 before it looks at the tenant.
    bool writes() const {
        StatementKind k = kind();
        return k != StatementKind::get && k != StatementKind::select;
    }
    // The statement's first word in lower case, as the 403 body names it: "del", "insert"...
    std::string_view first_word() const {
        static constexpr std::string_view kWords[] = {"create", "alter", "drop", "compact",
                                                      "insert", "put", "set", "del", "get",
                                                      "select"};
        return kWords[static_cast<size_t>(kind())];
    }
};

// What parse() answers.
struct ParsedStatement {
    Statement statement;
    // The highest `$n` the statement uses (0: none). The executor refuses `params` holding more
    // entries than this (400, no position) and a `$n` past the entries given (fenecql.md §12.3).
    uint32_t params_max = 0;
};

}  // namespace fenec::ql
