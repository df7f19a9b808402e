// test/server/node/data_plane_test.cc: the node's data plane over HTTP against the real binary
// (node-http.md §14 cases 10-31, 42-46): statements, batches, REST, credentials and JWTs,
// idempotency, subscriptions with cursors and reseeds. Each test starts its own node.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>

#include "server/node/jwt.h"
#include "test/server/node/node_fixture.h"

namespace fenec::test::data_plane_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";
const std::string R = "replication-token-r";
const std::string S = "0123456789abcdef0123456789abcdef";  // 32 bytes

// Statements of `kind` ("read", "write") the node has run (fenec_statements_total): one counted
// is one its worker has taken up, which then parks it if it waits.
uint64_t statements_run(uint16_t port, std::string_view kind) {
    Client c(port);
    auto m = c.request("GET", "/_metrics", {}, bearer(A));
    if (!m) return 0;
    const std::string key = "fenec_statements_total{kind=\"" + std::string(kind) + "\"} ";
    const size_t at = m->body.find(key);
    return at == std::string::npos ? 0 : std::stoull(m->body.substr(at + key.size()));
}

std::string jwt(const std::string& tenant, int64_t exp_offset_s = 3600, const std::string& extra = "") {
    const int64_t now = std::time(nullptr);
    std::string payload = "{\"sub\":\"u1\",\"exp\":" + std::to_string(now + exp_offset_s);
    if (!tenant.empty()) payload += ",\"tenant\":\"" + tenant + "\"";
    payload += extra + "}";
    return auth::sign_hs256(S, payload);
}

class DataPlane : public ::testing::Test {
protected:
    void SetUp() override { start({}); }

