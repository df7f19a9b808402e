// ql/lexer.h: FenecQL's tokens (fenecql.md §2), read one at a time from a statement's text.
//
// The lexer never fails by return: a text it cannot read yields one Token of kind `error`
// carrying the refusal, and every later call yields the same token, so the parser reports a
// lexical error exactly when it looks at that place of the text. Positions count Unicode code
// points from 0; the text must be valid UTF-8 (first_invalid_utf8() is checked first by parse()).
// The lexer keeps no state beyond its cursor: the `-` rule of §2 ("the `-` belongs to the literal
// only when a digit follows directly and no operand ends just before it") is decided from the
// token it produced last.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ql/error.h"

namespace fenec::ql {

enum class TokenKind : uint8_t {
    end,          // the end of the text
    error,        // a lexical refusal: message in text, position in pos
    word,         // [A-Za-z_][A-Za-z0-9_]*: a keyword or a name (see `reserved`)
    quoted_name,  // `name`: always a name
    integer,      // value in `integer`
    real,         // value in `real`
    string,       // decoded text in `text`
    bytes,        // x'..': decoded bytes in `text`
    param,        // $n: n in `integer`
    duration,     // 30d, 500ms: milliseconds in `integer`
    annotation,   // @name: the name in `text`
    eq, ne, lt, le, gt, ge, tilde, plus, minus,
    lparen, rparen, lbracket, rbracket, lbrace, rbrace,
    comma, colon, semicolon, dot, star,
};

struct Token {
    TokenKind kind = TokenKind::end;
    uint32_t pos = 0;         // code point offset of the token's first character
    bool spaced = false;      // whitespace or a comment stands between it and the token before
    bool reserved = false;    // word: one of the reserved words of §2
    std::string_view raw;     // the token as written (a view into the statement text)
    std::string text;         // word, quoted_name, annotation: the name; string, bytes: decoded;
                              // error: the message
    int64_t integer = 0;      // integer, param, duration; error: the limit's max
    double real = 0;          // real
    Limit limit = Limit::none;  // error: the limit passed, for a 413

    // For messages: "`get`", "the string \"abc\"", "the end of the statement".
    std::string describe() const;
    // An error token's refusal.
    Error to_error() const;
};

// The byte offset of the first byte that is not valid UTF-8 (overlong forms, surrogates and code
// points past U+10FFFF included), or nullopt.
std::optional<size_t> first_invalid_utf8(std::string_view text);

// Code points in the first `bytes` bytes of valid UTF-8 `text`.
uint32_t code_points(std::string_view text, size_t bytes);

// One of §2's reserved words, matched ASCII-case-insensitively.
bool is_reserved(std::string_view word);

// ASCII-case-insensitive equality against a lower-case keyword.
bool keyword_equals(std::string_view word, std::string_view lower_keyword);

class Lexer {
public:
    // `text` must outlive the lexer and every Token it yields (tokens view into it).
    explicit Lexer(std::string_view text) : text_(text) {}

    Token next();

private:
    bool at_end() const { return at_ >= text_.size(); }
    char peek(size_t ahead = 0) const;
    void advance(size_t bytes);
    Token make(TokenKind kind, size_t begin, uint32_t pos) const;
    Token fail(uint32_t pos, std::string message, Limit limit = Limit::none, uint64_t max = 0);
    std::optional<Token> skip_space(bool& spaced);
    Token scan();
    Token scan_word();
    Token scan_number();
    Token scan_number_suffix(Token number, size_t begin, uint32_t pos, bool negative);
    Token scan_string();
    bool scan_escape(std::string& out);
    Token scan_bytes();
    Token scan_quoted_name();
    Token scan_param();
    Token scan_annotation();
    Token scan_operator();

    std::string_view text_;
    size_t at_ = 0;         // byte offset of the cursor
    uint32_t cp_ = 0;       // code point offset of the cursor
    bool operand_before_ = false;  // the last token ended an operand (the `-` rule)
    std::optional<Token> failed_;  // once set, every call returns it
};

}  // namespace fenec::ql
