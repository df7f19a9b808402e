// ql/eval.h: `where` expressions compiled against a collection's schema, then evaluated per row.
// Compiling resolves every column to its slot, type and text rule, evaluates the constant parts
// (parameters, now(), shifts) once, and reads a constant compared with a field as a write to that
// field would, refusing what the write refuses (fenecql.md §6.2; eval.cc's convert_for says the
// rule whole). Evaluation follows §6.1: a row is kept only when its expression is exactly true;
// nulls are values.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/database.h"
#include "engine/value.h"
#include "index/collation.h"
#include "ql/ast.h"
#include "ql/convert.h"
#include "ql/error.h"

namespace fenec::ql {

// A column of a collection: `_id`, a field, or a path into a json field.
struct FieldRef {
    bool is_id = false;
    uint16_t slot = 0;
    std::vector<std::string> keys;  // path keys past the field
    const engine::FieldDesc* field = nullptr;  // null for `_id`
    index::TextRule rule;
    std::string name;  // as written
    bool is_text() const;  // text or [text] field (not a path)
};

// Resolves `column` in `schema`: unknown fields are a 400 at `pos`.
QlResult<FieldRef> resolve_column(const engine::Schema& schema, const Column& column, uint32_t pos,
                                  const std::string& collection);

// A column's value in a row.
engine::Value read_column(const FieldRef& ref, engine::DocId id, const engine::DocView& doc);

struct CNode {
    enum class Kind : uint8_t { constant, column, call, compare, in, is_null, not_, and_, or_ };
    Kind kind = Kind::constant;
    uint32_t pos = 0;
    engine::Value constant;        // constant
    FieldRef column;               // column
    const Call* call = nullptr;    // call
    CompareOp op = CompareOp::eq;  // compare
    index::TextRule rule;          // compare, in: the text rule
    bool turkish = false;          // `~`: the fold
    bool negated = false;          // in, is_null
    std::vector<engine::Value> set;  // in: the values
    // in, with more than limits::in_list_linear_max values: their equality keys (in_key), so a
    // row costs one key and one lookup, not a comparison per value. Empty: compare linearly.
    std::unordered_set<std::string> keys;
    std::vector<CNode> kids;
};

// The key `in` hashes `v` by under `rule`: index::key_of with the collation dropped, so
// in_key(a, rule) == in_key(b, rule) exactly when equal_values(a, b, rule) (ql/compare.h).
std::string in_key(const engine::Value& v, const index::TextRule& rule);

QlResult<CNode> compile_where(const Expr& e, const engine::Schema& schema,
                              const std::string& collection, const Context& ctx);

engine::Value eval(const CNode& n, engine::DocId id, const engine::DocView& doc, const Context& ctx);
inline bool matches(const CNode& n, engine::DocId id, const engine::DocView& doc, const Context& ctx) {
    const engine::Value v = eval(n, id, doc, ctx);
    const bool* b = std::get_if<bool>(&v.rep);
    return b && *b;
}

}  // namespace fenec::ql
