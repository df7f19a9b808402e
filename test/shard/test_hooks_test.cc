// test/shard/test_hooks_test.cc: the router's test hook (shard/test_hooks.h) is in the router the
// tests start and in no release: fenec-shard holds no hook's name, fenec-shard-hooks holds
// FENEC_TEST_MOVE_STALL (so the look finds a name where it is).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace fenec::test {
namespace {

// The whole file (a binary of tens of megabytes: read in one call).
std::string file_bytes(const char* path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    std::string bytes(static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0)), '\0');
    in.seekg(0);
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return bytes;
}

TEST(TestHooks, OnlyTheHooksBuildNamesThem) {
    const std::string release = file_bytes(FENEC_SHARD_RELEASE_BIN);
    const std::string hooks = file_bytes(FENEC_SHARD_BIN);
    ASSERT_GT(release.size(), 1u << 20) << FENEC_SHARD_RELEASE_BIN;
    ASSERT_GT(hooks.size(), 1u << 20) << FENEC_SHARD_BIN;
    EXPECT_NE(hooks.find("FENEC_TEST_MOVE_STALL"), std::string::npos) << FENEC_SHARD_BIN;
    // Neither the router's hook nor any of the node's (which fenec-shard never links).
    for (const char* name : {"FENEC_TEST_", "Fenec-Test-"}) {
        EXPECT_EQ(release.find(name), std::string::npos)
            << name << " in " << FENEC_SHARD_RELEASE_BIN;
    }
}

}  // namespace
}  // namespace fenec::test
