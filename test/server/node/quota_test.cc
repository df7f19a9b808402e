// test/server/node/quota_test.cc: per-tenant quotas over HTTP against the real binary
// (node-http.md §7, §8.5; §14 cases 58-62): rows and bytes refused at landing with 507, the rates
// with 429 and the seconds of debt left, streams and requests counted by the node, a refusal
// naming the quota and never an amount, a delete or drop never refused, the quota kept in
// `<t>.quota` across a restart, usage read by the admin token only, PUT's validation.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test/server/node/node_fixture.h"

namespace fenec::test::quota_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

class Quotas : public ::testing::Test {
protected:
    void SetUp() override { start(); }

    void start() {
        node_.reset();
        node_ = std::make_unique<NodeProcess>(
            dir_.path(), std::vector<std::string>{"--token", D, "--admin-token", A, "--auth-delay", "0"});
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        client_ = std::make_unique<Client>(node_->port());
        ASSERT_TRUE(client_->ok());
    }

    // acme with `notes` holding three rows (the §14 fixture) and an empty `jobs` queue.
    void make_acme() {
        auto r = send(A, "PUT", "/_admin/tenants/acme",
                      R"J({"schema":["create collection notes (title text, year int @sorted)",)J"
                      R"J("create collection jobs (payload text, run_at timestamp @sorted, owner text)"]})J");
        ASSERT_EQ(r.status, 201) << r.body;
        for (auto [t, y] : {std::pair{"a", 2020}, {"b", 2022}, {"c", 2024}}) {
            auto p = query("put notes {title: $1, year: $2}",
                           "[\"" + std::string(t) + "\"," + std::to_string(y) + "]");
            ASSERT_EQ(p.status, 200) << p.body;
        }
    }

