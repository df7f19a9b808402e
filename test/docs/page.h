// test/docs/page.h: a documentation page as the doc-example runner reads it: its fenced blocks,
// each with its info string and the line it opens on, and the set-up its opening HTML comment
// states in `runner:` lines (test/docs/README.md gives the syntax). Reading a page runs nothing;
// a page whose set-up cannot be read is refused with the line at fault, so a typo in a comment
// fails the page instead of quietly running it against the wrong processes.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fenec::test::docs {

// One fenced block: "```lang arg arg" … "```".
struct Block {
    int line = 0;                   // 1-based line of the opening fence
    std::string lang;               // the info string's first word ("" for a bare fence)
    std::vector<std::string> args;  // the info string's other words
    std::string text;               // the lines between the fences, joined by '\n'

    bool has_arg(const std::string& a) const;
    // The value of an argument `key=value` ("" when absent).
    std::string arg_value(const std::string& key) const;
};

// A process the runner starts for the page (`runner: node …`, `runner: router …`).
struct Process {
    enum class Kind { node, router };
    Kind kind = Kind::node;
    std::string name;
    std::string port;                // the port the page writes for it; rewritten to the real one
    std::vector<std::string> flags;  // passed as given, after `{dir}` is replaced
    int line = 0;

    // The value following `flag` in flags ("" when absent): a node's --token, --admin-token.
    std::string flag_value(const std::string& flag) const;
};

struct Setup {
    std::vector<Process> processes;  // started in this order
    std::string tenant;              // `runner: tenant <t> on <node>`: fenecql blocks' tenant
    std::string tenant_node;
    std::string http_target;            // `runner: http <process>`; else the first process
    std::vector<std::string> sh_ports;  // `runner: ports …`: ports the sh blocks' processes take
    std::vector<std::string> sh_dirs;   // `runner: dir …`: paths the sh blocks write under

    const Process* process(const std::string& name) const;
};

struct Page {
    std::string path;
    Setup setup;
    std::vector<Block> blocks;
};

// Reads a page's text. On a refusal answers nullopt and sets `error` to "<line>: <why>".
std::optional<Page> parse_page(const std::string& path, const std::string& text,
                               std::string& error);

// Reads the file at `path` and parses it; a file that cannot be read is a refusal.
std::optional<Page> load_page(const std::string& path, std::string& error);

}  // namespace fenec::test::docs
