// server/node/statement_shape.h: a FenecQL statement with its literals taken out, for the node's
// logs (node-http.md §13.3's schema audit lines, §13.4's slow log): what a person reading the log
// needs to know which statement it was, never a value it carried. The node's, since it reads
// FenecQL; the log lines themselves (server/obs/audit.h) take the shape as plain text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fenec::node {

// A statement's shape in a log line: a log is read by a person, and the first 16 KiB of a shape
// (names and keys, the literals already gone) say what the statement was. Past it: " …".
inline constexpr size_t statement_shape_bytes_max = 16u << 10;

// The statement with every literal replaced by `?`, read by FenecQL's lexer (ql/lexer.h):
// strings, byte strings, integers, floats, durations, `true` and `false`. Kept: keywords, names,
// `null`, parameters (`$1`: never a value), annotations and punctuation. Comments are dropped;
// tokens are joined by one space where any whitespace or comment stood. Text the lexer refuses
// (or bytes that are not UTF-8) ends the shape as ` ?`, so a broken literal never leaks. At most
// statement_shape_bytes_max bytes, cut between tokens and marked ` …`.
std::string statement_shape(std::string_view fenecql);

}  // namespace fenec::node
