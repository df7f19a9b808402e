// ql/parse_schema.cc: the schema statements (fenecql.md §3 "schema", §4.1): create, alter and
// drop collection, with field definitions, types and annotations checked as far as they need no
// stored schema: names, types, `collate`/`nocase` on text only, one annotation per field that
// fits its type, annotation arguments in range (filled with FenecQL's defaults), one `@ttl` per
// created collection.
#include <cctype>
#include <cmath>
#include <unordered_set>

#include "index/stemmer.h"
#include "ql/limits.h"
#include "ql/parse_state.h"

namespace fenec::ql::detail {
namespace {

using engine::BaseType;
using engine::IndexKind;

bool is_text_type(const engine::TypeDesc& type) {
    if (type.base == BaseType::Text) return true;
    return type.base == BaseType::List && type.item && type.item->base == BaseType::Text;
}

std::string_view index_kind_name(IndexKind kind) {
    switch (kind) {
        case IndexKind::hash: return "@hash";
        case IndexKind::unique: return "@unique";
        case IndexKind::sorted: return "@sorted";
        case IndexKind::ttl: return "@ttl";
        case IndexKind::text: return "@text";
        case IndexKind::hnsw: return "@hnsw";
        case IndexKind::none: break;
    }
    return "";
}

// The types each annotation fits (§4.1) and how the rule reads in a message.
bool annotation_fits(IndexKind kind, const engine::TypeDesc& type, std::string_view& fits) {
    BaseType b = type.base;
    switch (kind) {
        case IndexKind::hash:
        case IndexKind::unique:
            fits = "bool, int, float, text, bytes and timestamp fields";
            return b == BaseType::Bool || b == BaseType::Int || b == BaseType::Float ||
                   b == BaseType::Text || b == BaseType::Bytes || b == BaseType::Timestamp;
        case IndexKind::sorted:
            fits = "int, float, text and timestamp fields";
            return b == BaseType::Int || b == BaseType::Float || b == BaseType::Text ||
                   b == BaseType::Timestamp;
        case IndexKind::text: fits = "text fields"; return b == BaseType::Text;
        case IndexKind::hnsw: fits = "vector<N> fields"; return b == BaseType::Vector;
        case IndexKind::ttl: fits = "timestamp fields"; return b == BaseType::Timestamp;
        case IndexKind::none: break;
    }
    return false;
}

std::optional<BaseType> scalar_type(std::string_view word) {
    constexpr std::pair<std::string_view, BaseType> kScalars[] = {
        {"bool", BaseType::Bool}, {"int", BaseType::Int},     {"float", BaseType::Float},
        {"text", BaseType::Text}, {"bytes", BaseType::Bytes}, {"timestamp", BaseType::Timestamp},
    };
    for (const auto& [name, base] : kScalars) {
        if (keyword_equals(word, name)) return base;
    }
    return std::nullopt;
}

std::optional<IndexKind> annotation_kind(std::string_view name) {
    constexpr std::pair<std::string_view, IndexKind> kKinds[] = {
        {"hash", IndexKind::hash}, {"unique", IndexKind::unique}, {"sorted", IndexKind::sorted},
        {"text", IndexKind::text}, {"hnsw", IndexKind::hnsw},     {"ttl", IndexKind::ttl},
    };
    for (const auto& [word, kind] : kKinds) {
        if (keyword_equals(name, word)) return kind;
    }
    return std::nullopt;
}

}  // namespace

// create = "create" "collection" [ "if" "not" "exists" ] NAME "(" field_def { "," field_def } ")".
QlResult<Statement> Parser::parse_create() {
    Create create;
    create.pos = take().pos;
    QL_TRY(expect_word("collection", "`collection` after `create`"));
    if (at_word("if") && at_word("not", 1)) {
        take();
        take();
        QL_TRY(expect_word("exists", "`exists` after `if not`"));
        create.if_not_exists = true;
    }
    QL_ASSIGN(create.collection, expect_new_name("a collection name", "the collection name"));
    QL_TRY(expect(TokenKind::lparen, "`(` and the fields of `" + create.collection.text + "`"));
    if (at(TokenKind::rparen)) return error_at(peek().pos, "a collection needs at least one field");
    std::unordered_set<std::string> names;
    const Annotation* ttl = nullptr;
    do {
        if (create.fields.size() == limits::fields_max) {
            return limit_error(peek().pos, Limit::fields, limits::fields_max,
                               "a collection has at most " + std::to_string(limits::fields_max) +
                                   " fields");
        }
        QL_ASSIGN(FieldDef field, parse_field_def());
        if (!names.insert(field.name.text).second) {
            return error_at(field.name.pos, "the field `" + field.name.text + "` is defined twice");
        }
        create.fields.push_back(std::move(field));
        const std::optional<Annotation>& a = create.fields.back().annotation;
        if (a && a->index.kind == IndexKind::ttl) {
            if (ttl != nullptr) return error_at(a->pos, "a collection takes one `@ttl`");
            ttl = &*a;
        }
    } while (accept(TokenKind::comma));
    QL_TRY(expect(TokenKind::rparen, "`,` or `)` after a field definition"));
    return Statement{std::move(create)};
}

// alter = "alter" "collection" NAME ( "add" "field" field_def | "drop" "field" NAME
//         | "rename" "field" NAME "to" NAME | "add" "index" NAME annotation | "drop" "index" NAME ).
QlResult<Statement> Parser::parse_alter() {
    Alter alter;
    alter.pos = take().pos;
    QL_TRY(expect_word("collection", "`collection` after `alter`"));
    QL_ASSIGN(alter.collection, expect_name("a collection name after `alter collection`"));
    std::string field_after = "a field name after `";
    if (accept_word("add")) {
        if (accept_word("field")) {
            alter.action = AlterAction::add_field;
            QL_ASSIGN(alter.field, parse_field_def());
        } else if (accept_word("index")) {
            alter.action = AlterAction::add_index;
            QL_ASSIGN(alter.target, expect_name(field_after + "add index`"));
            if (!at(TokenKind::annotation)) {
                return unexpected("an annotation (@hash, @unique, @sorted, @text, @hnsw, @ttl)");
            }
            QL_ASSIGN(alter.index, parse_annotation());
        } else {
            return unexpected("`field` or `index` after `add`");
        }
    } else if (accept_word("drop")) {
        if (accept_word("field")) {
            alter.action = AlterAction::drop_field;
        } else if (accept_word("index")) {
            alter.action = AlterAction::drop_index;
        } else {
            return unexpected("`field` or `index` after `drop`");
        }
        QL_ASSIGN(alter.target, expect_name(field_after + "drop`"));
    } else if (accept_word("rename")) {
        alter.action = AlterAction::rename_field;
        QL_TRY(expect_word("field", "`field` after `rename`"));
        QL_ASSIGN(alter.target, expect_name(field_after + "rename field`"));
        QL_TRY(expect_word("to", "`to` after `rename field " + alter.target.text + "`"));
        QL_ASSIGN(alter.new_name, expect_new_name("a new field name after `to`", "the field name"));
    } else {
        return unexpected("`add`, `drop` or `rename` after `alter collection " +
                          alter.collection.text + "`");
    }
    return Statement{std::move(alter)};
}

// drop = "drop" "collection" [ "if" "exists" ] NAME.
QlResult<Statement> Parser::parse_drop() {
    Drop drop;
    drop.pos = take().pos;
    QL_TRY(expect_word("collection", "`collection` after `drop`"));
    if (at_word("if") && at_word("exists", 1)) {
        take();
        take();
        drop.if_exists = true;
    }
    QL_ASSIGN(drop.collection, expect_name("a collection name after `drop collection`"));
    return Statement{std::move(drop)};
}

// field_def = NAME type { "collate" COLLATION | "nocase" | annotation }.
QlResult<FieldDef> Parser::parse_field_def() {
    FieldDef field;
    QL_ASSIGN(field.name, expect_new_name("a field name", "the field name"));
    field.type_pos = peek().pos;
    QL_ASSIGN(field.type, parse_type());
    std::optional<uint32_t> collate_pos;
    std::optional<uint32_t> nocase_pos;
    while (at_word("collate") || at_word("nocase") || at(TokenKind::annotation)) {
        QL_TRY(parse_field_option(field, collate_pos, nocase_pos));
    }
    QL_TRY(check_field(field, collate_pos, nocase_pos));
    return field;
}

// One `collate X`, `nocase` or annotation of a field, each at most once.
Failure Parser::parse_field_option(FieldDef& field, std::optional<uint32_t>& collate_pos,
                                   std::optional<uint32_t>& nocase_pos) {
    const Token& t = peek();
    std::string twice = " is given twice for the field `" + field.name.text + "`";
    if (at_word("collate")) {
        if (collate_pos) return error_at(t.pos, "`collate`" + twice);
        collate_pos = take().pos;
        QL_ASSIGN(field.collation, parse_collation());
    } else if (at_word("nocase")) {
        if (nocase_pos) return error_at(t.pos, "`nocase`" + twice);
        nocase_pos = take().pos;
        field.nocase = true;
    } else {
        if (field.annotation) {
            return error_at(t.pos, "a field takes at most one annotation; `" + field.name.text +
                                       "` has " +
                                       std::string(index_kind_name(field.annotation->index.kind)));
        }
        QL_ASSIGN(field.annotation, parse_annotation());
    }
    return std::nullopt;
}

Failure Parser::check_field(const FieldDef& field, std::optional<uint32_t> collate_pos,
                            std::optional<uint32_t> nocase_pos) {
    std::string type = field.type.to_string();
    if (collate_pos && !is_text_type(field.type)) {
        return error_at(*collate_pos, "`collate` applies to text and [text] fields; `" +
                                          field.name.text + "` is " + type);
    }
    if (nocase_pos && !is_text_type(field.type)) {
        return error_at(*nocase_pos, "`nocase` applies to text and [text] fields; `" +
                                         field.name.text + "` is " + type);
    }
    std::string_view fits;
    if (field.annotation && !annotation_fits(field.annotation->index.kind, field.type, fits)) {
        return error_at(field.annotation->pos,
                        std::string(index_kind_name(field.annotation->index.kind)) +
                            " applies to " + std::string(fits) + "; `" + field.name.text +
                            "` is " + type);
    }
    return std::nullopt;
}

// type = scalar | "json" | "vector" "<" INT ">" | "[" scalar "]".
QlResult<engine::TypeDesc> Parser::parse_type() {
    constexpr std::string_view kTypes =
        "a type (bool, int, float, text, bytes, timestamp, json, vector<N>, [T])";
    if (accept(TokenKind::lbracket)) {
        if (!at(TokenKind::word) || !scalar_type(peek().raw)) {
            return unexpected("a scalar type in `[...]` (bool, int, float, text, bytes, timestamp)");
        }
        engine::TypeDesc item = engine::make_type(*scalar_type(take().raw));
        QL_TRY(expect(TokenKind::rbracket, "`]` to close the list type"));
        return engine::make_list(std::move(item));
    }
    if (accept_word("json")) return engine::make_type(BaseType::Json);
    if (accept_word("vector")) {
        QL_TRY(expect(TokenKind::lt, "`<` after `vector` (vector<N>)"));
        if (!at(TokenKind::integer)) return unexpected("a dimension after `vector<`");
        Token n = take();
        if (n.integer < 1) {
            return error_at(n.pos, "a vector has 1 to " +
                                       std::to_string(limits::vector_dimension_max) +
                                       " dimensions, found " + std::string(n.raw));
        }
        if (n.integer > static_cast<int64_t>(limits::vector_dimension_max)) {
            return limit_error(n.pos, Limit::vector_dimension, limits::vector_dimension_max,
                               "a vector has at most " +
                                   std::to_string(limits::vector_dimension_max) +
                                   " dimensions, found " + std::string(n.raw));
        }
        QL_TRY(expect(TokenKind::gt, "`>` to close `vector<" + std::string(n.raw) + "`"));
        return engine::make_vector(static_cast<uint32_t>(n.integer));
    }
    if (!at(TokenKind::word) || !scalar_type(peek().raw)) return unexpected(kTypes);
    return engine::make_type(*scalar_type(take().raw));
}

// COLLATION = "tr" | "und" (§6.3: any other name is a 400).
QlResult<engine::Collation> Parser::parse_collation() {
    const Token& t = peek();
    if (t.kind != TokenKind::word) return unexpected("a collation (`tr` or `und`) after `collate`");
    if (keyword_equals(t.raw, "tr")) {
        take();
        return engine::Collation::tr;
    }
    if (keyword_equals(t.raw, "und")) {
        take();
        return engine::Collation::und;
    }
    return error_at(t.pos, "unknown collation `" + std::string(t.raw) +
                               "`: FenecQL knows `tr` and `und`");
}

// annotation = "@hash" | "@unique" | "@sorted" | "@text" [ "(" args ")" ]
//            | "@hnsw" [ "(" args ")" ] | "@ttl" "(" DURATION ")".
QlResult<Annotation> Parser::parse_annotation() {
    Token t = take();
    Annotation annotation;
    annotation.pos = t.pos;
    std::optional<IndexKind> kind = annotation_kind(t.text);
    if (!kind) {
        return error_at(t.pos, "unknown annotation `" + std::string(t.raw) +
                                   "` (@hash, @unique, @sorted, @text, @hnsw, @ttl)");
    }
    engine::IndexDesc& index = annotation.index;
    index.kind = *kind;
    if (*kind == IndexKind::text) {
        index.text = engine::TextParams{};
        index.text.k1_hundredths = text_k1_hundredths_default;
        index.text.b_hundredths = text_b_hundredths_default;
        if (accept(TokenKind::lparen)) QL_TRY(parse_text_args(index));
    } else if (*kind == IndexKind::hnsw) {
        index.hnsw = engine::HnswParams{engine::Metric::cosine, hnsw_m_default,
                                        hnsw_ef_construction_default, hnsw_ef_search_default};
        if (accept(TokenKind::lparen)) QL_TRY(parse_hnsw_args(index));
    } else if (*kind == IndexKind::ttl) {
        QL_TRY(parse_ttl_arg(index));
    } else if (at(TokenKind::lparen)) {
        return error_at(peek().pos, "`" + std::string(t.raw) + "` takes no arguments");
    }
    return annotation;
}

// A number with at most two decimals in [0, max_hundredths / 100], as hundredths.
QlResult<uint16_t> Parser::parse_hundredths(std::string_view arg, int64_t max_hundredths) {
    const Token& t = peek();
    if (t.kind != TokenKind::integer && t.kind != TokenKind::real) {
        return unexpected("a number after `" + std::string(arg) + " =`");
    }
    double value = t.kind == TokenKind::integer ? static_cast<double>(t.integer) : t.real;
    double scaled = value * 100;
    double rounded = std::round(scaled);
    bool in_range = value >= 0 && rounded <= static_cast<double>(max_hundredths);
    if (!in_range || std::fabs(scaled - rounded) > 1e-6) {
        std::string max = std::to_string(max_hundredths / 100);
        return error_at(t.pos, "`" + std::string(arg) + "` is 0 to " + max +
                                   " with at most two decimals, found " + std::string(t.raw));
    }
    take();
    return static_cast<uint16_t>(rounded);
}

// An integer literal in [min, max], for annotation arguments.
QlResult<uint16_t> Parser::parse_bounded(std::string_view arg, int64_t min, int64_t max) {
    const Token& t = peek();
    if (t.kind != TokenKind::integer) return unexpected("an integer after `" + std::string(arg) + " =`");
    if (t.integer < min || t.integer > max) {
        return error_at(t.pos, "`" + std::string(arg) + "` is " + std::to_string(min) + " to " +
                                   std::to_string(max) + ", found " + std::string(t.raw));
    }
    return static_cast<uint16_t>(take().integer);
}

// text_arg { "," text_arg } ")", text_arg = ( "k1" | "b" ) "=" NUMBER | "stem" NAME; the `(`
// is read.
Failure Parser::parse_text_args(engine::IndexDesc& index) {
    if (accept(TokenKind::rparen)) return std::nullopt;
    bool k1_seen = false;
    bool b_seen = false;
    bool stem_seen = false;
    do {
        const Token& t = peek();
        if (at_word("stem")) {
            if (stem_seen) return error_at(t.pos, "`" + std::string(t.raw) + "` is given twice");
            stem_seen = true;
            take();
            QL_ASSIGN(index.text.stem, parse_stem_language());
            continue;
        }
        bool k1 = at_word("k1");
        if (!k1 && !at_word("b")) {
            if (t.kind == TokenKind::word) {
                return error_at(
                    t.pos, "unknown @text argument `" + std::string(t.raw) + "` (k1, b, stem)");
            }
            return unexpected("an @text argument (k1 = x, b = y, stem <language>)");
        }
        bool& seen = k1 ? k1_seen : b_seen;
        if (seen) return error_at(t.pos, "`" + std::string(t.raw) + "` is given twice");
        seen = true;
        std::string arg = k1 ? "k1" : "b";
        take();
        QL_TRY(expect(TokenKind::eq, "`=` after `" + arg + "`"));
        uint16_t& slot = k1 ? index.text.k1_hundredths : index.text.b_hundredths;
        QL_ASSIGN(slot, parse_hundredths(arg, k1 ? limits::text_k1_hundredths_max
                                                 : limits::text_b_hundredths_max));
    } while (accept(TokenKind::comma));
    return expect(TokenKind::rparen, "`,` or `)` in @text(...)");
}

// The language after `stem`, lower-cased: a name libstemmer has an algorithm for (index/stemmer.h).
QlResult<std::string> Parser::parse_stem_language() {
    const Token& t = peek();
    if (t.kind != TokenKind::word) {
        return unexpected("a language after `stem` (en, tr, english, ...)");
    }
    std::string language(t.raw);
    for (char& c : language) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!index::stem_language_known(language)) {
        return error_at(t.pos, "unknown stemming language `" + std::string(t.raw) +
                                   "`: libstemmer has " + index::stem_languages() +
                                   ", each also by its ISO 639 code (en, tr, ...)");
    }
    take();
    return language;
}