    void start(std::vector<std::string> more) {
        std::vector<std::string> flags = {"--token", D, "--admin-token", A, "--replication-token", R,
                                          "--jwt-secret", S, "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        node_.reset();
        node_ = std::make_unique<NodeProcess>(dir_.path(), flags);
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        client_ = std::make_unique<Client>(node_->port());
        ASSERT_TRUE(client_->ok());
    }

    void make_acme() {
        auto r = admin("PUT", "/_admin/tenants/acme",
                       R"J({"schema":["create collection notes (title text, year int @sorted, tags [text])"]})J");
        ASSERT_EQ(r.status, 201) << r.body;
        for (auto [t, y] : {std::pair{"a", 2020}, {"b", 2022}, {"c", 2024}}) {
            auto p = query("put notes {title: $1, year: $2}", "[\"" + std::string(t) + "\"," + std::to_string(y) + "]");
            ASSERT_EQ(p.status, 200) << p.body;
        }
    }

    Reply admin(std::string_view method, std::string_view target, std::string_view body = {}) {
        auto r = client_->request(method, target, body, bearer(A));
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    Reply data(std::string_view method, std::string_view target, std::string_view body = {},
               std::vector<std::pair<std::string, std::string>> headers = {}) {
        if (headers.empty()) headers = bearer(D);
        auto r = client_->request(method, target, body, headers);
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());  // the node closed it
        return r.value_or(Reply{});
    }
    Reply query(const std::string& q, const std::string& params = "[]",
                std::vector<std::pair<std::string, std::string>> headers = {}) {
        std::string body = "{\"query\":\"" + q + "\",\"params\":" + params + "}";
        return data("POST", "/t/acme/query", body, std::move(headers));
    }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

TEST_F(DataPlane, HealthNeedsNoCredentialAndCarriesARequestId) {
    auto r = client_->request("GET", "/_health");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(r->body.find("\"ok\":true"), std::string::npos);
    ASSERT_TRUE(r->header("X-Request-Id"));
    EXPECT_EQ(r->header("X-Request-Id")->size(), 16u);
    auto kept = client_->request("GET", "/_health", {}, {{"X-Request-Id", "order-7"}});
    EXPECT_EQ(kept->header("X-Request-Id"), "order-7");
    auto tab = client_->request("GET", "/_health", {}, {{"X-Request-Id", std::string(129, 'x')}});
    EXPECT_EQ(tab->header("X-Request-Id")->size(), 16u);
}

TEST_F(DataPlane, QueryAnswersWithSeqAndHistory) {
    make_acme();
    auto before = data("GET", "/t/acme/");
    ASSERT_EQ(before.status, 200) << before.body;
    const uint64_t seq = std::stoull(*before.header("Fenec-Seq"));
    auto put = query("put notes {title: $1}", "[\"d\"]");
    EXPECT_EQ(put.status, 200);
    EXPECT_EQ(put.body, R"({"affected":1,"ids":[4]})");
    EXPECT_EQ(std::stoull(*put.header("Fenec-Seq")), seq + 1);
    EXPECT_EQ(put.header("Fenec-History")->size(), 16u);
    auto get = query("get notes where year >= $1", "[2022]");
    EXPECT_EQ(get.status, 200);
    EXPECT_EQ(get.body, R"({"rows":[{"_id":2,"title":"b","year":2022,"tags":null},)"
                        R"({"_id":3,"title":"c","year":2024,"tags":null}]})");
    EXPECT_EQ(*get.header("Fenec-Seq"), std::to_string(seq + 1));
}

TEST_F(DataPlane, StatementErrorsHaveTheirStatus) {
    make_acme();
    EXPECT_EQ(query("get notes wher").status, 400);
    auto nosuch = query("get nosuch");
    EXPECT_EQ(nosuch.status, 404);
    EXPECT_NE(nosuch.body.find("nosuch"), std::string::npos);
    auto unknown = data("POST", "/t/nope/query", R"({"query":"get notes"})");
    EXPECT_EQ(unknown.status, 404);
    EXPECT_NE(unknown.body.find("nope"), std::string::npos);
    EXPECT_EQ(data("POST", "/t/Acme/query", R"({"query":"get notes"})").status, 400);
    EXPECT_EQ(data("POST", "/t/acme/query", R"({"query":1})").status, 400);
    EXPECT_EQ(data("POST", "/t/acme/query", R"({"query":"get notes"})", {{"Authorization", "Bearer " + D}, {"Content-Type", "text/html"}}).status, 415);
    EXPECT_EQ(data("GET", "/t/acme/query").status, 405);
    EXPECT_EQ(query("get _idempotency").status, 404);
    EXPECT_EQ(data("GET", "/t/acme/c/_idempotency").status, 404);
}

TEST_F(DataPlane, BatchLandsAsOneBlockOrNothing) {
    make_acme();
    const uint64_t seq = std::stoull(*data("GET", "/t/acme/").header("Fenec-Seq"));
    auto bad = data("POST", "/t/acme/batch",
                    "{\"query\":\"put notes {title: \\\"x\\\"}\"}\n{\"query\":\"put notes {nofield: 1}\"}\n");
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("\"completed\":0,\"at\":1"), std::string::npos) << bad.body;
    EXPECT_EQ(*data("GET", "/t/acme/").header("Fenec-Seq"), std::to_string(seq));
    EXPECT_EQ(data("GET", "/t/acme/c/notes?count").body, R"({"count":3})");
    auto good = data("POST", "/t/acme/batch",
                     "{\"query\":\"put notes {title: \\\"x\\\"}\"}\n\n{\"query\":\"put notes {title: $1}\",\"params\":[\"y\"]}\n"
                     "{\"query\":\"get notes where title = $1\",\"params\":[\"y\"]}\n");
    EXPECT_EQ(good.status, 200) << good.body;
    EXPECT_EQ(*good.header("Fenec-Seq"), std::to_string(seq + 2));
    EXPECT_EQ(good.body, R"({"results":[{"affected":1,"ids":[4]},{"affected":1,"ids":[5]},)"
                         R"({"rows":[{"_id":5,"title":"y","year":null,"tags":null}]}],"completed":3})");
    auto line = data("POST", "/t/acme/batch", "{\"query\":\"get notes\"}\nnot json\n");
    EXPECT_EQ(line.status, 400);
    EXPECT_NE(line.body.find("\"line\":2"), std::string::npos) << line.body;
}

TEST_F(DataPlane, BatchWithCompactRunsStatementByStatement) {
    make_acme();
    auto r = data("POST", "/t/acme/batch",
                  "{\"query\":\"put notes {title: \\\"y\\\"}\"}\n{\"query\":\"compact\"}\n{\"query\":\"put notes {nofield: 1}\"}\n");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("\"completed\":2,\"at\":2"), std::string::npos) << r.body;
    EXPECT_EQ(data("GET", "/t/acme/c/notes?title=y").body.find("\"y\"") != std::string::npos, true);
    auto keyed = data("POST", "/t/acme/batch", "{\"query\":\"compact\"}\n{\"query\":\"get notes\"}\n",
                      {{"Authorization", "Bearer " + D}, {"Idempotency-Key", "k"}});
    EXPECT_EQ(keyed.status, 400);
}

