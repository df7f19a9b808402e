// tools/shell.h: `fenec shell FILE|URL [-c STATEMENT] [--json|--table] [--token T]`: FenecQL on
// one tenant — a tenant file opened in this process, or a tenant of a running node or router
// (`http://HOST:PORT/t/<tenant>`) — typed at with line editing and history, run from a script
// piped in, or given one statement with -c. docs/shell.md is its page.
#pragma once

namespace fenec::tools {

// argv[0] is "shell". Returns the process's exit status: 0; 1 when a statement (or opening the
// tenant) failed — a script stops at its first failed statement; 2 on wrong usage.
int shell_main(int argc, char** argv);

}  // namespace fenec::tools
