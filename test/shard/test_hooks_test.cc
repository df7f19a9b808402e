// test/shard/test_hooks_test.cc: the router's test hook (shard/test_hooks.h) is in the router the
// tests start and in no release: fenec-shard holds no hook's name, fenec-shard-hooks holds
// FENEC_TEST_MOVE_STALL (so the look finds a name where it is).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/support/file_search.h"

namespace fenec::test::test_hooks_test {
namespace {

TEST(TestHooks, OnlyTheHooksBuildNamesThem) {
    const auto hooks = file_contains(FENEC_SHARD_BIN, {"FENEC_TEST_MOVE_STALL"});
    ASSERT_TRUE(hooks.has_value()) << FENEC_SHARD_BIN;
    EXPECT_TRUE((*hooks)[0]) << "FENEC_TEST_MOVE_STALL not in " << FENEC_SHARD_BIN;
    // Neither the router's hook nor any of the node's (which fenec-shard never links).
    const std::vector<std::string> prefixes = {"FENEC_TEST_", "Fenec-Test-"};
    const auto release = file_contains(FENEC_SHARD_RELEASE_BIN, prefixes);
    ASSERT_TRUE(release.has_value()) << FENEC_SHARD_RELEASE_BIN;
    for (size_t i = 0; i < prefixes.size(); ++i) {
        EXPECT_FALSE((*release)[i]) << prefixes[i] << " in " << FENEC_SHARD_RELEASE_BIN;
    }
}

}  // namespace
}  // namespace fenec::test::test_hooks_test
