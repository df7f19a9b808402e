// tools/line_editor.cc: raw-mode line editing (left/right, home/end, up/down through history,
// backspace, delete, Ctrl-A/E/U/K/C/D) and the history file of tools/line_editor.h.
#include "tools/line_editor.h"

#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "engine/io.h"

namespace fenec::tools {

namespace {

// Terminal raw mode for the life of the object.
class RawMode {
public:
    RawMode() {
        if (tcgetattr(STDIN_FILENO, &saved_) != 0) return;
        termios raw = saved_;
        raw.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON | IEXTEN | ISIG);
        raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        ok_ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0;
    }
    ~RawMode() {
        if (ok_) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
    }
    bool ok() const { return ok_; }

private:
    termios saved_{};
    bool ok_ = false;
};

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

size_t prev_char(const std::string& s, size_t at) {
    if (at == 0) return 0;
    --at;
    while (at > 0 && continuation(static_cast<unsigned char>(s[at]))) --at;
    return at;
}

size_t next_char(const std::string& s, size_t at) {
    if (at >= s.size()) return s.size();
    ++at;
    while (at < s.size() && continuation(static_cast<unsigned char>(s[at]))) ++at;
    return at;
}

size_t columns(const std::string& s, size_t from, size_t to) {
    size_t n = 0;
    for (size_t i = from; i < to; ++i) n += !continuation(static_cast<unsigned char>(s[i]));
    return n;
}

void redraw(const std::string& prompt, const std::string& line, size_t cursor) {
    std::string out = "\r" + prompt + line + "\x1b[K";
    const size_t back = columns(line, cursor, line.size());
    if (back > 0) out += "\x1b[" + std::to_string(back) + "D";
    if (write(STDOUT_FILENO, out.data(), out.size()) < 0) return;
}

int read_byte() {
    unsigned char c;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    return n == 1 ? c : -1;
}

}  // namespace

LineEditor::LineEditor(std::string history_path, size_t history_max)
    : history_path_(std::move(history_path)), history_max_(history_max) {
    if (history_path_.empty()) return;
    std::ifstream in(history_path_);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty()) history_.push_back(line);
    }
    if (history_.size() > history_max_) {
        history_.erase(history_.begin(), history_.end() - static_cast<ptrdiff_t>(history_max_));
    }
}

LineEditor::~LineEditor() { save(); }

void LineEditor::save() const {
    if (history_path_.empty()) return;
    std::string text;
    for (const std::string& line : history_) text += line + '\n';
    // Through the engine's Fs: created 0600, as queries typed may name data no other local user
    // should read. A history not saved costs only the history, so a failure is not reported.
    (void)engine::replace_durably(engine::posix_fs(), history_path_, text);
}

void LineEditor::add_history(const std::string& line) {
    if (line.empty() || line.find('\n') != std::string::npos) return;
    if (!history_.empty() && history_.back() == line) return;
    history_.push_back(line);
    if (history_.size() > history_max_) history_.erase(history_.begin());
}

std::optional<std::string> LineEditor::read(const std::string& prompt) {
    if (isatty(STDIN_FILENO)) {
        if (std::optional<std::string> line = read_raw(prompt)) return line;
        if (!std::cin) return std::nullopt;
    }
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    return line;
}

std::optional<std::string> LineEditor::read_raw(const std::string& prompt) {
    RawMode raw;
    if (!raw.ok()) return std::nullopt;
    std::string line;
    size_t cursor = 0;
    size_t browse = history_.size();  // history_.size(): the line being written
    std::string draft;
    redraw(prompt, line, cursor);
    for (;;) {
        const int c = read_byte();
        if (c < 0) return std::nullopt;
        if (c == '\r' || c == '\n') {
            if (write(STDOUT_FILENO, "\r\n", 2) < 0) return line;
            return line;
        }
        if (c == 4) {  // Ctrl-D: end of input on an empty line, else delete
            if (line.empty()) {
                if (write(STDOUT_FILENO, "\r\n", 2) < 0) return std::nullopt;
                std::cin.setstate(std::ios::eofbit);
                return std::nullopt;
            }
            line.erase(cursor, next_char(line, cursor) - cursor);
        } else if (c == 3) {  // Ctrl-C: drop the line
            line.clear();
            cursor = 0;
            if (write(STDOUT_FILENO, "^C\r\n", 4) < 0) return std::nullopt;
        } else if (c == 127 || c == 8) {
            const size_t p = prev_char(line, cursor);
            line.erase(p, cursor - p);
            cursor = p;
        } else if (c == 1) {
            cursor = 0;
        } else if (c == 5) {
            cursor = line.size();
        } else if (c == 21) {  // Ctrl-U
            line.erase(0, cursor);
            cursor = 0;
        } else if (c == 11) {  // Ctrl-K
            line.erase(cursor);
        } else if (c == 27) {
            if (read_byte() != '[') continue;
            const int k = read_byte();
            if (k == 'D') cursor = prev_char(line, cursor);
            else if (k == 'C') cursor = next_char(line, cursor);
            else if (k == 'H') cursor = 0;
            else if (k == 'F') cursor = line.size();
            else if (k == '3' && read_byte() == '~') line.erase(cursor, next_char(line, cursor) - cursor);
            else if ((k == 'A' && browse > 0) || (k == 'B' && browse < history_.size())) {
                if (browse == history_.size()) draft = line;
                browse += k == 'A' ? -1 : 1;
                line = browse == history_.size() ? draft : history_[browse];
                cursor = line.size();
            }
        } else if (c >= 32 || c == '\t') {
            line.insert(cursor, 1, static_cast<char>(c));
            ++cursor;
        }
        redraw(prompt, line, cursor);
    }
}

}  // namespace fenec::tools
