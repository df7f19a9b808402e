// server/node/json_body.h: request bodies to engine values (node-http.md §2.2, §5.1, §5.2, §5.3).
// Owns the node's one JSON reader: the `/query` body, the `/batch` body (NDJSON or a JSON array)
// and REST documents, each read with simdjson and turned into engine::Value as fenecql.md §12.2
// reads parameters: an integer without fraction or exponent is an int64_t (outside int64: 400), any
// other number a double, a string text, an array an engine::List, an object an engine::Object
// (members in the order written; a key given twice is a 400), true/false/null.
//
// Invariants: nothing here throws; every refusal is a BodyError, 400 (not UTF-8, not JSON, not
// the shape asked for) or 413 (a value nests past value_depth_max levels, named as the
// `json_depth` limit). A value handed out never nests
// deeper than that bound, so the engine and the executor accept its depth.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "engine/value.h"
#include "ql/error.h"
#include "ql/limits.h"

namespace fenec::node {

// Statements in one `/batch` body (node-http.md §5.2, §12): a batch lands as one block, and ten
// thousand statements is far past what a client groups by hand; past it is a 400, never a cut.
inline constexpr size_t batch_statements_max = 10'000;

// Levels of one value (a parameter, a document's field value): fenecql.md §14's json_depth. The
// value is level 1 and each list or object puts its items one level down, as the executor counts
// when it converts a field's value, so every value read here is one the executor can store.
inline constexpr uint32_t value_depth_max = ql::limits::json_depth_max;

// Why a body (or a REST query string) was refused. The server turns it into its answer in one
// place: `{"error": message}` with status, plus `"line"` when set (NDJSON), and `"limit"`/`"max"`
// when `limit` is set (413).
struct BodyError {
    int status = 400;                   // 400, 404 (REST: an unknown field), 413
    std::string message;                // for people: names what is wrong
    std::optional<uint32_t> line;       // NDJSON: the 1-based line at fault
    ql::Limit limit = ql::Limit::none;  // 413: the limit passed
    uint64_t max = 0;                   // 413: its maximum
};

// A T or a BodyError.
template <class T>
class [[nodiscard]] BodyResult {
  public:
    BodyResult(T value) : v_(std::move(value)) {}          // NOLINT: implicit on purpose
    BodyResult(BodyError error) : v_(std::move(error)) {}  // NOLINT: implicit on purpose

    bool is_ok() const { return v_.index() == 0; }
    explicit operator bool() const { return is_ok(); }
    const BodyError& error() const { return std::get<1>(v_); }
    BodyError&& take_error() { return std::get<1>(std::move(v_)); }
    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

  private:
    std::variant<T, BodyError> v_;
};

// A name or value quoted in a message is cut here (at a code point boundary): it is for people.
inline constexpr size_t quoted_bytes_max = 64;
// A 400 naming the problem.
BodyError bad_request(std::string message);
// `text` for a message: backquoted, cut to quoted_bytes_max bytes without splitting a character.
std::string quote_name(std::string_view text);

// One statement as a client sends it: `{"query": "<text>", "params": [...]}`.
struct QueryBody {
    std::string query;
    std::vector<engine::Value> params;
};

// Reads request bodies, reusing one simdjson parser and one padded buffer across calls, so a small
// body costs a copy and a parse, no allocation once the buffers have grown. Not thread-safe: keep
// one per event loop. Results hold no view into the body or the reader.
class BodyReader {
  public:
    BodyReader();
    ~BodyReader();
    BodyReader(BodyReader&&) noexcept;
    BodyReader& operator=(BodyReader&&) noexcept;
    BodyReader(const BodyReader&) = delete;
    BodyReader& operator=(const BodyReader&) = delete;

    // node-http.md §5.1: an object holding "query" (a string, required) and "params" (absent or
    // null: none; else an array). Any other member is a 400 naming it; so is a body that is not
    // UTF-8 or not JSON (the message carries simdjson's reason).
    BodyResult<QueryBody> query_body(std::string_view body);

    // node-http.md §5.2. ndjson: one query body per line (LF, an optional CR before it), lines
    // holding only whitespace skipped; a bad line is a 400 whose `line` is its 1-based number.
    // !ndjson (`application/json`, a form the spec leaves open): one JSON array of query bodies,
    // a bad element a 400 naming its 0-based index, `line` unset. Either way at most
    // batch_statements_max statements (400 past it); an empty batch is answered as zero
    // statements, for the caller to judge.
    BodyResult<std::vector<QueryBody>> batch(std::string_view body, bool ndjson);

    // node-http.md §5.3 (REST POST, PUT, PATCH): one object (an engine::Object) or an array of
    // objects (an engine::List of them, possibly empty). Anything else is a 400. Field names are
    // not checked here; check_document_fields does that against a schema.
    BodyResult<engine::Value> document_body(std::string_view body);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// One-off forms of the BodyReader calls, each with a fresh reader (tests, cold paths).
BodyResult<QueryBody> parse_query_body(std::string_view body);
BodyResult<std::vector<QueryBody>> parse_batch(std::string_view body, bool ndjson);
BodyResult<engine::Value> parse_document_body(std::string_view body);

// Where in a REST document body (an object, or with `item` the item-th object of an array) the
// value of `member` starts, in code points from 0 as a statement's `position` counts (fenecql.md
// §12.3); nullopt when the body holds no such member. For a refusal the executor traced to a
// member of a bound document (ql::ValueSite): the client sent the body, not the statement.
std::optional<uint32_t> member_position(std::string_view body, std::optional<size_t> item,
                                        std::string_view member);

// node-http.md §5.3: every key of `document` (an object, or a list of objects as
// document_body gives) names a live field of `schema` or is `_id`; an unknown one is a 404
// naming it. A key given twice never reaches here (document_body refuses it).
std::optional<BodyError> check_document_fields(const engine::Value& document,
                                               const engine::Schema& schema);

}  // namespace fenec::node
