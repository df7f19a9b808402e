// ql/json_writer.cc: the JSON writer, the §12.2 value writer and base64 (ql/json_writer.h).
#include "ql/json_writer.h"

#include <array>
#include <cassert>
#include <charconv>
#include <cmath>

#include "ql/compare.h"
#include "ql/timestamp.h"

namespace fenec::ql {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kHexDigits = "0123456789abcdef";

// The length of the well-formed UTF-8 sequence starting at s[i] (a byte >= 0x80), or 0 when it
// is ill-formed: a bad lead, a missing continuation, an overlong form, a surrogate or > U+10FFFF.
size_t utf8_sequence_length(std::string_view s, size_t i) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char lead = byte(i);
    size_t n;
    uint32_t cp;
    if (lead >= 0xC2 && lead <= 0xDF) {
        n = 2, cp = lead & 0x1Fu;
    } else if ((lead & 0xF0) == 0xE0) {
        n = 3, cp = lead & 0x0Fu;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        n = 4, cp = lead & 0x07u;
    } else {
        return 0;
    }
    if (s.size() - i < n) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (byte(i + k) & 0x3Fu);
    }
    const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

// Whether an ASCII byte must be escaped.
bool needs_escape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

void append_escape(std::string& out, unsigned char c) {
    switch (c) {
        case '"':
            out += "\\\"";
            return;
        case '\\':
            out += "\\\\";
            return;
        case '\b':
            out += "\\b";
            return;
        case '\f':
            out += "\\f";
            return;
        case '\n':
            out += "\\n";
            return;
        case '\r':
            out += "\\r";
            return;
        case '\t':
            out += "\\t";
            return;
        default:
            out += "\\u00";
            out.push_back(kHexDigits[c >> 4]);
            out.push_back(kHexDigits[c & 0xF]);
    }
}

void append_quoted(std::string& out, std::string_view s) {
    out.push_back('"');
    size_t i = 0;
    while (i < s.size()) {
        size_t run = i;  // copy plain ASCII in one append
        while (run < s.size() && static_cast<unsigned char>(s[run]) < 0x80 &&
               !needs_escape(static_cast<unsigned char>(s[run]))) {
            ++run;
        }
        out.append(s.substr(i, run - i));
        if (run == s.size()) break;
        const auto c = static_cast<unsigned char>(s[run]);
        if (c < 0x80) {
            append_escape(out, c);
            i = run + 1;
        } else if (const size_t n = utf8_sequence_length(s, run); n > 0) {
            out.append(s.substr(run, n));
            i = run + n;
        } else {
            out.append(kReplacement);
            i = run + 1;
        }
    }
    out.push_back('"');
}

// Appends to_chars' shortest form of `v`, then `.0` when it shows neither `.` nor an exponent.
template <class Float>
void append_float(std::string& out, Float v) {
    std::array<char, 64> buf;
    const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    const std::string_view text(buf.data(), static_cast<size_t>(r.ptr - buf.data()));
    out.append(text);
    if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

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

void JsonWriter::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    assert((open_.empty() || open_.back() == '[') && "an object member needs a key");
    assert(!(open_.empty() && need_comma_) && "one top-level value per writer");
    if (need_comma_) out_.push_back(',');
}

void JsonWriter::begin_object() {
    before_value();
    out_.push_back('{');
    open_.push_back('{');
    need_comma_ = false;
}

void JsonWriter::end_object() {
    assert(!open_.empty() && open_.back() == '{' && !after_key_);
    out_.push_back('}');
    open_.pop_back();
    need_comma_ = true;
}

void JsonWriter::begin_array() {
    before_value();
    out_.push_back('[');
    open_.push_back('[');
    need_comma_ = false;
}

void JsonWriter::end_array() {
    assert(!open_.empty() && open_.back() == '[');
    out_.push_back(']');
    open_.pop_back();
    need_comma_ = true;
}

void JsonWriter::key(std::string_view name) {
    assert(!open_.empty() && open_.back() == '{' && !after_key_);
    if (need_comma_) out_.push_back(',');
    append_quoted(out_, name);
    out_.push_back(':');
    after_key_ = true;
}

void JsonWriter::string(std::string_view utf8) {
    before_value();
    append_quoted(out_, utf8);
    need_comma_ = true;
}

void JsonWriter::int64(int64_t v) {
    before_value();
    char buf[24];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    need_comma_ = true;
}

void JsonWriter::uint64(uint64_t v) {
    before_value();
    char buf[24];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    need_comma_ = true;
}

void JsonWriter::float64(double v) {
    if (!std::isfinite(v)) {
        assert(false && "a non-finite float never enters Fenec (fenecql.md §5.1)");
        null();
        return;
    }
    before_value();
    append_float(out_, v);
    need_comma_ = true;
}

void JsonWriter::float32(float v) {
    if (!std::isfinite(v)) {
        assert(false && "a non-finite vector component never enters Fenec (fenecql.md §5.1)");
        null();
        return;
    }
    before_value();
    append_float(out_, v);
    need_comma_ = true;
}

void JsonWriter::boolean(bool v) {
    before_value();
    out_ += v ? "true" : "false";
    need_comma_ = true;
}

void JsonWriter::null() {
    before_value();
    out_ += "null";
    need_comma_ = true;
}

void JsonWriter::raw(std::string_view json) {
    before_value();
    out_.append(json);
    need_comma_ = true;
}

void write_value(JsonWriter& w, const engine::Value& v) {
    struct Visit {
        JsonWriter& w;
        void operator()(const engine::Null&) { w.null(); }
        void operator()(bool b) { w.boolean(b); }
        void operator()(int64_t i) { w.int64(i); }
        void operator()(double d) { w.float64(d); }
        void operator()(const std::string& s) { w.string(s); }
        void operator()(const engine::Bytes& b) { w.string(base64_encode(b.data)); }
        void operator()(const engine::Timestamp& t) { w.string(format_timestamp(t.ms)); }
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
