// test/server/node/read_by_id_test.cc: GET /t/<t>/c/<c>/<id> (node-http.md §5.3), read without
// FenecQL (Executor::read_by_id), against the real binary: it answers the row as `get <c> where
// _id = $1` does, follows schema changes at once, and refuses as before (404 naming the
// collection or the id, Fenec-Seq and Fenec-History on a 200).
#include <gtest/gtest.h>

#include "test/server/node/node_fixture.h"

namespace fenec::test::read_by_id_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

class ReadById : public ::testing::Test {
  protected:
    void SetUp() override {
        node_ = std::make_unique<NodeProcess>(
            dir_.path(),
            std::vector<std::string>{"--token", D, "--admin-token", A, "--auth-delay", "0"});
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        client_ = std::make_unique<Client>(node_->port());
        ASSERT_TRUE(client_->ok());
        auto r = call("PUT", "/_admin/tenants/acme",
                      R"J({"schema":["create collection n (a int, b text)"]})J", A);
        ASSERT_EQ(r.status, 201) << r.body;
    }
    Reply call(std::string_view method, std::string_view target, std::string_view body = {},
               const std::string& token = D) {
        auto r = client_->request(method, target, body, bearer(token));
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    Reply query(const std::string& q) {
        return call("POST", "/t/acme/query", R"({"query":")" + q + R"("})");
    }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

TEST_F(ReadById, AnswersTheRowAndFollowsTheSchema) {
    ASSERT_EQ(query(R"(put n {_id: 5, a: 1, b: \"x\"})").status, 200);
    Reply r = call("GET", "/t/acme/c/n/5");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, R"({"_id":5,"a":1,"b":"x"})");
    Reply q = query("get n where _id = 5");
    EXPECT_EQ(q.body, R"({"rows":[)" + r.body + "]}");
    EXPECT_EQ(r.header("Fenec-Seq"), q.header("Fenec-Seq"));
    EXPECT_TRUE(r.header("Fenec-History"));

    ASSERT_EQ(query("alter collection n add field c int").status, 200);
    EXPECT_EQ(call("GET", "/t/acme/c/n/5").body, R"({"_id":5,"a":1,"b":"x","c":null})");
    ASSERT_EQ(query("alter collection n drop field a").status, 200);
    EXPECT_EQ(call("GET", "/t/acme/c/n/5").body, R"({"_id":5,"b":"x","c":null})");
    ASSERT_EQ(query("drop collection n").status, 200);
    r = call("GET", "/t/acme/c/n/5");
    EXPECT_EQ(r.status, 404);
    EXPECT_NE(r.body.find("no collection `n`"), std::string::npos) << r.body;
}

TEST_F(ReadById, Refusals) {
    Reply r = call("GET", "/t/acme/c/n/7");
    EXPECT_EQ(r.status, 404);
    EXPECT_NE(r.body.find("`n` holds no _id 7"), std::string::npos) << r.body;
    r = call("GET", "/t/acme/c/nope/7");
    EXPECT_EQ(r.status, 404);
    EXPECT_NE(r.body.find("nope"), std::string::npos) << r.body;
    EXPECT_EQ(call("GET", "/t/acme/c/_idempotency/1").status, 404);
    EXPECT_EQ(call("GET", "/t/acme/c/n/18446744073709551615").status, 400);  // not an id
    EXPECT_EQ(call("GET", "/t/acme/c/n/0").status, 400);
}

}  // namespace
}  // namespace fenec::test::read_by_id_test
