// test/server/node/parts/json_body_test.cc: proves the node's body reader (server/node/json_body.h)
// reads values as fenecql.md §12.2 says and refuses what node-http.md §5.1, §5.2, §5.3 refuse, with
// the right status, line and limit; and that REST filters (server/node/rest_filter.h) become
// statements that parse and answer the rows the filter names: each filter is run through ql::parse
// and ql::Executor over a real (in-memory) tenant and checked against the ids expected, and a
// shape's row test is checked against the executor's own answer for the same filters.
#include "server/node/json_body.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "server/node/rest_filter.h"
#include "test/support/engine_fixture.h"

namespace fenec::node::json_body_test {
namespace {

using engine::Value;

std::string nested_lists(int depth) {
    return std::string(size_t(depth), '[') + "1" + std::string(size_t(depth), ']');
}

// ---------------------------------------------------------------------------------------------
// /query bodies

TEST(QueryBody, ReadsEveryKindAsFenecqlSays) {
    auto r = parse_query_body(
        R"({"query":"get b where a = $1","params":[7,-9223372036854775808,1.0,1e2,0.5,"x\u00e9",)"
        R"(true,false,null,[1,"a"],{"k":1,"j":[2]}]})");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->query, "get b where a = $1");
    const std::vector<Value>& p = r->params;
    ASSERT_EQ(p.size(), 11u);
    EXPECT_EQ(p[0], Value(int64_t{7}));
    EXPECT_EQ(p[1], Value(INT64_MIN));
    EXPECT_EQ(p[2], Value(1.0));  // a fraction keeps it a float
    EXPECT_TRUE(std::holds_alternative<double>(p[2].rep));
    EXPECT_TRUE(std::holds_alternative<double>(p[3].rep));  // so does an exponent
    EXPECT_EQ(p[4], Value(0.5));
    EXPECT_EQ(p[5], Value(std::string("x\xc3\xa9")));
    EXPECT_EQ(p[6], Value(true));
    EXPECT_EQ(p[7], Value(false));
    EXPECT_TRUE(p[8].is_null());
    EXPECT_EQ(p[9], Value(engine::List{{Value(int64_t{1}), Value("a")}}));
    const auto* obj = std::get_if<engine::Object>(&p[10].rep);
    ASSERT_NE(obj, nullptr);
    EXPECT_EQ(obj->keys, (std::vector<std::string>{"k", "j"}));  // order written
}

TEST(QueryBody, ParamsAbsentOrNullAreNone) {
    for (const char* body : {R"({"query":"get b"})", R"({"params":null,"query":"get b"})",
                             R"({"query":"get b","params":[]})"}) {
        auto r = parse_query_body(body);
        ASSERT_TRUE(r) << body << ": " << r.error().message;
        EXPECT_TRUE(r->params.empty());
    }
}

TEST(QueryBody, RefusesWhatSection51Refuses) {
    struct Case {
        std::string body;
        std::string says;
    };
    const std::vector<Case> cases = {
        {R"({"query":"get b","params":{"a":1}})", "params"},
        {R"({"query":"get b","params":5})", "params"},
        {R"({"query":"get b","param":[]})", "`param`"},
        {R"({"params":[]})", "missing"},
        {R"({"query":5})", "string"},
        {R"({"query":"a","query":"b"})", "twice"},
        {R"(["get b"])", "object"},
        {R"({"query":"get b")", "not valid JSON"},
        {"", "not valid JSON"},
        {"{\"query\":\"get \xff\"}", "UTF-8"},
        {R"({"query":"x","params":[9223372036854775808]})", "int64"},
        {R"({"query":"x","params":[123456789012345678901234567890]})", ""},
        {R"({"query":"x","params":[1e999]})", ""},
        {R"({"query":"x","params":[{"a":1,"b":2,"a":3}]})", "`a` is given twice"},
    };
    for (const Case& c : cases) {
        auto r = parse_query_body(c.body);
        ASSERT_FALSE(r) << c.body;
        EXPECT_EQ(r.error().status, 400) << c.body;
        EXPECT_NE(r.error().message.find(c.says), std::string::npos)
            << c.body << ": " << r.error().message;
        EXPECT_FALSE(r.error().line);
    }
}

TEST(QueryBody, DepthIsBoundedAsJsonDepth) {
    // A parameter is level 1: 63 lists around a scalar reach level 64.
    auto ok = parse_query_body(R"({"query":"x","params":[)" + nested_lists(63) + "]}");
    ASSERT_TRUE(ok) << ok.error().message;
    auto empty = parse_query_body(R"({"query":"x","params":[)" + std::string(64, '[') +
                                  std::string(64, ']') + "]}");
    ASSERT_TRUE(empty) << empty.error().message;
    for (int depth : {64, 65, 70, 100000}) {
        auto r = parse_query_body(R"({"query":"x","params":[)" + nested_lists(depth) + "]}");
        ASSERT_FALSE(r) << depth;
        EXPECT_EQ(r.error().status, 413) << depth;
        EXPECT_EQ(r.error().limit, ql::Limit::json_depth) << depth;
        EXPECT_EQ(r.error().max, 64u);
    }
}

TEST(QueryBody, ReaderIsReusableAcrossSizes) {
    BodyReader reader;
    const std::string big_text(3 << 20, 'x');  // past the reuse bound: parsed apart
    for (int round = 0; round < 3; ++round) {
        auto small = reader.query_body(R"({"query":"get b","params":[1]})");
        ASSERT_TRUE(small);
        EXPECT_EQ(small->params.at(0), Value(int64_t{1}));
        auto big = reader.query_body(R"({"query":")" + big_text + R"("})");
        ASSERT_TRUE(big);
        EXPECT_EQ(big->query.size(), big_text.size());
        auto bad = reader.query_body(R"({"query":)");
        EXPECT_FALSE(bad);
    }
}

// ---------------------------------------------------------------------------------------------
// /batch bodies

TEST(Batch, NdjsonSkipsBlankLinesAndCountsLines) {
    auto r =
        parse_batch("\n{\"query\":\"get a\"}\r\n  \t\n{\"query\":\"get b\",\"params\":[2]}", true);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[0].query, "get a");
    EXPECT_EQ((*r)[1].params.at(0), Value(int64_t{2}));

