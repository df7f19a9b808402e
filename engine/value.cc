// engine/value.cc: the document body codec of engine/value.h. The encoder checks values against
// their fields; the validator checks stored bodies byte by byte so that a decoder reading a
// validated body never leaves it.
#include "engine/value.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <numeric>

#include "engine/limits.h"

namespace fenec::engine {

bool VectorF32::operator==(const VectorF32& o) const {
    return v.size() == o.v.size() &&
           (v.empty() || std::memcmp(v.data(), o.v.data(), v.size() * sizeof(float)) == 0);
}
bool List::operator==(const List& o) const { return items == o.items; }
bool Object::operator==(const Object& o) const { return keys == o.keys && values == o.values; }
bool Value::operator==(const Value& o) const {
    if (rep.index() != o.rep.index()) return false;
    if (auto* d = std::get_if<double>(&rep)) {
        return std::bit_cast<uint64_t>(*d) == std::bit_cast<uint64_t>(std::get<double>(o.rep));
    }
    return rep == o.rep;
}

const char* Value::kind_name() const {
    static const char* names[] = {"null",      "bool",   "int",    "float",  "text", "bytes",
                                  "timestamp", "vector", "vector", "list", "object"};
    return names[rep.index()];
}

namespace {

enum Tag : uint8_t {
    kNull = 0x00, kFalse = 0x01, kTrue = 0x02, kInt = 0x03, kFloat = 0x04, kText = 0x05,
    kBytes = 0x06, kTimestamp = 0x07, kVecF32 = 0x08, kVecF16 = 0x09, kList = 0x0A, kObject = 0x0B,
};

// null_slots' byte writer; the document encoder writes through a cursor (below).
void put_byte(std::vector<std::byte>& out, uint8_t b) { out.push_back(std::byte(b)); }
uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

bool valid_utf8(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const auto* end = p + s.size();
    while (p < end) {
        unsigned char c = *p;
        if (c < 0x80) {
            // Eight ASCII bytes at a time: most text is ASCII, and a byte at a time cost as
            // much as the rest of a short document's encoding.
            ++p;
            while (end - p >= 8) {
                uint64_t word;
                std::memcpy(&word, p, 8);
                if (word & 0x8080808080808080ull) break;
                p += 8;
            }
            continue;
        }
        int n;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
        else return false;
        if (end - p <= n) return false;
        for (int i = 1; i <= n; ++i) {
            if ((p[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        p += n + 1;
    }
    return true;
}

// ---- writing
//
// encode_doc grows `out` once by bound_of the document (an upper bound on its encoded size),
// writes every value through a raw cursor into that room, then cuts `out` back to the bytes
// written. So a value costs a store per run of bytes (a memcpy for text, bytes and vectors), not
// a push_back with its capacity check per byte, which was a fifth of a 1,000-document block's
// time (docs/benchmarks.md, "the interval pair's last 10%"). Numbers are stored little-endian:
// the readers below memcpy them back the same way.
static_assert(std::endian::native == std::endian::little, "the body codec stores numbers as is");

constexpr size_t kVarintBytesMax = 10;

std::byte* put_uvarint(std::byte* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = std::byte(static_cast<uint8_t>(v | 0x80));
        v >>= 7;
    }
    *p++ = std::byte(static_cast<uint8_t>(v));
    return p;
}
// The same, appended to `out` (null_slots).
void put_uvarint(std::vector<std::byte>& out, uint64_t v) {
    std::byte t[kVarintBytesMax];
    out.insert(out.end(), t, put_uvarint(t, v));
}
std::byte* put_raw(std::byte* p, const void* src, size_t n) {
    if (n) std::memcpy(p, src, n);
    return p + n;
}

// An upper bound on what encode_value writes for `v` at `depth`, whatever `v`'s field (a value
// the encoder refuses writes less). A list or object past nesting_max counts nothing: the
// encoder refuses it before writing a byte of it, and the bound stays as shallow as the encoder.
size_t bound_of(const Value& v, int depth) {
    const size_t head = 1 + kVarintBytesMax;  // tag and a length, count or number
    if (auto* s = std::get_if<std::string>(&v.rep)) return head + s->size();
    if (auto* b = std::get_if<Bytes>(&v.rep)) return head + b->data.size();
    if (auto* vf = std::get_if<VectorF32>(&v.rep)) return head + 4 * vf->v.size();
    if (auto* vh = std::get_if<VectorF16>(&v.rep)) return head + 2 * vh->v.size();
    if (auto* l = std::get_if<List>(&v.rep)) {
        if (depth > limits::nesting_max) return 0;
        size_t n = head + kVarintBytesMax;
        for (const Value& x : l->items) n += bound_of(x, depth + 1);
        return n;
    }
    if (auto* o = std::get_if<Object>(&v.rep)) {
        if (depth > limits::nesting_max) return 0;
        size_t n = head + kVarintBytesMax;
        const size_t pairs = std::min(o->keys.size(), o->values.size());
        for (size_t i = 0; i < pairs; ++i) {
            n += kVarintBytesMax + o->keys[i].size() + bound_of(o->values[i], depth + 1);
        }
        return n;
    }
    return head;  // null, bool, int, float (1 + 8), timestamp
}

// A list or object written at `head`: its tag, the byte length of its rest, then the rest, which
// was written kVarintBytesMax bytes further on (its length unknown until then) and is moved
// down to follow the shortest varint. Returns the end of the value.
std::byte* close_container(std::byte* head, uint8_t tag, const std::byte* rest,
                           const std::byte* rest_end) {
    const size_t n = static_cast<size_t>(rest_end - rest);
    head[0] = std::byte(tag);
    std::byte* at = put_uvarint(head + 1, n);
    std::memmove(at, rest, n);
    return at + n;
}

struct EncodeCtx {
    std::string_view collection;
    std::string_view field;
};

Status misfit(const EncodeCtx& c, const std::string& expected, const std::string& found) {
    return Status::error(Code::invalid_argument,
                         "collection `" + std::string(c.collection) + "`, field `" +
                             std::string(c.field) + "`: expected " + expected + ", found " + found);
}

Status too_deep(const EncodeCtx& c) {
    return Status::error(Code::limit_exceeded, "collection `" + std::string(c.collection) +
                                                   "`, field `" + std::string(c.field) +
                                                   "`: lists and objects nest deeper than 64");
}

// Each writes at `p`, which has room for bound_of the value, and moves it past what it wrote.
// type == nullptr: any json value.
Status encode_value(const EncodeCtx& c, const Value& v, const TypeDesc* type, int depth,
                    std::byte*& p);

Status encode_list(const EncodeCtx& c, const List& l, const TypeDesc* item, int depth,
                   std::byte*& p) {
    if (depth > limits::nesting_max) return too_deep(c);
    std::byte* const rest = p + 1 + kVarintBytesMax;
    std::byte* q = put_uvarint(rest, l.items.size());
    for (const Value& x : l.items) FENEC_RETURN_IF_ERROR(encode_value(c, x, item, depth + 1, q));
    p = close_container(p, kList, rest, q);
    return Status::ok();
}

Status encode_object(const EncodeCtx& c, const Object& o, int depth, std::byte*& p) {
    if (depth > limits::nesting_max) return too_deep(c);
    if (o.keys.size() != o.values.size()) return misfit(c, "json object", "malformed object");
    std::vector<size_t> order(o.keys.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return o.keys[a] < o.keys[b]; });
    std::byte* const rest = p + 1 + kVarintBytesMax;
    std::byte* q = put_uvarint(rest, o.keys.size());
    for (size_t i = 0; i < order.size(); ++i) {
        const std::string& k = o.keys[order[i]];
        if (i > 0 && o.keys[order[i - 1]] == k) {
            return Status::error(Code::invalid_argument,
                                 "collection `" + std::string(c.collection) + "`, field `" +
                                     std::string(c.field) + "`: json object has key `" + k +
                                     "` twice");
        }
        if (k.size() > limits::json_key_bytes_max || !valid_utf8(k)) {
            return misfit(c, "json object keys of valid UTF-8 up to 65535 bytes", "another key");
        }
        q = put_uvarint(q, k.size());
        q = put_raw(q, k.data(), k.size());
        FENEC_RETURN_IF_ERROR(encode_value(c, o.values[order[i]], nullptr, depth + 1, q));
    }
    p = close_container(p, kObject, rest, q);
    return Status::ok();
}

Status encode_value(const EncodeCtx& c, const Value& v, const TypeDesc* type, int depth,
                    std::byte*& p) {
    // Named only when a value does not fit: building the name costs more than the encoding.
    struct Expected {
        const TypeDesc* type;
        operator std::string() const { return type ? type->to_string() : "a json value"; }
    } expected{type};
    if (v.is_null()) {
        *p++ = std::byte(kNull);
        return Status::ok();
    }
    const BaseType base = type ? type->base : BaseType::Json;
    if (auto* b = std::get_if<bool>(&v.rep)) {
        if (base != BaseType::Bool && base != BaseType::Json) return misfit(c, expected, "bool");
        *p++ = std::byte(*b ? kTrue : kFalse);
    } else if (auto* i = std::get_if<int64_t>(&v.rep)) {
        if (base != BaseType::Int && base != BaseType::Json) return misfit(c, expected, "int");
        *p++ = std::byte(kInt);
        p = put_uvarint(p, zigzag(*i));
    } else if (auto* d = std::get_if<double>(&v.rep)) {
        if (base != BaseType::Float && base != BaseType::Json) return misfit(c, expected, "float");
        *p++ = std::byte(kFloat);
        p = put_raw(p, d, 8);
    } else if (auto* s = std::get_if<std::string>(&v.rep)) {
        if (base != BaseType::Text && base != BaseType::Json) return misfit(c, expected, "text");
        if (!valid_utf8(*s)) return misfit(c, expected, "text that is not valid UTF-8");
        *p++ = std::byte(kText);
        p = put_uvarint(p, s->size());
        p = put_raw(p, s->data(), s->size());
    } else if (auto* by = std::get_if<Bytes>(&v.rep)) {
        if (base != BaseType::Bytes) return misfit(c, expected, "bytes");
        *p++ = std::byte(kBytes);
        p = put_uvarint(p, by->data.size());
        p = put_raw(p, by->data.data(), by->data.size());
    } else if (auto* t = std::get_if<Timestamp>(&v.rep)) {
        if (base != BaseType::Timestamp) return misfit(c, expected, "timestamp");
        *p++ = std::byte(kTimestamp);
        p = put_uvarint(p, zigzag(t->ms));
    } else if (auto* vf = std::get_if<VectorF32>(&v.rep)) {
        if (base != BaseType::Vector || type->elem != VectorElem::f32) {
            return misfit(c, expected, "vector<" + std::to_string(vf->v.size()) + ">");
        }
        if (vf->v.size() != type->dim) {
            return misfit(c, expected, "vector<" + std::to_string(vf->v.size()) + ">");
        }
        *p++ = std::byte(kVecF32);
        p = put_uvarint(p, vf->v.size());
        p = put_raw(p, vf->v.data(), 4 * vf->v.size());
    } else if (auto* vh = std::get_if<VectorF16>(&v.rep)) {
        if (base != BaseType::Vector || type->elem != VectorElem::f16 || vh->v.size() != type->dim) {
            return misfit(c, expected, "vector16<" + std::to_string(vh->v.size()) + ">");
        }
        *p++ = std::byte(kVecF16);
        p = put_uvarint(p, vh->v.size());
        p = put_raw(p, vh->v.data(), 2 * vh->v.size());
    } else if (auto* l = std::get_if<List>(&v.rep)) {
        if (base == BaseType::List) return encode_list(c, *l, type->item.get(), depth, p);
        if (base == BaseType::Json) return encode_list(c, *l, nullptr, depth, p);
        return misfit(c, expected, "list");
    } else if (auto* o = std::get_if<Object>(&v.rep)) {
        if (base != BaseType::Json) return misfit(c, expected, "object");
        return encode_object(c, *o, depth, p);
    }
    return Status::ok();
}

// ---- reading

struct Reader {
    const std::byte* base;
    const std::byte* p;
    const std::byte* end;
    uint64_t base_offset;

    uint64_t pos() const { return base_offset + static_cast<uint64_t>(p - base); }
    Status fail(const std::string& what) const {
        return Status::error(Code::corruption, what + " at offset " + std::to_string(pos()),
                             Detail{.offset = pos()});
    }
    Status uvarint(uint64_t& v) {
        v = 0;
        for (int i = 0; i < 10; ++i) {
            if (p >= end) return fail("varint runs past the end of a document");
            uint8_t b = std::to_integer<uint8_t>(*p++);
            if (i == 9 && b > 1) return fail("varint overflows 64 bits");
            v |= uint64_t{b & 0x7Fu} << (7 * i);
            if (!(b & 0x80)) {
                if (b == 0 && i > 0) return fail("varint not in shortest form");
                return Status::ok();
            }
        }
        return fail("varint longer than 10 bytes");
    }
    Status need(uint64_t n) {
        if (static_cast<uint64_t>(end - p) < n) return fail("value runs past the end of a document");
        return Status::ok();
    }
};

Status check_value(Reader& r, int depth);

Status check_container(Reader& r, int depth, bool object) {
    if (depth > limits::nesting_max) return r.fail("lists and objects nest deeper than 64");
    uint64_t len = 0;
    FENEC_RETURN_IF_ERROR(r.uvarint(len));
    FENEC_RETURN_IF_ERROR(r.need(len));
    Reader inner{r.base, r.p, r.p + len, r.base_offset};
    uint64_t count = 0;
    FENEC_RETURN_IF_ERROR(inner.uvarint(count));
    std::string_view prev_key;
    for (uint64_t i = 0; i < count; ++i) {
        if (object) {
            uint64_t klen = 0;
            FENEC_RETURN_IF_ERROR(inner.uvarint(klen));
            FENEC_RETURN_IF_ERROR(inner.need(klen));
            std::string_view key(reinterpret_cast<const char*>(inner.p), klen);
            if (!valid_utf8(key)) return inner.fail("json key is not valid UTF-8");
            if (i > 0 && !(prev_key < key)) return inner.fail("json keys not strictly ascending");
            prev_key = key;
            inner.p += klen;
        }
        FENEC_RETURN_IF_ERROR(check_value(inner, depth + 1));
    }
    if (inner.p != inner.end) return inner.fail("container length does not match its contents");
    r.p = inner.end;
    return Status::ok();
}

Status check_value(Reader& r, int depth) {
    FENEC_RETURN_IF_ERROR(r.need(1));
    const uint8_t tag = std::to_integer<uint8_t>(*r.p);
    ++r.p;
    uint64_t n = 0;
    switch (tag) {
        case kNull: case kFalse: case kTrue: return Status::ok();
        case kInt: case kTimestamp: return r.uvarint(n);
        case kFloat: FENEC_RETURN_IF_ERROR(r.need(8)); r.p += 8; return Status::ok();
        case kText: case kBytes: {
            FENEC_RETURN_IF_ERROR(r.uvarint(n));
            FENEC_RETURN_IF_ERROR(r.need(n));
            if (tag == kText &&
                !valid_utf8(std::string_view(reinterpret_cast<const char*>(r.p), n))) {
                return r.fail("text is not valid UTF-8");
            }
            r.p += n;
            return Status::ok();
        }
        case kVecF32: case kVecF16: {
            FENEC_RETURN_IF_ERROR(r.uvarint(n));
            if (n < 1 || n > limits::vector_dim_max) return r.fail("vector length out of range");
            const uint64_t bytes = n * (tag == kVecF32 ? 4 : 2);
            FENEC_RETURN_IF_ERROR(r.need(bytes));
            r.p += bytes;
            return Status::ok();
        }
        case kList: return check_container(r, depth, false);
        case kObject: return check_container(r, depth, true);
        default:
            --r.p;
            return r.fail("unknown value tag " + std::to_string(tag));
    }
}

// Unchecked readers for validated bodies.
uint64_t read_uvarint(const std::byte*& p) {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        uint8_t b = std::to_integer<uint8_t>(*p++);
        v |= uint64_t{b & 0x7Fu} << shift;
        if (!(b & 0x80)) return v;
    }
}

const std::byte* skip_value(const std::byte* p) {
    const uint8_t tag = std::to_integer<uint8_t>(*p++);
    switch (tag) {
        case kInt: case kTimestamp: read_uvarint(p); return p;
        case kFloat: return p + 8;
        case kText: case kBytes: case kList: case kObject: {
            uint64_t n = read_uvarint(p);
            return p + n;
        }
        case kVecF32: { uint64_t n = read_uvarint(p); return p + 4 * n; }
        case kVecF16: { uint64_t n = read_uvarint(p); return p + 2 * n; }
        default: return p;
    }
}

Value read_value(const std::byte*& p) {
    const uint8_t tag = std::to_integer<uint8_t>(*p++);
    switch (tag) {
        case kFalse: return false;
        case kTrue: return true;
        case kInt: return unzigzag(read_uvarint(p));
        case kTimestamp: return Timestamp{unzigzag(read_uvarint(p))};
        case kFloat: {
            uint64_t bits = 0;
            for (int k = 0; k < 8; ++k) bits |= std::to_integer<uint64_t>(p[k]) << (8 * k);
            p += 8;
            return std::bit_cast<double>(bits);
        }
        case kText: {
            uint64_t n = read_uvarint(p);
            std::string s(reinterpret_cast<const char*>(p), n);
            p += n;
            return s;
        }
        case kBytes: {
            uint64_t n = read_uvarint(p);
            Bytes b{std::string(reinterpret_cast<const char*>(p), n)};
            p += n;
            return b;
        }
        case kVecF32: {
            uint64_t n = read_uvarint(p);
            VectorF32 v;
            v.v.resize(n);
            std::memcpy(v.v.data(), p, n * 4);  // little-endian host (checked in CMake)
            p += n * 4;
            return v;
        }
        case kVecF16: {
            uint64_t n = read_uvarint(p);
            VectorF16 v;
            v.v.resize(n);
            std::memcpy(v.v.data(), p, n * 2);
            p += n * 2;
            return v;
        }
        case kList: {
            read_uvarint(p);
            uint64_t count = read_uvarint(p);
            List l;
            l.items.reserve(count);
            for (uint64_t i = 0; i < count; ++i) l.items.push_back(read_value(p));
            return l;
        }
        case kObject: {
            read_uvarint(p);
            uint64_t count = read_uvarint(p);
            Object o;
            for (uint64_t i = 0; i < count; ++i) {
                uint64_t klen = read_uvarint(p);
                o.keys.emplace_back(reinterpret_cast<const char*>(p), klen);
                p += klen;
                o.values.push_back(read_value(p));
            }
            return o;
        }
        default: return Null{};
    }
}

}  // namespace

// The value given for each slot of a document. Up to kInline slots live on the stack, and a bit
// per slot says which entries were set, so nothing is cleared per document: clearing them first
// (a memset) and reading an entry right after stalled, 4% of a 1,000-document block's samples.
class SlotValues {
public:
    explicit SlotValues(size_t slots) : inline_(slots <= kInline) {
        if (!inline_) heap_.resize(slots);
    }
    // False if `slot` (< slots) was set already.
    bool set(size_t slot, const Value* v) {
        if (inline_) {
            if (named_ >> slot & 1) return false;
            named_ |= uint64_t{1} << slot;
            stack_[slot] = v;
            return true;
        }
        if (heap_[slot]) return false;
        heap_[slot] = v;
        return true;
    }
    const Value* get(size_t slot) const {
        if (inline_) return named_ >> slot & 1 ? stack_[slot] : nullptr;
        return heap_[slot];
    }

private:
    static constexpr size_t kInline = 64;  // the bits of named_
    bool inline_;
    uint64_t named_ = 0;
    const Value* stack_[kInline];
    std::vector<const Value*> heap_;
};

Status encode_doc(std::string_view collection, const Schema& schema, const Doc& doc,
                  std::vector<std::byte>& out) {
    const size_t slots = schema.fields.size();
    SlotValues by_slot(slots);
    for (const auto& [slot, value] : doc) {
        if (slot >= slots || schema.fields[slot].dropped) {
            return Status::error(Code::invalid_argument, "collection `" + std::string(collection) +
                                                             "` has no field at slot " +
                                                             std::to_string(slot));
        }
        if (!by_slot.set(slot, &value)) {
            return Status::error(Code::invalid_argument,
                                 "collection `" + std::string(collection) + "`, field `" +
                                     schema.fields[slot].name + "` given twice");
        }
    }
    size_t count = 0;
    size_t bound = kVarintBytesMax;
    for (size_t s = 0; s < slots; ++s) {
        const FieldDesc& f = schema.fields[s];
        const Value* v = by_slot.get(s);
        const bool null = !v || v->is_null();
        if (!f.dropped && f.required && null) {
            return Status::error(Code::invalid_argument, "collection `" + std::string(collection) +
                                                             "`, field `" + f.name +
                                                             "` is required");
        }
        if (!null) count = s + 1;
        bound += v ? bound_of(*v, 1) : 1;
    }
    // Room for the whole body at once, cut back to what was written (or to `start` on a refusal):
    // `out` never keeps a byte past the body, so a buffer reused for the next document holds
    // nothing of this one.
    const size_t start = out.size();
    out.resize(start + bound);
    std::byte* const room = out.data() + start;
    std::byte* p = put_uvarint(room, count);
    for (size_t s = 0; s < count; ++s) {
        const Value* v = by_slot.get(s);
        if (!v) {
            *p++ = std::byte(kNull);
            continue;
        }
        const EncodeCtx ctx{collection, schema.fields[s].name};
        Status st = encode_value(ctx, *v, &schema.fields[s].type, 1, p);
        if (!st.is_ok()) {
            out.resize(start);
            return st;
        }
    }
    const size_t written = static_cast<size_t>(p - room);
    assert(written <= bound);
    out.resize(start + written);
    if (written > limits::doc_bytes_max) {
        out.resize(start);
        return Status::error(Code::limit_exceeded, "collection `" + std::string(collection) +
                                                       "`: a document is over 16 MiB encoded");
    }
    return Status::ok();
}

Status validate_body(std::span<const std::byte> body, uint64_t base_offset) {
    Reader r{body.data(), body.data(), body.data() + body.size(), base_offset};
    uint64_t count = 0;
    FENEC_RETURN_IF_ERROR(r.uvarint(count));
    if (count > limits::fields_max) return r.fail("document has more slots than 1024");
    for (uint64_t i = 0; i < count; ++i) FENEC_RETURN_IF_ERROR(check_value(r, 1));
    if (r.p != r.end) return r.fail("bytes after the last value of a document");
    return Status::ok();
}

uint32_t DocView::slot_count() const {
    if (body_.empty()) return 0;
    const std::byte* p = body_.data();
    return static_cast<uint32_t>(read_uvarint(p));
}

std::span<const std::byte> DocView::raw(uint16_t slot) const {
    if (body_.empty()) return {};
    const std::byte* p = body_.data();
    const uint64_t count = read_uvarint(p);
    if (slot >= count) return {};
    for (uint16_t i = 0; i < slot; ++i) p = skip_value(p);
    const std::byte* end = skip_value(p);
    if (std::to_integer<uint8_t>(*p) == kNull) return {};
    return {p, static_cast<size_t>(end - p)};
}

uint32_t DocView::vector_dim(std::span<const std::byte> raw) {
    if (raw.empty()) return 0;
    const std::byte* p = raw.data();
    const uint8_t tag = std::to_integer<uint8_t>(*p++);
    if (tag != kVecF32 && tag != kVecF16) return 0;
    return static_cast<uint32_t>(read_uvarint(p));  // at most limits::vector_dim_max: validated
}

void DocView::vector_into(std::span<const std::byte> raw, float* out) {
    const std::byte* p = raw.data();
    const uint8_t tag = std::to_integer<uint8_t>(*p++);
    const uint64_t n = read_uvarint(p);
    if (tag == kVecF32) {
        std::memcpy(out, p, n * 4);  // little-endian host (checked in CMake)
        return;
    }
    for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
    }
}

void DocView::raw_slots(std::span<std::span<const std::byte>> out) const {
    size_t s = 0;
    if (!body_.empty()) {
        const std::byte* p = body_.data();
        const uint64_t count = read_uvarint(p);
        for (; s < out.size() && s < count; ++s) {
            const std::byte* end = skip_value(p);
            if (std::to_integer<uint8_t>(*p) == kNull) {
                out[s] = {};
            } else {
                out[s] = {p, static_cast<size_t>(end - p)};
            }
            p = end;
        }
    }
    for (; s < out.size(); ++s) out[s] = {};
}

Value DocView::value_of(std::span<const std::byte> raw) {
    if (raw.empty()) return Null{};
    const std::byte* p = raw.data();
    return read_value(p);
}

bool DocView::is_null(uint16_t slot) const { return raw(slot).empty(); }

Value DocView::get(uint16_t slot) const { return value_of(raw(slot)); }

Doc DocView::decode() const {
    Doc doc;
    if (body_.empty()) return doc;
    const std::byte* p = body_.data();
    const uint64_t count = read_uvarint(p);
    for (uint64_t s = 0; s < count; ++s) {
        Value v = read_value(p);
        if (!v.is_null()) doc.emplace_back(static_cast<uint16_t>(s), std::move(v));
    }
    return doc;
}

std::vector<std::byte> null_slots(std::span<const std::byte> body,
                                  const std::vector<uint16_t>& slots) {
    std::vector<std::byte> out;
    if (body.empty()) return out;
    const std::byte* p = body.data();
    const uint64_t count = read_uvarint(p);
    std::vector<std::pair<const std::byte*, const std::byte*>> values;
    for (uint64_t s = 0; s < count; ++s) {
        const std::byte* start = p;
        p = skip_value(p);
        values.emplace_back(start, p);
    }
    for (uint16_t s : slots) {
        if (s < values.size()) values[s] = {nullptr, nullptr};
    }
    size_t keep = values.size();
    while (keep > 0 && (values[keep - 1].first == nullptr ||
                        std::to_integer<uint8_t>(*values[keep - 1].first) == kNull)) {
        --keep;
    }
    put_uvarint(out, keep);
    for (size_t s = 0; s < keep; ++s) {
        if (values[s].first == nullptr) put_byte(out, kNull);
        else out.insert(out.end(), values[s].first, values[s].second);
    }
    return out;
}

uint16_t f32_to_f16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
    uint32_t mant = x & 0x7FFFFFu;
    if (((x >> 23) & 0xFF) == 0xFF) {  // inf or nan
        return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0));
    }
    if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow to inf
    if (exp <= 0) {                                               // subnormal or zero
        if (exp < -10) return static_cast<uint16_t>(sign);
        mant |= 0x800000u;
        const int shift = 14 - exp;
        uint32_t half = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1);
        const uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) ++half;
        return static_cast<uint16_t>(sign | half);
    }
    uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into the exponent
    return static_cast<uint16_t>(half);
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0) {
        if (mant == 0) return std::bit_cast<float>(sign);
        while (!(mant & 0x400u)) {
            mant <<= 1;
            --exp;
        }
        ++exp;
        mant &= 0x3FFu;
    } else if (exp == 31) {
        return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
    }
    return std::bit_cast<float>(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

}  // namespace fenec::engine
