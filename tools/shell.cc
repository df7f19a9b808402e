// tools/shell.cc: the FenecQL shell (tools/shell.h): its flags, the loop that reads statements
// (tools/shell_input.h says where one ends, tools/line_editor.h reads them on a terminal) and how
// an outcome is printed: on a terminal as a table (tools/shell_table.h), else — or with --json —
// as the node's JSON body, one a line. Where the statements run is a Backend
// (tools/shell_backend.h): a file here, or a node over HTTP.
//
// Exit status: 0; 1 when opening the tenant failed, when -c's statement failed, or when a
// statement of a script (input not a terminal) failed — the script stops there, as psql's does
// under ON_ERROR_STOP, so no statement runs after one it may have depended on; 2 on wrong usage.
// Typed at a terminal, a failed statement is shown and the shell goes on.
#include "tools/shell.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include "ql/describe.h"
#include "tools/line_editor.h"
#include "tools/shell_backend.h"
#include "tools/shell_file.h"
#include "tools/shell_input.h"
#include "tools/shell_json.h"
#include "tools/shell_remote.h"
#include "tools/shell_table.h"

namespace fenec::tools {

namespace {

constexpr const char* kUsage =
    "usage: fenec shell [options] FILE | URL\n"
    "  FILE           a tenant file, opened (created when missing) by this process\n"
    "  URL            http://HOST:PORT/t/<tenant>: a tenant of a running fenec-node or\n"
    "                 fenec-shard, each statement a POST /t/<tenant>/query\n"
    "options:\n"
    "  -c STATEMENT   run one statement (or one of the shell's commands), print its answer,\n"
    "                 exit 1 if it failed\n"
    "  --json         answers as the node's JSON bodies, one a line (the default when standard\n"
    "                 output is not a terminal)\n"
    "  --table        answers as tables (the default on a terminal)\n"
    "  --token TOKEN  the data token for a URL (default: the environment's FENEC_TOKEN, which\n"
    "                 other users cannot read from the process list as they can a flag)\n"
    "  -h, --help     this text\n"
    "Statements piped in run as a script: the first that fails stops it, exit status 1.\n"
    "History: ~/.fenec_history. Type `help` in the shell for its commands and keys.\n";

constexpr const char* kHelp =
    "The shell's own commands, each alone on its line (a trailing ; allowed):\n"
    "  help, \\?, .help            this text\n"
    "  .collections, \\d           the collections, their rows and fields\n"
    "  .describe [C], \\d C        each collection (or C) as the `create collection` that makes "
    "it\n"
    "  exit, quit, \\q, .quit      leave (Ctrl-D too)\n"
    "Anything else is one FenecQL statement. It goes on to the next line while a bracket, a\n"
    "quote or a /* comment */ is open, or when the line ends with \\.\n"
    "Keys: Home/End (Ctrl-A/E), Ctrl-W deletes a word, Ctrl-U/K the text before/after the\n"
    "cursor, Ctrl-Y puts it back; Up/Down recall earlier statements, Ctrl-R searches them;\n"
    "Ctrl-C drops the statement being typed, Ctrl-L clears the screen.\n";

struct Options {
    std::string target;
    std::optional<std::string> statement;  // -c
    std::optional<bool> table;             // --table / --json; else: is stdout a terminal
    std::optional<std::string> token;
    bool help = false;
};

// Reads the flags; false with `error` said (a usage error).
bool parse_options(int argc, char** argv, Options& o, std::string& error) {
    bool flags_done = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        const auto value = [&](std::string_view flag) -> std::optional<std::string> {
            if (a.size() > flag.size() && a.starts_with(flag) && a[flag.size()] == '=') {
                return std::string(a.substr(flag.size() + 1));
            }
            if (i + 1 >= argc) {
                error = std::string(flag) + " needs a value";
                return std::nullopt;
            }
            return std::string(argv[++i]);
        };
        if (flags_done || a.size() < 2 || a[0] != '-') {
            if (!o.target.empty()) {
                error = "one FILE or URL, found `" + o.target + "` and `" + std::string(a) + "`";
                return false;
            }
            o.target = a;
        } else if (a == "--") {
            flags_done = true;
        } else if (a == "-h" || a == "--help") {
            o.help = true;
        } else if (a == "--json") {
            o.table = false;
        } else if (a == "--table") {
            o.table = true;
        } else if (a == "-c") {
            if (!(o.statement = value("-c"))) return false;
        } else if (a == "--token" || a.starts_with("--token=")) {
            if (!(o.token = value("--token"))) return false;
        } else {
            error = "unknown flag `" + std::string(a) + "` (a file named so: `fenec shell -- " +
                    std::string(a) + "`)";
            return false;
        }
    }
    if (o.help) return true;
    if (o.target.empty()) {
        error = "a FILE or URL is needed";
        return false;
    }
    if (o.token && !is_remote(o.target)) {
        error = "--token is for a URL; a file is opened without one";
        return false;
    }
    return true;
}

class Session {
  public:
    Session(Backend& backend, bool table) : backend_(backend), table_(table) {}

    // One statement or command as typed; false when it failed.
    bool run(const std::string& text) {
        const Command command = shell_command(text);
        switch (command.kind) {
            case CommandKind::none:
                return statement(text);
            case CommandKind::help:
                std::cout << kHelp << std::flush;
                return true;
            case CommandKind::quit:
                return true;
            case CommandKind::collections:
                return collections();
            case CommandKind::describe:
                return describe(command.name);
        }
        return true;
    }

