// ql/value_json.h: the JSON form of an engine value (fenecql.md §12.2), written through the one
// JSON writer (json/writer.h), and the base64 text of bytes it uses. The node's answers and
// bodies, the router's merged rows and the shell all write values through write_value.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "engine/value.h"
#include "json/writer.h"

namespace fenec::ql {

// Writes `v` per §12.2: null, bool, int, float, text, timestamp (ISO text, json/timestamp.h),
// bytes (padded standard base64), vectors (arrays of float32), lists, objects (members in key
// byte order, sorted here when the value came unsorted).
void write_value(json::Writer& w, const engine::Value& v);

// Standard base64 (RFC 4648 §4), padded.
std::string base64_encode(std::string_view bytes);
// The strict inverse of base64_encode: standard alphabet, length a multiple of 4, `=` only as
// the one or two last characters, unused bits zero, no whitespace. nullopt otherwise.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace fenec::ql
