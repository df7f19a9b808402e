// server/node/rest_filter.h: REST list filters and subscription shapes (node-http.md §5.3, §5.4)
// read from a query string, and the FenecQL `get` that answers them. Owns the filter grammar:
//
//   key=value          key names a field (or `_id`); value is `[not.]<op>.<v>` with op one of
//                      eq ne lt le gt ge (one value), `in.(a,b,...)` (items double-quoted to hold
//                      `,` `(` `)`, `\"` and `\\` escaped inside quotes), `is.null`, `has.<v>`.
//                      A value whose text before its first dot is not an op (nor `not.` followed
//                      by an op and a dot) is `eq` of the whole text: `?year=2024`, `?t=a.b`.
//                      An op with a malformed rest (`is.nope`, `in.x`) is a 400, not an `eq`;
//                      so is a word people write for an op (`gte.`, `lte.`, `neq.`, `nin.`...),
//                      whose 400 names the op meant (`eq.gte.5` still matches that text).
//   select=a,b         columns; `_id` always first
//   order=f.asc,g.desc keys; a key without a suffix is ascending
//   limit=n            0 to rest_limit_max, default rest_limit_default; offset=n; count
//
// Invariants: values never reach the statement text; each is converted to its field's type and
// passed as a `$n` parameter; names are backquoted. A statement build_statement answers parses
// with ql::parse (the fuzz target rest_filter_fuzz asserts it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/ids.h"
#include "engine/schema.h"
#include "engine/value.h"
#include "server/node/json_body.h"

namespace fenec::ql {
struct CNode;
struct ParsedStatement;
}  // namespace fenec::ql

namespace fenec::node {

// A REST page (node-http.md §5.3, §12): rows answered when `limit` is not given, and the most one
// page may ask for; past it is a 400, and bigger reads go to `/query`.
inline constexpr uint64_t rest_limit_default = 100;
inline constexpr uint64_t rest_limit_max = 10'000;

enum class FilterOp : uint8_t { eq, ne, lt, le, gt, ge, in, is_null, has };

// One `key=value` filter as written: values are raw text, read as the field's type only by
// build_statement, once the schema is known.
struct Condition {
    std::string field;
    bool negate = false;
    FilterOp op = FilterOp::eq;
    std::vector<std::string> values;  // one; `in`: the items (possibly none); is_null: none
};

struct OrderTerm {
    std::string field;
    bool desc = false;
};

struct RestQuery {
    std::vector<Condition> conditions;  // AND-ed, in the order given
    std::vector<std::string> select;    // empty: `_id` and every field
    std::vector<OrderTerm> order;
    std::optional<uint64_t> limit;  // a list: rest_limit_default unless given; a shape or
                                    // a count: none
    std::optional<uint64_t> offset;
    bool count = false;  // answer `{"count": n}`
};

// The query string as the HTTP codec gives it: percent-decoded pairs, in order, keys repeating.
using QueryPairs = std::vector<std::pair<std::string, std::string>>;

// Reads a list's query string (§5.3) or, with `shape`, a subscription's (§5.4: `order`, `limit`,
// `offset`, `count` are a 400; `since` and `history` are the cursor's and skipped, for the caller
// to read). 400 for: text that is not UTF-8, a reserved key given twice, a malformed op, `select`
// or `order`, a limit past rest_limit_max or not a decimal count, `count` with `limit`, `offset`,
// `order` or `select`. Field names are not checked here.
BodyResult<RestQuery> parse_rest_query(const QueryPairs& query, bool shape);

// A statement and its parameters.
struct RestStatement {
    std::string text;
    std::vector<engine::Value> params;
};

// The FenecQL `get` answering `query` over `collection`: `get c select _id, ... where ... order
// by ... limit $n offset $m`, or `get c select count(*) where ...` for a count (one row, one
// cell). Each value is read as its field's type: int and `_id` decimal int64; float a finite
// decimal; bool `true`/`false`; text as is; timestamp ISO text or epoch ms (fenecql.md §11);
// bytes base64; json a number or `true`/`false` where it reads as one, else text; `has` on a list
// field reads the item type. Refusals: a field not in `schema` (select, order, a filter) → 404
// naming it; a vector field filtered or ordered, a list field under any op but `has`/`is.null`,
// `has` on a field that is neither a list nor json, a value that does not read as its type →
// 400; a statement past fenecql.md §14's statement_bytes or parameters → 413; a collection name
// that is not a name, or a `_` one (the server's), → 404.
BodyResult<RestStatement> build_statement(const RestQuery& query, std::string_view collection,
                                          const engine::Schema& schema);

// A subscription's shape as a row test (node-http.md §5.4): whether a row is in the shape, by the
// same `where` build_statement writes, compiled once by the executor's own compiler (ql/eval.h),
// so a change event and a seed agree row for row. It keeps its own copy of the schema; a schema
// change reseeds the stream (§5.4), which compiles a new filter. It tests the filters only: TTL
// expiry and `select` are the caller's. Thread-compatible: matches() is const.
class ShapeFilter {
  public:
    static BodyResult<ShapeFilter> compile(const RestQuery& query, std::string_view collection,
                                           const engine::Schema& schema);
    ShapeFilter(ShapeFilter&&) noexcept;
    ShapeFilter& operator=(ShapeFilter&&) noexcept;
    ~ShapeFilter();

    bool matches(engine::DocId id, const engine::DocView& doc) const;

  private:
    ShapeFilter();
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace fenec::node
