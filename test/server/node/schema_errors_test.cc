// test/server/node/schema_errors_test.cc: what a new user reads back from the node, against the
// real binary. `GET /t/<t>/` describes each field whole (index with its arguments, collation,
// nocase, and the FenecQL that creates it); a REST body's refusal points inside that body; a
// comparison with a constant its field cannot hold is refused as the write of it is; a REST
// filter's mistyped op is refused naming the op meant; `/batch` refuses a form's content type
// naming the types it takes.
#include <gtest/gtest.h>

#include "test/server/node/node_fixture.h"

namespace fenec::test::schema_errors_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

class SchemaErrors : public ::testing::Test {
  protected:
    void SetUp() override {
        node_ = std::make_unique<NodeProcess>(
            dir_.path(),
            std::vector<std::string>{"--token", D, "--admin-token", A, "--auth-delay", "0"});
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        client_ = std::make_unique<Client>(node_->port());
        ASSERT_TRUE(client_->ok());
        auto r = call(
            "PUT", "/_admin/tenants/acme",
            R"J({"schema":["create collection books (title text collate tr nocase @text(k1 = 1.2), year int @sorted, isbn text @unique, e vector<2> @hnsw(l2, m = 8), seen timestamp @ttl(30d), tags [text], meta json)"]})J",
            A);
        ASSERT_EQ(r.status, 201) << r.body;
    }

    Reply call(std::string_view method, std::string_view target, std::string_view body = {},
               const std::string& token = D,
               std::vector<std::pair<std::string, std::string>> more = {}) {
        std::vector<std::pair<std::string, std::string>> headers = bearer(token);
        headers.insert(headers.end(), more.begin(), more.end());
        auto r = client_->request(method, target, body, headers);
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    Reply query(const std::string& q) {
        return call("POST", "/t/acme/query", "{\"query\":\"" + q + "\"}");
    }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

// Issue 21 item 3: `year int @sorted` showed as `year int`.
TEST_F(SchemaErrors, TenantRootDescribesEachFieldWhole) {
    auto r = call("GET", "/t/acme/");
    ASSERT_EQ(r.status, 200) << r.body;
    // clang-format off
    const std::string fields =
        R"J("fields":[)J"
        R"J({"name":"title","type":"text","collate":"tr","nocase":true,"index":"@text(k1 = 1.2, b = 0.4)","definition":"title text collate tr nocase @text(k1 = 1.2, b = 0.4)"},)J"
        R"J({"name":"year","type":"int","index":"@sorted","definition":"year int @sorted"},)J"
        R"J({"name":"isbn","type":"text","index":"@unique","definition":"isbn text @unique"},)J"
        R"J({"name":"e","type":"vector<2>","index":"@hnsw(l2, m = 8, ef_construction = 200, ef_search = 100)","definition":"e vector<2> @hnsw(l2, m = 8, ef_construction = 200, ef_search = 100)"},)J"
        R"J({"name":"seen","type":"timestamp","index":"@ttl(30d)","definition":"seen timestamp @ttl(30d)"},)J"
        R"J({"name":"tags","type":"[text]","definition":"tags [text]"},)J"
        R"J({"name":"meta","type":"json","definition":"meta json"}]})J";
    // clang-format on
    EXPECT_NE(r.body.find(R"J({"name":"books",)J" + fields), std::string::npos) << r.body;

    // An index added later, and a field added with its options, are described as they now are.
    ASSERT_EQ(query("alter collection books drop index year").status, 200);
    ASSERT_EQ(query("alter collection books add field name text collate und @hash").status, 200);
    r = call("GET", "/t/acme/");
    EXPECT_NE(r.body.find(R"J({"name":"year","type":"int","definition":"year int"})J"),
              std::string::npos)
        << r.body;
    EXPECT_NE(r.body.find(R"J({"name":"name","type":"text","collate":"und","index":"@hash","definition":"name text collate und @hash"})J"),
              std::string::npos)
        << r.body;
}

// Issue 21 item 4a: a REST body's type error named position 13 of the statement the node wrote,
// past the end of an 11-byte body. It now names where the value starts in the body.
TEST_F(SchemaErrors, RestBodyRefusalPointsInsideTheBody) {
    const std::string one = R"({"year":""})";
    auto r = call("POST", "/t/acme/c/books", one);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("\"position\":8}"), std::string::npos) << r.body;
    EXPECT_EQ(one.substr(8), R"("")"
                             "}");

    // The second document of an array, after a multi-byte character (positions count code
    // points, as a statement's do).
    const std::string many = R"([{"title":"çay","year":1},{"title":"b","year":"x"}])";
    r = call("POST", "/t/acme/c/books", many);
    EXPECT_EQ(r.status, 400) << r.body;
    const size_t at_bytes = many.find(R"("x")");
    EXPECT_NE(r.body.find("\"position\":" + std::to_string(at_bytes - 1) + "}"), std::string::npos)
        << r.body;  // `ç` is two bytes, one code point

    // PUT and PATCH point at the member too.
    const std::string put = R"({"title":"a","isbn":7})";
    r = call("PUT", "/t/acme/c/books/5", put);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("\"position\":" + std::to_string(put.find("7")) + "}"), std::string::npos)
        << r.body;
    ASSERT_EQ(call("PUT", "/t/acme/c/books/5", R"({"title":"a"})").status, 201);
    const std::string patch = R"({"title":"b", "tags":"x"})";
    r = call("PATCH", "/t/acme/c/books/5", patch);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("\"position\":" + std::to_string(patch.find("\"x\"")) + "}"),
              std::string::npos)
        << r.body;
}

