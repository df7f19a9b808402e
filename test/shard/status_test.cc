// test/shard/status_test.cc: GET /_shard/status (shard/status.h) and the operator console's
// files (shard/console.h) through a real fenec-shard in front of real fenec-node processes on
// loopback. Proves: the status is the router's token's alone; each node's answer and bytes, and
// each tenant's size, equal what the node itself lists (the oracle: GET /_admin/tenants straight
// to it); a node cut off (SIGSTOP) shows as not answering within the survey's bound instead of
// holding the answer up; a move stopped at each step (FENEC_TEST_MOVE_STALL, fenec-shard-hooks)
// is shown at that step, a move left by a killed router as `stopped`, and none once done; a
// failover by hand lands in the ring of recent failovers, a refused one does not; the lease
// granted and recorded under --auto-failover; and the console's page served without a
// credential, with its Content-Security-Policy, nosniff and no inline script.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>

#include "test/shard/cluster_fixture.h"

namespace fenec::test::status_test {
namespace {

// The router's environment for one start: FENEC_TEST_MOVE_STALL set while it forks.
std::string text_of(simdjson::dom::element e, std::string_view key) { return Json::text(e, key); }

uint64_t uint_of(simdjson::dom::element e, std::string_view key) {
    uint64_t v = 0;
    EXPECT_FALSE(e[key].get_uint64().get(v)) << key << " in " << simdjson::minify(e);
    return v;
}

bool bool_of(simdjson::dom::element e, std::string_view key) {
    bool v = false;
    EXPECT_FALSE(e[key].get_bool().get(v)) << key << " in " << simdjson::minify(e);
    return v;
}

// The member of `list` (an array of objects) whose `key` is `value`.
std::optional<simdjson::dom::element> find_in(simdjson::dom::element list, std::string_view key,
                                              std::string_view value) {
    simdjson::dom::array a;
    if (list.get_array().get(a)) return std::nullopt;
    for (simdjson::dom::element e : a) {
        if (text_of(e, key) == value) return e;
    }
    return std::nullopt;
}

size_t size_of(simdjson::dom::element list) {
    simdjson::dom::array a;
    return list.get_array().get(a) ? 0 : a.size();
}

class Status : public ClusterTest<3> {
  protected:
    // GET /_shard/status, 200 and JSON, or a failure.
    std::unique_ptr<Json> status() {
        const Reply r = shard("GET", "/_shard/status");
        EXPECT_EQ(r.status, 200) << r.body;
        auto j = std::make_unique<Json>(r.body);
        EXPECT_TRUE(j->ok) << r.body;
        return j;
    }
    // The move of `t` as the status shows it, or nullopt.
    std::optional<std::string> move_seen(const std::string& t) {
        auto j = status();
        if (!j->ok) return std::nullopt;
        auto m = find_in(j->doc["moves"], "tenant", t);
        if (!m) return std::nullopt;
        return simdjson::minify(*m);
    }
    // POST …/move on a connection of its own (the fixture's client is the test thread's).
    std::future<Reply> move_async(const std::string& t, const std::string& to) {
        const uint16_t port = router_->port();
        return std::async(std::launch::async, [port, t, to] {
            Client c(port, 60'000);
            return c
                .request("POST", "/_shard/tenants/" + t + "/move", "{\"to\":\"" + to + "\"}",
                         bearer(kRoot))
                .value_or(Reply{});
        });
    }
    // `t` on n1 moved to n2 by a router stalled `stall_ms` after `step`: the status shows the
    // move at `want` (from, to, running) while it waits, and no move once it is done.
    void watch_move(const std::string& step, const std::string& want, const std::string& from,
                    const std::string& to) {
        {
            HookEnv env("FENEC_TEST_MOVE_STALL", step + ":2500");
            start_router();
        }
        ASSERT_EQ(add(0, "n1").status, 201);
        ASSERT_EQ(add(1, "n2").status, 201);
        const std::string t = tenant("m");
        ASSERT_EQ(create(t, "n1").status, 201);
        ASSERT_EQ(data("POST", "/t/" + t + "/c/notes", R"({"title":"a"})").status, 201);
        auto moved = move_async(t, "n2");
        const std::string expected = "{\"tenant\":\"" + t + "\",\"from\":\"" + from +
                                     "\",\"to\":" + to + ",\"step\":\"" + want +
                                     "\",\"running\":true}";
        std::string last;
        EXPECT_TRUE(eventually(
            [&] {
                last = move_seen(t).value_or("");
                return last == expected;
            },
            2400))
            << "the status shows " << last << ", not " << expected;
        const Reply r = moved.get();
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(move_seen(t), std::nullopt);
    }
};

// Copies the directory has no place for are listed under `strays`, so an operator finds what
// nothing routes to and nothing deletes: one no row names (made on the node by hand here, as a
// delete its node missed leaves one), and one of a tenant placed on another node (as a move's
// target that installed the image and missed the undo leaves one). A tenant's own copies, its
// primary and its replica, are not. (The nodes outlive cases: earlier cases' tenants, which this
// case's directory does not hold, are listed too.)
TEST_F(Status, CopiesTheDirectoryHasNoPlaceForAreStrays) {
    start_router({"--replicas"});
    for (int i = 0; i < 3; ++i) ASSERT_EQ(add(i, "n" + std::to_string(i + 1)).status, 201);
    const std::string placed = tenant("placed"), orphan = tenant("orphan");
    const Reply made = create(placed, "n1");
    ASSERT_EQ(made.status, 201) << made.body;
    const std::string replica = Json(made.body).text("replica_on");
    ASSERT_TRUE(replica == "n2" || replica == "n3") << made.body;
    const int other = replica == "n2" ? 2 : 1;  // the node keeping no copy of `placed`
    const std::string schema = R"J({"schema":["create collection notes (title text)"]})J";
    ASSERT_EQ(node(other, "PUT", "/_admin/tenants/" + placed, schema).status, 201);
    ASSERT_EQ(node(0, "PUT", "/_admin/tenants/" + orphan, schema).status, 201);
    ASSERT_EQ(node(0, "POST", "/_admin/tenants/" + orphan + "/freeze").status, 200);

    auto j = status();
    ASSERT_TRUE(j->ok);
    std::vector<std::string> placed_strays;
    simdjson::dom::array strays;
    ASSERT_FALSE(j->doc["strays"].get_array().get(strays));
    for (simdjson::dom::element e : strays) {
        if (text_of(e, "tenant") == placed) {
            placed_strays.push_back(text_of(e, "node"));
            EXPECT_EQ(text_of(e, "placed_on"), "n1") << simdjson::minify(e);
            EXPECT_EQ(text_of(e, "role"), "primary") << simdjson::minify(e);
        }
    }
    EXPECT_EQ(placed_strays, std::vector<std::string>{"n" + std::to_string(other + 1)});
    auto o = find_in(j->doc["strays"], "tenant", orphan);
    ASSERT_TRUE(o) << simdjson::minify(j->doc);
    EXPECT_EQ(text_of(*o, "node"), "n1");
    EXPECT_TRUE(bool_of(*o, "frozen"));
    EXPECT_GT(uint_of(*o, "bytes"), 0u);
    EXPECT_TRUE((*o)["placed_on"].is_null()) << simdjson::minify(*o);

    EXPECT_EQ(node(other, "DELETE", "/_admin/tenants/" + placed).status / 100, 2);
    EXPECT_EQ(node(0, "DELETE", "/_admin/tenants/" + orphan).status / 100, 2);
    j = status();
    ASSERT_TRUE(j->ok);
    EXPECT_FALSE(find_in(j->doc["strays"], "tenant", placed)) << simdjson::minify(j->doc);
    EXPECT_FALSE(find_in(j->doc["strays"], "tenant", orphan)) << simdjson::minify(j->doc);
}

TEST_F(Status, IsTheRoutersTokensAlone) {
    start_router();
    EXPECT_EQ(call("GET", "/_shard/status", {}, "").status, 401);
    EXPECT_EQ(call("GET", "/_shard/status", {}, kData).status, 401);
    EXPECT_EQ(call("GET", "/_shard/status", {}, node_admin_token(0)).status, 401);
    EXPECT_EQ(shard("POST", "/_shard/status", "{}").status, 405);
    EXPECT_EQ(shard("GET", "/_shard/status").status, 200);
}

// Each node's answer as the node lists its copies itself, each tenant's size as its node has it,
// and a node cut off shown as not answering, within the survey's bound.
TEST_F(Status, NodesAndSizesAsTheNodesListThem) {
    start_router();
    ASSERT_EQ(add(0, "n1").status, 201);
    ASSERT_EQ(add(1, "n2").status, 201);
    const std::string a = tenant("a"), b = tenant("b");
    ASSERT_EQ(create(a, "n1").status, 201);
    ASSERT_EQ(create(b, "n2").status, 201);
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(data("POST", "/t/" + a + "/c/notes", R"({"title":"some text"})").status, 201);
    }
    auto j = status();
    ASSERT_TRUE(j->ok);
    EXPECT_EQ(text_of(j->doc, "role"), "primary");
    EXPECT_EQ(size_of(j->doc["nodes"]), 2u);
    for (int i = 0; i < 2; ++i) {
        const std::string name = "n" + std::to_string(i + 1);
        const Reply listed = node(i, "GET", "/_admin/tenants");
        ASSERT_EQ(listed.status, 200) << listed.body;
        Json l(listed.body);
        uint64_t bytes = 0;
        simdjson::dom::array copies;
        ASSERT_FALSE(l.doc.get_array().get(copies)) << listed.body;
        for (simdjson::dom::element c : copies) bytes += uint_of(c, "bytes");
        auto n = find_in(j->doc["nodes"], "name", name);
        ASSERT_TRUE(n) << name;
        EXPECT_TRUE(bool_of(*n, "answered"));
        EXPECT_EQ(uint_of(*n, "copies"), copies.size()) << name;
        EXPECT_EQ(uint_of(*n, "bytes"), bytes) << name;
        const std::string t = i == 0 ? a : b;
        auto sized = find_in(j->doc["tenants"], "name", t);
        ASSERT_TRUE(sized) << t;
        auto own = find_in(l.doc, "name", t);
        ASSERT_TRUE(own) << listed.body;
        EXPECT_EQ(uint_of(*sized, "bytes"), uint_of(*own, "bytes")) << t;
        EXPECT_GT(uint_of(*sized, "bytes"), 0u) << t;
    }

