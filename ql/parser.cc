// ql/parser.cc: the entry point, the token helpers every part of the parser uses, the statement
// dispatch and the writes (insert, put, set, del). See parse_state.h for how the parser is split.
#include "ql/parser.h"

#include <algorithm>
#include <cassert>
#include <limits>

#include "ql/limits.h"
#include "ql/parse_state.h"

namespace fenec::ql {

QlResult<ParsedStatement> parse(std::string_view text) {
    if (text.size() > limits::statement_bytes_max) {
        return detail::Parser::limit_error(
            std::nullopt, Limit::statement_bytes, limits::statement_bytes_max,
            "the statement is " + std::to_string(text.size()) + " bytes, past the limit of " +
                std::to_string(limits::statement_bytes_max));
    }
    if (std::optional<size_t> bad = first_invalid_utf8(text)) {
        return detail::Parser::error_at(
            code_points(text, *bad),
            "the statement is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
    }
    detail::Parser parser(text);
    return parser.parse_statement();
}

std::optional<engine::Value> fold_constant(const Expr& expr) {
    if (const auto* lit = std::get_if<Literal>(&expr.node)) return lit->value;
    if (const auto* list = std::get_if<ListExpr>(&expr.node)) {
        engine::List out;
        for (const Expr& item : list->items) {
            std::optional<engine::Value> v = fold_constant(item);
            if (!v) return std::nullopt;
            out.items.push_back(std::move(*v));
        }
        return engine::Value(std::move(out));
    }
    if (const auto* object = std::get_if<ObjectExpr>(&expr.node)) {
        engine::Object out;
        for (const Member& m : object->members) {
            std::optional<engine::Value> v = fold_constant(m.value);
            if (!v) return std::nullopt;
            out.keys.push_back(m.key.text);
            out.values.push_back(std::move(*v));
        }
        return engine::Value(std::move(out));
    }
    return std::nullopt;
}

namespace detail {

// ---------------------------------------------------------------------------------------------
// Tokens

const Token& Parser::peek(size_t ahead) {
    assert(ahead < kLookahead);
    while (ahead_count_ <= ahead) ahead_[ahead_count_++] = lexer_.next();
    return ahead_[ahead];
}

Token Parser::take() {
    peek();
    Token t = std::move(ahead_[0]);
    for (size_t i = 1; i < ahead_count_; ++i) ahead_[i - 1] = std::move(ahead_[i]);
    --ahead_count_;
    return t;
}

bool Parser::at_word(std::string_view keyword, size_t ahead) {
    const Token& t = peek(ahead);
    return t.kind == TokenKind::word && keyword_equals(t.raw, keyword);
}

bool Parser::accept(TokenKind kind) {
    if (!at(kind)) return false;
    take();
    return true;
}

bool Parser::accept_word(std::string_view keyword) {
    if (!at_word(keyword)) return false;
    take();
    return true;
}

bool Parser::at_name(size_t ahead) {
    const Token& t = peek(ahead);
    return t.kind == TokenKind::quoted_name || (t.kind == TokenKind::word && !t.reserved);
}

Error Parser::unexpected(std::string_view expected) { return unexpected_at(peek(), expected); }

Error Parser::unexpected_at(const Token& t, std::string_view expected) {
    if (t.kind == TokenKind::error) return t.to_error();
    return error_at(t.pos, "expected " + std::string(expected) + ", found " + t.describe());
}

Error Parser::unexpected_name(std::string_view expected) {
    Error e = unexpected(expected);
    const Token& t = peek();
    if (t.kind == TokenKind::word && t.reserved) {
        e.message += " (backquote a reserved word to use it as a name)";
    }
    return e;
}

Error Parser::error_at(uint32_t pos, std::string message) {
    Error e;
    e.message = std::move(message);
    e.position = pos;
    return e;
}

Error Parser::limit_error(std::optional<uint32_t> pos, Limit limit, uint64_t max,
                          std::string message) {
    Error e;
    e.message = std::move(message);
    e.position = pos;
    e.limit = limit;
    e.max = max;
    return e;
}

Failure Parser::expect(TokenKind kind, std::string_view expected) {
    if (accept(kind)) return std::nullopt;
    return unexpected(expected);
}

Failure Parser::expect_word(std::string_view keyword, std::string_view expected) {
    if (accept_word(keyword)) return std::nullopt;
    return unexpected(expected);
}

QlResult<Name> Parser::expect_name(std::string_view expected) {
    if (!at_name()) return unexpected_name(expected);
    Token t = take();
    return Name{std::move(t.text), t.pos};
}

QlResult<Name> Parser::expect_new_name(std::string_view expected, std::string_view what) {
    QL_ASSIGN(Name name, expect_name(expected));
    if (name.text[0] == '_') {
        return error_at(name.pos, std::string(what) + " `" + name.text +
                                      "` starts with `_`: such names are the system's");
    }
    return name;
}

Error Parser::repeated_clause(const Token& t) {
    return error_at(t.pos, "`" + std::string(t.raw) +
                               "` appears twice; each clause is given at most once");
}

void Parser::note_param(uint32_t index) { params_max_ = std::max(params_max_, index); }

QlResult<IntArg> Parser::parse_int_arg(std::string_view clause, int64_t min, int64_t max) {
    const Token& t = peek();
    std::string range = max == std::numeric_limits<int64_t>::max()
                            ? std::to_string(min) + " or more"
                            : std::to_string(min) + " to " + std::to_string(max);
    if (t.kind == TokenKind::param) {
        note_param(static_cast<uint32_t>(t.integer));
        IntArg arg{t.pos, Param{static_cast<uint32_t>(t.integer)}};
        take();
        return arg;
    }
    if (t.kind != TokenKind::integer) {
        return unexpected("an integer (" + range + ") or a parameter after `" +
                          std::string(clause) + "`");
    }
    if (t.integer < min || t.integer > max) {
        return error_at(t.pos, "`" + std::string(clause) + "` takes an integer " + range +
                                   ", found " + std::string(t.raw));
    }
    IntArg arg{t.pos, t.integer};
    take();
    return arg;
}

// ---------------------------------------------------------------------------------------------
// Statements

QlResult<ParsedStatement> Parser::parse_statement() {
    if (at(TokenKind::end)) return error_at(peek().pos, "the statement is empty");
    QL_ASSIGN(Statement statement, parse_body());
    if (accept(TokenKind::semicolon) && !at(TokenKind::end)) {
        return unexpected("the end of the text after `;` (one statement per request)");
    }
    if (!at(TokenKind::end)) return unexpected("the end of the statement");
    return ParsedStatement{std::move(statement), params_max_};
}

// The statement, chosen by its first word.
QlResult<Statement> Parser::parse_body() {
    if (at_word("get")) return parse_get(false);
    if (at_word("select")) return parse_get(true);
    if (at_word("insert")) return parse_insert(false);
    if (at_word("put")) return parse_insert(true);
    if (at_word("set")) return parse_set();
    if (at_word("del")) return parse_del();
    if (at_word("create")) return parse_create();
    if (at_word("alter")) return parse_alter();
    if (at_word("drop")) return parse_drop();
    if (at_word("compact")) return Statement{Compact{take().pos}};
    return unexpected(
        "a statement (get, select, insert, put, set, del, create, alter, drop, compact)");
}

// insert [into] c documents | put [into] c documents
QlResult<Statement> Parser::parse_insert(bool replace) {
    Insert insert;
    Token word = take();
    insert.pos = word.pos;
    insert.replace = replace;
    // `into` is optional and not reserved: it is the keyword only when a name follows.
    if (at_word("into") && at_name(1)) take();
    std::string after = "a collection name after `" + std::string(replace ? "put" : "insert") + "`";
    QL_ASSIGN(insert.collection, expect_name(after));
    QL_ASSIGN(insert.documents, parse_documents());
    return Statement{std::move(insert)};
}

// set c {f: v, ...} where e {write_clause}
QlResult<Statement> Parser::parse_set() {
    Set set;
    set.pos = take().pos;
    QL_ASSIGN(set.collection, expect_name("a collection name after `set`"));
    if (!at(TokenKind::lbrace)) return unexpected("an object of changes `{field: value, ...}`");
    QL_ASSIGN(set.changes, parse_document(true));
    if (!at_word("where")) {
        return unexpected("`where` after the changes of `set` (write `where true` for every row)");
    }
    QL_ASSIGN(set.filter.where, parse_where());
    QL_TRY(parse_write_clauses(set.filter));
    return Statement{std::move(set)};
}

// del [from] c where e {write_clause}
QlResult<Statement> Parser::parse_del() {
    Del del;
    del.pos = take().pos;
    accept_word("from");
    QL_ASSIGN(del.collection, expect_name("a collection name after `del`"));
    if (!at_word("where")) {
        return unexpected("`where` after `del " + del.collection.text +
                          "` (write `where true` for every row)");
    }
    QL_ASSIGN(del.filter.where, parse_where());
    QL_TRY(parse_write_clauses(del.filter));
    return Statement{std::move(del)};
}

// order, limit, require, returning: each at most once, in any order (§3, §4.2).
Failure Parser::parse_write_clauses(WriteFilter& filter) {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    while (true) {
        if (at_word("where")) return repeated_clause(peek());
        if (at_word("order")) {
            if (filter.order) return repeated_clause(peek());
            QL_ASSIGN(filter.order, parse_order_by());
        } else if (at_word("limit")) {
            if (filter.limit) return repeated_clause(peek());
            take();
            QL_ASSIGN(filter.limit, parse_int_arg("limit", 0, kMax));
        } else if (at_word("require")) {
            if (filter.require) return repeated_clause(peek());
            take();
            QL_ASSIGN(filter.require, parse_int_arg("require", 0, kMax));
        } else if (at_word("returning")) {
            if (filter.returning) return repeated_clause(peek());
            QL_ASSIGN(filter.returning, parse_select_list(true));
            QL_TRY(check_select_names(*filter.returning));
        } else {
            return std::nullopt;
        }
    }
}

}  // namespace detail
}  // namespace fenec::ql
