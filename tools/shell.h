// tools/shell.h: `fenec shell FILE [-c STATEMENT]`: FenecQL on one tenant file, as the node
// would run it, with the answer printed as the node's JSON body.
#pragma once

namespace fenec::tools {

// argv[0] is "shell". Returns the process's exit status: 0, 1 when a statement failed, 2 on
// wrong usage.
int shell_main(int argc, char** argv);

}  // namespace fenec::tools
