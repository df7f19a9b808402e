// tools/line_editor.h: a small line editor for the interactive shell: editing keys, and a history
// kept across sessions in a file. On a terminal it switches it to raw mode while a line is read
// and always restores it; on anything else it reads plain lines.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fenec::tools {

class LineEditor {
public:
    // `history_path` empty: history lives only as long as the editor.
    explicit LineEditor(std::string history_path, size_t history_max = 1000);
    ~LineEditor();  // saves the history
    LineEditor(const LineEditor&) = delete;
    LineEditor& operator=(const LineEditor&) = delete;

    // The next line, or nullopt at end of input (Ctrl-D on an empty line).
    std::optional<std::string> read(const std::string& prompt);
    void add_history(const std::string& line);
    const std::vector<std::string>& history() const { return history_; }

private:
    std::optional<std::string> read_raw(const std::string& prompt);
    void save() const;

    std::string history_path_;
    size_t history_max_;
    std::vector<std::string> history_;
};

}  // namespace fenec::tools