    Reply send(const std::string& token, std::string_view method, std::string_view target,
               std::string_view body = {}, std::vector<std::pair<std::string, std::string>> more = {}) {
        auto headers = bearer(token);
        headers.insert(headers.end(), more.begin(), more.end());
        auto r = client_->request(method, target, body, headers);
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    Reply query(const std::string& q, const std::string& params = "[]") {
        return send(D, "POST", "/t/acme/query", "{\"query\":\"" + q + "\",\"params\":" + params + "}");
    }
    Reply put_quota(std::string_view body) { return send(A, "PUT", "/_admin/tenants/acme/quota", body); }
    Reply get_quota() { return send(A, "GET", "/_admin/tenants/acme/quota"); }

    // The value of "<name>": in the usage object of a GET …/quota answer.
    static std::string usage_of(const std::string& body, const std::string& name) {
        const size_t u = body.find("\"usage\":");
        if (u == std::string::npos) return "";
        const size_t at = body.find("\"" + name + "\":", u);
        if (at == std::string::npos) return "";
        const size_t from = at + name.size() + 3;
        return body.substr(from, body.find_first_of(",}", from) - from);
    }

    std::string file(const std::string& name) const { return dir_.path() + "/" + name; }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

bool holds_digit(const std::string& s) { return s.find_first_of("0123456789") != std::string::npos; }

// §14 case 58, and a delete never refused for rows (engine.md §9).
TEST_F(Quotas, RowsQuotaRefusesThePutPastItNamingNoAmountAndADeleteLands) {
    make_acme();
    auto set = put_quota(R"({"rows":4})");
    ASSERT_EQ(set.status, 200) << set.body;
    EXPECT_EQ(set.body, R"({"tenant":"acme","quota":{"rows":4}})");
    EXPECT_EQ(query("put notes {title: $1}", "[\"d\"]").status, 200);
    auto past = query("put notes {title: $1}", "[\"e\"]");
    EXPECT_EQ(past.status, 507);
    EXPECT_EQ(past.body, R"({"error":"tenant `acme` is at its rows quota","quota":"rows"})");
    EXPECT_FALSE(holds_digit(past.body)) << past.body;
    // The same refusal through REST, and through a batch (which adds where it stopped).
    auto rest = send(D, "POST", "/t/acme/c/notes", R"({"title":"f"})");
    EXPECT_EQ(rest.status, 507);
    EXPECT_EQ(rest.body, R"({"error":"tenant `acme` is at its rows quota","quota":"rows"})");
    auto batch = send(D, "POST", "/t/acme/batch", R"({"query":"put notes {title: \"g\"}"})",
                      {{"Content-Type", "application/x-ndjson"}});
    EXPECT_EQ(batch.status, 507);
    EXPECT_NE(batch.body.find(R"("quota":"rows")"), std::string::npos) << batch.body;
    EXPECT_EQ(query("select count(*) from notes").body, R"J({"rows":[{"count(*)":4}]})J");
    auto del = query("del notes where title = $1", "[\"a\"]");
    EXPECT_EQ(del.status, 200) << del.body;
    EXPECT_EQ(query("put notes {title: $1}", "[\"h\"]").status, 200);  // room again
    auto metrics = send(A, "GET", "/_metrics");
    EXPECT_NE(metrics.body.find("fenec_quota_refusals_total{quota=\"rows\"} 3"), std::string::npos)
        << metrics.body.substr(0, 200);
}

// §14 case 59, and what takes away passes the bytes quota: a delete's tombstone, a drop.
TEST_F(Quotas, BytesQuotaRefusesALargerPutAndLeavesTheFileAsItWas) {
    make_acme();
    const uint64_t size = std::filesystem::file_size(file("acme.fenec"));
    ASSERT_EQ(put_quota("{\"bytes\":" + std::to_string(size + 64) + "}").status, 200);
    auto big = query("put notes {title: $1}", "[\"" + std::string(400, 'x') + "\"]");
    EXPECT_EQ(big.status, 507);
    EXPECT_EQ(big.body, R"({"error":"tenant `acme` is at its bytes quota","quota":"bytes"})");
    EXPECT_EQ(std::filesystem::file_size(file("acme.fenec")), size);
    // At the quota exactly: no put fits, a delete and a drop still land.
    ASSERT_EQ(put_quota("{\"bytes\":" + std::to_string(size) + "}").status, 200);
    EXPECT_EQ(query("put notes {title: $1}", "[\"y\"]").status, 507);
    EXPECT_EQ(query("del notes where year >= $1", "[2022]").status, 200);
    EXPECT_EQ(query("drop collection jobs").status, 200);
    EXPECT_GT(std::filesystem::file_size(file("acme.fenec")), size);
}

// §14 case 60: a 50-row put from a bucket of 10 leaves a debt of 40; the next row waits 4.1 s,
// answered as 5 whole seconds.
TEST_F(Quotas, RatePastASecondsWorthIsRefusedWithTheSecondsOfDebtLeft) {
    make_acme();
    ASSERT_EQ(put_quota(R"({"rows_per_s":10})").status, 200);
    std::string rows = "[[";
    for (int i = 0; i < 50; ++i) rows += std::string(i ? "," : "") + "{\"title\":\"r" + std::to_string(i) + "\"}";
    rows += "]]";
    auto fifty = query("put notes $1", rows);
    EXPECT_EQ(fifty.status, 200) << fifty.body;
    auto one = query("put notes {title: $1}", "[\"one\"]");
    EXPECT_EQ(one.status, 429);
    EXPECT_EQ(one.header("Retry-After"), "5");
    EXPECT_EQ(one.body,
              R"({"error":"tenant `acme` is at its rows_per_s quota","quota":"rows_per_s"})");
    auto usage = get_quota();
    ASSERT_EQ(usage.status, 200) << usage.body;
    EXPECT_EQ(usage_of(usage.body, "rows_per_s").substr(0, 3), "-39") << usage.body;  // -40, refilling
    EXPECT_EQ(usage_of(usage.body, "bytes_per_s"), "null");
    // Reads are not writes: they run while the bucket is in debt.
    EXPECT_EQ(query("select count(*) from notes").status, 200);
}

// §14 case 61, and the admin query is not charged to the tenant's quotas (§8.4).
TEST_F(Quotas, RequestsQuotaCountsAHeldClaimAndNotTheAdminQuery) {
    make_acme();
    ASSERT_EQ(put_quota(R"({"requests":1})").status, 200);
    int held_status = 0;
    std::thread held([&] {
        Client c(node_->port());
        auto h = bearer(D);
        h.emplace_back("Fenec-Wait", "1500");
        auto r = c.request("POST", "/t/acme/query",
                           R"({"query":"set jobs {owner: \"w\", run_at: now() + 30000} where run_at <= now() order run_at limit 1 returning *"})",
                           h);
        held_status = r ? r->status : 0;
    });
    // Held: admitted, counted in flight, parked on the tenant.
    EXPECT_TRUE(wait_until([&] { return usage_of(get_quota().body, "requests") == "1"; }));
    auto other = query("select count(*) from notes");
    EXPECT_EQ(other.status, 429);
    EXPECT_EQ(other.body,
              R"({"error":"tenant `acme` is at its requests quota","quota":"requests"})");
    EXPECT_EQ(other.header("Retry-After"), "1");
    // A point read, which the loop answers for a tenant without this quota, is counted too.
    EXPECT_EQ(send(D, "GET", "/t/acme/c/notes/1").status, 429);
    auto admin_query = send(A, "POST", "/_admin/tenants/acme/query", R"({"query":"select count(*) from notes"})");
    EXPECT_EQ(admin_query.status, 200) << admin_query.body;
    auto usage = get_quota();
    EXPECT_EQ(usage_of(usage.body, "requests"), "1") << usage.body;
    held.join();
    EXPECT_EQ(held_status, 200);
    EXPECT_EQ(query("select count(*) from notes").status, 200);  // given back as it was answered
    EXPECT_EQ(send(D, "GET", "/t/acme/c/notes/1").status, 200);
    EXPECT_EQ(usage_of(get_quota().body, "requests"), "0");
}

