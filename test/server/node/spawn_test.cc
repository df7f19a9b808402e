// test/server/node/spawn_test.cc: a node started on a drawn port another process took before
// the node could bind it (test/support/spawn.h) is started again on a new draw, and only then:
// a port the test fixed fails as the node says, and the exit of a start refused for another
// reason is left for the test to read.
#include <gtest/gtest.h>

#include "test/server/node/node_fixture.h"

namespace fenec::test::spawn_test {
namespace {

TEST(SpawnListening, ADrawnPortTakenBeforeTheBindIsDrawnAgain) {
    uint16_t taken = 0;
    const int holder = listen_loopback(taken);  // another suite's server, as it were
    ASSERT_GE(holder, 0);
    uint16_t second = 0;
    int draws = 0;
    auto draw = [&]() -> uint16_t {
        ++draws;
        if (draws == 1) return taken;
        second = listen_port();
        return second;
    };
    TempDir dir;
    Spawned s =
        spawn_listening(FENEC_NODE_BIN, {"--data-dir", dir.path(), "--workers", "1"}, {}, {}, draw);
    ::close(holder);
    EXPECT_EQ(draws, 2);
    EXPECT_NE(s.port, 0) << s.first_line;
    EXPECT_EQ(s.port, second);
    if (s.pid > 0) {
        ::kill(s.pid, SIGKILL);
        ::waitpid(s.pid, nullptr, 0);
    }
    if (s.out >= 0) ::close(s.out);
}

TEST(SpawnListening, AFixedPortOrAnotherRefusalIsNotTriedAgain) {
    uint16_t taken = 0;
    const int holder = listen_loopback(taken);
    ASSERT_GE(holder, 0);
    int draws = 0;
    auto draw = [&]() -> uint16_t {
        ++draws;
        return listen_port();
    };
    TempDir dir;
    // The test's own --listen, held: the node says so and exits, once.
    Spawned fixed = spawn_listening(
        FENEC_NODE_BIN,
        {"--data-dir", dir.path(), "--listen", "127.0.0.1:" + std::to_string(taken)}, {}, {}, draw);
    EXPECT_EQ(fixed.port, 0) << fixed.first_line;
    EXPECT_EQ(draws, 1);
    ::close(holder);
    // A flag the node refuses: one draw, and its exit status left to read.
    draws = 0;
    Spawned refused =
        spawn_listening(FENEC_NODE_BIN, {"--data-dir", dir.path(), "--no-such-flag"}, {}, {}, draw);
    EXPECT_EQ(refused.port, 0);
    EXPECT_EQ(draws, 1);
    ASSERT_GT(refused.pid, 0);
    int status = 0;
    ASSERT_EQ(::waitpid(refused.pid, &status, 0), refused.pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << status;
    for (const Spawned* s : {&fixed, &refused}) {
        if (s->out >= 0) ::close(s->out);
    }
    if (fixed.pid > 0) ::waitpid(fixed.pid, nullptr, 0);
}

}  // namespace
}  // namespace fenec::test::spawn_test
