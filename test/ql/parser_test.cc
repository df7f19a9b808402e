// test/ql/parser_test.cc: proves the FenecQL front end (ql/parser.h). Every statement kind of
// fenecql.md §3 parses into the tree ast.h describes (checked field by field); the lexical rules of
// §2 hold (keywords in any case, backquotes, the `-` rule, comments, escapes, numbers, positions in
// code points); every refusal the parser owns answers the status, position and limit the spec
// names (§12.3, §14, §16.8); the depth limits bound recursion without limiting flat chains; and
// every example statement of §16 parses, or is refused at parse level where the spec says so.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ql/lexer.h"
#include "ql/parser.h"

namespace fenec::ql::parser_test {
namespace {

std::string repeat(std::string_view s, size_t n) {
    std::string out;
    out.reserve(s.size() * n);
    for (size_t i = 0; i < n; ++i) out += s;
    return out;
}

ParsedStatement parse_ok(std::string_view text) {
    QlResult<ParsedStatement> r = parse(text);
    EXPECT_TRUE(r.is_ok()) << text.substr(0, 200) << "\n  -> " << (r.is_ok() ? "" : r.error().to_string());
    if (!r.is_ok()) return ParsedStatement{Statement{Compact{}}, 0};
    return std::move(r).value();
}

Error parse_error(std::string_view text) {
    QlResult<ParsedStatement> r = parse(text);
    EXPECT_FALSE(r.is_ok()) << "parsed but should not: " << text.substr(0, 200);
    if (r.is_ok()) return Error{};
    return r.error();
}

template <class T>
const T& as(const ParsedStatement& p) {
    return std::get<T>(p.statement.node);
}

// The statement of `text`, which must parse into a T.
template <class T>
T parsed(std::string_view text) {
    ParsedStatement p = parse_ok(text);
    if (T* node = std::get_if<T>(&p.statement.node)) return std::move(*node);
    ADD_FAILURE() << "not the expected kind of statement: " << text.substr(0, 200);
    return T{};
}

const Column& column_of(const Expr& e) { return e.as<Column>(); }
const engine::Value& literal_of(const Expr& e) { return e.as<Literal>().value; }

// ---------------------------------------------------------------------------------------------
// Reads

TEST(ParseGet, ClausesLandInTheirFields) {
    ParsedStatement p = parse_ok(
        "get books select title, year as y where year >= 1961 order year desc, title collate tr "
        "limit 2 offset $1");
    const Get& g = as<Get>(p);
    EXPECT_EQ(p.statement.kind(), StatementKind::get);
    EXPECT_FALSE(p.statement.writes());
    EXPECT_EQ(p.statement.first_word(), "get");
    EXPECT_FALSE(g.select_first);
    EXPECT_EQ(g.pos, 0u);
    EXPECT_EQ(g.collection.text, "books");
    EXPECT_EQ(g.collection.pos, 4u);
    ASSERT_TRUE(g.select);
    EXPECT_EQ(g.select->pos, 10u);
    ASSERT_EQ(g.select->items.size(), 2u);
    EXPECT_EQ(g.select->items[0].answer_name(), "title");
    EXPECT_EQ(g.select->items[1].answer_name(), "y");
    EXPECT_EQ(g.select->items[1].alias->pos, 32u);
    EXPECT_EQ(target_text(g.select->items[1].what), "year");
    ASSERT_TRUE(g.where);
    EXPECT_EQ(g.where->pos, 34u);
    const Compare& cmp = g.where->expr.as<Compare>();
    EXPECT_EQ(cmp.op, CompareOp::ge);
    EXPECT_EQ(g.where->expr.pos, 45u);  // the operator
    EXPECT_EQ(column_of(*cmp.lhs).field, "year");
    EXPECT_EQ(cmp.lhs->pos, 40u);
    EXPECT_EQ(literal_of(*cmp.rhs), engine::Value(int64_t{1961}));
    ASSERT_TRUE(g.order);
    ASSERT_EQ(g.order->keys.size(), 2u);
    EXPECT_TRUE(g.order->keys[0].desc);
    EXPECT_FALSE(g.order->keys[0].collate);
    EXPECT_FALSE(g.order->keys[1].desc);
    EXPECT_EQ(g.order->keys[1].collate, engine::Collation::tr);
    ASSERT_TRUE(g.limit);
    EXPECT_EQ(std::get<int64_t>(g.limit->value), 2);
    ASSERT_TRUE(g.offset);
    EXPECT_EQ(std::get<Param>(g.offset->value).index, 1u);
    EXPECT_EQ(p.params_max, 1u);
    EXPECT_FALSE(g.near || g.match || g.group);
    EXPECT_TRUE(g.lookups.empty());
}

TEST(ParseGet, SelectFromIsGetWithItsListFirst) {
    ParsedStatement p = parse_ok("select title from books where year = 1949");
    const Get& g = as<Get>(p);
    EXPECT_TRUE(g.select_first);
    EXPECT_EQ(p.statement.kind(), StatementKind::select);
    EXPECT_EQ(p.statement.first_word(), "select");
    EXPECT_FALSE(p.statement.writes());
    EXPECT_EQ(g.collection.text, "books");
    ASSERT_TRUE(g.select);
    EXPECT_EQ(g.select->items[0].answer_name(), "title");
    EXPECT_TRUE(g.where);
    Error e = parse_error("select title from books select year");
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.position, 24u);
}

TEST(ParseGet, AggregatesAreNamedAsNormalised) {
    ParsedStatement p = parse_ok(
        "get books select SUM( price ) as total, max(added), count(*), Count(year), avg(price), "
        "min(price)");
    const SelectList& s = *as<Get>(p).select;
    ASSERT_EQ(s.items.size(), 6u);
    const auto& sum = std::get<Aggregate>(s.items[0].what);
    EXPECT_EQ(sum.func, AggregateFunc::sum);
    EXPECT_EQ(sum.text(), "sum(price)");
    EXPECT_EQ(s.items[0].answer_name(), "total");
    EXPECT_EQ(s.items[1].answer_name(), "max(added)");
    const auto& count_star = std::get<Aggregate>(s.items[2].what);
    EXPECT_FALSE(count_star.field);
    EXPECT_EQ(s.items[2].answer_name(), "count(*)");
    EXPECT_EQ(s.items[3].answer_name(), "count(year)");
    EXPECT_EQ(s.items[4].answer_name(), "avg(price)");
    EXPECT_EQ(s.items[5].answer_name(), "min(price)");
    // Aggregate words are ordinary names where no `(` follows (§3 rule 4).
    ParsedStatement q = parse_ok("get t select count, sum where max = min order avg");
    const Get& g = as<Get>(q);
    EXPECT_EQ(g.select->items[0].answer_name(), "count");
    EXPECT_EQ(column_of(*g.where->expr.as<Compare>().lhs).field, "max");
    EXPECT_EQ(target_text(g.order->keys[0].what), "avg");
}

TEST(ParseGet, PathsGroupsAndOrderByAggregate) {
    ParsedStatement p = parse_ok(
        "get books select meta, count(*) group by meta order count(*) desc");
    EXPECT_EQ(p.statement.kind(), StatementKind::get);
    ParsedStatement q = parse_ok("get books select meta.pages where meta.pages > 200 order meta.pages desc");
    const Get& g = as<Get>(q);
    const Column& c = std::get<Column>(g.select->items[0].what);
    EXPECT_EQ(c.field, "meta");
    ASSERT_EQ(c.keys.size(), 1u);
    EXPECT_EQ(c.keys[0], "pages");
    EXPECT_EQ(c.text(), "meta.pages");
    ParsedStatement r = parse_ok("get sales select region, city, sum(amount) group region, city");
    const Group& grp = *as<Get>(r).group;
    ASSERT_EQ(grp.keys.size(), 2u);
    EXPECT_EQ(grp.keys[0].text, "region");
    EXPECT_EQ(grp.keys[1].text, "city");
    EXPECT_EQ(grp.keys[1].pos, 57u);
    ParsedStatement s = parse_ok("get sales select region, sum(amount) as total group region order total desc limit 1");
    EXPECT_TRUE(as<Get>(s).order->keys[0].desc);
}

TEST(ParseGet, NearAndMatch) {
    ParsedStatement p = parse_ok("get items select name where kind = \"x\" near e [1, -0.5] ef 40 limit 3");
    const Near& n = *as<Get>(p).near;
    EXPECT_EQ(n.field.text, "e");
    const ListExpr& v = n.vector.as<ListExpr>();
    ASSERT_EQ(v.items.size(), 2u);
    EXPECT_EQ(literal_of(v.items[0]), engine::Value(int64_t{1}));
    EXPECT_EQ(literal_of(v.items[1]), engine::Value(-0.5));
    EXPECT_EQ(std::get<int64_t>(n.ef->value), 40);
    ParsedStatement q = parse_ok("get items near e $2 ef $1");
    EXPECT_EQ(as<Get>(q).near->vector.as<Param>().index, 2u);
    EXPECT_EQ(q.params_max, 2u);
    ParsedStatement r = parse_ok("get notes select _id match body \"black tea\" limit 1 offset 1");
    const Match& m = *as<Get>(r).match;
    EXPECT_EQ(m.field.text, "body");
    EXPECT_EQ(literal_of(m.query), engine::Value("black tea"));
    EXPECT_EQ(parsed<Get>("get notes match body $3").match->query.as<Param>().index, 3u);
    // `ef` is contextual: a name anywhere else.
    EXPECT_EQ(parsed<Get>("get t where ef = 1").where->expr.as<Compare>().lhs->as<Column>().field, "ef");
}

TEST(ParseGet, LookupChainsOwnTheClausesAfterThem) {
    ParsedStatement p = parse_ok(
        "get products select name limit 1 lookup reviews on product required where rating <= 2 "
        "select note");
    const Get& g = as<Get>(p);
    EXPECT_EQ(std::get<int64_t>(g.limit->value), 1);
    ASSERT_EQ(g.lookups.size(), 1u);
    const Lookup& l = g.lookups[0];
    EXPECT_EQ(l.collection.text, "reviews");
    EXPECT_EQ(l.child_key.text, "product");
    EXPECT_FALSE(l.parent_key);
    EXPECT_TRUE(l.required);
    EXPECT_TRUE(l.where);
    EXPECT_EQ(l.select->items[0].answer_name(), "note");
    EXPECT_FALSE(l.limit);
    EXPECT_EQ(l.answer_name(), "reviews");

    ParsedStatement q = parse_ok(
        "get products select name where _id = 1 lookup reviews on product select _id, rating "
        "lookup replies on review select msg");
    ASSERT_EQ(as<Get>(q).lookups.size(), 2u);
    EXPECT_EQ(as<Get>(q).lookups[1].collection.text, "replies");

    ParsedStatement r = parse_ok(
        "get reviews select rating where _id = 4 lookup products as item on _id = product select name");
    const Lookup& l2 = as<Get>(r).lookups[0];
    EXPECT_EQ(l2.alias->text, "item");
    EXPECT_EQ(l2.answer_name(), "item");
    EXPECT_EQ(l2.child_key.text, "_id");
    EXPECT_EQ(l2.parent_key->text, "product");
}

// ---------------------------------------------------------------------------------------------
// Expressions

TEST(ParseExpr, PrecedenceIsOrAndNotComparison) {
    ParsedStatement p = parse_ok("get t where a = 1 or b = 2 and not c = 3");
    const Expr& e = as<Get>(p).where->expr;
    const Or& o = e.as<Or>();
    ASSERT_EQ(o.terms.size(), 2u);
    EXPECT_TRUE(o.terms[0].is<Compare>());
    const And& a = o.terms[1].as<And>();
    ASSERT_EQ(a.terms.size(), 2u);
    EXPECT_TRUE(a.terms[1].as<Not>().operand->is<Compare>());
    EXPECT_EQ(e.pos, 18u);  // the first `or`
}

TEST(ParseExpr, ChainsAreFlattenedAndParenthesesGroup) {
    ParsedStatement p = parse_ok("get t where a or b or c or d");
    EXPECT_EQ(as<Get>(p).where->expr.as<Or>().terms.size(), 4u);
    ParsedStatement q = parse_ok("get t where (a or b) and c");
    const And& a = as<Get>(q).where->expr.as<And>();
    EXPECT_EQ(a.terms[0].as<Or>().terms.size(), 2u);
    ParsedStatement r = parse_ok("get t where ((x))");
    EXPECT_EQ(column_of(as<Get>(r).where->expr).field, "x");  // parentheses leave no node
}

TEST(ParseExpr, ComparisonsInIsHasContains) {
    struct Case {
        const char* where;
        CompareOp op;
    };
    for (const Case& c : {Case{"a = 1", CompareOp::eq}, Case{"a != 1", CompareOp::ne},
                          Case{"a <> 1", CompareOp::ne}, Case{"a < 1", CompareOp::lt},
                          Case{"a <= 1", CompareOp::le}, Case{"a > 1", CompareOp::gt},
                          Case{"a >= 1", CompareOp::ge}, Case{"a ~ \"x\"", CompareOp::contains},
                          Case{"a has \"x\"", CompareOp::has}, Case{"a HAS 1", CompareOp::has}}) {
        ParsedStatement p = parse_ok(std::string("get t where ") + c.where);
        EXPECT_EQ(as<Get>(p).where->expr.as<Compare>().op, c.op) << c.where;
    }
    Get g = parsed<Get>("get t where year not in [1937, 1972]");
    const In& in = g.where->expr.as<In>();
    EXPECT_TRUE(in.negated);
    EXPECT_EQ(in.set->as<ListExpr>().items.size(), 2u);
    ParsedStatement q = parse_ok("get t where year in $4");
    EXPECT_FALSE(as<Get>(q).where->expr.as<In>().negated);
    EXPECT_EQ(as<Get>(q).where->expr.as<In>().set->as<Param>().index, 4u);
    EXPECT_EQ(q.params_max, 4u);
    EXPECT_FALSE(parsed<Get>("get t where x is null").where->expr.as<IsNull>().negated);
    EXPECT_TRUE(parsed<Get>("get t where x IS NOT NULL").where->expr.as<IsNull>().negated);
}

TEST(ParseExpr, CallsShiftsAndTheMinusRule) {
    ParsedStatement p = parse_ok("get t where t > NOW() + 30000");
    const Call& call = as<Get>(p).where->expr.as<Compare>().rhs->as<Call>();
    EXPECT_EQ(call.name, "now");
    ASSERT_TRUE(call.shift);
    EXPECT_FALSE(call.shift->negative);
    EXPECT_EQ(std::get<int64_t>(call.shift->by), 30000);
    // `now() -5` is now() - 5: an operand ends just before the `-`.
    ParsedStatement q = parse_ok("get t where t > now() -5");
    const Call& c2 = as<Get>(q).where->expr.as<Compare>().rhs->as<Call>();
    EXPECT_TRUE(c2.shift->negative);
    EXPECT_EQ(std::get<int64_t>(c2.shift->by), 5);
    ParsedStatement r = parse_ok("get t where t < now() - $2");
    EXPECT_EQ(std::get<Param>(as<Get>(r).where->expr.as<Compare>().rhs->as<Call>().shift->by).index, 2u);
    // After an operator the `-` starts the literal.
    EXPECT_EQ(literal_of(*parsed<Get>("get t where a = -5").where->expr.as<Compare>().rhs),
              engine::Value(int64_t{-5}));
    EXPECT_EQ(literal_of(*parsed<Get>("get t where a=-5").where->expr.as<Compare>().rhs),
              engine::Value(int64_t{-5}));
    ParsedStatement s = parse_ok("get t where coalesce(a, lower(b), 1) = len(c)");
    const Call& co = as<Get>(s).where->expr.as<Compare>().lhs->as<Call>();
    EXPECT_EQ(co.args.size(), 3u);
    EXPECT_EQ(co.args[1].as<Call>().name, "lower");
    EXPECT_TRUE(parsed<Get>("get t where f() = 1").where->expr.as<Compare>().lhs->as<Call>().args.empty());
    // `5` ends an operand, so in `5-3` the `-` is an operator, and only a call takes a shift.
    EXPECT_EQ(parse_error("get t where a = 5-3").position, 17u);
    EXPECT_EQ(parse_error("get t where a - 1 = 2").position, 14u);
    EXPECT_EQ(parse_error("get t where now() + 1.5 = 2").position, 20u);
}

TEST(ParseExpr, LiteralsReuseEngineValues) {
    ParsedStatement p = parse_ok(
        "insert t {a: 1, b: -9223372036854775808, c: 2.5, d: -0.25, e: 1e-3, f: 3E8, g: \"s\", "
        "h: 's', i: x'0a1BfF', j: true, k: FALSE, l: null, m: [1, [2]], n: {x: 1, \"y z\": [ ]}}");
    const auto& members = as<Insert>(p).documents.objects[0].as<ObjectExpr>().members;
    ASSERT_EQ(members.size(), 14u);
    EXPECT_EQ(literal_of(members[0].value), engine::Value(int64_t{1}));
    EXPECT_EQ(literal_of(members[1].value), engine::Value(INT64_MIN));
    EXPECT_EQ(literal_of(members[2].value), engine::Value(2.5));
    EXPECT_EQ(literal_of(members[3].value), engine::Value(-0.25));
    EXPECT_EQ(literal_of(members[4].value), engine::Value(1e-3));
    EXPECT_EQ(literal_of(members[5].value), engine::Value(3e8));
    EXPECT_EQ(literal_of(members[6].value), engine::Value("s"));
    EXPECT_EQ(literal_of(members[7].value), engine::Value("s"));
    EXPECT_EQ(literal_of(members[8].value), engine::Value(engine::Bytes{std::string("\x0a\x1b\xff", 3)}));
    EXPECT_EQ(literal_of(members[9].value), engine::Value(true));
    EXPECT_EQ(literal_of(members[10].value), engine::Value(false));
    EXPECT_TRUE(literal_of(members[11].value).is_null());
    std::optional<engine::Value> m = fold_constant(members[12].value);
    ASSERT_TRUE(m);
    engine::List inner;
    inner.items.push_back(engine::Value(int64_t{2}));
    engine::List outer;
    outer.items.push_back(engine::Value(int64_t{1}));
    outer.items.push_back(engine::Value(inner));
    EXPECT_EQ(*m, engine::Value(outer));
    std::optional<engine::Value> n = fold_constant(members[13].value);
    ASSERT_TRUE(n);
    const auto& obj = std::get<engine::Object>(n->rep);
    EXPECT_EQ(obj.keys, (std::vector<std::string>{"x", "y z"}));
    ParsedStatement q = parse_ok("get t where a = [1, $1]");
    EXPECT_FALSE(fold_constant(*as<Get>(q).where->expr.as<Compare>().rhs));  // holds a parameter
}

// ---------------------------------------------------------------------------------------------
// Writes

TEST(ParseWrite, InsertAndPutTakeObjectsListsOrAParameter) {
    ParsedStatement p = parse_ok("insert into books [{_id: 10, title: \"On\"}, {\"title\": now() + 1}]");
    const Insert& ins = as<Insert>(p);
    EXPECT_EQ(p.statement.kind(), StatementKind::insert);
    EXPECT_TRUE(p.statement.writes());
    EXPECT_EQ(p.statement.first_word(), "insert");
    EXPECT_FALSE(ins.replace);
    EXPECT_EQ(ins.collection.text, "books");
    EXPECT_TRUE(ins.documents.listed);
    ASSERT_EQ(ins.documents.objects.size(), 2u);
    const auto& first = ins.documents.objects[0].as<ObjectExpr>().members;
    EXPECT_EQ(first[0].key.text, "_id");
    EXPECT_EQ(first[1].key.text, "title");
    EXPECT_EQ(first[1].key.pos, 29u);
    const auto& second = ins.documents.objects[1].as<ObjectExpr>().members;
    EXPECT_EQ(second[0].key.text, "title");
    EXPECT_EQ(second[0].value.as<Call>().name, "now");

    ParsedStatement q = parse_ok("put books {_id: 2, title: \"Tutunamayanlar\"}");
    EXPECT_TRUE(as<Insert>(q).replace);
    EXPECT_EQ(q.statement.kind(), StatementKind::put);
    EXPECT_EQ(q.statement.first_word(), "put");
    EXPECT_FALSE(as<Insert>(q).documents.listed);
    EXPECT_EQ(as<Insert>(q).documents.objects.size(), 1u);

    ParsedStatement r = parse_ok("insert books $1");
    EXPECT_EQ(as<Insert>(r).documents.param->index, 1u);
    EXPECT_EQ(r.params_max, 1u);
    ParsedStatement s = parse_ok("insert books []");
    EXPECT_TRUE(as<Insert>(s).documents.listed);
    EXPECT_TRUE(as<Insert>(s).documents.objects.empty());
    // `into` is not reserved: with no name after it, it is the collection's name.
    EXPECT_EQ(parsed<Insert>("insert into {a: 1}").collection.text, "into");
    EXPECT_EQ(parsed<Insert>("PUT INTO into {a: 1}").collection.text, "into");
}

TEST(ParseWrite, SetAndDelCarryTheirFilter) {
    ParsedStatement p = parse_ok(
        "set books {price: 12.5, meta: {a: [1]}} where year < 1950 order year desc limit 1 "
        "require $1 returning _id, price");
    const Set& set = as<Set>(p);
    EXPECT_EQ(p.statement.first_word(), "set");
    EXPECT_TRUE(p.statement.writes());
    EXPECT_EQ(set.collection.text, "books");
    EXPECT_EQ(set.changes.as<ObjectExpr>().members.size(), 2u);
    EXPECT_EQ(set.filter.where.expr.as<Compare>().op, CompareOp::lt);
    EXPECT_TRUE(set.filter.order->keys[0].desc);
    EXPECT_EQ(std::get<int64_t>(set.filter.limit->value), 1);
    EXPECT_EQ(std::get<Param>(set.filter.require->value).index, 1u);
    EXPECT_EQ(set.filter.returning->items.size(), 2u);

    ParsedStatement q = parse_ok("del from books where true returning * require 0");
    const Del& del = as<Del>(q);
    EXPECT_EQ(q.statement.kind(), StatementKind::del);
    EXPECT_EQ(q.statement.first_word(), "del");
    EXPECT_EQ(del.collection.text, "books");
    EXPECT_EQ(literal_of(del.filter.where.expr), engine::Value(true));
    EXPECT_TRUE(del.filter.returning->star);
    EXPECT_EQ(std::get<int64_t>(del.filter.require->value), 0);
    EXPECT_EQ(parsed<Del>("DEL books WHERE run_at <= now() ORDER run_at LIMIT 1").filter.limit->pos, 51u);  // the value
}

// ---------------------------------------------------------------------------------------------
// Schema

TEST(ParseSchema, CreateReadsTypesOptionsAndAnnotations) {
    ParsedStatement p = parse_ok(
        "create collection if not exists books (title text collate tr nocase @sorted, "
        "genres [text], year int @hash, price float, added timestamp @ttl(30d), meta json, "
        "blob bytes @unique, ok bool, e vector<3> @hnsw(dot, m = 8, ef_search = 50), "
        "body text @text(k1 = 1.2, b = 0.75), plain text @text(), v vector<4096> @hnsw)");
    const Create& c = as<Create>(p);
    EXPECT_EQ(p.statement.first_word(), "create");
    EXPECT_TRUE(p.statement.writes());
    EXPECT_TRUE(c.if_not_exists);
    EXPECT_EQ(c.collection.text, "books");
    ASSERT_EQ(c.fields.size(), 12u);
    const FieldDef& title = c.fields[0];
    EXPECT_EQ(title.type.base, engine::BaseType::Text);
    EXPECT_EQ(title.collation, engine::Collation::tr);
    EXPECT_TRUE(title.nocase);
    EXPECT_EQ(title.annotation->index.kind, engine::IndexKind::sorted);
    EXPECT_EQ(c.fields[1].type.to_string(), "[text]");
    EXPECT_EQ(c.fields[2].annotation->index.kind, engine::IndexKind::hash);
    EXPECT_EQ(c.fields[4].annotation->index.kind, engine::IndexKind::ttl);
    EXPECT_EQ(c.fields[4].annotation->index.ttl_ms, 30LL * 86'400'000);
    EXPECT_EQ(c.fields[5].type.base, engine::BaseType::Json);
    EXPECT_EQ(c.fields[6].annotation->index.kind, engine::IndexKind::unique);
    const engine::IndexDesc& hnsw = c.fields[8].annotation->index;
    EXPECT_EQ(c.fields[8].type.dim, 3u);
    EXPECT_EQ(hnsw.hnsw.metric, engine::Metric::dot);
    EXPECT_EQ(hnsw.hnsw.m, 8);
    EXPECT_EQ(hnsw.hnsw.ef_construction, 200);  // FenecQL's default
    EXPECT_EQ(hnsw.hnsw.ef_search, 50);
    const engine::IndexDesc& text = c.fields[9].annotation->index;
    EXPECT_EQ(text.text.k1_hundredths, 120);
    EXPECT_EQ(text.text.b_hundredths, 75);
    EXPECT_EQ(c.fields[10].annotation->index.text.k1_hundredths, 90);  // defaults 0.9 and 0.4
    EXPECT_EQ(c.fields[10].annotation->index.text.b_hundredths, 40);
    const engine::IndexDesc& v = c.fields[11].annotation->index;
    EXPECT_EQ(v.hnsw.metric, engine::Metric::cosine);
    EXPECT_EQ(v.hnsw.m, 16);
    EXPECT_EQ(v.hnsw.ef_search, 100);
    EXPECT_EQ(c.fields[0].to_field_desc().collation, engine::Collation::tr);
    // Type names, metric names and `nocase` are keywords only where expected (§3 rule 5).
    ParsedStatement q = parse_ok("create collection text (text text, int int, nocase text NOCASE, l2 vector<2> @hnsw(l2))");
    EXPECT_EQ(as<Create>(q).fields.size(), 4u);
    EXPECT_TRUE(as<Create>(q).fields[2].nocase);
}

TEST(ParseSchema, AlterDropCompact) {
    ParsedStatement a = parse_ok("alter collection books add field isbn text nocase @unique");
    const Alter& add = as<Alter>(a);
    EXPECT_EQ(a.statement.first_word(), "alter");
    EXPECT_EQ(add.action, AlterAction::add_field);
    EXPECT_EQ(add.field->name.text, "isbn");
    EXPECT_TRUE(add.field->nocase);
    EXPECT_EQ(add.field->annotation->index.kind, engine::IndexKind::unique);
    Alter drop = parsed<Alter>("alter collection books drop field price");
    EXPECT_EQ(drop.action, AlterAction::drop_field);
    EXPECT_EQ(drop.target.text, "price");
    ParsedStatement r = parse_ok("alter collection books rename field isbn to code");
    EXPECT_EQ(as<Alter>(r).action, AlterAction::rename_field);
    EXPECT_EQ(as<Alter>(r).target.text, "isbn");
    EXPECT_EQ(as<Alter>(r).new_name.text, "code");
    ParsedStatement i = parse_ok("alter collection books add index year @sorted");
    EXPECT_EQ(as<Alter>(i).action, AlterAction::add_index);
    EXPECT_EQ(as<Alter>(i).target.text, "year");
    EXPECT_EQ(as<Alter>(i).index->index.kind, engine::IndexKind::sorted);
    ParsedStatement d = parse_ok("alter collection books drop index year");
    EXPECT_EQ(as<Alter>(d).action, AlterAction::drop_index);
    ParsedStatement dc = parse_ok("drop collection if exists nosuch;");
    EXPECT_TRUE(as<Drop>(dc).if_exists);
    EXPECT_EQ(as<Drop>(dc).collection.text, "nosuch");
    EXPECT_EQ(dc.statement.first_word(), "drop");
    EXPECT_FALSE(parsed<Drop>("drop collection if").if_exists);  // a collection named `if`
    ParsedStatement c = parse_ok("  COMPACT ; -- done");
    EXPECT_EQ(c.statement.kind(), StatementKind::compact);
    EXPECT_EQ(as<Compact>(c).pos, 2u);
    EXPECT_TRUE(c.statement.writes());
}

// ---------------------------------------------------------------------------------------------
// Lexical structure (§2)

TEST(Lexer, KeywordsAreCaseInsensitiveNamesAreNot) {
    ParsedStatement p = parse_ok("GeT Books SELECT Title WHERE Year >= 1 ORDER BY Year DESC LIMIT 1");
    const Get& g = as<Get>(p);
    EXPECT_EQ(g.collection.text, "Books");
    EXPECT_EQ(g.select->items[0].answer_name(), "Title");
    EXPECT_TRUE(g.order->keys[0].desc);
}

TEST(Lexer, BackquotesMakeReservedWordsNames) {
    ParsedStatement p = parse_ok("get `order` select `select` as `as` where `where`.`in` = 1");
    const Get& g = as<Get>(p);
    EXPECT_EQ(g.collection.text, "order");
    EXPECT_EQ(g.select->items[0].answer_name(), "as");
    EXPECT_EQ(column_of(*g.where->expr.as<Compare>().lhs).text(), "where.in");
    // A backquoted word is never a keyword.
    EXPECT_EQ(parsed<Get>("get t where `true` = true").where->expr.as<Compare>().lhs->as<Column>().field, "true");
    EXPECT_EQ(parse_error("get `a b`").position, 4u);
    EXPECT_EQ(parse_error("get ``").position, 4u);
    EXPECT_EQ(parse_error("get `abc").message.find("unterminated") != std::string::npos, true);
}

TEST(Lexer, CommentsAndWhitespace) {
    ParsedStatement p = parse_ok("-- leading\nget /* inline */ books\r\n\twhere /*\nmulti\n*/ a = 1 -- trailing");
    EXPECT_EQ(as<Get>(p).collection.text, "books");
    EXPECT_EQ(as<Get>(p).collection.pos, 28u);
    Error e = parse_error("get books /* never closed");
    EXPECT_EQ(e.position, 10u);
    EXPECT_NE(e.message.find("unterminated comment"), std::string::npos);
    EXPECT_EQ(parse_error("get books\f").position, 9u);  // form feed is not whitespace
    EXPECT_EQ(parse_error("get books / 2").position, 10u);
    EXPECT_EQ(parse_error("get books %").position, 10u);
}

TEST(Lexer, StringEscapes) {
    ParsedStatement p = parse_ok(
        R"(insert t {a: "q\"\\\n\r\t\0'", b: 'it\'s "x"', c: "\u{1F600}\u{e9}\u{0}", d: "line
break"})");
    const auto& m = as<Insert>(p).documents.objects[0].as<ObjectExpr>().members;
    EXPECT_EQ(literal_of(m[0].value), engine::Value(std::string("q\"\\\n\r\t\0'", 8)));
    EXPECT_EQ(literal_of(m[1].value), engine::Value("it's \"x\""));
    EXPECT_EQ(literal_of(m[2].value), engine::Value(std::string("\xF0\x9F\x98\x80\xC3\xA9\0", 7)));
    EXPECT_EQ(literal_of(m[3].value), engine::Value("line\nbreak"));
    EXPECT_EQ(parse_error(R"(get t where a = "x\q")").position, 18u);
    EXPECT_EQ(parse_error(R"(get t where a = "\u{D800}")").position, 17u);
    EXPECT_EQ(parse_error(R"(get t where a = "\u{110000}")").position, 17u);
    EXPECT_EQ(parse_error(R"(get t where a = "\u{1234567}")").position, 17u);
    EXPECT_EQ(parse_error(R"(get t where a = "\u{}")").position, 17u);
    EXPECT_EQ(parse_error(R"(get t where a = "\u0041")").position, 17u);
    EXPECT_EQ(parse_error(R"(get t where a = 'abc\)").position, 16u);  // unterminated: the quote
    EXPECT_EQ(parse_error(R"(get t where a = "it's')").position, 16u);
}

TEST(Lexer, BytesLiterals) {
    ParsedStatement p = parse_ok("get t where b = X'00ff' or b = x''");
    const Or& o = as<Get>(p).where->expr.as<Or>();
    EXPECT_EQ(literal_of(*o.terms[0].as<Compare>().rhs), engine::Value(engine::Bytes{std::string("\0\xff", 2)}));
    EXPECT_EQ(literal_of(*o.terms[1].as<Compare>().rhs), engine::Value(engine::Bytes{}));
    EXPECT_EQ(parse_error("get t where b = x'0a1'").position, 16u);   // odd count
    EXPECT_EQ(parse_error("get t where b = x'0g'").position, 19u);    // not hex
    EXPECT_EQ(parse_error("get t where b = x'0a").position, 16u);     // unterminated
    // `x` alone is a name.
    EXPECT_EQ(column_of(*parsed<Get>("get t where x = 1").where->expr.as<Compare>().lhs).field, "x");
}

TEST(Lexer, Numbers) {
    EXPECT_EQ(parse_error("get t where a = .5").position, 16u);
    EXPECT_EQ(parse_error("get t where a = 5.").position, 16u);
    EXPECT_EQ(parse_error("get t where a = 1e").position, 16u);
    EXPECT_EQ(parse_error("get t where a = 1e999").position, 16u);
    EXPECT_EQ(parse_error("get t where a = 9223372036854775808").position, 16u);
    EXPECT_EQ(parse_error("get t where a = -9223372036854775809").position, 16u);
    EXPECT_EQ(parse_error("get t where a = 12abc").position, 16u);
    EXPECT_EQ(parse_error("get t where a = 2.5s").position, 16u);
    // Durations lex anywhere but are valid only inside @ttl(...).
    Error d = parse_error("get t where a = 30d");
    EXPECT_EQ(d.position, 16u);
    EXPECT_NE(d.message.find("@ttl"), std::string::npos);
    EXPECT_EQ(parsed<Create>("create collection s (t timestamp @ttl(500ms))").fields[0].annotation->index.ttl_ms, 500);
    EXPECT_EQ(parsed<Create>("create collection s (t timestamp @ttl(2h))").fields[0].annotation->index.ttl_ms, 7'200'000);
    EXPECT_EQ(parsed<Create>("create collection s (t timestamp @ttl(36500d))").fields[0].annotation->index.ttl_ms, 36'500LL * 86'400'000);
    EXPECT_EQ(parse_error("create collection s (t timestamp @ttl(36501d))").position, 38u);
    EXPECT_EQ(parse_error("create collection s (t timestamp @ttl(30))").position, 38u);
    EXPECT_EQ(parse_error("create collection s (t timestamp @ttl(1w))").position, 38u);
}

TEST(Lexer, PositionsCountCodePointsAndRefuseNonAscii) {
    // "şehir" is 5 code points and 6 bytes: the error after it is at code point 22 (byte 23).
    EXPECT_EQ(parse_error("get t where \"şehir\" = ! 1").position, 22u);
    EXPECT_EQ(parse_error("get books where şehir = 1").position, 16u);
    EXPECT_EQ(parse_error("get t where a = 1 İ").position, 18u);
    EXPECT_EQ(parse_error("get t where a = \"ünlü\" x").position, 23u);
    // Invalid UTF-8: at the first bad byte, even inside a string.
    EXPECT_EQ(parse_error(std::string("get t where a = \"\xC3\xA9\xFF\"")).position, 18u);
    EXPECT_EQ(parse_error(std::string("get t where a = \"\xC0\xAF\"")).position, 17u);        // overlong
    EXPECT_EQ(parse_error(std::string("get t where a = \"\xED\xA0\x80\"")).position, 17u);    // surrogate
    EXPECT_EQ(parse_error(std::string("get t where a = \"\xF4\x90\x80\x80\"")).position, 17u);  // > U+10FFFF
    EXPECT_EQ(parse_error(std::string("get t\xE2\x82")).position, 5u);                         // truncated
    // An error at the end of the text is at its length in code points.
    EXPECT_EQ(parse_error("get t where a = \"é\" and").position, 23u);
    EXPECT_EQ(parse_error("get t where ä = ").position, 12u);
}

TEST(Lexer, NamesAtMost64Bytes) {
    parse_ok("get " + repeat("a", 64));
    Error e = parse_error("get " + repeat("a", 65));
    EXPECT_EQ(e.status(), 413);
    EXPECT_EQ(e.limit, Limit::name_bytes);
    EXPECT_EQ(limit_name(e.limit), "name_bytes");
    EXPECT_EQ(e.max, 64u);
    EXPECT_EQ(e.position, 4u);
    EXPECT_EQ(parse_error("get `" + repeat("b", 65) + "`").limit, Limit::name_bytes);
    EXPECT_EQ(parse_error("get t select a as " + repeat("c", 65)).limit, Limit::name_bytes);
}

TEST(Lexer, ParametersAreOneTo65535) {
    EXPECT_EQ(parse_ok("get t where a = $65535").params_max, 65535u);
    EXPECT_EQ(parse_ok("get t where a = $2 or b = $1 or c in $3").params_max, 3u);
    EXPECT_EQ(parse_ok("get t").params_max, 0u);
    Error zero = parse_error("get t where a = $0");
    EXPECT_EQ(zero.status(), 400);
    EXPECT_EQ(zero.position, 16u);
    Error big = parse_error("get t where a = $65536");
    EXPECT_EQ(big.status(), 413);
    EXPECT_EQ(big.limit, Limit::parameters);
    EXPECT_EQ(big.max, 65535u);
    EXPECT_EQ(parse_error("get t where a = $99999999999999999999999").limit, Limit::parameters);
    EXPECT_EQ(parse_error("get t where a = $").position, 16u);
    EXPECT_EQ(parse_error("get t where a = $x").position, 16u);
}

TEST(Lexer, TokensDescribeThemselves) {
    Lexer lexer("get `x` 'str' 5 2.5 $3 x'ff' @hash 30d != ;");
    std::vector<TokenKind> kinds;
    for (Token t = lexer.next(); t.kind != TokenKind::end; t = lexer.next()) kinds.push_back(t.kind);
    EXPECT_EQ(kinds, (std::vector<TokenKind>{TokenKind::word, TokenKind::quoted_name, TokenKind::string,
                                             TokenKind::integer, TokenKind::real, TokenKind::param,
                                             TokenKind::bytes, TokenKind::annotation, TokenKind::duration,
                                             TokenKind::ne, TokenKind::semicolon}));
    EXPECT_TRUE(is_reserved("ORDER"));
    EXPECT_FALSE(is_reserved("required"));
    Error e = parse_error("get books where ;");
    EXPECT_EQ(e.message, "expected a value, found `;`");
    Error f = parse_error("get ;");
    EXPECT_EQ(f.message, "expected a collection name after `get`, found `;`");
}

// ---------------------------------------------------------------------------------------------
// Refusals: status, position, limit, and the name the message must carry.

struct RefusalCase {
    std::string text;
    int status;
    std::optional<uint32_t> position;
    const char* names;  // a substring of the message
};

void expect_refusals(const std::vector<RefusalCase>& cases) {
    for (const RefusalCase& c : cases) {
        SCOPED_TRACE(c.text.substr(0, 120));
        Error e = parse_error(c.text);
        EXPECT_EQ(e.status(), c.status) << e.to_string();
        EXPECT_EQ(e.position, c.position) << e.to_string();
        EXPECT_NE(e.message.find(c.names), std::string::npos) << e.to_string();
    }
}

TEST(ParseErrors, StatementsAndTheirEnds) {
    expect_refusals({
        {"", 400, 0, "empty"},
        {"   -- only a comment", 400, 20, "empty"},
        {"frobnicate books", 400, 0, "`frobnicate`"},
        {"get books; get books", 400, 11, "one statement per request"},
        {"get books;;", 400, 10, "`;`"},
        {"get books )", 400, 10, "`)`"},
        {"put books {", 400, 11, "the end of the statement"},
        {"get", 400, 3, "a collection name after `get`"},
        {"get order", 400, 4, "reserved word `order`"},
        {"insert books", 400, 12, "documents"},
        {"insert books [1]", 400, 14, "a document"},
        {"insert books {a: 1", 400, 18, "`,` or `}`"},
        {"insert books {a 1}", 400, 16, "`:` after the key `a`"},
        {"insert books {a: 1, a: 2}", 400, 20, "`a` is given twice"},
        {"insert books {a: title}", 400, 17, "constants"},
        {"insert books {a: lower(title)}", 400, 23, "constants"},
        {"insert books {a: (1)}", 400, 17, "a value"},
        {"insert books {a: 30d}", 400, 17, "@ttl"},
        {"set books {price: 1}", 400, 20, "`where`"},
        {"set books where true", 400, 10, "object of changes"},
        {"set books {_id: 9} where true", 400, 11, "`_id`"},
        {"del books", 400, 9, "`where`"},
        {"del books limit 1 where true", 400, 10, "`where`"},
        {"del books where true limit 1 limit 2", 400, 29, "`limit` appears twice"},
        {"del books where true where false", 400, 21, "`where` appears twice"},
        {"del books where true returning count(*)", 400, 31, "columns, not aggregates"},
        {"del books where true returning a, a", 400, 34, "two columns are named `a`"},
        {"del books where true require -1", 400, 29, "0 or more"},
        {"compact books", 400, 8, "the end of the statement"},
    });
}

TEST(ParseErrors, ExpressionsDoNotChainOrDangle) {
    expect_refusals({
        {"get t where a < b < c", 400, 18, "do not chain"},
        {"get t where a = 1 = 2", 400, 18, "do not chain"},
        {"get t where a is null = true", 400, 22, "do not chain"},
        {"get t where a in [1] in [2]", 400, 21, "do not chain"},
        {"get t where a is 1", 400, 17, "`null`"},
        {"get t where a is not 1", 400, 21, "`null` after `is not`"},
        {"get t where a not like 1", 400, 18, "`in` after `not`"},
        {"get t where a in (1, 2)", 400, 17, "a list `[...]` or a parameter"},
        {"get t where a in [b]", 400, 18, "found the name `b`"},
        {"get t where (a = 1", 400, 18, "`)` to close the `(` at 12"},
        {"get t where f(1, 2", 400, 18, "`,` or `)` in the call of `f`"},
        {"get t where a = [1, 2", 400, 21, "`,` or `]`"},
        {"get t where a = [1, ]", 400, 20, "a value"},
        {"get t where a. b = 1", 400, 15, "a key after `.`"},
        {"get t where a .b = 1", 400, 14, "no spaces"},
        {"get t where a.order = 1", 400, 14, "reserved word"},
        {"get t where now() + x = 1", 400, 20, "an integer or a parameter after `+`"},
        {"get t where now() + 1 + 2 = 3", 400, 22, "shift"},
        {"get t where + 1 = 1", 400, 12, "a value"},
        {"get t where a = 1 and", 400, 21, "a value"},
        {"get t where not", 400, 15, "a value"},
        {"get books where title ! \"x\"", 400, 22, "`!`"},
    });
}

TEST(ParseErrors, ReadClauses) {
    expect_refusals({
        {"get books limit 5 limit 6", 400, 18, "`limit` appears twice"},
        {"get books where a = 1 where b = 2", 400, 22, "`where` appears twice"},
        {"get books select a select b", 400, 19, "`select` appears twice"},
        {"get books order a order b", 400, 18, "`order` appears twice"},
        {"get books offset 1 offset 1", 400, 19, "`offset` appears twice"},
        {"get i near e [1] near e [1]", 400, 17, "`near` appears twice"},
        {"get n match b \"x\" match b \"y\"", 400, 18, "`match` appears twice"},
        {"get s select a group a group a", 400, 23, "`group` appears twice"},
        {"select a from t select b", 400, 16, "no second `select`"},
        {"select a, from t", 400, 10, "a column or an aggregate after `,`"},
        {"select a t", 400, 9, "`from`"},
        {"get t limit -1", 400, 12, "0 or more"},
        {"get t limit 1.5", 400, 12, "an integer"},
        {"get t offset x", 400, 13, "an integer"},
        {"get i near e [1] ef 0", 400, 20, "1 to 10000"},
        {"get i near e [1] ef 10001", 400, 20, "1 to 10000"},
        {"get i near e [1, \"x\"]", 400, 17, "a list of numbers"},
        {"get i near e [1, $1]", 400, 17, "a list of numbers"},
        {"get i near e 5", 400, 13, "a vector"},
        {"get n match b 5", 400, 14, "a string or a parameter"},
        {"get t select lower(a)", 400, 13, "computed columns"},
        {"get t select *, a", 400, 14, "the end of the statement"},
        {"get t select sum(*)", 400, 17, "a field in `sum(`"},
        {"get t select count(a.b)", 400, 19, "not the path"},
        {"get t select a order lower(a)", 400, 21, "computed columns"},
        {"get t order a collate", 400, 21, "a collation"},
        {"get people select name order name collate de", 400, 42, "`de`"},
        {"get people order _id collate tr", 400, 17, "`_id`"},
        {"get s select a, count(*) group a order count(*) collate tr", 400, 39, "count(*)"},
        {"get s select a, sum(x) group a order sum(x) collate und", 400, 37, "sum(x)"},
        {"get s select a group a.b", 400, 21, "not the path"},
        {"get s select a group _id", 400, 21, "`_id`"},
        {"get s select a group lower(a)", 400, 21, "a field to group by"},
    });
    // `min`/`max` may be text: collate is theirs to take.
    parse_ok("get s select a, min(b) group a order min(b) collate tr");
}

TEST(ParseErrors, ClauseRulesOfSection7_2) {
    expect_refusals({
        // near with match; either with order, group, an aggregate or a lookup
        {"get i near e [1] match b \"x\"", 400, 17, "use one"},
        {"get i match b \"x\" near e [1]", 400, 18, "use one"},
        {"get notes select _id match body \"tea\" order _id", 400, 38, "`order`"},
        {"get i near e [1] order name", 400, 17, "`order`"},
        {"get i select k, count(*) near e [1] group k", 400, 36, "`group`"},
        {"get i select count(*) near e [1]", 400, 13, "an aggregate"},
        {"get i near e [1] lookup j on k", 400, 17, "a `lookup`"},
        // aggregates without group: one row, so no order/limit/offset, no plain column
        {"get books select count(*) order year", 400, 26, "`order`"},
        {"get books select count(*) limit 1", 400, 32, "`limit`"},  // the value
        {"get books select count(*) offset 1", 400, 33, "`offset`"},
        {"get books select title, count(*)", 400, 17, "`title`"},
        {"get sales select amount, sum(amount) group region", 400, 17, "`amount`"},
        {"get sales select region, meta.x group region", 400, 25, "`meta.x`"},
        {"get books order count(*)", 400, 16, "needs `group`"},
        // group needs an explicit select list; order keys of a grouped read are known columns
        {"get sales group region", 400, 10, "select list"},
        {"get sales select * group region", 400, 19, "select list"},
        {"get sales select region, count(*) group region order city", 400, 53, "`city`"},
        {"get sales select region, count(*) group region order sum(x)", 400, 53, "`sum(x)`"},
        // answer names
        {"get books select title, title", 400, 24, "two columns are named `title`"},
        {"get books select year as title, title", 400, 32, "`title`"},
        {"get reviews select product lookup products as product on _id = product", 400, 27, "named like a column"},
        {"get r select note lookup p on _id select note lookup note on _id", 400, 46, "named like a column"},
        // lookups: not under aggregates or groups; aggregates alone in a lookup's select
        {"get products select count(*) lookup reviews on product", 400, 29, "aggregates or groups"},
        {"get s select a group a lookup r on x", 400, 23, "aggregates or groups"},
        {"get p lookup r on x select note, count(*)", 400, 27, "`note`"},
        {"get p lookup r on x select count(*) limit 1", 400, 42, "`limit`"},
        // clauses after a lookup are the lookup's own
        {"get p lookup r on x group y", 400, 20, "cannot follow a `lookup`"},
        {"get p lookup r on x near e [1]", 400, 20, "cannot follow a `lookup`"},
        {"get p lookup r on x required required", 400, 29, "`required` appears twice"},
        {"get p lookup r on x where a = 1 where b = 2", 400, 32, "`where` appears twice"},
        {"get p lookup r x", 400, 15, "`on`"},
        {"get p lookup r on", 400, 17, "the child's key"},
        {"get p lookup r as on x", 400, 18, "a name after `as`"},
    });
    // What stays legal: a group selecting its keys only, order by alias or aggregate, aggregates
    // alone in a lookup, and a clause after a lookup belonging to it.
    parse_ok("get sales select city group city");
    parse_ok("get sales select region as r, sum(amount) as total group region order r, total desc, sum(amount)");
    parse_ok("get sales select region, count(*) group region order count(*) desc limit 1 offset 1");
    parse_ok("get p select name lookup r on x select count(*), sum(y)");
    parse_ok("get p select name lookup r as items on x select items");
}

TEST(ParseErrors, SchemaRules) {
    expect_refusals({
        {"create collection t ()", 400, 21, "at least one field"},
        {"create collection t (_x int)", 400, 21, "`_x`"},
        {"create collection _t (x int)", 400, 18, "`_t`"},
        {"create collection t (a int, a text)", 400, 28, "`a` is defined twice"},
        {"create collection t (v vector<0>)", 400, 30, "1 to 4096"},
        {"create collection t (v vector<-3>)", 400, 30, "1 to 4096"},
        {"create collection t (v vector)", 400, 29, "`<`"},
        {"create collection t (v vector<2)", 400, 31, "`>`"},
        {"create collection t (n int collate tr)", 400, 27, "text and [text]"},
        {"create collection t (n int nocase)", 400, 27, "text and [text]"},
        {"create collection t (n [int] nocase)", 400, 29, "text and [text]"},
        {"create collection t (s text collate de)", 400, 36, "`de`"},
        {"create collection t (s text collate tr collate und)", 400, 39, "`collate` is given twice"},
        {"create collection t (s text nocase nocase)", 400, 35, "`nocase` is given twice"},
        {"create collection t (b text @text(k1 = 11))", 400, 39, "`k1` is 0 to 10"},
        {"create collection t (b text @text(k1 = 1.234))", 400, 39, "two decimals"},
        {"create collection t (b text @text(b = 1.5))", 400, 38, "`b` is 0 to 1"},
        {"create collection t (b text @text(b = -0.1))", 400, 38, "`b` is 0 to 1"},
        {"create collection t (b text @text(b = 0.1, b = 0.2))", 400, 43, "given twice"},
        {"create collection t (b text @text(k2 = 1))", 400, 34, "unknown @text argument `k2`"},
        {"create collection t (v vector<3> @hnsw(manhattan))", 400, 39, "`manhattan`"},
        {"create collection t (v vector<3> @hnsw(m = 1))", 400, 43, "`m` is 2 to 100"},
        {"create collection t (v vector<3> @hnsw(ef_construction = 9))", 400, 57, "10 to 2000"},
        {"create collection t (v vector<3> @hnsw(ef_search = 10001))", 400, 51, "1 to 10000"},
        {"create collection t (v vector<3> @hnsw(l2, dot))", 400, 43, "metric is given twice"},
        {"create collection t (v vector<3> @hnsw(m = 8, m = 9))", 400, 46, "given twice"},
        {"create collection t (n int @text)", 400, 27, "@text applies to text fields; `n` is int"},
        {"create collection t (n json @hash)", 400, 28, "@hash applies to"},
        {"create collection t (n bool @sorted)", 400, 28, "@sorted applies to"},
        {"create collection t (n text @hnsw)", 400, 28, "@hnsw applies to vector"},
        {"create collection bad (s text @ttl(1d))", 400, 30, "@ttl applies to timestamp"},
        {"create collection t (a text @hash @unique)", 400, 34, "at most one annotation"},
        {"create collection t (a timestamp @ttl(1d), b timestamp @ttl(2d))", 400, 55, "one `@ttl`"},
        {"create collection t (a timestamp @ttl(0s))", 400, 38, "1ms to 36500d"},
        {"create collection t (a timestamp @ttl)", 400, 37, "`(`"},
        {"create collection t (a int @hash(1))", 400, 32, "takes no arguments"},
        {"create collection t (a int @index)", 400, 27, "unknown annotation `@index`"},
        {"create collection t (a int @)", 400, 27, "annotation name"},
        {"create collection t (a integer)", 400, 23, "a type"},
        {"create collection t (a [json])", 400, 24, "a scalar type"},
        {"create collection t (a int", 400, 26, "`,` or `)`"},
        {"create t (a int)", 400, 7, "`collection`"},
        {"create collection if not books (a int)", 400, 25, "`exists`"},
        {"alter collection t add field _a int", 400, 29, "`_a`"},
        {"alter collection t add field a int collate tr", 400, 35, "text and [text]"},
        {"alter collection t rename field a to _b", 400, 37, "`_b`"},
        {"alter collection t rename field a b", 400, 34, "`to`"},
        {"alter collection t add index a", 400, 30, "an annotation"},
        {"alter collection t add a int", 400, 23, "`field` or `index`"},
        {"alter collection t drop a", 400, 24, "`field` or `index`"},
        {"alter collection t truncate", 400, 19, "`add`, `drop` or `rename`"},
        {"drop collection", 400, 15, "a collection name"},
        {"drop t", 400, 5, "`collection`"},
    });
}

// ---------------------------------------------------------------------------------------------
// Limits (§14)

TEST(ParseLimits, ExpressionDepthBoundsNestingNotLength) {
    std::string where = "get books where ";
    parse_ok(where + repeat("(", 511) + "true" + repeat(")", 511));  // depth 512
    for (size_t n : {512u, 513u, 100000u}) {
        Error e = parse_error(where + repeat("(", n) + "true" + repeat(")", n));
        EXPECT_EQ(e.status(), 413);
        EXPECT_EQ(e.limit, Limit::expression_depth);
        EXPECT_EQ(limit_name(e.limit), "expression_depth");
        EXPECT_EQ(e.max, 512u);
        EXPECT_EQ(e.position, 16u + 511u);  // the parenthesis that would pass the limit
    }
    // `not` and comparisons count too; a comparison inside each parenthesis doubles the depth.
    parse_ok(where + repeat("not ", 511) + "true");
    EXPECT_EQ(parse_error(where + repeat("not ", 512) + "true").limit, Limit::expression_depth);
    parse_ok(where + repeat("(a = ", 255) + "1" + repeat(")", 255));  // 255 * 2 + 2 = 512
    EXPECT_EQ(parse_error(where + repeat("(a = ", 256) + "1" + repeat(")", 256)).limit,
              Limit::expression_depth);
    parse_ok(where + repeat("f(", 511) + "1" + repeat(")", 511));
    EXPECT_EQ(parse_error(where + repeat("f(", 512) + "1" + repeat(")", 512)).limit,
              Limit::expression_depth);
    // Flattened chains are one level, however long (and read without recursion).
    std::string ors = where + "a = 0";
    for (int i = 1; i < 10'000; ++i) ors += " or a = " + std::to_string(i);
    EXPECT_EQ(parsed<Get>(ors).where->expr.as<Or>().terms.size(), 10'000u);
    std::string ands = where + repeat("true and ", 50'000) + "true";
    EXPECT_EQ(parsed<Get>(ands).where->expr.as<And>().terms.size(), 50'001u);
}

TEST(ParseLimits, ValueNestingPathsAndVectors) {
    parse_ok("insert t {a: " + repeat("[", 64) + repeat("]", 64) + "}");
    Error json = parse_error("insert t {a: " + repeat("[", 65) + repeat("]", 65) + "}");
    EXPECT_EQ(json.limit, Limit::json_depth);
    EXPECT_EQ(json.max, 64u);
    EXPECT_EQ(json.position, 13u + 64u);
    EXPECT_EQ(parse_error("insert t {a: " + repeat("{a: ", 65) + "1" + repeat("}", 65) + "}").limit,
              Limit::json_depth);
    EXPECT_EQ(parse_error("get t where a = " + repeat("[", 65) + repeat("]", 65)).limit, Limit::json_depth);

    std::string path = "get t where m";
    parse_ok(path + repeat(".k", 64) + " = 1");
    Error keys = parse_error(path + repeat(".k", 65) + " = 1");
    EXPECT_EQ(keys.limit, Limit::path_keys);
    EXPECT_EQ(keys.max, 64u);
    EXPECT_EQ(keys.position, 13u + 64u * 2u + 1u);

    parse_ok("create collection t (v vector<4096>)");
    Error dim = parse_error("create collection t (v vector<4097>)");
    EXPECT_EQ(dim.status(), 413);
    EXPECT_EQ(dim.limit, Limit::vector_dimension);
    EXPECT_EQ(dim.max, 4096u);
}

TEST(ParseLimits, StatementBytesFieldsLookupsRankedRows) {
    std::string head = "get t where a = \"";
    std::string exact = head + std::string((1u << 20) - head.size() - 1, 'x') + "\"";
    ASSERT_EQ(exact.size(), 1u << 20);
    parse_ok(exact);
    Error big = parse_error(exact + " ");
    EXPECT_EQ(big.status(), 413);
    EXPECT_EQ(big.limit, Limit::statement_bytes);
    EXPECT_EQ(big.max, 1u << 20);
    EXPECT_FALSE(big.position);

    std::string fields = "create collection t (f0 int";
    for (int i = 1; i < 1024; ++i) fields += ", f" + std::to_string(i) + " int";
    EXPECT_EQ(parsed<Create>(fields + ")").fields.size(), 1024u);
    Error many = parse_error(fields + ", g int)");
    EXPECT_EQ(many.limit, Limit::fields);
    EXPECT_EQ(many.max, 1024u);

    std::string chain = "get products";
    parse_ok(chain + repeat(" lookup products on _id", 8));
    Error deep = parse_error(chain + repeat(" lookup products on _id", 9));
    EXPECT_EQ(deep.status(), 413);
    EXPECT_EQ(deep.limit, Limit::lookup_depth);
    EXPECT_EQ(deep.max, 8u);
    EXPECT_EQ(deep.position, 12u + 8u * 23u + 1u);

    parse_ok("get items near e [1, 0] limit 10000");
    parse_ok("get items near e [1, 0] limit 9000 offset 1000");
    parse_ok("get items near e [1, 0] limit $1 offset 5000");  // the executor checks bound values
    for (const char* text : {"get items near e [1, 0] limit 10001",
                             "get items near e [1, 0] limit 9000 offset 1001",
                             "get notes match body \"x\" offset 1 limit 10000"}) {
        Error e = parse_error(text);
        EXPECT_EQ(e.status(), 413) << text;
        EXPECT_EQ(e.limit, Limit::ranked_rows) << text;
        EXPECT_EQ(e.max, 10000u) << text;
        EXPECT_FALSE(e.position) << text;
    }
    parse_ok("get items where a = 1 limit 10001");  // unranked reads have no such limit
}

// ---------------------------------------------------------------------------------------------
// Every example statement of fenecql.md §16

struct SpecCase {
    const char* id;
    std::string text;
    int status;  // 0: parses
    std::optional<uint32_t> position;
};

std::vector<SpecCase> spec_cases() {
    return {
        {"B.create", R"q(create collection books (title text, genres [text], year int @hash, price float,
                         added timestamp, meta json))q", 0, std::nullopt},
        {"B.insert", R"q(insert books [
  {title: "Kuyucaklı Yusuf", genres: ["roman", "klasik"], year: 1937, price: 39.5,
   added: "2024-01-05T10:00:00Z", meta: {pages: 256, lang: "tr"}},
  {title: "Tutunamayanlar", genres: ["roman"], year: 1972, price: 25,
   added: "2024-01-05T10:00:00.250Z", meta: {pages: 724, lang: "tr"}},
  {title: "Saatleri Ayarlama Enstitüsü", genres: ["roman", "klasik"], year: 1961,
   added: "2024-03-01"},
  {title: "Şiirler", genres: [], year: 1949, price: 10, added: 1704067200000,
   meta: {pages: 128, lang: "tr"}}
])q", 0, std::nullopt},
        {"S.create", "create collection sales (region text, city text collate tr nocase, amount int, at timestamp)", 0, std::nullopt},
        {"S.insert", R"q(insert sales [
  {region: "ege", city: "İzmir", amount: 100, at: "2025-03-01T09:00:00Z"},
  {region: "ege", city: "izmir", amount: 50, at: "2025-03-02T09:00:00Z"},
  {region: "marmara", city: "İstanbul", amount: 300, at: "2025-03-01T12:00:00.5Z"},
  {region: "marmara", city: "ISTANBUL", amount: 20, at: "2025-03-03T00:00:00Z"},
  {region: "marmara", city: "Bursa", amount: 70},
  {city: "Ankara", amount: 5}
])q", 0, std::nullopt},
        {"P.create", R"q(create collection people (name text, tname text collate tr, fname text nocase,
                          tfname text collate tr nocase))q", 0, std::nullopt},
        {"P.insert", "insert people $1", 0, std::nullopt},
        {"T.create", "create collection events (name text, t timestamp @sorted)", 0, std::nullopt},
        {"T.insert", R"q(insert events [
  {name: "a", t: "2027-04-23T08:15:30Z"}, {name: "b", t: "2027-04-23 11:15:30+03:00"},
  {name: "c", t: 0}, {name: "d", t: "2028-02-29"}, {name: "e", t: 1767225599999},
  {name: "f", t: "2026-01-01T00:00:00.5Z"}, {name: "g", t: "2026-01-01T00:00:00.123456z"},
  {name: "h"}
])q", 0, std::nullopt},
        {"T.create_sessions", "create collection sessions (user text, seen timestamp @ttl(1d))", 0, std::nullopt},
        {"T.insert_sessions", R"q(insert sessions [{user: "a", seen: "2026-01-30T00:00:00.001Z"},
                 {user: "b", seen: "2026-01-30T00:00:00Z"}, {user: "c"}])q", 0, std::nullopt},
        {"M.create", "create collection notes (body text @text, lang text)", 0, std::nullopt},
        {"M.insert", R"q(insert notes [{body: "black tea", lang: "en"}, {body: "green tea, mint", lang: "en"},
              {body: "black coffee", lang: "en"}, {body: "İzmir tea house, tea", lang: "tr"},
              {body: "IZMIR ızmir", lang: "tr"}])q", 0, std::nullopt},
        {"V.create_items", "create collection items (name text, kind text, e vector<2> @hnsw)", 0, std::nullopt},
        {"V.insert_items", R"q(insert items [{name: "a", kind: "x", e: [1, 0]}, {name: "b", kind: "y", e: [0.8, 0.6]},
              {name: "c", kind: "x", e: [0, 1]}, {name: "d", kind: "y", e: [-1, 0]},
              {name: "e", kind: "x", e: [0.6, 0.8]}, {name: "f", kind: "x"}])q", 0, std::nullopt},
        {"V.create_pts", "create collection pts (p vector<2> @hnsw(l2))", 0, std::nullopt},
        {"V.insert_pts", "insert pts [{p: [0, 0]}, {p: [3, 4]}, {p: [1, 1]}]", 0, std::nullopt},
        {"V.create_ds", "create collection ds (d vector<2> @hnsw(dot, m = 8, ef_search = 50))", 0, std::nullopt},
        {"V.insert_ds", "insert ds [{d: [1, 2]}, {d: [3, 0]}, {d: [-1, 5]}]", 0, std::nullopt},
        {"L.create_products", "create collection products (name text)", 0, std::nullopt},
        {"L.create_reviews", "create collection reviews (product int @hash, rating int, note text)", 0, std::nullopt},
        {"L.create_replies", "create collection replies (review int @hash, msg text)", 0, std::nullopt},
        {"L.insert_products", R"q(insert products [{name: "Çaydanlık"}, {name: "Fincan"}, {name: "Tepsi"}])q", 0, std::nullopt},
        {"L.insert_reviews", R"q(insert reviews [{product: 1, rating: 5, note: "harika"}, {product: 1, rating: 2, note: "küçük"},
                {product: 1, rating: 4, note: "iyi"}, {product: 3, rating: 1, note: "kırık"}])q", 0, std::nullopt},
        {"L.insert_replies", R"q(insert replies [{review: 1, msg: "teşekkürler"}, {review: 4, msg: "üzgünüz"}])q", 0, std::nullopt},
        {"#2", "get books select count(*)", 0, std::nullopt},
        {"#3", "get books where _id = 4", 0, std::nullopt},
        {"#4", "get books select title where year >= 1961 order year desc", 0, std::nullopt},
        {"#5", "get books select title, year order year limit 2 offset 1", 0, std::nullopt},
        {"#6", R"q(get books select title where genres has "klasik")q", 0, std::nullopt},
        {"#7", "get books select title where price != 25", 0, std::nullopt},
        {"#8", "get books select title where price > 0", 0, std::nullopt},
        {"#9", "get books select title where price is null", 0, std::nullopt},
        {"#10", R"q(get books select title where year = "1961")q", 0, std::nullopt},
        {"#11", "get books select title where year = $1", 0, std::nullopt},
        {"#12", "get books select title where year not in [1937, 1972]", 0, std::nullopt},
        {"#13", R"q(get books select title where genres = ["roman"])q", 0, std::nullopt},
        {"#14", R"q(get books select title where title ~ "YUSUF" or title ~ "şiir")q", 0, std::nullopt},
        {"#15", "get books select title where len(genres) = 0", 0, std::nullopt},
        {"#16", "get books select meta.pages where meta.pages > 200 order meta.pages desc", 0, std::nullopt},
        {"#17", "get books select year as y, title order y limit 1", 0, std::nullopt},
        {"#18", "select title from books where year = 1949", 0, std::nullopt},
        {"#19", "get books select _id order _id desc limit 1", 0, std::nullopt},
        {"#20", "get books select sum(price), avg(price), min(price), max(price), count(price), count(*)", 0, std::nullopt},
        {"#21", "get books select SUM( price ) as total, max(added)", 0, std::nullopt},
        {"#22", "get books select title order added", 0, std::nullopt},
        {"#23", "get books select added where _id = 2", 0, std::nullopt},
        {"#24", R"q(get books select title where added >= "2024-01-05T10:00:00.1Z")q", 0, std::nullopt},
        {"#25", "get books select sum(title)", 0, std::nullopt},
        {"#26", "get books select title, count(*)", 400, 17},
        {"#27", "get books select count(*) order year", 400, 26},
        {"#28", "get nosuch", 0, std::nullopt},
        {"#29", R"q(insert books {_id: 2, title: "x"})q", 0, std::nullopt},
        {"#30", R"q(insert books [{_id: 10, title: "On"}, {_id: 2, title: "x"}])q", 0, std::nullopt},
        {"#31", R"q(put books {_id: 2, title: "Tutunamayanlar"})q", 0, std::nullopt},
        {"#32a", R"q(insert books {title: "Yeni"})q", 0, std::nullopt},
        {"#32b", "del books where _id = 5", 0, std::nullopt},
        {"#32c", R"q(insert books {title: "Yeniden"})q", 0, std::nullopt},
        {"#33a", R"q(insert books {_id: 100, title: "Yüz"})q", 0, std::nullopt},
        {"#33b", R"q(insert books {title: "Sonra"})q", 0, std::nullopt},
        {"#34a", "set books {price: 12.5} where year < 1950", 0, std::nullopt},
        {"#34b", "get books select price order _id", 0, std::nullopt},
        {"#35", "set books {price: 1}", 400, 20},
        {"#36", "set books {_id: 9} where true", 400, 11},
        {"#37", "insert books {title: 5}", 0, std::nullopt},
        {"#38a", "insert books {year: 2020.0}", 0, std::nullopt},
        {"#38b", "insert books {year: 2020.5}", 0, std::nullopt},
        {"#39", "insert books $1", 0, std::nullopt},
        {"#39b", "get books select added where _id = 6", 0, std::nullopt},
        {"#40", "insert books {nope: 1}", 0, std::nullopt},
        {"#41", "get sales select region, count(*), sum(amount) group region", 0, std::nullopt},
        {"#42", "get sales select city, count(*), sum(amount) group city", 0, std::nullopt},
        {"#43", "get sales select city group city", 0, std::nullopt},
        {"#44", "get sales select region, city, sum(amount) group region, city", 0, std::nullopt},
        {"#45", "get sales select region, sum(amount) as total group region order total desc limit 1", 0, std::nullopt},
        {"#46", "get sales select region, count(*) group region order region collate tr desc", 0, std::nullopt},
        {"#47", "get sales select region, avg(amount) group region", 0, std::nullopt},
        {"#48", "get sales select region, min(at), max(at) group region", 0, std::nullopt},
        {"#49", R"q(get sales select count(*) where city = "İZMİR")q", 0, std::nullopt},
        {"#50", R"q(get sales select count(*) where city = "IZMIR")q", 0, std::nullopt},
        {"#51", "get sales select min(city), max(city)", 0, std::nullopt},
        {"#52", "get sales select sum(amount), count(at), count(*) where amount > 1000", 0, std::nullopt},
        {"#53", "get sales select region, count(*) where amount > 1000 group region", 0, std::nullopt},
        {"#54a", R"q(insert sales [{region: "big", amount: 9223372036854775807}, {region: "big", amount: 1}])q", 0, std::nullopt},
        {"#54b", R"q(get sales select sum(amount) where region = "big")q", 0, std::nullopt},
        {"#55", "get sales select region, sum(amount) group region", 0, std::nullopt},
        {"#56", R"q(get sales select max(amount), count(*) where region = "big")q", 0, std::nullopt},
        {"#57", "get sales select region, count(*) group region order count(*) collate tr", 400, 53},
        {"#58", "get sales select amount, sum(amount) group region", 400, 17},
        {"#59", "get people select name order name", 0, std::nullopt},
        {"#60", "get people select name order name collate und", 0, std::nullopt},
        {"#61", "get people select name order name collate tr", 0, std::nullopt},
        {"#62", "get people select tname order tname", 0, std::nullopt},
        {"#63", "get people select tname order tname desc", 0, std::nullopt},
        {"#64", "get people select fname order fname", 0, std::nullopt},
        {"#65", "get people select fname order fname collate tr", 0, std::nullopt},
        {"#66", "get people select tfname order tfname", 0, std::nullopt},
        {"#67", "get people select tfname order tfname desc", 0, std::nullopt},
        {"#68", "get people select tfname order tfname collate und", 0, std::nullopt},
        {"#69", R"q(get people select _id where tfname = "ILKAY")q", 0, std::nullopt},
        {"#70", R"q(get people select _id where fname = "ILKAY")q", 0, std::nullopt},
        {"#71", R"q(get people select _id where tname = "ilkay")q", 0, std::nullopt},
        {"#72", R"q(get people select tname where tname > "Ilkay" order tname)q", 0, std::nullopt},
        {"#73", R"q(get people select tfname where tfname >= "ILKAY" order tfname)q", 0, std::nullopt},
        {"#74", "get people select tfname, count(*) group tfname", 0, std::nullopt},
        {"#75", "get people select fname, count(*) group fname", 0, std::nullopt},
        {"#76", "get people select min(tname), max(tname), min(tfname), max(tfname) where _id in [1, 8, 9]", 0, std::nullopt},
        {"#77", R"q(get people select _id where tname ~ "IL")q", 0, std::nullopt},
        {"#78", R"q(get people select _id where name ~ "IL")q", 0, std::nullopt},
        {"#79", "get people order _id collate tr", 400, 17},
        {"#80", "get people select name order name collate de", 400, 42},
        {"#81", R"q(get events select name, t where name in ["b", "c", "e", "f", "g"])q", 0, std::nullopt},
        {"#82", "get events select name order t", 0, std::nullopt},
        {"#83", "get events select name order t desc", 0, std::nullopt},
        {"#84", R"q(get events select name where t >= "2026-01-01T00:00:00.2Z")q", 0, std::nullopt},
        {"#85", "get events select name where t = 1808468130000", 0, std::nullopt},
        {"#86", "get events select min(t), max(t)", 0, std::nullopt},
        {"#87", R"q(get events select name where t < "2025")q", 0, std::nullopt},
        {"#88a", R"q(insert events {t: "2026-02-30"})q", 0, std::nullopt},
        {"#88b", R"q(insert events {t: "2026-09-19T24:00:00Z"})q", 0, std::nullopt},
        {"#88c", R"q(insert events {t: "yesterday"})q", 0, std::nullopt},
        {"#88d", "insert events {t: -62167219200001}", 0, std::nullopt},
        {"#89a", R"q(set events {t: now()} where name = "h")q", 0, std::nullopt},
        {"#89b", R"q(get events select name where t > "2026-05-31")q", 0, std::nullopt},
        {"#90", "get sessions select user", 0, std::nullopt},
        {"#91a", "get sessions select count(*)", 0, std::nullopt},
        {"#91b", "del sessions where true", 0, std::nullopt},
        {"#92", R"q(insert sessions {_id: 2, user: "b2", seen: "2026-01-30T12:00:00Z"})q", 0, std::nullopt},
        {"#93", "create collection bad (s text @ttl(1d))", 400, 30},
        {"#94", R"q(get notes select _id match body "tea")q", 0, std::nullopt},
        {"#95", R"q(get notes select _id match body "black")q", 0, std::nullopt},
        {"#96", R"q(get notes select _id match body "black tea")q", 0, std::nullopt},
        {"#97", R"q(get notes select _id match body "İZMİR")q", 0, std::nullopt},
        {"#98", R"q(get notes select _id match body "tea tea")q", 0, std::nullopt},
        {"#99", R"q(get notes select _id match body "house mint")q", 0, std::nullopt},
        {"#100", R"q(get notes select _id match body "tea" where lang = "en")q", 0, std::nullopt},
        {"#101", R"q(get notes match body "coffee")q", 0, std::nullopt},
        {"#102", R"q(get notes select _id match body "tea" limit 1 offset 1)q", 0, std::nullopt},
        {"#103", R"q(get notes select _id match body "çay, kırmızı")q", 0, std::nullopt},
        {"#104a", "del notes where _id = 3", 0, std::nullopt},
        {"#104b", R"q(get notes select _id match body "black")q", 0, std::nullopt},
        {"#105", R"q(get notes select _id match body "tea" order _id)q", 400, 38},
        {"#106", R"q(get notes match lang "tr")q", 0, std::nullopt},
        {"#107", "get items select name near e [1, 0] limit 3", 0, std::nullopt},
        {"#108", "get items select name near e [1, 0] limit 2 offset 1", 0, std::nullopt},
        {"#109", R"q(get items select name where kind = "x" near e [1, 0] limit 3)q", 0, std::nullopt},
        {"#110", R"q(get items select name where kind = "x" near e [1, 0] limit 10)q", 0, std::nullopt},
        {"#111", "get items select name near e [1, 0]", 0, std::nullopt},
        {"#112", "get items near e $1 limit 1", 0, std::nullopt},
        {"#113", "get pts select _id near p [0, 0]", 0, std::nullopt},
        {"#114", "get ds select _id near d [1, 1]", 0, std::nullopt},
        {"#115", "get items near e [1, 0, 0] limit 1", 0, std::nullopt},
        {"#116", "get items near name [1, 0]", 0, std::nullopt},
        {"#117a", "get items near e [1, 0] limit 10001", 413, std::nullopt},
        {"#117b", "get items near e [1, 0] limit 9000 offset 1001", 413, std::nullopt},
        {"#118a", "get items near e [1, 0] order name", 400, 24},
        {"#118b", "get items near e [0, 0] limit 1", 0, std::nullopt},
        {"#119a", "get items where kind = 7 near e $1 limit 50", 0, std::nullopt},
        {"#119b", "get items where kind < 60 near e $1 limit 50", 0, std::nullopt},
        {"#120", "get products select name lookup reviews on product select rating order rating desc limit 2", 0, std::nullopt},
        {"#121", "get products select name lookup reviews on product required where rating >= 4", 0, std::nullopt},
        {"#122", "get products select name limit 1 lookup reviews on product required where rating <= 2 select note", 0, std::nullopt},
        {"#123", "get products select name where _id = 1 lookup reviews on product select _id, rating lookup replies on review select msg", 0, std::nullopt},
        {"#124", "get reviews select rating where _id = 4 lookup products as item on _id = product select name", 0, std::nullopt},
        {"#125", "get products lookup reviews on rating", 0, std::nullopt},
        {"#126", "get products select count(*) lookup reviews on product", 400, 29},
        {"#127", "get reviews select product lookup products as product on _id = product", 400, 27},
        {"#128", std::string("get products") + repeat(" lookup products on _id", 9), 413, 197},
        {"#129", "", 400, 0},
        {"#130", "frobnicate books", 400, 0},
        {"#131", R"q(get books where title = "abc)q", 400, 24},
        {"#132", "get books where year = $0", 400, 23},
        {"#133", "get books; get books", 400, 11},
        {"#134", R"q(get books where title ! "x")q", 400, 22},
        {"#135", "get books where şehir = 1", 400, 16},
        {"#136", "get books where year = 99999999999999999999", 400, 23},
        {"#137", "get books limit 5 limit 6", 400, 18},
        {"#138a", "get books where order = 1", 400, 16},
        {"#138b", "get books where `order` = 1", 0, std::nullopt},
        {"#139", "get books where year = $2", 0, std::nullopt},
        {"#140", "get books where year = $70000", 413, 23},
        {"#141a", std::string("get books where ") + repeat("(", 513) + "true" + repeat(")", 513), 413, 527},
        {"#141b", std::string("get books where ") + repeat("(", 511) + "true" + repeat(")", 511), 0, std::nullopt},
        {"#143a", "create collection t ()", 400, 21},
        {"#143b", "create collection t (_x int)", 400, 21},
        {"#143c", "create collection _t (x int)", 400, 18},
        {"#143d", "create collection t (a int, a text)", 400, 28},
        {"#144a", "create collection t (v vector<0>)", 400, 30},
        {"#144b", "create collection t (v vector<4097>)", 413, 30},
        {"#145a", "create collection t (n int collate tr)", 400, 27},
        {"#145b", "create collection t (n int nocase)", 400, 27},
        {"#145c", "create collection t (s text collate de)", 400, 36},
        {"#146a", "create collection t (b text @text(k1 = 11))", 400, 39},
        {"#146b", "create collection t (v vector<3> @hnsw(manhattan))", 400, 39},
        {"#146c", "create collection t (n int @text)", 400, 27},
        {"#146d", "create collection t (a text @hash @unique)", 400, 34},
        {"#147a", "create collection t (a timestamp @ttl(1d), b timestamp @ttl(2d))", 400, 55},
        {"#147b", "create collection t (a timestamp @ttl(0s))", 400, 38},
        {"#148a", "create collection books (x int)", 0, std::nullopt},
        {"#148b", "create collection if not exists books (x int)", 0, std::nullopt},
        {"#149", std::string("create collection ") + repeat("a", 65) + " (x int)", 413, 18},
        {"#150a", "drop collection nosuch", 0, std::nullopt},
        {"#150b", "drop collection if exists nosuch", 0, std::nullopt},
        {"#151a", "alter collection books add field isbn text nocase @unique", 0, std::nullopt},
        {"#151b", R"q(insert books {isbn: "ab-1"})q", 0, std::nullopt},
        {"#151c", R"q(insert books {isbn: "AB-1"})q", 0, std::nullopt},
        {"#152a", "alter collection books rename field isbn to code", 0, std::nullopt},
        {"#152b", R"q(get books select code where code = "AB-1")q", 0, std::nullopt},
        {"#153a", "alter collection books add index title @unique", 0, std::nullopt},
        {"#153b", "alter collection books add index year @sorted", 0, std::nullopt},
        {"#154", R"q(insert books {title: "Şiirler"})q", 0, std::nullopt},
        {"#155", "alter collection books drop field price", 0, std::nullopt},
        {"#156", "get books select count(*)", 0, std::nullopt},
        {"#157", "del books where true", 0, std::nullopt},
        {"#158a", "compact", 0, std::nullopt},
        {"#158b", "create collection x (a int)", 0, std::nullopt},
        {"#158c", "set books {price: 1} where true", 0, std::nullopt},
        {"#159", "insert nosuch {a: 1}", 0, std::nullopt},
        {"#160", "put books {", 400, 11},
    };
}

