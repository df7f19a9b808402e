// tools/line_editor.cc: raw-mode line editing and the history file of tools/line_editor.h.
//
// The keys, as readline has them:
//   Left Right Ctrl-B Ctrl-F      a character         Home End Ctrl-A Ctrl-E  start, end
//   Alt-b Alt-f Ctrl-Left/Right   a word              Up Down Ctrl-P Ctrl-N   history
//   Backspace, Delete, Ctrl-D     delete a character  (Ctrl-D on an empty text: end of input)
//   Ctrl-W                        the word before the cursor, to the whitespace before it
//   Alt-Backspace, Alt-d          the word (letters, digits, `_`) before, after the cursor
//   Ctrl-U, Ctrl-K                all before, after the cursor    Ctrl-Y  put back what was cut
//   Ctrl-R                        search the history backwards (below)
//   Ctrl-L                        clear the screen                Ctrl-C  drop the text
// Ctrl-R: each character typed narrows the search to the newest entry holding what was typed;
// Ctrl-R again finds the next older one; Backspace widens it; Enter takes the entry found and
// ends the line; Ctrl-G or Ctrl-C leaves the text as it was; any other key takes the entry found
// for editing and then acts.
//
// Drawing: the text is drawn from its first row each time (prompt, text, the continuation prompt
// after each line break, rows wrapped at the terminal's width), then the cursor put back; a
// character is one column (wide characters are not measured).
#include "tools/line_editor.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/io.h"
#include "tools/shell_keys.h"

namespace fenec::tools {

namespace {

// Terminal raw mode for the life of the object. Both switches wait for output to drain but keep
// what was typed ahead (TCSADRAIN, not TCSAFLUSH): lines pasted at once are each read in turn.
class RawMode {
  public:
    RawMode() {
        if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
        termios raw = saved_;
        raw.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON | IEXTEN | ISIG);
        raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
        raw.c_oflag &= ~static_cast<tcflag_t>(OPOST);  // the drawing writes its own "\r\n"
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        ok_ = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
    }
    ~RawMode() {
        if (ok_) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_);
    }
    bool ok() const { return ok_; }

  private:
    termios saved_{};
    bool ok_ = false;
};

// The process's terminal: keys from stdin, drawing to stdout.
class ProcessTerminal final : public Terminal {
  public:
    int read_byte(int wait_ms) override {
        if (wait_ms >= 0) {
            pollfd p{STDIN_FILENO, POLLIN, 0};
            int r = 0;
            do {
                r = ::poll(&p, 1, wait_ms);
            } while (r < 0 && errno == EINTR);
            if (r == 0) return -2;
            if (r < 0) return -1;
        }
        unsigned char c = 0;
        ssize_t n = 0;
        do {
            n = ::read(STDIN_FILENO, &c, 1);
        } while (n < 0 && errno == EINTR);
        return n == 1 ? c : -1;
    }
    void write(std::string_view bytes) override {
        while (!bytes.empty()) {
            const ssize_t n = ::write(STDOUT_FILENO, bytes.data(), bytes.size());
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return;  // a terminal gone: the next read ends the input
            bytes.remove_prefix(static_cast<size_t>(n));
        }
    }
    size_t columns() override {
        winsize w{};
        if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
        return 80;
    }
};

bool utf8_tail(unsigned char c) { return (c & 0xC0) == 0x80; }

size_t char_before(const std::string& s, size_t at) {
    if (at == 0) return 0;
    --at;
    while (at > 0 && utf8_tail(static_cast<unsigned char>(s[at]))) --at;
    return at;
}

size_t char_after(const std::string& s, size_t at) {
    if (at >= s.size()) return s.size();
    ++at;
    while (at < s.size() && utf8_tail(static_cast<unsigned char>(s[at]))) ++at;
    return at;
}

