// test/tools/shell_cli_test.cc: proves the shell as a command (tools/shell.h), run as a process
// on a tenant file with a script piped in: `--help` prints its usage and exits 0 (creating no
// file named `--help`), an unknown flag is a usage error (2); a statement goes on while a bracket
// or quote is open; `help`, `exit`, `quit`, `\q` are the shell's own; a failed statement stops
// the script with exit 1 (nothing after it runs); answers are JSON when piped, a table with
// --table, JSON again with --json; -c exits 1 when its statement fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test/tools/shell_process.h"

namespace fenec::test::shell_cli_test {
namespace {

using shell::Ran;
using shell::run_fenec;

class ShellCli : public ::testing::Test {
  protected:
    Ran fenec(const std::vector<std::string>& args, const std::string& input = {}) {
        return run_fenec(args, input, dir_.path());
    }
    bool exists(const std::string& name) const {
        return std::filesystem::exists(std::filesystem::path(dir_.path()) / name);
    }

    shell::ShellDir dir_{"shell-cli"};
};

TEST_F(ShellCli, HelpPrintsUsageAndCreatesNoFile) {
    for (const char* flag : {"--help", "-h"}) {
        const Ran r = fenec({"shell", flag});
        EXPECT_EQ(r.status, 0) << flag;
        EXPECT_NE(r.out.find("usage: fenec shell"), std::string::npos) << r.out;
        EXPECT_FALSE(exists(flag));
    }
}

TEST_F(ShellCli, UnknownFlagsAndMissingArgumentsAreUsageErrors) {
    Ran r = fenec({"shell", "-x", "t.fenec"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("unknown flag `-x`"), std::string::npos) << r.err;
    EXPECT_FALSE(exists("t.fenec"));
    EXPECT_EQ(fenec({"shell"}).status, 2);
    EXPECT_EQ(fenec({"shell", "t.fenec", "-c"}).status, 2);
    EXPECT_EQ(fenec({"shell", "a.fenec", "b.fenec"}).status, 2);
    EXPECT_EQ(fenec({"shell", "t.fenec", "--token", "x"}).status, 2);  // a token for a file
    // `--` ends the flags: a file may be named like one.
    r = fenec({"shell", "--", "-odd", "-c", "help"});
    EXPECT_EQ(r.status, 2);  // -c after `--` is a second file name
    r = fenec({"shell", "-c", "help", "--", "-odd"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(exists("-odd"));
}

TEST_F(ShellCli, AStatementGoesOnWhileABracketOrQuoteIsOpen) {
    const Ran r = fenec({"shell", "t.fenec"},
                        "create collection t (\n"
                        "  a text,\n"
                        "  b [int]\n"
                        ")\n"
                        "insert t [{a: \"two\n"
                        "lines (\", b: [1,\n"
                        "2]}, {a: 'x'}]\n"
                        "get t select a -- a comment's ( is no bracket\n"
                        "get t \\\n"
                        "  select b\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out,
              "{\"ok\":true}\n"
              "{\"affected\":2,\"ids\":[1,2]}\n"
              "{\"rows\":[{\"a\":\"two\\nlines (\"},{\"a\":\"x\"}]}\n"
              "{\"rows\":[{\"b\":[1,2]},{\"b\":null}]}\n");
}

TEST_F(ShellCli, HelpAndTheWaysToLeave) {
    for (const char* quit : {"exit", "quit", "\\q", ".quit", "quit;"}) {
        const Ran r =
            fenec({"shell", "t.fenec"},
                  std::string("help\ncreate collection t (a int)\n") + quit + "\nget nosuch\n");
        EXPECT_EQ(r.status, 0) << quit << ": " << r.err;  // left before the failing statement
        EXPECT_NE(r.out.find("exit, quit, \\q"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("{\"ok\":true}\n"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("error"), std::string::npos) << r.out;
        std::filesystem::remove(std::filesystem::path(dir_.path()) / "t.fenec");
    }
    EXPECT_EQ(fenec({"shell", "t.fenec", "-c", "help"}).status, 0);
    EXPECT_EQ(fenec({"shell", "t.fenec", "-c", "\\q"}).status, 0);
}

TEST_F(ShellCli, AFailedStatementStopsTheScriptWithExitOne) {
    Ran r = fenec({"shell", "t.fenec"},
                  "create collection t (a int)\n"
                  "insert t {a: 1}\n"
                  "get nosuch\n"
                  "insert t {a: 2}\n");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("stopped at the statement on line 3"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("{\"error\":"), std::string::npos) << r.out;
    r = fenec({"shell", "t.fenec", "-c", "get t select count(*)"});
    EXPECT_EQ(r.out, "{\"rows\":[{\"count(*)\":1}]}\n");  // the statement after it never ran
    // A script that ends inside a statement fails too.
    r = fenec({"shell", "t.fenec"}, "insert t {a: 3\n");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("ended inside the statement on line 1"), std::string::npos) << r.err;
    EXPECT_EQ(fenec({"shell", "t.fenec", "-c", "get nosuch"}).status, 1);
    EXPECT_EQ(fenec({"shell", "t.fenec", "-c", "get t"}).status, 0);
}

TEST_F(ShellCli, JsonWhenPipedTableWithTheFlag) {
    ASSERT_EQ(fenec({"shell", "t.fenec", "-c", "create collection t (a int, b text)"}).status, 0);
    ASSERT_EQ(fenec({"shell", "t.fenec", "-c", "insert t [{a: 10, b: \"x\"}, {a: 200}]"}).status,
              0);
    const std::string json =
        "{\"rows\":[{\"_id\":1,\"a\":10,\"b\":\"x\"},"
        "{\"_id\":2,\"a\":200,\"b\":null}]}\n";
    EXPECT_EQ(fenec({"shell", "t.fenec", "-c", "get t"}).out, json);
    EXPECT_EQ(fenec({"shell", "t.fenec", "--table", "--json", "-c", "get t"}).out, json);
    const Ran table = fenec({"shell", "t.fenec", "--table", "-c", "get t"});
    EXPECT_EQ(table.out,
              " _id | a   | b\n"
              "-----+-----+------\n"
              "   1 |  10 | x\n"
              "   2 | 200 | null\n"
              "(2 rows)\n");
    // A refusal in the table view: on stderr, pointing at its position.
    const Ran refused = fenec({"shell", "t.fenec", "--table", "-c", "get t where c = 1"});
    EXPECT_EQ(refused.status, 1);
    EXPECT_EQ(refused.out, "");
    EXPECT_NE(refused.err.find("error: "), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("  get t where c = 1\n              ^\n"), std::string::npos)
        << refused.err;
}

}  // namespace
}  // namespace fenec::test::shell_cli_test