// §14 case 62: usage for the admin token only; a closed or unknown tenant.
TEST_F(Quotas, UsageIsTheAdminTokensOnly) {
    make_acme();
    auto r = get_quota();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body.substr(0, 35), R"({"tenant":"acme","quota":{},"usage")") << r.body;
    EXPECT_EQ(usage_of(r.body, "rows"), "3");
    EXPECT_EQ(usage_of(r.body, "streams"), "0");
    EXPECT_EQ(usage_of(r.body, "requests"), "0");
    EXPECT_EQ(usage_of(r.body, "rows_per_s"), "null");
    EXPECT_EQ(std::stoull(usage_of(r.body, "bytes")), std::filesystem::file_size(file("acme.fenec")));
    EXPECT_EQ(send(D, "GET", "/_admin/tenants/acme/quota").status, 403);
    EXPECT_EQ(send(D, "PUT", "/_admin/tenants/acme/quota", R"({"rows":1})").status, 403);
    EXPECT_EQ(send(A, "GET", "/_admin/tenants/nope/quota").status, 404);
    EXPECT_EQ(send(A, "PUT", "/_admin/tenants/nope/quota", R"({"rows":1})").status, 404);
    EXPECT_EQ(send(A, "DELETE", "/_admin/tenants/acme/quota").status, 405);
    EXPECT_FALSE(std::filesystem::exists(file("acme.quota")));  // no quota, no side file
}

