// test/engine/doc_codec_test.cc: proves encode_doc (engine/value.h) writes the body layout its
// header documents, byte for byte, for every value kind, against an oracle: a byte-at-a-time
// encoder written from that layout alone (the way the codec wrote before it wrote through a
// cursor). Also that a body reads back as the document it came from, that a buffer reused for
// the next document (the block's scratch) holds nothing of the last one, and that a refused
// document leaves the buffer exactly as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/schema.h"
#include "engine/value.h"

namespace fenec::engine::doc_codec_test {
namespace {

// ---- the oracle: value.h's layout, one byte at a time

using Bytes_ = std::vector<std::byte>;

void byte_(Bytes_& out, unsigned b) { out.push_back(std::byte(static_cast<uint8_t>(b))); }
void uvarint_(Bytes_& out, uint64_t v) {
    while (v >= 0x80) {
        byte_(out, static_cast<unsigned>((v & 0x7F) | 0x80));
        v >>= 7;
    }
    byte_(out, static_cast<unsigned>(v));
}
uint64_t zigzag_(int64_t v) {
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
void raw_(Bytes_& out, const std::string& s) {
    for (char c : s) byte_(out, static_cast<unsigned char>(c));
}

void oracle_value(Bytes_& out, const Value& v) {
    if (v.is_null()) return byte_(out, 0x00);
    if (auto* b = std::get_if<bool>(&v.rep)) return byte_(out, *b ? 0x02 : 0x01);
    if (auto* i = std::get_if<int64_t>(&v.rep)) {
        byte_(out, 0x03);
        return uvarint_(out, zigzag_(*i));
    }
    if (auto* d = std::get_if<double>(&v.rep)) {
        byte_(out, 0x04);
        const uint64_t bits = std::bit_cast<uint64_t>(*d);
        for (int k = 0; k < 8; ++k) byte_(out, static_cast<unsigned>((bits >> (8 * k)) & 0xFF));
        return;
    }
    if (auto* s = std::get_if<std::string>(&v.rep)) {
        byte_(out, 0x05);
        uvarint_(out, s->size());
        return raw_(out, *s);
    }
    if (auto* by = std::get_if<Bytes>(&v.rep)) {
        byte_(out, 0x06);
        uvarint_(out, by->data.size());
        return raw_(out, by->data);
    }
    if (auto* t = std::get_if<Timestamp>(&v.rep)) {
        byte_(out, 0x07);
        return uvarint_(out, zigzag_(t->ms));
    }
    if (auto* vf = std::get_if<VectorF32>(&v.rep)) {
        byte_(out, 0x08);
        uvarint_(out, vf->v.size());
        for (float f : vf->v) {
            const uint32_t bits = std::bit_cast<uint32_t>(f);
            for (int k = 0; k < 4; ++k) byte_(out, (bits >> (8 * k)) & 0xFF);
        }
        return;
    }
    if (auto* vh = std::get_if<VectorF16>(&v.rep)) {
        byte_(out, 0x09);
        uvarint_(out, vh->v.size());
        for (uint16_t h : vh->v) {
            byte_(out, h & 0xFF);
            byte_(out, h >> 8);
        }
        return;
    }
    Bytes_ rest;
    if (auto* l = std::get_if<List>(&v.rep)) {
        uvarint_(rest, l->items.size());
        for (const Value& x : l->items) oracle_value(rest, x);
        byte_(out, 0x0A);
    } else {
        const Object& o = std::get<Object>(v.rep);
        std::vector<size_t> order(o.keys.size());
        std::iota(order.begin(), order.end(), size_t{0});
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return o.keys[a] < o.keys[b]; });
        uvarint_(rest, o.keys.size());
        for (size_t i : order) {
            uvarint_(rest, o.keys[i].size());
            raw_(rest, o.keys[i]);
            oracle_value(rest, o.values[i]);
        }
        byte_(out, 0x0B);
    }
    uvarint_(out, rest.size());
    out.insert(out.end(), rest.begin(), rest.end());
}

// A document whose slots are all given, as encode_doc writes it: count up to the last non-null
// slot, then every slot to there, unnamed ones null.
Bytes_ oracle_doc(size_t slots, const Doc& doc) {
    std::vector<const Value*> by_slot(slots, nullptr);
    for (const auto& [s, v] : doc) by_slot[s] = &v;
    size_t count = 0;
    for (size_t s = 0; s < slots; ++s) {
        if (by_slot[s] && !by_slot[s]->is_null()) count = s + 1;
    }
    Bytes_ out;
    uvarint_(out, count);
    for (size_t s = 0; s < count; ++s) {
        if (by_slot[s])
            oracle_value(out, *by_slot[s]);
        else
            byte_(out, 0x00);
    }
    return out;
}

// ---- documents of every kind

enum Field : uint16_t {
    kBool,
    kInt,
    kFloat,
    kText,
    kBytes,
    kTime,
    kVec32,
    kVec16,
    kListInt,
    kJson,
    kFieldCount
};

Schema every_kind() {
    Schema s;
    auto add = [&](const char* name, TypeDesc t) {
        FieldDesc f;
        f.name = name;
        f.type = std::move(t);
        s.fields.push_back(std::move(f));
    };
    add("b", make_type(BaseType::Bool));
    add("i", make_type(BaseType::Int));
    add("f", make_type(BaseType::Float));
    add("t", make_type(BaseType::Text));
    add("by", make_type(BaseType::Bytes));
    add("ts", make_type(BaseType::Timestamp));
    add("v32", make_vector(5));
    add("v16", make_vector(3, VectorElem::f16));
    add("li", make_list(make_type(BaseType::Int)));
    add("j", make_type(BaseType::Json));
    return s;
}

struct Gen {
    std::mt19937_64 rng{20261203};
    uint64_t u(uint64_t n) { return rng() % n; }
    int64_t any_int() {
        // Every varint length, both signs, the extremes.
        static const int64_t edges[] = {0, 1, -1, 63, -64, 64, 8191, -8192, INT64_MAX, INT64_MIN};
        if (u(3) == 0) return edges[u(std::size(edges))];
        return static_cast<int64_t>(rng()) >> u(64);
    }
    double any_float() {
        static const double edges[] = {0.0, -0.0, 1e308, -4.9e-324, 0.5};
        if (u(3) == 0) return edges[u(std::size(edges))];
        return std::bit_cast<double>(rng());  // NaNs and infinities too: compared bit for bit
    }
    std::string text() {
        // ASCII runs longer than a word and every UTF-8 length, at any alignment.
        static const char* pieces[] = {"a", "hello world, plain", "é", "€",
                                       "𝄞", "0123456789abcdef"};
        std::string s;
        for (uint64_t n = u(12); n > 0; --n) s += pieces[u(std::size(pieces))];
        if (u(8) == 0) s.append(200 + u(200), 'x');  // a length of two varint bytes
        return s;
    }
    std::string bytes() {
        std::string s(u(40), '\0');
        for (char& c : s) c = static_cast<char>(rng());
        return s;
    }
    Value json(int depth) {
        switch (depth > 4 ? u(4) : u(7)) {
            case 0:
                return Value(Null{});
            case 1:
                return Value(u(2) == 0);
            case 2:
                return Value(any_int());
            case 3:
                return Value(text());
            case 4:
                return Value(any_float());
            case 5: {
                List l;
                for (uint64_t n = u(5); n > 0; --n) l.items.push_back(json(depth + 1));
                return Value(std::move(l));
            }
            default: {
                Object o;
                for (uint64_t n = u(5); n > 0; --n) {
                    std::string k = "k" + std::to_string(u(1000)) + (u(2) ? "é" : "");
                    if (std::find(o.keys.begin(), o.keys.end(), k) != o.keys.end()) continue;
                    o.keys.push_back(std::move(k));
                    o.values.push_back(json(depth + 1));
                }
                return Value(std::move(o));
            }
        }
    }
    Value of(Field f) {
        switch (f) {
            case kBool:
                return Value(u(2) == 0);
            case kInt:
                return Value(any_int());
            case kFloat:
                return Value(any_float());
            case kText:
                return Value(text());
            case kBytes:
                return Value(Bytes{bytes()});
            case kTime:
                return Value(Timestamp{any_int()});
            case kVec32: {
                VectorF32 v;
                for (int k = 0; k < 5; ++k) v.v.push_back(static_cast<float>(any_float()));
                return Value(std::move(v));
            }
            case kVec16: {
                VectorF16 v;
                for (int k = 0; k < 3; ++k) v.v.push_back(static_cast<uint16_t>(rng()));
                return Value(std::move(v));
            }
            case kListInt: {
                List l;
                for (uint64_t n = u(300); n > 0; --n) l.items.push_back(Value(any_int()));
                return Value(std::move(l));
            }
            default:
                return json(1);
        }
    }
    // Any subset of the fields, in any order, some given as null.
    Doc doc() {
        Doc d;
        std::vector<uint16_t> order(kFieldCount);
        std::iota(order.begin(), order.end(), uint16_t{0});
        std::shuffle(order.begin(), order.end(), rng);
        for (uint16_t f : order) {
            const uint64_t pick = u(4);
            if (pick == 0) continue;
            d.emplace_back(f, pick == 1 ? Value(Null{}) : of(static_cast<Field>(f)));
        }
        return d;
    }
};

// What decode() gives back for `v`: objects' keys sorted, as they are stored.
Value stored(const Value& v) {
    if (auto* l = std::get_if<List>(&v.rep)) {
        List out;
        for (const Value& x : l->items) out.items.push_back(stored(x));
        return Value(std::move(out));
    }
    if (auto* o = std::get_if<Object>(&v.rep)) {
        std::vector<size_t> order(o->keys.size());
        std::iota(order.begin(), order.end(), size_t{0});
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return o->keys[a] < o->keys[b]; });
        Object out;
        for (size_t i : order) {
            out.keys.push_back(o->keys[i]);
            out.values.push_back(stored(o->values[i]));
        }
        return Value(std::move(out));
    }
    return v;
}