bool space_at(const std::string& s, size_t at) {
    const char c = s[at];
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool word_char_at(const std::string& s, size_t at) {
    const auto c = static_cast<unsigned char>(s[at]);
    return c >= 0x80 || std::isalnum(c) || c == '_';
}

// Ctrl-W: back over whitespace, then over what is not whitespace.
size_t unix_word_start(const std::string& s, size_t at) {
    while (at > 0 && space_at(s, at - 1)) --at;
    while (at > 0 && !space_at(s, at - 1)) --at;
    return at;
}

// Alt-b, Alt-Backspace: back over what is not a word character, then over a word.
size_t word_start(const std::string& s, size_t at) {
    while (at > 0 && !word_char_at(s, at - 1)) --at;
    while (at > 0 && word_char_at(s, at - 1)) --at;
    return at;
}

// Alt-f, Alt-d: forward over what is not a word character, then to the end of a word.
size_t word_end(const std::string& s, size_t at) {
    while (at < s.size() && !word_char_at(s, at)) ++at;
    while (at < s.size() && word_char_at(s, at)) ++at;
    return at;
}

// The text being edited, its cursor, and where the last drawing left the terminal's cursor.
class Edit {
  public:
    Edit(Terminal& t, const std::string& prompt, const std::string& continuation)
        : t_(t), prompt_(prompt), continuation_(continuation) {}

    std::string text;
    size_t cursor = 0;  // a byte offset at a character's start

    void insert(std::string_view bytes) {
        text.insert(cursor, bytes);
        cursor += bytes.size();
    }
    // Cuts [from, to) into the one-slot kill buffer.
    void cut(size_t from, size_t to, std::string& killed) {
        if (from >= to) return;
        killed = text.substr(from, to - from);
        text.erase(from, to - from);
        cursor = from;
    }
    void set(std::string value) {
        text = std::move(value);
        cursor = text.size();
    }

    // Draws the text behind `prompt` (the editor's own when empty), the cursor put back.
    void draw(const std::string& prompt = {}) {
        const size_t width = std::max<size_t>(1, t_.columns());
        std::string out;
        if (rows_above_ > 0) out += "\x1b[" + std::to_string(rows_above_) + "A";
        out += "\r\x1b[J";
        size_t row = 0, col = 0, cursor_row = 0, cursor_col = 0;
        const auto cell = [&](std::string_view bytes) {
            if (col == width) {  // the terminal wraps before the next character
                ++row;
                col = 0;
            }
            out += bytes;
            ++col;
        };
        const auto mark_cursor = [&] {
            cursor_row = col == width ? row + 1 : row;
            cursor_col = col == width ? 0 : col;
        };
        const auto cells = [&](const std::string& s) {
            for (size_t i = 0; i < s.size(); i = char_after(s, i)) {
                cell(std::string_view(s).substr(i, char_after(s, i) - i));
            }
        };
        cells(prompt.empty() ? prompt_ : prompt);
        for (size_t i = 0; i < text.size(); i = char_after(text, i)) {
            if (i == cursor) mark_cursor();
            const char c = text[i];
            if (c == '\n') {
                out += "\r\n";
                ++row;
                col = 0;
                cells(continuation_);
            } else if (static_cast<unsigned char>(c) < 0x20) {
                cell(" ");  // a tab or a stray control byte: one column, the text kept as is
            } else {
                cell(std::string_view(text).substr(i, char_after(text, i) - i));
            }
        }
        if (cursor >= text.size()) mark_cursor();
        if (col == width) {  // leave the pending wrap for a row of its own
            out += "\r\n";
            ++row;
            col = 0;
        }
        if (row > cursor_row) out += "\x1b[" + std::to_string(row - cursor_row) + "A";
        out += "\r";
        if (cursor_col > 0) out += "\x1b[" + std::to_string(cursor_col) + "C";
        rows_above_ = cursor_row;
        t_.write(out);
    }

    // The cursor put after the text, then a new line: the text is done with.
    void finish(const std::string& tail = {}) {
        cursor = text.size();
        draw();
        t_.write(tail + "\r\n");
        rows_above_ = 0;
    }

    void clear_screen() {
        t_.write("\x1b[H\x1b[2J");
        rows_above_ = 0;
    }

  private:
    Terminal& t_;
    const std::string& prompt_;
    const std::string& continuation_;
    size_t rows_above_ = 0;  // rows from the first drawn row down to the cursor's
};

constexpr const char* kHistoryMagic = "#fenec-history 2";

}  // namespace

