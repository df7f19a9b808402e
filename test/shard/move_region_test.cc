// test/shard/move_region_test.cc: placing and moving tenants by region (router.md §6.4 step 2,
// §7.1, §7.2 steps 8 and 9, §11.1; seed 002; §18 cases 31–33, 46, 47) with four real
// fenec-node processes shared by the cases: eu1 (eu, fra), eu2 (eu, ams), us1 (us, iad) and
// us2 (us, pdx). A create naming neither region nor node goes to --default-region's node with
// the fewest bytes; a region with no node is 404. A move naming `region` alone goes to that
// region's node with the fewest bytes, one naming `to` and `region` needs them to agree, one to
// another region without naming it is refused with the region. Across regions the tenant's own
// replica is taken off the region it left and placed again in the new one (or its new node's
// standby keeps its copy), and a writer going on through the move loses nothing it was answered.
//
// Which node has the fewest bytes is set by the test, not left to the leftovers of earlier cases:
// us1 is made heavier than us2 by a ballast tenant created on the node itself (the router knows
// nothing of it, so it gets no replica), and each node's `GET /_admin/hello` is the oracle.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "test/shard/cluster_fixture.h"

namespace fenec::test::move_region_test {
namespace {

constexpr int kEu1 = 0, kEu2 = 1, kUs1 = 2, kUs2 = 3;

// The router's environment for one start: FENEC_TEST_MOVE_STALL set while it forks, then cleared.
class MoveRegion : public ClusterTest<4> {
  protected:
    // Every node registered, in its region and zone. Fatal failures: call it under
    // ASSERT_NO_FATAL_FAILURE.
    void add_all() {
        ASSERT_EQ(add(kEu1, "eu1", "eu", "fra").status, 201);
        ASSERT_EQ(add(kEu2, "eu2", "eu", "ams").status, 201);
        ASSERT_EQ(add(kUs1, "us1", "us", "iad").status, 201);
        ASSERT_EQ(add(kUs2, "us2", "us", "pdx").status, 201);
    }
    // Node i's bytes on disk, as it tells the router (GET /_admin/hello).
    uint64_t disk_bytes(int i) {
        Reply r = node(i, "GET", "/_admin/hello");
        Json j(r.body);
        uint64_t bytes = 0;
        EXPECT_TRUE(j.ok && !j.doc["disk_bytes"].get_uint64().get(bytes)) << r.body;
        return bytes;
    }
    // Node `heavy` made to hold at least 256 KiB more than node `light`: rows written into a
    // tenant of this case created on `heavy` itself.
    void make_heavier(int heavy, int light) {
        const std::string ballast = tenant("ballast");
        Reply r = node(heavy, "PUT", "/_admin/tenants/" + ballast,
                       R"J({"schema":["create collection junk (pad text)"]})J");
        ASSERT_TRUE(r.status == 201 || r.status == 200) << r.body;
        std::string rows = "[";
        for (int i = 0; i < 64; ++i) {
            rows += std::string(i ? "," : "") + "{\"pad\":\"" + std::to_string(i) +
                    std::string(4000, 'x') + "\"}";
        }
        rows += "]";
        const std::string body = "{\"query\":\"insert junk $1\",\"params\":[" + rows + "]}";
        for (int round = 0; disk_bytes(heavy) < disk_bytes(light) + (256u << 10); ++round) {
            ASSERT_LT(round, 200) << "node " << heavy << " did not grow";
            r = node(heavy, "POST", "/t/" + ballast + "/query", body, kData);
            ASSERT_EQ(r.status, 200) << r.body;
        }
    }
    Reply move(const std::string& t, const std::string& body) {
        return shard("POST", "/_shard/tenants/" + t + "/move", body);
    }
    Reply write(const std::string& t, const std::string& title) {
        return data("POST", "/t/" + t + "/c/notes", "{\"title\":\"" + title + "\"}");
    }
};

// Case 32: with --default-region us, a create naming neither region nor node lands on us's node
// with the fewest bytes (us2: us1 is made the heavier, so neither the first name nor another
// region's node would do); a region or a node named still decides.
TEST_F(MoveRegion, DefaultRegionPlacesACreateNamingNeither) {
    start_router({"--default-region", "us"});
    ASSERT_NO_FATAL_FAILURE(add_all());
    ASSERT_NO_FATAL_FAILURE(make_heavier(kUs1, kUs2));
    const std::string t = tenant("acme");
    Reply r = shard("PUT", "/_shard/tenants/" + t, "{}");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(Json(r.body).text("node"), "us2") << r.body;
    EXPECT_EQ(Json(r.body).text("region"), "us") << r.body;
    EXPECT_EQ(copy_on(kUs2, t).status, 200);

    const std::string in_eu = tenant("beta");
    r = shard("PUT", "/_shard/tenants/" + in_eu, R"({"region":"eu"})");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(Json(r.body).text("region"), "eu") << r.body;
    const std::string on_us1 = tenant("gamma");
    r = shard("PUT", "/_shard/tenants/" + on_us1, R"({"node":"us1"})");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(Json(r.body).text("node"), "us1") << r.body;
}

// Cases 31 and 33: a --default-region with no node is 404 naming it, as a region named with no
// node is; a bad region name is 400; a node and a region that disagree are 409. Nothing is made.
TEST_F(MoveRegion, RegionWithNoNodeIs404) {
    start_router({"--default-region", "ap"});
    ASSERT_NO_FATAL_FAILURE(add_all());
    const std::string t = tenant("acme");
    Reply r = shard("PUT", "/_shard/tenants/" + t, "{}");
    EXPECT_EQ(r.status, 404) << r.body;
    EXPECT_NE(r.body.find("no region `ap`"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("--default-region"), std::string::npos) << r.body;
    r = shard("PUT", "/_shard/tenants/" + t, R"({"region":"xx"})");
    EXPECT_EQ(r.status, 404) << r.body;
    EXPECT_NE(r.body.find("no region `xx`"), std::string::npos) << r.body;
    r = shard("PUT", "/_shard/tenants/" + t, R"({"region":"Eu"})");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("field `region`"), std::string::npos) << r.body;
    r = shard("PUT", "/_shard/tenants/" + t, R"({"region":"eu","node":"us1"})");
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_EQ(shard("GET", "/_shard/tenants/" + t).status, 404);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(copy_on(i, t).status, 404) << "node " << i;
    r = shard("PUT", "/_shard/tenants/" + t, R"({"region":"us"})");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(Json(r.body).text("region"), "us") << r.body;
}

// Case 47 without replicas: `{"region":"us"}` moves the tenant to us's node with the fewest
// bytes (us2, us1 being made the heavier); the answer names the region it is in now, the
// source's copy is gone, and the tenant is read and written there through the router.
TEST_F(MoveRegion, RegionAlonePicksTheNodeWithTheFewestBytes) {
    start_router();
    ASSERT_NO_FATAL_FAILURE(add_all());
    ASSERT_NO_FATAL_FAILURE(make_heavier(kUs1, kUs2));
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "eu1").status, 201);
    ASSERT_EQ(write(t, "before").status, 201);

