// test/server/runtime/refusal_delay_test.cc: the delay before a refusal
// (server/runtime/refusal_delay.h, node-http.md §3.3): it doubles per refusal within a minute,
// caps at 5 s, resets on an accepted credential and after a quiet minute, keeps addresses apart,
// is off at 0, and forgets the address refused longest ago past its bound.
#include "server/runtime/refusal_delay.h"

#include <gtest/gtest.h>

#include <string>

namespace fenec::server::refusal_delay_test {
namespace {

TEST(RefusalDelayTest, DoublesCapsAndResets) {
    RefusalDelay d(100);
    const int64_t expect[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000};
    int64_t t = 0;
    for (int64_t e : expect) EXPECT_EQ(d.refused("10.0.0.1", t += 1000), e);
    EXPECT_EQ(d.refused("10.0.0.2", t), 100);  // addresses apart
    d.accepted("10.0.0.1");
    EXPECT_EQ(d.refused("10.0.0.1", t), 100);
    EXPECT_EQ(d.refused("10.0.0.1", t + 59'999), 200);
    EXPECT_EQ(d.refused("10.0.0.1", t + 59'999 + 60'000), 100);  // a quiet minute starts again

    RefusalDelay big(3000);
    EXPECT_EQ(big.refused("a", 0), 3000);
    EXPECT_EQ(big.refused("a", 1), 5000);
    RefusalDelay off(0);
    EXPECT_EQ(off.refused("a", 0), 0);
    EXPECT_EQ(off.refused("a", 1), 0);
    EXPECT_EQ(off.addresses(), 0u);
}

TEST(RefusalDelayTest, EvictsTheAddressRefusedLongestAgo) {
    RefusalDelay d(10);
    EXPECT_EQ(d.refused("first", 0), 10);
    EXPECT_EQ(d.refused("first", 1), 20);
    EXPECT_EQ(d.refused("kept", 2), 10);
    for (size_t i = 0; i < delayed_addresses_max - 2; ++i) d.refused("a" + std::to_string(i), 3);
    EXPECT_EQ(d.addresses(), delayed_addresses_max);
    EXPECT_EQ(d.refused("kept", 4), 20);  // now the most recent
    d.refused("newcomer", 5);
    EXPECT_EQ(d.addresses(), delayed_addresses_max);
    EXPECT_EQ(d.refused("kept", 6), 40);   // still remembered
    EXPECT_EQ(d.refused("first", 7), 10);  // forgotten, so a first refusal again
}

}  // namespace
}  // namespace fenec::server::refusal_delay_test