TEST_F(DataPlane, RestRoutes) {
    make_acme();
    auto one = data("GET", "/t/acme/c/notes/1");
    EXPECT_EQ(one.status, 200);
    EXPECT_EQ(one.body, R"({"_id":1,"title":"a","year":2020,"tags":null})");
    EXPECT_EQ(data("GET", "/t/acme/c/notes/99").status, 404);
    EXPECT_EQ(data("GET", "/t/acme/c/notes/x1").status, 400);
    auto created = data("PUT", "/t/acme/c/notes/9", R"({"title":"n"})");
    EXPECT_EQ(created.status, 201) << created.body;
    EXPECT_EQ(created.body, R"({"id":9,"created":true})");
    auto replaced = data("PUT", "/t/acme/c/notes/9", R"({"title":"m"})");
    EXPECT_EQ(replaced.status, 200);
    EXPECT_EQ(replaced.body, R"({"id":9,"created":false})");
    EXPECT_EQ(data("PUT", "/t/acme/c/notes/9", R"({"_id":8,"title":"m"})").status, 400);
    auto patched = data("PATCH", "/t/acme/c/notes/9", R"({"year":1999})");
    EXPECT_EQ(patched.status, 200) << patched.body;
    EXPECT_EQ(data("GET", "/t/acme/c/notes/9").body, R"({"_id":9,"title":"m","year":1999,"tags":null})");
    EXPECT_EQ(data("PATCH", "/t/acme/c/notes/77", R"({"year":1})").status, 404);
    EXPECT_EQ(data("DELETE", "/t/acme/c/notes/9").status, 200);
    EXPECT_EQ(data("DELETE", "/t/acme/c/notes/9").status, 404);
    auto posted = data("POST", "/t/acme/c/notes", R"([{"title":"p"},{"title":"q","year":2030}])");
    EXPECT_EQ(posted.status, 201) << posted.body;
    EXPECT_EQ(posted.body, R"({"ids":[10,11]})");
    EXPECT_EQ(data("POST", "/t/acme/c/notes", R"({"_id":1,"title":"dup"})").status, 409);
    auto list = data("GET", "/t/acme/c/notes?year=ge.2022&order=year.desc&limit=1");
    EXPECT_EQ(list.status, 200);
    EXPECT_EQ(list.body, R"([{"_id":11,"title":"q","year":2030,"tags":null}])");
    auto colour = data("GET", "/t/acme/c/notes?colour=red");
    EXPECT_EQ(colour.status, 404);
    EXPECT_NE(colour.body.find("colour"), std::string::npos);
    EXPECT_EQ(data("GET", "/t/acme/c/notes?count&limit=1").status, 400);
    EXPECT_EQ(data("GET", "/t/acme/c/nosuch").status, 404);
}

TEST_F(DataPlane, UniqueAndRequire) {
    ASSERT_EQ(admin("PUT", "/_admin/tenants/acme",
                    R"J({"schema":["create collection notes (title text @unique, year int)"]})J").status, 201);
    EXPECT_EQ(query("put notes {title: $1}", "[\"a\"]").status, 200);
    auto dup = query("put notes {title: $1}", "[\"a\"]");
    EXPECT_EQ(dup.status, 409);
    EXPECT_NE(dup.body.find("title"), std::string::npos);
    auto req = query("set notes {year: 1} where title = $1 require 2", "[\"a\"]");
    EXPECT_EQ(req.status, 412) << req.body;
    EXPECT_EQ(data("GET", "/t/acme/c/notes/1").body, R"({"_id":1,"title":"a","year":null})");
}

TEST_F(DataPlane, Credentials) {
    make_acme();
    auto none = client_->request("GET", "/t/acme/c/notes/1");
    EXPECT_EQ(none->status, 401);
    EXPECT_EQ(none->header("WWW-Authenticate"), "Bearer");
    EXPECT_EQ(data("GET", "/t/acme/c/notes/1", {}, bearer("wrong")).status, 401);
    auto admin_on_data = data("GET", "/t/acme/c/notes/1", {}, bearer(A));
    EXPECT_EQ(admin_on_data.status, 403);
    EXPECT_NE(admin_on_data.body.find("/_admin/tenants/acme/query"), std::string::npos);
    EXPECT_EQ(client_->request("GET", "/_admin/tenants", {}, bearer(D))->status, 403);
    EXPECT_EQ(client_->request("GET", "/_admin/tenants", {}, bearer(A))->status, 200);
    EXPECT_EQ(client_->request("GET", "/_metrics", {}, bearer(D))->status, 403);
    EXPECT_EQ(client_->request("GET", "/_admin/tenants", {}, bearer(R))->status, 403);
}

TEST_F(DataPlane, JwtReachesItsTenantOnly) {
    make_acme();
    EXPECT_EQ(data("GET", "/t/acme/c/notes/1", {}, bearer(jwt("acme"))).status, 200);
    EXPECT_EQ(data("GET", "/t/globex/c/notes/1", {}, bearer(jwt("acme"))).status, 403);
    ASSERT_EQ(admin("PUT", "/_admin/tenants/globex").status, 201);
    EXPECT_EQ(data("GET", "/t/globex/c/notes/1", {}, bearer(jwt("acme"))).status, 403);
    EXPECT_EQ(data("GET", "/t/acme/c/notes/1", {}, bearer(jwt(""))).status, 403);
    EXPECT_EQ(data("GET", "/t/acme/c/notes/1", {}, bearer(jwt("acme", -3600))).status, 401);
    EXPECT_EQ(data("GET", "/t/acme/c/notes/1", {}, bearer(auth::sign_hs256("another-secret-of-32-bytes-long!!", "{\"tenant\":\"acme\",\"exp\":9999999999}"))).status, 401);
    EXPECT_EQ(query("create collection x (a int)", "[]", bearer(jwt("acme"))).status, 403);
    EXPECT_EQ(query("put notes {title: $1}", "[\"r\"]", bearer(jwt("acme", 3600, ",\"scope\":\"read\""))).status, 403);
    EXPECT_EQ(query("put notes {title: $1}", "[\"w\"]", bearer(jwt("acme"))).status, 200);
    EXPECT_EQ(admin("GET", "/_admin/tenants").status, 200);
    EXPECT_EQ(client_->request("GET", "/_admin/tenants", {}, bearer(jwt("acme")))->status, 403);
}

