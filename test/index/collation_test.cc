// test/index/collation_test.cc: proves the text rules of fenecql.md §6.3-§6.4 on fixture P
// (§16.3): the exact orders of #59-#68 by compare_text and by sort_key, the equalities of
// #69-#71, the ranges of #72-#73, the groups of #74-#75, min/max of #76 and `~` of #77-#78; the
// Turkish and Unicode folds; that a collation never equates different bytes; and, over random
// texts of a mixed alphabet, that sort_key's memcmp order is compare_text's order, that
// compare_text is antisymmetric and zero exactly when equal_text holds, on any thread.
#include "index/collation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace fenec::index::collation_test {
namespace {

using engine::Collation;

// Fixture P's nine texts; the id of people[i] is i + 1.
const std::vector<std::string> kPeople = {"Ilkay", "ılık",  "İpek",  "irem", "Çınar",
                                          "can",   "Yusuf", "ılkay", "ILKAY"};

const TextRule kName = field_rule(Collation::bytes, false);
const TextRule kTname = field_rule(Collation::tr, false);
const TextRule kFname = field_rule(Collation::bytes, true);
const TextRule kTfname = field_rule(Collation::tr, true);

// `order <field> [collate c]`: the order key's collation over the field's own fold.
TextRule order_collate(TextRule field, Collation c) {
    field.collation = c;
    return field;
}

std::vector<int> ids() {
    std::vector<int> out(kPeople.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int>(i) + 1;
    return out;
}

std::vector<std::string> names(const std::vector<int>& order) {
    std::vector<std::string> out;
    for (int id : order) out.push_back(kPeople[id - 1]);
    return out;
}

// The rows of `order f`: by compare_text, ties by ascending _id (stable over id order).
std::vector<std::string> ordered(const TextRule& rule, bool desc = false) {
    std::vector<int> order = ids();
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        const int c = compare_text(kPeople[a - 1], kPeople[b - 1], rule);
        return desc ? c > 0 : c < 0;
    });
    return names(order);
}

// The same order, as a sorted index reads it: by memcmp of sort keys.
std::vector<std::string> ordered_by_key(const TextRule& rule) {
    std::vector<int> order = ids();
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return sort_key(kPeople[a - 1], rule) < sort_key(kPeople[b - 1], rule);
    });
    return names(order);
}

void expect_order(const TextRule& rule, const std::vector<std::string>& expected) {
    EXPECT_EQ(ordered(rule), expected);
    EXPECT_EQ(ordered_by_key(rule), expected);
}

TEST(CollationTest, Spec59BytesOrder) {
    expect_order(kName,
                 {"ILKAY", "Ilkay", "Yusuf", "can", "irem", "Çınar", "İpek", "ılkay", "ılık"});
}

TEST(CollationTest, Spec60RootOrder) {
    expect_order(order_collate(kName, Collation::und),
                 {"can", "Çınar", "Ilkay", "ILKAY", "İpek", "irem", "ılık", "ılkay", "Yusuf"});
}

const std::vector<std::string> kTurkishOrder = {"can",   "Çınar", "ılık", "ılkay", "Ilkay",
                                                "ILKAY", "İpek",  "irem", "Yusuf"};

TEST(CollationTest, Spec61And62TurkishOrder) {
    expect_order(order_collate(kName, Collation::tr), kTurkishOrder);
    expect_order(kTname, kTurkishOrder);
}

TEST(CollationTest, Spec63TurkishDescIsExactlyReversed) {
    std::vector<std::string> reversed(kTurkishOrder.rbegin(), kTurkishOrder.rend());
    EXPECT_EQ(ordered(kTname, /*desc=*/true), reversed);
}

TEST(CollationTest, Spec64NocaseBytesOrderTiesById) {
    expect_order(kFname,
                 {"can", "Ilkay", "ILKAY", "irem", "İpek", "Yusuf", "Çınar", "ılkay", "ılık"});
}

TEST(CollationTest, Spec65NocaseUnicodeFoldCollatedTurkish) {
    expect_order(order_collate(kFname, Collation::tr),
                 {"can", "Çınar", "ılık", "ılkay", "Ilkay", "ILKAY", "İpek", "irem", "Yusuf"});
}

