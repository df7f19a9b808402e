// test/server/node/busy_poll_test.cc: the node's --busy-poll-us against the real binary: its
// loops answer in order on one kept-alive connection, with pipelined requests, whether they
// sleep at once (0), poll a little (the default) or the most allowed (1000), and with two loops;
// a value past the bound is refused at start with exit 2 and a message naming the flag.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "test/server/node/node_fixture.h"

namespace fenec::test::busy_poll_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

void serve_in_order(const std::vector<std::string>& flags) {
    SCOPED_TRACE(flags.empty() ? std::string("defaults") : flags.back());
    TempDir dir;
    std::vector<std::string> all = {"--token", D, "--admin-token", A, "--auth-delay", "0"};
    all.insert(all.end(), flags.begin(), flags.end());
    NodeProcess node(dir.path(), all);
    ASSERT_NE(node.port(), 0) << node.first_line();
    Client c(node.port());
    auto made = c.request("PUT", "/_admin/tenants/acme",
                          R"J({"schema":["create collection notes (n int)"]})J", bearer(A));
    ASSERT_TRUE(made);
    ASSERT_EQ(made->status, 201) << made->body;
    for (int i = 1; i <= 30; ++i) {  // one at a time: each lands after the loop polled or slept
        auto r = c.request("POST", "/t/acme/query",
                           "{\"query\":\"put notes {n: " + std::to_string(i) + "}\"}", bearer(D));
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << r->body;
        auto g = c.request("GET", "/t/acme/c/notes/" + std::to_string(i), "", bearer(D));
        ASSERT_TRUE(g);
        ASSERT_EQ(g->status, 200) << g->body;
        EXPECT_NE(g->body.find("\"n\":" + std::to_string(i)), std::string::npos) << g->body;
    }
    std::string pipelined;
    for (int i = 1; i <= 30; ++i) {
        pipelined += "GET /t/acme/c/notes/" + std::to_string(i) + " HTTP/1.1\r\nAuthorization: Bearer " +
                     D + "\r\n\r\n";
    }
    ASSERT_TRUE(c.send_raw(pipelined));
    for (int i = 1; i <= 30; ++i) {
        auto g = c.read_reply();
        ASSERT_TRUE(g);
        EXPECT_NE(g->body.find("\"n\":" + std::to_string(i)), std::string::npos) << g->body;
    }
    EXPECT_EQ(node.kill(SIGTERM), 0);
}

TEST(BusyPoll, AnswersInOrderWhetherLoopsSleepOrPoll) {
    serve_in_order({});
    serve_in_order({"--busy-poll-us", "0"});
    serve_in_order({"--busy-poll-us", "1000"});
    serve_in_order({"--workers", "2", "--busy-poll-us", "1000"});
}

TEST(BusyPoll, OverTheBoundIsRefusedAtStart) {
    TempDir dir;
    std::string cmd = std::string(FENEC_NODE_BIN) + " --data-dir " + dir.path() +
                      " --busy-poll-us 1001 2>&1 >/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string err;
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) err += buf;
    const int st = ::pclose(p);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2) << st;
    EXPECT_NE(err.find("--busy-poll-us"), std::string::npos) << err;
}

}  // namespace
}  // namespace fenec::test::busy_poll_test