    Reply r = move(t, R"({"region":"us"})");
    ASSERT_EQ(r.status, 200) << r.body;
    Json j(r.body);
    EXPECT_EQ(j.text("from"), "eu1") << r.body;
    EXPECT_EQ(j.text("to"), "us2") << r.body;
    EXPECT_EQ(j.text("region"), "us") << r.body;
    EXPECT_TRUE(j.boolean("source_removed")) << r.body;
    EXPECT_EQ(copy_on(kEu1, t).status, 404);
    EXPECT_EQ(count_on(kUs2, t), R"({"count":1})");
    Reply row = shard("GET", "/_shard/tenants/" + t);
    EXPECT_EQ(Json(row.body).text("node"), "us2") << row.body;
    EXPECT_EQ(Json(row.body).text("region"), "us") << row.body;
    ASSERT_EQ(write(t, "after").status, 201);
    EXPECT_EQ(count_on(kUs2, t), R"({"count":2})");
}

// Case 46 and §7.1's checks of `to` and `region` together: another region's node without its
// region is 409 naming the region; a node and a region that disagree are 409; a region with no
// node is 404, one with no node but the tenant's own 409; each refusal moves nothing. Named
// together and agreeing, the move goes there.
TEST_F(MoveRegion, ToAndRegionMustAgree) {
    start_router();
    ASSERT_EQ(add(kEu1, "eu1", "eu", "fra").status, 201);
    ASSERT_EQ(add(kUs1, "us1", "us", "iad").status, 201);
    const std::string t = tenant("acme");
    ASSERT_EQ(create(t, "eu1").status, 201);
    ASSERT_EQ(write(t, "before").status, 201);

    Reply r = move(t, R"({"to":"us1"})");
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_EQ(Json(r.body).text("region"), "us") << r.body;
    EXPECT_NE(r.body.find(R"(name it with \"region\": \"us\")"), std::string::npos) << r.body;
    r = move(t, R"({"to":"us1","region":"eu"})");
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_NE(r.body.find("node `us1` is in region `us`, not `eu`"), std::string::npos) << r.body;
    r = move(t, R"({"region":"eu"})");
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_NE(r.body.find("no node in region `eu` but `eu1`"), std::string::npos) << r.body;
    r = move(t, R"({"region":"ap"})");
    EXPECT_EQ(r.status, 404) << r.body;
    EXPECT_NE(r.body.find("no region `ap`"), std::string::npos) << r.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), "eu1");
    EXPECT_EQ(copy_on(kUs1, t).status, 404);
    EXPECT_EQ(moves_counted(metrics()), 0) << "a refusal is no move";

    r = move(t, R"({"to":"us1","region":"us"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(r.body).text("to"), "us1") << r.body;
    EXPECT_EQ(Json(r.body).text("region"), "us") << r.body;
    EXPECT_EQ(count_on(kUs1, t), R"({"count":1})");
    EXPECT_EQ(copy_on(kEu1, t).status, 404);
}

