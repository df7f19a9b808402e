// fuzz/reseal.h: recomputes the checks of framed records (engine/format.h: a record's XXH3 of
// its kind and body, and its head check) so that a mutated input passes them and reaches what
// lies behind: the FlatBuffers verifier, replay's rules, apply's. Shared by fuzz_open_file (a
// file's records after its header) and fuzz_feed (a `B` frame's records after its block head).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/format.h"

namespace fenec::fuzz {

// Reseals each whole record of `bytes` from offset `from` on; stops at the first that does not
// fit.
inline void reseal_records(std::span<std::byte> bytes, uint64_t from) {
    namespace f = fenec::engine::format;
    std::byte* b = bytes.data();
    uint64_t p = from;
    while (bytes.size() >= p && bytes.size() - p >= f::kRecordHeadBytes) {
        std::byte* h = b + p;
        const uint32_t length = f::load_u32(h);
        const uint64_t framed = f::framed_size(length);
        if (framed > bytes.size() - p) break;
        const uint8_t kind = std::to_integer<uint8_t>(h[12]);
        f::store_u64(h + 4, f::checksum(kind, std::span(h + f::kRecordHeadBytes, length)));
        const uint32_t hc = f::head_check(length, kind);
        h[13] = std::byte(hc);
        h[14] = std::byte(hc >> 8);
        h[15] = std::byte(hc >> 16);
        p += framed;
    }
}

}  // namespace fenec::fuzz
