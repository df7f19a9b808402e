// tools/shell_keys.h: a terminal's key presses read from its bytes, for the line editor. A key
// that is not a plain byte arrives as an escape sequence, and terminals disagree on them: Home is
// `ESC [ H` (xterm), `ESC [ 1 ~` (the Linux console, tmux, screen), `ESC [ 7 ~` (rxvt) or
// `ESC O H` (xterm in application mode), End likewise with F, 4 and 8. Each form any of them
// sends maps to one key here, and a sequence not known is read to its end and ignored, never
// inserted as text (the `~` a Home key used to leave behind).
#pragma once

#include <cstdint>

namespace fenec::tools {

class Terminal;

enum class KeyKind : uint8_t {
    byte,    // a plain byte (a character's, or a control key's)
    escape,  // Escape pressed alone
    home,
    end,
    del,  // Delete: the character under the cursor
    left,
    right,
    up,
    down,
    word_left,          // Alt-b, Ctrl-Left, Alt-Left
    word_right,         // Alt-f, Ctrl-Right, Alt-Right
    kill_word_back,     // Alt-Backspace
    kill_word_forward,  // Alt-d
    ignored,            // a sequence read whole that edits nothing (F1, Page Up, Insert, ...)
    end_of_input,
};

struct Key {
    KeyKind kind = KeyKind::ignored;
    int byte = 0;  // KeyKind::byte: the byte
};

// Bytes of one key's sequence come together: a lone Escape is one followed by nothing this long
// (readline's keyseq-timeout is 500 ms; ssh over a slow link keeps a sequence's bytes together in
// one packet, so less is safe and keeps Escape quick).
inline constexpr int escape_wait_ms = 50;

// Reads one key from `terminal`, waiting for its first byte.
Key read_key(Terminal& terminal);

}  // namespace fenec::tools
