// ql/answer.h: the result model of a statement and its JSON encoding (fenecql.md §12.1-§12.2),
// in the one place the node and the router share. A row's columns come in select order, then
// `_score` in a ranked read, then each lookup's children under its name.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/value.h"

namespace fenec::ql {

struct Table;

struct Row {
    std::vector<engine::Value> cells;      // one per column
    std::optional<double> score;           // ranked reads
    std::vector<Table> children;           // one per lookup
};

struct Table {
    std::shared_ptr<const std::vector<std::string>> columns;
    bool scored = false;
    std::shared_ptr<const std::vector<std::string>> lookup_names;
    std::vector<Row> rows;
};

struct Answer {
    enum class Kind : uint8_t { rows, ids, affected, ok };
    Kind kind = Kind::ok;
    Table table;                    // rows; also set/del `returning`
    bool returning = false;         // affected with rows
    uint64_t affected = 0;
    std::vector<uint64_t> ids;      // insert, put
};

// {"rows":[...]}, {"affected":n,"ids":[...]}, {"affected":n[,"rows":[...]]} or {"ok":true}.
std::string to_json(const Answer& answer);

// The `[...]` of a table's rows, and row `i` alone, exactly as to_json writes them: REST answers
// a document or a list of them, and a subscription's events carry rows, without the wrapper.
std::string rows_json(const Table& table);
std::string row_json(const Table& table, size_t i);

}  // namespace fenec::ql
