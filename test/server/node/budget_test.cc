// test/server/node/budget_test.cc: proves the statement budget against the real binary
// (issue 17; ql/budget.h, --statement-rows, --statement-ms): a read that visits more rows than
// the budget is 400 naming the budget and its flag, even when it returns none; a write that
// passes it lands nothing; a read that runs past the time budget is 503 with Retry-After; each
// is counted in fenec_statements_over_budget_total; and a large `in` list answers exactly.
#include <gtest/gtest.h>

#include <string>

#include "test/server/node/node_fixture.h"

namespace fenec::test::budget_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

class Budget : public ::testing::Test {
  protected:
    void start(std::vector<std::string> more) {
        std::vector<std::string> flags = {"--token", D, "--admin-token", A, "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        node_ = std::make_unique<NodeProcess>(dir_.path(), flags);
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        client_ = std::make_unique<Client>(node_->port());
        ASSERT_TRUE(client_->ok());
    }
    Reply call(std::string_view method, std::string_view target, std::string_view body,
               const std::string& token) {
        auto r = client_->request(method, target, body, bearer(token));
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    Reply query(const std::string& q, const std::string& params = "[]") {
        return call("POST", "/t/acme/query", "{\"query\":\"" + q + "\",\"params\":" + params + "}",
                    D);
    }
    // Tenant acme with `r` (n int, k int @hash) of `rows` rows: n = i, k = 0.
    void make_rows(int rows) {
        auto c = call("PUT", "/_admin/tenants/acme",
                      R"J({"schema":["create collection r (n int, k int @hash)"]})J", A);
        ASSERT_EQ(c.status, 201) << c.body;
        std::string docs = "[[";
        for (int i = 0; i < rows; ++i)
            docs += (i ? ",{\"n\":" : "{\"n\":") + std::to_string(i) + ",\"k\":0}";
        docs += "]]";
        auto p = query("insert r $1", docs);
        ASSERT_EQ(p.status, 200) << p.body.substr(0, 200);
    }
    uint64_t over_budget(std::string_view budget) {
        auto m = call("GET", "/_metrics", {}, A);
        const std::string key =
            "fenec_statements_over_budget_total{budget=\"" + std::string(budget) + "\"} ";
        const size_t at = m.body.find(key);
        return at == std::string::npos ? 0 : std::stoull(m.body.substr(at + key.size()));
    }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

TEST_F(Budget, RowsBudgetIs400NamingIt) {
    start({"--statement-rows", "1000"});
    make_rows(2000);
    // Keeps no row, visits all 2 000.
    auto r = query("get r where n < 0");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("\"budget\":\"rows\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("--statement-rows (1000)"), std::string::npos) << r.body;
    auto count = query("get r select count(*)");
    EXPECT_EQ(count.status, 400) << count.body;
    EXPECT_EQ(over_budget("rows"), 2u);
    // Within the budget: an index narrows the read to one row.
    auto one = query("get r select n where _id = 7");
    EXPECT_EQ(one.status, 200) << one.body;
    EXPECT_NE(one.body.find("\"n\":6"), std::string::npos) << one.body;
}

TEST_F(Budget, WriteThatPassesTheBudgetLandsNothing) {
    start({"--statement-rows", "1000"});
    make_rows(2000);
    auto before = query("get r select n where _id = 1");
    ASSERT_EQ(before.status, 200);
    const std::string seq = before.header("Fenec-Seq").value_or("");
    // The scan passes the budget after it matched (and would have changed) 1 000 rows.
    auto w = query("set r {n: -1} where n >= 0");
    EXPECT_EQ(w.status, 400) << w.body;
    EXPECT_NE(w.body.find("\"budget\":\"rows\""), std::string::npos) << w.body;
    auto after = query("get r select n where _id = 1");
    ASSERT_EQ(after.status, 200);
    EXPECT_EQ(after.header("Fenec-Seq").value_or("?"), seq);
    EXPECT_NE(after.body.find("\"n\":0"), std::string::npos) << after.body;
}

TEST_F(Budget, TimeBudgetIs503) {
    start({"--statement-ms", "50"});
    make_rows(2000);
    // Every row looks up all 2 000 rows sharing its k: 4 000 000 visits, under the row budget.
    auto r = query("get r select _id lookup r as same on k = k where n < 0 limit 1");
    EXPECT_EQ(r.status, 503) << r.body.substr(0, 200);
    EXPECT_NE(r.body.find("\"budget\":\"time\""), std::string::npos) << r.body.substr(0, 200);
    EXPECT_EQ(r.header("Retry-After").value_or(""), "1");
    EXPECT_EQ(over_budget("time"), 1u);
}

TEST_F(Budget, LargeInListAnswersExactly) {
    start({});
    make_rows(2000);
    // 100 000 items, every third of 0..299 999: the rows whose n is a multiple of 3.
    std::string items = "[[";
    for (int i = 0; i < 100'000; ++i) items += (i ? "," : "") + std::to_string(i * 3);
    items += "]]";
    auto r = query("get r select count(*) where n in $1", items);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"count(*)\":667"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace fenec::test::budget_test
