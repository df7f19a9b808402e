// test/shard/node_calls_test.cc: the router's admin calls to a node (shard/node_calls.h; router.md
// §13, §9.5, node-http.md §8.6–§8.8): the answers' shapes read on their own (§9.5's table of
// grant answers, a promotion refused for its lineage or fenced by a term, a survey with a copy
// following another node), then the calls made in process against real fenec-node processes —
// hello, create, follow, the survey seeing the follower, quota, a grant to a node with and
// without --lease, a promotion refused for another lineage and then made.
#include "shard/node_calls.h"

#include <gtest/gtest.h>

#include "shard/upstream.h"
#include "test/shard/cluster_fixture.h"

namespace fenec::test::node_calls_test {
namespace {

using shard::CopyInfo;
using shard::GrantReply;
using shard::NodeRow;
namespace answers = shard::node_answers;

TEST(NodeAnswers, GrantAnswersByTheTable) {
    GrantReply g = answers::read_grant(
        200,
        R"({"node":"n1","grant":5,"took":true,"ran":true,"left_ms":4870,"list":4,"tenants":2})");
    EXPECT_EQ(g.kind, GrantReply::Kind::taken);
    EXPECT_TRUE(g.took);
    EXPECT_TRUE(g.ran);
    EXPECT_EQ(g.list, 4u);
    g = answers::read_grant(200, R"({"grant":6,"took":true,"ran":false,"left_ms":0,"list":6})");
    EXPECT_EQ(g.kind, GrantReply::Kind::taken);
    EXPECT_TRUE(g.took) << "taken for its list";
    EXPECT_FALSE(g.ran) << "and no lease";
    g = answers::read_grant(200, R"({"grant":6,"took":false,"ran":false,"list":null})");
    EXPECT_EQ(g.kind, GrantReply::Kind::taken);
    EXPECT_FALSE(g.took);
    EXPECT_FALSE(g.list.has_value());
    // A 200 lacking took and ran: a node that takes no lease.
    EXPECT_EQ(answers::read_grant(200, R"({"ok":true})").kind, GrantReply::Kind::takes_none);
    g = answers::read_grant(
        409, R"({"error":"fenced","holder":{"authority":"9c1e/eu","term":4,"history":null}})");
    EXPECT_EQ(g.kind, GrantReply::Kind::fenced);
    EXPECT_EQ(g.holder, "authority `9c1e/eu` at term 4");
    EXPECT_EQ(answers::read_grant(409, R"({"error":"no","takes_leases":false})").kind,
              GrantReply::Kind::takes_none);
    EXPECT_EQ(answers::read_grant(409, R"({"error":"other"})").kind, GrantReply::Kind::silent);
    EXPECT_EQ(answers::read_grant(503, R"({"error":"busy"})").kind, GrantReply::Kind::silent);
    EXPECT_EQ(answers::read_grant(200, "not json").kind, GrantReply::Kind::silent);
}

TEST(NodeAnswers, PromoteAnswers) {
    shard::PromoteReply r;
    r.answered = true;
    r.status = 200;
    r.body = R"({"promoted":"acme","lineage":"aa","history":"bb","seq":12,"forked":true})";
    answers::read_promote(r);
    EXPECT_EQ(r.lineage, "aa");
    EXPECT_EQ(r.history, "bb");
    EXPECT_EQ(r.seq, 12u);
    EXPECT_TRUE(r.forked);
    shard::PromoteReply refused;
    refused.answered = true;
    refused.status = 409;
    refused.body = R"({"error":"another lineage","lineage":"cc"})";
    answers::read_promote(refused);
    EXPECT_EQ(refused.other_lineage, "cc");
    EXPECT_TRUE(refused.holder.empty());
    shard::PromoteReply fenced;
    fenced.answered = true;
    fenced.status = 409;
    fenced.body = R"({"error":"fenced","holder":{"authority":"x/global","term":2,"history":"dd"}})";
    answers::read_promote(fenced);
    EXPECT_EQ(fenced.holder, "authority `x/global` at term 2");
    EXPECT_TRUE(fenced.other_lineage.empty());
}

TEST(NodeAnswers, SurveyReadsEveryCopy) {
    shard::SurveyReply s;
    s.answered = true;
    s.status = 200;
    s.body = R"([{"name":"b","bytes":9,"role":"replica","open":true,"frozen":false,
        "lineage":"l1","history":"h2","forks":[{"history":"h1","at":0},{"history":"h2","at":4}],
        "following":{"from":"http://127.0.0.1:9","told":3,"heard":{"history":"h2","seq":4,"at":1}}},
      {"name":"a","bytes":1,"role":"primary","open":false,"frozen":true,
        "lineage":null,"history":null,"forks":null,"following":null}])";
    answers::read_tenants(s);
    ASSERT_EQ(s.copies.size(), 2u);
    const CopyInfo* b = s.find("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->role, "replica");
    EXPECT_EQ(b->lineage, "l1");
    EXPECT_EQ(b->forks, (std::vector<std::string>{"h1", "h2"}));
    ASSERT_TRUE(b->following.has_value());
    EXPECT_EQ(b->following->from, "http://127.0.0.1:9");
    EXPECT_EQ(b->following->told, 3u);
    EXPECT_TRUE(b->following->heard);
    const CopyInfo* a = s.find("a");
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(a->frozen);
    EXPECT_TRUE(a->lineage.empty());
    EXPECT_FALSE(a->following.has_value());
    EXPECT_EQ(s.find("c"), nullptr);
}

