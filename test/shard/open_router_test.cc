// test/shard/open_router_test.cc: the router and a node's open planes (router.md §3, node-http.md
// §3.1, §3.3; docs/http-node.md) with real processes. A router without --token takes only a
// loopback or literal Host (so a DNS-rebinding browser is stopped at its edge), on /_shard/ and /t/
// alike; one with a token takes any. `make run`'s shape, a node with only an admin token behind a
// router without one, answers curl's `Host: localhost:<port>` through the router; a named router in
// front of an open node works, since the node verifies the router's mark. The node's audit line for
// a request through the router names the client as peer and the router as via, and skips the node's
// delay.
#include <gtest/gtest.h>

#include "test/shard/shard_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::open_router_test {
namespace {

const std::string ROOT = "router-token-open";
const std::string D = "data-token-open";
const std::string A = "admin-token-of-the-open-node";

// One request on a fresh connection with the test's own Host line.
Reply with_host(uint16_t port, std::string_view method, std::string_view target,
                const std::string& host,
                std::vector<std::pair<std::string, std::string>> headers = {},
                std::string_view body = {}) {
    Client c(port, 5000);
    std::string req =
        std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: " + host + "\r\n";
    for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    req += body;
    EXPECT_TRUE(c.send_raw(req));
    return c.read_reply().value_or(Reply{});
}

struct RoutedNode {
    // A node with `node_flags` and a router with `router_flags`, the node added as n1 with the
    // admin token A, tenant acme on it with a notes collection and row 1.
    RoutedNode(std::vector<std::string> node_flags, std::vector<std::string> router_flags) {
        node = std::make_unique<NodeProcess>(node_dir.path(), node_flags);
        EXPECT_NE(node->port(), 0) << node->first_line();
        router_flags.insert(router_flags.end(),
                            {"--directory", dir.path() + "/shard.fenec", "--auth-delay", "0"});
        router = std::make_unique<RouterProcess>(router_flags);
        EXPECT_NE(router->port(), 0);
        local = "127.0.0.1:" + std::to_string(router->port());
        auto r = with_host(router->port(), "PUT", "/_shard/nodes/n1", local, bearer(ROOT),
                           "{\"addr\":\"127.0.0.1:" + std::to_string(node->port()) +
                               "\",\"token\":\"" + A + "\"}");
        EXPECT_EQ(r.status, 201) << r.body;
        r = with_host(router->port(), "PUT", "/_shard/tenants/acme", local, bearer(ROOT),
                      R"J({"node":"n1","schema":["create collection notes (title text)"]})J");
        EXPECT_EQ(r.status, 201) << r.body;
    }
    TempDir dir;
    TempDir node_dir;
    std::unique_ptr<NodeProcess> node;
    std::unique_ptr<RouterProcess> router;
    std::string local;  // the router's literal host:port
};

// A router without --token: a foreign Host is 400 on /_shard/ and /t/, a loopback or literal one
// passes (`make run`: curl's `Host: localhost:<port>`); /_health answers anyone.
TEST(OpenRouter, ForeignHostIs400) {
    RoutedNode s({"--admin-token", A, "--auth-delay", "0"}, {});
    const uint16_t port = s.router->port();
    const std::string at = ":" + std::to_string(port);
    const std::vector<std::string> local = {"localhost" + at, s.local, "[::1]" + at};
    const std::vector<std::string> foreign = {"evil.example" + at, "evil.example"};
    for (const std::string target : {"/_shard/nodes", "/t/acme/c/notes", "/_metrics"}) {
        for (const std::string& host : local) {
            const Reply r = with_host(port, "GET", target, host);
            EXPECT_EQ(r.status, 200) << target << " " << host << " " << r.body;
        }
        for (const std::string& host : foreign) {
            const Reply r = with_host(port, "GET", target, host);
            EXPECT_EQ(r.status, 400) << target << " " << host;
            EXPECT_NE(r.body.find("Host must be a loopback or literal"), std::string::npos)
                << r.body;
        }
    }
    EXPECT_EQ(with_host(port, "GET", "/_health", "evil.example").status, 200);
    const Reply w = with_host(port, "PUT", "/t/acme/c/notes/1", "localhost" + at, {},
                              R"({"title":"through the router"})");
    EXPECT_LT(w.status, 300) << w.body;
}

// A router with --token takes a named Host (its clients' name for it) and sends the node its
// directory address with a mark the node verifies: an open data plane behind it answers.
TEST(OpenRouter, NamedRouterInFrontOfAnOpenNode) {
    RoutedNode s({"--admin-token", A, "--auth-delay", "0"}, {"--token", ROOT});
    const uint16_t port = s.router->port();
    EXPECT_EQ(with_host(port, "GET", "/_shard/nodes", "db.example", bearer(ROOT)).status, 200);
    const Reply r = with_host(port, "GET", "/t/acme/c/notes", "db.example");
    EXPECT_EQ(r.status, 200) << r.body;
    // The node asked straight with that name refuses it: its data plane is open.
    EXPECT_EQ(with_host(s.node->port(), "GET", "/t/acme/c/notes", "db.example").status, 400);
}

// node-http.md §3.3 through a real router: a bad data token's 401s are not delayed by the node
// (--auth-delay 300 there, 0 at the router), and the node's audit line names the client as peer
// and the router's address as via.
TEST(RouterMark, NodeAuditNamesVia) {
    TempDir logs;
    const std::string log = logs.path() + "/node-audit.log";
    RoutedNode s({"--token", D, "--admin-token", A, "--auth-delay", "300", "--audit", log},
                 {"--token", ROOT});
    const uint16_t port = s.router->port();
    for (int i = 0; i < 3; ++i) {
        const auto t = std::chrono::steady_clock::now();
        const Reply r = with_host(
            port, "GET", "/t/acme/c/notes", s.local,
            {{"Authorization", "Bearer wrong"}, {"X-Request-Id", "via-" + std::to_string(i)}});
        EXPECT_EQ(r.status, 401) << r.body;
        EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t)
                      .count(),
                  250)
            << "the node delayed a request its router marked";
    }
    std::string line;
    wait_until([&] {
        std::istringstream in(read_file(log));
        for (std::string l; std::getline(in, l);) {
            if (l.find("\"request_id\":\"via-2\"") != std::string::npos) line = l;
        }
        return !line.empty();
    });
    ASSERT_FALSE(line.empty()) << read_file(log);
    EXPECT_NE(line.find("\"peer\":\"127.0.0.1\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"via\":\"127.0.0.1:"), std::string::npos) << line;
}

}  // namespace
}  // namespace fenec::test::open_router_test
