// ql/lexer.cc: FenecQL's tokens (fenecql.md §2). See lexer.h for the contract.
#include "ql/lexer.h"

#include <array>
#include <charconv>
#include <limits>
#include <system_error>

#include "ql/limits.h"

namespace fenec::ql {
namespace {

// fenecql.md §2: never a name unless backquoted.
constexpr std::array<std::string_view, 25> kReserved = {
    "and",   "as",    "asc",   "by",     "collate", "desc", "false", "from", "group",
    "has",   "in",    "is",    "limit",  "lookup",  "match", "near", "not",  "null",
    "offset", "on",   "or",    "order",  "select",  "true", "where",
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_name_start(char c) { return is_alpha(c) || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// The length of the UTF-8 sequence starting `s[i]` if it is valid, else 0.
size_t utf8_sequence(std::string_view s, size_t i) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char b = byte(i);
    if (b < 0x80) return 1;
    size_t len = 0;
    uint32_t lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        if (b == 0xE0) lo = 0xA0;  // overlong
        if (b == 0xED) hi = 0x9F;  // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        if (b == 0xF0) lo = 0x90;  // overlong
        if (b == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
        return 0;
    }
    if (i + len > s.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (size_t k = 2; k < len; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
    }
    return len;
}

// Whether a token of this kind ends an operand, for the `-` rule.
bool ends_operand(const Token& t) {
    switch (t.kind) {
        case TokenKind::word:
            return !t.reserved || keyword_equals(t.raw, "true") ||
                   keyword_equals(t.raw, "false") || keyword_equals(t.raw, "null");
        case TokenKind::quoted_name:
        case TokenKind::integer:
        case TokenKind::real:
        case TokenKind::string:
        case TokenKind::bytes:
        case TokenKind::param:
        case TokenKind::duration:
        case TokenKind::rparen:
        case TokenKind::rbracket:
        case TokenKind::rbrace:
            return true;
        default:
            return false;
    }
}

std::string_view punctuation(TokenKind kind) {
    switch (kind) {
        case TokenKind::eq: return "=";
        case TokenKind::ne: return "!=";
        case TokenKind::lt: return "<";
        case TokenKind::le: return "<=";
        case TokenKind::gt: return ">";
        case TokenKind::ge: return ">=";
        case TokenKind::tilde: return "~";
        case TokenKind::plus: return "+";
        case TokenKind::minus: return "-";
        case TokenKind::lparen: return "(";
        case TokenKind::rparen: return ")";
        case TokenKind::lbracket: return "[";
        case TokenKind::rbracket: return "]";
        case TokenKind::lbrace: return "{";
        case TokenKind::rbrace: return "}";
        case TokenKind::comma: return ",";
        case TokenKind::colon: return ":";
        case TokenKind::semicolon: return ";";
        case TokenKind::dot: return ".";
        case TokenKind::star: return "*";
        default: return "";
    }
}

// At most this many bytes of a token are quoted in a message.
constexpr size_t kQuoteBytesMax = 40;

std::string quote(std::string_view raw) {
    if (raw.size() <= kQuoteBytesMax) return "`" + std::string(raw) + "`";
    size_t cut = kQuoteBytesMax;
    while (cut > 0 && (static_cast<unsigned char>(raw[cut]) & 0xC0) == 0x80) --cut;
    return "`" + std::string(raw.substr(0, cut)) + "...`";
}

}  // namespace

std::optional<size_t> first_invalid_utf8(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
        size_t len = utf8_sequence(text, i);
        if (len == 0) return i;
        i += len;
    }
    return std::nullopt;
}

uint32_t code_points(std::string_view text, size_t bytes) {
    uint32_t n = 0;
    for (size_t i = 0; i < bytes && i < text.size(); ++i) {
        if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++n;
    }
    return n;
}

bool keyword_equals(std::string_view word, std::string_view lower_keyword) {
    if (word.size() != lower_keyword.size()) return false;
    for (size_t i = 0; i < word.size(); ++i) {
        if (ascii_lower(word[i]) != lower_keyword[i]) return false;
    }
    return true;
}

bool is_reserved(std::string_view word) {
    for (std::string_view r : kReserved) {
        if (keyword_equals(word, r)) return true;
    }
    return false;
}

std::string Token::describe() const {
    switch (kind) {
        case TokenKind::end: return "the end of the statement";
        case TokenKind::error: return "an error";
        case TokenKind::word: return reserved ? "the reserved word " + quote(raw) : quote(raw);
        case TokenKind::quoted_name: return "the name " + quote(raw);
        case TokenKind::integer:
        case TokenKind::real: return "the number " + quote(raw);
        case TokenKind::string: return "the string " + quote(raw);
        case TokenKind::bytes: return "the bytes " + quote(raw);
        case TokenKind::param: return "the parameter " + quote(raw);
        case TokenKind::duration: return "the duration " + quote(raw);
        case TokenKind::annotation: return "the annotation " + quote(raw);
        default: return quote(punctuation(kind));
    }
}

Error Token::to_error() const {
    Error e;
    e.message = text;
    e.position = pos;
    e.limit = limit;
    e.max = static_cast<uint64_t>(integer);
    return e;
}

char Lexer::peek(size_t ahead) const {
    return at_ + ahead < text_.size() ? text_[at_ + ahead] : '\0';
}

void Lexer::advance(size_t bytes) {
    for (size_t i = 0; i < bytes && at_ < text_.size(); ++i, ++at_) {
        if ((static_cast<unsigned char>(text_[at_]) & 0xC0) != 0x80) ++cp_;
    }
}

Token Lexer::make(TokenKind kind, size_t begin, uint32_t pos) const {
    Token t;
    t.kind = kind;
    t.pos = pos;
    t.raw = text_.substr(begin, at_ - begin);
    return t;
}

Token Lexer::fail(uint32_t pos, std::string message, Limit limit, uint64_t max) {
    Token t;
    t.kind = TokenKind::error;
    t.pos = pos;
    t.text = std::move(message);
    t.limit = limit;
    t.integer = static_cast<int64_t>(max);
    failed_ = t;
    return t;
}

Token Lexer::next() {
    if (failed_) return *failed_;
    bool spaced = false;
    if (std::optional<Token> err = skip_space(spaced)) return *err;
    Token t = scan();
    t.spaced = spaced;
    operand_before_ = ends_operand(t);
    return t;
}

// Skips whitespace and comments; answers an error token for an unterminated comment.
std::optional<Token> Lexer::skip_space(bool& spaced) {
    while (!at_end()) {
        char c = peek();
        if (is_space(c)) {
            advance(1);
        } else if (c == '-' && peek(1) == '-') {
            while (!at_end() && peek() != '\n') advance(1);
        } else if (c == '/' && peek(1) == '*') {
            uint32_t pos = cp_;
            size_t close = text_.find("*/", at_ + 2);
            if (close == std::string_view::npos) return fail(pos, "unterminated comment");
            advance(close + 2 - at_);
        } else {
            return std::nullopt;
        }
        spaced = true;
    }
    return std::nullopt;
}

Token Lexer::scan() {
    if (at_end()) return make(TokenKind::end, at_, cp_);
    char c = peek();
    if ((c == 'x' || c == 'X') && peek(1) == '\'') return scan_bytes();
    if (is_name_start(c)) return scan_word();
    if (is_digit(c) || (c == '-' && is_digit(peek(1)) && !operand_before_)) return scan_number();
    if (c == '"' || c == '\'') return scan_string();
    if (c == '`') return scan_quoted_name();
    if (c == '$') return scan_param();
    if (c == '@') return scan_annotation();
    return scan_operator();
}

Token Lexer::scan_word() {
    size_t begin = at_;
    uint32_t pos = cp_;
    while (!at_end() && is_name_char(peek())) advance(1);
    Token t = make(TokenKind::word, begin, pos);
    if (t.raw.size() > limits::name_bytes_max) {
        return fail(pos, "the name " + quote(t.raw) + " is longer than 64 bytes", Limit::name_bytes,
                    limits::name_bytes_max);
    }
    t.reserved = is_reserved(t.raw);
    t.text = std::string(t.raw);
    return t;
}

Token Lexer::scan_number() {
    size_t begin = at_;
    uint32_t pos = cp_;
    bool negative = peek() == '-';
    if (negative) advance(1);
    while (is_digit(peek())) advance(1);
    bool is_real = false;
    if (peek() == '.') {
        if (!is_digit(peek(1))) {
            return fail(pos, "a number needs digits after `.` (write `5.0`, not `5.`)");
        }
        advance(1);
        while (is_digit(peek())) advance(1);
        is_real = true;
    }
    if (peek() == 'e' || peek() == 'E') {
        size_t sign = (peek(1) == '+' || peek(1) == '-') ? 1 : 0;
        if (!is_digit(peek(1 + sign))) {
            return fail(pos, "a number's exponent needs digits after `e`");
        }
        advance(1 + sign);
        while (is_digit(peek())) advance(1);
        is_real = true;
    }
    Token t = make(is_real ? TokenKind::real : TokenKind::integer, begin, pos);
    if (is_real) {
        auto [end, ec] = std::from_chars(t.raw.data(), t.raw.data() + t.raw.size(), t.real);
        if (ec != std::errc() || end != t.raw.data() + t.raw.size()) {
            return fail(pos, "the number " + quote(t.raw) + " is outside the range of a float");
        }
    } else {
        auto [end, ec] = std::from_chars(t.raw.data(), t.raw.data() + t.raw.size(), t.integer);
        if (ec != std::errc() || end != t.raw.data() + t.raw.size()) {
            return fail(pos, "the integer " + quote(t.raw) + " is outside the range of int64");
        }
    }
    return scan_number_suffix(std::move(t), begin, pos, negative);
}

// A number directly followed by a name character: a duration (`30d`, `500ms`) or an error.
Token Lexer::scan_number_suffix(Token number, size_t begin, uint32_t pos, bool negative) {
    if (!is_name_char(peek())) return number;
    size_t unit_begin = at_;
    while (!at_end() && is_name_char(peek())) advance(1);
    std::string_view unit = text_.substr(unit_begin, at_ - unit_begin);
    int64_t unit_ms = 0;
    if (unit == "ms") unit_ms = 1;
    if (unit == "s") unit_ms = 1'000;
    if (unit == "m") unit_ms = 60'000;
    if (unit == "h") unit_ms = 3'600'000;
    if (unit == "d") unit_ms = 86'400'000;
    std::string_view raw = text_.substr(begin, at_ - begin);
    if (unit_ms == 0 || number.kind != TokenKind::integer) {
        return fail(pos, "a number runs into " + quote(unit) + " in " + quote(raw) +
                             " (a duration is digits and one of ms, s, m, h, d)");
    }
    if (negative) return fail(pos, "the duration " + quote(raw) + " is negative");
    if (number.integer > std::numeric_limits<int64_t>::max() / unit_ms) {
        return fail(pos, "the duration " + quote(raw) + " is out of range");
    }
    Token t = make(TokenKind::duration, begin, pos);
    t.integer = number.integer * unit_ms;
    return t;
}

Token Lexer::scan_string() {
    size_t begin = at_;
    uint32_t pos = cp_;
    char quote_char = peek();
    advance(1);
    std::string out;
    while (true) {
        if (at_end()) return fail(pos, "unterminated string");
        char c = peek();
        if (c == quote_char) break;
        if (c == '\\') {
            if (at_ + 1 >= text_.size()) return fail(pos, "unterminated string");
            if (!scan_escape(out)) return *failed_;
            continue;
        }
        size_t run = at_;
        while (!at_end() && peek() != quote_char && peek() != '\\') advance(1);
        out.append(text_.substr(run, at_ - run));
    }
    advance(1);
    Token t = make(TokenKind::string, begin, pos);
    t.text = std::move(out);
    return t;
}

// One escape at the cursor (a backslash with a byte after it), appended to `out`; false after
// fail() on a bad one.
bool Lexer::scan_escape(std::string& out) {
    uint32_t pos = cp_;
    char c = peek(1);
    const char* simple = nullptr;
    switch (c) {
        case '\\': simple = "\\"; break;
        case '"': simple = "\""; break;
        case '\'': simple = "'"; break;
        case 'n': simple = "\n"; break;
        case 'r': simple = "\r"; break;
        case 't': simple = "\t"; break;
        case '0': out += '\0'; advance(2); return true;
        default: break;
    }
    if (simple != nullptr) {
        out += simple;
        advance(2);
        return true;
    }
    if (c != 'u') {
        size_t len = std::max<size_t>(1, utf8_sequence(text_, at_ + 1));
        fail(pos, "unknown escape " + quote(text_.substr(at_, 1 + len)) +
                      " (escapes: \\\\ \\\" \\' \\n \\r \\t \\0 \\u{X})");
        return false;
    }
    size_t i = 2;
    uint32_t cp = 0;
    if (peek(i) == '{') {
        for (++i; i < 9 && hex_value(peek(i)) >= 0; ++i) cp = cp * 16 + hex_value(peek(i));
    }
    bool digits_ok = i > 3 && i <= 9;
    if (!digits_ok || peek(i) != '}' || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        fail(pos, "a \\u escape is \\u{X} with 1 to 6 hex digits naming a Unicode scalar value");
        return false;
    }
    append_utf8(out, cp);
    advance(i + 1);
    return true;
}

Token Lexer::scan_bytes() {
    size_t begin = at_;
    uint32_t pos = cp_;
    advance(2);
    std::string out;
    while (true) {
        if (at_end()) return fail(pos, "unterminated bytes literal");
        if (peek() == '\'') break;
        int hi = hex_value(peek());
        if (hi < 0) return fail(cp_, "a bytes literal holds hex digits only");
        int lo = hex_value(peek(1));
        if (lo < 0) {
            if (peek(1) == '\'') return fail(pos, "a bytes literal needs an even count of digits");
            advance(1);
            return fail(cp_, "a bytes literal holds hex digits only");
        }
        out += static_cast<char>(hi * 16 + lo);
        advance(2);
    }
    advance(1);
    Token t = make(TokenKind::bytes, begin, pos);
    t.text = std::move(out);
    return t;
}

Token Lexer::scan_quoted_name() {
    size_t begin = at_;
    uint32_t pos = cp_;
    size_t close = text_.find('`', at_ + 1);
    if (close == std::string_view::npos) return fail(pos, "unterminated backquoted name");
    std::string_view inner = text_.substr(at_ + 1, close - at_ - 1);
    bool valid = !inner.empty() && is_name_start(inner[0]);
    for (char c : inner) valid = valid && is_name_char(c);
    if (!valid) {
        return fail(pos, "a backquoted name is [A-Za-z_][A-Za-z0-9_]*, found " +
                             quote(text_.substr(at_, close + 1 - at_)));
    }
    if (inner.size() > limits::name_bytes_max) {
        return fail(pos, "the name " + quote(inner) + " is longer than 64 bytes", Limit::name_bytes,
                    limits::name_bytes_max);
    }
    advance(close + 1 - at_);
    Token t = make(TokenKind::quoted_name, begin, pos);
    t.text = std::string(inner);
    return t;
}

Token Lexer::scan_param() {
    size_t begin = at_;
    uint32_t pos = cp_;
    advance(1);
    if (!is_digit(peek())) return fail(pos, "expected a parameter number after `$` ($1, $2...)");
    uint64_t n = 0;
    while (is_digit(peek())) {
        n = std::min<uint64_t>(n * 10 + static_cast<uint64_t>(peek() - '0'), 1u << 20);
        advance(1);
    }
    std::string_view raw = text_.substr(begin, at_ - begin);
    if (n == 0) return fail(pos, "parameters count from $1, found " + quote(raw));
    if (n > limits::parameters_max) {
        return fail(pos, "the parameter " + quote(raw) + " is past $65535", Limit::parameters,
                    limits::parameters_max);
    }
    Token t = make(TokenKind::param, begin, pos);
    t.integer = static_cast<int64_t>(n);
    return t;
}

Token Lexer::scan_annotation() {
    size_t begin = at_;
    uint32_t pos = cp_;
    advance(1);
    if (!is_name_start(peek())) return fail(pos, "expected an annotation name after `@`");
    while (!at_end() && is_name_char(peek())) advance(1);
    Token t = make(TokenKind::annotation, begin, pos);
    t.text = std::string(t.raw.substr(1));
    return t;
}

Token Lexer::scan_operator() {
    size_t begin = at_;
    uint32_t pos = cp_;
    char c = peek();
    char d = peek(1);
    TokenKind kind = TokenKind::error;
    size_t len = 1;
    switch (c) {
        case '=': kind = TokenKind::eq; break;
        case '!': if (d == '=') { kind = TokenKind::ne; len = 2; } break;
        case '<':
            if (d == '=') { kind = TokenKind::le; len = 2; }
            else if (d == '>') { kind = TokenKind::ne; len = 2; }
            else { kind = TokenKind::lt; }
            break;
        case '>':
            if (d == '=') { kind = TokenKind::ge; len = 2; } else { kind = TokenKind::gt; }
            break;
        case '~': kind = TokenKind::tilde; break;
        case '+': kind = TokenKind::plus; break;
        case '-': kind = TokenKind::minus; break;
        case '(': kind = TokenKind::lparen; break;
        case ')': kind = TokenKind::rparen; break;
        case '[': kind = TokenKind::lbracket; break;
        case ']': kind = TokenKind::rbracket; break;
        case '{': kind = TokenKind::lbrace; break;
        case '}': kind = TokenKind::rbrace; break;
        case ',': kind = TokenKind::comma; break;
        case ':': kind = TokenKind::colon; break;
        case ';': kind = TokenKind::semicolon; break;
        case '*': kind = TokenKind::star; break;
        case '.':
            if (is_digit(d)) return fail(pos, "a number needs digits before `.` (write `0.5`)");
            kind = TokenKind::dot;
            break;
        default: break;
    }
    if (kind != TokenKind::error) {
        advance(len);
        return make(kind, begin, pos);
    }
    size_t seq = std::max<size_t>(1, utf8_sequence(text_, at_));
    std::string ch(text_.substr(at_, seq));
    if (static_cast<unsigned char>(c) >= 0x80) {
        return fail(pos, "unexpected character " + quote(ch) +
                             " (outside strings, FenecQL is ASCII: names are [A-Za-z_][A-Za-z0-9_]*)");
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
        return fail(pos, "unexpected control character " + std::to_string(int(c)));
    }
    return fail(pos, "unexpected character " + quote(ch));
}

}  // namespace fenec::ql
