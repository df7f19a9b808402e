// test/shard/repair_schedule_test.cc: when a repair looks again at a tenant whose primary did not
// answer (router.md §8.3 step 3): 10 s, 30 s, 1 min, 2 min and 5 min after it was first found
// silent, on times passed in, never read from a clock.
#include <gtest/gtest.h>

#include "shard/copies.h"

namespace fenec::shard::repair_schedule_test {
namespace {

TEST(RepairSchedule, LooksAgainAtTenThirtySixtyOneTwentyAndThreeHundredSeconds) {
    RepairSchedule s;
    EXPECT_FALSE(s.next_ms());
    s.silent("acme", 1'000);
    std::vector<int64_t> looked;
    for (int64_t now = 1'000; now <= 305'000; now += 100) {
        if (!s.due(now).empty()) looked.push_back(now - 1'000);
        s.silent("acme", now);  // still silent at each look: its first sighting stands
    }
    EXPECT_EQ(looked, (std::vector<int64_t>{10'000, 30'000, 60'000, 120'000, 300'000}));
}

TEST(RepairSchedule, LastLookThenLeftToTheNextRepair) {
    RepairSchedule s;
    s.silent("acme", 0);
    EXPECT_EQ(s.next_ms(), 10'000);
    EXPECT_TRUE(s.due(9'999).empty());
    EXPECT_EQ(s.due(10'000), std::vector<std::string>{"acme"});
    EXPECT_EQ(s.next_ms(), 30'000);
    // Looks missed while a repair ran long are not made up one after another.
    EXPECT_EQ(s.due(130'000), std::vector<std::string>{"acme"});
    EXPECT_EQ(s.next_ms(), 300'000);
    EXPECT_EQ(s.due(300'000), std::vector<std::string>{"acme"});
    EXPECT_TRUE(s.empty());
    EXPECT_TRUE(s.due(1'000'000).empty());
    // Found silent again later: a schedule of its own from then.
    s.silent("acme", 1'000'000);
    EXPECT_EQ(s.next_ms(), 1'010'000);
}

TEST(RepairSchedule, AnsweredIsSettled) {
    RepairSchedule s;
    s.silent("acme", 0);
    s.silent("beta", 5'000);
    s.settled("acme");
    EXPECT_EQ(s.next_ms(), 15'000);
    EXPECT_TRUE(s.due(14'999).empty());
    EXPECT_EQ(s.due(15'000), std::vector<std::string>{"beta"});
}

// A test's schedule (FENEC_TEST_REPAIR_LOOK_MS): the first look when asked, the others in the
// default's proportions (1, 3, 6, 12 and 30 times the first).
TEST(RepairSchedule, ScaledKeepsItsProportions) {
    RepairSchedule s(1'000);
    s.silent("acme", 0);
    std::vector<int64_t> looks;
    while (auto next = s.next_ms()) {
        looks.push_back(*next);
        EXPECT_TRUE(s.due(*next - 1).empty());
        EXPECT_EQ(s.due(*next), std::vector<std::string>{"acme"});
    }
    EXPECT_EQ(looks, (std::vector<int64_t>{1'000, 3'000, 6'000, 12'000, 30'000}));
}

}  // namespace
}  // namespace fenec::shard::repair_schedule_test
