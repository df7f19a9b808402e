// tools/cli.h: how every `fenec` command reads its command line and says what happened. A
// command is described once (Command: its arguments, its options with the environment variable
// each may come from, its help), and that one description drives the reading, `--help` and the
// usage line, so an option cannot be read without being documented.
//
// Exit codes, the same for every command: 0 done; 1 refused or failed (a damaged file, a node's
// refusal, a network failure), said on stderr; 2 wrong usage (an unknown command or option, a
// missing or extra argument), said on stderr as one line with the command's usage after it.
// `--help` prints to stdout and exits 0.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/open_failure.h"

namespace fenec::tools {

inline constexpr int exit_ok = 0;
inline constexpr int exit_failed = 1;
inline constexpr int exit_usage = 2;

struct Option {
    std::string_view name;   // "--at"
    std::string_view value;  // "OFFSET" for help; empty: a switch, which takes no value
    std::string_view help;
    std::string_view env = {};    // read when the option is not given (a token, never echoed)
    std::string_view alias = {};  // "-o" for "--output"
    bool repeats = false;         // may be given more than once (each value kept)
};

struct Command {
    std::string_view name;     // "cut"
    std::string_view args;     // "FILE --at OFFSET", for the usage line
    std::string_view summary;  // one line, for `fenec --help`
    std::string_view details;  // paragraphs printed after the options by --help
    std::vector<Option> options;
    size_t positional_min = 0;
    size_t positional_max = 0;
};

// What a command's line held: its positional arguments and each option given (or taken from
// its environment variable), by the option's long name.
struct Args {
    std::vector<std::string> positional;
    std::vector<std::pair<std::string, std::string>> given;

    bool has(std::string_view name) const;
    // The last value given for `name`, or nullopt.
    std::optional<std::string> value(std::string_view name) const;
    // Every value given for a repeated option, in order.
    std::vector<std::string> values(std::string_view name) const;
};

// Reads `argv` (argv[0] is the command's name) against `command` into `out`. nullopt: go on;
// otherwise the exit code to return at once: 0 after --help (printed on stdout), 2 after a
// usage error (said on stderr).
std::optional<int> read_args(const Command& command, int argc, char** argv, Args& out);

// Says "fenec <name>: <why>" and the usage line on stderr; returns exit_usage.
int usage_error(const Command& command, std::string_view why);

// "usage: fenec <name> <args>  (fenec <name> --help)".
std::string usage_line(const Command& command);

// The command's --help text: summary, usage, options (with their environment variables), details.
std::string help_text(const Command& command);

// Says "fenec <name>: <why>" on stderr; returns exit_failed.
int failed(std::string_view name, std::string_view why);

}  // namespace fenec::tools
