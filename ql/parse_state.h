// ql/parse_state.h: the parser behind ql::parse (private to ql/; parser.h is
// the public surface). One Parser reads one statement. Its work is split by responsibility:
//   parser.cc        tokens, statements, writes (insert, put, set, del), integer arguments
//   parse_read.cc    get / select ... from, clauses, lookups, and the clause rules of §7.2
//   parse_expr.cc    expressions, values and documents, with the depth limits of §14
//   parse_schema.cc  create, alter, drop, compact: fields, types, annotations
//
// Nothing recurses: expressions and values, the only nesting constructs, are read by an explicit
// stack on the heap (parse_expr.cc), bounded by limits::expression_depth_max and json_depth_max;
// every other production is read in loops. A statement costs the same machine stack whatever it
// holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ql/ast.h"
#include "ql/error.h"
#include "ql/lexer.h"

namespace fenec::ql::detail {

// Return the Error of a Failure-returning call from the enclosing function.
#define QL_TRY(expr)                                     \
    do {                                                 \
        ::fenec::ql::Failure ql_failure_ = (expr);       \
        if (ql_failure_) return std::move(*ql_failure_); \
    } while (0)

#define QL_CONCAT_INNER(a, b) a##b
#define QL_CONCAT(a, b) QL_CONCAT_INNER(a, b)
// `QL_ASSIGN(auto x, f())`: bind the value of a QlResult or return its Error.
#define QL_ASSIGN(lhs, expr) QL_ASSIGN_IMPL(QL_CONCAT(ql_result_, __LINE__), lhs, expr)
#define QL_ASSIGN_IMPL(tmp, lhs, expr)       \
    auto tmp = (expr);                       \
    if (!tmp.is_ok()) return tmp.take_error(); \
    lhs = std::move(tmp).value()

// The schema-free clause rules of fenecql.md §7.2 over a parsed read (parse_read.cc).
Failure check_read(const Get& get);
// Two columns of one answer name in an explicit select list (§7.2).
Failure check_select_names(const SelectList& select);

class Parser {
public:
    // `text` is valid UTF-8 of at most limits::statement_bytes_max bytes; it must outlive the
    // parser.
    explicit Parser(std::string_view text) : lexer_(text) {}

    QlResult<ParsedStatement> parse_statement();

    // --- tokens (parser.cc) ---
    const Token& peek(size_t ahead = 0);  // ahead < kLookahead
    Token take();
    bool at(TokenKind kind, size_t ahead = 0) { return peek(ahead).kind == kind; }
    bool at_word(std::string_view keyword, size_t ahead = 0);  // an unquoted word, any case
    bool accept(TokenKind kind);
    bool accept_word(std::string_view keyword);
    bool at_name(size_t ahead = 0);  // a word that is not reserved, or a backquoted name
    // The refusal for finding the next token where `expected` should be; a lexical error there
    // wins, since it is the first thing wrong at that place.
    Error unexpected(std::string_view expected);
    Error unexpected_at(const Token& t, std::string_view expected);
    // As unexpected(), where a name is expected: a reserved word there gets the backquote hint.
    Error unexpected_name(std::string_view expected);
    static Error error_at(uint32_t pos, std::string message);
    static Error limit_error(std::optional<uint32_t> pos, Limit limit, uint64_t max,
                             std::string message);
    Failure expect(TokenKind kind, std::string_view expected);
    Failure expect_word(std::string_view keyword, std::string_view expected);
    QlResult<Name> expect_name(std::string_view expected);
    // A name given to a new collection or field: never starting with `_` (§2 system names).
    QlResult<Name> expect_new_name(std::string_view expected, std::string_view what);
    static Error repeated_clause(const Token& t);  // §3 rule 1, at the second one
    void note_param(uint32_t index);
    // Parses a clause into `slot` unless it already holds one (then: repeated_clause).
    template <class T, class F>
    Failure parse_once(std::optional<T>& slot, F parse) {
        if (slot) return repeated_clause(peek());
        QlResult<T> r = parse();
        if (!r.is_ok()) return r.take_error();
        slot = std::move(r).value();
        return std::nullopt;
    }
    // `limit`, `offset`, `require`, `ef`: an integer literal in [min, max] or a parameter.
    QlResult<IntArg> parse_int_arg(std::string_view clause, int64_t min, int64_t max);

    // --- statements (parser.cc) ---
    QlResult<Statement> parse_body();
    QlResult<Statement> parse_insert(bool replace);
    QlResult<Statement> parse_set();
    QlResult<Statement> parse_del();
    Failure parse_write_clauses(WriteFilter& filter);

    // --- reads (parse_read.cc) ---
    QlResult<Statement> parse_get(bool select_first);
    Failure parse_get_clause(Get& get, bool& done);
    QlResult<Lookup> parse_lookup();
    Failure parse_lookup_clause(Lookup& lookup, bool& done);
    QlResult<SelectList> parse_select_list(bool columns_only);
    QlResult<Target> parse_target(std::string_view expected);
    QlResult<Aggregate> parse_aggregate();
    QlResult<OrderBy> parse_order_by();
    QlResult<OrderKey> parse_order_key();
    QlResult<Near> parse_near();
    QlResult<Match> parse_match();
    QlResult<Group> parse_group();
    QlResult<Where> parse_where();
    QlResult<engine::Collation> parse_collation();

    // --- expressions and values (parse_expr.cc), read without recursion ---
    QlResult<Expr> parse_top_expr();  // a whole expression: `where`
    QlResult<Expr> parse_value();     // a value: literal, parameter, call, list or object
    QlResult<Documents> parse_documents();
    QlResult<Expr> parse_document(bool for_set);  // the cursor on its `{`
    QlResult<Column> parse_column();              // the cursor on its first name
    QlResult<std::optional<Shift>> parse_shift();
    bool at_comparison();
    // 413 expression_depth at `pos` when `depth` passes the limit.
    static Failure check_depth(uint32_t depth, uint32_t pos);

    // --- schema (parse_schema.cc) ---
    QlResult<Statement> parse_create();
    QlResult<Statement> parse_alter();
    QlResult<Statement> parse_drop();
    QlResult<FieldDef> parse_field_def();
    Failure parse_field_option(FieldDef& field, std::optional<uint32_t>& collate_pos,
                               std::optional<uint32_t>& nocase_pos);
    QlResult<engine::TypeDesc> parse_type();
    QlResult<Annotation> parse_annotation();
    QlResult<uint16_t> parse_hundredths(std::string_view arg, int64_t max_hundredths);
    QlResult<uint16_t> parse_bounded(std::string_view arg, int64_t min, int64_t max);
    Failure parse_text_args(engine::IndexDesc& index);
    QlResult<std::string> parse_stem_language();
    Failure parse_hnsw_args(engine::IndexDesc& index);
    Failure parse_ttl_arg(engine::IndexDesc& index);
    Failure check_field(const FieldDef& field, std::optional<uint32_t> collate_pos,
                        std::optional<uint32_t> nocase_pos);

private:
    // Tokens the grammar looks ahead: `name (`, `name .`, `not in`, `if not`, `if exists`.
    static constexpr size_t kLookahead = 2;

    bool select_first_ = false;  // the statement is `select ... from`
    Lexer lexer_;
    Token ahead_[kLookahead];    // the lookahead, ahead_[0] next
    size_t ahead_count_ = 0;
    uint32_t params_max_ = 0;
};

}  // namespace fenec::ql::detail
