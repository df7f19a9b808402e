// tools/shell_table.cc: the table view of tools/shell_table.h. Widths count code points: a wide
// character (CJK, most emoji) takes two columns on a terminal and tilts its row, which psql
// measures and this view does not.
#include "tools/shell_table.h"

#include <algorithm>
#include <vector>

namespace fenec::tools {

namespace {

size_t width_of(std::string_view s) {
    size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

std::string padded(std::string_view s, size_t width, bool right) {
    const std::string pad(width - std::min(width, width_of(s)), ' ');
    return right ? pad + std::string(s) : std::string(s) + pad;
}

std::string count_text(uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string rows_text(const AnswerView& a) {
    std::vector<size_t> widths;
    for (const std::string& c : a.columns) widths.push_back(width_of(c));
    for (const auto& row : a.rows) {
        for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], width_of(row[i]));
    }
    std::string out;
    if (!a.columns.empty()) {
        std::string head, rule;
        for (size_t i = 0; i < a.columns.size(); ++i) {
            head += (i ? " | " : " ") + padded(a.columns[i], widths[i], false);
            rule += (i ? "-+-" : "-") + std::string(widths[i], '-');
        }
        head.erase(head.find_last_not_of(' ') + 1);
        out += head + "\n" + rule + "-\n";
        for (size_t r = 0; r < a.rows.size(); ++r) {
            std::string line;
            for (size_t i = 0; i < a.rows[r].size(); ++i) {
                line += (i ? " | " : " ") + padded(a.rows[r][i], widths[i], a.numeric[r][i]);
            }
            line.erase(line.find_last_not_of(' ') + 1);
            out += line + "\n";
        }
    }
    return out + "(" + count_text(a.rows.size(), "row", "rows") + ")\n";
}

}  // namespace

std::string table_text(const AnswerView& a) {
    std::string out;
    if (a.rows_present) out += rows_text(a);
    if (a.affected) {
        out += count_text(*a.affected, "row", "rows") + " affected";
        if (!a.ids.empty()) {
            out += a.ids.size() == 1 ? ", id " : ", ids ";
            for (size_t i = 0; i < a.ids.size(); ++i) {
                out += (i ? ", " : "") + std::to_string(a.ids[i]);
            }
        }
        out += "\n";
    }
    if (a.ok) out += "ok\n";
    return out;
}

std::string error_text(const ErrorView& e, std::string_view statement) {
    std::string out = "error: " + e.message;
    if (!e.extra.empty()) out += " (" + e.extra + ")";
    out += "\n";
    if (!e.position) return out;
    // The line holding the position, and the column in it, in code points.
    size_t at = 0, line_start = 0;
    uint64_t cp = 0;
    for (; at < statement.size() && cp < *e.position; ++at) {
        const unsigned char c = static_cast<unsigned char>(statement[at]);
        if ((c & 0xC0) == 0x80) continue;
        ++cp;
        if (c == '\n') line_start = at + 1;
    }
    while (at < statement.size() && (static_cast<unsigned char>(statement[at]) & 0xC0) == 0x80) {
        ++at;
    }
    const size_t line_end = std::min(statement.find('\n', line_start), statement.size());
    std::string line(statement.substr(line_start, line_end - line_start));
    std::replace(line.begin(), line.end(), '\t', ' ');
    const size_t column = width_of(statement.substr(line_start, at - line_start));
    out += "  " + line + "\n  " + std::string(column, ' ') + "^\n";
    return out;
}

}  // namespace fenec::tools
