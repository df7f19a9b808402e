// tools/shell_input.cc: the continuation scanner and the shell's commands (tools/shell_input.h).
#include "tools/shell_input.h"

#include <cctype>
#include <vector>

namespace fenec::tools {

namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool hex_digit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

char closer_of(char opener) { return opener == '(' ? ')' : opener == '[' ? ']' : '}'; }

std::string_view trimmed(std::string_view s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) return {};
    const size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

}  // namespace

bool statement_open(std::string_view t) {
    std::vector<char> brackets;  // the closers awaited, innermost last
    size_t i = 0;
    while (i < t.size()) {
        const char c = t[i];
        if (c == '-' && i + 1 < t.size() && t[i + 1] == '-') {
            const size_t eol = t.find('\n', i);
            if (eol == std::string_view::npos) return false;  // a comment ends with its line
            i = eol + 1;
        } else if (c == '/' && i + 1 < t.size() && t[i + 1] == '*') {
            const size_t close = t.find("*/", i + 2);
            if (close == std::string_view::npos) return true;
            i = close + 2;
        } else if (c == '"' || c == '\'') {
            for (++i;; ++i) {
                if (i >= t.size()) return true;
                if (t[i] == '\\') {
                    ++i;  // whatever follows is escaped; a bad escape is the lexer's to refuse
                } else if (t[i] == c) {
                    ++i;
                    break;
                }
            }
        } else if (c == '`') {
            const size_t close = t.find('`', i + 1);
            if (close == std::string_view::npos) return true;
            i = close + 1;
        } else if (name_char(c)) {
            const size_t start = i;
            while (i < t.size() && name_char(t[i])) ++i;
            const bool bytes =
                i - start == 1 && (c == 'x' || c == 'X') && i < t.size() && t[i] == '\'';
            if (!bytes) continue;
            for (++i;; ++i) {
                if (i >= t.size()) return true;
                if (t[i] == '\'') {
                    ++i;
                    break;
                }
                if (!hex_digit(t[i])) return false;  // broken: the lexer says where
            }
        } else if (c == '(' || c == '[' || c == '{') {
            brackets.push_back(closer_of(c));
            ++i;
        } else if (c == ')' || c == ']' || c == '}') {
            if (brackets.empty() || brackets.back() != c) return false;  // broken
            brackets.pop_back();
            ++i;
        } else {
            ++i;
        }
    }
    return !brackets.empty();
}

Command shell_command(std::string_view line) {
    std::string_view s = trimmed(line);
    if (s.ends_with(';')) s = trimmed(s.substr(0, s.size() - 1));
    if (s == "help" || s == "\\?" || s == ".help") return {CommandKind::help, {}};
    if (s == "exit" || s == "quit" || s == "\\q" || s == ".quit" || s == ".exit") {
        return {CommandKind::quit, {}};
    }
    if (s == ".collections" || s == "\\d") return {CommandKind::collections, {}};
    for (std::string_view word : {std::string_view(".describe"), std::string_view("\\d")}) {
        if (s == word) return {CommandKind::describe, {}};
        if (s.starts_with(word) && (s[word.size()] == ' ' || s[word.size()] == '\t')) {
            return {CommandKind::describe, std::string(trimmed(s.substr(word.size())))};
        }
    }
    return {};
}

}  // namespace fenec::tools
