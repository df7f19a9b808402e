// tools/fenec.cc: the `fenec` command line: dispatches to each command (tools/commands.h; the
// shell is tools/shell.h's), and answers `fenec --help` and `fenec --version` itself.
//
// Exit codes, for every command (tools/cli.h): 0 done, 1 refused or failed, 2 wrong usage. An
// unknown command is 2 with one usage line on stderr; `--help` prints to stdout.
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "server/runtime/version.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/shell.h"

namespace {

using namespace fenec::tools;

struct Entry {
    const Command& (*command)();
    int (*run)(int argc, char** argv);
};

// In the order `fenec --help` lists them, after the shell.
const Entry entries[] = {
    {backup_command, backup_main}, {restore_command, restore_main},
    {verify_command, verify_main}, {inspect_command, inspect_main},
    {cut_command, cut_main},       {compact_command, compact_main},
    {demo_command, demo_main},
};

constexpr std::string_view top_usage = "usage: fenec COMMAND [ARGS]  (fenec --help)";

void print_help() {
    std::printf(
        "fenec: the command line of Fenec, a multi-tenant document and search database\n\n"
        "usage: fenec COMMAND [ARGS]\n\ncommands:\n");
    std::printf("  %-10s%s\n", "shell", "FenecQL in a shell (fenec shell --help)");
    for (const Entry& e : entries) {
        const Command& c = e.command();
        std::printf("  %-10.*s%.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                    static_cast<int>(c.summary.size()), c.summary.data());
    }
    std::printf(
        "\n`fenec COMMAND --help` says more of each. Exit codes: 0 done, 1 refused or failed,\n"
        "2 wrong usage. Tokens come from flags or the environment (FENEC_ADMIN_TOKEN,\n"
        "FENEC_SHARD_TOKEN); docs/tools.md is the reference.\n\n"
        "  --help      this text\n"
        "  --version   print the version and exit\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "fenec: name a command\n%s\n", top_usage.data());
        return exit_usage;
    }
    const std::string_view first = argv[1];
    if (first == "--help" || first == "-h" || first == "help") {
        print_help();
        return exit_ok;
    }
    if (first == "--version") {
        std::printf("fenec %.*s\n", static_cast<int>(fenec::server::fenec_version.size()),
                    fenec::server::fenec_version.data());
        return exit_ok;
    }
    if (first == "shell") return fenec::tools::shell_main(argc - 1, argv + 1);
    for (const Entry& e : entries) {
        if (e.command().name == first) return e.run(argc - 1, argv + 1);
    }
    std::fprintf(stderr, "fenec: unknown %s `%s`\n%s\n",
                 first.starts_with("-") ? "option" : "command", argv[1], top_usage.data());
    return exit_usage;
}
