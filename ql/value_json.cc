// ql/value_json.cc: an engine value as §12.2's JSON, and base64 (ql/value_json.h).
#include "ql/value_json.h"

#include <cstdint>

#include "json/timestamp.h"
#include "ql/compare.h"

namespace fenec::ql {
namespace {

constexpr std::string_view kBase64Alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The 6-bit value of a base64 character, or -1.
int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

}  // namespace

void write_value(json::Writer& w, const engine::Value& v) {
    struct Visit {
        json::Writer& w;
        void operator()(const engine::Null&) { w.null(); }
        void operator()(bool b) { w.boolean(b); }
        void operator()(int64_t i) { w.int64(i); }
        void operator()(double d) { w.float64(d); }
        void operator()(const std::string& s) { w.string(s); }
        void operator()(const engine::Bytes& b) { w.string(base64_encode(b.data)); }
        void operator()(const engine::Timestamp& t) { w.string(json::format_timestamp(t.ms)); }
        void operator()(const engine::VectorF32& vec) {
            w.begin_array();
            for (float f : vec.v) w.float32(f);
            w.end_array();
        }
        void operator()(const engine::VectorF16& vec) {
            w.begin_array();
            for (uint16_t h : vec.v) w.float32(engine::f16_to_f32(h));
            w.end_array();
        }
        void operator()(const engine::List& l) {
            w.begin_array();
            for (const engine::Value& item : l.items) write_value(w, item);
            w.end_array();
        }
        void operator()(const engine::Object& o) {
            const SortedMembers members(o);
            w.begin_object();
            for (size_t i = 0; i < members.size(); ++i) {
                w.key(members.key(i));
                write_value(w, members.value(i));
            }
            w.end_object();
        }
    };
    std::visit(Visit{w}, v.rep);
}

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    const auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[k])); };
    for (; i + 3 <= bytes.size(); i += 3) {
        const uint32_t n = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
        for (int shift = 18; shift >= 0; shift -= 6)
            out.push_back(kBase64Alphabet[n >> shift & 63]);
    }
    const size_t left = bytes.size() - i;  // 0, 1 or 2
    if (left > 0) {
        const uint32_t n = at(i) << 16 | (left == 2 ? at(i + 1) << 8 : 0);
        out.push_back(kBase64Alphabet[n >> 18 & 63]);
        out.push_back(kBase64Alphabet[n >> 12 & 63]);
        out.push_back(left == 2 ? kBase64Alphabet[n >> 6 & 63] : '=');
        out.push_back('=');
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return std::nullopt;
    const size_t pad = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (size_t i = 0; i < text.size(); i += 4) {
        const bool last = i + 4 == text.size();
        const size_t chars = last ? 4 - pad : 4;  // '=' is only ever in the last quantum
        uint32_t n = 0;
        for (size_t k = 0; k < 4; ++k) {
            const int v = k < chars ? base64_value(text[i + k]) : 0;
            if (v < 0) return std::nullopt;
            n = n << 6 | static_cast<uint32_t>(v);
        }
        // A padded quantum's unused low bits must be zero: one canonical text per byte string.
        if ((pad == 2 && last && (n & 0xFFFF) != 0) || (pad == 1 && last && (n & 0xFF) != 0)) {
            return std::nullopt;
        }
        out.push_back(static_cast<char>(n >> 16));
        if (chars > 2) out.push_back(static_cast<char>(n >> 8 & 0xFF));
        if (chars > 3) out.push_back(static_cast<char>(n & 0xFF));
    }
    return out;
}

}  // namespace fenec::ql