// Case 47: acme on eu1 with its replica on eu2, and us1, us2; moved `{"region":"us"}` under
// --replicas: it lands on us2 (the fewer bytes), its replica is placed on us1 and follows us2,
// and no node of eu holds acme any more: a replica kept in eu would carry it back out of us on a
// failover.
TEST_F(MoveRegion, ReplicaIsTakenOffTheRegionLeftAndPlacedInTheNewOne) {
    start_router({"--replicas"});
    ASSERT_NO_FATAL_FAILURE(add_all());
    ASSERT_NO_FATAL_FAILURE(make_heavier(kUs1, kUs2));
    const std::string t = tenant("acme");
    Reply r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    ASSERT_EQ(Json(r.body).text("replica_on"), "eu2") << r.body;
    ASSERT_EQ(write(t, "before").status, 201);
    ASSERT_TRUE(eventually([&] { return count_on(kEu2, t) == R"({"count":1})"; }));

    r = move(t, R"({"region":"us"})");
    ASSERT_EQ(r.status, 200) << r.body;
    Json j(r.body);
    EXPECT_EQ(j.text("to"), "us2") << r.body;
    EXPECT_EQ(j.text("region"), "us") << r.body;
    EXPECT_EQ(j.text("replica_on"), "us1") << r.body;
    EXPECT_EQ(copy_on(kEu1, t).status, 404) << "the source's copy";
    EXPECT_EQ(copy_on(kEu2, t).status, 404) << "the replica left in eu: " << copy_on(kEu2, t).body;
    EXPECT_TRUE(follows(kUs1, t, kUs2)) << copy_on(kUs1, t).body;
    ASSERT_EQ(write(t, "after").status, 201);
    EXPECT_TRUE(eventually([&] { return count_on(kUs1, t) == R"({"count":2})"; }))
        << count_on(kUs1, t);

    Reply row = shard("GET", "/_shard/tenants/" + t);
    EXPECT_EQ(Json(row.body).text("region"), "us") << row.body;
    EXPECT_EQ(Json(row.body).text("replica"), "us1") << row.body;
    EXPECT_EQ(shard("GET", "/_shard/tenants?region=eu").body.find(t), std::string::npos);
    EXPECT_EQ(sample(metrics(), R"(fenec_router_replicas{node="eu2"})"), "0");
}

// §7.2 step 8 across regions: moved onto us1, whose standby is us2, the tenant's copy is the
// standby's, and its own replica in eu is taken off.
TEST_F(MoveRegion, StandbyOfTheNewNodeTakesTheCopyAcrossRegions) {
    start_router({"--replicas"});
    ASSERT_NO_FATAL_FAILURE(add_all());
    Reply r = shard("PUT", "/_shard/nodes/us1", R"({"standby":"us2"})");
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string t = tenant("acme");
    r = create(t, "eu1");
    ASSERT_EQ(r.status, 201) << r.body;
    ASSERT_EQ(Json(r.body).text("replica_on"), "eu2") << r.body;
    ASSERT_EQ(write(t, "before").status, 201);

    r = move(t, R"({"to":"us1","region":"us"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json(r.body).text("replica_on"), "us2") << r.body;
    EXPECT_EQ(Json(r.body).text("region"), "us") << r.body;
    EXPECT_EQ(copy_on(kEu2, t).status, 404) << copy_on(kEu2, t).body;
    EXPECT_EQ(copy_on(kEu1, t).status, 404);
    EXPECT_TRUE(follows(kUs2, t, kUs1)) << copy_on(kUs2, t).body;
    EXPECT_TRUE(eventually([&] { return count_on(kUs2, t) == R"({"count":1})"; }))
        << count_on(kUs2, t);
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("replica"), "us2");
}

