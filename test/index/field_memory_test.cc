// test/index/field_memory_test.cc: proves index/field_memory.h, the memory of a vector field's
// growing arrays: a block under 2 MiB is an ordinary heap block of exactly the bytes asked (a small
// field costs what its vectors do), one of 2 MiB or more is 2 MiB aligned and rounded up to whole
// huge pages, all of it usable; a FloatArray keeps every value through each growth, from the heap
// into huge pages and on; resize leaves what was there; clear keeps the block.
#include "index/field_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/huge_pages.h"

namespace fenec::test::field_memory_test {
namespace {

using engine::huge_page_bytes;
using index::FieldBlock;
using index::FloatArray;

bool aligned_2m(const void* p) { return reinterpret_cast<uintptr_t>(p) % huge_page_bytes == 0; }

TEST(FieldBlock, SmallIsHeapOfTheBytesAskedLargeIsWholeHugePages) {
    const FieldBlock none(0);
    EXPECT_EQ(none.data(), nullptr);
    EXPECT_EQ(none.bytes(), 0u);

    const FieldBlock small(10 * 64 * sizeof(float));  // 10 vectors of 64
    EXPECT_FALSE(small.huge());
    EXPECT_EQ(small.bytes(), 10u * 64 * sizeof(float));

    const FieldBlock under(huge_page_bytes - 1);
    EXPECT_FALSE(under.huge());
    EXPECT_EQ(under.bytes(), huge_page_bytes - 1);

    const FieldBlock exact(huge_page_bytes);
    EXPECT_TRUE(exact.huge());
    EXPECT_EQ(exact.bytes(), huge_page_bytes);
    EXPECT_TRUE(aligned_2m(exact.data()));

    FieldBlock over(huge_page_bytes + 1);
    EXPECT_TRUE(over.huge());
    EXPECT_EQ(over.bytes(), 2 * huge_page_bytes);
    EXPECT_TRUE(aligned_2m(over.data()));
    // All of it is the caller's: written end to end.
    std::memset(over.data(), 0xab, over.bytes());
    EXPECT_EQ(over.data()[over.bytes() - 1], std::byte{0xab});

    // Moved, the block changes hands and is freed once (ASan builds check the once).
    FieldBlock moved(std::move(over));
    EXPECT_EQ(over.data(), nullptr);  // NOLINT(bugprone-use-after-move): the contract
    EXPECT_EQ(over.bytes(), 0u);
    EXPECT_EQ(moved.bytes(), 2 * huge_page_bytes);
    moved = FieldBlock(100);
    EXPECT_FALSE(moved.huge());
    EXPECT_EQ(moved.bytes(), 100u);
}

TEST(FloatArray, KeepsEveryValueThroughGrowthIntoHugePages) {
    FloatArray a;
    std::vector<float> want;
    std::vector<float> row(128);
    // 8,000 rows of 128 floats: 4 MB, growing by doubling from the heap into huge pages.
    bool was_heap = false;
    for (int r = 0; r < 8000; ++r) {
        for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(r * 131 + i);
        a.append(row);
        want.insert(want.end(), row.begin(), row.end());
        was_heap = was_heap || (!a.huge() && a.size() > 0);
        ASSERT_GE(a.capacity(), a.size());
    }
    EXPECT_TRUE(was_heap);
    EXPECT_TRUE(a.huge());
    EXPECT_TRUE(aligned_2m(a.data()));
    EXPECT_EQ(a.capacity() * sizeof(float) % huge_page_bytes, 0u) << "the rounding is capacity";
    ASSERT_EQ(a.size(), want.size());
    EXPECT_EQ(std::memcmp(a.data(), want.data(), want.size() * sizeof(float)), 0);

    // resize keeps what was there; clear keeps the block.
    const size_t cap = a.capacity();
    a.resize(100);
    EXPECT_EQ(std::memcmp(a.data(), want.data(), 100 * sizeof(float)), 0);
    a.resize(want.size() + 1'000'000);
    EXPECT_EQ(std::memcmp(a.data(), want.data(), 100 * sizeof(float)), 0);
    EXPECT_GE(a.capacity(), want.size() + 1'000'000);
    const size_t grown = a.capacity();
    a.clear();
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(a.capacity(), grown);
    EXPECT_GT(grown, cap);
}

TEST(FloatArray, ASmallFieldStaysOnTheHeapAtItsSize) {
    // Issue 18 item 7: 10 vectors of 64 cost what they are, not a huge page.
    FloatArray a;
    std::vector<float> row(64, 1.0f);
    for (int r = 0; r < 10; ++r) a.append(row);
    EXPECT_FALSE(a.huge());
    EXPECT_EQ(a.size(), 640u);
    EXPECT_LE(a.capacity(), 1024u);
    FloatArray b;
    b.reserve(640);
    EXPECT_EQ(b.capacity(), 640u);
    EXPECT_FALSE(b.huge());
}

}  // namespace
}  // namespace fenec::test::field_memory_test