    auto bad = parse_batch("{\"query\":\"get a\"}\n\n{\"query\":\"get a\",\"x\":1}\n", true);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().status, 400);
    EXPECT_EQ(bad.error().line, 3u);

    auto not_json = parse_batch("{\"query\":\"get a\"}\n{\"query\":", true);
    ASSERT_FALSE(not_json);
    EXPECT_EQ(not_json.error().line, 2u);

    auto deep = parse_batch("{\"query\":\"x\",\"params\":[" + nested_lists(64) + "]}", true);
    ASSERT_FALSE(deep);
    EXPECT_EQ(deep.error().status, 413);
    EXPECT_EQ(deep.error().line, 1u);

    auto empty = parse_batch("\n\n", true);
    ASSERT_TRUE(empty);
    EXPECT_TRUE(empty->empty());
}

TEST(Batch, AtMostTenThousandStatements) {
    std::string body;
    for (size_t i = 0; i < batch_statements_max; ++i) body += "{\"query\":\"get a\"}\n";
    auto full = parse_batch(body, true);
    ASSERT_TRUE(full);
    EXPECT_EQ(full->size(), batch_statements_max);
    auto over = parse_batch(body + "\n{\"query\":\"get a\"}", true);
    ASSERT_FALSE(over);
    EXPECT_EQ(over.error().status, 400);
    EXPECT_EQ(over.error().line, batch_statements_max + 2);

    std::string array = "[";
    for (size_t i = 0; i <= batch_statements_max; ++i) {
        array += std::string(i ? "," : "") + "{\"query\":\"get a\"}";
    }
    auto over_json = parse_batch(array + "]", false);
    ASSERT_FALSE(over_json);
    EXPECT_EQ(over_json.error().status, 400);
}

TEST(Batch, JsonArrayForm) {
    auto r = parse_batch(R"([{"query":"get a"},{"query":"get b","params":[1.5]}])", false);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[1].params.at(0), Value(1.5));

    auto bad = parse_batch(R"([{"query":"get a"},{"query":1}])", false);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().status, 400);
    EXPECT_FALSE(bad.error().line);
    EXPECT_NE(bad.error().message.find("statement 1"), std::string::npos);
    EXPECT_FALSE(parse_batch(R"({"query":"get a"})", false));
    // NDJSON is not read as an array, nor an array as NDJSON.
    EXPECT_FALSE(parse_batch("{\"query\":\"get a\"}\n{\"query\":\"get b\"}", false));
    EXPECT_FALSE(parse_batch(R"([{"query":"get a"}])", true));
}

