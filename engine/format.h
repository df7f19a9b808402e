// engine/format.h: the byte layout of a tenant file, shared by the writer and the reader. Every
// constant of the format is here and nowhere else; bodies are FlatBuffers tables defined in
// engine/format.fbs. docs/file-format.md mirrors this file and a golden-bytes test pins it.
//
// File   = header (64 bytes) then records, each at an 8-aligned offset.
// Header = magic[8] "\x89FENEC\r\n" | format_version u32 = 1 | header_bytes u32 = 64 |
//          lineage u64 (never 0) | reserved u64 = 0 | created_ms i64 | flags u64 = 0 |
//          reserved u64 = 0 | header_check u64 = XXH3-64(seed 0) of bytes 0..55.
// Record = length u32 (body bytes, padding excluded) | checksum u64 = XXH3-64(kind byte, body) |
//          kind u8 | head_check u24 = low 24 bits of XXH3-64(bytes 0..3 and byte 12) |
//          body[length] | zero padding to a multiple of 8.
// All integers little-endian.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fenec::engine::format {

inline constexpr std::array<uint8_t, 8> kMagic = {0x89, 'F', 'E', 'N', 'E', 'C', '\r', '\n'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kHeaderBytes = 64;
inline constexpr uint32_t kRecordHeadBytes = 16;
inline constexpr uint32_t kRecordAlign = 8;
inline constexpr uint16_t kGraphVersion = 1;
// A record's durable_end when it has none (format.fbs' default): an image's records but its
// History, or a record by a build before the field (or one that stamped only appends into room).
inline constexpr uint64_t kNoDurableStamp = UINT64_MAX;

// Header field offsets.
inline constexpr size_t kOffVersion = 8;
inline constexpr size_t kOffHeaderBytes = 12;
inline constexpr size_t kOffLineage = 16;
inline constexpr size_t kOffCreated = 32;
inline constexpr size_t kOffFlags = 40;
inline constexpr size_t kOffHeaderCheck = 56;

enum class Kind : uint8_t {
    checkpoint = 1,
    collection_state = 2,
    image_docs = 3,
    block = 4,
    spill = 5,
    landing = 6,
    history = 7,
    graph = 8,
};
inline constexpr uint8_t kKindMax = 8;
const char* kind_name(Kind);

struct Header {
    uint64_t lineage = 0;
    int64_t created_ms = 0;
};

// The 64 header bytes for a new file or image.
std::array<std::byte, kHeaderBytes> encode_header(const Header&);

inline constexpr uint64_t round_up8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }
inline constexpr uint64_t framed_size(uint64_t body_bytes) {
    return kRecordHeadBytes + round_up8(body_bytes);
}

uint64_t checksum(uint8_t kind, std::span<const std::byte> body);
uint32_t head_check(uint32_t length, uint8_t kind);

// Appends one framed record (head, body, padding) to `out`.
void append_record(std::vector<std::byte>& out, Kind kind, std::span<const std::byte> body);

// Little-endian loads and stores.
inline uint32_t load_u32(const std::byte* p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | std::to_integer<uint32_t>(p[i]);
    return v;
}
inline uint64_t load_u64(const std::byte* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(p[i]);
    return v;
}

// Whether the record head at `head` (kRecordHeadBytes there) holds: the head_check it stores in
// bytes 13..15 is its length's and kind's.
inline bool head_holds(const std::byte* head) {
    const uint32_t stored = std::to_integer<uint32_t>(head[13]) |
                            (std::to_integer<uint32_t>(head[14]) << 8) |
                            (std::to_integer<uint32_t>(head[15]) << 16);
    return stored == head_check(load_u32(head), std::to_integer<uint8_t>(head[12]));
}
inline void store_u32(std::byte* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = std::byte(v >> (8 * i));
}
inline void store_u64(std::byte* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = std::byte(v >> (8 * i));
}

// The one 16-hex codec: a lineage or history id (and any 64-bit id that travels as text: the
// router's directory ids, request and span ids, a statement's hash) as exactly 16 lowercase hex
// digits, and back. parse_hex16 takes only what hex16 writes: 16 characters of 0-9 and a-f (no
// sign, no prefix, no upper case), nullopt for anything else.
std::string hex16(uint64_t v);
std::optional<uint64_t> parse_hex16(std::string_view text);

}  // namespace fenec::engine::format
