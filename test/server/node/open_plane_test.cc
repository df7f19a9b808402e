// test/server/node/open_plane_test.cc: who a request is, beyond its credential, against the real
// binary. The router's mark (node-http.md §3.3): one that verifies under the admin token skips
// the refusal delay and names the client as the audit's `peer` and the router as `via`; a forged
// one is ignored (delayed, `via` null). The delay is reset only by a credential that reaches the
// plane it asked for. An open plane (§3.1, open planes) takes only a loopback or literal Host, on
// the data, admin and replication planes alike, unless a verified mark says a router judged the
// client's.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/runtime/mark.h"
#include "test/server/node/node_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::open_plane_test {
namespace {

const std::string D = "data-token-open-plane-d";
const std::string A = "admin-token-open-plane-a";
const std::string client_addr = "203.0.113.7";  // a client the router names (TEST-NET-3)

std::unique_ptr<NodeProcess> start(const TempDir& dir, std::vector<std::string> flags) {
    auto n = std::make_unique<NodeProcess>(dir.path(), std::move(flags));
    EXPECT_NE(n->port(), 0) << n->first_line();
    return n;
}

// One request on a fresh connection, its head written here so the Host (or its absence) and
// the version are the test's.
Reply raw(uint16_t port, std::string_view method, std::string_view target,
          std::optional<std::string> host,
          std::vector<std::pair<std::string, std::string>> headers = {},
          std::string_view version = "HTTP/1.1") {
    Client c(port, 5000);
    std::string req =
        std::string(method) + " " + std::string(target) + " " + std::string(version) + "\r\n";
    if (host) req += "Host: " + *host + "\r\n";
    for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
    req += "Content-Length: 0\r\nConnection: close\r\n\r\n";
    EXPECT_TRUE(c.send_raw(req));
    return c.read_reply().value_or(Reply{});
}

// `Fenec-Router` and `X-Request-Id` as a router sends them, marked under `key`.
std::vector<std::pair<std::string, std::string>> marked(const std::string& key,
                                                        const std::string& id) {
    return {{"X-Request-Id", id},
            {"Fenec-Router", client_addr + " " + server::router_mark(key, client_addr, id)}};
}

int64_t ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t)
        .count();
}

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string audit_line(const std::string& path, const std::string& id) {
    const std::string needle = "\"request_id\":\"" + id + "\"";
    std::string found;
    wait_until([&] {
        std::istringstream in(slurp(path));
        for (std::string line; std::getline(in, line);) {
            if (line.find(needle) != std::string::npos) {
                found = line;
                return true;
            }
        }
        return false;
    });
    return found;
}

// §3.3: three bad tokens with a mark that verifies are answered at once (a delay of 200 ms
// doubling would take 1.4 s), and audited with the router's client as peer and the router as via;
// a forged mark is ignored: delayed, and audited as the connection's own.
TEST(Mark, VerifiedMarkSkipsTheDelayAndNamesVia) {
    TempDir dir;
    const std::string log = dir.path() + "/audit.log";
    auto node =
        start(dir, {"--token", D, "--admin-token", A, "--auth-delay", "200", "--audit", log});
    for (int i = 0; i < 3; ++i) {
        const std::string id = "marked-" + std::to_string(i);
        auto h = marked(A, id);
        h.emplace_back("Authorization", "Bearer wrong");
        const auto t = std::chrono::steady_clock::now();
        EXPECT_EQ(raw(node->port(), "GET", "/t/acme/c/notes/1", "127.0.0.1", h).status, 401);
        EXPECT_LT(ms_since(t), 150) << id << " was delayed";
    }
    for (int i = 0; i < 3; ++i) {
        const std::string line = audit_line(log, "marked-" + std::to_string(i));
        ASSERT_FALSE(line.empty());
        EXPECT_NE(line.find("\"peer\":\"" + client_addr + "\""), std::string::npos) << line;
        EXPECT_NE(line.find("\"via\":\"127.0.0.1:"), std::string::npos) << line;
    }
    auto forged = marked("not-the-admin-token", "forged-0");
    forged.emplace_back("Authorization", "Bearer wrong");
    const auto t = std::chrono::steady_clock::now();
    EXPECT_EQ(raw(node->port(), "GET", "/t/acme/c/notes/1", "127.0.0.1", forged).status, 401);
    EXPECT_GE(ms_since(t), 190) << "a forged mark skipped the delay";
    const std::string line = audit_line(log, "forged-0");
    ASSERT_FALSE(line.empty());
    EXPECT_NE(line.find("\"peer\":\"127.0.0.1:"), std::string::npos) << line;
    EXPECT_NE(line.find("\"via\":null"), std::string::npos) << line;
}

