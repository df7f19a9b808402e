// tools/open_failure.h: why a tenant file could not be opened, said the same way by every
// command that opens one (cut, compact, the shell on a file). A header of its own, inline: the
// shell's library (tools/shell*.cc) neither includes cli.h (shell_input.h has a Command of its
// own) nor links cli.cc.
#pragma once

#include <string>

#include "engine/io.h"
#include "engine/status.h"

namespace fenec::tools {

// Why a tenant file at `path` could not be opened, for `failed`: one whose lock another process
// holds is said to be held (a node serving it?), and one in a folder that does not exist says so,
// rather than the engine's temp file it could not make there.
inline std::string open_failure(const std::string& path, const engine::Status& st) {
    if (st.code() == engine::Code::busy) {
        return path + " is held by another process (a node serving it?): " + st.to_string();
    }
    if (st.code() == engine::Code::not_found) {
        const std::string dir = engine::dir_of(path);
        if (auto there = engine::posix_fs().exists(dir); there.is_ok() && !*there) {
            return path + ": the folder " + dir + " does not exist";
        }
    }
    return path + ": " + st.to_string();
}

}  // namespace fenec::tools
