// test/shard/router_test.cc: fenec-shard against real fenec-node processes (router.md §18): start
// refusals, tokens, nodes and tenants through /_shard/, placement by the fewest bytes, every kind
// of data request forwarded (checked against the node asked directly), a subscription streamed
// through, unknown tenants, a stopped node, a pooled connection the node closed for its silence,
// the directory kept across a restart, a SIGTERM's drain, and the resend rules of seed 001
// (against a FaultNode).
#include <gtest/gtest.h>

#include <chrono>

#include "test/shard/shard_fixture.h"

namespace fenec::test::router_test {
namespace {

const std::string ROOT = "root";
const std::string D = "data-token";
// The nodes' admin tokens: distinctive, so a search for one in an answer or a log means it.
std::string admin(int i) { return "admin-token-of-node-" + std::to_string(i + 1); }

class Router : public ::testing::Test {
protected:
    // Nodes n1 and n2 (admin tokens a1, a2) and a router with --token root.
    void SetUp() override {
        for (int i = 0; i < 2; ++i) start_node(i, {});
        start_router({});
    }

    void start_node(int i, std::vector<std::string> more) {
        std::vector<std::string> flags = {"--token", D, "--admin-token", admin(i),
                                          "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        nodes_[i].reset();
        nodes_[i] = std::make_unique<NodeProcess>(node_dirs_[i].path(), flags);
        ASSERT_NE(nodes_[i]->port(), 0) << nodes_[i]->first_line();
    }
    void start_router(std::vector<std::string> more) {
        // No refusal delay unless a test asks (RefusalDelayDoubles): tests refuse often.
        std::vector<std::string> flags = {"--token", ROOT, "--directory", dir_.path() + "/shard.fenec",
                                          "--audit", dir_.path() + "/audit.log", "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        client_.reset();
        router_.reset();
        router_ = std::make_unique<RouterProcess>(flags);
        ASSERT_NE(router_->port(), 0);
        client_ = std::make_unique<Client>(router_->port());
    }

    Reply call(std::string_view method, std::string_view target, std::string_view body = {},
               std::vector<std::pair<std::string, std::string>> headers = {}) {
        auto r = client_->request(method, target, body, std::move(headers));
        EXPECT_TRUE(r.has_value()) << method << " " << target;
        if (!r || r->closed) client_ = std::make_unique<Client>(router_->port());
        return r.value_or(Reply{});
    }
    Reply shard(std::string_view method, std::string_view target, std::string_view body = {}) {
        return call(method, target, body, bearer(ROOT));
    }
    Reply data(std::string_view method, std::string_view target, std::string_view body = {},
               std::vector<std::pair<std::string, std::string>> headers = {}) {
        if (headers.empty()) headers = bearer(D);
        return call(method, target, body, std::move(headers));
    }
    // The same request straight to node i: the oracle.
    Reply direct(int i, std::string_view method, std::string_view target, std::string_view body = {},
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
        Client c(nodes_[i]->port());
        if (headers.empty()) headers = bearer(D);
        return c.request(method, target, body, headers).value_or(Reply{});
    }
    void add_node(int i) {
        auto r = shard("PUT", "/_shard/nodes/n" + std::to_string(i + 1),
                       "{\"addr\":\"127.0.0.1:" + std::to_string(nodes_[i]->port()) +
                           "\",\"token\":\"" + admin(i) + "\"}");
        ASSERT_EQ(r.status, 201) << r.body;
    }
    void make_tenant(const std::string& name, const std::string& body) {
        auto r = shard("PUT", "/_shard/tenants/" + name, body);
        ASSERT_EQ(r.status, 201) << r.body;
    }

    TempDir dir_;
    TempDir node_dirs_[2];
    std::unique_ptr<NodeProcess> nodes_[2];
    std::unique_ptr<RouterProcess> router_;
    std::unique_ptr<Client> client_;
};

const char* kNotes = R"J({"node":"n1","schema":["create collection notes (title text, year int)"]})J";

// §3 and §18 case 6: each refusal from one address waits --auth-delay doubled per refusal within
// a minute — the router's own 401s and a node's 401 passed back alike; a token not refused
// clears the address.
TEST_F(Router, RefusalDelayDoubles) {
    start_router({"--auth-delay", "50"});
    add_node(0);
    make_tenant("acme", kNotes);
    auto timed = [&](std::string_view target, std::vector<std::pair<std::string, std::string>> h,
                     int& status) {
        const auto start = std::chrono::steady_clock::now();
        status = call("GET", target, {}, std::move(h)).status;
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
            .count();
    };
    int status = 0;
    const int64_t waits[] = {50, 100, 200};
    for (int64_t want : waits) {
        const int64_t took = timed("/_shard/tenants", bearer("wrong"), status);
        EXPECT_EQ(status, 401);
        EXPECT_GE(took, want - 5) << "refusal expected to wait " << want << " ms";
        EXPECT_LT(took, want + 1000);
    }
    EXPECT_LT(timed("/_shard/tenants", bearer(ROOT), status), 1000);  // not delayed: clears
    EXPECT_EQ(status, 200);
    int64_t took = timed("/_shard/tenants", bearer("wrong"), status);
    EXPECT_EQ(status, 401);
    EXPECT_GE(took, 45);
    EXPECT_LT(took, 95) << "the address was cleared: the first refusal again";
    // A node's 401 passed back waits too (the second refusal now: 100 ms).
    took = timed("/t/acme/c/notes", {}, status);
    EXPECT_EQ(status, 401);
    EXPECT_GE(took, 95);
    EXPECT_EQ(timed("/t/acme/c/notes", bearer(D), status) < 1000, true);
    EXPECT_EQ(status, 200);
    took = timed("/t/acme/c/notes", {}, status);  // cleared by the data request
    EXPECT_EQ(status, 401);
    EXPECT_GE(took, 45);
    EXPECT_LT(took, 95);
}

// §2.2: refusals exit 2 naming the problem; --help exits 0.
TEST(RouterStart, RefusesBadFlags) {
    TempDir dir;
    const std::string err = dir.path() + "/err";
    {
        RouterProcess r({"--listen", "0.0.0.0:0"}, err);
        EXPECT_EQ(r.wait_exit(), 2);
        EXPECT_NE(read_file(err).find("/_shard/"), std::string::npos) << read_file(err);
    }
    for (std::vector<std::string> flags : std::vector<std::vector<std::string>>{
             {"--upstream-timeout", "0"}, {"--no-such-flag"}, {"--workers"}, {"--max-body", "x"},
             {"--max-body", "64m"}, {"--upstream-poll-us", "1001"}, {"--upstream-poll-us", "-1"},
             {"--default-region", "Eu"}}) {
        RouterProcess r(flags, err);
        EXPECT_EQ(r.wait_exit(), 2) << flags[0];
        EXPECT_NE(read_file(err).find(flags[0]), std::string::npos) << read_file(err);
    }
    RouterProcess help({"--help"}, err);
    EXPECT_EQ(help.wait_exit(), 0);
}

// §3: /_shard/ and /_metrics take the router's token only; a JWT or a node's token is 401 with
// WWW-Authenticate and an audit line; /t/ is the node's to check.
TEST_F(Router, TokensGuardTheApi) {
    add_node(0);
    make_tenant("acme", kNotes);
    for (auto headers : std::vector<std::vector<std::pair<std::string, std::string>>>{
             {}, bearer(admin(0)), bearer(D), bearer("eyJh.eyJ0.c2ln")}) {
        auto r = call("GET", "/_shard/tenants", {}, headers);
        EXPECT_EQ(r.status, 401) << r.body;
        EXPECT_EQ(r.header("WWW-Authenticate").value_or(""), "Bearer");
    }
    EXPECT_EQ(call("GET", "/_metrics", {}, bearer(admin(0))).status, 401);
    // The series the deploy kit's alerts read with increase() are there at 0 before any event
    // (one born at 1 increases by nothing: the first failover was never alerted).
    const std::string m = shard("GET", "/_metrics").body;
    for (const char* series : {R"(fenec_router_failovers_total{trigger="lease",outcome="done"} 0)",
                               R"(fenec_router_failovers_total{trigger="hand",outcome="failed"} 0)",
                               R"(fenec_router_moves_total{outcome="failed",scope="directory"} 0)",
                               R"(fenec_router_moves_total{outcome="failed",scope="regions"} 0)"}) {
        EXPECT_NE(m.find(std::string("\n") + series + "\n"), std::string::npos) << series << "\n"
                                                                                << m;
    }
    EXPECT_EQ(shard("GET", "/_shard/tenants").status, 200);
    auto node_refusal = call("GET", "/t/acme/c/notes");
    EXPECT_EQ(node_refusal.status, 401) << node_refusal.body;  // the node's own 401
    EXPECT_TRUE(wait_until([&] {  // the audit log's flush, within a second
        const std::string a = read_file(dir_.path() + "/audit.log");
        return a.find("\"event\":\"refused\"") != std::string::npos &&
               a.find("\"event\":\"admin\"") != std::string::npos;
    }));
    const std::string audit = read_file(dir_.path() + "/audit.log");
    EXPECT_NE(audit.find("\"event\":\"refused\""), std::string::npos) << audit;
    EXPECT_NE(audit.find("\"event\":\"admin\""), std::string::npos) << audit;
    EXPECT_EQ(audit.find(admin(0)), std::string::npos) << "no token in the audit log";
}

// §6.3: a node is asked before it is recorded; its token is never answered.
TEST_F(Router, NodesRegisteredListedRemoved) {
    auto bad = shard("PUT", "/_shard/nodes/n9",
                     "{\"addr\":\"127.0.0.1:" + std::to_string(nodes_[0]->port()) + "\",\"token\":\"bad\"}");
    EXPECT_EQ(bad.status, 502) << bad.body;
    EXPECT_EQ(shard("GET", "/_shard/nodes/n9").status, 404);
    EXPECT_EQ(shard("PUT", "/_shard/nodes/n9", R"({"addr":"127.0.0.1:1"})").status, 400);
    EXPECT_EQ(shard("PUT", "/_shard/nodes/n9", R"({"addr":"x:1","token":"t","colour":"red"})").status, 400);
    EXPECT_EQ(shard("PUT", "/_shard/nodes/N9", R"({})").status, 400);
    add_node(0);
    add_node(1);
    auto again = shard("PUT", "/_shard/nodes/n1", R"({"zone":"fra"})");
    EXPECT_EQ(again.status, 200) << again.body;
    auto list = shard("GET", "/_shard/nodes");
    EXPECT_EQ(list.status, 200);
    EXPECT_NE(list.body.find("\"name\":\"n1\""), std::string::npos) << list.body;
    EXPECT_NE(list.body.find("\"zone\":\"fra\""), std::string::npos) << list.body;
    EXPECT_EQ(list.body.find(admin(0)), std::string::npos) << list.body;
    EXPECT_EQ(list.body.find(admin(1)), std::string::npos) << list.body;
    make_tenant("acme", kNotes);
    EXPECT_EQ(shard("DELETE", "/_shard/nodes/n1").status, 409);
    EXPECT_EQ(shard("DELETE", "/_shard/nodes/n8").status, 404);
    EXPECT_EQ(shard("DELETE", "/_shard/nodes/n2").status, 200);
    EXPECT_EQ(shard("GET", "/_shard/nodes/n2").status, 404);
}

// §6.4: the node named, or the one with the fewest bytes; the schema goes with the create.
TEST_F(Router, TenantsPlacedByFewestBytes) {
    add_node(0);
    add_node(1);
    make_tenant("acme", kNotes);
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(data("POST", "/t/acme/query", R"({"query":"put notes {title: \"some text\", year: 1}"})").status, 200);
    }
    auto beta = shard("PUT", "/_shard/tenants/beta", "{}");
    ASSERT_EQ(beta.status, 201) << beta.body;
    EXPECT_NE(beta.body.find("\"node\":\"n2\""), std::string::npos) << beta.body;
    EXPECT_NE(direct(1, "GET", "/_admin/tenants", {}, bearer(admin(1))).body.find("\"beta\""), std::string::npos);
    EXPECT_EQ(direct(0, "GET", "/_admin/tenants", {}, bearer(admin(0))).body.find("\"beta\""), std::string::npos);
    EXPECT_EQ(shard("PUT", "/_shard/tenants/acme", "{}").status, 409);
    EXPECT_EQ(shard("PUT", "/_shard/tenants/Acme", "{}").status, 400);
    EXPECT_EQ(shard("PUT", "/_shard/tenants/gamma", R"({"node":"n7"})").status, 404);
    auto refused = shard("PUT", "/_shard/tenants/delta", R"({"node":"n1","schema":["create nonsense"]})");
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_EQ(shard("GET", "/_shard/tenants/delta").status, 404);
    auto one = shard("GET", "/_shard/tenants/acme");
    EXPECT_EQ(one.status, 200);
    EXPECT_NE(one.body.find("\"node\":\"n1\""), std::string::npos) << one.body;
    auto list = shard("GET", "/_shard/tenants?bytes");
    EXPECT_NE(list.body.find("\"name\":\"beta\""), std::string::npos) << list.body;
    EXPECT_NE(list.body.find("\"bytes\":"), std::string::npos) << list.body;
}

// §5: every kind of data request goes through byte for byte and answers as the node does.
TEST_F(Router, DataRequestsForwarded) {
    add_node(0);
    make_tenant("acme", kNotes);
    auto q = data("POST", "/t/acme/query", R"({"query":"put notes {title: \"a/b\", year: 2020}"})");
    EXPECT_EQ(q.status, 200) << q.body;
    auto batch = data("POST", "/t/acme/batch",
                      "{\"query\":\"put notes {title: \\\"x\\\"}\"}\n{\"query\":\"get notes where title = $1\",\"params\":[\"x\"]}\n");
    EXPECT_EQ(batch.status, 200) << batch.body;
    EXPECT_EQ(data("PUT", "/t/acme/c/notes/9", R"({"title":"n"})").status, 201);
    EXPECT_EQ(data("GET", "/t/acme/c/notes/9").body, direct(0, "GET", "/t/acme/c/notes/9").body);
    EXPECT_EQ(data("DELETE", "/t/acme/c/notes/9").status, 200);
    EXPECT_EQ(data("GET", "/t/acme/c/notes/9").status, 404);
    // The original target bytes: a percent-encoded filter means what it means on the node.
    const std::string target = "/t/acme/c/notes?title=eq.a%2Fb";
    auto filtered = data("GET", target);
    EXPECT_EQ(filtered.status, 200) << filtered.body;
    EXPECT_EQ(filtered.body, direct(0, "GET", target).body);
    EXPECT_NE(filtered.body.find("a/b"), std::string::npos) << filtered.body;
    // HEAD keeps the GET's length and sends no body.
    auto get = data("GET", "/t/acme/c/notes");
    {
        // The test client frames by length, so the HEAD's answer is read raw.
        Client c(router_->port());
        ASSERT_TRUE(c.send_raw("HEAD /t/acme/c/notes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
                               "\r\n\r\nGET /_health HTTP/1.1\r\nHost: x\r\n\r\n"));
        const std::string raw = c.read_until("\"ok\"", 5000);
        EXPECT_TRUE(raw.starts_with("HTTP/1.1 200")) << raw;
        EXPECT_NE(raw.find("Content-Length: " + std::to_string(get.body.size()) + "\r\n"), std::string::npos) << raw;
        // No body: the next answer's status line follows the HEAD's blank line at once.
        EXPECT_NE(raw.find("\r\n\r\nHTTP/1.1 200"), std::string::npos) << raw;
    }
    // One X-Request-Id, the client's.
    auto id = data("GET", "/t/acme/c/notes", {}, {{"Authorization", "Bearer " + D}, {"X-Request-Id", "order-17"}});
    size_t ids = 0;
    for (const auto& [k, v] : id.headers) ids += http::iequals(k, "X-Request-Id");
    EXPECT_EQ(ids, 1u);
    EXPECT_EQ(id.header("X-Request-Id").value_or(""), "order-17");
    EXPECT_EQ(data("GET", "/t/nosuch/c/docs").status, 404);
    EXPECT_NE(data("GET", "/t/nosuch/c/docs").body.find("nosuch"), std::string::npos);
    EXPECT_EQ(data("GET", "/t/Bad!/c/docs").status, 400);
    EXPECT_EQ(data("GET", "/nowhere").status, 404);
    // Expect: 100-continue is answered once the tenant is found, and refused before the body if not.
    auto cont = data("POST", "/t/acme/query", R"({"query":"get notes"})",
                     {{"Authorization", "Bearer " + D}, {"Expect", "100-continue"}});
    EXPECT_EQ(cont.status, 200) << cont.body;
    auto nosuch = data("POST", "/t/nosuch/query", R"({"query":"get notes"})",
                       {{"Authorization", "Bearer " + D}, {"Expect", "100-continue"}});
    EXPECT_EQ(nosuch.status, 404) << nosuch.body;
}

// --max-body counts MiB, as the node's does: with 1, a 64 KiB body is forwarded and 1 MiB + 1
// announced is 413 from the head alone, naming both counts in bytes.
TEST_F(Router, MaxBodyIsInMiBAsTheNodes) {
    start_router({"--max-body", "1"});
    add_node(0);
    make_tenant("acme", kNotes);
    const std::string padded = R"({"query":"get notes")" + std::string(64 << 10, ' ') + "}";
    auto q = data("POST", "/t/acme/query", padded);
    EXPECT_EQ(q.status, 200) << q.body;
    Client c(router_->port());
    ASSERT_TRUE(c.send_raw("POST /t/acme/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
                           "\r\nContent-Length: 1048577\r\n\r\n"));
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413) << r->body;
    EXPECT_NE(r->body.find("1048577"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("1048576"), std::string::npos) << r->body;
}

// §5.6: an answer without a length is copied as it arrives; the client closing ends it on the node.
TEST_F(Router, SubscriptionStreamedThrough) {
    add_node(0);
    make_tenant("acme", kNotes);
    {
        Client sub(router_->port());
        ASSERT_TRUE(sub.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                 D + "\r\n\r\n"));
        EXPECT_NE(sub.read_until("event: seed", 5000).find("event: seed"), std::string::npos) << sub.buffer();
        ASSERT_EQ(data("POST", "/t/acme/query", R"({"query":"put notes {title: \"live\"}"})").status, 200);
        EXPECT_NE(sub.read_until("live", 5000).find("live"), std::string::npos) << sub.buffer();
    }
    // The node's subscription ends once the router saw its client go.
    EXPECT_TRUE(wait_until([&] {
        auto m = direct(0, "GET", "/_metrics", {}, bearer(admin(0)));
        return m.body.find("\nfenec_subscriptions 0") != std::string::npos;
    }));
}

// node-http.md §5.4 through the router: a stream resumed with `Last-Event-ID` (passed through
// unchanged) after the row it held was deleted no longer leaves the row with its subscriber —
// named in `dels` or left out by a reseed.
TEST_F(Router, ResumedStreamThroughTheRouterHearsTheDelete) {
    add_node(0);
    make_tenant("acme", kNotes);
    ASSERT_EQ(data("POST", "/t/acme/query", R"({"query":"put notes {title: \"held\"}"})").status, 200);
    std::string cursor;
    {
        Client sub(router_->port());
        ASSERT_TRUE(sub.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                 D + "\r\n\r\n"));
        const std::string got = sub.read_until("\n\n", 5000);
        ASSERT_NE(got.find("\"title\":\"held\""), std::string::npos) << got;
        const size_t id = got.find("\nid: ");
        ASSERT_NE(id, std::string::npos) << got;
        cursor = got.substr(id + 5, got.find('\n', id + 1) - id - 5);
    }
    ASSERT_EQ(data("POST", "/t/acme/query", R"({"query":"del notes where _id = 1"})").status, 200);
    Client sub(router_->port());
    ASSERT_TRUE(sub.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                             D + "\r\nLast-Event-ID: " + cursor + "\r\n\r\n"));
    const std::string got = sub.read_until("\n\n", 5000);
    const bool named = got.find("event: change") != std::string::npos &&
                       got.find("\"dels\":[1]") != std::string::npos;
    const bool reseeded = got.find("event: seed") != std::string::npos &&
                          got.find("\"rows\":[]") != std::string::npos;
    EXPECT_TRUE(named || reseeded) << got;
}

// §5.5: a node that does not answer is 502 naming it, counted per node.
TEST_F(Router, StoppedNodeIs502) {
    add_node(0);
    make_tenant("acme", kNotes);
    nodes_[0]->kill(SIGKILL);
    auto r = data("GET", "/t/acme/c/notes");
    EXPECT_EQ(r.status, 502) << r.body;
    EXPECT_NE(r.body.find("n1"), std::string::npos) << r.body;
    auto m = shard("GET", "/_metrics");
    EXPECT_NE(m.body.find("fenec_router_upstream_errors_total{node=\"n1\"} 1"), std::string::npos) << m.body;
    EXPECT_EQ(m.body.find("acme"), std::string::npos) << "no label names a tenant";
    const std::string path = dir_.path() + "/metrics.txt";
    std::ofstream(path) << m.body;
    const std::string cmd = "promtool check metrics < " + path + " > " + path + ".out 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_EQ(read_file(path + ".out"), "");
}

// §5.4: a pooled connection the node closed for its silence is let go of, not used: an unkeyed
// write after the pause runs once and costs no resend.
TEST_F(Router, IdleClosedConnectionCostsNothing) {
    start_node(0, {"--idle-timeout", "1"});
    add_node(0);
    make_tenant("acme", kNotes);
    ASSERT_EQ(data("GET", "/t/acme/c/notes").status, 200);
    // Silent past its second, the router's pooled connection is closed by the node, which then
    // counts only the connection asking.
    EXPECT_TRUE(wait_until([&] {
        return direct(0, "GET", "/_metrics", {}, bearer(admin(0)))
                   .body.find("\nfenec_http_connections 1\n") != std::string::npos;
    }));
    auto w = data("POST", "/t/acme/query", R"({"query":"put notes {title: \"once\"}"})");
    EXPECT_EQ(w.status, 200) << w.body;
    EXPECT_EQ(direct(0, "GET", "/t/acme/c/notes?count").body, R"({"count":1})");
    auto m = shard("GET", "/_metrics");
    EXPECT_EQ(m.body.find("fenec_router_retries_total{"), std::string::npos) << m.body;
    EXPECT_EQ(m.body.find("fenec_router_upstream_errors_total{"), std::string::npos) << m.body;
}

// Two requests in a row share one pooled connection (§18 case 15), seen in the pool's gauge.
TEST_F(Router, ConnectionsKeptAndReused) {
    add_node(0);
    make_tenant("acme", kNotes);
    ASSERT_EQ(data("GET", "/t/acme/c/notes").status, 200);
    ASSERT_EQ(data("GET", "/t/acme/c/notes").status, 200);
    auto m = shard("GET", "/_metrics");
    EXPECT_NE(m.body.find("fenec_router_upstream_idle_connections{node=\"n1\"} 1\n"), std::string::npos)
        << m.body;
}

// §4.1: a placement answered 201 survives a SIGKILL of the router.
TEST_F(Router, RestartKeepsTheDirectory) {
    add_node(0);
    make_tenant("acme", kNotes);
    router_->kill(SIGKILL);
    start_router({});
    auto one = shard("GET", "/_shard/tenants/acme");
    EXPECT_EQ(one.status, 200) << one.body;
    EXPECT_NE(one.body.find("\"node\":\"n1\""), std::string::npos) << one.body;
    EXPECT_EQ(data("GET", "/t/acme/c/notes").status, 200);
}

// §6.4 Delete: the node first; a node refusing (today's answers 405) leaves the tenant placed.
TEST_F(Router, DeleteGoesToTheNodeFirst) {
    add_node(0);
    make_tenant("acme", kNotes);
    auto del = shard("DELETE", "/_shard/tenants/acme");
    if (del.status == 204) {
        EXPECT_EQ(data("GET", "/t/acme/c/notes").status, 404);
        EXPECT_EQ(shard("GET", "/_shard/tenants/acme").status, 404);
    } else {
        EXPECT_EQ(del.status, 405) << del.body;  // the node's own status, passed through
        EXPECT_EQ(shard("GET", "/_shard/tenants/acme").status, 200);
    }
    EXPECT_EQ(shard("DELETE", "/_shard/tenants/nosuch").status, 404);
    client_.reset();
    EXPECT_EQ(router_->kill(SIGTERM), 0);  // §2.3: SIGTERM drains and exits 0
}

// §2.3: the drain waits for requests in flight, not for a client's idle keep-alive connection
// (every pooled HTTP client holds one): the router exits at once.
TEST_F(Router, AnIdleKeepAliveDoesNotHoldTheDrain) {
    add_node(0);
    make_tenant("acme", kNotes);
    ASSERT_EQ(data("GET", "/t/acme/c/notes").status, 200);  // client_ stays open, idle
    const auto asked = std::chrono::steady_clock::now();
    EXPECT_EQ(router_->kill(SIGTERM), 0);
    const auto took = std::chrono::steady_clock::now() - asked;
    // The bound of a drain is 10 s; an idle connection once held it that long.
    EXPECT_LT(took, std::chrono::seconds(5))
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// Seed 001: sent whole and cut before an answer — a read goes again once, a keyed write goes
// again once, an unkeyed write is 502 "may have run".
TEST_F(Router, CutAfterSentFollowsTheResendRules) {
    FaultNode fault;
    auto put = shard("PUT", "/_shard/nodes/f1",
                     "{\"addr\":\"127.0.0.1:" + std::to_string(fault.port()) + "\",\"token\":\"t\"}");
    ASSERT_EQ(put.status, 201) << put.body;
    make_tenant("acme", R"({"node":"f1"})");
    auto write = data("POST", "/t/acme/query", R"({"query":"put notes {title: \"x\"}"})");
    EXPECT_EQ(write.status, 502) << write.body;
    EXPECT_NE(write.body.find("\"outcome\":\"unknown\""), std::string::npos) << write.body;
    EXPECT_NE(write.body.find("may have run"), std::string::npos) << write.body;
    EXPECT_EQ(fault.cut(), 1);
    auto read = data("GET", "/t/acme/c/notes");
    EXPECT_EQ(read.status, 502) << read.body;
    EXPECT_EQ(fault.cut(), 3);  // sent twice
    auto keyed = data("POST", "/t/acme/query", R"({"query":"put notes {title: \"x\"}"})",
                      {{"Authorization", "Bearer " + D}, {"Idempotency-Key", "k1"}});
    EXPECT_EQ(keyed.status, 502);
    EXPECT_EQ(fault.cut(), 5);
    auto m = shard("GET", "/_metrics");
    EXPECT_NE(m.body.find("fenec_router_retries_total{reason=\"idempotent\"} 2"), std::string::npos) << m.body;
}

// An answer begun and then cut short (the node ran the request and died answering it): an
// unkeyed write is 502 saying it may have run, as one cut before its answer is. Before, the 502
// said only that the answer ended part-way, which reads as "not run": a client resending it ran
// it twice. A read is passed on the same way, without the outcome.
TEST_F(Router, AnAnswerCutShortSaysAWriteMayHaveRun) {
    FaultNode half(false, true);
    ASSERT_EQ(shard("PUT", "/_shard/nodes/h1",
                    "{\"addr\":\"127.0.0.1:" + std::to_string(half.port()) + "\",\"token\":\"t\"}")
                  .status,
              201);
    make_tenant("acme", R"({"node":"h1"})");
    auto write = data("POST", "/t/acme/query", R"({"query":"put notes {title: \"x\"}"})");
    EXPECT_EQ(write.status, 502) << write.body;
    EXPECT_NE(write.body.find("\"outcome\":\"unknown\""), std::string::npos) << write.body;
    EXPECT_EQ(half.cut(), 1) << "not sent again";
    auto read = data("GET", "/t/acme/c/notes");
    EXPECT_EQ(read.status, 502) << read.body;
    EXPECT_EQ(read.body.find("outcome"), std::string::npos) << read.body;
}

// --upstream-poll-us: a loop polling for a node's answer forwards as one that sleeps, reuses its
// pooled connection (and read buffer) request after request, and keeps the resend rules.
TEST_F(Router, PollingForAnswersKeepsTheRules) {
    start_router({"--upstream-poll-us", "200"});
    add_node(0);
    make_tenant("acme", kNotes);
    for (int i = 0; i < 3; ++i) {
        auto w = data("POST", "/t/acme/query", R"({"query":"put notes {title: \"p\"}"})");
        EXPECT_EQ(w.status, 200) << w.body;
        EXPECT_EQ(data("GET", "/t/acme/c/notes?count").body,
                  R"({"count":)" + std::to_string(i + 1) + "}");
    }
    auto m = shard("GET", "/_metrics");
    EXPECT_NE(m.body.find("fenec_router_upstream_idle_connections{node=\"n1\"} 1\n"),
              std::string::npos)
        << m.body;
    FaultNode fault;
    ASSERT_EQ(shard("PUT", "/_shard/nodes/f1",
                    "{\"addr\":\"127.0.0.1:" + std::to_string(fault.port()) + "\",\"token\":\"t\"}")
                  .status,
              201);
    make_tenant("cut", R"({"node":"f1"})");
    auto write = data("POST", "/t/cut/query", R"({"query":"put notes {title: \"x\"}"})");
    EXPECT_EQ(write.status, 502) << write.body;
    EXPECT_NE(write.body.find("\"outcome\":\"unknown\""), std::string::npos) << write.body;
    EXPECT_EQ(fault.cut(), 1);
    EXPECT_EQ(data("GET", "/t/cut/c/notes").status, 502);
    EXPECT_EQ(fault.cut(), 3);  // sent twice
}

// §5.5: no answer head within --upstream-timeout is 504 naming the node, counted per node.
TEST_F(Router, SilentNodeIs504) {
    start_router({"--upstream-timeout", "0.5"});
    FaultNode silent(true);
    ASSERT_EQ(shard("PUT", "/_shard/nodes/s1",
                    "{\"addr\":\"127.0.0.1:" + std::to_string(silent.port()) + "\",\"token\":\"t\"}")
                  .status,
              201);
    make_tenant("acme", R"({"node":"s1"})");
    const auto t0 = std::chrono::steady_clock::now();
    auto r = data("POST", "/t/acme/query", R"({"query":"get notes"})");
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 504) << r.body;
    EXPECT_NE(r.body.find("s1"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("within 0.5 s"), std::string::npos) << r.body;
    // A POST sent whole and not answered may have run: the router cannot tell a read statement.
    EXPECT_NE(r.body.find("\"outcome\":\"unknown\""), std::string::npos) << r.body;
    EXPECT_GE(ms, 450);
    EXPECT_LT(ms, 3000);
    auto m = shard("GET", "/_metrics");
    EXPECT_NE(m.body.find("fenec_router_upstream_errors_total{node=\"s1\"} 1"), std::string::npos) << m.body;
}

}  // namespace
}  // namespace fenec::test::router_test
