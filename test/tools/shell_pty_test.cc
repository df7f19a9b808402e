// test/tools/shell_pty_test.cc: proves the shell at a terminal, as a person meets it: the real
// binary on a pseudo-terminal (forkpty), typed at with the bytes a terminal sends. Home and End
// (as tmux sends them, ESC [ 1 ~ and ESC [ 4 ~) move the cursor, Ctrl-W deletes a word, a
// statement left open by a bracket continues behind `..>`, Up recalls it whole and Enter runs it
// again, Ctrl-R finds an earlier one, Ctrl-C drops a statement half typed, answers are tables,
// `quit` leaves with 0, and the history file holds the multi-line statement as one entry.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test/tools/shell_process.h"

namespace fenec::test::shell_pty_test {
namespace {

const std::string kEsc = "\x1b";

// Types `keys` and waits for `answer` to be drawn after what was drawn before, then (unless the
// answer leaves the editor reading, as a search does, or is a prompt itself) for the prompt after
// it. Keys typed before the shell is back at its prompt meet the terminal in cooked mode, where
// the line discipline takes ^R, ^W and ^C itself, as for anyone typing ahead of a program: the
// next step's keys go only to the editor. (Without the wait, a loaded run lost a ^R.)
void expect_answer(shell::PtyFenec& pty, const std::string& keys, const std::string& answer,
                   bool then_prompt = true) {
    const size_t from = pty.drawn().size();
    pty.type(keys);
    const std::string& drawn = pty.read_until(answer, from);
    const size_t at = drawn.find(answer, from);
    EXPECT_NE(at, std::string::npos)
        << "typed " << keys << "\nwanted " << answer << "\ndrawn " << drawn.substr(from);
    if (at == std::string::npos || !then_prompt || answer.ends_with("> ")) return;
    const std::string& after = pty.read_until("> ", at + answer.size());
    EXPECT_NE(after.find("> ", at + answer.size()), std::string::npos)
        << "no prompt after " << answer << "\ndrawn " << after.substr(from);
}

TEST(ShellPty, EditsRecallsAndShowsTables) {
    shell::ShellDir dir("shell-pty");
    shell::PtyFenec pty({"shell", "t.fenec"}, dir.path());
    ASSERT_TRUE(pty.started());
    expect_answer(pty, "", "fenec> ");
    expect_answer(pty, "create collection t (a int, b text)\r", "ok\r\n");
    // Home, then End, as tmux sends them.
    expect_answer(pty, "{a: 1, b: \"one\"}" + kEsc + "[1~insert t " + kEsc + "[4~\r",
                  "1 row affected, id 1");
    expect_answer(pty, "get t wher\x17where a = 1\r",
                  " _id | a | b\r\n-----+---+-----\r\n   1 | 1 | one\r\n(1 row)\r\n");
    // An open bracket continues the statement; Up brings it back whole.
    expect_answer(pty, "get t select a where a in [1,\r", "   ..> ");
    expect_answer(pty, "2]\r", "(1 row)");
    expect_answer(pty, kEsc + "[A", "fenec> get t select a where a in [1,\r\n   ..> 2]", false);
    expect_answer(pty, "\r", "(1 row)");
    // Ctrl-R: the insert again.
    expect_answer(pty, "\x12insert", "(reverse-i-search)`insert': insert t {a: 1", false);
    expect_answer(pty, "\r", "1 row affected, id 2");
    // Ctrl-C drops the statement being continued.
    expect_answer(pty, "get t where a in [\r", "   ..> ");
    expect_answer(pty, "\x03", "^C");
    expect_answer(pty, "get t select a\r", "(2 rows)");
    // A refusal, shown as the file shell shows it, and the shell goes on.
    expect_answer(pty, "get nosuch\r", "error: ");
    expect_answer(pty, "help\r", "Ctrl-R searches them");
    pty.type("quit\r");
    EXPECT_EQ(pty.finish(), 0) << pty.drawn();

    std::ifstream in(std::filesystem::path(dir.path()) / ".fenec_history");
    std::stringstream history;
    history << in.rdbuf();
    EXPECT_NE(history.str().find("\nget t select a where a in [1,\\n2]\n"), std::string::npos)
        << history.str();
    EXPECT_EQ(history.str().find("get t where a in [\\n"), std::string::npos) << history.str();
}

TEST(ShellPty, EndOfInputLeavesWithZero) {
    shell::ShellDir dir("shell-pty");
    shell::PtyFenec pty({"shell", "t.fenec"}, dir.path());
    ASSERT_TRUE(pty.started());
    expect_answer(pty, "", "fenec> ");
    pty.type("\x04");
    EXPECT_EQ(pty.finish(), 0);
}

}  // namespace
}  // namespace fenec::test::shell_pty_test
