// server/node/statement_shape.cc: statement shapes (server/node/statement_shape.h), read by
// FenecQL's own lexer, so a literal is whatever the language calls one.
#include "server/node/statement_shape.h"

#include <optional>

#include "ql/lexer.h"

namespace fenec::node {
namespace {

bool is_literal(const ql::Token& t) {
    switch (t.kind) {
        case ql::TokenKind::string:
        case ql::TokenKind::bytes:
        case ql::TokenKind::integer:
        case ql::TokenKind::real:
        case ql::TokenKind::duration:
            return true;
        case ql::TokenKind::word:
            return ql::keyword_equals(t.raw, "true") || ql::keyword_equals(t.raw, "false");
        default:
            return false;
    }
}

}  // namespace

std::string statement_shape(std::string_view fenecql) {
    // The lexer reads valid UTF-8 only: shape the valid prefix, and mark the rest unread.
    const std::optional<size_t> bad = ql::first_invalid_utf8(fenecql);
    ql::Lexer lexer(bad ? fenecql.substr(0, *bad) : fenecql);
    std::string out;
    const auto append = [&out](bool spaced, std::string_view text) {
        if (spaced && !out.empty()) out.push_back(' ');
        out.append(text);
    };
    for (;;) {
        const ql::Token t = lexer.next();
        if (t.kind == ql::TokenKind::end) break;
        if (t.kind == ql::TokenKind::error) {
            append(true, "?");
            return out;
        }
        const std::string_view text = is_literal(t) ? std::string_view("?") : t.raw;
        if (out.size() + 1 + text.size() > statement_shape_bytes_max) {
            append(true, "\u2026");
            return out;
        }
        append(t.spaced, text);
    }
    if (bad) append(true, "?");
    return out;
}

}  // namespace fenec::node
