// ql/error_json.h: a FenecQL error as its JSON body (fenecql.md §12.3): {"error": "..."} plus the
// members its status carries. The node answers it with error.status(); the shell prints it.
#pragma once

#include <string>

#include "ql/error.h"

namespace fenec::json {
class Writer;
}  // namespace fenec::json

namespace fenec::ql {

std::string error_json(const Error& e);

// The members of that body, written into an object the caller has begun (the node adds its own
// members after them: `quota`, `reason`, a batch's `completed` and `at`).
void write_error_members(json::Writer& w, const Error& e);

}  // namespace fenec::ql