// §3.3: a known credential where it does not reach (the data token on /_admin/, a 403) does not
// reset the delay that bad admin tokens built up: the next bad one waits 4x the base, not 1x.
TEST(Delay, DataTokenOnAdminPlaneDoesNotReset) {
    TempDir dir;
    auto node = start(dir, {"--token", D, "--admin-token", A, "--auth-delay", "60"});
    Client c(node->port());
    for (int i = 0; i < 2; ++i) {
        auto r = c.request("GET", "/_admin/tenants", {}, bearer("wrong"));
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 401);
    }
    auto r = c.request("GET", "/_admin/tenants", {}, bearer(D));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403);
    const auto t = std::chrono::steady_clock::now();
    r = c.request("GET", "/_admin/tenants", {}, bearer("wrong"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    EXPECT_GE(ms_since(t), 230) << "the 403 reset the delay";
    // The admin token does reach /_admin/: the next refusal is the first again.
    r = c.request("GET", "/_admin/tenants", {}, bearer(A));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    const auto t2 = std::chrono::steady_clock::now();
    r = c.request("GET", "/_admin/tenants", {}, bearer("wrong"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    EXPECT_LT(ms_since(t2), 230);
}

// §3.1, open planes: a node with no tokens answers a foreign Host 400 on each plane, and what the
// same request with a literal Host gets otherwise; localhost, 127.0.0.1 and [::1] with or without a
// port pass; HTTP/1.1 with no Host is refused, HTTP/1.0 with none is taken.
TEST(OpenPlane, ForeignHostIs400) {
    TempDir dir;
    const std::string log = dir.path() + "/audit.log";
    auto node = start(dir, {"--audit", log});
    const uint16_t port = node->port();
    const std::string at = ":" + std::to_string(port);
    ASSERT_EQ(raw(port, "PUT", "/_admin/tenants/acme", "127.0.0.1" + at).status, 201);
    const std::string targets[] = {"/_admin/tenants", "/_replication/acme", "/t/acme/c/notes/1",
                                   "/_metrics"};
    for (const std::string& target : targets) {
        const int literal = raw(port, "GET", target, "127.0.0.1" + at).status;
        EXPECT_NE(literal, 400) << target;
        const std::vector<std::string> local = {"localhost", "localhost" + at, "127.0.0.1", "[::1]",
                                                "[::1]" + at};
        for (const std::string& host : local) {
            EXPECT_EQ(raw(port, "GET", target, host).status, literal) << target << " " << host;
        }
        EXPECT_EQ(raw(port, "GET", target, std::nullopt, {}, "HTTP/1.0").status, literal) << target;
        const std::vector<std::optional<std::string>> foreign = {
            "evil.example", "evil.example" + at, "localhost.evil.example" + at, std::nullopt};
        for (const std::optional<std::string>& host : foreign) {
            const Reply r = raw(port, "GET", target, host);
            EXPECT_EQ(r.status, 400) << target << " " << host.value_or("(none)");
            EXPECT_NE(r.body.find("plane is open here: Host must be"), std::string::npos) << r.body;
        }
    }
    // A write from a foreign Host is refused before it runs.
    EXPECT_EQ(raw(port, "DELETE", "/_admin/tenants/acme", "evil.example").status, 400);
    EXPECT_EQ(raw(port, "GET", "/_admin/tenants/acme", "127.0.0.1").status, 200) << "not deleted";
    const Reply m = raw(port, "GET", "/_metrics", "127.0.0.1");
    EXPECT_NE(m.body.find("fenec_http_refused_total{reason=\"host\"}"), std::string::npos);
    const std::string refused = audit_line(
        log,
        raw(port, "GET", "/_admin/tenants", "evil.example").header("X-Request-Id").value_or("?"));
    EXPECT_NE(refused.find("\"status\":400"), std::string::npos) << slurp(log);
}

// §3.1, open planes with §3.3: a node whose admin token is set but not its data token (`make run`'s
// node) takes a foreign Host on its open data plane from a router whose mark verifies, since the
// router judged the client's Host at its edge; a forged mark does not pass.
TEST(OpenPlane, VerifiedMarkPassesAForeignHost) {
    TempDir dir;
    auto node = start(dir, {"--admin-token", A});
    const uint16_t port = node->port();
    ASSERT_EQ(raw(port, "PUT", "/_admin/tenants/acme", "127.0.0.1", bearer(A)).status, 201);
    const int literal = raw(port, "GET", "/t/acme/c/notes/1", "127.0.0.1").status;
    EXPECT_NE(literal, 400);
    EXPECT_EQ(raw(port, "GET", "/t/acme/c/notes/1", "db.example", marked(A, "m-1")).status,
              literal);
    EXPECT_EQ(raw(port, "GET", "/t/acme/c/notes/1", "db.example", marked("forged", "m-2")).status,
              400);
    EXPECT_EQ(raw(port, "GET", "/t/acme/c/notes/1", "db.example").status, 400);
}

}  // namespace
}  // namespace fenec::test::open_plane_test