TEST_F(DataPlane, IdempotencyKeyReplaysAndRefusesAnotherBody) {
    make_acme();
    auto h = bearer(D);
    h.emplace_back("Idempotency-Key", "k1");
    auto first = query("put notes {title: $1}", "[\"d\"]", h);
    ASSERT_EQ(first.status, 200) << first.body;
    auto again = query("put notes {title: $1}", "[\"d\"]", h);
    EXPECT_EQ(again.status, 200);
    EXPECT_EQ(again.body, first.body);
    EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
    EXPECT_FALSE(first.header("Idempotent-Replayed"));
    EXPECT_EQ(data("GET", "/t/acme/c/notes?count").body, R"({"count":4})");
    auto other = query("put notes {title: $1}", "[\"e\"]", h);
    EXPECT_EQ(other.status, 422);
    EXPECT_NE(other.body.find("k1"), std::string::npos);
    // A failed write stores no key: corrected, it runs.
    auto h2 = bearer(D);
    h2.emplace_back("Idempotency-Key", "k2");
    EXPECT_EQ(query("insert notes {_id: 1, title: $1}", "[\"x\"]", h2).status, 409);
    EXPECT_EQ(query("insert notes {_id: 1, title: $1}", "[\"x\"]", h2).status, 409);
    EXPECT_EQ(query("put notes {title: $1}", "[\"x\"]", h2).status, 200);  // corrected, it runs
}

TEST_F(DataPlane, IdempotencyKeysSurviveARestartAndArePerUser) {
    make_acme();
    auto h = bearer(D);
    h.emplace_back("Idempotency-Key", "k9");
    auto first = data("POST", "/t/acme/c/notes", R"({"title":"once"})", h);
    ASSERT_EQ(first.status, 201);
    start({});
    auto again = data("POST", "/t/acme/c/notes", R"({"title":"once"})", h);
    EXPECT_EQ(again.status, 201);
    EXPECT_EQ(again.body, first.body);
    EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
    // The same key from a JWT user is another user's.
    auto hj = bearer(jwt("acme"));
    hj.emplace_back("Idempotency-Key", "k9");
    auto theirs = data("POST", "/t/acme/c/notes", R"({"title":"once"})", hj);
    EXPECT_EQ(theirs.status, 201);
    EXPECT_FALSE(theirs.header("Idempotent-Replayed"));
    auto nosub = bearer(auth::sign_hs256(S, "{\"tenant\":\"acme\",\"exp\":" + std::to_string(std::time(nullptr) + 60) + "}"));
    nosub.emplace_back("Idempotency-Key", "k10");
    EXPECT_EQ(data("POST", "/t/acme/c/notes", R"({"title":"x"})", nosub).status, 400);
}

TEST_F(DataPlane, ConcurrentKeyedWritesRunOnce) {
    make_acme();
    std::vector<std::thread> threads;
    std::vector<std::string> bodies(4);
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&, i] {
            Client c(node_->port());
            auto h = bearer(D);
            h.emplace_back("Idempotency-Key", "same");
            auto r = c.request("POST", "/t/acme/query", R"({"query":"put notes {title: \"z\"}"})", h);
            bodies[i] = r ? r->body : "";
        });
    }
    for (auto& t : threads) t.join();
    for (const auto& b : bodies) EXPECT_EQ(b, bodies[0]);
    EXPECT_EQ(data("GET", "/t/acme/c/notes?count").body, R"({"count":4})");
}

// §4.1: Fenec-After on a write is 400, through REST as through a statement, and nothing lands.
// Before, a REST write took it and ran.
TEST_F(DataPlane, FenecAfterOnARestWriteIsRefused) {
    make_acme();
    const std::string before = data("GET", "/t/acme/c/notes?count").body;
    auto h = bearer(D);
    h.emplace_back("Fenec-After", "1");
    for (auto [method, target, body] :
         {std::tuple{"POST", "/t/acme/c/notes", R"({"title":"x"})"},
          std::tuple{"PUT", "/t/acme/c/notes/7", R"({"title":"x"})"},
          std::tuple{"PATCH", "/t/acme/c/notes/1", R"({"title":"y"})"},
          std::tuple{"DELETE", "/t/acme/c/notes/1", ""}}) {
        const Reply r = data(method, target, body, h);
        EXPECT_EQ(r.status, 400) << method << " " << r.body;
        EXPECT_NE(r.body.find("Fenec-After is for reads"), std::string::npos) << r.body;
    }
    EXPECT_EQ(data("GET", "/t/acme/c/notes?count").body, before);
}

