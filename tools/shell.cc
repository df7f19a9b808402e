// tools/shell.cc: the FenecQL shell. One statement per line (a line ending in `\` continues);
// lines starting with `.` are the shell's own (.help, .collections, .describe, .quit). With -c it
// runs one statement (or one of the shell's own commands), prints its answer and exits non-zero if
// it failed. A field is described as the node's `GET /t/<t>/` and `fenec inspect` describe it
// (ql/describe.h).
#include "tools/shell.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "engine/database.h"
#include "index/index_set.h"
#include "ql/describe.h"
#include "ql/error_json.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "tools/line_editor.h"

namespace fenec::tools {

namespace {

constexpr const char* kUsage =
    "usage: fenec shell FILE [-c STATEMENT]\n"
    "  Opens the tenant file FILE (created when missing) and runs FenecQL on it.\n"
    "  -c STATEMENT  run one statement (or .collections, .describe [COLLECTION]), print its\n"
    "                answer, exit 1 if it failed\n";

constexpr const char* kHelp =
    ".help          this text\n"
    ".collections   the collections, their rows and fields\n"
    ".describe [C]   each collection (or C) as the `create collection` that would make it\n"
    ".quit          leave (Ctrl-D too)\n"
    "Anything else is one FenecQL statement; end a line with \\ to continue it.\n";

struct Session {
    engine::Database& db;
    index::IndexSet& indexes;

    // Prints the answer or the error; true when the statement succeeded.
    bool run(const std::string& text) {
        ql::QlResult<ql::ParsedStatement> parsed = ql::parse(text);
        if (!parsed) {
            std::cout << ql::error_json(parsed.error()) << std::endl;
            return false;
        }
        ql::Executor ex(db, indexes);
        ql::QlResult<ql::Answer> answer = ex.run(parsed.value(), {});
        if (!answer) {
            std::cout << ql::error_json(answer.error()) << std::endl;
            return false;
        }
        std::cout << ql::to_json(answer.value()) << std::endl;
        return true;
    }

    void collections() {
        engine::ReadView view = db.read();
        for (const engine::CollectionInfo& c : view.collections()) {
            std::cout << c.name << " (" << c.rows << " rows):";
            const char* sep = " ";
            for (const engine::FieldDesc& f : view.schema(c.id)->fields) {
                if (f.dropped) continue;
                std::cout << sep << ql::describe_field(f).definition;
                sep = ", ";
            }
            std::cout << "\n";
        }
    }

    // `.describe [name]`: false when `name` is given and no collection has it.
    bool describe(const std::string& name) {
        engine::ReadView view = db.read();
        bool found = false;
        for (const engine::CollectionInfo& c : view.collections()) {
            if (!name.empty() && c.name != name) continue;
            found = true;
            std::cout << "create collection " << ql::name_text(c.name) << " (";
            const char* sep = "\n    ";
            for (const engine::FieldDesc& f : view.schema(c.id)->fields) {
                if (f.dropped) continue;
                std::cout << sep << ql::describe_field(f).definition;
                sep = ",\n    ";
            }
            std::cout << "\n)\n";
        }
        if (!found && !name.empty()) std::cout << "no collection `" << name << "`\n";
        return found || name.empty();
    }

    // One line as typed: the shell's own commands, else a statement. False when it failed.
    bool line(const std::string& text) {
        if (text == ".help") {
            std::cout << kHelp;
            return true;
        }
        if (text == ".collections") {
            collections();
            return true;
        }
        if (text == ".describe" || text.starts_with(".describe ")) {
            std::string name = text.substr(std::string_view(".describe").size());
            name.erase(0, name.find_first_not_of(' '));
            name.erase(name.find_last_not_of(' ') + 1);
            return describe(name);
        }
        return run(text);
    }
};

std::string history_path() {
    const char* home = std::getenv("HOME");
    return home ? std::string(home) + "/.fenec_history" : std::string();
}

int interactive(Session& s) {
    LineEditor editor(history_path());
    std::string pending;
    for (;;) {
        std::optional<std::string> line =
            editor.read(pending.empty() ? "fenec> " : "   ..> ", "   ..> ");
        if (!line) return 0;
        if (!line->empty() && line->back() == '\\') {
            pending += line->substr(0, line->size() - 1) + "\n";
            continue;
        }
        const std::string text = pending + *line;
        pending.clear();
        if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
        editor.add_history(text);
        if (text == ".quit" || text == ".exit") return 0;
        s.line(text);
    }
}

}  // namespace

int shell_main(int argc, char** argv) {
    if (argc < 2 || (argc != 2 && argc != 4) || (argc == 4 && std::strcmp(argv[2], "-c") != 0)) {
        std::cerr << kUsage;
        return 2;
    }
    const std::string path = argv[1];
    index::IndexSet indexes;
    engine::OpenOptions options;
    options.tenant = "shell";
    options.hook = &indexes;
    engine::Result<bool> there = engine::posix_fs().exists(path);
    auto db = there.is_ok() && *there ? engine::Database::open(path, options)
                                      : engine::Database::create(path, options);
    if (!db.is_ok()) {
        std::cerr << "fenec shell: " << path << ": " << db.status().to_string() << "\n";
        return 1;
    }
    Session s{**db, indexes};
    if (argc == 4) return s.line(argv[3]) ? 0 : 1;
    return interactive(s);
}

}  // namespace fenec::tools
