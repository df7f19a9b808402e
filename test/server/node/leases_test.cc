// test/server/node/leases_test.cc: leases and fencing over HTTP against the real binary
// (node-http.md §9, §14 cases 64-68, 72, 73, 75-77): a node without --lease refuses grants and
// writes on; with it, writes wait for a lease naming their tenant (503 with Fenec-Lease and its
// reason), a lease runs from the acknowledged grant's answer, a term fence survives a restart,
// and a write that lands under a lease and is answered after it lapsed is 500 "outcome":"unknown"
// — settled by a read with Fenec-After/Fenec-History, or by its Idempotency-Key once leased again.
// Leases are a few hundred ms, so the waits stay short.
#include <gtest/gtest.h>

#include <thread>

#include "test/server/node/node_fixture.h"

namespace fenec::test::leases_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";
const std::string D1 = "9e2d41c07a5b3f18/eu";
const std::string H1 = "c04b7e1a9d2f6385";

std::string grant_body(uint64_t grant, uint64_t acked, int64_t lease_ms, uint64_t list,
                       const std::string& tenants = "[\"acme\"]", uint64_t term = 3,
                       const std::string& authority = D1) {
    std::string b = "{\"authority\":\"" + authority + "\",\"term\":" + std::to_string(term) +
                    ",\"history\":\"" + H1 + "\",\"grant\":" + std::to_string(grant) +
                    ",\"acked\":" + std::to_string(acked) + ",\"lease_ms\":" + std::to_string(lease_ms) +
                    ",\"list\":" + std::to_string(list);
    if (!tenants.empty()) b += ",\"tenants\":" + tenants;
    return b + "}";
}

bool has(const std::string& body, const std::string& part) { return body.find(part) != std::string::npos; }

// The decimal after `"key":` in a JSON body.
uint64_t number_of(const std::string& body, const std::string& key) {
    const size_t at = body.find("\"" + key + "\":");
    if (at == std::string::npos) return 0;
    return std::stoull(body.substr(at + key.size() + 3));
}

std::string string_of(const std::string& body, const std::string& key) {
    const size_t at = body.find("\"" + key + "\":\"");
    if (at == std::string::npos) return "";
    const size_t from = at + key.size() + 4;
    return body.substr(from, body.find('"', from) - from);
}

class Leases : public ::testing::Test {
protected:
    void start(bool lease) {
        std::vector<std::string> flags = {"--token", D, "--admin-token", A, "--auth-delay", "0",
                                          "--node-name", "n1"};
        if (lease) flags.push_back("--lease");
        client_.reset();
        node_.reset();
        node_ = std::make_unique<NodeProcess>(dir_.path(), flags);
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        client_ = std::make_unique<Client>(node_->port());
        ASSERT_TRUE(client_->ok());
    }

    Reply call(std::string_view method, std::string_view target, std::string_view body,
               std::vector<std::pair<std::string, std::string>> headers) {
        auto r = client_->request(method, target, body, headers);
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    Reply admin(std::string_view method, std::string_view target, std::string_view body = {}) {
        return call(method, target, body, bearer(A));
    }
    Reply grant(const std::string& body) { return admin("POST", "/_admin/lease", body); }
    Reply put(const std::string& tenant, const std::string& title,
              std::vector<std::pair<std::string, std::string>> more = {}) {
        auto h = bearer(D);
        h.insert(h.end(), more.begin(), more.end());
        return call("POST", "/t/" + tenant + "/query",
                    "{\"query\":\"put notes {title: $1}\",\"params\":[\"" + title + "\"]}", h);
    }
    Reply count(const std::string& tenant, std::vector<std::pair<std::string, std::string>> more = {}) {
        auto h = bearer(D);
        h.insert(h.end(), more.begin(), more.end());
        return call("GET", "/t/" + tenant + "/c/notes?count", {}, h);
    }
    void create(const std::string& tenant) {
        auto r = admin("PUT", "/_admin/tenants/" + tenant, R"J({"schema":["create collection notes (title text)"]})J");
        ASSERT_EQ(r.status, 201) << r.body;
    }
    // Grants 1 (acked 0) and 2 (acked 1) of `lease_ms`: a lease naming `tenants` runs.
    void lease(int64_t lease_ms, const std::string& tenants = "[\"acme\"]") {
        auto r = grant(grant_body(1, 0, lease_ms, 1, tenants));
        ASSERT_EQ(r.status, 200) << r.body;
        r = grant(grant_body(2, 1, lease_ms, 1, ""));
        ASSERT_EQ(r.status, 200) << r.body;
        ASSERT_TRUE(has(r.body, "\"ran\":true")) << r.body;
    }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

void expect_lease_refusal(const Reply& r, const std::string& word, const std::string& message) {
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.header("Retry-After").value_or(""), "1");
    EXPECT_EQ(r.header("Fenec-Lease").value_or(""), word);
    EXPECT_TRUE(has(r.body, "\"reason\":\"lease-" + word + "\"")) << r.body;
    EXPECT_TRUE(has(r.body, message)) << r.body;
}

TEST_F(Leases, ANodeWithoutLeaseRefusesGrantsAndWritesOn) {  // case 64
    start(false);
    create("acme");
    auto r = grant(grant_body(1, 0, 5000, 1));
    EXPECT_EQ(r.status, 409);
    EXPECT_EQ(r.body, R"J({"error":"n1 takes no lease (started without --lease)","takes_leases":false})J");
    EXPECT_EQ(admin("DELETE", "/_admin/lease", "{\"authority\":\"" + D1 + "\",\"term\":3}").status, 409);
    EXPECT_EQ(put("acme", "a").status, 200);
    r = admin("GET", "/_admin/lease");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, R"J({"takes_leases":false,"holder":null,"lease":null,"left_ms":0,"list":null,"tenants":[]})J");
}

