// tools/shell_json.h: the JSON answers the shell prints, read with simdjson (the reader the node
// and the router read their bodies with) into the little the shell needs: an answer's rows as
// text cells for the table view, an error's text and position, a tenant's description. Nothing
// here writes JSON: that is json/writer.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/shell_backend.h"

namespace fenec::tools {

// An answer body (docs/fenecql.md, "Requests") as the table view shows it.
struct AnswerView {
    bool rows_present = false;                   // a read, or a write with `returning`
    std::vector<std::string> columns;            // the first row's keys, in order
    std::vector<std::vector<std::string>> rows;  // each cell as text (below)
    std::vector<std::vector<bool>> numeric;      // per cell: a number, aligned right
    std::optional<uint64_t> affected;
    std::vector<uint64_t> ids;
    bool ok = false;  // {"ok":true}
};

// The answer in `body`, or nullopt when it is not an answer's shape (printed as it is then).
// A cell: a string's text (line breaks and tabs shown as `\n`, `\t`), a number or bool as
// written, null as `null`, a list or object as its JSON.
std::optional<AnswerView> read_answer(std::string_view body);

// An error body's `error` text and `position` (code points into the statement), when it is one.
struct ErrorView {
    std::string message;
    std::optional<uint64_t> position;
    std::string extra;  // the other members, as `name: value` joined by `, ` (budget, limit, ...)
};
std::optional<ErrorView> read_error(std::string_view body);

// `GET /t/<t>/`'s body: each collection's name and definitions (rows left unknown).
bool read_tenant(std::string_view body, std::vector<CollectionText>& out);

// `{"rows":[{"<column>":<int>}]}`: that int, for a count.
std::optional<uint64_t> read_single_int(std::string_view body);

}  // namespace fenec::tools