TEST_F(Quotas, StreamsQuotaRefusesTheSubscriptionPastIt) {
    make_acme();
    ASSERT_EQ(put_quota(R"({"streams":1})").status, 200);
    auto first = std::make_unique<Client>(node_->port());
    first->send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D + "\r\n\r\n");
    const std::string head = first->read_until("\r\n\r\n", 5000);
    ASSERT_NE(head.find("200"), std::string::npos) << head;
    auto second = send(D, "GET", "/t/acme/c/notes/changes");
    EXPECT_EQ(second.status, 429);
    EXPECT_EQ(second.body,
              R"({"error":"tenant `acme` is at its streams quota","quota":"streams"})");
    EXPECT_EQ(usage_of(get_quota().body, "streams"), "1");
    first.reset();  // the stream ends with its client; the count is given back
    EXPECT_TRUE(wait_until([&] { return usage_of(get_quota().body, "streams") == "0"; }));
    Client again(node_->port());
    again.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D + "\r\n\r\n");
    EXPECT_NE(again.read_until("\r\n\r\n", 5000).find("200"), std::string::npos);
}

TEST_F(Quotas, QuotaIsKeptInItsSideFileAcrossARestart) {
    make_acme();
    ASSERT_EQ(put_quota(R"({"rows":4,"streams":null,"requests":8})").status, 200);
    std::ifstream in(file("acme.quota"));
    std::stringstream kept;
    kept << in.rdbuf();
    EXPECT_EQ(kept.str(), R"({"rows":4,"requests":8})");
    EXPECT_FALSE(std::filesystem::exists(file("acme.quota.new")));
    ASSERT_EQ(node_->kill(SIGTERM), 0);
    start();
    auto r = get_quota();  // opens acme, which reads its side file
    EXPECT_NE(r.body.find(R"("quota":{"rows":4,"requests":8})"), std::string::npos) << r.body;
    ASSERT_EQ(node_->kill(SIGKILL), 128 + SIGKILL);
    start();
    EXPECT_EQ(query("put notes {title: $1}", "[\"d\"]").status, 200);  // opened by a write
    EXPECT_EQ(query("put notes {title: $1}", "[\"e\"]").status, 507);
    // `{}` is no quota: the side file goes, and so does the limit.
    auto none = put_quota("{}");
    EXPECT_EQ(none.body, R"({"tenant":"acme","quota":{}})");
    EXPECT_FALSE(std::filesystem::exists(file("acme.quota")));
    EXPECT_EQ(query("put notes {title: $1}", "[\"e\"]").status, 200);
}

TEST_F(Quotas, PutRefusesWhatIsNotAQuotaNamingTheField) {
    make_acme();
    struct Case {
        std::string body;
        std::string field;  // "" when no one field is to blame
    };
    for (const Case& c : std::vector<Case>{{"", ""},
                                           {"[1]", ""},
                                           {"{\"rows\":", ""},
                                           {R"({"rows":-1})", "rows"},
                                           {R"({"bytes":1.5})", "bytes"},
                                           {R"({"streams":"4"})", "streams"},
                                           {R"({"requests":true})", "requests"},
                                           {R"({"rows_per_s":0})", "rows_per_s"},
                                           {R"({"rows":1,"memory":5})", "memory"}}) {
        auto r = put_quota(c.body);
        EXPECT_EQ(r.status, 400) << c.body << " -> " << r.body;
        EXPECT_NE(r.body.find("\"error\""), std::string::npos) << r.body;
        if (!c.field.empty()) {
            EXPECT_NE(r.body.find("\"field\":\"" + c.field + "\""), std::string::npos) << r.body;
        }
    }
    EXPECT_FALSE(std::filesystem::exists(file("acme.quota")));  // nothing kept from a refusal
    auto zero = put_quota(R"({"bytes":0,"rows":null,"bytes_per_s":18446744073709551615})");
    EXPECT_EQ(zero.status, 200) << zero.body;
    EXPECT_EQ(zero.body, R"({"tenant":"acme","quota":{"bytes":0,"bytes_per_s":18446744073709551615}})");
}

}  // namespace
}  // namespace fenec::test::quota_test
