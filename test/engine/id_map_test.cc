// test/engine/id_map_test.cc: proves the dense-and-sparse id map answers as an ordered map does:
// random puts, erases and lookups over dense and far-apart ids, checked against std::map, with
// iteration always in ascending id.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/id_map.h"

namespace fenec::engine::id_map_test {
namespace {

DocRef ref_of(uint64_t v) {
    return DocRef{reinterpret_cast<const std::byte*>(uintptr_t{0x1000} + v), static_cast<uint32_t>(v % 1000 + 1)};
}

TEST(IdMapTest, AnswersAsAnOrderedMap) {
    std::mt19937_64 rng(5);
    IdMap map;
    std::map<uint64_t, uint64_t> model;
    for (int op = 0; op < 200'000; ++op) {
        uint64_t id;
        switch (rng() % 4) {
            case 0: id = 1 + rng() % 5000; break;                 // dense
            case 1: id = 1 + model.size() + rng() % 8; break;     // the next ids
            case 2: id = (uint64_t{1} << 40) + rng() % 100; break;  // far away: sparse
            default: id = 1 + rng() % 200'000; break;             // holes, then growth
        }
        if (rng() % 3 == 0) {
            std::optional<DocRef> prev = map.erase(id);
            auto it = model.find(id);
            ASSERT_EQ(prev.has_value(), it != model.end()) << id;
            if (it != model.end()) {
                EXPECT_EQ(prev->data, ref_of(it->second).data);
                model.erase(it);
            }
        } else {
            const uint64_t v = rng() % 1'000'000;
            std::optional<DocRef> prev = map.put(id, ref_of(v));
            auto it = model.find(id);
            ASSERT_EQ(prev.has_value(), it != model.end()) << id;
            model[id] = v;
        }
        ASSERT_EQ(map.size(), model.size());
    }
    for (const auto& [id, v] : model) {
        const DocRef* r = map.find(id);
        ASSERT_NE(r, nullptr);
        EXPECT_EQ(r->data, ref_of(v).data);
    }
    EXPECT_EQ(map.find(3'000'000), nullptr);
    EXPECT_EQ(map.max_id(), model.rbegin()->first);
    auto it = model.begin();
    map.each_from(0, [&](uint64_t id, const DocRef& r) {
        EXPECT_NE(it, model.end());
        EXPECT_EQ(id, it->first);
        EXPECT_EQ(r.data, ref_of(it->second).data);
        ++it;
        return true;
    });
    EXPECT_EQ(it, model.end());
    // From the middle.
    const uint64_t from = 100'000;
    auto mit = model.lower_bound(from);
    map.each_from(from, [&](uint64_t id, const DocRef&) {
        EXPECT_EQ(id, mit->first);
        ++mit;
        return true;
    });
    EXPECT_EQ(mit, model.end());
}


// Growth adds chunks and never moves a slot: a ref found before a million more ids is still at
// the same address, and every id, across every chunk boundary up to the huge-page chunks, answers
// its own ref; erasing half and walking from inside a chunk sees exactly the rest.
TEST(IdMapTest, GrowthKeepsSlotsInPlaceAcrossChunks) {
    IdMap map;
    for (uint64_t id = 1; id <= 100; ++id) map.put(id, ref_of(id));
    const DocRef* early = map.find(37);
    ASSERT_NE(early, nullptr);
    constexpr uint64_t kIds = 1'100'000;  // chunks up to 16 MiB: several huge-page chunks
    for (uint64_t id = 101; id <= kIds; ++id) map.put(id, ref_of(id));
    EXPECT_EQ(map.find(37), early);
    EXPECT_EQ(map.size(), kIds);
    EXPECT_GT(map.dense_size(), kIds);
    // Dense ids stay in the chunks, and their slots are at most twice the ids (plus the floor).
    EXPECT_LE(map.memory_bytes(), (2 * kIds + 4096) * sizeof(DocRef));
    for (uint64_t id = 1; id <= kIds; ++id) {
        const DocRef* r = map.find(id);
        ASSERT_NE(r, nullptr) << id;
        ASSERT_EQ(r->data, ref_of(id).data) << id;
    }
    EXPECT_EQ(map.find(0), nullptr);
    EXPECT_EQ(map.find(kIds + 1), nullptr);
    for (uint64_t id = 2; id <= kIds; id += 2) ASSERT_TRUE(map.erase(id).has_value()) << id;
    EXPECT_EQ(map.size(), kIds / 2);
    EXPECT_EQ(map.max_id(), kIds - 1);
    const uint64_t from = 16 * ((uint64_t{1} << 13) - 1) + 5;  // inside the first huge chunk
    uint64_t expect = from | 1, seen = 0;
    map.each_from(from, [&](uint64_t id, const DocRef& r) {
        EXPECT_EQ(id, expect);
        EXPECT_EQ(r.data, ref_of(id).data);
        expect += 2;
        ++seen;
        return true;
    });
    EXPECT_EQ(seen, (kIds - (from | 1)) / 2 + 1);
}

}  // namespace
}  // namespace fenec::engine::id_map_test
