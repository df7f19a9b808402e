// test/tools/cli_test.cc: proves the `fenec` command line's contract with scripts and people
// (tools/cli.h): `--help`, on the command and on every subcommand, prints to stdout and exits 0;
// a wrong usage (no command, an unknown command or option, a missing or extra argument) exits 2
// with one line saying why and one usage line on stderr, nothing on stdout; `--version` prints
// one version, the same from fenec, fenec-node and fenec-shard.
#include <gtest/gtest.h>

#include "test/tools/run_tool.h"

namespace fenec::test {
namespace {

const char* const commands[] = {"backup", "restore", "verify", "inspect", "cut", "compact", "demo"};

size_t lines(const std::string& text) {
    size_t n = 0;
    for (char c : text) n += c == '\n';
    return n;
}

TEST(Cli, HelpGoesToStdoutAndExitsZero) {
    for (const char* help : {"--help", "-h", "help"}) {
        const ToolRun r = fenec(help);
        EXPECT_EQ(r.status, 0) << help;
        EXPECT_EQ(r.err, "") << help;
        EXPECT_NE(r.out.find("commands:"), std::string::npos) << r.out;
        for (const char* c : commands) {
            EXPECT_NE(r.out.find(std::string("  ") + c + " "), std::string::npos) << c;
        }
    }
}

TEST(Cli, EveryCommandHasItsHelp) {
    for (const char* c : commands) {
        const ToolRun r = fenec(std::string(c) + " --help");
        EXPECT_EQ(r.status, 0) << c << ": " << r.err;
        EXPECT_EQ(r.err, "") << c;
        EXPECT_TRUE(r.out.starts_with(std::string("fenec ") + c + ": ")) << r.out;
        EXPECT_NE(r.out.find(std::string("usage: fenec ") + c), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("--help"), std::string::npos) << r.out;
    }
    // A token's option names the environment variable it may come from.
    const ToolRun backup = fenec("backup --help");
    EXPECT_NE(backup.out.find("(env FENEC_ADMIN_TOKEN)"), std::string::npos) << backup.out;
    EXPECT_NE(backup.out.find("(env FENEC_SHARD_TOKEN)"), std::string::npos) << backup.out;
}

TEST(Cli, WrongUsageExitsTwoWithOneUsageLine) {
    const char* const wrong[] = {
        "",                                        // no command
        "frobnicate",                              // unknown command
        "--frobnicate",                            // unknown option
        "verify",                                  // missing FILE
        "verify a b",                              // extra argument
        "verify --bogus x.fenec",                  // unknown option
        "cut x.fenec",                             // no --at
        "cut x.fenec --at 12x",                    // not an offset
        "backup http://127.0.0.1:1/t/acme",        // no -o
        "backup http://127.0.0.1:1 -o /tmp/none",  // neither a tenant nor --all
        "backup http://127.0.0.1:1/t/a --all -o /tmp/none",
        "backup not-a-url -o /tmp/none",
        "restore /tmp/none",  // no URL
        "restore /tmp/none http://127.0.0.1:1 --node-token nope",
        "inspect x.fenec --at",  // an option it does not take
    };
    for (const char* args : wrong) {
        const ToolRun r = fenec(args);
        EXPECT_EQ(r.status, 2) << "`fenec " << args << "`: " << r.err;
        EXPECT_EQ(r.out, "") << args;
        EXPECT_EQ(lines(r.err), 2u) << "`fenec " << args << "`:\n" << r.err;
        EXPECT_NE(r.err.find("usage: fenec"), std::string::npos) << r.err;
    }
}

TEST(Cli, OneVersionForEveryBinary) {
    const ToolRun f = fenec("--version");
    ASSERT_EQ(f.status, 0) << f.err;
    ASSERT_TRUE(f.out.starts_with("fenec ")) << f.out;
    const std::string version = f.out.substr(6);
    EXPECT_GT(version.size(), 1u);
    const ToolRun n = run_tool(std::string("'") + FENEC_NODE_BIN + "' --version");
    EXPECT_EQ(n.status, 0) << n.err;
    EXPECT_EQ(n.out, "fenec-node " + version);
    const ToolRun s = run_tool(std::string("'") + FENEC_SHARD_BIN + "' --version");
    EXPECT_EQ(s.status, 0) << s.err;
    EXPECT_EQ(s.out, "fenec-shard " + version);
}

}  // namespace
}  // namespace fenec::test