TEST(CollationTest, Spec66TurkishNocaseTiesById) {
    expect_order(kTfname,
                 {"can", "Çınar", "ılık", "Ilkay", "ılkay", "ILKAY", "İpek", "irem", "Yusuf"});
}

TEST(CollationTest, Spec67TurkishNocaseDescTiesStillAscendingId) {
    EXPECT_EQ(ordered(kTfname, /*desc=*/true),
              (std::vector<std::string>{"Yusuf", "irem", "İpek", "Ilkay", "ılkay", "ILKAY", "ılık",
                                        "Çınar", "can"}));
}

TEST(CollationTest, Spec68TurkishFoldCollatedRoot) {
    expect_order(order_collate(kTfname, Collation::und),
                 {"can", "Çınar", "İpek", "irem", "ılık", "Ilkay", "ılkay", "ILKAY", "Yusuf"});
}

std::vector<int> ids_where(const std::function<bool(const std::string&)>& keep) {
    std::vector<int> out;
    for (int id : ids()) {
        if (keep(kPeople[id - 1])) out.push_back(id);
    }
    return out;
}

TEST(CollationTest, Spec69To71Equality) {
    auto equal_to = [](std::string_view literal, const TextRule& rule) {
        return ids_where([&](const std::string& s) { return equal_text(s, literal, rule); });
    };
    EXPECT_EQ(equal_to("ILKAY", kTfname), (std::vector<int>{1, 8, 9}));
    EXPECT_EQ(equal_to("ILKAY", kFname), (std::vector<int>{1, 9}));
    EXPECT_EQ(equal_to("ilkay", kTname), std::vector<int>{});  // a collation never equates
    for (const std::string& s : kPeople) {
        EXPECT_EQ(compare_text(s, "ilkay", kTname) == 0, false) << s;
    }
}

TEST(CollationTest, Spec72And73Ranges) {
    auto rows = [](const TextRule& rule, std::string_view literal, bool or_equal) {
        std::vector<std::string> out;
        for (const std::string& s : ordered(rule)) {
            const int c = compare_text(s, literal, rule);
            if (c > 0 || (or_equal && c == 0)) out.push_back(s);
        }
        return out;
    };
    EXPECT_EQ(rows(kTname, "Ilkay", false),
              (std::vector<std::string>{"ILKAY", "İpek", "irem", "Yusuf"}));
    EXPECT_EQ(rows(kTfname, "ILKAY", true),
              (std::vector<std::string>{"Ilkay", "ılkay", "ILKAY", "İpek", "irem", "Yusuf"}));
}

// `group f`: groups in the field's order, each shown by its lowest-id text, with its count.
std::vector<std::pair<std::string, int>> groups(const TextRule& rule) {
    std::vector<std::pair<std::string, int>> out;
    for (const std::string& s : ordered(rule)) {
        if (!out.empty() && equal_text(out.back().first, s, rule)) {
            ++out.back().second;
        } else {
            out.emplace_back(s, 1);
        }
    }
    return out;
}

TEST(CollationTest, Spec74And75Groups) {
    using G = std::vector<std::pair<std::string, int>>;
    EXPECT_EQ(groups(kTfname), (G{{"can", 1},
                                  {"Çınar", 1},
                                  {"ılık", 1},
                                  {"Ilkay", 3},
                                  {"İpek", 1},
                                  {"irem", 1},
                                  {"Yusuf", 1}}));
    EXPECT_EQ(groups(kFname), (G{{"can", 1},
                                 {"Ilkay", 2},
                                 {"irem", 1},
                                 {"İpek", 1},
                                 {"Yusuf", 1},
                                 {"Çınar", 1},
                                 {"ılkay", 1},
                                 {"ılık", 1}}));
}

// min/max keep the lowest id among equals: scan in id order, replace only on strict order.
std::string min_of(const std::vector<std::string>& texts, const TextRule& rule, int want) {
    std::string best = texts.front();
    for (const std::string& s : texts) {
        if (compare_text(s, best, rule) == want) best = s;
    }
    return best;
}

