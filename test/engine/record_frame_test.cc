// test/engine/record_frame_test.cc: proves format::append_record (engine/format.h) frames a body
// as the layout says (length, checksum, kind, head check, body, zero padding to 8) when it is
// appended to a buffer that already holds records and whose spare capacity holds old bytes, as
// a buffer reused from one block to the next does: nothing of those old bytes reaches a record.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "engine/format.h"

namespace fenec::engine::record_frame_test {
namespace {

std::vector<std::byte> body_of(size_t n, unsigned seed) {
    std::vector<std::byte> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = std::byte(static_cast<uint8_t>(seed + 7 * i));
    return b;
}

// Checks the record at `at` in `buf` frames `body` as `kind`; returns where the next one starts.
size_t check_record(const std::vector<std::byte>& buf, size_t at, format::Kind kind,
                    const std::vector<std::byte>& body) {
    const auto k = static_cast<uint8_t>(kind);
    const std::byte* p = buf.data() + at;
    EXPECT_EQ(format::load_u32(p), body.size());
    EXPECT_EQ(format::load_u64(p + 4), format::checksum(k, body));
    EXPECT_EQ(static_cast<uint8_t>(p[12]), k);
    const uint32_t hc = format::head_check(static_cast<uint32_t>(body.size()), k);
    EXPECT_EQ(static_cast<uint8_t>(p[13]), hc & 0xFF);
    EXPECT_EQ(static_cast<uint8_t>(p[14]), (hc >> 8) & 0xFF);
    EXPECT_EQ(static_cast<uint8_t>(p[15]), (hc >> 16) & 0xFF);
    const std::byte* b = p + format::kRecordHeadBytes;
    EXPECT_TRUE(std::equal(body.begin(), body.end(), b));
    const size_t framed = format::framed_size(body.size());
    for (size_t i = format::kRecordHeadBytes + body.size(); i < framed; ++i) {
        EXPECT_EQ(static_cast<uint8_t>(p[i]), 0)
            << "padding byte " << i << " of the record at " << at;
    }
    return at + framed;
}

TEST(RecordFrame, RecordsAppendedToAReusedBufferHoldNothingOfItsOldBytes) {
    std::vector<std::byte> buf(4096, std::byte{0xFF});  // the last block's bytes, say
    buf.clear();                                        // capacity kept, old bytes behind it
    const std::vector<std::vector<std::byte>> bodies = {body_of(13, 1), body_of(0, 2),
                                                        body_of(1001, 3), body_of(8, 4)};
    for (const auto& b : bodies) format::append_record(buf, format::Kind::block, b);
    size_t at = 0;
    for (const auto& b : bodies) at = check_record(buf, at, format::Kind::block, b);
    EXPECT_EQ(at, buf.size()) << "nothing after the last record";
}

TEST(RecordFrame, AppendsAfterWhatTheBufferHeldAndGrowsPastItsCapacity) {
    std::vector<std::byte> buf = {std::byte{1}, std::byte{2}, std::byte{3}};
    buf.shrink_to_fit();
    const std::vector<std::byte> big = body_of(100'003, 9);
    format::append_record(buf, format::Kind::spill, big);
    ASSERT_EQ(buf.size(), 3 + format::framed_size(big.size()));
    EXPECT_EQ(buf[0], std::byte{1});
    EXPECT_EQ(buf[2], std::byte{3});
    EXPECT_EQ(check_record(buf, 3, format::Kind::spill, big), buf.size());
}

}  // namespace
}  // namespace fenec::engine::record_frame_test
