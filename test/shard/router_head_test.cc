// test/shard/router_head_test.cc: what the router judges from a request's head alone (issue 17),
// against the real binary: slow clients trickling heads do not lock a client out of /_health.
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
