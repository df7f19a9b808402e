// test/support/json_value.cc: the test-only JSON reader of json_value.h, a recursive descent
// over the text with one byte of lookahead.
#include "test/support/json_value.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>

namespace fenec::test {

namespace {

using engine::Value;

class Reader {
  public:
    explicit Reader(std::string_view text) : s_(text) {}

    std::optional<Value> document(std::string* error) {
        std::optional<Value> v = value(0);
        skip_space();
        if (v && at_ < s_.size()) v = fail("text after the value");
        if (!v && error) *error = error_ + " at byte " + std::to_string(at_);
        return v;
    }

  private:
    std::optional<Value> fail(std::string what) {
        if (error_.empty()) error_ = std::move(what);
        return std::nullopt;
    }

    void skip_space() {
        while (at_ < s_.size() &&
               (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) {
            ++at_;
        }
    }

    bool take(char c) {
        skip_space();
        if (at_ < s_.size() && s_[at_] == c) {
            ++at_;
            return true;
        }
        return false;
    }

    bool word(std::string_view w) {
        if (s_.substr(at_, w.size()) != w) return false;
        at_ += w.size();
        return true;
    }

    std::optional<Value> value(size_t depth) {
        if (depth > json_nesting_max) return fail("nesting too deep");
        skip_space();
        if (at_ >= s_.size()) return fail("a value expected");
        const char c = s_[at_];
        if (c == '{') return object(depth);
        if (c == '[') return array(depth);
        if (c == '"') {
            std::optional<std::string> s = string();
            if (!s) return std::nullopt;
            return Value(std::move(*s));
        }
        if (word("true")) return Value(true);
        if (word("false")) return Value(false);
        if (word("null")) return Value();
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        return fail("unexpected character");
    }

    std::optional<Value> array(size_t depth) {
        ++at_;  // [
        engine::List list;
        if (take(']')) return Value(std::move(list));
        do {
            std::optional<Value> item = value(depth + 1);
            if (!item) return std::nullopt;
            list.items.push_back(std::move(*item));
        } while (take(','));
        if (!take(']')) return fail("`,` or `]` expected");
        return Value(std::move(list));
    }

    std::optional<Value> object(size_t depth) {
        ++at_;  // {
        engine::Object object;
        if (take('}')) return Value(std::move(object));
        do {
            skip_space();
            if (at_ >= s_.size() || s_[at_] != '"') return fail("a member name expected");
            std::optional<std::string> key = string();
            if (!key) return std::nullopt;
            if (!take(':')) return fail("`:` expected");
            std::optional<Value> v = value(depth + 1);
            if (!v) return std::nullopt;
            object.keys.push_back(std::move(*key));
            object.values.push_back(std::move(*v));
        } while (take(','));
        if (!take('}')) return fail("`,` or `}` expected");
        return Value(std::move(object));
    }

    std::optional<Value> number() {
        const size_t start = at_;
        bool integral = true;
        if (s_[at_] == '-') ++at_;
        const size_t digits = at_;
        while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
        if (at_ == digits) return fail("a digit expected");
        if (s_[digits] == '0' && at_ - digits > 1) return fail("a leading zero");
        if (at_ < s_.size() && s_[at_] == '.') {
            integral = false;
            const size_t frac = ++at_;
            while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
            if (at_ == frac) return fail("a digit expected after `.`");
        }
        if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
            integral = false;
            ++at_;
            if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
            const size_t exp = at_;
            while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
            if (at_ == exp) return fail("a digit expected in the exponent");
        }
        const std::string_view text = s_.substr(start, at_ - start);
        if (integral) {
            int64_t i = 0;
            auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
            if (ec != std::errc() || end != text.data() + text.size()) {
                return fail("an integer outside int64");
            }
            return Value(i);
        }
        const std::string copy(text);
        return Value(std::strtod(copy.c_str(), nullptr));
    }

    static void put_utf8(std::string& out, uint32_t cp) {
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else if (cp < 0x10000) {
            out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
            out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
    }

    std::optional<uint32_t> hex4() {
        if (at_ + 4 > s_.size()) return std::nullopt;
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = s_[at_++];
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= c - '0';
            else if (c >= 'a' && c <= 'f')
                v |= c - 'a' + 10;
            else if (c >= 'A' && c <= 'F')
                v |= c - 'A' + 10;
            else
                return std::nullopt;
        }
        return v;
    }

    // A string starting at `"`; escapes decoded, \u surrogate pairs joined.
    std::optional<std::string> string() {
        ++at_;  // "
        std::string out;
        while (at_ < s_.size()) {
            const char c = s_[at_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) {
                fail("a control character in a string");
                return std::nullopt;
            }
            if (c != '\\') {
                out.push_back(c);
                continue;
            }
            if (at_ >= s_.size()) break;
            const char e = s_[at_++];
            switch (e) {
                case '"':
                    out.push_back('"');
                    break;
                case '\\':
                    out.push_back('\\');
                    break;
                case '/':
                    out.push_back('/');
                    break;
                case 'b':
                    out.push_back('\b');
                    break;
                case 'f':
                    out.push_back('\f');
                    break;
                case 'n':
                    out.push_back('\n');
                    break;
                case 'r':
                    out.push_back('\r');
                    break;
                case 't':
                    out.push_back('\t');
                    break;
                case 'u': {
                    std::optional<uint32_t> cp = hex4();
                    if (cp && *cp >= 0xD800 && *cp < 0xDC00 && word("\\u")) {
                        std::optional<uint32_t> low = hex4();
                        if (!low || *low < 0xDC00 || *low >= 0xE000)
                            cp.reset();
                        else
                            cp = 0x10000 + ((*cp - 0xD800) << 10) + (*low - 0xDC00);
                    }
                    if (!cp || (*cp >= 0xD800 && *cp < 0xE000)) {
                        fail("a bad \\u escape");
                        return std::nullopt;
                    }
                    put_utf8(out, *cp);
                    break;
                }
                default:
                    fail("an unknown escape");
                    return std::nullopt;
            }
        }
        fail("an unterminated string");
        return std::nullopt;
    }

    std::string_view s_;
    size_t at_ = 0;
    std::string error_;
};

}  // namespace

std::optional<engine::Value> parse_json(std::string_view text, std::string* error) {
    return Reader(text).document(error);
}

const engine::Value* json_member(const engine::Value& v, std::string_view key) {
    const auto* o = std::get_if<engine::Object>(&v.rep);
    if (!o) return nullptr;
    for (size_t i = 0; i < o->keys.size(); ++i) {
        if (o->keys[i] == key) return &o->values[i];
    }
    return nullptr;
}

}  // namespace fenec::test
