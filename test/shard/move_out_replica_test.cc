// test/shard/move_out_replica_test.cc: a tenant's own replica in a region the global directory
// keeps itself (router.md §8.2, §11.7), through real processes: the global router G under
// --replicas keeping n1 and n3 (nodes 0 and 2, region eu), us's router U keeping n2 (node 1).
// It proves that a move out of eu leaves no replica recorded in G's directory, as it leaves no
// copy on n3, and that an import into eu undone (U's release failed on purpose, the
// fenec-shard-hooks build's FENEC_TEST_HANDOFF_FAIL) leaves none either: a replica row naming a
// copy that is gone would count against its node (`replicas` in GET /_shard/nodes/<n>, a node
// holding anything keeps its region) and be the copy a failover looked for. The oracles: G's
// answers about its nodes and tenants, and the nodes asked directly.
#include <gtest/gtest.h>

#include <cstdlib>

#include "test/shard/standby_fixture.h"

namespace fenec::test::move_out_replica_test {
namespace {

constexpr int kN1 = 0, kN2 = 1, kN3 = 2;

class MoveOutReplica : public ClusterTest<3> {
  protected:
    void SetUp() override {
        start_router({"--replication-token", kReplication, "--replicas"});
        ASSERT_EQ(add(kN1, "n1", "eu").status, 201);
        ASSERT_EQ(add(kN3, "n3", "eu").status, 201);
        ASSERT_NO_FATAL_FAILURE(start_us());
        Reply r =
            shard("PUT", "/_shard/regions/us", "{\"routers\":[\"" + url_of(us_port_) + "\"]}");
        ASSERT_EQ(r.status, 201) << r.body;
        Client c(us_port_);
        Reply n2 =
            c.request("PUT", "/_shard/nodes/n2",
                      "{\"addr\":\"127.0.0.1:" + std::to_string(nodes_->port(kN2)) +
                          "\",\"token\":\"" + node_admin_token(kN2) + "\",\"region\":\"us\"}",
                      bearer(kRoot))
                .value_or(Reply{});
        ASSERT_EQ(n2.status, 201) << n2.body;
    }
    // U, on its port once it has one; `fail`: the handoff step it refuses.
    void start_us(const std::string& fail = "") {
        if (!fail.empty()) ::setenv("FENEC_TEST_HANDOFF_FAIL", fail.c_str(), 1);
        std::vector<std::string> flags = {"--token",
                                          kRoot,
                                          "--directory",
                                          dir_.file("us.fenec"),
                                          "--region",
                                          "us",
                                          "--global",
                                          url_of(router_->port()),
                                          "--replication-token",
                                          kReplication,
                                          "--auth-delay",
                                          "0"};
        if (us_port_) {
            flags.insert(flags.end(), {"--listen", "127.0.0.1:" + std::to_string(us_port_)});
        }
        us_.reset();
        us_ = std::make_unique<RouterProcess>(flags, dir_.file("us.err"));
        ::unsetenv("FENEC_TEST_HANDOFF_FAIL");
        ASSERT_NE(us_->port(), 0) << read_file(dir_.file("us.err"));
        if (us_port_) {
            ASSERT_EQ(us_->port(), us_port_);
        }
        us_port_ = us_->port();
    }
    // G's count of the copies `node` keeps of other nodes' tenants.
    int64_t replicas_on(const std::string& node) {
        Reply r = shard("GET", "/_shard/nodes/" + node);
        Json j(r.body);
        int64_t n = -1;
        return j.ok && !j.doc["replicas"].get_int64().get(n) ? n : -1;
    }

    uint16_t us_port_ = 0;
    std::unique_ptr<RouterProcess> us_;
};

TEST_F(MoveOutReplica, AMoveOutAndAnImportUndoneLeaveNoReplicaRecorded) {
    const std::string t = tenant("acme");
    Reply made = shard("PUT", "/_shard/tenants/" + t,
                       R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    ASSERT_EQ(Json(made.body).text("replica_on"), "n3") << made.body;
    EXPECT_EQ(replicas_on("n3"), 1);

    // Out of eu: the copy on n3 deleted, and its record with it.
    Reply out = shard("POST", "/_shard/tenants/" + t + "/move", R"({"region":"us"})");
    ASSERT_EQ(out.status, 200) << out.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), "@us");
    EXPECT_EQ(copy_on(kN1, t).status, 404);
    EXPECT_EQ(copy_on(kN3, t).status, 404);
    EXPECT_EQ(replicas_on("n3"), 0) << shard("GET", "/_shard/nodes/n3").body;
    EXPECT_EQ(replicas_on("n1"), 0) << shard("GET", "/_shard/nodes/n1").body;

    // Back into eu with U refusing its release: G's import (on a node of eu, its replica placed)
    // undone, nothing of it left recorded.
    ASSERT_NO_FATAL_FAILURE(start_us("release"));
    Reply back = shard("POST", "/_shard/tenants/" + t + "/move", R"({"region":"eu"})");
    EXPECT_GE(back.status, 500) << back.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), "@us");
    EXPECT_EQ(copy_on(kN1, t).status, 404);
    EXPECT_EQ(copy_on(kN3, t).status, 404);
    EXPECT_EQ(replicas_on("n1"), 0) << shard("GET", "/_shard/nodes/n1").body;
    EXPECT_EQ(replicas_on("n3"), 0) << shard("GET", "/_shard/nodes/n3").body;
    EXPECT_EQ(copy_on(kN2, t).status, 200) << "the tenant where it was";

    // And the region's nodes, holding nothing, may change region.
    for (const char* n : {"n1", "n3"}) {
        Reply moved_node = shard("PUT", std::string("/_shard/nodes/") + n, R"({"region":"ap"})");
        EXPECT_EQ(moved_node.status, 200) << n << ": " << moved_node.body;
    }
}

}  // namespace
}  // namespace fenec::test::move_out_replica_test
