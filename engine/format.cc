// engine/format.cc: the header and record framer. The reader's checks live in record_reader.cc;
// both use the layout constants of format.h.
#include "engine/format.h"

#include <algorithm>
#include <cstring>

#include "engine/hash.h"

namespace fenec::engine::format {

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::checkpoint: return "checkpoint";
        case Kind::collection_state: return "collection_state";
        case Kind::image_docs: return "image_docs";
        case Kind::block: return "block";
        case Kind::spill: return "spill";
        case Kind::landing: return "landing";
        case Kind::history: return "history";
        case Kind::graph: return "graph";
    }
    return "unknown";
}

std::array<std::byte, kHeaderBytes> encode_header(const Header& h) {
    std::array<std::byte, kHeaderBytes> out{};
    std::memcpy(out.data(), kMagic.data(), kMagic.size());
    store_u32(out.data() + kOffVersion, kFormatVersion);
    store_u32(out.data() + kOffHeaderBytes, kHeaderBytes);
    store_u64(out.data() + kOffLineage, h.lineage);
    store_u64(out.data() + kOffCreated, static_cast<uint64_t>(h.created_ms));
    store_u64(out.data() + kOffHeaderCheck, XXH3_64bits(out.data(), kOffHeaderCheck));
    return out;
}

uint64_t checksum(uint8_t kind, std::span<const std::byte> body) {
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &kind, 1);
    XXH3_64bits_update(&st, body.data(), body.size());
    return XXH3_64bits_digest(&st);
}

uint32_t head_check(uint32_t length, uint8_t kind) {
    std::byte buf[5];
    store_u32(buf, length);
    buf[4] = std::byte(kind);
    return static_cast<uint32_t>(XXH3_64bits(buf, sizeof(buf)) & 0xFFFFFFu);
}

void append_record(std::vector<std::byte>& out, Kind kind, std::span<const std::byte> body) {
    const uint32_t length = static_cast<uint32_t>(body.size());
    const uint8_t k = static_cast<uint8_t>(kind);
    std::byte head[kRecordHeadBytes];
    store_u32(head, length);
    store_u64(head + 4, checksum(k, body));
    head[12] = std::byte(k);
    const uint32_t hc = head_check(length, k);
    head[13] = std::byte(hc);
    head[14] = std::byte(hc >> 8);
    head[15] = std::byte(hc >> 16);
    // Head, body, then the padding zeroed: each byte written once. (A resize to the framed size
    // first zeroed the whole record, then the body was copied over it: a block's record is the
    // size of its documents, and that pass was 6% of a 1,000-document block.)
    const size_t at = out.size();
    const size_t need = at + framed_size(body.size());
    // Room for the whole record before the first insert (growing as push_back would, for a
    // caller appending many records to one buffer), so no insert moves what is already there.
    if (out.capacity() < need) out.reserve(std::max(need, 2 * out.capacity()));
    out.insert(out.end(), head, head + kRecordHeadBytes);
    out.insert(out.end(), body.begin(), body.end());
    out.resize(need);
}

std::string hex16(uint64_t v) {
    static const char* digits = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) s[i] = digits[v & 15];
    return s;
}

std::optional<uint64_t> parse_hex16(std::string_view text) {
    if (text.size() != 16) return std::nullopt;
    uint64_t v = 0;
    for (char c : text) {
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return std::nullopt;
        v = (v << 4) | static_cast<uint64_t>(d);
    }
    return v;
}

}  // namespace fenec::engine::format
