// test/server/node/slow_clients_test.cc: slow clients do not lock others out of the node (issue
// 17 item 1), against the real binary: the node's flags reach the runtime's head deadline,
// reserved share and eviction (proved in detail in test/server/runtime/loop_test.cc).
#include <gtest/gtest.h>

#include "test/server/node/node_fixture.h"
#include "test/support/slow_loris.h"

namespace fenec::test::slow_clients_test {
namespace {

const std::string A = "admin-token-a";

// 20 sockets from 127.0.0.2 trickle heads a byte at a time and reconnect when cut, at
// --max-connections 20. A client from 127.0.0.1 still gets in: the heads are cut at
// --head-timeout, and past half of it the oldest is evicted for the newcomer. (Before: 503 for
// as long as the trickle went on.) The shape (a byte each 2 s, the default 5 s deadline)
// scaled down fivefold.
TEST(Transport, SlowLorisDoesNotLockOutAClient) {
    TempDir dir;
    NodeProcess node(dir.path(),
                     {"--admin-token", A, "--max-connections", "20", "--head-timeout", "1000"});
    ASSERT_NE(node.port(), 0) << node.first_line();
    SlowLoris loris(node.port(), 20);
    const auto t0 = std::chrono::steady_clock::now();
    int status = 0;
    std::unique_ptr<Client> held;
    EXPECT_TRUE(wait_until(
        [&] {
            loris.tick();
            held = std::make_unique<Client>(node.port());
            auto r = held->request("GET", "/_health");
            status = r ? r->status : 0;
            return status == 200;
        },
        std::chrono::milliseconds(4000), std::chrono::milliseconds(200)))
        << "last status " << status;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));
    // The client's connection is proven now, and keeps working while the trickle goes on.
    for (int i = 0; i < 5; ++i) {
        loris.tick();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the trickle's pace
        auto r = held->request("GET", "/_health");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
    }
    auto m = held->request("GET", "/_metrics", {}, bearer(A));
    ASSERT_TRUE(m);
    EXPECT_NE(m->body.find("fenec_http_refused_total{reason=\"evicted\"}"), std::string::npos)
        << m->body.substr(0, 4000);
}

}  // namespace
}  // namespace fenec::test::slow_clients_test
