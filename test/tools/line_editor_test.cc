// test/tools/line_editor_test.cc: proves the shell's line editor (tools/line_editor.h) acts on
// the keys as a terminal sends them, by feeding it their bytes in process: Home and End in each
// form terminals send (ESC [ H, ESC [ 1 ~, ESC [ 7 ~, ESC O H, and End likewise) move the cursor
// and insert nothing, Delete deletes, Ctrl-W deletes the word before the cursor, Ctrl-R finds an
// earlier entry, a statement typed over several lines is one history entry recalled whole, and
// the history file keeps such an entry across sessions. The drawing is checked where it matters:
// a recalled multi-line entry is drawn behind the continuation prompt.
#include "tools/line_editor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fenec::test::line_editor_test {
namespace {

using tools::LineEditor;

// A terminal whose keys are a string of bytes, its drawing kept; the end of the bytes is the end
// of input, and a wait finds nothing once they are read.
class FedTerminal final : public tools::Terminal {
  public:
    explicit FedTerminal(std::string keys) : keys_(std::move(keys)) {}
    int read_byte(int wait_ms) override {
        if (at_ < keys_.size()) return static_cast<unsigned char>(keys_[at_++]);
        return wait_ms >= 0 ? -2 : -1;
    }
    void write(std::string_view bytes) override { drawn.append(bytes); }
    size_t columns() override { return 80; }

    std::string drawn;

