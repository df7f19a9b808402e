// test/engine/huge_pages_test.cc: proves huge_alloc's contract (engine/huge_pages.h): memory
// aligned to a huge page, zeroed, writable to its last byte, of several sizes at once, and given
// back by huge_free.
#include "engine/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
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

}  // namespace
}  // namespace fenec::test::huge_pages_test
