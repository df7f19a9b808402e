// tools/shell_input.h: what the shell makes of the text typed, before FenecQL sees it: whether a
// statement goes on past the end of its line, and the shell's own commands.
//
// A statement goes on while something in it is open: a bracket `(` `[` `{`, a string `"…"` or
// `'…'`, a bytes literal `x'…'`, a backquoted name or a `/* */` comment, read by FenecQL's own
// rules (docs/fenecql.md, "Words and values": `\` escapes inside strings only, `--` comments to
// the end of the line, a bytes literal holds hex digits only). This scanner only counts; it never
// judges: text it calls complete goes to the parser, which says what is wrong with it, and
// anything broken (a closing bracket with no opener, a bytes literal with a non-hex character) is
// complete, so its error shows at once rather than the shell waiting for more.
#pragma once

#include <string>
#include <string_view>

namespace fenec::tools {

// True while `text` leaves a bracket, string, bytes literal, backquoted name or comment open.
bool statement_open(std::string_view text);

enum class CommandKind : uint8_t {
    none,         // not the shell's: a FenecQL statement
    help,         // help, \?, .help
    quit,         // exit, quit, \q, .quit, .exit
    collections,  // .collections, \d
    describe,     // .describe [C], \d C
};

struct Command {
    CommandKind kind = CommandKind::none;
    std::string name;  // describe: the collection named, empty for all
};

// The shell's command `line` is, if any: matched on the line with its surrounding spaces and one
// trailing `;` left out (`quit;` quits as psql's does).
Command shell_command(std::string_view line);

}  // namespace fenec::tools
