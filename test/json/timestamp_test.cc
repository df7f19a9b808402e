// test/json/timestamp_test.cc: proves ISO text <-> UTC ms of fenecql.md §11: the texts of fixture T
// (§16.4 #81-#88) read as the instants the answers show and are written back as those answers;
// every form §11 allows parses and every form it refuses does not; dates exist in the proleptic
// Gregorian calendar (leap years included); the range is exactly years 0000 to 9999; and format
// then parse is the identity over random instants in range, before 1970 and in year 0000 too.
#include "json/timestamp.h"

#include <gtest/gtest.h>

#include <random>

namespace fenec::json::timestamp_test {
namespace {

std::string reformat(std::string_view text) {
    const auto ms = parse_timestamp(text);
    return ms ? format_timestamp(*ms) : "<refused>";
}

TEST(TimestampTest, Spec81FixtureTexts) {
    EXPECT_EQ(reformat("2027-04-23T08:15:30Z"), "2027-04-23T08:15:30Z");
    EXPECT_EQ(reformat("2027-04-23 11:15:30+03:00"), "2027-04-23T08:15:30Z");
    EXPECT_EQ(format_timestamp(0), "1970-01-01T00:00:00Z");
    EXPECT_EQ(reformat("2028-02-29"), "2028-02-29T00:00:00Z");
    EXPECT_EQ(format_timestamp(1767225599999), "2025-12-31T23:59:59.999Z");
    EXPECT_EQ(reformat("2026-01-01T00:00:00.5Z"), "2026-01-01T00:00:00.500Z");
    EXPECT_EQ(reformat("2026-01-01T00:00:00.123456z"), "2026-01-01T00:00:00.123Z");
}

TEST(TimestampTest, Spec82To86InstantsOrderAndEquality) {
    const int64_t a = *parse_timestamp("2027-04-23T08:15:30Z");
    EXPECT_EQ(a, 1808468130000);  // #85: t = 1808468130000 finds a and b
    EXPECT_EQ(parse_timestamp("2027-04-23 11:15:30+03:00"), a);
    const int64_t e = 1767225599999;
    const int64_t g = *parse_timestamp("2026-01-01T00:00:00.123456z");
    const int64_t f = *parse_timestamp("2026-01-01T00:00:00.5Z");
    const int64_t d = *parse_timestamp("2028-02-29");
    EXPECT_LT(0, e);  // #82: c, e, g, f, a, d
    EXPECT_LT(e, g);
    EXPECT_LT(g, f);
    EXPECT_LT(f, a);
    EXPECT_LT(a, d);
    const int64_t bound = *parse_timestamp("2026-01-01T00:00:00.2Z");  // #84
    EXPECT_LT(g, bound);
    EXPECT_GE(f, bound);
    EXPECT_EQ(format_timestamp(d), "2028-02-29T00:00:00Z");  // #86 max(t)
}

TEST(TimestampTest, Spec87And88Refused) {
    for (const char* bad :
         {"2025", "2026-02-30", "2026-09-19T24:00:00Z", "yesterday", "2026/09/19"}) {
        EXPECT_EQ(parse_timestamp(bad), std::nullopt) << bad;
    }
    EXPECT_FALSE(timestamp_in_range(-62167219200001));  // #88: one ms before year 0000
    EXPECT_TRUE(timestamp_in_range(-62167219200000));
    EXPECT_TRUE(timestamp_in_range(253402300799999));
    EXPECT_FALSE(timestamp_in_range(253402300800000));
}

TEST(TimestampTest, EveryAllowedForm) {
    const int64_t base = *parse_timestamp("2026-09-19");
    const int64_t t = base + ((14 * 60 + 5) * 60 + 9) * 1000;
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05"), t - 9000);
    EXPECT_EQ(parse_timestamp("2026-09-19t14:05:09"), t);
    EXPECT_EQ(parse_timestamp("2026-09-19 14:05:09"), t);
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05:09Z"), t);
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05:09.1"), t + 100);
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05:09.12"), t + 120);
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05:09.999999999Z"), t + 999);  // cut, not rounded
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05:09+02:30"), t - 150 * 60000);
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05:09+0230"), t - 150 * 60000);
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05:09-02"), t + 120 * 60000);
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05+02"), t - 9000 - 120 * 60000);
    EXPECT_EQ(parse_timestamp("2026-09-19T14:05:09.5-00:00"), t + 500);
    EXPECT_EQ(parse_timestamp("2026-09-19T23:59:59.999+23:59"),
              base + 86399999 - (23 * 60 + 59) * 60000);
}

TEST(TimestampTest, EveryOtherFormRefused) {
    for (const char* bad : {"",
                            "2026-9-19",
                            "26-09-19",
                            "2026-09-19T",
                            "2026-09-19T14",
                            "2026-09-19T14:5",
                            "2026-09-19T14:05:9",
                            "2026-09-19T14:05:09.",
                            "2026-09-19T14:05:09.1234567890",
                            "2026-09-19T14:05.5",
                            "2026-09-19Z",
                            "2026-09-19 ",
                            "2026-09-19  14:05",
                            "2026-09-19_14:05",
                            "2026-09-19T14:05:09ZZ",
                            "2026-09-19T14:05:09 Z",
                            "2026-09-19T14:05:09+2",
                            "2026-09-19T14:05:09+02:3",
                            "2026-09-19T14:05:09+023",
                            "2026-09-19T14:05:09+02:300",
                            "2026-09-19T14:05:09+24:00",
                            "2026-09-19T14:05:09+02:60",
                            "2026-09-19T14:05:09UTC",
                            "2026-09-19T14:60",
                            "2026-09-19T14:05:60",
                            "2026-00-10",
                            "2026-13-10",
                            "2026-01-00",
                            "2026-01-32",
                            "2026-04-31",
                            "+2026-09-19",
                            "2026-09-19\n",
                            " 2026-09-19",
                            "２０２６-09-19",
                            "2026-09-19T14:05:09,5"}) {
        EXPECT_EQ(parse_timestamp(bad), std::nullopt) << '"' << bad << '"';
    }
}

TEST(TimestampTest, LeapYearsOfTheProlepticGregorianCalendar) {
    EXPECT_TRUE(parse_timestamp("2024-02-29"));
    EXPECT_TRUE(parse_timestamp("2000-02-29"));   // divisible by 400
    EXPECT_TRUE(parse_timestamp("0000-02-29"));   // year 0 is a leap year
    EXPECT_FALSE(parse_timestamp("1900-02-29"));  // divisible by 100
    EXPECT_FALSE(parse_timestamp("2026-02-29"));
    EXPECT_EQ(*parse_timestamp("2000-03-01") - *parse_timestamp("2000-02-28"), 2 * 86400000LL);
    EXPECT_EQ(*parse_timestamp("1900-03-01") - *parse_timestamp("1900-02-28"), 86400000LL);
}

TEST(TimestampTest, RangeIsYearsZeroTo9999) {
    EXPECT_EQ(parse_timestamp("0000-01-01"), timestamp_ms_min);
    EXPECT_EQ(parse_timestamp("9999-12-31T23:59:59.999Z"), timestamp_ms_max);
    EXPECT_EQ(parse_timestamp("0000-01-01T00:00:00+00:01"), std::nullopt);  // year -1 in UTC
    EXPECT_EQ(parse_timestamp("9999-12-31T23:59:59-00:01"), std::nullopt);  // year 10000
    EXPECT_EQ(format_timestamp(timestamp_ms_min), "0000-01-01T00:00:00Z");
    EXPECT_EQ(format_timestamp(timestamp_ms_max), "9999-12-31T23:59:59.999Z");
}

TEST(TimestampTest, BeforeTheEpoch) {
    EXPECT_EQ(format_timestamp(-1), "1969-12-31T23:59:59.999Z");
    EXPECT_EQ(format_timestamp(-86400000), "1969-12-31T00:00:00Z");
    EXPECT_EQ(format_timestamp(-86400001), "1969-12-30T23:59:59.999Z");
    EXPECT_EQ(parse_timestamp("1969-12-31T23:59:59.999Z"), -1);
    EXPECT_EQ(format_timestamp(*parse_timestamp("1600-02-29T12:00:00.010Z")),
              "1600-02-29T12:00:00.010Z");
}

TEST(TimestampTest, RoundTripsOverRandomInstants) {
    std::mt19937_64 rng(19);
    std::uniform_int_distribution<int64_t> instant(timestamp_ms_min, timestamp_ms_max);
    std::uniform_int_distribution<int64_t> near_epoch(-4'000'000'000'000, 4'000'000'000'000);
    for (int i = 0; i < 200'000; ++i) {
        int64_t ms = i % 2 ? instant(rng) : near_epoch(rng);
        if (i % 5 == 0) ms -= ms % 1000;  // whole seconds: the form without .mmm
        const std::string text = format_timestamp(ms);
        ASSERT_EQ(text.size(), ms % 1000 ? 24u : 20u) << text;
        ASSERT_EQ(parse_timestamp(text), ms) << text;
    }
}

}  // namespace
}  // namespace fenec::json::timestamp_test