TEST_F(Leases, WritesWaitForASecondGrantAndReadsDoNot) {  // cases 65, 66
    start(true);
    create("acme");  // a create's schema asks no lease
    expect_lease_refusal(put("acme", "a"), "none", "n1 holds no lease yet");
    EXPECT_EQ(count("acme").status, 200);
    auto r = grant(grant_body(1, 0, 5000, 1));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, R"J("node":"n1","grant":1,"took":true,"ran":false,"left_ms":0,"list":1,"tenants":1,"lease":null)J"))
        << r.body;
    expect_lease_refusal(put("acme", "a"), "none", "n1 holds no lease yet");
    r = grant(grant_body(2, 1, 5000, 1, ""));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, "\"took\":true,\"ran\":true")) << r.body;
    EXPECT_GT(number_of(r.body, "left_ms"), 4000u) << r.body;
    EXPECT_TRUE(has(r.body, "\"lease\":{\"authority\":\"" + D1 + "\",\"term\":3,\"history\":\"" + H1 +
                                "\",\"grant\":2,\"acked\":1,\"lease_ms\":5000}"))
        << r.body;
    r = put("acme", "a");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(r.header("Fenec-Seq"));
    r = admin("GET", "/_admin/lease");
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(has(r.body, "\"takes_leases\":true,\"holder\":{\"authority\":\"" + D1 + "\",\"term\":3"))
        << r.body;
    EXPECT_TRUE(has(r.body, "\"list\":1,\"tenants\":[\"acme\"]")) << r.body;
    const std::string metrics = admin("GET", "/_metrics").body;
    EXPECT_TRUE(has(metrics, "fenec_lease_left_seconds ")) << metrics;
    EXPECT_TRUE(has(metrics, "fenec_lease_term 3")) << metrics;
    EXPECT_TRUE(has(metrics, "fenec_lease_grants_total{outcome=\"ran\"} 1")) << metrics;
    EXPECT_TRUE(has(metrics, "fenec_lease_grants_total{outcome=\"took\"} 1")) << metrics;
    // A release drops it at once.
    r = admin("DELETE", "/_admin/lease", "{\"authority\":\"" + D1 + "\",\"term\":3}");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, R"J({"released":true})J");
    expect_lease_refusal(put("acme", "b"), "none", "n1 holds no lease yet");
}

TEST_F(Leases, ATenantTheLeaseDoesNotNameIsRefused) {  // case 67
    start(true);
    create("acme");
    create("globex");
    lease(5000);
    EXPECT_EQ(put("acme", "a").status, 200);
    expect_lease_refusal(put("globex", "a"), "elsewhere", "n1's lease does not name globex");
    // REST writes are admitted the same way.
    auto r = call("POST", "/t/globex/c/notes", R"J({"title":"x"})J", bearer(D));
    expect_lease_refusal(r, "elsewhere", "does not name globex");
}

TEST_F(Leases, ALeaseNotRenewedLapses) {  // case 68
    start(true);
    create("acme");
    const auto answered = std::chrono::steady_clock::now();
    auto r = grant(grant_body(1, 0, 300, 1));
    ASSERT_EQ(r.status, 200);
    r = grant(grant_body(2, 1, 300, 1, ""));
    ASSERT_TRUE(has(r.body, "\"ran\":true")) << r.body;
    std::this_thread::sleep_until(answered + std::chrono::milliseconds(400));
    expect_lease_refusal(put("acme", "a"), "lapsed", "n1's lease lapsed ");
}

