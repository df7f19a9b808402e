// ql/convert.h: constants and conversions. Evaluates the constant parts of a statement
// (literals, parameters, lists, objects, calls such as now() with a shift) and converts values
// to a field's type as a write does (fenecql.md §5.2, §6.1, §6.5, §11). Every refusal names the
// field, what it expects and what it found, at the value's position.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/schema.h"
#include "engine/value.h"
#include "ql/ast.h"
#include "ql/budget.h"
#include "ql/error.h"

namespace fenec::ql {

struct Context {
    std::span<const engine::Value> params;
    int64_t now_ms = 0;
    // The run's budget (ql/budget.h): every loop that reads rows counts them here and stops when
    // it says so. Null: unbounded (the executor always sets one).
    Budget* budget = nullptr;
    // Counts `n` visits; false when the loop must stop.
    bool visit(uint64_t n = 1) const { return !budget || budget->visit(n); }
};

Error error_at(uint32_t pos, std::string message);

// The kind of a value as messages name it: "int", "text", "list"...
std::string kind_of(const engine::Value& v);

// A constant expression's value. Columns are refused (400 at their position).
QlResult<engine::Value> eval_constant(const Expr& e, const Context& ctx);

// A call's value (lower, upper, len, coalesce, now, timestamp) given its arguments' values,
// then its shift.
QlResult<engine::Value> eval_call(const Call& call, uint32_t pos, std::vector<engine::Value> args,
                                  const Context& ctx);

// `v` as field `f` stores it; `pos` is the value's position.
QlResult<engine::Value> convert_to(const engine::Value& v, const engine::FieldDesc& f, uint32_t pos);
// convert_to for a value being written: also refuses what the field's index cannot hold (a zero
// vector where the field is `@hnsw(cosine)`: it has no direction, so no similarity to anything).
QlResult<engine::Value> convert_for_write(const engine::Value& v, const engine::FieldDesc& f,
                                          uint32_t pos);

// `v` read as a timestamp (text parsed, int as ms), or an error naming `what`.
QlResult<engine::Value> as_timestamp(const engine::Value& v, uint32_t pos, const std::string& what);

}  // namespace fenec::ql