// ---------------------------------------------------------------------------------------------
// REST documents

TEST(Document, ObjectOrListOfObjects) {
    auto one = parse_document_body(R"({"title":"a","n":1,"tags":["x"]})");
    ASSERT_TRUE(one) << one.error().message;
    const auto* obj = std::get_if<engine::Object>(&one->rep);
    ASSERT_NE(obj, nullptr);
    EXPECT_EQ(obj->values.at(1), Value(int64_t{1}));

    auto many = parse_document_body(R"([{"n":1},{"n":2.5},{}])");
    ASSERT_TRUE(many) << many.error().message;
    const auto* list = std::get_if<engine::List>(&many->rep);
    ASSERT_NE(list, nullptr);
    EXPECT_EQ(list->items.size(), 3u);

    auto empty = parse_document_body("[]");
    ASSERT_TRUE(empty);

    for (const char* body :
         {"5", "\"x\"", "null", "[1]", "[{\"a\":1},[]]", "{\"a\":1,\"a\":2}", "{", "[{\"a\":1}"}) {
        auto r = parse_document_body(body);
        ASSERT_FALSE(r) << body;
        EXPECT_EQ(r.error().status, 400) << body;
    }
}

TEST(Document, FieldValuesNestAtMost64) {
    EXPECT_TRUE(parse_document_body("{\"m\":" + nested_lists(63) + "}"));
    EXPECT_TRUE(parse_document_body("[{\"m\":" + nested_lists(63) + "}]"));
    auto r = parse_document_body("{\"m\":" + nested_lists(64) + "}");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, 413);
    EXPECT_EQ(r.error().limit, ql::Limit::json_depth);
}

TEST(Document, UnknownFieldIs404) {
    const engine::Schema schema = test::schema_of("title:text, n:int");
    auto doc = parse_document_body(R"([{"_id":3,"title":"a"},{"n":1,"nope":2}])");
    ASSERT_TRUE(doc);
    auto err = check_document_fields(doc.value(), schema);
    ASSERT_TRUE(err);
    EXPECT_EQ(err->status, 404);
    EXPECT_NE(err->message.find("`nope`"), std::string::npos);
    auto fine = parse_document_body(R"({"_id":3,"title":"a","n":null})");
    ASSERT_TRUE(fine);
    EXPECT_FALSE(check_document_fields(fine.value(), schema));
}

// ---------------------------------------------------------------------------------------------
// REST query strings

RestQuery rest(const QueryPairs& pairs, bool shape = false) {
    auto r = parse_rest_query(pairs, shape);
    EXPECT_TRUE(r) << r.error().message;
    return r ? r.value() : RestQuery{};
}

TEST(RestQuery, ReadsOpsAndPlainValues) {
    RestQuery q = rest({{"year", "2024"},
                        {"year", "gt.2000"},
                        {"t", "not.lt.5"},
                        {"t", "a.b"},
                        {"t", "not.sure"},
                        {"t", "eq.in.stock"},
                        {"t", "in.(a,\"b,c\",\"(d)\",\"e\\\"f\",)"},
                        {"t", "is.null"},
                        {"t", "not.is.null"},
                        {"tags", "has.x"},
                        {"t", "not.in.()"},
                        {"t", ""}});
    ASSERT_EQ(q.conditions.size(), 12u);
    auto is = [&](size_t i, FilterOp op, bool negate, std::vector<std::string> values) {
        const Condition& c = q.conditions[i];
        EXPECT_EQ(c.op, op) << i;
        EXPECT_EQ(c.negate, negate) << i;
        EXPECT_EQ(c.values, values) << i;
    };
    is(0, FilterOp::eq, false, {"2024"});
    is(1, FilterOp::gt, false, {"2000"});
    is(2, FilterOp::lt, true, {"5"});
    is(3, FilterOp::eq, false, {"a.b"});
    is(4, FilterOp::eq, false, {"not.sure"});
    is(5, FilterOp::eq, false, {"in.stock"});
    is(6, FilterOp::in, false, {"a", "b,c", "(d)", "e\"f", ""});
    is(7, FilterOp::is_null, false, {});
    is(8, FilterOp::is_null, true, {});
    is(9, FilterOp::has, false, {"x"});
    is(10, FilterOp::in, true, {});
    is(11, FilterOp::eq, false, {""});
    EXPECT_EQ(q.limit, rest_limit_default);
    EXPECT_FALSE(q.count);
}

