// test/server/node/fair_share_test.cc: proves that one tenant cannot take the node's worker pool
// from another (issue 17; server/runtime/workers.h, Node::submit): with both workers held by
// tenant acme's stalled writes and four more of acme's queued, tenant globex's read is answered
// when the first worker frees, before acme's queued writes. A FIFO pool answers it last. Uses
// the `Fenec-Test-Stall: land=` hook of fenec-node-hooks; the order of answers is the evidence.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test/server/node/node_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::fair_share_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

// A value of the node's /_metrics, 0 when absent.
uint64_t metric(uint16_t port, const std::string& key) {
    Client c(port);
    auto m = c.request("GET", "/_metrics", {}, bearer(A));
    if (!m) return 0;
    const size_t at = m->body.find("\n" + key + " ");
    return at == std::string::npos ? 0 : std::stoull(m->body.substr(at + key.size() + 2));
}

uint64_t seq_of(uint16_t port, const std::string& tenant) {
    Client c(port);
    // A point read: answered on the loop, never queued behind the workers.
    auto r = c.request("POST", "/t/" + tenant + "/query",
                       R"J({"query":"get notes where _id = 1"})J", bearer(D));
    return r ? std::stoull(r->header("Fenec-Seq").value_or("0")) : 0;
}

TEST(Workers, OneTenantDoesNotStarveAnother) {
    TempDir dir;
    // --workers 1: two pool threads.
    NodeProcess node(dir.path(), {"--token", D, "--admin-token", A, "--auth-delay", "0"});
    ASSERT_NE(node.port(), 0) << node.first_line();
    const uint16_t port = node.port();
    {
        Client c(port);
        for (const char* t : {"acme", "globex"}) {
            auto r = c.request("PUT", std::string("/_admin/tenants/") + t,
                               R"J({"schema":["create collection notes (title text, year int)"]})J",
                               bearer(A));
            ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
        }
    }
    const uint64_t s = seq_of(port, "acme");
    std::atomic<int> acme_answered{0};
    auto stalled_write = [&] {
        Client c(port, 30'000);
        auto h = bearer(D);
        h.emplace_back("Fenec-Test-Stall", "land=500");
        auto r = c.request("POST", "/t/acme/query", R"J({"query":"put notes {year: 1}"})J", h);
        EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
        acme_answered++;
    };
    std::vector<std::thread> writers;
    for (int i = 0; i < 2; ++i) writers.emplace_back(stalled_write);
    ASSERT_TRUE(wait_until([&] { return seq_of(port, "acme") == s + 2; }));  // both workers held
    for (int i = 0; i < 4; ++i) writers.emplace_back(stalled_write);
    ASSERT_TRUE(wait_until([&] { return metric(port, "fenec_worker_jobs_waiting") == 4; }));
    ASSERT_EQ(acme_answered.load(), 0);
    Client b(port, 30'000);
    auto r = b.request("POST", "/t/globex/query", R"J({"query":"get notes where year > 0"})J",
                       bearer(D));
    const int acme_before_b = acme_answered.load();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200) << r->body;
    // Fair: the first worker freed (one acme write answered, or two) serves globex next, half a
    // second before acme's next answers. FIFO runs acme's four queued writes first: globex waits
    // for two rounds of stalls, and at least four acme writes are answered before it.
    EXPECT_LE(acme_before_b, 2);
    for (std::thread& w : writers) w.join();
    EXPECT_EQ(acme_answered.load(), 6);
}

}  // namespace
}  // namespace fenec::test::fair_share_test