// §4.1, §5.6: a REST read waits for Fenec-After as a statement does, and refuses the headers'
// bad values. Before, REST reads ignored all three headers: a read-your-writes GET at a copy
// behind answered at once from where it stood.
TEST_F(DataPlane, ARestReadWaitsForFenecAfter) {
    make_acme();
    const uint64_t seq = std::stoull(*data("GET", "/t/acme/").header("Fenec-Seq"));
    auto h = bearer(D);
    h.emplace_back("Fenec-After", std::to_string(seq + 100));
    h.emplace_back("Fenec-Wait", "200");
    for (const char* target : {"/t/acme/c/notes", "/t/acme/c/notes/1", "/t/acme/c/notes?count"}) {
        const auto t0 = std::chrono::steady_clock::now();
        const Reply r = data("GET", target, {}, h);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
        EXPECT_EQ(r.status, 504) << target << " " << r.body;
        EXPECT_GE(ms, 190) << target;
        EXPECT_NE(r.body.find("\"seq\":" + std::to_string(seq)), std::string::npos) << r.body;
    }
    auto bad = bearer(D);
    bad.emplace_back("Fenec-After", "abc");
    EXPECT_EQ(data("GET", "/t/acme/c/notes", {}, bad).status, 400);
    auto alone = bearer(D);
    alone.emplace_back("Fenec-History", "0123456789abcdef");
    EXPECT_EQ(data("GET", "/t/acme/c/notes", {}, alone).status, 400);
    auto held = bearer(D);
    held.emplace_back("Fenec-After", std::to_string(seq));
    const Reply ok = data("GET", "/t/acme/c/notes/1", {}, held);
    EXPECT_EQ(ok.status, 200) << ok.body;
    EXPECT_NE(ok.body.find("\"title\":\"a\""), std::string::npos) << ok.body;
}

TEST_F(DataPlane, FenecAfterWaitsThen504) {
    make_acme();
    const uint64_t seq = std::stoull(*data("GET", "/t/acme/").header("Fenec-Seq"));
    auto h = bearer(D);
    h.emplace_back("Fenec-After", std::to_string(seq + 100));
    h.emplace_back("Fenec-Wait", "200");
    const auto t0 = std::chrono::steady_clock::now();
    auto r = query("get notes", "[]", h);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 504) << r.body;
    EXPECT_GE(ms, 190);
    EXPECT_NE(r.body.find("\"seq\":" + std::to_string(seq)), std::string::npos);
    auto h2 = bearer(D);
    h2.emplace_back("Fenec-After", "1");
    h2.emplace_back("Fenec-History", "0123456789abcdef");
    EXPECT_EQ(query("get notes", "[]", h2).status, 504);
    auto h3 = bearer(D);
    h3.emplace_back("Fenec-After", "abc");
    EXPECT_EQ(query("get notes", "[]", h3).status, 400);
    auto h4 = bearer(D);
    h4.emplace_back("Fenec-History", "0123456789abcdef");
    EXPECT_EQ(query("get notes", "[]", h4).status, 400);
    auto h5 = bearer(D);
    h5.emplace_back("Fenec-After", "1");
    EXPECT_EQ(query("put notes {title: $1}", "[\"x\"]", h5).status, 400);
    // A write landing while it waits answers it.
    auto h6 = bearer(D);
    h6.emplace_back("Fenec-After", std::to_string(seq + 1));
    const uint64_t reads = statements_run(node_->port(), "read");
    std::thread writer([&] {
        // Once the read below has run (and so waits), not before.
        EXPECT_TRUE(wait_until([&] { return statements_run(node_->port(), "read") > reads; }));
        Client c(node_->port());
        c.request("POST", "/t/acme/query", R"({"query":"put notes {title: \"late\"}"})", bearer(D));
    });
    auto waited = query("get notes where title = $1", "[\"late\"]", h6);
    writer.join();
    EXPECT_EQ(waited.status, 200);
    EXPECT_NE(waited.body.find("late"), std::string::npos);
}

TEST_F(DataPlane, HeldClaimGetsAJobPutWhileItWaits) {
    ASSERT_EQ(admin("PUT", "/_admin/tenants/acme",
                    R"J({"schema":["create collection jobs (payload text, run_at timestamp @sorted, owner text)"]})J").status, 201);
    const std::string claim = "set jobs {owner: $1, run_at: now() + 30000} where run_at <= now() order run_at limit 1 returning *";
    auto h = bearer(D);
    h.emplace_back("Fenec-Wait", "5000");
    const uint64_t writes = statements_run(node_->port(), "write");
    std::thread putter([&] {
        // Once the claim below has run and found nothing (and so is held), not before.
        EXPECT_TRUE(wait_until([&] { return statements_run(node_->port(), "write") > writes; }));
        Client c(node_->port());
        c.request("POST", "/t/acme/query", R"({"query":"put jobs {payload: \"p\", run_at: now()}"})", bearer(D));
    });
    const auto t0 = std::chrono::steady_clock::now();
    auto r = query(claim, "[\"w1\"]", h);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    putter.join();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"affected\":1"), std::string::npos) << r.body;
    EXPECT_LT(ms, 2000);
    auto h2 = bearer(D);
    h2.emplace_back("Fenec-Wait", "200");
    auto empty = query(claim, "[\"w1\"]", h2);
    EXPECT_EQ(empty.status, 200);
    EXPECT_EQ(empty.body, R"({"affected":0,"rows":[]})");
    EXPECT_EQ(query("put jobs {payload: $1}", "[\"x\"]", h2).status, 400);
}

