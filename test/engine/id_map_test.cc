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

}  // namespace
}  // namespace fenec::engine::id_map_test