// hnsw_arg { "," hnsw_arg } ")", hnsw_arg = METRIC | ( "m" | "ef_construction" | "ef_search" )
// "=" INT; the `(` is read.
Failure Parser::parse_hnsw_args(engine::IndexDesc& index) {
    if (accept(TokenKind::rparen)) return std::nullopt;
    std::unordered_set<std::string> seen;
    do {
        const Token& t = peek();
        if (t.kind != TokenKind::word) {
            return unexpected("an @hnsw argument (cosine, l2, dot, m = i, ef_construction = j, "
                              "ef_search = k)");
        }
        uint32_t pos = t.pos;
        std::string word(t.raw);
        for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        bool metric = word == "cosine" || word == "l2" || word == "dot";
        std::string key = metric ? "metric" : word;
        if (!metric && word != "m" && word != "ef_construction" && word != "ef_search") {
            return error_at(pos, "unknown @hnsw argument `" + std::string(t.raw) +
                                     "` (metrics cosine, l2, dot; m, ef_construction, ef_search)");
        }
        if (!seen.insert(key).second) {
            if (metric) return error_at(pos, "a metric is given twice");
            return error_at(pos, "`" + key + "` is given twice");
        }
        take();
        if (metric) {
            index.hnsw.metric = word == "cosine" ? engine::Metric::cosine
                                : word == "l2"   ? engine::Metric::l2
                                                 : engine::Metric::dot;
            continue;
        }
        QL_TRY(expect(TokenKind::eq, "`=` after `" + word + "`"));
        if (word == "m") {
            QL_ASSIGN(index.hnsw.m, parse_bounded("m", limits::hnsw_m_min, limits::hnsw_m_max));
        } else if (word == "ef_construction") {
            QL_ASSIGN(index.hnsw.ef_construction,
                      parse_bounded(word, limits::hnsw_ef_construction_min,
                                    limits::hnsw_ef_construction_max));
        } else {
            QL_ASSIGN(index.hnsw.ef_search, parse_bounded(word, limits::hnsw_ef_search_min,
                                                          limits::hnsw_ef_search_max));
        }
    } while (accept(TokenKind::comma));
    return expect(TokenKind::rparen, "`,` or `)` in @hnsw(...)");
}

// "(" DURATION ")", 1 ms to 36 500 d (§11).
Failure Parser::parse_ttl_arg(engine::IndexDesc& index) {
    QL_TRY(expect(TokenKind::lparen, "`(` and a duration after `@ttl` (@ttl(30d))"));
    if (!at(TokenKind::duration)) {
        return unexpected("a duration (digits and one of ms, s, m, h, d) in `@ttl(...)`");
    }
    const Token& d = peek();
    if (d.integer < limits::ttl_ms_min || d.integer > limits::ttl_ms_max) {
        return error_at(d.pos, "`@ttl` takes 1ms to 36500d, found " + std::string(d.raw));
    }
    index.ttl_ms = take().integer;
    return expect(TokenKind::rparen, "`)` after the duration of `@ttl`");
}

}  // namespace fenec::ql::detail