// A JWT valid at the door that expires within about a second (its `exp` 29 s past, inside the
// node's 30 s skew), and the Unix ms after which the node surely holds it expired. Made early in
// a second, so the door sees it valid however the second turns, and not at its very start, where
// std::time (the coarse clock, a tick behind) may still say the second before.
std::pair<std::string, int64_t> jwt_expiring_soon() {
    auto wall_ms = [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    };
    EXPECT_TRUE(wait_until([&] { return wall_ms() % 1000 >= 50 && wall_ms() % 1000 < 300; },
                           std::chrono::milliseconds(2000)));
    const int64_t issued_s = wall_ms() / 1000;
    return {jwt("acme", -29), (issued_s + 1) * 1000 + 50};
}

bool wall_past(int64_t unix_ms) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count() > unix_ms;
}

// The write a waiting request wakes to, sent with the data token to the node at `port` once
// a `kind` statement past the `before` counted has run (the waiting request, parked) and the
// node surely holds its JWT expired (`expired_after`, Unix ms).
std::thread write_once_expired(uint16_t port, std::string_view kind, uint64_t before,
                               int64_t expired_after, std::string body) {
    return std::thread([=] {
        EXPECT_TRUE(wait_until([&] { return statements_run(port, kind) > before; }));
        EXPECT_TRUE(wait_until([&] { return wall_past(expired_after); }));
        Client c(port);
        c.request("POST", "/t/acme/query", body, bearer(D));
    });
}

// §5.5: a held claim meets its JWT's times again at every run: one whose JWT expired while it
// waited is answered 401 at its next run and claims nothing.
TEST_F(DataPlane, HeldClaimWhoseJwtExpiresWhileItWaitsIs401AndClaimsNothing) {
    ASSERT_EQ(admin("PUT", "/_admin/tenants/acme",
                    R"J({"schema":["create collection jobs (payload text, run_at timestamp @sorted, owner text)"]})J").status, 201);
    const std::string claim = "set jobs {owner: $1, run_at: now() + 30000} where run_at <= now() order run_at limit 1 returning *";
    const auto [token, expired_after] = jwt_expiring_soon();
    auto h = bearer(token);
    h.emplace_back("Fenec-Wait", "10000");
    std::thread putter = write_once_expired(
        node_->port(), "write", statements_run(node_->port(), "write"), expired_after,
        R"({"query":"put jobs {payload: \"p\", run_at: now()}"})");
    auto r = query(claim, "[\"w1\"]", h);
    putter.join();
    EXPECT_EQ(r.status, 401) << r.body;
    EXPECT_NE(r.body.find("expired while the request waited"), std::string::npos) << r.body;
    const Reply jobs = query("get jobs", "[]");
    EXPECT_NE(jobs.body.find("\"payload\":\"p\""), std::string::npos) << jobs.body;
    EXPECT_EQ(jobs.body.find("w1"), std::string::npos) << "claimed after its JWT expired: " << jobs.body;
}

// §5.6: a read that waited for a write meets its JWT's times again before it runs.
TEST_F(DataPlane, FenecAfterReadWhoseJwtExpiresWhileItWaitsIs401) {
    make_acme();
    const uint64_t seq = std::stoull(*data("GET", "/t/acme/").header("Fenec-Seq"));
    const auto [token, expired_after] = jwt_expiring_soon();
    auto h = bearer(token);
    h.emplace_back("Fenec-After", std::to_string(seq + 1));
    h.emplace_back("Fenec-Wait", "10000");
    std::thread writer = write_once_expired(node_->port(), "read",
                                            statements_run(node_->port(), "read"), expired_after,
                                            R"({"query":"put notes {title: \"late\"}"})");
    auto waited = query("get notes where title = $1", "[\"late\"]", h);
    writer.join();
    EXPECT_EQ(waited.status, 401) << waited.body;
    EXPECT_EQ(waited.body.find("\"late\""), std::string::npos) << waited.body;
}