TEST(RestQuery, ReservedKeys) {
    RestQuery q = rest(
        {{"select", "a,_id,b"}, {"order", "a.desc,b,c.asc"}, {"limit", "0"}, {"offset", "20"}});
    EXPECT_EQ(q.select, (std::vector<std::string>{"a", "_id", "b"}));
    ASSERT_EQ(q.order.size(), 3u);
    EXPECT_TRUE(q.order[0].desc);
    EXPECT_FALSE(q.order[1].desc);
    EXPECT_EQ(q.order[2].field, "c");
    EXPECT_EQ(q.limit, 0u);
    EXPECT_EQ(q.offset, 20u);
    EXPECT_EQ(rest({{"limit", "10000"}}).limit, 10000u);
    RestQuery count = rest({{"count", ""}, {"a", "1"}});
    EXPECT_TRUE(count.count);
    EXPECT_FALSE(count.limit);

    RestQuery shape =
        rest({{"a", "1"}, {"since", "12"}, {"history", "00ff"}, {"select", "a"}}, true);
    EXPECT_EQ(shape.conditions.size(), 1u);
    EXPECT_FALSE(shape.limit);
}

TEST(RestQuery, Refusals) {
    const std::vector<QueryPairs> bad = {
        {{"limit", "10001"}},
        {{"limit", "-1"}},
        {{"limit", "ten"}},
        {{"limit", "1"}, {"limit", "2"}},
        {{"offset", "x"}},
        {{"count", ""}, {"limit", "5"}},
        {{"count", "yes"}},
        {{"count", ""}, {"order", "a"}},
        {{"select", "a,,b"}},
        {{"select", ""}},
        {{"select", "a"}, {"select", "b"}},
        {{"select", "a,a"}},
        {{"order", "a.up"}},
        {{"order", ".desc"}},
        {{"t", "is.nope"}},
        {{"t", "not.is.true"}},
        {{"t", "in.x"}},
        {{"t", "in.(a"}},
        {{"t", "in.(\"a)"}},
        {{"t", "in.(\"a\"b)"}},
        {{"t", "in.(a(b)"}},
        {{"t\xff", "1"}},
        {{"t", "\xc3"}},
    };
    for (const QueryPairs& q : bad) {
        auto r = parse_rest_query(q, false);
        ASSERT_FALSE(r) << q[0].first << "=" << q[0].second;
        EXPECT_EQ(r.error().status, 400);
    }
    for (const char* key : {"order", "limit", "offset", "count"}) {
        auto r = parse_rest_query({{key, "1"}}, true);
        ASSERT_FALSE(r) << key;
        EXPECT_EQ(r.error().status, 400);
    }
}

// ---------------------------------------------------------------------------------------------
// Statements, run against a tenant