TEST(NodeAnswers, QuotaBodyNamesTheLimitsSet) {
    shard::Quota q;
    q.limits[1] = 5;   // rows
    q.limits[5] = 10;  // bytes_per_s
    EXPECT_EQ(shard::quota_body(q), R"({"rows":5,"bytes_per_s":10})");
    EXPECT_EQ(shard::quota_body(std::nullopt), "{}");
}

// The calls themselves, in process, against two nodes sharing a replication token and a third
// started with --lease.
class NodeCallsLive : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        nodes_ = new SharedNodes();
        nodes_->start(0);
        nodes_->start(1);
    }
    static void TearDownTestSuite() {
        delete nodes_;
        nodes_ = nullptr;
    }
    void SetUp() override {
        shard::UpstreamOptions o;
        o.timeout_ms = 5000;
        std::string error;
        upstream_ = shard::Upstream::create(o, error);
        ASSERT_TRUE(upstream_) << error;
        calls_ = std::make_unique<shard::NodeCalls>(*upstream_);
    }
    void TearDown() override { upstream_->stop(); }
    static NodeRow row(int i) {
        NodeRow n;
        n.name = "n" + std::to_string(i + 1);
        n.addr = "127.0.0.1:" + std::to_string(nodes_->port(i));
        n.token = node_admin_token(i);
        return n;
    }

    static inline SharedNodes* nodes_ = nullptr;
    std::unique_ptr<shard::Upstream> upstream_;
    std::unique_ptr<shard::NodeCalls> calls_;
};

