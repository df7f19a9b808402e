// tools/shell_file.h: the shell's backend on a tenant file, opened (or created) in this process
// and run as the node runs it: the same parser and executor, answers and refusals written by the
// same functions (ql/answer.h, ql/error_json.h).
#pragma once

#include <memory>
#include <string>

#include "tools/shell_backend.h"

namespace fenec::tools {

// The file at `path` (created when missing) as a backend, or nullptr with `failure` said.
std::unique_ptr<Backend> open_file_backend(const std::string& path, std::string& failure);

}  // namespace fenec::tools
