// tools/shell_table.h: answers and refusals as people read them on a terminal, as psql shows
// them: a read as aligned columns under a header (numbers to the right) and its row count, a
// write as its count of rows affected and ids, a refusal as `error: …` with the statement's line
// and a caret under the position it names. The JSON bodies themselves are what --json prints.
#pragma once

#include <string>
#include <string_view>

#include "tools/shell_json.h"

namespace fenec::tools {

// The answer's text, each line ending in '\n'.
std::string table_text(const AnswerView& answer);

// The refusal's text for `statement` (the text it refers its position to), lines ending in '\n'.
std::string error_text(const ErrorView& error, std::string_view statement);

}  // namespace fenec::tools
