// test/engine/hex16_test.cc: the one 16-hex codec of ids (engine/format.h hex16, parse_hex16):
// exactly 16 lowercase digits, zero-padded, both ends of the range; parse_hex16 reads back every
// value hex16 writes and refuses every other spelling (length, upper case, prefixes, signs,
// spaces, non-hex), so an id has one text.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "engine/format.h"

namespace fenec::engine::format::hex16_test {
namespace {

TEST(Hex16, WritesSixteenLowercaseDigits) {
    EXPECT_EQ(hex16(0), "0000000000000000");
    EXPECT_EQ(hex16(0xaa), "00000000000000aa");
    EXPECT_EQ(hex16(0x0123456789abcdefull), "0123456789abcdef");
    EXPECT_EQ(hex16(UINT64_MAX), "ffffffffffffffff");
}

TEST(Hex16, ParsesWhatItWritesAndNothingElse) {
    std::mt19937_64 rng(16);
    for (int i = 0; i < 10000; ++i) {
        const uint64_t v = i < 2 ? (i == 0 ? 0 : UINT64_MAX) : rng() >> (rng() % 64);
        ASSERT_EQ(parse_hex16(hex16(v)), v) << hex16(v);
    }
    for (const char* bad :
         {"", "0", "000000000000000", "00000000000000000", "00000000000000AA", "0x000000000000aa",
          "+00000000000000a", "-00000000000000a", " 00000000000000a", "00000000000000a ",
          "00000000000000ag", "000000000000000\n"}) {
        EXPECT_EQ(parse_hex16(bad), std::nullopt) << bad;
    }
}

}  // namespace
}  // namespace fenec::engine::format::hex16_test
