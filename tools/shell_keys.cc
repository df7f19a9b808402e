// tools/shell_keys.cc: escape sequences to keys (tools/shell_keys.h). A CSI sequence is
// `ESC [`, parameter bytes (digits and `;`), then one final byte in 0x40..0x7E; an SS3 one is
// `ESC O` and one byte; `ESC` before any other byte is that key with Alt held.
#include "tools/shell_keys.h"

#include <cstddef>
#include <string>

#include "tools/line_editor.h"

namespace fenec::tools {

namespace {

// Parameter bytes kept of one CSI sequence: the longest we act on is `1;5C` (Ctrl-Right);
// longer ones are still read to their final byte, and ignored.
constexpr size_t csi_params_kept_max = 8;

// `1;5` → 1 and 5; a missing number is 0.
void csi_numbers(const std::string& params, int& first, int& modifier) {
    first = 0;
    modifier = 0;
    int* at = &first;
    for (char c : params) {
        if (c == ';') {
            if (at == &modifier) break;
            at = &modifier;
        } else if (c >= '0' && c <= '9' && *at < 1000) {
            *at = *at * 10 + (c - '0');
        }
    }
}

Key csi_key(const std::string& params, int final_byte) {
    int first = 0, modifier = 0;
    csi_numbers(params, first, modifier);
    // xterm's modifiers: 3 Alt, 5 Ctrl (and 7 both): word moves on Left and Right.
    const bool word = modifier == 3 || modifier == 5 || modifier == 7;
    switch (final_byte) {
        case 'A':
            return {KeyKind::up};
        case 'B':
            return {KeyKind::down};
        case 'C':
            return {word ? KeyKind::word_right : KeyKind::right};
        case 'D':
            return {word ? KeyKind::word_left : KeyKind::left};
        case 'H':
            return {KeyKind::home};
        case 'F':
            return {KeyKind::end};
        case '~':
            if (first == 1 || first == 7) return {KeyKind::home};
            if (first == 4 || first == 8) return {KeyKind::end};
            if (first == 3) return {KeyKind::del};
            return {KeyKind::ignored};
        default:
            return {KeyKind::ignored};
    }
}

Key read_csi(Terminal& t) {
    std::string params;
    for (;;) {
        const int b = t.read_byte(escape_wait_ms);
        if (b < 0x20 || b > 0x7E) return {KeyKind::ignored};  // cut short (or no byte): dropped
        if (b >= 0x40) return csi_key(params, b);
        if (params.size() < csi_params_kept_max) params += static_cast<char>(b);
    }
}

Key ss3_key(int b) {
    switch (b) {
        case 'A':
            return {KeyKind::up};
        case 'B':
            return {KeyKind::down};
        case 'C':
            return {KeyKind::right};
        case 'D':
            return {KeyKind::left};
        case 'H':
            return {KeyKind::home};
        case 'F':
            return {KeyKind::end};
        default:
            return {KeyKind::ignored};
    }
}

Key alt_key(int b) {
    switch (b) {
        case 'b':
            return {KeyKind::word_left};
        case 'f':
            return {KeyKind::word_right};
        case 'd':
            return {KeyKind::kill_word_forward};
        case 127:
        case 8:
            return {KeyKind::kill_word_back};
        default:
            return {KeyKind::ignored};
    }
}

}  // namespace

Key read_key(Terminal& terminal) {
    const int c = terminal.read_byte(-1);
    if (c < 0) return {KeyKind::end_of_input};
    if (c != 27) return {KeyKind::byte, c};
    const int next = terminal.read_byte(escape_wait_ms);
    if (next < 0) return {KeyKind::escape};
    if (next == '[') return read_csi(terminal);
    if (next == 'O') return ss3_key(terminal.read_byte(escape_wait_ms));
    return alt_key(next);
}

}  // namespace fenec::tools
