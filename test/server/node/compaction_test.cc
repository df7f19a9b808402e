// test/server/node/compaction_test.cc: compaction in the background (node-http.md §11.4, issue
// 17 item 10) against the real binary. A tenant whose file is past --compact-dead dead is
// rewritten by the node on its own: the file shrinks, every row and the seq are as before, the
// metric counts it and the audit log has its `compact` line. With --compact-dead 0 the file is
// left as it is until a client's `compact`, which the metric counts under trigger="statement".
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "test/server/node/node_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::compaction_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

struct Node {
    explicit Node(std::vector<std::string> more) {
        std::vector<std::string> flags = {"--token", D, "--admin-token", A, "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        process = std::make_unique<NodeProcess>(dir.path(), flags);
        EXPECT_NE(process->port(), 0) << process->first_line();
        client = std::make_unique<Client>(process->port());
    }
    Reply call(std::string_view method, std::string_view target, const std::string& token,
               std::string_view body = {}) {
        auto r = client->request(method, target, body, bearer(token));
        EXPECT_TRUE(r.has_value()) << method << " " << target;
        if (!r || r->closed) client = std::make_unique<Client>(process->port());
        return r.value_or(Reply{});
    }
    Reply query(const std::string& q) {
        return call("POST", "/t/acme/query", D, "{\"query\":\"" + q + "\"}");
    }
    uint64_t file_bytes() const {
        std::error_code ec;
        const auto n = std::filesystem::file_size(dir.path() + "/acme.fenec", ec);
        return ec ? 0 : n;
    }
    std::string metrics() { return call("GET", "/_metrics", A).body; }

    // acme's notes: 1,000 rows of about 200 bytes, each then set twice, so two thirds of the
    // file's document bytes are superseded versions.
    void load_and_rewrite_twice() {
        auto made = call("PUT", "/_admin/tenants/acme", A,
                         R"J({"schema":["create collection notes (title text, year int)"]})J");
        ASSERT_EQ(made.status, 201) << made.body;
        const std::string pad(180, 'x');
        std::string batch;  // NDJSON: a statement a line
        for (int i = 0; i < 1000; ++i) {
            batch += R"({"query":"put notes {title: \")" + pad + std::to_string(i) +
                     R"(\", year: 2000}"})" + "\n";
        }
        auto put = call("POST", "/t/acme/batch", D, batch);
        ASSERT_EQ(put.status, 200) << put.body.substr(0, 300);
        for (int year : {2001, 2002}) {
            auto set = query("set notes {year: " + std::to_string(year) + "} where year >= 0");
            ASSERT_EQ(set.status, 200) << set.body;
        }
    }

    TempDir dir;
    std::unique_ptr<NodeProcess> process;
    std::unique_ptr<Client> client;
};

// The answer's "seq" member.
std::string seq_of(const std::string& body) {
    const size_t at = body.find("\"seq\":");
    if (at == std::string::npos) return "";
    return body.substr(at + 6, body.find_first_of(",}", at) - at - 6);
}

TEST(Compaction, BackgroundCompactsATenantPastItsDeadShare) {
    TempDir logs;
    const std::string audit = logs.path() + "/audit.log";
    Node n({"--compact-dead", "0.3", "--compact-min", "0", "--audit", audit});
    n.load_and_rewrite_twice();
    auto before = n.query("get notes select count(*) where year = 2002");
    ASSERT_EQ(before.status, 200) << before.body;
    const uint64_t grown = n.file_bytes();
    ASSERT_GT(grown, 500'000u);

    // The node compacts on its own, within a check or two (one a second). The compactor counts a
    // compaction once it has returned, a moment after the file was replaced: the count is what
    // is waited for, so the file's size is read after the compaction is over.
    const std::string counted = R"(fenec_compactions_total{trigger="auto",outcome="ok"} 1)";
    ASSERT_TRUE(wait_until([&] { return n.metrics().find(counted) != std::string::npos; }))
        << "no compaction counted; the file is at " << n.file_bytes() << " of " << grown
        << " bytes";
    EXPECT_LT(n.file_bytes(), grown * 6 / 10);
    auto after = n.query("get notes select count(*) where year = 2002");
    ASSERT_EQ(after.status, 200) << after.body;
    EXPECT_NE(after.body.find("1000"), std::string::npos) << after.body;
    EXPECT_EQ(seq_of(after.body), seq_of(before.body)) << "a compaction lands no change";

    const std::string m = n.metrics();
    EXPECT_EQ(m.find("fenec_compaction_reclaimed_bytes_total 0"), std::string::npos) << m;
    std::string text;
    EXPECT_TRUE(wait_until([&] {  // the log is flushed within a second (§13.3)
        text = read_file(audit);
        return text.find(R"("event":"compact")") != std::string::npos;
    })) << text;
    EXPECT_NE(text.find(R"("tenant":"acme","trigger":"auto")"), std::string::npos) << text;

    // Compacted, it is not rewritten again while nothing more dies: two more looks pass.
    const uint64_t compacted = n.file_bytes();
    const uint64_t checks = metric_value(n.metrics(), "fenec_compaction_checks_total");
    ASSERT_TRUE(wait_until(
        [&] { return metric_value(n.metrics(), "fenec_compaction_checks_total") >= checks + 2; }));
    EXPECT_EQ(n.file_bytes(), compacted);
    EXPECT_NE(n.metrics().find(R"(fenec_compactions_total{trigger="auto",outcome="ok"} 1)"),
              std::string::npos);
}

TEST(Compaction, OffLeavesTheFileToTheStatement) {
    Node n({"--compact-dead", "0", "--compact-min", "0"});
    n.load_and_rewrite_twice();
    const uint64_t grown = n.file_bytes();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a check or more: none may run
    EXPECT_EQ(n.file_bytes(), grown);
    const std::string m = n.metrics();
    EXPECT_NE(m.find(R"(fenec_compactions_total{trigger="auto",outcome="ok"} 0)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find(R"(fenec_compactions_total{trigger="auto",outcome="failed"} 0)"),
              std::string::npos)
        << m;

    // With an Idempotency-Key it is refused naming the key (it lands no block a key could
    // record): before, it was "runs alone", which named the statement.
    auto keyed = n.client->request("POST", "/t/acme/query", R"({"query":"compact"})",
                                   {{"Authorization", "Bearer " + D}, {"Idempotency-Key", "c1"}});
    ASSERT_TRUE(keyed);
    EXPECT_EQ(keyed->status, 400) << keyed->body;
    EXPECT_NE(keyed->body.find("takes no Idempotency-Key"), std::string::npos) << keyed->body;
    EXPECT_EQ(n.file_bytes(), grown);

    auto compact = n.query("compact");
    ASSERT_EQ(compact.status, 200) << compact.body;
    EXPECT_LT(n.file_bytes(), grown * 6 / 10);
    EXPECT_NE(n.metrics().find(R"(fenec_compactions_total{trigger="statement",outcome="ok"} 1)"),
              std::string::npos);
}

}  // namespace
}  // namespace fenec::test::compaction_test