TEST(CollationTest, Spec76MinMax) {
    const std::vector<std::string> rows = {"Ilkay", "ılkay", "ILKAY"};  // ids 1, 8, 9
    EXPECT_EQ(min_of(rows, kTname, -1), "ılkay");
    EXPECT_EQ(min_of(rows, kTname, 1), "ILKAY");
    EXPECT_EQ(min_of(rows, kTfname, -1), "Ilkay");
    EXPECT_EQ(min_of(rows, kTfname, 1), "Ilkay");
}

TEST(CollationTest, Spec77And78Contains) {
    auto containing = [](std::string_view needle, bool turkish) {
        return ids_where([&](const std::string& s) { return contains_folded(s, needle, turkish); });
    };
    EXPECT_EQ(containing("IL", true), (std::vector<int>{1, 2, 8, 9}));
    EXPECT_EQ(containing("IL", false), (std::vector<int>{1, 9}));
    EXPECT_EQ(containing("", false).size(), kPeople.size());
    EXPECT_TRUE(contains_folded("Straße", "SS", false));
    EXPECT_FALSE(contains_folded("abc", "abcd", false));
}

TEST(CollationTest, FoldsOfFixtureP) {
    const std::vector<std::string> unicode = {"ilkay", "ılık",  "i\u0307pek", "irem", "çınar",
                                              "can",   "yusuf", "ılkay",      "ilkay"};
    const std::vector<std::string> turkish = {"ılkay", "ılık",  "ipek",  "irem", "çınar",
                                              "can",   "yusuf", "ılkay", "ılkay"};
    for (size_t i = 0; i < kPeople.size(); ++i) {
        EXPECT_EQ(fold(kPeople[i], false), unicode[i]) << kPeople[i];
        EXPECT_EQ(fold(kPeople[i], true), turkish[i]) << kPeople[i];
    }
    EXPECT_EQ(fold("ILKAY", true), "ılkay");
    EXPECT_EQ(fold("İ", false), "i\u0307");
    EXPECT_EQ(fold("ß", false), "ss");
    EXPECT_EQ(fold("ı", false), "ı");
    EXPECT_EQ(fold("", true), "");
}

TEST(CollationTest, CanonicalEquivalentsStayApart) {
    const std::string composed = "\u00e9";     // é
    const std::string decomposed = "e\u0301";  // e + combining acute
    const TextRule root = field_rule(Collation::und, false);
    EXPECT_FALSE(equal_text(composed, decomposed, root));
    EXPECT_EQ(compare_text(decomposed, composed, root), -1);  // ICU ties, bytes decide
    EXPECT_EQ(compare_text(composed, decomposed, root), 1);
    // Nothing sorts between the two: "f" and "e" are on either side of both.
    EXPECT_EQ(compare_text("e", decomposed, root), -1);
    EXPECT_EQ(compare_text(composed, "f", root), -1);
}

// Random texts over an alphabet meant to provoke the rules: cases, Turkish i's, expanding folds,
// accents precomposed and combining, a contraction-prone pair, digits, punctuation, NUL.
std::string random_text(std::mt19937& rng) {
    static const std::vector<std::string> alphabet = {"a",
                                                      "A",
                                                      "b",
                                                      "B",
                                                      "i",
                                                      "I",
                                                      "ı",
                                                      "İ",
                                                      "s",
                                                      "S",
                                                      "ss",
                                                      "ß",
                                                      "ẞ",
                                                      "ç",
                                                      "Ç",
                                                      "c",
                                                      "e",
                                                      "é",
                                                      "e\u0301",
                                                      "\u0301",
                                                      "σ",
                                                      "ς",
                                                      "Σ",
                                                      "ch",
                                                      "1",
                                                      "9",
                                                      " ",
                                                      "-",
                                                      std::string(1, '\0'),
                                                      "\U0001F600",
                                                      "ǅ",
                                                      "ﬀ"};
    std::uniform_int_distribution<size_t> length(0, 6);
    std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
    std::string out;
    for (size_t n = length(rng); n > 0; --n) out += alphabet[pick(rng)];
    return out;
}

const std::vector<TextRule> kAllRules = {
    field_rule(Collation::bytes, false),     field_rule(Collation::und, false),
    field_rule(Collation::tr, false),        field_rule(Collation::bytes, true),
    field_rule(Collation::und, true),        field_rule(Collation::tr, true),
    {Collation::tr, true, Collation::bytes}, {Collation::und, true, Collation::tr}};