  private:
    bool statement(const std::string& text) {
        const Outcome out = backend_.run(text);
        if (!out.failure.empty()) {
            std::cout << std::flush;
            std::cerr << "fenec shell: " << out.failure << "\n";
            return false;
        }
        if (!table_) {
            std::cout << out.body << "\n" << std::flush;
        } else if (out.ok) {
            std::optional<AnswerView> answer = read_answer(out.body);
            std::cout << (answer ? table_text(*answer) : out.body + "\n") << std::flush;
        } else {
            std::optional<ErrorView> error = read_error(out.body);
            std::cerr << (error ? error_text(*error, text) : out.body + "\n");
        }
        return out.ok;
    }

    bool listed(std::vector<CollectionText>& list) {
        std::string failure;
        if (backend_.collections(list, failure)) return true;
        std::cerr << "fenec shell: " << failure << "\n";
        return false;
    }

    bool collections() {
        std::vector<CollectionText> list;
        if (!listed(list)) return false;
        for (const CollectionText& c : list) {
            std::cout << c.name;
            if (c.rows) std::cout << " (" << *c.rows << (*c.rows == 1 ? " row)" : " rows)");
            std::cout << ":";
            const char* sep = " ";
            for (const std::string& d : c.definitions) {
                std::cout << sep << d;
                sep = ", ";
            }
            std::cout << "\n";
        }
        std::cout << std::flush;
        return true;
    }

    // `.describe [name]`: false when `name` is given and no collection has it.
    bool describe(const std::string& name) {
        std::vector<CollectionText> list;
        if (!listed(list)) return false;
        bool found = false;
        for (const CollectionText& c : list) {
            if (!name.empty() && c.name != name) continue;
            found = true;
            std::cout << "create collection " << ql::name_text(c.name) << " (";
            const char* sep = "\n    ";
            for (const std::string& d : c.definitions) {
                std::cout << sep << d;
                sep = ",\n    ";
            }
            std::cout << "\n)\n";
        }
        std::cout << std::flush;
        if (!found && !name.empty()) std::cerr << "no collection `" << name << "`\n";
        return found || name.empty();
    }

    Backend& backend_;
    const bool table_;
};

std::string history_path() {
    const char* home = std::getenv("HOME");
    return home && *home ? std::string(home) + "/.fenec_history" : std::string();
}

// Statements read until the input ends or `quit`. On a terminal each is kept in the history and
// a failure shown; from a script (`terminal` false: no prompt, no history) the first failure
// ends it, 1.
int read_loop(Session& s, bool terminal) {
    LineEditor editor(terminal ? history_path() : std::string());
    const std::string prompt = "fenec> ", more = "   ..> ";
    std::string pending;
    uint64_t line_no = 0, statement_line = 0;
    for (;;) {
        std::optional<std::string> line = editor.read(pending.empty() ? prompt : more, more);
        if (!line) break;
        ++line_no;
        if (editor.interrupted()) {
            pending.clear();
            continue;
        }
        if (pending.empty()) {
            statement_line = line_no;
            if (shell_command(*line).kind == CommandKind::quit) {
                editor.add_history(*line);
                return 0;
            }
        }
        std::string text = pending + *line;
        if (statement_open(text)) {
            pending = text + "\n";
            continue;
        }
        if (!text.empty() && text.back() == '\\') {
            text.pop_back();
            pending = text + "\n";
            continue;
        }
        pending.clear();
        if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
        if (terminal) editor.add_history(text);
        if (!s.run(text) && !terminal) {
            std::cerr << "fenec shell: stopped at the statement on line " << statement_line
                      << ", which failed\n";
            return 1;
        }
    }
    // A script that ends inside a statement: run it, so the parser says what is open.
    if (!terminal && pending.find_first_not_of(" \t\r\n") != std::string::npos && !s.run(pending)) {
        std::cerr << "fenec shell: the input ended inside the statement on line " << statement_line
                  << "\n";
        return 1;
    }
    return 0;
}

}  // namespace

int shell_main(int argc, char** argv) {
    Options o;
    std::string error;
    if (!parse_options(argc, argv, o, error)) {
        std::cerr
            << "fenec shell: " << error << "\n"
            << "usage: fenec shell [options] FILE | URL   (fenec shell --help: the options)\n";
        return 2;
    }
    if (o.help) {
        std::cout << kUsage;
        return 0;
    }
    std::unique_ptr<Backend> backend;
    std::string failure;
    if (is_remote(o.target)) {
        RemoteTarget target;
        if (!parse_remote(o.target, target, failure)) {
            std::cerr << "fenec shell: " << o.target << ": " << failure << "\n";
            return 2;
        }
        const char* env = std::getenv("FENEC_TOKEN");
        backend = open_remote_backend(target, o.token ? *o.token : env ? env : "", failure);
    } else {
        backend = open_file_backend(o.target, failure);
    }
    if (!backend) {
        std::cerr << "fenec shell: " << failure << "\n";
        return 1;
    }
    Session s(*backend, o.table.value_or(isatty(STDOUT_FILENO) == 1));
    if (o.statement) return s.run(*o.statement) ? 0 : 1;
    const bool terminal = isatty(STDIN_FILENO) == 1;
    if (terminal) {
        std::cout << "fenec shell on " << o.target << ": `help` for help, `quit` to leave\n"
                  << std::flush;
    }
    return read_loop(s, terminal);
}

}  // namespace fenec::tools