TEST(ParseSpec, EveryExampleStatementOfSection16) {
    size_t parsed = 0;
    for (const SpecCase& c : spec_cases()) {
        SCOPED_TRACE(c.id);
        QlResult<ParsedStatement> r = parse(c.text);
        if (c.status == 0) {
            EXPECT_TRUE(r.is_ok()) << c.text << "\n  -> " << (r.is_ok() ? "" : r.error().to_string());
            parsed += r.is_ok();
            continue;
        }
        ASSERT_FALSE(r.is_ok()) << c.text.substr(0, 200);
        EXPECT_EQ(r.error().status(), c.status) << r.error().to_string();
        EXPECT_EQ(r.error().position, c.position) << r.error().to_string();
    }
    EXPECT_GT(parsed, 150u);
}

TEST(ParseSpec, ReadOnlyClassification) {
    // §4: the read-only endpoint refuses these before it looks at the tenant (#157 to #159).
    struct Case {
        const char* text;
        bool writes;
        const char* first_word;
    };
    for (const Case& c : {Case{"get books select count(*)", false, "get"},
                          Case{"SELECT a FROM b", false, "select"},
                          Case{"del books where true", true, "del"},
                          Case{"compact", true, "compact"},
                          Case{"create collection x (a int)", true, "create"},
                          Case{"set books {price: 1} where true", true, "set"},
                          Case{"insert nosuch {a: 1}", true, "insert"},
                          Case{"Put nosuch {a: 1}", true, "put"},
                          Case{"alter collection b drop index a", true, "alter"},
                          Case{"drop collection b", true, "drop"}}) {
        ParsedStatement p = parse_ok(c.text);
        EXPECT_EQ(p.statement.writes(), c.writes) << c.text;
        EXPECT_EQ(p.statement.first_word(), c.first_word) << c.text;
    }
}

}  // namespace
}  // namespace fenec::ql::parser_test