    nodes_->procs[1]->signal(SIGSTOP);  // n2 cut off: it accepts, answers nothing
    const auto start = std::chrono::steady_clock::now();
    j = status();
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(j->ok);
    EXPECT_LT(took, std::chrono::milliseconds(3000)) << "the survey's bound is 1.5 s";
    auto n1 = find_in(j->doc["nodes"], "name", "n1");
    auto n2 = find_in(j->doc["nodes"], "name", "n2");
    ASSERT_TRUE(n1 && n2);
    EXPECT_TRUE(bool_of(*n1, "answered"));
    EXPECT_FALSE(bool_of(*n2, "answered"));
    EXPECT_FALSE(text_of(*n2, "error").empty()) << simdjson::minify(*n2);
    EXPECT_TRUE(find_in(j->doc["tenants"], "name", a)) << "n1's tenant keeps its size";
    EXPECT_FALSE(find_in(j->doc["tenants"], "name", b)) << "n2's tenant has none to show";
}

TEST_F(Status, AMoveStoppedAfterItsMarkIsMarked) { watch_move("marked", "marked", "n1", "\"n2\""); }

TEST_F(Status, AMoveStoppedWhileFrozenIsFrozen) { watch_move("frozen", "frozen", "n1", "\"n2\""); }

TEST_F(Status, AMoveStoppedOnceInstalledIsInstalled) {
    watch_move("installed", "installed", "n1", "\"n2\"");
}

TEST_F(Status, AMoveStoppedAfterTheFlipIsFlipped) {
    watch_move("flipped", "flipped", "n1", "\"n2\"");
}

// A router killed mid-move leaves the tenant `moving`: its successor shows the move stopped, not
// running, until the tenant is moved again.
TEST_F(Status, AMoveLeftByAKilledRouterIsStopped) {
    {
        HookEnv env("FENEC_TEST_MOVE_STALL", "frozen:10000");
        start_router();
    }
    ASSERT_EQ(add(0, "n1").status, 201);
    ASSERT_EQ(add(1, "n2").status, 201);
    const std::string t = tenant("m");
    ASSERT_EQ(create(t, "n1").status, 201);
    auto moved = move_async(t, "n2");
    ASSERT_TRUE(
        eventually([&] { return move_seen(t).value_or("").find("frozen") != std::string::npos; }));
    client_.reset();
    router_->kill(SIGKILL);
    (void)moved.get();
    start_router();  // the same directory, no stall
    EXPECT_EQ(move_seen(t), "{\"tenant\":\"" + t +
                                "\",\"from\":\"n1\",\"to\":\"n2\",\"step\":\"stopped\","
                                "\"running\":false}");
    ASSERT_EQ(shard("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n2"})").status, 200);
    EXPECT_EQ(move_seen(t), std::nullopt);
}

// A failover by hand is in the ring with what it promoted; one refused (nothing to fail over
// onto) is not a failover and is not.
TEST_F(Status, AFailoverByHandIsRecorded) {
    start_router();
    const std::string t = tenant("f");
    ASSERT_NO_FATAL_FAILURE(pair_n1_n2_with(t));
    ASSERT_EQ(add(2, "n3").status, 201);
    EXPECT_EQ(size_of(status()->doc["failovers"]), 0u);

    const Reply r = shard("POST", "/_shard/nodes/n1/failover", "{}");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(shard("POST", "/_shard/nodes/n3/failover", "{}").status, 409);

    auto j = status();
    ASSERT_EQ(size_of(j->doc["failovers"]), 1u) << simdjson::minify(j->doc);
    simdjson::dom::element f = j->doc["failovers"].at(0);
    EXPECT_EQ(text_of(f, "node"), "n1");
    EXPECT_EQ(text_of(f, "trigger"), "hand");
    EXPECT_EQ(simdjson::minify(f["promoted"]), "[{\"tenant\":\"" + t + "\",\"to\":\"n2\"}]");
    EXPECT_EQ(simdjson::minify(f["failed"]), "[]");
    EXPECT_EQ(simdjson::minify(f["waiting"]), "[]");
    const std::string at = text_of(f, "at");
    EXPECT_EQ(at.size(), 24u) << at;  // 2026-12-02T14:00:00.000Z
    EXPECT_EQ(at.back(), 'Z') << at;
}

TEST_F(Status, TheLeaseUnderAutoFailover) {
    start_router();
    EXPECT_EQ(simdjson::minify(status()->doc["lease"]), "null");
    start_router({"--auto-failover", "2"});
    EXPECT_EQ(simdjson::minify(status()->doc["lease"]), R"({"ms":2000,"record_ms":2000})");
}

// The page carries no data, so it needs no credential; it runs only its own script and style.
TEST_F(Status, TheConsolesFilesWithTheirPolicy) {
    start_router();
    const Reply page = call("GET", "/_console", {}, "");
    ASSERT_EQ(page.status, 200) << page.body;
    EXPECT_EQ(page.header("Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(page.header("Content-Security-Policy"),
              "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
              "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    EXPECT_EQ(page.header("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(page.header("Referrer-Policy"), "no-referrer");
    EXPECT_TRUE(page.body.starts_with("<!doctype html>")) << page.body.substr(0, 100);
    EXPECT_NE(page.body.find(R"(<script src="/_console/console.js" defer></script>)"),
              std::string::npos);
    EXPECT_EQ(page.body.find("<script>"), std::string::npos) << "no inline script";
    EXPECT_EQ(page.body.find("style="), std::string::npos) << "no inline style";

    const Reply js = call("GET", "/_console/console.js", {}, "");
    ASSERT_EQ(js.status, 200);
    EXPECT_EQ(js.header("Content-Type"), "text/javascript; charset=utf-8");
    EXPECT_EQ(js.header("X-Content-Type-Options"), "nosniff");
    EXPECT_NE(js.body.find("sessionStorage"), std::string::npos);
    EXPECT_EQ(js.body.find("innerHTML"), std::string::npos) << "values enter as text only";
    const Reply css = call("GET", "/_console/console.css", {}, "");
    ASSERT_EQ(css.status, 200);
    EXPECT_EQ(css.header("Content-Type"), "text/css; charset=utf-8");

    EXPECT_EQ(call("GET", "/_console/nothing.js", {}, "").status, 404);
    const Reply post = call("POST", "/_console", "{}", "");
    EXPECT_EQ(post.status, 405);
    EXPECT_EQ(post.header("Allow"), "GET, HEAD");
    // The data it shows is the API's, and that still takes the token.
    EXPECT_EQ(call("GET", "/_shard/nodes", {}, "").status, 401);
}

}  // namespace
}  // namespace fenec::test::status_test
