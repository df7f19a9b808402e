// test/shard/mark_test.cc: shard::router_mark (prepared HMAC states) gives the mark the node
// verifies (auth::router_mark), for short, block-sized and long tokens, and per thread.
#include <gtest/gtest.h>

#include <thread>

#include "server/auth.h"
#include "shard/mark.h"

namespace fenec::shard {

TEST(RouterMark, SameAsTheNodesMark) {
    const std::string tokens[] = {"a", "bench-admin-token", std::string(64, 'k'),
                                  std::string(65, 'k'), std::string(300, 'z'), ""};
    for (const std::string& token : tokens) {
        for (const char* id : {"0123456789abcdef", "x", ""}) {
            EXPECT_EQ(router_mark(token, "127.0.0.1", id),
                      auth::router_mark(token, "127.0.0.1", id))
                << "token of " << token.size() << " bytes, id " << id;
            // Again: the prepared state is reused, not consumed.
            EXPECT_EQ(router_mark(token, "::1", id), auth::router_mark(token, "::1", id));
        }
    }
    std::string other;
    std::thread t([&] { other = router_mark("bench-admin-token", "10.0.0.1", "r1"); });
    t.join();
    EXPECT_EQ(other, auth::router_mark("bench-admin-token", "10.0.0.1", "r1"));
    std::string verified;
    EXPECT_TRUE(auth::verify_router_mark("tok", "10.0.0.1 " + router_mark("tok", "10.0.0.1", "r2"),
                                         "r2", verified));
    EXPECT_EQ(verified, "10.0.0.1");
}

}  // namespace fenec::shard
