// tools/commands.h: the `fenec` commands other than the shell, each described once (its
// Command: arguments, options, help; tools/cli.h) and run from its own file: backup.cc,
// restore.cc, file_commands.cc. fenec.cc dispatches to them.
//
// Every entry takes argv with argv[0] its own name and returns the process's exit code (0 done,
// 1 refused or failed, 2 usage: tools/cli.h).
#pragma once

#include "tools/cli.h"

namespace fenec::tools {

const Command& backup_command();
int backup_main(int argc, char** argv);

const Command& restore_command();
int restore_main(int argc, char** argv);

const Command& verify_command();
int verify_main(int argc, char** argv);

const Command& inspect_command();
int inspect_main(int argc, char** argv);

const Command& cut_command();
int cut_main(int argc, char** argv);

const Command& compact_command();
int compact_main(int argc, char** argv);

const Command& demo_command();
int demo_main(int argc, char** argv);

}  // namespace fenec::tools
