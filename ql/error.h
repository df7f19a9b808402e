// ql/error.h: what the FenecQL front end answers when a statement is refused, and the result type
// that carries it. No exception leaves ql/. An Error is either a 400 (the statement does not parse
// or breaks a rule that needs no schema) or a 413 (a limit of fenecql.md §14 is passed, named by
// `limit`), or a run budget passed (`budget`: rows 400, time 503). The server turns an Error into
// its HTTP answer in one function; callers key on `limit`, `budget` and `status()`, never on
// `message`, which is for people.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "engine/status.h"

namespace fenec::ql {

// The limits of fenecql.md §14 the front end can meet, by their wire names.
enum class Limit : uint8_t {
    none,  // not a limit: a 400
    statement_bytes,
    parameters,
    expression_depth,
    json_depth,
    path_keys,
    name_bytes,
    fields,
    vector_dimension,
    lookup_depth,
    ranked_rows,
};

// The name the 413 body carries as "limit": "expression_depth", ...; "" for Limit::none.
constexpr std::string_view limit_name(Limit limit) {
    switch (limit) {
        case Limit::none: return "";
        case Limit::statement_bytes: return "statement_bytes";
        case Limit::parameters: return "parameters";
        case Limit::expression_depth: return "expression_depth";
        case Limit::json_depth: return "json_depth";
        case Limit::path_keys: return "path_keys";
        case Limit::name_bytes: return "name_bytes";
        case Limit::fields: return "fields";
        case Limit::vector_dimension: return "vector_dimension";
        case Limit::lookup_depth: return "lookup_depth";
        case Limit::ranked_rows: return "ranked_rows";
    }
    return "";
}

// A run budget passed (ql/budget.h), by its wire name: rows is a 400, time a 503.
enum class BudgetKind : uint8_t { none, rows, time };

constexpr std::string_view budget_name(BudgetKind b) {
    switch (b) {
        case BudgetKind::none: return "";
        case BudgetKind::rows: return "rows";
        case BudgetKind::time: return "time";
    }
    return "";
}

// Where inside a bound parameter's value a refusal's cause lies: the `$n`, the document of the
// list bound to it (an insert or put of several), and the document's member. `position` points at
// the `$n` in the statement; a server that wrote the statement around a client's body (the node's
// REST routes) points into that body with this instead.
struct ValueSite {
    uint32_t param = 0;          // the n of `$n`
    std::optional<size_t> item;  // the document's index, when a list of documents was bound
    std::string member;          // the document's member (a field name, or `_id`); empty: none
    bool known() const { return !member.empty(); }
};

struct Error {
    std::string message;              // names what was expected and what was found
    std::optional<uint32_t> position;  // code points from 0, when a token of the text is the cause
    ValueSite site;                    // the cause inside a parameter's value, when known()
    Limit limit = Limit::none;        // set for a 413
    uint64_t max = 0;                 // the limit's or the budget's maximum
    BudgetKind budget = BudgetKind::none;  // set when a run budget was passed (ql/budget.h)
    // Set where the status is not 400 or 413 (403, 404, 409, 412, and engine refusals), with
    // the members fenecql.md §12.3 names for it.
    int status_code = 0;
    std::string collection;           // 404, 409
    std::optional<uint64_t> id;       // 409: the `_id` taken
    std::string field;                // 409: the field whose value or name is taken
    std::string statement;            // 403: the statement's first word
    std::optional<engine::Code> engine_code;  // an engine refusal, for the server's mapping
    std::optional<engine::Detail> engine_detail;  // which quota, the rate's retry-after

    int status() const {
        if (status_code != 0) return status_code;
        return limit == Limit::none ? 400 : 413;
    }
    // "400 at 24: unterminated string", for logs and test failures.
    std::string to_string() const {
        std::string out = std::to_string(status());
        if (position) out += " at " + std::to_string(*position);
        if (limit != Limit::none) {
            out += " (" + std::string(limit_name(limit)) + " max " + std::to_string(max) + ")";
        }
        return out + ": " + message;
    }
};

// A T or an Error.
template <class T>
class [[nodiscard]] QlResult {
public:
    QlResult(T value) : v_(std::move(value)) {}      // NOLINT: implicit on purpose
    QlResult(Error error) : v_(std::move(error)) {}  // NOLINT: implicit on purpose

    bool is_ok() const { return v_.index() == 0; }
    explicit operator bool() const { return is_ok(); }
    const Error& error() const { return std::get<1>(v_); }
    Error&& take_error() { return std::get<1>(std::move(v_)); }
    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

private:
    std::variant<T, Error> v_;
};

// A refusal with no value: std::nullopt is success.
using Failure = std::optional<Error>;

}  // namespace fenec::ql