// Issue 21 item 4b: `where year > "abc"` answered 200 with no rows where the insert of "abc" is a
// 400. One rule now: a constant compared with a field is read as a write to it reads it.
TEST_F(SchemaErrors, ComparisonRefusesWhatTheWriteRefuses) {
    auto insert = query("insert books {year: \\\"abc\\\"}");
    auto where = query("get books where year > \\\"abc\\\"");
    EXPECT_EQ(insert.status, 400) << insert.body;
    EXPECT_EQ(where.status, 400) << where.body;
    EXPECT_NE(where.body.find("`year` expects int, found text"), std::string::npos) << where.body;
    EXPECT_NE(where.body.find("\"position\":23"), std::string::npos) << where.body;
    // What the write takes, the comparison takes: a number for an int, ISO text for a timestamp.
    EXPECT_EQ(query("get books where year > 2020.5").status, 200);
    EXPECT_EQ(query("get books where seen < \\\"2026-01-01\\\"").status, 200);
    EXPECT_EQ(query("get books where tags has 3").status, 400);
    EXPECT_EQ(query("get books where isbn in [\\\"a\\\", 3]").status, 400);
    EXPECT_EQ(query("get books where meta = 3").status, 200);  // json holds every kind
    EXPECT_EQ(query("get books where year = null").status, 200);
}

// Issue 21 item 4c: `?year=gte.2021` read as `eq` of the text "gte.2021".
TEST_F(SchemaErrors, NearMissFilterOpsHintAtTheOpMeant) {
    const std::pair<const char*, const char*> cases[] = {
        {"/t/acme/c/books?year=gte.2021", "`ge.2021`"},
        {"/t/acme/c/books?year=lte.2021", "`le.2021`"},
        {"/t/acme/c/books?title=neq.a", "`ne.a`"},
        {"/t/acme/c/books?year=not.gte.5", "`not.ge.5`"},
        {"/t/acme/c/books?year=nin.(1,2)", "`not.in.(1,2)`"},
    };
    for (const auto& [target, hint] : cases) {
        auto r = call("GET", target);
        EXPECT_EQ(r.status, 400) << target << ": " << r.body;
        EXPECT_NE(r.body.find(hint), std::string::npos) << target << ": " << r.body;
    }
    EXPECT_EQ(call("GET", "/t/acme/c/books?year=ge.2021").status, 200);
    EXPECT_EQ(call("GET", "/t/acme/c/books?title=eq.gte.a").status, 200);  // the text as written
    EXPECT_EQ(call("GET", "/t/acme/c/books?title=a.b").status, 200);       // no op: `eq`
}

// PostgREST's ops with none here (`like`, `ilike`, text search, ranges) are refused naming
// FenecQL, not compared as text: `?title=like.Du*` answered 200 `[]`, which says nothing.
TEST_F(SchemaErrors, PatternAndTextSearchOpsAreRefusedNotComparedAsText) {
    for (const char* target :
         {"/t/acme/c/books?title=like.Du*", "/t/acme/c/books?title=ilike.du*",
          "/t/acme/c/books?title=not.like.x", "/t/acme/c/books?title=fts.dune"}) {
        auto r = call("GET", target);
        EXPECT_EQ(r.status, 400) << target << ": " << r.body;
        EXPECT_NE(r.body.find("is not an op: a REST filter has no patterns or text search"),
                  std::string::npos)
            << target << ": " << r.body;
    }
    EXPECT_EQ(call("GET", "/t/acme/c/books?title=eq.like.x").status, 200);  // the text as written
    // Text whose first word is another of PostgREST's short ops, or one of these in capitals,
    // stays `eq` (§5.3): `cs.AI`, `Sr. Engineer`, `Like.com`.
    for (const char* target :
         {"/t/acme/c/books?title=cs.AI", "/t/acme/c/books?title=Sr.%20Engineer",
          "/t/acme/c/books?title=Like.com", "/t/acme/c/books?title=match.com"}) {
        EXPECT_EQ(call("GET", target).status, 200) << target;
    }
}

// Issue 21 item 4e: `curl --data-binary @b.ndjson` sends a form's content type.
TEST_F(SchemaErrors, BatchRefusesAFormTypeNamingTheTypesItTakes) {
    const std::string body = "{\"query\":\"get books\"}\n{\"query\":\"get books\"}\n";
    auto r = call("POST", "/t/acme/batch", body, D,
                  {{"Content-Type", "application/x-www-form-urlencoded"}});
    EXPECT_EQ(r.status, 415) << r.body;
    EXPECT_NE(r.body.find("`application/x-ndjson`"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("`application/json`"), std::string::npos) << r.body;
    r = call("POST", "/t/acme/batch", body, D, {{"Content-Type", "application/x-ndjson"}});
    EXPECT_EQ(r.status, 200) << r.body;
    r = call("POST", "/t/acme/query", R"({"query":"get books"})", D,
             {{"Content-Type", "text/plain"}});
    EXPECT_EQ(r.status, 415) << r.body;
    EXPECT_NE(r.body.find("send `application/json`"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace fenec::test::schema_errors_test
