// test/docs/page.cc: reads a page's fenced blocks and its opening comment's `runner:` lines.
#include "test/docs/page.h"

#include <fstream>
#include <sstream>

namespace fenec::test::docs {

namespace {

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    std::string w;
    while (in >> w) out.push_back(w);
    return out;
}

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r");
    if (a == std::string::npos) return "";
    return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

bool all_digits(const std::string& s) {
    if (s.empty() || s.size() > 5) return false;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
    }
    return true;
}

// The count of backticks opening a fence on `line` after `indent` spaces (0 when none).
size_t fence_at(const std::string& line, size_t& indent) {
    indent = 0;
    while (indent < line.size() && indent < 3 && line[indent] == ' ') ++indent;
    size_t n = 0;
    while (indent + n < line.size() && line[indent + n] == '`') ++n;
    return n >= 3 ? n : 0;
}

// One `runner:` line's words (after "runner:") into `setup`; "" or the refusal.
std::string directive(const std::vector<std::string>& w, int line, Setup& setup) {
    if (w.empty()) return "an empty runner: line";
    const std::string& what = w[0];
    if (what == "node" || what == "router") {
        if (w.size() < 3) return "runner: " + what + " needs a name and a port";
        if (!all_digits(w[2])) return "runner: " + what + " " + w[1] + ": port `" + w[2] + "`";
        if (setup.process(w[1])) return "runner: process `" + w[1] + "` named twice";
        Process p;
        p.kind = what == "node" ? Process::Kind::node : Process::Kind::router;
        p.name = w[1];
        p.port = w[2];
        p.flags.assign(w.begin() + 3, w.end());
        p.line = line;
        setup.processes.push_back(std::move(p));
        return "";
    }
    if (what == "tenant") {
        if (w.size() != 4 || w[2] != "on") return "runner: tenant <tenant> on <node>";
        const Process* p = setup.process(w[3]);
        if (!p || p->kind != Process::Kind::node) return "runner: tenant: no node `" + w[3] + "`";
        setup.tenant = w[1];
        setup.tenant_node = w[3];
        return "";
    }
    if (what == "http") {
        if (w.size() != 2 || !setup.process(w[1])) return "runner: http <process named before>";
        setup.http_target = w[1];
        return "";
    }
    if (what == "ports") {
        for (size_t i = 1; i < w.size(); ++i) {
            if (!all_digits(w[i])) return "runner: ports: `" + w[i] + "` is not a port";
            setup.sh_ports.push_back(w[i]);
        }
        return w.size() > 1 ? "" : "runner: ports needs at least one port";
    }
    if (what == "dir") {
        for (size_t i = 1; i < w.size(); ++i) {
            if (w[i].size() < 2 || w[i][0] != '/')
                return "runner: dir: `" + w[i] + "` is not absolute";
            setup.sh_dirs.push_back(w[i]);
        }
        return w.size() > 1 ? "" : "runner: dir needs at least one path";
    }
    return "unknown directive `runner: " + what + "`";
}

}  // namespace

bool Block::has_arg(const std::string& a) const {
    for (const auto& x : args) {
        if (x == a) return true;
    }
    return false;
}

std::string Block::arg_value(const std::string& key) const {
    for (const auto& x : args) {
        if (x.size() > key.size() && x.compare(0, key.size(), key) == 0 && x[key.size()] == '=') {
            return x.substr(key.size() + 1);
        }
    }
    return "";
}

std::string Process::flag_value(const std::string& flag) const {
    for (size_t i = 0; i + 1 < flags.size(); ++i) {
        if (flags[i] == flag) return flags[i + 1];
    }
    return "";
}

const Process* Setup::process(const std::string& name) const {
    for (const auto& p : processes) {
        if (p.name == name) return &p;
    }
    return nullptr;
}

std::optional<Page> parse_page(const std::string& path, const std::string& text,
                               std::string& error) {
    std::vector<std::string> lines;
    {
        std::istringstream in(text);
        std::string l;
        while (std::getline(in, l)) lines.push_back(l);
    }
    Page page;
    page.path = path;
    size_t i = 0;
    while (i < lines.size() && trim(lines[i]).empty()) ++i;
    // The opening comment: the set-up is read from it and from nowhere else.
    if (i < lines.size() && trim(lines[i]).starts_with("<!--")) {
        for (; i < lines.size(); ++i) {
            const std::string t = trim(lines[i]);
            if (t.starts_with("runner:")) {
                const std::string why =
                    directive(words(t.substr(7)), static_cast<int>(i + 1), page.setup);
                if (!why.empty()) {
                    error = std::to_string(i + 1) + ": " + why;
                    return std::nullopt;
                }
            }
            if (t.find("-->") != std::string::npos) break;
        }
        if (i == lines.size()) {
            error = "1: the opening comment is not closed";
            return std::nullopt;
        }
        ++i;
    }
    for (; i < lines.size(); ++i) {
        size_t indent = 0;
        const size_t ticks = fence_at(lines[i], indent);
        if (!ticks) continue;
        Block b;
        b.line = static_cast<int>(i + 1);
        std::vector<std::string> info = words(lines[i].substr(indent + ticks));
        if (!info.empty()) {
            b.lang = info[0];
            b.args.assign(info.begin() + 1, info.end());
        }
        std::vector<std::string> content;
        bool closed = false;
        for (++i; i < lines.size(); ++i) {
            size_t close_indent = 0;
            const size_t close_ticks = fence_at(lines[i], close_indent);
            if (close_ticks >= ticks && trim(lines[i].substr(close_indent + close_ticks)).empty()) {
                closed = true;
                break;
            }
            // A fence indented (in a list item) indents its lines as much: that is not content.
            size_t cut = 0;
            while (cut < indent && cut < lines[i].size() && lines[i][cut] == ' ') ++cut;
            content.push_back(lines[i].substr(cut));
        }
        if (!closed) {
            error = std::to_string(b.line) + ": the block is not closed";
            return std::nullopt;
        }
        for (size_t k = 0; k < content.size(); ++k) b.text += (k ? "\n" : "") + content[k];
        page.blocks.push_back(std::move(b));
    }
    return page;
}

std::optional<Page> load_page(const std::string& path, std::string& error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        error = "cannot read the page";
        return std::nullopt;
    }
    std::stringstream s;
    s << in.rdbuf();
    return parse_page(path, s.str(), error);
}

}  // namespace fenec::test::docs