int memcmp_sign(const std::string& a, const std::string& b) {
    const int c = a.compare(b);
    return (c > 0) - (c < 0);
}

TEST(CollationTest, SortKeyOrderIsCompareOrderOverRandomTexts) {
    std::mt19937 rng(20260919);
    std::vector<std::string> texts;
    for (int i = 0; i < 300; ++i) texts.push_back(random_text(rng));
    for (const TextRule& rule : kAllRules) {
        std::vector<std::string> keys;
        for (const std::string& t : texts) keys.push_back(sort_key(t, rule));
        for (size_t i = 0; i < texts.size(); ++i) {
            for (size_t j = 0; j < texts.size(); ++j) {
                const int c = compare_text(texts[i], texts[j], rule);
                ASSERT_EQ(memcmp_sign(keys[i], keys[j]), c)
                    << "rule " << int(rule.collation) << rule.nocase << int(rule.fold) << ": '"
                    << texts[i] << "' vs '" << texts[j] << "'";
                ASSERT_EQ(compare_text(texts[j], texts[i], rule), -c);
                ASSERT_EQ(c == 0, equal_text(texts[i], texts[j], rule));
            }
        }
    }
}

TEST(CollationTest, IllFormedUtf8NeitherCrashesNorBreaksTheOrder) {
    const std::vector<std::string> texts = {"\xff", "a\xc3",        "\xc3\x28",     "\xed\xa0\x80",
                                            "a",    "\xef\xbf\xbd", "\xf0\x9f\x98", "I\x80"};
    for (const TextRule& rule : kAllRules) {
        for (const std::string& a : texts) {
            for (const std::string& b : texts) {
                const int c = compare_text(a, b, rule);
                EXPECT_EQ(memcmp_sign(sort_key(a, rule), sort_key(b, rule)), c);
                EXPECT_EQ(c == 0, a == b || (rule.nocase && equal_text(a, b, rule)));
            }
        }
    }
}

// A thread reuses its fold, UTF-16 and key buffers from one key to the next (index/collation.cc):
// a text's key is the same whatever was keyed before it on the thread, longer or shorter, past
// the size at which the buffers are given back or not. The reference keys are each taken on a
// fresh thread, whose scratch is empty.
TEST(CollationTest, SortKeyDoesNotDependOnTheKeysBeforeIt) {
    std::mt19937 rng(20261204);
    std::vector<std::string> texts;
    for (int i = 0; i < 100; ++i) texts.push_back(random_text(rng));
    std::string long_text;
    while (long_text.size() < 100 * 1024) long_text += "İstanbul Iğdır ß ";
    texts.insert(texts.begin() + 50, long_text);
    for (const TextRule& rule : kAllRules) {
        std::vector<std::string> fresh(texts.size());
        for (size_t i = 0; i < texts.size(); ++i) {
            std::thread([&] { fresh[i] = sort_key(texts[i], rule); }).join();
        }
        for (size_t i = 0; i < texts.size(); ++i) {
            ASSERT_EQ(sort_key(texts[i], rule), fresh[i]) << "text " << i << ", forwards";
        }
        for (size_t i = texts.size(); i-- > 0;) {
            ASSERT_EQ(sort_key(texts[i], rule), fresh[i]) << "text " << i << ", backwards";
        }
    }
}

// Collators are per thread: four threads sorting at once agree with one thread alone.
TEST(CollationTest, ThreadsAgree) {
    std::mt19937 rng(7);
    std::vector<std::string> texts;
    for (int i = 0; i < 400; ++i) texts.push_back(random_text(rng));
    auto sorted = [&](const TextRule& rule) {
        std::vector<std::string> out = texts;
        std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
            return compare_text(a, b, rule) < 0;
        });
        return out;
    };
    const std::vector<std::string> expected = sorted(kTfname);
    std::vector<std::vector<std::string>> results(4);
    std::vector<std::thread> threads;
    for (auto& r : results) threads.emplace_back([&r, &sorted] { r = sorted(kTfname); });
    for (auto& t : threads) t.join();
    for (const auto& r : results) EXPECT_EQ(r, expected);
}

}  // namespace
}  // namespace fenec::index::collation_test