Doc stored(const Doc& d) {
    Doc out;
    for (const auto& [s, v] : d) {
        if (!v.is_null()) out.emplace_back(s, stored(v));
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return out;
}

// ---- tests

TEST(DocCodec, EveryValueKindIsWrittenByteForByteAsTheLayoutSaysAndReadsBack) {
    const Schema schema = every_kind();
    Gen g;
    for (int n = 0; n < 3000; ++n) {
        const Doc doc = g.doc();
        std::vector<std::byte> body;
        ASSERT_TRUE(encode_doc("c", schema, doc, body).is_ok()) << n;
        ASSERT_EQ(body, oracle_doc(kFieldCount, doc)) << "document " << n;
        ASSERT_TRUE(validate_body(body, 0).is_ok()) << n;
        ASSERT_EQ(DocView(body).decode(), stored(doc)) << n;
    }
}

TEST(DocCodec, KnownBytes) {
    // Pinned by hand from value.h, so the oracle above cannot drift with the encoder.
    const Schema schema = every_kind();
    const Doc doc{{kInt, Value(int64_t{-65})}, {kText, Value("é")}, {kBool, Value(true)}};
    std::vector<std::byte> body;
    ASSERT_TRUE(encode_doc("c", schema, doc, body).is_ok());
    const std::vector<uint8_t> want = {0x04,                     // four slots
                                       0x02,                     // b: true
                                       0x03, 0x81, 0x01,         // i: zigzag(-65) = 129
                                       0x00,                     // f: null
                                       0x05, 0x02, 0xC3, 0xA9};  // t: "é"
    ASSERT_EQ(body.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(uint8_t(body[i]), want[i]) << i;
}

TEST(DocCodec, AReusedBufferHoldsNothingOfTheLastDocument) {
    const Schema schema = every_kind();
    Gen g;
    std::vector<std::byte> scratch;  // as a block's scratch_: cleared, then encoded into
    for (int n = 0; n < 500; ++n) {
        const Doc doc = g.doc();
        scratch.clear();
        ASSERT_TRUE(encode_doc("c", schema, doc, scratch).is_ok());
        std::vector<std::byte> fresh;
        ASSERT_TRUE(encode_doc("c", schema, doc, fresh).is_ok());
        ASSERT_EQ(scratch, fresh) << "document " << n << " after a larger one";
    }
    // A big document then a small one: only the small one's bytes remain.
    Doc big{{kText, Value(std::string(5000, 'z'))}};
    Doc small{{kBool, Value(false)}};
    scratch.clear();
    ASSERT_TRUE(encode_doc("c", schema, big, scratch).is_ok());
    scratch.clear();
    ASSERT_TRUE(encode_doc("c", schema, small, scratch).is_ok());
    EXPECT_EQ(scratch, oracle_doc(kFieldCount, small));
}

TEST(DocCodec, AppendsAfterWhatTheBufferHeldAndARefusalLeavesItAsItWas) {
    const Schema schema = every_kind();
    const std::vector<std::byte> prefix = {std::byte{0xAB}, std::byte{0xCD}};
    std::vector<std::byte> out = prefix;
    const Doc doc{{kInt, Value(int64_t{300})}, {kJson, Value(List{{Value(1), Value("x")}})}};
    ASSERT_TRUE(encode_doc("c", schema, doc, out).is_ok());
    Bytes_ want = prefix;
    const Bytes_ body = oracle_doc(kFieldCount, doc);
    want.insert(want.end(), body.begin(), body.end());
    EXPECT_EQ(out, want);

    // Refused after earlier slots were written: text in an int list, a bad key, bad UTF-8.
    const std::vector<Doc> refused = {
        {{kInt, Value(int64_t{1})}, {kListInt, Value(List{{Value(1), Value("two")}})}},
        {{kText, Value("fine")}, {kJson, Value(Object{{"a", "a"}, {Value(1), Value(2)}})}},
        {{kInt, Value(int64_t{1})}, {kText, Value(std::string("\xC3", 1))}},
        {{kText, Value("fine")}, {kVec32, Value(VectorF32{{1, 2}})}},
    };
    for (size_t i = 0; i < refused.size(); ++i) {
        std::vector<std::byte> before = out;
        EXPECT_EQ(encode_doc("c", schema, refused[i], out).code(), Code::invalid_argument) << i;
        EXPECT_EQ(out, before) << "refusal " << i << " left bytes behind";
    }
}

// Lengths of three varint bytes (16 KiB and more) for text, bytes, a list's and an object's
// contents, which the random documents above do not reach; and a document past the size limit
// refused with the buffer as it was.
TEST(DocCodec, LongLengthsAndTheSizeLimit) {
    const Schema schema = every_kind();
    List many;
    for (int i = 0; i < 10000; ++i) many.items.push_back(Value(int64_t{i * 37}));
    Object keys;
    for (int i = 0; i < 2000; ++i) {
        keys.keys.push_back("key-" + std::to_string(i));
        keys.values.push_back(Value(int64_t{i}));
    }
    std::string text;
    for (int i = 0; i < 2500; ++i) text += "abcdefg\xC3\xA9";  // 22,500 bytes, ASCII and not
    const Doc doc{{kText, Value(text)},
                  {kBytes, Value(Bytes{std::string(20000, '\x7F')})},
                  {kListInt, Value(many)},
                  {kJson, Value(keys)}};
    std::vector<std::byte> out = {std::byte{1}};
    ASSERT_TRUE(encode_doc("c", schema, doc, out).is_ok());
    Bytes_ want = {std::byte{1}};
    const Bytes_ body = oracle_doc(kFieldCount, doc);
    want.insert(want.end(), body.begin(), body.end());
    ASSERT_EQ(out, want);
    EXPECT_EQ(DocView(std::span<const std::byte>(out).subspan(1)).decode(), stored(doc));

    const std::vector<std::byte> before = out;
    const Doc huge{{kInt, Value(int64_t{7})}, {kText, Value(std::string(17u << 20, 'x'))}};
    EXPECT_EQ(encode_doc("c", schema, huge, out).code(), Code::limit_exceeded);
    EXPECT_EQ(out, before) << "a refusal for size left bytes behind";
}

TEST(DocCodec, WideSchemasAndSlotsGivenTwice) {
    // Up to 64 fields the slots' values are found on the stack, past it in a vector: both ways.
    for (size_t fields : {size_t{64}, size_t{100}}) {
        Schema schema;
        for (size_t i = 0; i < fields; ++i) {
            FieldDesc f;
            f.name = "f" + std::to_string(i);
            f.type = make_type(BaseType::Int);
            schema.fields.push_back(f);
        }
        const uint16_t last = static_cast<uint16_t>(fields - 1);
        const Doc doc{{last, Value(int64_t{-1})},
                      {0, Value(int64_t{5})},
                      {40, Value(Null{})},
                      {uint16_t(last - 1), Value(int64_t{1} << 40)}};
        std::vector<std::byte> out;
        ASSERT_TRUE(encode_doc("c", schema, doc, out).is_ok()) << fields;
        EXPECT_EQ(out, oracle_doc(fields, doc)) << fields;
        EXPECT_EQ(DocView(out).decode(), stored(doc)) << fields;
        for (uint16_t twice : {uint16_t{0}, uint16_t{40}, last}) {
            const Doc dup{
                {twice, Value(int64_t{1})}, {7, Value(int64_t{2})}, {twice, Value(int64_t{3})}};
            std::vector<std::byte> none;
            const Status st = encode_doc("c", schema, dup, none);
            EXPECT_EQ(st.code(), Code::invalid_argument) << fields << " slot " << twice;
            EXPECT_NE(st.message().find("given twice"), std::string::npos) << st.message();
            EXPECT_TRUE(none.empty());
        }
    }
}

TEST(DocCodec, NestingStopsAt64DeepWithoutWritingPastItsRoom) {
    Schema schema;
    FieldDesc f;
    f.name = "j";
    f.type = make_type(BaseType::Json);
    schema.fields.push_back(f);
    auto nest = [](int depth) {
        Value v(int64_t{7});
        for (int d = 0; d < depth; ++d) v = Value(List{{Value("x"), std::move(v)}});
        return v;
    };
    std::vector<std::byte> out;
    const Doc ok{{0, nest(64)}};
    ASSERT_TRUE(encode_doc("c", schema, ok, out).is_ok());
    EXPECT_EQ(out, oracle_doc(1, ok));
    EXPECT_TRUE(validate_body(out, 0).is_ok());
    std::vector<std::byte> refused;
    EXPECT_EQ(encode_doc("c", schema, Doc{{0, nest(65)}}, refused).code(), Code::limit_exceeded);
    EXPECT_EQ(encode_doc("c", schema, Doc{{0, nest(500)}}, refused).code(), Code::limit_exceeded);
    EXPECT_TRUE(refused.empty());
}

}  // namespace
}  // namespace fenec::engine::doc_codec_test
