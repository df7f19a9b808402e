// test/support/json_value.h: a small, strict JSON reader for tests, turning JSON text into an
// engine::Value as fenecql.md §12.2 reads parameters: an integer without fraction or exponent is
// an int64_t (outside int64: refused), any other number a double, a string text, an array an
// engine::List, an object an engine::Object (members in the order written), true/false/null.
//
// Test-only: the golden harness reads `params:` and compares approximate answers with it. It is
// not the server's JSON parser (there is none yet) and must not become a second one; it refuses
// anything RFC 8259 refuses except that it does not check UTF-8 inside strings. Nesting is
// bounded (json_nesting_max) so a bad test file cannot blow the stack.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "engine/value.h"

namespace fenec::test {

// Arrays and objects nested deeper than this are refused: far past any test's values.
inline constexpr size_t json_nesting_max = 128;

// The value of one JSON text (surrounding whitespace allowed). On a refusal answers nullopt and,
// when `error` is given, sets it to what was wrong and at which byte offset.
std::optional<engine::Value> parse_json(std::string_view text, std::string* error = nullptr);

// The member `key` of an object, or null when `v` is no object or has no such member.
const engine::Value* json_member(const engine::Value& v, std::string_view key);

}  // namespace fenec::test
