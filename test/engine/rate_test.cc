// test/engine/rate_test.cc: proves the token bucket behind rows/s and bytes/s (engine.md §9,
// §16 test 52): it starts full at one second's worth; a charge may put it in debt and the next
// block waits the debt out — at 100 rows/s, 500 rows from full give a retry-after of exactly
// 4010 ms and no less; the rows bucket needs a whole row, the bytes bucket any bytes; refill is
// capped at capacity; set_rate keeps the level clipped to the new capacity and keeps a debt.
#include "engine/rate.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "engine/clock.h"

namespace fenec::engine::rate_test {
namespace {

constexpr int64_t kT0 = 7'000'000'000;  // any steady-clock origin

TEST(RateBucketTest, StartsFull) {
    RateBucket rows(100, kT0);
    EXPECT_DOUBLE_EQ(rows.level(kT0), 100);
    EXPECT_TRUE(rows.can_begin(kRowsNeed, kT0));
    EXPECT_EQ(rows.retry_after_ms(kRowsNeed, kT0), 0);
}

// §16 test 52: rows_per_s = 100, a full bucket, 500 rows land; the next block is refused with a
// retry-after of 4.01 s and may begin once the clock has moved 4.01 s.
TEST(RateBucketTest, Spec52DebtIsWaitedOutToTheMillisecond) {
    RateBucket rows(100, kT0);
    ASSERT_TRUE(rows.can_begin(kRowsNeed, kT0));
    rows.charge(500, kT0);
    EXPECT_DOUBLE_EQ(rows.level(kT0), -400);
    EXPECT_FALSE(rows.can_begin(kRowsNeed, kT0));
    EXPECT_EQ(rows.retry_after_ms(kRowsNeed, kT0), 4010);
    EXPECT_FALSE(rows.can_begin(kRowsNeed, kT0 + 4009 * kNsPerMs));
    EXPECT_FALSE(rows.can_begin(kRowsNeed, kT0 + 4010 * kNsPerMs - 1));
    EXPECT_TRUE(rows.can_begin(kRowsNeed, kT0 + 4010 * kNsPerMs));
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 4010 * kNsPerMs), 1);
    // Asked again part of the way through, the wait is what is left of it.
    EXPECT_EQ(rows.retry_after_ms(kRowsNeed, kT0 + 1000 * kNsPerMs), 3010);
    EXPECT_EQ(rows.retry_after_ms(kRowsNeed, kT0 + 4009 * kNsPerMs), 1);
    EXPECT_EQ(rows.retry_after_ms(kRowsNeed, kT0 + 4010 * kNsPerMs), 0);
}

TEST(RateBucketTest, ALargeBlockFromAFullBucketGoesThroughAndRowsAreCountedWhole) {
    RateBucket rows(100, kT0);
    rows.charge(99.5, kT0);  // half a row left: not a row's worth
    EXPECT_FALSE(rows.can_begin(kRowsNeed, kT0));
    EXPECT_EQ(rows.retry_after_ms(kRowsNeed, kT0), 5);  // 0.5 rows at 100/s
    EXPECT_TRUE(rows.can_begin(kRowsNeed, kT0 + 5 * kNsPerMs));
    EXPECT_FALSE(rows.can_begin(kRowsNeed, kT0 + 5 * kNsPerMs - 1));
}

TEST(RateBucketTest, BytesBucketLetsABlockBeginWhileAnyBytesAreLeft) {
    RateBucket bytes(1000, kT0);
    bytes.charge(999.5, kT0);  // half a byte left: enough for bytes, not for a row
    EXPECT_TRUE(bytes.can_begin(kBytesNeed, kT0));
    EXPECT_FALSE(bytes.can_begin(kRowsNeed, kT0));
    bytes.charge(0.5, kT0);  // exactly empty: no bytes left
    EXPECT_FALSE(bytes.can_begin(kBytesNeed, kT0));
    // At 1000 B/s, 1 ms brings a whole byte: the least whole ms after which some bytes are held.
    EXPECT_EQ(bytes.retry_after_ms(kBytesNeed, kT0), 1);
    EXPECT_TRUE(bytes.can_begin(kBytesNeed, kT0 + 1));  // a nanosecond's microbyte is enough
}

