// index/key.cc: the order-preserving value keys of index/key.h.
//
// Layout: one kind byte (1 null, 2 bool, 3 number, 4 timestamp, 5 text, 6 bytes, 7 list,
// 8 object), then:
//   bool      0 or 1
//   number    the nearest double d of the exact value, as 8 order bytes, then the exact
//             remainder (value - d, an int16 for ints beyond 2^53, 0 otherwise) as 2 order bytes
//   timestamp int64 as 8 order bytes
//   text      escaped sort key (index::sort_key), terminated by 00 00
//   bytes     escaped bytes, terminated by 00 00
//   list      each item's key, then 00 (below every kind byte: the shorter list first)
//   object    per member the key's text key then the value's key, then 00
// Escaping turns 00 into 00 FF so a terminator 00 00 sorts before any continuation.
#include "index/key.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace fenec::index {

namespace {

using engine::Value;

void put_u64(std::string& out, uint64_t v) {
    for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void put_i64(std::string& out, int64_t v) { put_u64(out, static_cast<uint64_t>(v) ^ (1ull << 63)); }

void put_double(std::string& out, double d) {
    if (d == 0) d = 0;  // -0.0 and 0.0 are one value
    uint64_t bits = std::bit_cast<uint64_t>(d);
    bits = (bits & (1ull << 63)) ? ~bits : bits | (1ull << 63);
    put_u64(out, bits);
}

void put_escaped(std::string& out, std::string_view s) {
    for (char c : s) {
        out.push_back(c);
        if (c == '\0') out.push_back(static_cast<char>(0xFF));
    }
    out.push_back('\0');
    out.push_back('\0');
}

void put_int(std::string& out, int64_t i) {
    const double d = static_cast<double>(i);  // nearest double
    // i - d fits in an int16: |i| < 2^63 so the rounding error is at most 2^10.
    int64_t rem;
    if (d >= 9223372036854775808.0) {
        rem = i - INT64_MAX - 1;  // d == 2^63 exactly; i - 2^63 without overflow
    } else {
        rem = i - static_cast<int64_t>(d);
    }
    out.push_back(3);
    put_double(out, d);
    const uint16_t r = static_cast<uint16_t>(static_cast<int16_t>(rem)) ^ 0x8000u;
    out.push_back(static_cast<char>(r >> 8));
    out.push_back(static_cast<char>(r));
}

void put_float(std::string& out, double d) {
    out.push_back(3);
    put_double(out, d);
    out.push_back(static_cast<char>(0x80));  // remainder 0
    out.push_back(0);
}

const TextRule kBytes{};

}  // namespace

void append_key(const Value& v, const TextRule& rule, std::string& out) {
    struct Visit {
        const TextRule& rule;
        std::string& out;
        void operator()(const engine::Null&) { out.push_back(1); }
        void operator()(bool b) {
            out.push_back(2);
            out.push_back(b ? 1 : 0);
        }
        void operator()(int64_t i) { put_int(out, i); }
        void operator()(double d) { put_float(out, d); }
        void operator()(const std::string& s) {
            out.push_back(5);
            put_escaped(out, sort_key(s, rule));
        }
        void operator()(const engine::Bytes& b) {
            out.push_back(6);
            put_escaped(out, b.data);
        }
        void operator()(const engine::Timestamp& t) {
            out.push_back(4);
            put_i64(out, t.ms);
        }
        void operator()(const engine::VectorF32& vec) {
            out.push_back(7);
            for (float f : vec.v) put_float(out, f);
            out.push_back(0);
        }
        void operator()(const engine::VectorF16& vec) {
            out.push_back(7);
            for (uint16_t h : vec.v) put_float(out, engine::f16_to_f32(h));
            out.push_back(0);
        }
        void operator()(const engine::List& l) {
            out.push_back(7);
            for (const Value& item : l.items) append_key(item, rule, out);
            out.push_back(0);
        }
        void operator()(const engine::Object& o) {
            // Members in key byte order (they are stored sorted; sort anyway for literals).
            std::vector<size_t> order(o.keys.size());
            for (size_t i = 0; i < order.size(); ++i) order[i] = i;
            std::sort(order.begin(), order.end(),
                      [&](size_t a, size_t b) { return o.keys[a] < o.keys[b]; });
            out.push_back(8);
            for (size_t i : order) {
                out.push_back(5);
                put_escaped(out, o.keys[i]);
                append_key(o.values[i], kBytes, out);
            }
            out.push_back(0);
        }
    };
    std::visit(Visit{rule, out}, v.rep);
}

std::string null_key() { return std::string(1, '\1'); }

}  // namespace fenec::index
