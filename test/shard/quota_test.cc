// test/shard/quota_test.cc: quotas through the router (router.md §6.4 "Quota", seed 001) against
// three real fenec-node processes shared by the cases, each node asked directly as the oracle:
// a quota set through fenec-shard lands on the primary and its replica and comes off both; a
// replica made later and a move's target are sent it as they are made; a primary that is down
// answers 202 `"taken": false` and takes the quota once it answers again; the refusals.
#include <gtest/gtest.h>

#include "test/shard/cluster_fixture.h"

namespace fenec::test::quota_test {
namespace {

class Quotas : public ClusterTest<3> {
  protected:
    void SetUp() override {
        start_router({"--replicas", "--upstream-timeout", "2"});
        ASSERT_EQ(add(0, "n1").status, 201);
        ASSERT_EQ(add(1, "n2").status, 201);
    }
    // The limits node i keeps for `tenant`: its quota object.
    std::string quota_on(int i, const std::string& tenant) {
        Reply r = node(i, "GET", "/_admin/tenants/" + tenant + "/quota");
        Json j(r.body);
        simdjson::dom::element q;
        if (r.status != 200 || !j.ok || j.doc["quota"].get(q))
            return "status " + std::to_string(r.status);
        return simdjson::minify(q);
    }
};

// Set through the router: the row keeps it and both copies take it; read back through the
// router as the primary answers it; removed from both.
TEST_F(Quotas, LandsOnThePrimaryAndItsReplica) {
    const std::string t = tenant("acme");
    Reply r = create(t, "n1");
    ASSERT_EQ(r.status, 201) << r.body;
    ASSERT_EQ(Json(r.body).text("replica_on"), "n2") << r.body;
    // The adds' repairs, queued, may come after the create and hold the tenant a moment.
    r = shard_past_repair("PUT", "/_shard/tenants/" + t + "/quota", R"({"rows":5,"bytes":null})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, "{\"tenant\":\"" + t + "\",\"quota\":{\"rows\":5},\"taken\":true}");
    EXPECT_EQ(quota_on(0, t), R"({"rows":5})");
    EXPECT_EQ(quota_on(1, t), R"({"rows":5})");
    r = shard("GET", "/_shard/tenants/" + t + "/quota");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(R"("usage":{)"), std::string::npos) << "the node's answer: " << r.body;

    ASSERT_EQ(shard("DELETE", "/_shard/tenants/" + t + "/quota").status, 204);
    EXPECT_EQ(quota_on(0, t), "{}");
    EXPECT_EQ(quota_on(1, t), "{}");
    // The audit log has a line for each change (§15), flushed within a fifth of a second.
    EXPECT_TRUE(eventually([&] {
        const std::string log = read_file(dir_.path() + "/audit.log");
        return log.find(R"("method":"PUT","path":"/_shard/tenants/)" + t +
                        R"(/quota","status":200)") != std::string::npos &&
               log.find(R"("method":"DELETE","path":"/_shard/tenants/)" + t +
                        R"(/quota","status":204)") != std::string::npos;
    })) << read_file(dir_.path() + "/audit.log");
}

// A copy made after the quota is sent it as it is made: a replica attached by a repair, and a
// move's target before its flip.
TEST_F(Quotas, CopiesMadeLaterAreSentIt) {
    ASSERT_EQ(shard("DELETE", "/_shard/nodes/n2").status, 200);
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "n1").status, 201);
    ASSERT_EQ(shard("PUT", "/_shard/tenants/" + t + "/quota", R"({"streams":3})").status, 200);
    ASSERT_EQ(add(1, "n2").status, 201);  // a node added: the repair gives acme its replica
    // Recorded once attached: the copy told to follow, sent the quota, then its row (§8.2). A
    // copy already following may not have been sent it yet.
    EXPECT_TRUE(eventually([&] {
        return Json(shard("GET", "/_shard/tenants/" + t).body).text("replica") == "n2";
    })) << shard("GET", "/_shard/tenants/" + t).body;
    EXPECT_TRUE(follows(1, t, 0)) << copy_on(1, t).body;
    EXPECT_EQ(quota_on(1, t), R"({"streams":3})");

    ASSERT_EQ(add(2, "n3").status, 201);
    // n3's arrival starts a repair, which may hold the tenant when the move comes.
    Reply r = shard_past_repair("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n3"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(quota_on(2, t), R"({"streams":3})");
    EXPECT_EQ(Json(r.body).text("replica_on"), "n2") << "the replica went with it: " << r.body;
    EXPECT_EQ(quota_on(1, t), R"({"streams":3})");
}

// A primary down when the quota is set: 202 with why, the row keeping it; once the node
// answers again (here: the repair's survey), it is sent again and taken.
TEST_F(Quotas, NotTakenByAStoppedPrimaryIsTakenOnceItIsBack) {
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "n1").status, 201);
    const uint16_t port = nodes_->port(0);
    nodes_->procs[0]->kill(SIGKILL);
    Reply r = shard("PUT", "/_shard/tenants/" + t + "/quota", R"({"requests":7})");
    ASSERT_EQ(r.status, 202) << r.body;
    Json j(r.body);
    EXPECT_FALSE(j.boolean("taken")) << r.body;
    EXPECT_NE(j.text("why").find("n1"), std::string::npos) << r.body;
    EXPECT_EQ(quota_on(1, t), R"({"requests":7})") << "the replica took it";

    nodes_->start(0, port);
    ASSERT_EQ(nodes_->port(0), port);
    EXPECT_NE(quota_on(0, t), R"({"requests":7})") << "not sent before it answered";
    r = shard("POST", "/_shard/replicas");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(eventually([&] { return quota_on(0, t) == R"({"requests":7})"; }))
        << quota_on(0, t);

    // Its removal with the primary down again: 202 as the PUT's, not a 204 that says it is done.
    nodes_->procs[0]->kill(SIGKILL);
    r = shard("DELETE", "/_shard/tenants/" + t + "/quota");
    ASSERT_EQ(r.status, 202) << r.body;
    Json removed(r.body);
    EXPECT_FALSE(removed.boolean("taken")) << r.body;
    EXPECT_NE(removed.text("why").find("n1"), std::string::npos) << r.body;
    EXPECT_NE(quota_on(1, t), R"({"requests":7})") << "the replica took the removal";
    nodes_->start(0, port);
    ASSERT_EQ(nodes_->port(0), port);
}

TEST_F(Quotas, Refusals) {
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "n1").status, 201);
    EXPECT_EQ(shard("PUT", "/_shard/tenants/" + t + "/quota", R"({"rows":-1})").status, 400);
    EXPECT_EQ(shard("PUT", "/_shard/tenants/" + t + "/quota", R"({"rows":1.5})").status, 400);
    EXPECT_EQ(shard("PUT", "/_shard/tenants/" + t + "/quota", R"({"memory":1})").status, 400);
    EXPECT_EQ(shard("PUT", "/_shard/tenants/" + t + "/quota", "[]").status, 400);
    EXPECT_EQ(shard("PUT", "/_shard/tenants/nosuch/quota", R"({"rows":1})").status, 404);
    EXPECT_EQ(shard("GET", "/_shard/tenants/nosuch/quota").status, 404);
    EXPECT_EQ(shard("DELETE", "/_shard/tenants/nosuch/quota").status, 404);
    EXPECT_EQ(shard("POST", "/_shard/tenants/" + t + "/quota").status, 405);
    EXPECT_EQ(quota_on(0, t), "{}") << "nothing refused reached the node";
}

}  // namespace
}  // namespace fenec::test::quota_test
