// test/shard/cow_map_test.cc: CowMap (shard/cow_map.h), the directory's ordered map whose copies
// share their chunks: the same answers as a std::map under a random mix of changes across many
// chunk splits (chunks emptied: the last case), and a copy never changed by a change of the map it
// was copied from, nor that map by a change of the copy.
#include "shard/cow_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace fenec::shard::cow_map_test {
namespace {

using Model = std::map<std::string, int, std::less<>>;

void expect_same(const CowMap<int>& m, const Model& model) {
    ASSERT_EQ(m.size(), model.size());
    ASSERT_EQ(m.empty(), model.empty());
    auto a = m.begin();
    for (const auto& [k, v] : model) {
        ASSERT_NE(a, m.end());
        EXPECT_EQ(a->first, k);
        EXPECT_EQ(a->second, v);
        ++a;
    }
    EXPECT_EQ(a, m.end());
}

std::string key(int i) { return "k" + std::to_string(i); }

TEST(CowMap, AnswersAsAStdMapUnderRandomChanges) {
    std::mt19937 rng(7);
    CowMap<int> m;
    Model model;
    std::vector<CowMap<int>> copies;
    std::vector<Model> copied;
    for (int step = 0; step < 40'000; ++step) {
        const int k = static_cast<int>(rng() % 3000);
        switch (rng() % 7) {
            case 0:
            case 1:
                m[key(k)] = step;
                model[key(k)] = step;
                break;
            case 2: {
                auto [it, made] = m.emplace(key(k), -step);
                auto [mit, mmade] = model.emplace(key(k), -step);
                EXPECT_EQ(made, mmade);
                EXPECT_EQ(it->second, mit->second);
                break;
            }
            case 3:
                EXPECT_EQ(m.erase(key(k)), model.erase(key(k)));
                break;
            case 4: {
                auto it = m.find(key(k));  // the mutable find
                auto mit = model.find(key(k));
                ASSERT_EQ(it == m.end(), mit == model.end());
                if (it != m.end()) {
                    EXPECT_EQ(it->first, key(k));
                    it->second += 1;
                    mit->second += 1;
                }
                break;
            }
            case 5: {
                const CowMap<int>& c = m;
                EXPECT_EQ(c.contains(key(k)), model.contains(key(k)));
                EXPECT_EQ(c.count(key(k)), model.count(key(k)));
                if (model.contains(key(k))) {
                    EXPECT_EQ(c.at(key(k)), model.at(key(k)));
                }
                break;
            }
            case 6:
                if (rng() % 50 == 0) {  // a snapshot, kept and checked at the end
                    copies.push_back(m);
                    copied.push_back(model);
                }
                break;
        }
    }
    expect_same(m, model);
    EXPECT_GT(model.size(), 2 * CowMap<int>::chunk_max) << "the run split chunks";
    for (size_t i = 0; i < copies.size(); ++i) expect_same(copies[i], copied[i]);
    // erase_if, as std::erase_if
    const size_t odd = erase_if(m, [](const auto& kv) { return kv.second % 2 != 0; });
    EXPECT_EQ(odd, std::erase_if(model, [](const auto& kv) { return kv.second % 2 != 0; }));
    expect_same(m, model);
    EXPECT_THROW((void)m.at("absent"), std::out_of_range);
}

TEST(CowMap, ACopyAndItsSourceChangeApart) {
    CowMap<int> a;
    for (int i = 0; i < 2000; ++i) a[key(i)] = i;
    const CowMap<int> before = a;
    CowMap<int> b = a;
    b[key(5)] = -5;
    b.erase(key(1500));
    b["zzz"] = 1;
    b.find(key(700))->second = -700;
    for (auto& [k, v] : b) {
        if (k == key(9)) v = -9;
    }
    EXPECT_TRUE(a == before);
    EXPECT_EQ(a.at(key(5)), 5);
    EXPECT_EQ(a.at(key(700)), 700);
    EXPECT_EQ(a.at(key(9)), 9);
    EXPECT_TRUE(a.contains(key(1500)));
    EXPECT_FALSE(a.contains("zzz"));
    EXPECT_EQ(b.at(key(5)), -5);
    EXPECT_EQ(b.at(key(700)), -700);
    EXPECT_EQ(b.at(key(9)), -9);
    EXPECT_FALSE(b.contains(key(1500)));
    // And the other way round.
    a[key(6)] = -6;
    EXPECT_EQ(b.at(key(6)), 6);
    EXPECT_EQ(before.at(key(6)), 6);
}

// A mutable iterator stepping from one chunk into the next writes into this map's own copy of
// it, never into a chunk a copy shares.
TEST(CowMap, AMutableIteratorAcrossChunksLeavesACopyAlone) {
    CowMap<int> a;
    for (int i = 0; i < 2000; ++i) a[key(i)] = i;
    const CowMap<int> before = a;
    auto it = a.find(before.begin()->first);
    for (int n = 0; n < 1500; ++n, ++it) it->second = -1;
    size_t written = 0;
    for (const auto& [k, v] : std::as_const(a)) written += v == -1;
    EXPECT_EQ(written, 1500u);
    for (const auto& [k, v] : before) EXPECT_GE(v, 0) << k;
    CowMap<int> moved = std::move(a);
    EXPECT_EQ(moved.size(), 2000u);
    EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): a moved-from map is empty
    EXPECT_TRUE(a.empty());
    CowMap<int>& self = moved;
    moved = std::move(self);  // NOLINT: a self-move leaves it as it was
    EXPECT_EQ(moved.size(), 2000u);
    EXPECT_EQ(moved.begin()->first, before.begin()->first);
}