class RestRun : public ::testing::Test {
  protected:
    void SetUp() override {
        engine::OpenOptions o = env_.options(engine::SyncPolicy::at_close());
        o.hook = &indexes_;
        auto created = engine::Database::create("/t.fenec", o);
        ASSERT_TRUE(created.is_ok()) << created.status().to_string();
        db_ = std::move(*created);
        run_text(
            "create collection b (title text, year int @sorted, price float, ok bool, "
            "at timestamp, tags [text], blob bytes, meta json, v vector<2>, `order` text, "
            "stamps [timestamp])");
        run_text(R"q(insert b [
            {_id: 1, title: "a", year: 2024, price: 9.5, ok: true, at: "2024-03-01",
             tags: ["x", "y"], blob: x'00ff', meta: 5, v: [1, 0], `order`: "z",
             stamps: ["2020-01-01"]},
            {_id: 2, title: "b,c", year: 1999, price: 10, ok: false, at: "2023-12-31T23:59:59Z",
             tags: ["y"], meta: "five", v: [0, 1]},
            {_id: 3, year: 2024, price: 1.25, tags: [], meta: {k: 1}},
            {_id: 4, title: "x' or 1=1 --", year: 2010, ok: true, at: 0},
            {_id: 5, title: "(d)", meta: 5.5}
        ])q");
    }

    std::string run_text(const std::string& text, std::span<const Value> params = {}) {
        auto parsed = ql::parse(text);
        EXPECT_TRUE(parsed) << text << ": " << parsed.error().to_string();
        if (!parsed) return "";
        ql::Executor ex(*db_, indexes_);
        auto answer = ex.run(parsed.value(), params);
        EXPECT_TRUE(answer) << text << ": " << answer.error().to_string();
        return answer ? ql::to_json(answer.value()) : "";
    }

    const engine::Schema& schema() {
        engine::ReadView view = db_->read();
        auto id = view.find("b");
        EXPECT_TRUE(id.is_ok());
        schema_ = *view.schema(*id);
        return schema_;
    }

    BodyResult<RestStatement> build(const QueryPairs& pairs, bool shape = false) {
        auto q = parse_rest_query(pairs, shape);
        if (!q) return q.take_error();
        return build_statement(q.value(), "b", schema());
    }

    // The answer of the statement the filter builds, or "error N".
    std::string answer(const QueryPairs& pairs) {
        auto st = build(pairs);
        if (!st) return "error " + std::to_string(st.error().status);
        auto parsed = ql::parse(st->text);
        EXPECT_TRUE(parsed) << st->text << ": " << parsed.error().to_string();
        if (!parsed) return "unparsed";
        ql::Executor ex(*db_, indexes_);
        auto a = ex.run(parsed.value(), st->params);
        if (!a) return "run error " + a.error().to_string();
        return ql::to_json(a.value());
    }

    // The ids the filter answers, as "1,3".
    std::string ids(const QueryPairs& pairs) {
        QueryPairs with = pairs;
        with.emplace_back("select", "_id");
        const std::string json = answer(with);
        if (json.rfind("{\"rows\":", 0) != 0) return json;
        std::string out;
        size_t at = 0;
        while ((at = json.find("\"_id\":", at)) != std::string::npos) {
            at += 6;
            const size_t end = json.find_first_of(",}", at);
            out += (out.empty() ? "" : ",") + json.substr(at, end - at);
        }
        return out;
    }

    test::EngineEnv env_;
    index::IndexSet indexes_;
    std::unique_ptr<engine::Database> db_;
    engine::Schema schema_;
};

TEST_F(RestRun, FiltersAnswerTheirRows) {
    EXPECT_EQ(ids({}), "1,2,3,4,5");
    EXPECT_EQ(ids({{"year", "2024"}}), "1,3");
    EXPECT_EQ(ids({{"year", "eq.2024"}}), "1,3");
    EXPECT_EQ(ids({{"year", "ne.2024"}}), "2,4,5");  // nulls are values: 5 is kept
    EXPECT_EQ(ids({{"year", "gt.1999"}, {"year", "lt.2024"}}), "4");
    EXPECT_EQ(ids({{"year", "ge.2010"}}), "1,3,4");
    EXPECT_EQ(ids({{"year", "not.ge.2010"}}), "2,5");
    EXPECT_EQ(ids({{"price", "le.9.5"}}), "1,3");
    EXPECT_EQ(ids({{"price", "10"}}), "2");  // an int read as the float field's 10.0
    EXPECT_EQ(ids({{"ok", "true"}}), "1,4");
    EXPECT_EQ(ids({{"ok", "false"}}), "2");
    EXPECT_EQ(ids({{"at", "ge.2024-01-01"}}), "1");
    EXPECT_EQ(ids({{"at", "lt.1704067199000"}}), "4");  // epoch ms: before 2023-12-31T23:59:59
    EXPECT_EQ(ids({{"at", "2023-12-31T23:59:59Z"}}), "2");
    EXPECT_EQ(ids({{"at", "eq.0"}}), "4");
    EXPECT_EQ(ids({{"tags", "has.y"}}), "1,2");
    EXPECT_EQ(ids({{"tags", "not.has.y"}}), "3,4,5");
    EXPECT_EQ(ids({{"tags", "is.null"}}), "4,5");
    EXPECT_EQ(ids({{"stamps", "has.2020-01-01T00:00:00Z"}}), "1");
    EXPECT_EQ(ids({{"title", "in.(a,\"b,c\",\"(d)\")"}}), "1,2,5");
    EXPECT_EQ(ids({{"title", "not.in.(a,\"b,c\")"}}), "3,4,5");
    EXPECT_EQ(ids({{"title", "in.()"}}), "");
    EXPECT_EQ(ids({{"title", "is.null"}}), "3");
    EXPECT_EQ(ids({{"title", "not.is.null"}}), "1,2,4,5");
    EXPECT_EQ(ids({{"title", "not.eq.a"}}), "2,3,4,5");
    EXPECT_EQ(ids({{"title", "x' or 1=1 --"}}), "4");  // a value is never statement text
    EXPECT_EQ(ids({{"title", "\" or true or \""}}), "");
    EXPECT_EQ(ids({{"_id", "in.(1,3,9)"}}), "1,3");
    EXPECT_EQ(ids({{"_id", "gt.3"}}), "4,5");
    EXPECT_EQ(ids({{"blob", "AP8="}}), "1");
    EXPECT_EQ(ids({{"meta", "5"}}), "1");
    EXPECT_EQ(ids({{"meta", "ge.5"}}), "1,5");
    EXPECT_EQ(ids({{"meta", "five"}}), "2");
    // A reserved key wins over a field of its name: `order=z` orders by an unknown field.
    EXPECT_EQ(ids({{"order", "z"}}), "error 404");
    EXPECT_EQ(ids({{"year", "2024"}, {"price", "gt.5"}}), "1");  // AND-ed
}