std::string encode_history(const std::vector<std::string>& entries) {
    std::string out = std::string(kHistoryMagic) + "\n";
    for (const std::string& e : entries) {
        for (char c : e) {
            if (c == '\\')
                out += "\\\\";
            else if (c == '\n')
                out += "\\n";
            else
                out += c;
        }
        out += '\n';
    }
    return out;
}

std::vector<std::string> decode_history(std::string_view text) {
    std::vector<std::string> entries;
    const bool escaped = text.starts_with(std::string(kHistoryMagic) + "\n");
    if (escaped) text.remove_prefix(std::string_view(kHistoryMagic).size() + 1);
    while (!text.empty()) {
        const size_t eol = text.find('\n');
        std::string_view line = text.substr(0, eol);
        text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
        if (line.empty()) continue;
        if (!escaped) {
            entries.emplace_back(line);
            continue;
        }
        std::string entry;
        for (size_t i = 0; i < line.size(); ++i) {
            if (line[i] == '\\' && i + 1 < line.size()) {
                ++i;
                entry += line[i] == 'n' ? '\n' : line[i];
            } else {
                entry += line[i];
            }
        }
        entries.push_back(std::move(entry));
    }
    return entries;
}

LineEditor::LineEditor(std::string history_path, size_t history_max)
    : history_path_(std::move(history_path)), history_max_(history_max) {
    if (history_path_.empty()) return;
    std::ifstream in(history_path_, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    history_ = decode_history(text.str());
    if (history_.size() > history_max_) {
        history_.erase(history_.begin(), history_.end() - static_cast<ptrdiff_t>(history_max_));
    }
}

LineEditor::~LineEditor() { save(); }

void LineEditor::save() const {
    if (history_path_.empty()) return;
    // Through the engine's Fs: created 0600, as queries typed may name data no other local user
    // should read. A history not saved costs only the history, so a failure is not reported.
    (void)engine::replace_durably(engine::posix_fs(), history_path_, encode_history(history_));
}

void LineEditor::add_history(const std::string& entry) {
    if (entry.find_first_not_of(" \t\r\n") == std::string::npos) return;
    if (!history_.empty() && history_.back() == entry) return;
    history_.push_back(entry);
    if (history_.size() > history_max_) history_.erase(history_.begin());
}

std::optional<std::string> LineEditor::read(const std::string& prompt,
                                            const std::string& continuation) {
    if (isatty(STDIN_FILENO)) {
        RawMode raw;
        if (raw.ok()) {
            ProcessTerminal terminal;
            return edit(terminal, prompt, continuation);
        }
    }
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    return line;
}

std::optional<std::string> LineEditor::edit(Terminal& terminal, const std::string& prompt,
                                            const std::string& continuation) {
    Edit e(terminal, prompt, continuation);
    size_t browse = history_.size();  // history_.size(): the text being written
    std::string draft;                // that text, while an entry is shown instead
    std::string killed;               // what Ctrl-Y puts back
    // Ctrl-R: the search text, the entry found, and the text to go back to.
    bool searching = false, search_failed = false;
    std::string query, before_search;
    size_t found = history_.size();

    const auto search = [&](size_t from) {  // the newest entry below `from` holding `query`
        search_failed = true;
        for (size_t i = from; i-- > 0;) {
            const size_t at = history_[i].find(query);
            if (at == std::string::npos) continue;
            found = i;
            e.text = history_[i];
            e.cursor = at;
            search_failed = false;
            return;
        }
    };
    const auto step = [&](bool older) {  // Up, Down: the entry before or after the one shown
        if (older ? browse == 0 : browse >= history_.size()) return;
        if (browse == history_.size()) draft = e.text;
        browse = older ? browse - 1 : browse + 1;
        e.set(browse == history_.size() ? draft : history_[browse]);
    };
    const auto redraw = [&] {
        if (!searching) return e.draw();
        e.draw(std::string(search_failed ? "(failed reverse-i-search)`" : "(reverse-i-search)`") +
               query + "': ");
    };

    interrupted_ = false;
    e.draw();
    for (;;) {
        const Key k = read_key(terminal);
        if (k.kind == KeyKind::end_of_input) return std::nullopt;
        const int c = k.kind == KeyKind::byte ? k.byte : -1;
        if (searching) {
            if (c == 18) {  // Ctrl-R: the next older entry
                search(found);
                redraw();
                continue;
            }
            if (c == 7 || c == 3) {  // Ctrl-G, Ctrl-C: back to the text as it was
                searching = false;
                e.set(before_search);
                redraw();
                continue;
            }
            if (c == 127 || c == 8) {
                if (!query.empty()) query.erase(char_before(query, query.size()));
                search(history_.size());
                redraw();
                continue;
            }
            if (c >= 32) {
                query += static_cast<char>(c);
                search(found == history_.size() ? found : found + 1);
                redraw();
                continue;
            }
            // Any other key takes what was found, then acts on it.
            searching = false;
            if (!search_failed && found < history_.size()) browse = found;
            if (k.kind == KeyKind::escape) {
                redraw();
                continue;
            }
        }
        if (c == '\r' || c == '\n') {
            e.finish();
            return e.text;
        }
        switch (k.kind) {
            case KeyKind::home:
                e.cursor = 0;
                break;
            case KeyKind::end:
                e.cursor = e.text.size();
                break;
            case KeyKind::left:
                e.cursor = char_before(e.text, e.cursor);
                break;
            case KeyKind::right:
                e.cursor = char_after(e.text, e.cursor);
                break;
            case KeyKind::word_left:
                e.cursor = word_start(e.text, e.cursor);
                break;
            case KeyKind::word_right:
                e.cursor = word_end(e.text, e.cursor);
                break;
            case KeyKind::del:
                e.text.erase(e.cursor, char_after(e.text, e.cursor) - e.cursor);
                break;
            case KeyKind::kill_word_back:
                e.cut(word_start(e.text, e.cursor), e.cursor, killed);
                break;
            case KeyKind::kill_word_forward:
                e.cut(e.cursor, word_end(e.text, e.cursor), killed);
                break;
            case KeyKind::up:
                step(true);
                break;
            case KeyKind::down:
                step(false);
                break;
            default:
                break;
        }
        if (k.kind != KeyKind::byte) {
            redraw();
            continue;
        }
        switch (c) {
            case 1:
                e.cursor = 0;
                break;  // Ctrl-A
            case 5:
                e.cursor = e.text.size();
                break;  // Ctrl-E
            case 2:
                e.cursor = char_before(e.text, e.cursor);
                break;  // Ctrl-B
            case 6:
                e.cursor = char_after(e.text, e.cursor);
                break;  // Ctrl-F
            case 21:
                e.cut(0, e.cursor, killed);
                break;  // Ctrl-U
            case 11:
                e.cut(e.cursor, e.text.size(), killed);
                break;  // Ctrl-K
            case 23:
                e.cut(unix_word_start(e.text, e.cursor), e.cursor, killed);
                break;  // Ctrl-W
            case 25:
                e.insert(killed);
                break;  // Ctrl-Y
            case 12:
                e.clear_screen();
                break;  // Ctrl-L
            case 16:
                step(true);
                break;  // Ctrl-P
            case 14:
                step(false);
                break;  // Ctrl-N
            case 18:    // Ctrl-R
                searching = true;
                search_failed = false;
                query.clear();
                before_search = e.text;
                found = history_.size();
                break;
            case 4:  // Ctrl-D: end of input on an empty text, else delete
                if (e.text.empty()) {
                    terminal.write("\r\n");
                    return std::nullopt;
                }
                e.text.erase(e.cursor, char_after(e.text, e.cursor) - e.cursor);
                break;
            case 3:  // Ctrl-C: the text dropped
                e.finish("^C");
                interrupted_ = true;
                return std::string();
            case 127:
            case 8: {
                const size_t p = char_before(e.text, e.cursor);
                e.text.erase(p, e.cursor - p);
                e.cursor = p;
                break;
            }
            default:
                if (c >= 32 || c == '\t') e.insert(std::string(1, static_cast<char>(c)));
                break;
        }
        redraw();
    }
}

}  // namespace fenec::tools