// The rest of the interface: the first of two equal keys kept, insert_or_assign, erase by
// iterator, the mutable at.
TEST(CowMap, TheRestOfTheInterfaceAsStdMaps) {
    const CowMap<int> listed{{"b", 1}, {"a", 2}, {"b", 3}};
    EXPECT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed.at("b"), 1);
    CowMap<int> m = listed;
    EXPECT_FALSE(m.insert_or_assign("a", 20).second);
    EXPECT_TRUE(m.insert_or_assign("c", 30).second);
    m.at("b") = 10;
    m.erase(m.find("a"));
    EXPECT_EQ(m.size(), 2u);
    EXPECT_FALSE(m.contains("a"));
    EXPECT_EQ(m.at("b"), 10);
    EXPECT_EQ(m.at("c"), 30);
    EXPECT_EQ(listed.at("a"), 2);
    EXPECT_EQ(listed.at("b"), 1);
}

TEST(CowMap, AKeyBelowEveryOtherAndAnEmptiedMap) {
    CowMap<int> m;
    EXPECT_EQ(m.begin(), m.end());
    EXPECT_EQ(m.find("a"), m.end());
    auto padded = [](int i) {
        std::string k = std::to_string(i);
        return std::string(6 - k.size(), '0') + k;
    };
    for (int i = 1000; i >= 0; --i) m[padded(i)] = i;  // each below every key before it
    Model model;
    for (int i = 0; i <= 1000; ++i) model[padded(i)] = i;
    expect_same(m, model);
    for (int i = 0; i <= 1000; ++i) EXPECT_EQ(m.erase(padded(i)), 1u);
    EXPECT_TRUE(m.empty());
    EXPECT_EQ(m.begin(), m.end());
    m["again"] = 1;
    EXPECT_EQ(m.size(), 1u);
    EXPECT_EQ(m.begin()->first, "again");
}

// each_unshared names every key whose entry differs between a map and a copy changed since, each
// once with both sides' entries, in key order, and walks only the chunks the changes touched.
TEST(CowMap, TheDifferencesOfACopyAreInTheChunksItDoesNotShare) {
    std::mt19937 rng(11);
    CowMap<int> m;
    for (int i = 0; i < 20'000; ++i) m[key(i)] = i;
    for (int round = 0; round < 50; ++round) {
        CowMap<int> next = m;
        const int changes = 1 + static_cast<int>(rng() % 6);
        for (int c = 0; c < changes; ++c) {
            const int k = static_cast<int>(rng() % 21'000);
            switch (rng() % 4) {
                case 0:
                    next[key(k)] = -k;
                    break;
                case 1:
                    (void)next.erase(key(k));
                    break;
                case 2:
                    (void)next.find(key(k));
                    break;  // reached mutably, not changed
                default:
                    next[key(k)] += 0;  // written, the same value
            }
        }
        // The true differences: key → (before, after), -1 for absent; read through const only
        // (a mutable find makes a chunk the map's own).
        const CowMap<int>& after = next;
        std::map<std::string, std::pair<int, int>, std::less<>> diff;
        for (const auto& [k, v] : std::as_const(m)) {
            if (!after.contains(k)) {
                diff[k] = {v, -1};
            } else if (after.at(k) != v) {
                diff[k] = {v, after.at(k)};
            }
        }
        for (const auto& [k, v] : after) {
            if (!std::as_const(m).contains(k)) diff[k] = {-1, v};
        }
        std::string last;
        size_t seen = 0;
        std::map<std::string, std::pair<int, int>, std::less<>> found;
        each_unshared(m, after, [&](const std::string& k, const int* b, const int* a) {
            EXPECT_LT(last, k) << "in key order, each once";
            last = k;
            ++seen;
            EXPECT_EQ(b != nullptr, std::as_const(m).contains(k));
            EXPECT_EQ(a != nullptr, after.contains(k));
            if (!b || !a || *b != *a) found[k] = {b ? *b : -1, a ? *a : -1};
        });
        EXPECT_EQ(found, diff) << "round " << round;
        EXPECT_LE(seen, 2 * 512u * (changes + 1)) << "only the chunks the changes touched";
        m = std::move(next);
    }
}

}  // namespace
}  // namespace fenec::shard::cow_map_test
