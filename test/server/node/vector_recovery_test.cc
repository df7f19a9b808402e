// test/server/node/vector_recovery_test.cc: a vector tenant across a crash, against the real
// binary (engine.md §6.3, docs/http-node.md "Compaction in the background"). Rows are written
// after the file's last graph record (a `compact` wrote it), then the node is killed, so nothing
// writes a newer one. The next open restores the record and applies the writes since: `near`
// finds every row as it stands and no deleted one, and fenec_vector_graphs_opened_total says
// `caught_up`. After a clean stop (which writes a current record) the open says `restored`.
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "test/server/node/node_fixture.h"

namespace fenec::test::vector_recovery_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

// Row i's vector: distinct for every i (its first component), spread over the others.
std::string vec(int i) {
    return "[" + std::to_string(i) + "," + std::to_string((i * 37) % 101) + "," +
           std::to_string((i * 53) % 97) + "," + std::to_string((i * 7) % 89) + "]";
}

// Rows [from, to) as a `put` parameter, row i holding `vec(i + shift)`.
std::string rows(int from, int to, int shift = 0) {
    std::string out = "[[";
    for (int i = from; i < to; ++i) {
        if (i > from) out += ",";
        out += "{\"_id\":" + std::to_string(i) + ",\"tag\":" + std::to_string(i) +
               ",\"e\":" + vec(i + shift) + "}";
    }
    return out + "]]";
}

class VectorRecovery : public ::testing::Test {
  protected:
    void start() {
        node_.reset();
        node_ = std::make_unique<NodeProcess>(
            dir_.path(),
            std::vector<std::string>{"--token", D, "--admin-token", A, "--auth-delay", "0"});
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        client_ = std::make_unique<Client>(node_->port());
    }
    Reply send(const std::string& token, std::string_view method, std::string_view target,
               std::string_view body = {}) {
        auto r = client_->request(method, target, body, bearer(token));
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    Reply query(const std::string& q, const std::string& params = "[]") {
        return send(D, "POST", "/t/acme/query",
                    "{\"query\":\"" + q + "\",\"params\":" + params + "}");
    }
    // The id `near` ranks first for `v`, through the graph (the field's own ef_search).
    std::string nearest(const std::string& v) {
        const Reply r = query("get items select _id near e $1 limit 1", "[" + v + "]");
        EXPECT_EQ(r.status, 200) << r.body;
        const size_t at = r.body.find("\"_id\":");  // {"rows":[{"_id":7,"_score":0.0}]}
        if (at == std::string::npos) return r.body;
        return r.body.substr(at + 6, r.body.find_first_not_of("0123456789", at + 6) - at - 6);
    }
    uint64_t graphs_opened(const std::string& how) {
        const Reply m = send(A, "GET", "/_metrics");
        return metric_value(m.body, "fenec_vector_graphs_opened_total{how=\"" + how + "\"}");
    }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

TEST_F(VectorRecovery, ACrashAfterTheGraphRecordLosesNoRowAndRebuildsNoGraph) {
    start();
    // Past 2 x m x ef_search = 256 rows the field keeps a graph, and `near` asks it.
    auto made = send(
        A, "PUT", "/_admin/tenants/acme",
        R"J({"schema":["create collection items (tag int @hash, e vector<4> @hnsw(l2, m = 8, ef_search = 16))"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    ASSERT_EQ(query("put items $1", rows(1, 401)).status, 200);
    ASSERT_EQ(query("compact").status, 200);  // the file's graph record, current
    // After it: 40 new rows, 10 vectors changed, 2 rows deleted.
    ASSERT_EQ(query("put items $1", rows(401, 441)).status, 200);
    ASSERT_EQ(query("put items $1", rows(11, 21, 1000)).status, 200);
    ASSERT_EQ(query("del items where tag = 3 or tag = 4").status, 200);
    ASSERT_EQ(node_->kill(SIGKILL), 128 + SIGKILL);

    start();
    for (int i = 1; i < 441; ++i) {
        if (i == 3 || i == 4) continue;
        const bool changed = i >= 11 && i < 21;
        ASSERT_EQ(nearest(vec(changed ? i + 1000 : i)), std::to_string(i)) << "row " << i;
    }
    EXPECT_NE(nearest(vec(3)), "3");
    EXPECT_NE(nearest(vec(4)), "4");
    EXPECT_NE(nearest(vec(15)), "15");  // its old vector is no longer its
    EXPECT_EQ(graphs_opened("caught_up"), 1u);
    EXPECT_EQ(graphs_opened("rebuilt"), 0u);

    // A clean stop writes a current record: the next open has nothing to apply.
    ASSERT_EQ(node_->kill(SIGTERM), 0);
    start();
    EXPECT_EQ(nearest(vec(430)), "430");
    EXPECT_EQ(graphs_opened("restored"), 1u);
    EXPECT_EQ(graphs_opened("caught_up"), 0u);
    EXPECT_EQ(graphs_opened("rebuilt"), 0u);
}

}  // namespace
}  // namespace fenec::test::vector_recovery_test