TEST_F(NodeCallsLive, CreateFollowSurveyQuotaPromote) {
    const NodeRow n1 = row(0);
    const NodeRow n2 = row(1);
    shard::HelloReply h = calls_->hello(n1, "t-1");
    ASSERT_TRUE(h.ok()) << h.error;
    EXPECT_EQ(h.lease, "none");
    NodeRow wrong = n1;
    wrong.token = "not-it";
    h = calls_->hello(wrong, "t-2");
    EXPECT_EQ(h.status, 401);
    EXPECT_EQ(h.said(wrong), "node `n1` (" + n1.addr + ") answered 401: it refused the token");

    shard::CreateReply made = calls_->create(
        n1, "calls", std::string(R"J(["create collection notes (title text)"])J"), "t-3");
    ASSERT_EQ(made.status, 201) << made.body;
    ASSERT_EQ(made.lineage.size(), 16u) << made.body;
    EXPECT_EQ(calls_->create(n1, "calls", std::nullopt, "t-4").status, 409);

    shard::FollowWire f;
    f.from = "http://" + n1.addr;
    f.lineage = made.lineage;
    f.authority = "0123456789abcdef/global";
    f.term = 0;
    f.wait_ms = 3000;
    shard::FollowReply followed = calls_->follow(n2, "calls", f, "t-5");
    ASSERT_EQ(followed.status, 200) << followed.body;
    EXPECT_TRUE(followed.heard) << followed.body;
    EXPECT_EQ(followed.told, 1u);

    shard::SurveyReply s = calls_->tenants(n2, true, "t-6");
    ASSERT_EQ(s.status, 200) << s.body;
    const CopyInfo* c = s.find("calls");
    ASSERT_NE(c, nullptr) << s.body;
    EXPECT_EQ(c->role, "replica") << s.body;
    EXPECT_EQ(c->lineage, made.lineage);
    ASSERT_TRUE(c->following.has_value()) << s.body;
    EXPECT_EQ(c->following->from, f.from);
    EXPECT_TRUE(c->following->heard);

    shard::Quota q;
    q.limits[0] = 1 << 20;
    EXPECT_TRUE(calls_->put_quota(n2, "calls", q, "t-7").ok());
    shard::NodeAnswer got = calls_->get_quota(n2, "calls", "t-8");
    ASSERT_TRUE(got.ok()) << got.body;
    EXPECT_NE(got.body.find(R"("quota":{"bytes":1048576})"), std::string::npos) << got.body;

    shard::PromoteWire p;
    p.lineage = "0000000000000bad";
    p.authority = f.authority;
    p.term = 0;
    shard::PromoteReply refused = calls_->promote(n2, "calls", p, "t-9");
    EXPECT_EQ(refused.status, 409) << refused.body;
    EXPECT_EQ(refused.other_lineage, made.lineage) << refused.body;
    p.lineage = made.lineage;
    shard::PromoteReply promoted = calls_->promote(n2, "calls", p, "t-10");
    ASSERT_EQ(promoted.status, 200) << promoted.body;
    EXPECT_TRUE(promoted.forked);
    EXPECT_EQ(promoted.lineage, made.lineage);
    EXPECT_EQ(promoted.history.size(), 16u);
    // A lower term from the same authority is fenced, naming the holder.
    p.term = 0;
    f.term = 2;
    f.wait_ms = 0;  // calls2 is on no primary: the follow is recorded, and raises the term
    ASSERT_EQ(calls_->follow(n2, "calls2", f, "t-11").status, 200);
    shard::PromoteReply fenced = calls_->promote(n2, "calls", p, "t-12");
    EXPECT_EQ(fenced.status, 409) << fenced.body;
    EXPECT_EQ(fenced.holder, "authority `0123456789abcdef/global` at term 2") << fenced.body;

    EXPECT_TRUE(calls_->remove(n2, "calls", "t-13").gone());
    EXPECT_TRUE(calls_->remove(n2, "calls", "t-14").gone()) << "a second delete is a 404";
    EXPECT_EQ(calls_->remove(n2, "calls", "t-15").status, 404);
}

TEST_F(NodeCallsLive, GrantsAreReadAndBounded) {
    const NodeRow n1 = row(0);
    shard::GrantWire g;
    g.authority = "0123456789abcdef/global";
    g.term = 0;
    g.history = "00000000000000aa";
    g.grant = (uint64_t{1} << 32) + 1;
    g.lease_ms = 1000;
    g.list = g.grant;
    g.tenants = std::vector<std::string>{};
    const auto in = [](int ms) {
        return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    };
    // Started without --lease: it takes none.
    EXPECT_EQ(calls_->grant(n1, g, in(1000)).kind, GrantReply::Kind::takes_none);
    // A deadline already past asks nothing.
    EXPECT_EQ(calls_->grant(n1, g, in(-1)).kind, GrantReply::Kind::silent);

    TempDir dir;
    NodeProcess leased(dir.path(), {"--admin-token", "lease-admin", "--token", kData, "--lease",
                                    "--auth-delay", "0"});
    ASSERT_NE(leased.port(), 0) << leased.first_line();
    NodeRow n3;
    n3.name = "n3";
    n3.addr = "127.0.0.1:" + std::to_string(leased.port());
    n3.token = "lease-admin";
    GrantReply first = calls_->grant(n3, g, in(1000));
    EXPECT_EQ(first.kind, GrantReply::Kind::taken);
    EXPECT_TRUE(first.took);
    EXPECT_FALSE(first.ran) << "no acknowledged answer yet: taken for its list alone";
    g.acked = g.grant;
    g.grant += 1;
    GrantReply second = calls_->grant(n3, g, in(1000));
    EXPECT_EQ(second.kind, GrantReply::Kind::taken);
    EXPECT_TRUE(second.ran) << "the first grant's answer acknowledged: a lease runs";
    // A higher term of the same authority is newer than anything held; a lower one after it is
    // fenced, naming the holder.
    g.term = 5;
    g.acked = g.grant;
    g.grant += 1;
    EXPECT_EQ(calls_->grant(n3, g, in(1000)).kind, GrantReply::Kind::taken);
    g.term = 4;
    g.acked = g.grant;
    g.grant += 1;
    GrantReply low = calls_->grant(n3, g, in(1000));
    EXPECT_EQ(low.kind, GrantReply::Kind::fenced);
    EXPECT_EQ(low.holder, "authority `0123456789abcdef/global` at term 5");
}

}  // namespace
}  // namespace fenec::test::node_calls_test