TEST(RateBucketTest, BytesDebtWaitsUntilTheLevelIsAboveZero) {
    RateBucket bytes(1000, kT0);
    bytes.charge(1500, kT0);  // -500 bytes
    EXPECT_FALSE(bytes.can_begin(kBytesNeed, kT0));
    // Zero at 500 ms exactly, which holds no bytes; above zero just after.
    EXPECT_FALSE(bytes.can_begin(kBytesNeed, kT0 + 500 * kNsPerMs));
    EXPECT_TRUE(bytes.can_begin(kBytesNeed, kT0 + 501 * kNsPerMs));
    EXPECT_EQ(bytes.retry_after_ms(kBytesNeed, kT0), 501);
}

TEST(RateBucketTest, RefillIsCappedAtOneSecondsWorth) {
    RateBucket rows(100, kT0);
    rows.charge(30, kT0);
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 100 * kNsPerMs), 80);
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 300 * kNsPerMs), 100);
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 3600'000 * kNsPerMs), 100);  // an idle hour saves nothing
    // After a long idle a burst still gets only one second's worth before debt.
    rows.charge(100, kT0 + 3600'000 * kNsPerMs);
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 3600'000 * kNsPerMs), 0);
    EXPECT_FALSE(rows.can_begin(kRowsNeed, kT0 + 3600'000 * kNsPerMs));
}

TEST(RateBucketTest, ChargesAccumulate) {
    RateBucket rows(100, kT0);
    rows.charge(60, kT0);
    rows.charge(60, kT0 + 100 * kNsPerMs);  // 40 + 10 refilled - 60 = -10
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 100 * kNsPerMs), -10);
    EXPECT_EQ(rows.retry_after_ms(kRowsNeed, kT0 + 100 * kNsPerMs), 110);
}

TEST(RateBucketTest, SetRateClipsTheLevelToTheNewCapacity) {
    RateBucket rows(100, kT0);
    rows.set_rate(10, kT0);
    EXPECT_DOUBLE_EQ(rows.per_s(), 10);
    EXPECT_DOUBLE_EQ(rows.level(kT0), 10);
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 5000 * kNsPerMs), 10);
    // Raising the rate keeps the level; it does not fill the bucket.
    rows.charge(5, kT0);
    rows.set_rate(1000, kT0);
    EXPECT_DOUBLE_EQ(rows.level(kT0), 5);
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 10 * kNsPerMs), 15);  // now refilling at 1000/s
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 5000 * kNsPerMs), 1000);
}

TEST(RateBucketTest, SetRateKeepsADebt) {
    RateBucket rows(100, kT0);
    rows.charge(500, kT0);                      // -400
    rows.set_rate(200, kT0 + 1000 * kNsPerMs);  // -300 refilled at the old rate so far
    EXPECT_DOUBLE_EQ(rows.level(kT0 + 1000 * kNsPerMs), -300);
    // 301 rows at 200/s: 1505 ms.
    EXPECT_EQ(rows.retry_after_ms(kRowsNeed, kT0 + 1000 * kNsPerMs), 1505);
}

TEST(RateBucketTest, RetryAfterIsTheLeastWaitForAnAwkwardRate) {
    // 3 rows/s: a row every 333.33 ms, never on a whole ms, so the rounding must be up.
    RateBucket rows(3, kT0);
    rows.charge(5, kT0);  // -2: three rows to a whole one, 1000 ms
    const int64_t wait_ms = rows.retry_after_ms(kRowsNeed, kT0);
    EXPECT_EQ(wait_ms, 1000);
    EXPECT_TRUE(rows.can_begin(kRowsNeed, kT0 + wait_ms * kNsPerMs));
    EXPECT_FALSE(rows.can_begin(kRowsNeed, kT0 + (wait_ms - 1) * kNsPerMs));
    rows.charge(0.5, kT0 + wait_ms * kNsPerMs);  // 0.5 left: 0.5 row at 3/s is 166.67 ms
    const int64_t t1 = kT0 + wait_ms * kNsPerMs;
    EXPECT_EQ(rows.retry_after_ms(kRowsNeed, t1), 167);
    EXPECT_TRUE(rows.can_begin(kRowsNeed, t1 + 167 * kNsPerMs));
    EXPECT_FALSE(rows.can_begin(kRowsNeed, t1 + 166 * kNsPerMs));
}

}  // namespace
}  // namespace fenec::engine::rate_test
