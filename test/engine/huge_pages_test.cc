// test/engine/huge_pages_test.cc: proves huge_alloc's contract (engine/huge_pages.h): memory
// aligned to a huge page, zeroed, writable to its last byte, of several sizes at once, and given
// back by huge_free; and the pool of freed pages: reused pages arrive zeroed and already mapped,
// the pool never holds more than its bound, and a lowered bound gives pages back.
#include "engine/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace fenec::test::huge_pages_test {
namespace {

using namespace engine;

TEST(HugePages, AlignedZeroedAndWritableToTheEnd) {
    std::vector<std::pair<std::byte*, size_t>> held;
    for (size_t pages : {1, 2, 3, 1}) {
        const size_t bytes = pages * huge_page_bytes;
        std::byte* p = huge_alloc(bytes);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % huge_page_bytes, 0u) << pages;
        for (size_t at = 0; at < bytes; at += 4096) ASSERT_EQ(p[at], std::byte{0}) << at;
        EXPECT_EQ(p[bytes - 1], std::byte{0});
        p[0] = std::byte{1};
        p[bytes - 1] = std::byte{2};
        held.emplace_back(p, bytes);
    }
    // Distinct mappings: no write above reached another one.
    for (const auto& [p, bytes] : held) {
        EXPECT_EQ(p[0], std::byte{1});
        EXPECT_EQ(p[bytes - 1], std::byte{2});
        EXPECT_EQ(p[bytes / 2], std::byte{0});
    }
    for (const auto& [p, bytes] : held) huge_free(p, bytes);
}

// Sets the pool's bound for one test and empties it after: the pool is the process's.
struct PoolBound {
    explicit PoolBound(size_t bytes) { set_huge_pool_bytes(bytes); }
    ~PoolBound() { set_huge_pool_bytes(0); }
};

long minor_faults() {
    rusage u{};
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_minflt;
}

TEST(HugePagePool, FreedPagesComeBackZeroedAndAlreadyMapped) {
    PoolBound bound(8 * huge_page_bytes);
    const size_t bytes = 4 * huge_page_bytes;
    std::byte* a = huge_alloc(bytes);
    std::memset(a, 0xab, bytes);  // every page touched, so mapped
    huge_free(a, bytes);
    HugePoolStats s = huge_pool_stats();
    EXPECT_EQ(s.bytes, bytes);
    EXPECT_EQ(s.limit, 8 * huge_page_bytes);

    const uint64_t reused0 = s.reused;
    const uint64_t fresh0 = s.fresh;
    std::byte* b = huge_alloc(bytes + huge_page_bytes);  // four from the pool, one fresh
    s = huge_pool_stats();
    EXPECT_EQ(s.reused - reused0, 4u);
    EXPECT_EQ(s.fresh - fresh0, 1u);
    EXPECT_EQ(s.bytes, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % huge_page_bytes, 0u);
    // What the pages held is gone, in the reused pages and the fresh one alike.
    for (size_t at = 0; at < bytes + huge_page_bytes; at += 512)
        ASSERT_EQ(b[at], std::byte{0}) << at;
    b[bytes + huge_page_bytes - 1] = std::byte{2};
    huge_free(b, bytes + huge_page_bytes);  // the pool holds eight pages at most: all five kept

    // Pages from the pool were moved in mapped: taking them and writing every 4 KiB of them
    // faults nothing, where a fresh block faults at least once a huge page (512 times without
    // THP). Twice, so that the first round has touched whatever code and stack the second runs.
    for (int round = 0; round < 2; ++round) {
        const long before = minor_faults();
        std::byte* c = huge_alloc(bytes);
        for (size_t at = 0; at < bytes; at += 4096) c[at] = std::byte{1};
        const long faults = minor_faults() - before;
        huge_free(c, bytes);
        // Under ASan every store first reads its shadow, whose pages for a new address range
        // fault in on their first read: there the count says nothing about the block.
#if !defined(__SANITIZE_ADDRESS__)
        if (round == 1) {
            EXPECT_EQ(faults, 0);
        }
#else
        (void)faults;
#endif
    }
}

// Mappings in /proc/self/maps that overlap [p, p + bytes).
int mappings_over(const std::byte* p, size_t bytes) {
    std::ifstream maps("/proc/self/maps");
    const auto lo = reinterpret_cast<uintptr_t>(p);
    const auto hi = lo + bytes;
    int n = 0;
    for (std::string line; std::getline(maps, line);) {
        const uintptr_t from = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
        const uintptr_t to = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
        if (from < hi && to > lo) ++n;
    }
    return n;
}

TEST(HugePagePool, KeepsOnlyWrittenPagesAndMovesAdjacentOnesInOneMapping) {
    PoolBound bound(8 * huge_page_bytes);
    const size_t bytes = 6 * huge_page_bytes;
    std::byte* a = huge_alloc(bytes);
    std::memset(a, 0xcd, 4 * huge_page_bytes);  // two pages never written: not worth keeping
    huge_free(a, bytes);
    EXPECT_EQ(huge_pool_stats().bytes, 4 * huge_page_bytes);
    // The four come back in address order, so they make one mapping, not one a page.
    std::byte* b = huge_alloc(4 * huge_page_bytes);
    EXPECT_EQ(huge_pool_stats().bytes, 0u);
    EXPECT_EQ(mappings_over(b, 4 * huge_page_bytes), 1);
    for (size_t at = 0; at < 4 * huge_page_bytes; at += 1024) ASSERT_EQ(b[at], std::byte{0}) << at;
    huge_free(b, 4 * huge_page_bytes);
}

TEST(HugePagePool, HoldsNoMoreThanItsBoundAndGivesBackWhenLowered) {
    PoolBound bound(3 * huge_page_bytes);
    std::byte* a = huge_alloc(2 * huge_page_bytes);
    std::byte* b = huge_alloc(2 * huge_page_bytes);
    std::memset(a, 1, 2 * huge_page_bytes);  // written whole, so worth keeping
    std::memset(b, 1, 2 * huge_page_bytes);
    huge_free(a, 2 * huge_page_bytes);
    huge_free(b, 2 * huge_page_bytes);  // one page of it kept, the other unmapped
    EXPECT_EQ(huge_pool_stats().bytes, 3 * huge_page_bytes);
    set_huge_pool_bytes(huge_page_bytes + 1);  // rounded down to whole pages
    EXPECT_EQ(huge_pool_stats().bytes, huge_page_bytes);
    EXPECT_EQ(huge_pool_stats().limit, huge_page_bytes);
    set_huge_pool_bytes(0);
    EXPECT_EQ(huge_pool_stats().bytes, 0u);
    // With no pool, a freed block is unmapped whole and the next one is all fresh.
    std::byte* c = huge_alloc(huge_page_bytes);
    const uint64_t reused = huge_pool_stats().reused;
    huge_free(c, huge_page_bytes);
    EXPECT_EQ(huge_pool_stats().bytes, 0u);
    std::byte* d = huge_alloc(huge_page_bytes);
    EXPECT_EQ(huge_pool_stats().reused, reused);
    huge_free(d, huge_page_bytes);
}

}  // namespace
}  // namespace fenec::test::huge_pages_test