TEST_F(RestRun, WindowSelectAndCount) {
    EXPECT_EQ(ids({{"order", "year.desc,_id.desc"}}), "3,1,4,2,5");
    EXPECT_EQ(ids({{"order", "year"}, {"limit", "2"}}), "5,2");
    EXPECT_EQ(ids({{"order", "year"}, {"limit", "2"}, {"offset", "3"}}), "1,3");
    EXPECT_EQ(ids({{"limit", "0"}}), "");
    EXPECT_EQ(answer({{"select", "title,_id"}, {"_id", "1"}}),
              R"({"rows":[{"_id":1,"title":"a"}]})");
    EXPECT_EQ(answer({{"select", "order,year"}, {"_id", "1"}}),
              R"({"rows":[{"_id":1,"order":"z","year":2024}]})");
    EXPECT_EQ(answer({{"count", ""}, {"year", "2024"}}), R"q({"rows":[{"count(*)":2}]})q");
    EXPECT_EQ(answer({{"count", "true"}}), R"q({"rows":[{"count(*)":5}]})q");

    // The default page is 100 rows.
    std::string docs;
    for (int i = 0; i < 150; ++i) docs += std::string(i ? "," : "") + "{year: 3000}";
    run_text("insert b [" + docs + "]");
    const std::string page = ids({{"year", "3000"}});
    EXPECT_EQ(std::count(page.begin(), page.end(), ',') + 1, 100);
}

TEST_F(RestRun, ValuesGoAsParametersOfTheFieldsType) {
    auto st = build({{"title", "x' or 1=1 --"}, {"year", "in.(1,2)"}, {"at", "0"}, {"limit", "5"}});
    ASSERT_TRUE(st) << st.error().message;
    EXPECT_EQ(st->text, "get `b` where `title` = $1 and `year` in $2 and `at` = $3 limit $4");
    ASSERT_EQ(st->params.size(), 4u);
    EXPECT_EQ(st->params[0], Value("x' or 1=1 --"));
    EXPECT_EQ(st->params[1], Value(engine::List{{Value(int64_t{1}), Value(int64_t{2})}}));
    EXPECT_EQ(st->params[2], Value(engine::Timestamp{0}));
    EXPECT_EQ(st->params[3], Value(int64_t{5}));
}

