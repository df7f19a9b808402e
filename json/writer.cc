// json/writer.cc: the JSON writer (json/writer.h).
#include "json/writer.h"

#include <array>
#include <cassert>
#include <charconv>
#include <cmath>

namespace fenec::json {
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

}  // namespace

void Writer::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    assert((open_.empty() || open_.back() == '[') && "an object member needs a key");
    assert(!(open_.empty() && need_comma_) && "one top-level value per writer");
    if (need_comma_) out_.push_back(',');
}

void Writer::begin_object() {
    before_value();
    out_.push_back('{');
    open_.push_back('{');
    need_comma_ = false;
}

void Writer::end_object() {
    assert(!open_.empty() && open_.back() == '{' && !after_key_);
    out_.push_back('}');
    open_.pop_back();
    need_comma_ = true;
}

void Writer::begin_array() {
    before_value();
    out_.push_back('[');
    open_.push_back('[');
    need_comma_ = false;
}

void Writer::end_array() {
    assert(!open_.empty() && open_.back() == '[');
    out_.push_back(']');
    open_.pop_back();
    need_comma_ = true;
}

void Writer::key(std::string_view name) {
    assert(!open_.empty() && open_.back() == '{' && !after_key_);
    if (need_comma_) out_.push_back(',');
    append_quoted(out_, name);
    out_.push_back(':');
    after_key_ = true;
}

void Writer::string(std::string_view utf8) {
    before_value();
    append_quoted(out_, utf8);
    need_comma_ = true;
}

void Writer::int64(int64_t v) {
    before_value();
    char buf[24];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    need_comma_ = true;
}

void Writer::uint64(uint64_t v) {
    before_value();
    char buf[24];
    out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    need_comma_ = true;
}

void Writer::float64(double v) {
    if (!std::isfinite(v)) {
        assert(false && "a non-finite float never enters Fenec (fenecql.md §5.1)");
        null();
        return;
    }
    before_value();
    append_float(out_, v);
    need_comma_ = true;
}

void Writer::float32(float v) {
    if (!std::isfinite(v)) {
        assert(false && "a non-finite vector component never enters Fenec (fenecql.md §5.1)");
        null();
        return;
    }
    before_value();
    append_float(out_, v);
    need_comma_ = true;
}

void Writer::boolean(bool v) {
    before_value();
    out_ += v ? "true" : "false";
    need_comma_ = true;
}

void Writer::null() {
    before_value();
    out_ += "null";
    need_comma_ = true;
}

void Writer::raw(std::string_view json) {
    before_value();
    out_.append(json);
    need_comma_ = true;
}

}  // namespace fenec::json