TEST_F(DataPlane, IdenticalHeldClaimsQueueOldestFirst) {
    ASSERT_EQ(admin("PUT", "/_admin/tenants/acme",
                    R"J({"schema":["create collection jobs (payload text, run_at timestamp @sorted, owner text)"]})J").status, 201);
    const std::string claim =
        R"({"query":"set jobs {owner: \"w\", run_at: now() + 30000} where run_at <= now() order run_at limit 1 returning *"})";
    std::string older_body, newer_body;
    int newer_status = 0;
    const uint64_t writes = statements_run(node_->port(), "write");
    std::thread older([&] {
        Client c(node_->port());
        auto h = bearer(D);
        h.emplace_back("Fenec-Wait", "3000");
        auto r = c.request("POST", "/t/acme/query", claim, h);
        older_body = r ? r->body : "";
    });
    // The older claim held before the newer is sent: its run counted, its queue joined.
    EXPECT_TRUE(wait_until([&] { return statements_run(node_->port(), "write") == writes + 1; }));
    std::thread newer([&] {
        Client c(node_->port());
        auto h = bearer(D);
        h.emplace_back("Fenec-Wait", "1200");
        auto r = c.request("POST", "/t/acme/query", claim, h);
        newer_status = r ? r->status : 0;
        newer_body = r ? r->body : "";
    });
    // The newer one counted, queued behind the older (it does not run while that one waits).
    EXPECT_TRUE(wait_until([&] { return statements_run(node_->port(), "write") == writes + 2; }));
    ASSERT_EQ(query("put jobs {payload: $1, run_at: now()}", "[\"one\"]").status, 200);
    older.join();
    newer.join();
    EXPECT_NE(older_body.find("\"affected\":1"), std::string::npos) << older_body;
    EXPECT_EQ(newer_status, 200);
    EXPECT_EQ(newer_body, R"({"affected":0,"rows":[]})");  // waited its whole wait, took nothing
}

// Reads the SSE events in `c`'s buffer: (event, id, data) for each complete one, consumed.
struct Event {
    std::string name, id, data;
};
std::vector<Event> take_events(Client& c) {
    std::vector<Event> out;
    std::string& b = c.buffer();
    size_t end;
    while ((end = b.find("\n\n")) != std::string::npos) {
        std::string block = b.substr(0, end);
        b.erase(0, end + 2);
        Event e;
        size_t i = 0;
        while (i < block.size()) {
            size_t nl = block.find('\n', i);
            if (nl == std::string::npos) nl = block.size();
            std::string line = block.substr(i, nl - i);
            if (line.starts_with("event: ")) e.name = line.substr(7);
            else if (line.starts_with("id: ")) e.id = line.substr(4);
            else if (line.starts_with("data: ")) e.data = line.substr(6);
            else if (line.starts_with(":")) e.name = line;
            i = nl + 1;
        }
        out.push_back(e);
    }
    return out;
}

// Opens a stream; returns the client with the head consumed.
std::unique_ptr<Client> subscribe(uint16_t port, const std::string& target,
                                  std::vector<std::pair<std::string, std::string>> extra = {}) {
    auto c = std::make_unique<Client>(port);
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D + "\r\n";
    for (const auto& [k, v] : extra) req += k + ": " + v + "\r\n";
    c->send_raw(req + "\r\n");
    std::string got = c->read_until("\r\n\r\n", 5000);
    const size_t end = got.find("\r\n\r\n");
    EXPECT_NE(end, std::string::npos);
    EXPECT_NE(got.find("200"), std::string::npos) << got;
    EXPECT_NE(got.find("text/event-stream"), std::string::npos) << got;
    c->drop(end + 4);
    return c;
}

TEST_F(DataPlane, SubscriptionSeedsThenChanges) {
    make_acme();
    auto s = subscribe(node_->port(), "/t/acme/c/notes/changes?year=ge.2022");
    s->read_until("\n\n", 5000);
    auto seed = take_events(*s);
    ASSERT_EQ(seed.size(), 1u);
    EXPECT_EQ(seed[0].name, "seed");
    EXPECT_NE(seed[0].data.find("\"title\":\"b\""), std::string::npos);
    EXPECT_EQ(seed[0].data.find("\"title\":\"a\""), std::string::npos);
    EXPECT_EQ(query("set notes {year: 2030} where _id = 1").status, 200);
    s->read_until("\n\n", 5000);
    auto change = take_events(*s);
    ASSERT_EQ(change.size(), 1u);
    EXPECT_EQ(change[0].name, "change");
    EXPECT_NE(change[0].data.find("\"puts\":[{\"_id\":1"), std::string::npos) << change[0].data;
    EXPECT_EQ(query("set notes {year: 2000} where _id = 2").status, 200);
    s->read_until("\n\n", 5000);
    auto left = take_events(*s);
    ASSERT_EQ(left.size(), 1u);
    EXPECT_NE(left[0].data.find("\"dels\":[2]"), std::string::npos) << left[0].data;
    // A batch of two puts is one change holding both.
    EXPECT_EQ(data("POST", "/t/acme/batch",
                   "{\"query\":\"put notes {year: 2050}\"}\n{\"query\":\"put notes {year: 2051}\"}\n").status, 200);
    s->read_until("\n\n", 5000);
    auto both = take_events(*s);
    ASSERT_EQ(both.size(), 1u);
    EXPECT_NE(both[0].data.find("2050"), std::string::npos);
    EXPECT_NE(both[0].data.find("2051"), std::string::npos);
    EXPECT_EQ(data("GET", "/t/acme/c/notes/changes?order=year.desc").status, 400);
}