TEST_F(RestRun, Refusals) {
    auto status = [&](const QueryPairs& pairs) {
        auto st = build(pairs);
        return st ? 0 : st.error().status;
    };
    EXPECT_EQ(status({{"nope", "1"}}), 404);
    EXPECT_EQ(status({{"select", "title,nope"}}), 404);
    EXPECT_EQ(status({{"order", "nope.desc"}}), 404);
    EXPECT_EQ(status({{"meta.k", "1"}}), 404);
    EXPECT_EQ(status({{"_score", "1"}}), 404);
    EXPECT_EQ(status({{"v", "is.null"}}), 400);
    EXPECT_EQ(status({{"order", "v"}}), 400);
    EXPECT_EQ(status({{"year", "abc"}}), 400);
    EXPECT_EQ(status({{"year", "1.5"}}), 400);
    EXPECT_EQ(status({{"year", "99999999999999999999"}}), 400);
    EXPECT_EQ(status({{"price", "nan"}}), 400);
    EXPECT_EQ(status({{"price", "inf"}}), 400);
    EXPECT_EQ(status({{"ok", "yes"}}), 400);
    EXPECT_EQ(status({{"at", "2024-02-30"}}), 400);
    EXPECT_EQ(status({{"at", "99999999999999999"}}), 400);  // past year 9999
    EXPECT_EQ(status({{"blob", "not base64!"}}), 400);
    EXPECT_EQ(status({{"tags", "x"}}), 400);
    EXPECT_EQ(status({{"tags", "in.(x)"}}), 400);
    EXPECT_EQ(status({{"year", "has.1"}}), 400);
    EXPECT_EQ(status({{"_id", "has.1"}}), 400);
    EXPECT_EQ(status({{"_id", "x"}}), 400);
    EXPECT_EQ(status({{"year", "in.(1,x)"}}), 400);

    auto q = parse_rest_query({}, false);
    ASSERT_TRUE(q);
    EXPECT_EQ(build_statement(q.value(), "_consumers", schema()).error().status, 404);
    EXPECT_EQ(build_statement(q.value(), "b c", schema()).error().status, 404);
}

// What the reader lets through at the depth bound, the executor takes: a document whose json
// field reaches level 64, and a parameter as deep; one level more the reader refuses, 413.
TEST_F(RestRun, DepthBoundAgreesWithTheExecutor) {
    auto doc = parse_document_body("[{\"_id\": 9, \"meta\":" + nested_lists(63) + "}]");
    ASSERT_TRUE(doc);
    std::vector<Value> params{doc.value()};
    EXPECT_EQ(run_text("insert b $1", params), R"({"affected":1,"ids":[9]})");
    auto body = parse_query_body(R"({"query":"get b where meta = $1","params":[)" +
                                 nested_lists(63) + "]}");
    ASSERT_TRUE(body);
    EXPECT_EQ(run_text(body->query, body->params).substr(0, 17), R"({"rows":[{"_id":9)");
}

// The shape's row test agrees with the executor's answer for the same filters, row for row.
TEST_F(RestRun, ShapeMatchesWhatTheStatementAnswers) {
    const std::vector<QueryPairs> shapes = {
        {},
        {{"year", "2024"}},
        {{"title", "not.in.(a,\"b,c\")"}, {"select", "title"}},
        {{"tags", "has.y"}, {"ok", "not.is.null"}},
        {{"at", "ge.2023-01-01"}},
        {{"meta", "5"}, {"since", "3"}},
        {{"year", "not.lt.2010"}, {"price", "ne.1.25"}},
    };
    for (const QueryPairs& pairs : shapes) {
        auto q = parse_rest_query(pairs, true);
        ASSERT_TRUE(q) << q.error().message;
        auto filter = ShapeFilter::compile(q.value(), "b", schema());
        ASSERT_TRUE(filter) << filter.error().message;
        std::string matched;
        engine::ReadView view = db_->read();
        auto coll = view.find("b");
        ASSERT_TRUE(coll.is_ok());
        view.scan(*coll, [&](engine::DocId id, engine::DocView doc) {
            if (filter->matches(id, doc)) {
                matched += (matched.empty() ? "" : ",") + std::to_string(id.v);
            }
            return true;
        });
        QueryPairs as_list;
        for (const auto& p : pairs) {
            if (p.first != "since" && p.first != "select") as_list.push_back(p);
        }
        EXPECT_EQ(matched, ids(as_list)) << (pairs.empty() ? "" : pairs[0].first);
    }
    auto q = parse_rest_query({{"order", "year"}}, true);
    EXPECT_FALSE(q);
    auto unknown = parse_rest_query({{"nope", "1"}}, true);
    ASSERT_TRUE(unknown);
    auto filter = ShapeFilter::compile(unknown.value(), "b", schema());
    ASSERT_FALSE(filter);
    EXPECT_EQ(filter.error().status, 404);
}

}  // namespace
}  // namespace fenec::node::json_body_test
