// test/server/runtime/flags_test.cc: the one flag reader of both binaries (server/runtime/flags.h):
// a table read left to right, `--name value` and `--name=value`; --help stopping the read; each
// refusal's message naming the flag (unknown, a missing value, a value given to a switch, a value
// its setter refuses) exactly as both binaries printed it before they shared the reader; --help's
// layout (padded to the column, a long name's help on its own line, --help last); the common
// setters' bounds (numbers, sizes with k/m/g, decimal seconds as ms, non-empty text, switches);
// and which --listen hosts are loopback.
#include "server/runtime/flags.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fenec::server::flags::flags_test {
namespace {

struct Options {
    std::string listen = "127.0.0.1:1";
    std::optional<std::string> token;
    bool insecure = false;
    uint32_t workers = 0;
    uint64_t body_bytes = 0;
    uint64_t timeout_ms = 0;
};

std::vector<Flag> table(Options& o) {
    return {
        {"--listen", "<host:port>", "the listener", text(o.listen)},
        {"--token", "<t>", "a token", text(o.token)},
        {"--insecure", nullptr, "allow it", on(o.insecure)},
        {"--workers", "<n>", "loops, 1-256", number(o.workers, 256, 1)},
        {"--max-body", "<size>", "a body's ceiling", size_bytes(o.body_bytes)},
        {"--a-flag-with-a-long-name", "<s>", "a timeout", seconds_as_ms(o.timeout_ms)},
    };
}

Parsed<Options> read(std::vector<std::string> args) { return parse(Options{}, table, args); }

TEST(Flags, ReadsValuesSwitchesAndInlineValues) {
    const Parsed<Options> p =
        read({"--listen", "0.0.0.0:9", "--insecure", "--token=abc", "--workers=3", "--max-body",
              "2m", "--a-flag-with-a-long-name", "1.5"});
    ASSERT_EQ(p.error, "");
    EXPECT_FALSE(p.help);
    EXPECT_EQ(p.options.listen, "0.0.0.0:9");
    EXPECT_EQ(p.options.token, "abc");
    EXPECT_TRUE(p.options.insecure);
    EXPECT_EQ(p.options.workers, 3u);
    EXPECT_EQ(p.options.body_bytes, 2u << 20);
    EXPECT_EQ(p.options.timeout_ms, 1500u);
    // Left to right: the last one given wins; defaults stay where nothing is given.
    EXPECT_EQ(read({"--workers", "2", "--workers", "5"}).options.workers, 5u);
    EXPECT_EQ(read({}).options.listen, "127.0.0.1:1");
}

TEST(Flags, HelpStopsTheRead) {
    EXPECT_TRUE(read({"--help", "--no-such-flag"}).help);
    EXPECT_TRUE(read({"--workers", "2", "-h"}).help);
    EXPECT_EQ(read({"--help"}).error, "");
    EXPECT_TRUE(read({"--workers", "2", "--version", "--no-such-flag"}).version);
    // A refusal before --help ends the read first.
    const Parsed<Options> p = read({"--no-such-flag", "--help"});
    EXPECT_FALSE(p.help);
    EXPECT_NE(p.error, "");
}

TEST(Flags, RefusalsNameTheFlag) {
    EXPECT_EQ(read({"--no-such-flag"}).error, "unknown flag --no-such-flag (see --help)");
    EXPECT_EQ(read({"--nope=1"}).error, "unknown flag --nope (see --help)");
    EXPECT_EQ(read({"--workers"}).error, "--workers needs a value <n>");
    EXPECT_EQ(read({"--insecure=yes"}).error, "--insecure takes no value");
    EXPECT_EQ(read({"--workers", "x"}).error, "--workers: cannot use `x` (<n>)");
    EXPECT_EQ(read({"--workers="}).error, "--workers: cannot use `` (<n>)");
    EXPECT_EQ(read({"--listen="}).error, "--listen: cannot use `` (<host:port>)");
    EXPECT_EQ(read({"-x"}).error, "unknown flag -x (see --help)");
}

TEST(Flags, HelpLayout) {
    Options scratch;
    EXPECT_EQ(help_text("usage: x [flags]\n\n", table(scratch), 28),
              "usage: x [flags]\n\n"
              "  --listen <host:port>      the listener\n"
              "  --token <t>               a token\n"
              "  --insecure                allow it\n"
              "  --workers <n>             loops, 1-256\n"
              "  --max-body <size>         a body's ceiling\n"
              "  --a-flag-with-a-long-name <s>\n"
              "                            a timeout\n"
              "  --help                    this text\n"
              "  --version                 print the version and exit\n");
}

TEST(Flags, Numbers) {
    uint32_t n32 = 7;
    EXPECT_TRUE(number(n32, 256, 1)("256"));
    EXPECT_EQ(n32, 256u);
    for (const char* bad : {"257", "0", "-1", "+1", " 1", "1 ", "", "0x10", "1.0"}) {
        EXPECT_FALSE(number(n32, 256, 1)(bad)) << bad;
    }
    EXPECT_EQ(n32, 256u) << "a refused value leaves the field";
    uint64_t n64 = 0;
    EXPECT_TRUE(number(n64, UINT64_MAX)("18446744073709551615"));
    EXPECT_EQ(n64, UINT64_MAX);
    EXPECT_FALSE(number(n64, UINT64_MAX)("18446744073709551616"));
    uint64_t out = 0;
    EXPECT_TRUE(read_u64("0", out));
    EXPECT_FALSE(read_u64("11", out, 10));
}

TEST(Flags, SizesInBytesOrWithASuffix) {
    uint64_t b = 0;
    const std::pair<const char*, uint64_t> good[] = {{"1", 1},
                                                     {"3k", 3u << 10},
                                                     {"3K", 3u << 10},
                                                     {"64m", 64u << 20},
                                                     {"2G", 2ull << 30},
                                                     {"1024g", 1ull << 40},
                                                     {"1099511627776", 1ull << 40}};
    for (const auto& [text, bytes] : good) {
        ASSERT_TRUE(size_bytes(b)(text)) << text;
        EXPECT_EQ(b, bytes) << text;
    }
    for (const char* bad : {"0", "0k", "1025g", "1099511627777", "2T", "k", "", "1.5m", "x"}) {
        EXPECT_FALSE(size_bytes(b)(bad)) << bad;
    }
}

TEST(Flags, DecimalSecondsAsMilliseconds) {
    uint64_t ms = 0;
    const std::pair<const char*, uint64_t> good[] = {
        {"2.5", 2500}, {"60", 60'000}, {"0.001", 1}, {"0.0006", 1}, {"86400", 86'400'000}};
    for (const auto& [text, want] : good) {
        ASSERT_TRUE(seconds_as_ms(ms)(text)) << text;
        EXPECT_EQ(ms, want) << text;
    }
    for (const char* bad : {"0", "0.0004", "-1", "86400.1", "2.5x", "", "inf", "nan", "x"}) {
        EXPECT_FALSE(seconds_as_ms(ms)(bad)) << bad;
    }
}

TEST(Flags, TextAndSwitches) {
    std::string s = "kept";
    EXPECT_FALSE(text(s)(""));
    EXPECT_EQ(s, "kept");
    std::optional<std::string> o;
    EXPECT_TRUE(text(o)("v"));
    EXPECT_EQ(o, "v");
    bool flag = false;
    EXPECT_TRUE(on(flag)(""));
    EXPECT_TRUE(flag);
}

TEST(Flags, LoopbackListeners) {
    for (const char* yes : {"127.0.0.1:8080", "127.1.2.3:0", "[::1]:80", "localhost:1"}) {
        EXPECT_TRUE(is_loopback(yes)) << yes;
    }
    for (const char* no : {"0.0.0.0:8080", "10.0.0.1:1", "[::]:80", "::1", "[::1:80",
                           "example.com:1", "128.0.0.1:1"}) {
        EXPECT_FALSE(is_loopback(no)) << no;
    }
}

}  // namespace
}  // namespace fenec::server::flags::flags_test