TEST_F(DataPlane, SubscriptionResumesFromItsCursorOrIsReseeded) {
    start({"--changes", "8"});
    make_acme();
    const Reply at = data("GET", "/t/acme/");
    const std::string seq = *at.header("Fenec-Seq");
    const std::string history = *at.header("Fenec-History");
    {
        // The cursor is the tenant's seq: no seed, only later changes. An event's id is its seq
        // and the history it was sent on.
        auto s = subscribe(node_->port(), "/t/acme/c/notes/changes", {{"Last-Event-ID", seq}});
        EXPECT_EQ(query("put notes {title: $1}", "[\"new\"]").status, 200);
        s->read_until("\n\n", 5000);
        auto ev = take_events(*s);
        ASSERT_EQ(ev.size(), 1u);
        EXPECT_EQ(ev[0].name, "change");
        EXPECT_EQ(ev[0].id, std::to_string(std::stoull(seq) + 1) + "-" + history);
    }
    {
        // An id of another history (a copy this one did not fork from) is seeded again, as a
        // `history=` of it would be; a malformed one is refused.
        auto s = subscribe(node_->port(), "/t/acme/c/notes/changes",
                           {{"Last-Event-ID", seq + "-0123456789abcdef"}});
        s->read_until("\n\n", 5000);
        auto ev = take_events(*s);
        ASSERT_GE(ev.size(), 1u);
        EXPECT_EQ(ev[0].name, "seed");
        auto bad = bearer(D);
        bad.emplace_back("Last-Event-ID", seq + "-xyz");
        EXPECT_EQ(data("GET", "/t/acme/c/notes/changes", {}, bad).status, 400);
        EXPECT_EQ(data("GET", "/t/acme/c/notes/changes?since=" + seq + "-" + history +
                                  "&history=0123456789abcdef")
                      .status,
                  400);
    }
    {
        // A cursor the ring covers: the changes after it, then live.
        auto s = subscribe(node_->port(), "/t/acme/c/notes/changes?since=" + seq);
        s->read_until("\n\n", 5000);
        auto ev = take_events(*s);
        ASSERT_EQ(ev.size(), 1u);
        EXPECT_EQ(ev[0].name, "change");
        EXPECT_NE(ev[0].data.find("new"), std::string::npos);
    }
    for (int i = 0; i < 20; ++i) ASSERT_EQ(query("put notes {title: $1}", "[\"more\"]").status, 200);
    {
        auto s = subscribe(node_->port(), "/t/acme/c/notes/changes?since=" + seq);
        s->read_until("\n\n", 5000);
        auto ev = take_events(*s);
        ASSERT_GE(ev.size(), 1u);
        EXPECT_EQ(ev[0].name, "seed");  // older than the ring: a reseed
    }
    {
        auto s = subscribe(node_->port(), "/t/acme/c/notes/changes?since=" + std::to_string(std::stoull(seq) + 500));
        s->read_until("\n\n", 5000);
        auto ev = take_events(*s);
        ASSERT_GE(ev.size(), 1u);
        EXPECT_EQ(ev[0].name, "seed");  // ahead of the tenant: a reseed
    }
}

TEST_F(DataPlane, SubscriptionKeepaliveAndJwtExpiry) {
    start({"--keepalive", "1"});
    make_acme();
    auto s = subscribe(node_->port(), "/t/acme/c/notes/changes");
    std::string got = s->read_until(": keepalive", 3500);
    EXPECT_NE(got.find(": keepalive"), std::string::npos);
    // A stream ends as the door judges a JWT: past `exp` by more than the 30 s skew. One 28 s
    // past it is taken and ends within a few seconds; one 20 s past it is taken and still runs
    // 3 s later. Before, a stream ended at `exp` itself: admitted inside the skew, seeded, cut.
    auto c = std::make_unique<Client>(node_->port());
    c->send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nAuthorization: Bearer " +
                jwt("acme", -28) + "\r\n\r\n");
    std::string ended = c->read_until("\"status\":401", 6000);
    EXPECT_NE(ended.find("event: seed"), std::string::npos) << ended;
    EXPECT_NE(ended.find("event: error"), std::string::npos) << ended;
    EXPECT_NE(ended.find("\"reason\":\"expired\""), std::string::npos) << ended;
    auto inside = std::make_unique<Client>(node_->port());
    inside->send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nAuthorization: Bearer " +
                     jwt("acme", -20) + "\r\n\r\n");
    std::string running = inside->read_until("\"status\":401", 3000);
    EXPECT_NE(running.find("event: seed"), std::string::npos) << running;
    EXPECT_EQ(running.find("event: error"), std::string::npos) << running;
    EXPECT_NE(running.find(": keepalive"), std::string::npos) << running;
}

TEST_F(DataPlane, TenantStreamsLimit) {
    start({"--tenant-streams", "1"});
    make_acme();
    auto s = subscribe(node_->port(), "/t/acme/c/notes/changes");
    auto second = data("GET", "/t/acme/c/notes/changes");
    EXPECT_EQ(second.status, 429);
    EXPECT_NE(second.body.find("\"limit\":\"tenant_streams\""), std::string::npos);
}

}  // namespace
}  // namespace fenec::test::data_plane_test