// Cases 39 and 47 under load: a writer sends each write with its own Idempotency-Key (again after
// a 503 or a cut connection) while acme moves eu1 → us `{"region":"us"}` under --replicas, held
// 500 ms after the image is installed on the target (the source frozen throughout): every write
// answered 201 is on the target once, and reaches the replica placed in us.
TEST_F(MoveRegion, WriterThroughACrossRegionMoveLosesNothing) {
    {
        HookEnv stall("FENEC_TEST_MOVE_STALL", "installed:500");
        start_router({"--replicas"});
    }
    ASSERT_NO_FATAL_FAILURE(add_all());
    ASSERT_NO_FATAL_FAILURE(make_heavier(kUs1, kUs2));
    const std::string t = tenant("acme");
    Reply r = shard("PUT", "/_shard/tenants/" + t,
                    R"J({"node":"eu1","schema":["create collection notes (title text, n int)"]})J");
    ASSERT_EQ(r.status, 201) << r.body;

    std::atomic<bool> stop{false};
    std::atomic<int> frozen_503{0}, unexpected{0};
    std::mutex mu;
    std::set<int> acked;
    const uint16_t port = router_->port();
    std::thread writer([&] {
        auto c = std::make_unique<Client>(port);
        for (int i = 1; !stop; ++i) {
            const std::string body = "{\"title\":\"w\",\"n\":" + std::to_string(i) + "}";
            for (int attempt = 0; attempt < 400 && !stop; ++attempt) {
                auto a = c->request("POST", "/t/" + t + "/c/notes", body,
                                    {{"Authorization", "Bearer " + kData},
                                     {"Content-Type", "application/json"},
                                     {"Idempotency-Key", "w-" + std::to_string(i)}});
                if (!a || a->closed) c = std::make_unique<Client>(port);
                if (!a) continue;  // cut: the same key again
                if (a->status == 201) {
                    std::lock_guard lock(mu);
                    acked.insert(i);
                    break;
                }
                if (a->status == 503) {
                    ++frozen_503;
                    // A client honouring Retry-After a little sooner: its pacing, not a wait.
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                    continue;
                }
                ++unexpected;
                ADD_FAILURE() << "write " << i << ": " << a->status << " " << a->body;
                break;
            }
        }
    });
    auto acked_count = [&] {
        std::lock_guard lock(mu);
        return acked.size();
    };
    EXPECT_TRUE(eventually([&] { return acked_count() >= 5; }));
    Client mover(port);
    Reply moved = mover.request("POST", "/_shard/tenants/" + t + "/move", R"({"region":"us"})",
                                bearer(kRoot))
                      .value_or(Reply{});
    const size_t at_move = acked_count();
    EXPECT_TRUE(eventually([&] { return acked_count() >= at_move + 5; }));
    stop = true;
    writer.join();
    ASSERT_EQ(moved.status, 200) << moved.body;
    EXPECT_EQ(Json(moved.body).text("to"), "us2") << moved.body;
    EXPECT_EQ(Json(moved.body).text("replica_on"), "us1") << moved.body;
    EXPECT_GT(frozen_503.load(), 0) << "no write fell in the freeze";
    EXPECT_EQ(unexpected.load(), 0);

    const std::string query = R"({"query":"get notes select n"})";
    Reply all = node(kUs2, "POST", "/t/" + t + "/query", query, kData);
    ASSERT_EQ(all.status, 200) << all.body;
    std::lock_guard lock(mu);
    for (int i : acked) {
        const std::string needle = "{\"n\":" + std::to_string(i) + "}";
        const size_t found = all.body.find(needle);
        EXPECT_NE(found, std::string::npos) << "acknowledged write " << i << " is missing";
        if (found != std::string::npos) {
            EXPECT_EQ(all.body.find(needle, found + 1), std::string::npos) << "write " << i
                                                                          << " twice";
        }
    }
    // The replica placed in us catches up with the target (a write cut after it landed counts
    // on both, answered or not).
    const std::string count = count_on(kUs2, t);
    EXPECT_TRUE(eventually([&] { return count_on(kUs1, t) == count; })) << count_on(kUs1, t);
    EXPECT_EQ(copy_on(kEu1, t).status, 404);
    EXPECT_EQ(copy_on(kEu2, t).status, 404);
}

}  // namespace
}  // namespace fenec::test::move_region_test
