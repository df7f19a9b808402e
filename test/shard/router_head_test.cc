// test/shard/router_head_test.cc: what the router judges from a request's head alone (issue 17
// items 1 and 4), against the real binary: a body route under /t/ without Content-Length is 411
// (it was sent on as `Content-Length: 0`); a refused token with --auth-delay gets its 401 with the
// body unread and no `100 Continue`; a node registered with an addr or token that could break a
// header line is 400; and slow clients trickling heads do not lock a client out of /_health.
#include <gtest/gtest.h>

#include "test/shard/shard_fixture.h"
#include "test/support/slow_loris.h"

namespace fenec::test::router_head_test {
namespace {

const std::string ROOT = "root";

std::unique_ptr<RouterProcess> start_router(const TempDir& dir, std::vector<std::string> more) {
    std::vector<std::string> flags = {
        "--token", ROOT, "--directory", dir.path() + "/shard.fenec", "--auth-delay", "0"};
    flags.insert(flags.end(), more.begin(), more.end());
    auto r = std::make_unique<RouterProcess>(flags);
    EXPECT_NE(r->port(), 0);
    return r;
}

TEST(RouterHead, BodyWithoutLengthIs411) {
    TempDir dir;
    auto router = start_router(dir, {});
    for (const char* method : {"POST", "PUT", "PATCH"}) {
        Client c(router->port());
        ASSERT_TRUE(c.send_raw(std::string(method) + " /t/acme/query HTTP/1.1\r\nHost: x\r\n\r\n"));
        auto r = c.read_reply();
        ASSERT_TRUE(r) << method;
        EXPECT_EQ(r->status, 411) << method << " " << r->body;
        EXPECT_NE(r->body.find("needs Content-Length"), std::string::npos) << r->body;
    }
    // A GET has no body to frame.
    Client c(router->port());
    auto r = c.request("GET", "/t/acme/notes/1");
    ASSERT_TRUE(r);
    EXPECT_NE(r->status, 411);
}

TEST(RouterHead, NoTokenNo100ContinueWithADelay) {
    TempDir dir;
    auto router = start_router(dir, {"--auth-delay", "50"});
    Client c(router->port());
    ASSERT_TRUE(
        c.send_raw("POST /_shard/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: 10000000\r\nExpect: 100-continue\r\n\r\n"));
    const std::string got = c.read_until("\r\n\r\n", 5000);
    EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0u) << got;
    EXPECT_EQ(got.find("100 Continue"), std::string::npos) << got;
    EXPECT_TRUE(c.closed_within(5000));
}

TEST(RouterHead, AddrOrTokenWithCrlfIs400) {
    TempDir dir;
    auto router = start_router(dir, {});
    auto c = std::make_unique<Client>(router->port());
    for (const std::string body : {
             R"({"addr":"127.0.0.1:1\r\nX-Evil: 1","token":"t"})",
             R"({"addr":"127.0.0.1:1","token":"t\r\nX-Evil: 1"})",
             R"({"addr":"127.0.0.1:1","token":"two words"})",
             R"({"addr":"127.0.0.1:1","token":""})",
             R"({"addr":"127.0.0.1:0","token":"t"})",
             R"({"addr":"127.0.0.1:65536","token":"t"})",
             R"({"addr":"127.0.0.1:http","token":"t"})",
             R"({"addr":":1","token":"t"})",
             R"({"addr":"host/path:1","token":"t"})",
         }) {
        auto r = c->request("PUT", "/_shard/nodes/n9", body, bearer(ROOT));
        ASSERT_TRUE(r) << body;
        EXPECT_EQ(r->status, 400) << body << " " << r->body;
        EXPECT_EQ(r->body.find_first_of("\r\n"), std::string::npos) << r->body;
        if (r->closed) c = std::make_unique<Client>(router->port());
    }
    const std::string long_token(4097, 't');
    auto r = c->request("PUT", "/_shard/nodes/n9",
                        R"({"addr":"127.0.0.1:1","token":")" + long_token + "\"}", bearer(ROOT));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    // Well-formed: past the check, the node is asked (none listens there: 502).
    r = c->request("PUT", "/_shard/nodes/n9", R"({"addr":"[::1]:1","token":"t"})", bearer(ROOT));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 502) << r->body;
}

// Issue 17 item 1 on the router: 20 sockets from 127.0.0.2 trickling heads at
// --max-connections 20 do not keep a client from 127.0.0.1 out of /_health.
TEST(RouterHead, SlowLorisDoesNotLockOutHealth) {
    TempDir dir;
    auto router = start_router(dir, {"--max-connections", "20", "--head-timeout", "1000"});
    SlowLoris loris(router->port(), 20);
    const auto t0 = std::chrono::steady_clock::now();
    int status = 0;
    EXPECT_TRUE(wait_until(
        [&] {
            loris.tick();
            Client c(router->port());
            auto r = c.request("GET", "/_health");
            status = r ? r->status : 0;
            return status == 200;
        },
        std::chrono::milliseconds(4000), std::chrono::milliseconds(200)))
        << "last status " << status;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));
}

}  // namespace
}  // namespace fenec::test::router_head_test
