// tools/line_editor.h: a small line editor for the interactive shell: the editing keys people
// know from readline (psql, sqlite3, bash), reverse search, and a history kept across sessions in
// a file. On a terminal it switches it to raw mode while a line is read and always restores it;
// on anything else it reads plain lines.
//
// A history entry may hold line breaks (a statement typed over several lines is one entry):
// recalled, it is edited as one text drawn over several rows, each row after the first behind the
// continuation prompt. The editing itself (edit()) runs on any Terminal, so tests feed it bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fenec::tools {

// Where the editor reads keys and draws: the process's terminal in raw mode, or a test's bytes.
class Terminal {
  public:
    virtual ~Terminal() = default;
    // The next byte: -1 at the end of input; with `wait_ms` >= 0, -2 when none came within it
    // (how a lone Escape is told from the start of a key's sequence).
    virtual int read_byte(int wait_ms) = 0;
    virtual void write(std::string_view bytes) = 0;
    virtual size_t columns() = 0;  // the width rows wrap at
};

// Entries the history keeps (oldest dropped first): years of a person's statements, a file read
// whole at every start in well under a millisecond.
inline constexpr size_t history_entries_max = 1000;

class LineEditor {
  public:
    // `history_path` empty: history lives only as long as the editor.
    explicit LineEditor(std::string history_path, size_t history_max = history_entries_max);
    ~LineEditor();  // saves the history
    LineEditor(const LineEditor&) = delete;
    LineEditor& operator=(const LineEditor&) = delete;

    // The next line, or nullopt at end of input (Ctrl-D on an empty line). `continuation` is the
    // prompt of the rows after the first when the text holds line breaks (a recalled entry).
    std::optional<std::string> read(const std::string& prompt, const std::string& continuation);
    // The same on `terminal`, already in raw mode: the keys of line_editor.cc's table.
    std::optional<std::string> edit(Terminal& terminal, const std::string& prompt,
                                    const std::string& continuation);

    // The last read ended by Ctrl-C (its text, dropped, read as ""): a statement being continued
    // is dropped too.
    bool interrupted() const { return interrupted_; }

    // Keeps `entry` (line breaks and all) as the newest entry, unless it is blank or repeats the
    // newest.
    void add_history(const std::string& entry);
    const std::vector<std::string>& history() const { return history_; }
    // Writes the history file now (the destructor does too).
    void save() const;

  private:
    std::string history_path_;
    size_t history_max_;
    std::vector<std::string> history_;
    bool interrupted_ = false;
};

// The history file's text and back: a first line naming the format, then one entry a line, its
// `\` written `\\` and its line breaks `\n`. A file without that first line (as written before
// entries could span lines) is read one plain entry a line.
std::string encode_history(const std::vector<std::string>& entries);
std::vector<std::string> decode_history(std::string_view text);

}  // namespace fenec::tools
