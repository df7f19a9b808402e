// test/tools/shell_input_test.cc: proves the shell's continuation rule (tools/shell_input.h): a
// statement goes on while a bracket, string, bytes literal, backquoted name or comment is open,
// by FenecQL's own rules. Checked against the language's lexer (ql/lexer.h) itself: over every
// prefix of statements that use each construct (brackets inside strings and comments, escaped
// quotes, `--` comments), the scanner says "open" exactly when the lexer finds an unterminated
// construct there or more brackets opened than closed. Also: the shell's own commands.
#include "tools/shell_input.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ql/lexer.h"

namespace fenec::test::shell_input_test {
namespace {

using tools::statement_open;

// What the lexer says of `text`: open (an unterminated construct, or brackets left open), not
// open, or nullopt when it refuses the text for another reason (a prefix cut mid-number).
std::optional<bool> lexer_says_open(const std::string& text) {
    ql::Lexer lexer(text);
    int depth = 0;
    for (;;) {
        const ql::Token t = lexer.next();
        switch (t.kind) {
            case ql::TokenKind::end:
                return depth > 0;
            case ql::TokenKind::error:
                if (t.text.starts_with("unterminated")) return true;
                return std::nullopt;
            case ql::TokenKind::lparen:
            case ql::TokenKind::lbracket:
            case ql::TokenKind::lbrace:
                ++depth;
                break;
            case ql::TokenKind::rparen:
            case ql::TokenKind::rbracket:
            case ql::TokenKind::rbrace:
                --depth;
                break;
            default:
                break;
        }
    }
}

TEST(ShellInput, AgreesWithTheLexerOnEveryPrefix) {
    const std::vector<std::string> statements = {
        "create collection books (title text @text, year int @sorted, tags [text])",
        "insert books {title: \"a (b\", year: 1, tags: [\"x]\", 'y\\'}']}",
        "get books where title = 'it''s' and year in (1, 2)",
        "get books -- a comment (with a bracket\nwhere year > 1",
        "get books /* a ( comment\n spanning ] lines */ where `year` > [1][0]",
        "insert files {data: x'0aff', name: \"\\\"quoted (\\\"\"}",
        "get books where title = \"line one\nline two\"",
        "set books {meta: {a: [1, {b: \"}\"}]}} where _id = 1",
    };
    size_t compared = 0;
    for (const std::string& s : statements) {
        EXPECT_FALSE(statement_open(s)) << s;
        for (size_t n = 0; n <= s.size(); ++n) {
            const std::string prefix = s.substr(0, n);
            const std::optional<bool> lexer = lexer_says_open(prefix);
            if (!lexer) continue;
            ++compared;
            EXPECT_EQ(statement_open(prefix), *lexer) << "prefix: " << prefix;
        }
    }
    EXPECT_GT(compared, 400u);
}

TEST(ShellInput, OpenWhileABracketOrQuoteIsOpen) {
    EXPECT_TRUE(statement_open("insert books {title: \"Dune\","));
    EXPECT_TRUE(statement_open("get books where year in (1,"));
    EXPECT_TRUE(statement_open("insert books [{a: 1},"));
    EXPECT_TRUE(statement_open("insert books {title: \"Dune"));
    EXPECT_TRUE(statement_open("insert books {title: 'it\\'"));
    EXPECT_TRUE(statement_open("get `books"));
    EXPECT_TRUE(statement_open("get books /* why"));
    EXPECT_TRUE(statement_open("insert f {b: x'0a"));
    EXPECT_FALSE(statement_open("get books"));
    EXPECT_FALSE(statement_open("get books -- (an open bracket in a comment"));
    EXPECT_TRUE(statement_open("get max'"));  // a word, then a string begun: not a bytes literal
}

TEST(ShellInput, BrokenTextIsCompleteSoItsErrorShows) {
    EXPECT_FALSE(statement_open("get books)"));
    EXPECT_FALSE(statement_open("insert books {a: [1}"));
    EXPECT_FALSE(statement_open("insert f {b: x'0g"));  // not a hex digit: the lexer's error
}

TEST(ShellInput, ShellCommands) {
    using tools::CommandKind;
    for (const char* quit : {"exit", "quit", "\\q", ".quit", ".exit", "  quit ; ", "exit;"}) {
        EXPECT_EQ(tools::shell_command(quit).kind, CommandKind::quit) << quit;
    }
    for (const char* help : {"help", "\\?", ".help", "help;"}) {
        EXPECT_EQ(tools::shell_command(help).kind, CommandKind::help) << help;
    }
    EXPECT_EQ(tools::shell_command(".collections").kind, CommandKind::collections);
    EXPECT_EQ(tools::shell_command("\\d").kind, CommandKind::collections);
    const tools::Command d = tools::shell_command("\\d books");
    EXPECT_EQ(d.kind, CommandKind::describe);
    EXPECT_EQ(d.name, "books");
    EXPECT_EQ(tools::shell_command(".describe  books ").name, "books");
    EXPECT_EQ(tools::shell_command(".describe").kind, CommandKind::describe);
    for (const char* statement : {"get help", "helpful", "get books", "quit books", ".describer"}) {
        EXPECT_EQ(tools::shell_command(statement).kind, CommandKind::none) << statement;
    }
}

}  // namespace
}  // namespace fenec::test::shell_input_test