TEST_F(Leases, BadGrantsNameTheField) {
    start(true);
    auto r = grant(R"J({"authority":"x","term":1})J");
    EXPECT_EQ(r.status, 400);
    EXPECT_TRUE(has(r.body, "`history`")) << r.body;
    r = grant(grant_body(1, 0, 0, 1));
    EXPECT_EQ(r.status, 400);
    EXPECT_TRUE(has(r.body, "`lease_ms`")) << r.body;
    r = grant(grant_body(1, 0, 100, 1, "[\"Not A Name\"]"));
    EXPECT_EQ(r.status, 400);
    EXPECT_TRUE(has(r.body, "`tenants`")) << r.body;
    r = grant("not json");
    EXPECT_EQ(r.status, 400);
    r = admin("PUT", "/_admin/lease", "{}");
    EXPECT_EQ(r.status, 405);
}

TEST_F(Leases, ALowerTermIsFencedAlsoAfterARestart) {  // case 72
    start(true);
    auto r = grant(grant_body(1, 0, 5000, 1, "[\"acme\"]", 4));
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string held = "{\"error\":\"n1 is held by " + D1 +
                             " at term 4\",\"holder\":{\"authority\":\"" + D1 +
                             "\",\"term\":4,\"history\":\"" + H1 + "\"}}";
    r = grant(grant_body(2, 1, 5000, 1, "", 3));
    EXPECT_EQ(r.status, 409);
    EXPECT_EQ(r.body, held);
    ASSERT_EQ(node_->kill(SIGTERM), 0);
    start(true);
    r = grant(grant_body(3, 0, 5000, 1, "", 3));
    EXPECT_EQ(r.status, 409);
    EXPECT_EQ(r.body, held);
    EXPECT_EQ(admin("DELETE", "/_admin/lease", "{\"authority\":\"" + D1 + "\",\"term\":3}").status, 409);
}

// §9.5 for a router's changes: one carrying `Fenec-Fence: <authority> <term>` below the term this
// node holds of that authority is refused 409 naming the holder, before anything is done (an
// image's body unread); the term held, another authority, or none sent goes through (an
// operator's call carries none). A change only asks: it raises nothing. A malformed one is 400.
TEST_F(Leases, AChangeFromALowerTermIsFenced) {
    start(true);
    ASSERT_EQ(grant(grant_body(1, 0, 5000, 1, "[\"acme\"]", 4)).status, 200);
    auto change = [&](std::string_view method, const std::string& target, const std::string& fence,
                      std::string_view body = {}) {
        auto h = bearer(A);
        h.push_back({"Fenec-Fence", fence});
        return call(method, target, body, h);
    };
    Reply r = change("PUT", "/_admin/tenants/acme", D1 + " 3");
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_TRUE(has(r.body, "n1 is held by " + D1 + " at term 4")) << r.body;
    EXPECT_EQ(admin("GET", "/_admin/tenants/acme").status, 404) << "nothing was created";
    r = change("PUT", "/_admin/tenants/acme/file", D1 + " 3", "not an image");
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_EQ(change("PUT", "/_admin/tenants/acme", D1 + " 4").status, 201);
    EXPECT_EQ(change("DELETE", "/_admin/tenants/acme", D1 + " 2").status, 409);
    EXPECT_EQ(change("POST", "/_admin/tenants/acme/freeze", D1 + " 3").status, 409);
    EXPECT_EQ(admin("GET", "/_admin/tenants/acme").status, 200) << "not deleted";
    EXPECT_EQ(change("GET", "/_admin/tenants/acme", D1 + " 1").status, 200)
        << "a read asks nothing";
    EXPECT_EQ(change("PUT", "/_admin/tenants/other", "a1b2c3d4e5f60718/us 0").status, 201);
    EXPECT_EQ(change("DELETE", "/_admin/tenants/other", D1 + " 9").status / 100, 2);
    // Asked, not raised: term 4 still takes a change.
    EXPECT_EQ(change("DELETE", "/_admin/tenants/acme", D1 + " 4").status / 100, 2);
    for (const char* bad : {"", "noterm", D1.c_str(), " 4", "x 4x", "x -1"}) {
        EXPECT_EQ(change("PUT", "/_admin/tenants/b", bad).status, 400) << "`" << bad << "`";
    }
}