  private:
    std::string keys_;
    size_t at_ = 0;
};

// The text `keys` leave when typed at an editor holding `history`.
std::optional<std::string> typed(const std::string& keys, std::vector<std::string> history = {}) {
    LineEditor editor("");
    for (const std::string& h : history) editor.add_history(h);
    FedTerminal t(keys);
    return editor.edit(t, "fenec> ", "   ..> ");
}

const std::string kEsc = "\x1b";

TEST(LineEditor, HomeAndEndInEveryFormMoveTheCursorAndInsertNothing) {
    const std::vector<std::pair<std::string, std::string>> forms = {
        {kEsc + "[H", kEsc + "[F"},    // xterm
        {kEsc + "[1~", kEsc + "[4~"},  // the Linux console, tmux, screen
        {kEsc + "[7~", kEsc + "[8~"},  // rxvt
        {kEsc + "OH", kEsc + "OF"},    // application mode
    };
    for (const auto& [home, end] : forms) {
        SCOPED_TRACE(home.substr(1) + " " + end.substr(1));
        EXPECT_EQ(typed("books" + home + "get " + end + " where\r"), "get books where");
    }
    // Ctrl-A and Ctrl-E too.
    EXPECT_EQ(typed("b\x01"
                    "a\x05"
                    "c\r"),
              "abc");
}

TEST(LineEditor, DeleteRemovesTheCharacterUnderTheCursor) {
    EXPECT_EQ(typed("xget" + kEsc + "[H" + kEsc + "[3~\r"), "get");
    // An unknown sequence (F5, Page Up) is read whole and edits nothing.
    EXPECT_EQ(typed("a" + kEsc + "[15~" + kEsc + "[5~b\r"), "ab");
}

TEST(LineEditor, CtrlWDeletesTheWordBeforeTheCursor) {
    EXPECT_EQ(typed("get books wher\x17where\r"), "get books where");
    EXPECT_EQ(typed("get books   \x17\r"), "get ");
    EXPECT_EQ(typed("a b\x17\x17\x17\r"), "");
    // What it cut comes back with Ctrl-Y.
    EXPECT_EQ(typed("get books\x17"
                    "x \x19\r"),
              "get x books");
    // Alt-Backspace stops at punctuation, as readline's backward-kill-word does.
    EXPECT_EQ(typed("get books.title" + kEsc + "\x7f" + "year\r"), "get books.year");
}

TEST(LineEditor, CtrlRFindsTheNewestEntryHoldingWhatIsTyped) {
    const std::vector<std::string> history = {"get a where x = 1", "insert b {x: 2}",
                                              "get c where x = 3"};
    EXPECT_EQ(typed("\x12ins\r", history), "insert b {x: 2}");
    EXPECT_EQ(typed("\x12get\r", history), "get c where x = 3");
    EXPECT_EQ(typed("\x12get\x12\r", history), "get a where x = 1");  // Ctrl-R again: older
    // Another key takes the entry for editing and then acts.
    EXPECT_EQ(typed("\x12ins\x05 returning\r", history), "insert b {x: 2} returning");
    // Ctrl-G leaves the text as it was.
    EXPECT_EQ(typed("draft\x12ins\x07!\r", history), "draft!");
    // Nothing found: the text is left as it was.
    EXPECT_EQ(typed("\x12zzz\r", history), "");
}

TEST(LineEditor, AMultiLineEntryIsRecalledWholeAndDrawnOverItsRows) {
    const std::string entry = "get books\nwhere year > 1900";
    LineEditor editor("");
    editor.add_history("get older");
    editor.add_history(entry);
    EXPECT_EQ(editor.history().back(), entry);
    FedTerminal t(kEsc + "[A\r");
    EXPECT_EQ(editor.edit(t, "fenec> ", "   ..> "), entry);
    EXPECT_NE(t.drawn.find("fenec> get books\r\n   ..> where year > 1900"), std::string::npos)
        << t.drawn;
    // Up twice goes past it; Down comes back; Left crosses the line break.
    FedTerminal t2(kEsc + "[A" + kEsc + "[A" + kEsc + "[B" + kEsc + "[H" + kEsc + "[C" + kEsc +
                   "[C" + kEsc + "[C" + kEsc + "[C" + kEsc + "[C" + kEsc + "[C" + kEsc + "[C" +
                   kEsc + "[C" + kEsc + "[C" + kEsc + "[C" + "\x7f \r");
    EXPECT_EQ(editor.edit(t2, "fenec> ", "   ..> "), "get books where year > 1900");
}

TEST(LineEditor, CtrlDEndsInputOnlyOnAnEmptyText) {
    EXPECT_EQ(typed("\x04"), std::nullopt);
    EXPECT_EQ(typed("ab" + kEsc + "[D\x04\r"), "a");
    EXPECT_EQ(typed("abc"), std::nullopt);  // the input ended mid-line
}

TEST(LineEditor, CtrlCDropsTheText) {
    LineEditor editor("");
    FedTerminal t("get boo\x03");
    EXPECT_EQ(editor.edit(t, "> ", "> "), "");
    EXPECT_TRUE(editor.interrupted());
    FedTerminal t2("get\r");
    EXPECT_EQ(editor.edit(t2, "> ", "> "), "get");
    EXPECT_FALSE(editor.interrupted());
}

TEST(LineEditor, HistoryFileKeepsMultiLineEntriesAndItsBound) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("fenec-line-editor-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "history").string();
    const std::string entry = "insert t {s: \"a\\nb\"}\nreturning";  // a `\` and a line break
    {
        LineEditor editor(path, 3);
        for (const char* e : {"one", "two", "three", "four"}) editor.add_history(e);
        editor.add_history(entry);
        editor.add_history(entry);  // a repeat of the newest is not kept twice
    }
    {
        LineEditor editor(path, 3);
        EXPECT_EQ(editor.history(), (std::vector<std::string>{"three", "four", entry}));
    }
    // A file from before entries could span lines: one plain entry a line, `\` as written.
    std::ofstream(path) << "get a\nget \"x\\ny\"\n";
    {
        LineEditor editor(path, 3);
        EXPECT_EQ(editor.history(), (std::vector<std::string>{"get a", "get \"x\\ny\""}));
    }
    std::filesystem::remove_all(dir);
}

TEST(LineEditor, HistoryCodecRoundTrips) {
    const std::vector<std::string> entries = {"a", "b\nc", "back\\slash", "\\n literal", "x\n\ny"};
    EXPECT_EQ(tools::decode_history(tools::encode_history(entries)), entries);
}

}  // namespace
}  // namespace fenec::test::line_editor_test
