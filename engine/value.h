// engine/value.h: typed values and the document body codec (engine.md §2.5).
//
// Body  = uvarint slot_count, then one value per slot in slot order; slots past slot_count read
//         null. Value = tag byte, payload:
//   0x00 null | 0x01 false | 0x02 true | 0x03 int: zigzag varint | 0x04 float: 8 bytes IEEE-754
//   0x05 text: varint len, UTF-8 | 0x06 bytes: varint len, bytes | 0x07 timestamp: zigzag varint
//   0x08 vector f32: varint N, N*4 bytes | 0x09 vector f16: varint N, N*2 bytes
//   0x0A list: varint byte length of the rest, varint count, values
//   0x0B json object: varint byte length of the rest, varint count, (varint key len, key, value)*
//        with keys strictly ascending by bytes.
// Varints are LEB128, shortest form, at most 10 bytes. Tags 0x0C..0xFF are unassigned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "engine/schema.h"
#include "engine/status.h"

namespace fenec::engine {

struct Null {
    bool operator==(const Null&) const = default;
};
struct Bytes {
    std::string data;
    bool operator==(const Bytes&) const = default;
};
struct Timestamp {
    int64_t ms = 0;
    bool operator==(const Timestamp&) const = default;
};
struct VectorF32 {
    std::vector<float> v;
    bool operator==(const VectorF32& o) const;  // bit for bit
};
struct VectorF16 {
    std::vector<uint16_t> v;  // binary16 bit patterns
    bool operator==(const VectorF16&) const = default;
};
struct Value;
struct List {
    std::vector<Value> items;
    bool operator==(const List&) const;
};
struct Object {  // json object; keys kept in the order given, encoded sorted
    std::vector<std::string> keys;
    std::vector<Value> values;
    bool operator==(const Object&) const;
};

struct Value {
    using Rep = std::variant<Null, bool, int64_t, double, std::string, Bytes, Timestamp, VectorF32,
                             VectorF16, List, Object>;
    Rep rep;

    Value() = default;
    template <class T>
    Value(T v) : rep(std::move(v)) {}  // NOLINT: implicit on purpose
    Value(const char* s) : rep(std::string(s)) {}  // NOLINT
    Value(int v) : rep(int64_t{v}) {}  // NOLINT

    bool is_null() const { return std::holds_alternative<Null>(rep); }
    bool operator==(const Value& o) const;  // floats bit for bit
    const char* kind_name() const;
};

// A document as written: (slot, value) pairs; slots not named are null.
using Doc = std::vector<std::pair<uint16_t, Value>>;

// Encodes `doc` against `schema`, checking every value fits its field (engine.md §4); appends the
// body to `out`, and nothing else: on a refusal `out` is as it was. Refusals name collection,
// field, expected and found.
Status encode_doc(std::string_view collection, const Schema& schema, const Doc& doc,
                  std::vector<std::byte>& out);

// Checks a stored body: varints, tags, lengths, UTF-8, nesting, sorted keys. `base_offset` is
// added to positions in messages (the offset of the body in the file).
Status validate_body(std::span<const std::byte> body, uint64_t base_offset);

// One document body, read without decoding the slots not asked for. The body must have passed
// validate_body (or come from encode_doc).
class DocView {
public:
    DocView() = default;
    explicit DocView(std::span<const std::byte> body) : body_(body) {}
    std::span<const std::byte> body() const { return body_; }
    uint32_t slot_count() const;
    Value get(uint16_t slot) const;                            // null past slot_count
    std::span<const std::byte> raw(uint16_t slot) const;        // the encoded value; empty: null
    // raw() of slots 0..out.size()-1 in one pass over the body, for a reader of several fields
    // (raw() of each would skip the earlier ones again); past slot_count an entry is empty.
    void raw_slots(std::span<std::span<const std::byte>> out) const;
    static Value value_of(std::span<const std::byte> raw);      // a raw() value; empty: null
    // A raw() value that is a vector: its dimension (0 when it is none), and its components
    // copied to `out` (vector_dim floats, binary16 widened) with no Value built, for a reader of
    // many vectors (a graph's restore).
    static uint32_t vector_dim(std::span<const std::byte> raw);
    static void vector_into(std::span<const std::byte> raw, float* out);
    bool is_null(uint16_t slot) const;
    Doc decode() const;                                         // every non-null slot

private:
    std::span<const std::byte> body_;
};

// Copies `body` with the value in `slot` replaced by null (compaction of dropped slots).
std::vector<std::byte> null_slots(std::span<const std::byte> body,
                                  const std::vector<uint16_t>& slots);

// binary16 <-> float, round to nearest even.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace fenec::engine