TEST_F(Leases, ARestartedNodeNeedsTwoGrantsAgain) {  // case 77
    start(true);
    create("acme");
    lease(5000);
    ASSERT_EQ(node_->kill(SIGTERM), 0);
    start(true);
    expect_lease_refusal(put("acme", "a"), "none", "n1 holds no lease yet");
    auto r = grant(grant_body(3, 2, 5000, 1));
    EXPECT_TRUE(has(r.body, "\"took\":true,\"ran\":false")) << r.body;
    r = grant(grant_body(4, 3, 5000, 1, ""));
    EXPECT_TRUE(has(r.body, "\"took\":true,\"ran\":true")) << r.body;
    EXPECT_EQ(put("acme", "a").status, 200);
}

TEST_F(Leases, AnotherAuthorityIsTakenOnceTheLeaseLapsed) {  // case 73
    start(true);
    create("acme");
    lease(300);
    const std::string D2 = "1111222233334444/us";
    auto r = grant(grant_body(1, 0, 300, 1, "[\"acme\"]", 1, D2));
    EXPECT_EQ(r.status, 409);
    EXPECT_TRUE(has(r.body, "\"holder\":{\"authority\":\"" + D1 + "\",\"term\":3")) << r.body;
    // Until the lease has lapsed (nothing left of it), D1 holds the node.
    ASSERT_TRUE(
        wait_until([&] { return has(admin("GET", "/_admin/lease").body, "\"left_ms\":0"); }));
    r = grant(grant_body(1, 0, 300, 1, "[\"acme\"]", 1, D2));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has(r.body, "\"took\":true")) << r.body;
    EXPECT_TRUE(has(admin("GET", "/_admin/lease").body, "\"holder\":{\"authority\":\"" + D2)) << "holder";
}

TEST_F(Leases, AWriteAnsweredAfterItsLeaseLapsedHasAnUnknownOutcome) {  // case 75
    start(true);
    create("acme");
    lease(500);
    auto r = put("acme", "late", {{"Fenec-Test-Stall", "land=800"}});
    ASSERT_EQ(r.status, 500) << r.body;
    EXPECT_FALSE(r.header("Fenec-Seq"));
    EXPECT_TRUE(has(r.body, "\"outcome\":\"unknown\"")) << r.body;
    const uint64_t seq = number_of(r.body, "seq");
    const std::string history = string_of(r.body, "history");
    ASSERT_GT(seq, 0u) << r.body;
    ASSERT_EQ(history.size(), 16u) << r.body;
    auto read = call("POST", "/t/acme/query", R"J({"query":"get notes where title = \"late\""})J",
                     {{"Authorization", "Bearer " + D}, {"Fenec-After", std::to_string(seq)},
                      {"Fenec-History", history}});
    EXPECT_EQ(read.status, 200) << read.body;
    EXPECT_TRUE(has(read.body, "\"title\":\"late\"")) << read.body;
}

TEST_F(Leases, AnUnknownOutcomeIsSettledByItsKeyOnceLeasedAgain) {  // case 76
    start(true);
    create("acme");
    lease(500);
    auto r = put("acme", "k", {{"Fenec-Test-Stall", "land=800"}, {"Idempotency-Key", "k9"}});
    ASSERT_EQ(r.status, 500) << r.body;
    r = put("acme", "k", {{"Idempotency-Key", "k9"}});
    expect_lease_refusal(r, "lapsed", "lapsed");
    auto g = grant(grant_body(3, 0, 5000, 1, ""));  // acknowledging none: its list alone
    ASSERT_TRUE(has(g.body, "\"ran\":false")) << g.body;
    g = grant(grant_body(4, 3, 5000, 1, ""));
    ASSERT_TRUE(has(g.body, "\"ran\":true")) << g.body;
    r = put("acme", "k", {{"Idempotency-Key", "k9"}});
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("Idempotent-Replayed").value_or(""), "true");
    EXPECT_EQ(count("acme").body, R"J({"count":1})J");
}

TEST_F(Leases, ACompactBatchAnsweredAfterItsLeaseLapsedHasAnUnknownOutcome) {
    start(true);
    create("acme");
    lease(500);
    auto r = call("POST", "/t/acme/batch", "{\"query\":\"put notes {title: \\\"b\\\"}\"}\n{\"query\":\"compact\"}\n",
                  {{"Authorization", "Bearer " + D}, {"Fenec-Test-Stall", "land=800"}});
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_TRUE(has(r.body, "\"outcome\":\"unknown\"")) << r.body;
    EXPECT_FALSE(r.header("Fenec-Seq"));
}

}  // namespace
}  // namespace fenec::test::leases_test
