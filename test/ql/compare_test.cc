// test/ql/compare_test.cc: proves the one order of fenecql.md §6.2: the kind ranks, false before
// true, ints and floats by exact value (checked against an 80-bit long double oracle, which holds
// every int64 and every double exactly), text by the field's rule, bytes with a prefix first,
// lists and vectors element by element then shorter first, objects member by member then fewer
// first; that values of different kinds are never equal nor range-comparable; and, over random
// values of every kind, that the order is antisymmetric and transitive and that equal_values is
// exactly compare_values == 0 under every text rule.
#include "ql/compare.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

namespace fenec::ql::compare_test {
namespace {

using engine::Collation;
using engine::List;
using engine::Value;
using index::field_rule;
using index::TextRule;

const TextRule kBytes = field_rule(Collation::bytes, false);
const TextRule kTurkishNocase = field_rule(Collation::tr, true);

int cmp(const Value& a, const Value& b, const TextRule& rule = kBytes) {
    return compare_values(a, b, rule);
}

// Checks compare(a, b) == want, its mirror, and that equality agrees.
void expect_order(const Value& a, const Value& b, int want, const TextRule& rule = kBytes) {
    EXPECT_EQ(compare_values(a, b, rule), want);
    EXPECT_EQ(compare_values(b, a, rule), -want);
    EXPECT_EQ(equal_values(a, b, rule), want == 0);
    EXPECT_EQ(equal_values(b, a, rule), want == 0);
}

// expect_order, failures naming the calling line.
#define EXPECT_ORDER(...)             \
    do {                              \
        SCOPED_TRACE("EXPECT_ORDER"); \
        expect_order(__VA_ARGS__);    \
    } while (0)

TEST(CompareTest, KindRanks) {
    const std::vector<Value> ranked = {
        engine::Null{},    false,          int64_t{-5},     engine::Timestamp{-1}, "",
        engine::Bytes{""}, engine::List{}, engine::Object{}};
    for (size_t i = 0; i < ranked.size(); ++i) {
        for (size_t j = 0; j < ranked.size(); ++j) {
            const int want = i < j ? -1 : (i > j ? 1 : 0);
            EXPECT_EQ(cmp(ranked[i], ranked[j]), want) << i << " vs " << j;
            EXPECT_EQ(equal_values(ranked[i], ranked[j], kBytes), i == j);
            EXPECT_EQ(comparable_for_range(ranked[i], ranked[j]), i == j && i != 0);
        }
    }
    // The highest of a lower kind stays below the lowest of a higher one.
    EXPECT_ORDER(true, -1e300, -1);
    EXPECT_ORDER(1e300, engine::Timestamp{-62167219200000}, -1);
    EXPECT_ORDER(engine::Timestamp{253402300799999}, "", -1);
    EXPECT_ORDER("\xff\xff", engine::Bytes{""}, -1);
    EXPECT_ORDER(engine::Bytes{"\xff"}, engine::VectorF32{}, -1);
    EXPECT_ORDER(engine::List{{engine::Object{}}}, engine::Object{}, -1);
}

TEST(CompareTest, NullsAndBooleans) {
    EXPECT_ORDER(engine::Null{}, engine::Null{}, 0);
    EXPECT_ORDER(false, true, -1);
    EXPECT_ORDER(true, true, 0);
    EXPECT_FALSE(comparable_for_range(engine::Null{}, engine::Null{}));
    EXPECT_TRUE(comparable_for_range(false, true));
    EXPECT_TRUE(comparable_for_range(int64_t{1}, 2.5));  // one kind: number
    EXPECT_FALSE(comparable_for_range(int64_t{1}, engine::Timestamp{1}));
    EXPECT_TRUE(comparable_for_range(engine::VectorF32{}, engine::List{}));
}

TEST(CompareTest, IntsAndFloatsByExactValue) {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    const double two53 = 9007199254740992.0;
    const double two63 = 9223372036854775808.0;
    EXPECT_ORDER(int64_t{3}, 3.0, 0);
    EXPECT_ORDER(0.0, -0.0, 0);
    EXPECT_ORDER(int64_t{0}, -0.0, 0);
    EXPECT_ORDER(int64_t{(1LL << 53) + 1}, two53, 1);
    EXPECT_ORDER(int64_t{1LL << 53}, two53, 0);
    EXPECT_ORDER(int64_t{(1LL << 53) - 1}, two53, -1);
    EXPECT_ORDER(int64_t{kMax}, two63, -1);  // 2^63 - 1 < 2^63, though (double)kMax == 2^63
    EXPECT_ORDER(int64_t{kMin}, -two63, 0);
    EXPECT_ORDER(int64_t{kMin}, std::nextafter(-two63, -INFINITY), 1);
    EXPECT_ORDER(int64_t{kMax - 1023}, std::nextafter(two63, 0.0), 0);  // 2^63 - 1024
    EXPECT_ORDER(int64_t{kMax}, std::nextafter(two63, 0.0), 1);
    EXPECT_ORDER(int64_t{1}, 1.5, -1);
    EXPECT_ORDER(int64_t{-1}, -1.5, 1);
    EXPECT_ORDER(int64_t{-1}, -0.5, -1);
    EXPECT_ORDER(int64_t{0}, 5e-324, -1);
    EXPECT_ORDER(int64_t{0}, -5e-324, 1);
    EXPECT_ORDER(int64_t{kMax}, 1e300, -1);
    EXPECT_ORDER(int64_t{kMin}, -1e300, 1);
    EXPECT_ORDER(int64_t{kMin}, int64_t{kMax}, -1);
    EXPECT_ORDER(2.5, 2.25, 1);
}

TEST(CompareTest, IntsAndFloatsAgainstAnExactOracle) {
    static_assert(LDBL_MANT_DIG >= 64, "the oracle needs an 80-bit long double");
    std::mt19937_64 rng(11);
    auto random_int = [&]() -> int64_t {
        switch (rng() % 3) {
            case 0:
                return static_cast<int64_t>(rng());
            case 1:
                return static_cast<int64_t>(rng() % 4096) - 2048;
            default:
                return static_cast<int64_t>(rng() >> (rng() % 64)) * (rng() % 2 ? 1 : -1);
        }
    };
    auto random_double = [&](int64_t near) -> double {
        switch (rng() % 4) {
            case 0:
                return std::bit_cast<double>(rng());
            case 1:
                return static_cast<double>(near);  // rounded: often equal, often not
            case 2:
                return std::nextafter(static_cast<double>(near), rng() % 2 ? 1e300 : -1e300);
            default:
                return static_cast<double>(near) + (static_cast<double>(rng() % 8) - 4) / 4;
        }
    };
    for (int n = 0; n < 1'000'000; ++n) {
        const int64_t i = random_int();
        const double d = random_double(random_int());
        if (!std::isfinite(d)) continue;
        const long double li = static_cast<long double>(i);
        const long double ld = static_cast<long double>(d);
        const int want = li < ld ? -1 : (li > ld ? 1 : 0);
        ASSERT_EQ(compare_int_float(i, d), want) << i << " vs " << d;
        ASSERT_EQ(cmp(Value(i), Value(d)), want) << i << " vs " << d;
        ASSERT_EQ(cmp(Value(d), Value(i)), -want) << d << " vs " << i;
    }
}

TEST(CompareTest, TimestampsByTime) {
    EXPECT_ORDER(engine::Timestamp{-1}, engine::Timestamp{0}, -1);
    EXPECT_ORDER(engine::Timestamp{5}, engine::Timestamp{5}, 0);
    EXPECT_ORDER(int64_t{5}, engine::Timestamp{5}, -1);  // another kind: never equal
}

TEST(CompareTest, TextByTheRule) {
    EXPECT_ORDER("Ilkay", "ılkay", -1);  // bytes: I (0x49) before ı (0xC4 0xB1)
    EXPECT_ORDER("ılkay", "Ilkay", -1, field_rule(Collation::tr, false));
    EXPECT_ORDER("ılkay", "ILKAY", 0, kTurkishNocase);
    EXPECT_ORDER("Ilkay", "ILKAY", 0, field_rule(Collation::bytes, true));
    // Under tr, I is the capital of ı, so it sorts before i at the first level.
    EXPECT_ORDER("ilkay", "Ilkay", 1, field_rule(Collation::tr, false));
    EXPECT_ORDER("ilkay", "İlkay", -1, field_rule(Collation::tr, false));  // never equal
    EXPECT_ORDER("b", "a\xff", 1);
}

TEST(CompareTest, BytesBytewisePrefixFirst) {
    EXPECT_ORDER(engine::Bytes{"ab"}, engine::Bytes{"abc"}, -1);
    EXPECT_ORDER(engine::Bytes{std::string("\0", 1)}, engine::Bytes{"\xff"}, -1);
    EXPECT_ORDER(engine::Bytes{""}, engine::Bytes{""}, 0);
    EXPECT_ORDER(engine::Bytes{"\x7f"}, engine::Bytes{"\x80"}, -1);  // unsigned
}

TEST(CompareTest, ListsAndVectorsElementByElementThenShorter) {
    EXPECT_ORDER(List{{1, 2}}, List{{1, 3}}, -1);
    EXPECT_ORDER(List{{1, 2}}, List{{1, 2, 0}}, -1);
    EXPECT_ORDER(List{}, List{{engine::Null{}}}, -1);
    EXPECT_ORDER(List{{2}}, List{{1, 9, 9}}, 1);
    EXPECT_ORDER(List{{1, 2.0}}, List{{1.0, 2}}, 0);
    EXPECT_ORDER(List{{"x"}}, List{{1}}, 1);  // elements by kind rank
    EXPECT_ORDER(engine::VectorF32{{0.5f, 1.0f}}, List{{0.5, 1}}, 0);
    EXPECT_ORDER(engine::VectorF32{{0.5f, 1.0f}}, List{{0.5, int64_t{2}}}, -1);
    EXPECT_ORDER(engine::VectorF32{{0.1f}}, List{{0.1}}, 1);  // 0.1f is above the double 0.1
    EXPECT_ORDER(engine::VectorF16{{engine::f32_to_f16(0.5f)}}, engine::VectorF32{{0.5f}}, 0);
    EXPECT_ORDER(engine::VectorF32{{1.0f}}, engine::VectorF32{{1.0f, -1.0f}}, -1);
    EXPECT_ORDER(List{{"ILKAY", "b"}}, List{{"ılkay", "B"}}, 0, kTurkishNocase);  // [text] rule
    EXPECT_ORDER(List{{List{{"ILKAY"}}}}, List{{List{{"ılkay"}}}}, 0, kTurkishNocase);
}

engine::Object object(std::vector<std::string> keys, std::vector<Value> values) {
    return engine::Object{std::move(keys), std::move(values)};
}

TEST(CompareTest, ObjectsMemberByMemberThenFewer) {
    EXPECT_ORDER(object({"a"}, {1}), object({"a"}, {2}), -1);
    EXPECT_ORDER(object({"a"}, {9}), object({"b"}, {0}), -1);  // the key decides first
    EXPECT_ORDER(object({"a"}, {1}), object({"a", "b"}, {1, 0}), -1);
    EXPECT_ORDER(object({"b", "a"}, {2, 1}), object({"a", "b"}, {1, 2}), 0);  // unsorted given
    EXPECT_ORDER(object({"a", "c"}, {1, 0}), object({"b", "a"}, {0, 1}), 1);  // c > b
    EXPECT_ORDER(object({"a"}, {3}), object({"a"}, {3.0}), 0);
    // Text inside json compares by bytes, whatever the rule.
    EXPECT_ORDER(object({"a"}, {"ILKAY"}), object({"a"}, {"ılkay"}), -1, kTurkishNocase);
    EXPECT_ORDER(object({"a"}, {List{{"X"}}}), object({"a"}, {List{{"x"}}}), -1, kTurkishNocase);
}

// Random values of every kind, small alphabets so that equal and near-equal values meet.
Value random_value(std::mt19937_64& rng, int depth) {
    static const std::vector<std::string> texts = {"",  "a", "A",       "ILKAY", "ılkay", "Ilkay",
                                                   "b", "İ", "i\u0307", "ß",     "ss"};
    switch (rng() % (depth > 2 ? 9 : 11)) {
        case 0:
            return engine::Null{};
        case 1:
            return rng() % 2 == 0;
        case 2:
            return int64_t{static_cast<int64_t>(rng() % 7) - 3 + (rng() % 9 ? 0 : 1LL << 53)};
        case 3:
            return (static_cast<double>(rng() % 13) - 6) / 2 +
                   (rng() % 9 == 0 ? 9007199254740992.0 : 0);
        case 4:
            return engine::Timestamp{static_cast<int64_t>(rng() % 3)};
        case 5:
            return texts[rng() % texts.size()];
        case 6:
            return engine::Bytes{std::string(rng() % 3, static_cast<char>('a' + rng() % 2))};
        case 7: {
            engine::VectorF32 v;
            for (size_t n = rng() % 3; n > 0; --n) v.v.push_back(static_cast<float>(rng() % 3));
            return v;
        }
        case 8:
            return engine::VectorF16{{engine::f32_to_f16(static_cast<float>(rng() % 3))}};
        case 9: {
            engine::List l;
            for (size_t n = rng() % 3; n > 0; --n) l.items.push_back(random_value(rng, depth + 1));
            return l;
        }
        default: {
            engine::Object o;
            for (const char* key : {"k", "a", "z"}) {
                if (rng() % 2) continue;
                o.keys.push_back(key);  // often unsorted: k before a
                o.values.push_back(random_value(rng, depth + 1));
            }
            return o;
        }
    }
}

TEST(CompareTest, TotalOrderAndEqualityAgreeOverRandomValues) {
    std::mt19937_64 rng(3);
    std::vector<Value> values;
    for (int i = 0; i < 160; ++i) values.push_back(random_value(rng, 0));
    for (const TextRule& rule : {kBytes, field_rule(Collation::und, false),
                                 field_rule(Collation::und, true), kTurkishNocase}) {
        std::vector<std::vector<int>> c(values.size(), std::vector<int>(values.size()));
        for (size_t i = 0; i < values.size(); ++i) {
            for (size_t j = 0; j < values.size(); ++j) {
                c[i][j] = compare_values(values[i], values[j], rule);
                ASSERT_EQ(equal_values(values[i], values[j], rule), c[i][j] == 0) << i << ',' << j;
            }
        }
        for (size_t i = 0; i < values.size(); ++i) {
            for (size_t j = 0; j < values.size(); ++j) {
                ASSERT_EQ(c[i][j], -c[j][i]);
                for (size_t k = 0; k < values.size(); ++k) {
                    if (c[i][j] <= 0 && c[j][k] <= 0) {
                        ASSERT_LE(c[i][k], 0) << i << ',' << j << ',' << k;
                    }
                }
            }
        }
    }
}

}  // namespace
}  // namespace fenec::ql::compare_test
