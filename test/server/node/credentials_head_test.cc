// test/server/node/credentials_head_test.cc: credentials before bodies (issue 17 item 4) against
// the real binary. On a guarded plane a head without the credential the plane takes is refused
// with its body unread: no `100 Continue` is sent to it, its 401 (or 403) comes while the client
// is still sending, and the connection closes. A head that carries the credential still gets its
// 100 and is served.
#include <gtest/gtest.h>

#include "test/server/node/node_fixture.h"

namespace fenec::test::credentials_head_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

std::unique_ptr<NodeProcess> start_node(const TempDir& dir) {
    auto n = std::make_unique<NodeProcess>(
        dir.path(),
        std::vector<std::string>{"--token", D, "--admin-token", A, "--auth-delay", "0"});
    EXPECT_NE(n->port(), 0) << n->first_line();
    return n;
}

std::string head(std::string_view target, uint64_t length, std::string_view extra) {
    return "POST " + std::string(target) +
           " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
           "Content-Length: " + std::to_string(length) + "\r\n" + std::string(extra) + "\r\n";
}

TEST(Credentials, NoCredentialNo100Continue) {
    TempDir dir;
    auto node = start_node(dir);
    Client c(node->port());
    ASSERT_TRUE(c.send_raw(head("/t/acme/query", 10'000'000, "Expect: 100-continue\r\n")));
    const std::string got = c.read_until("\r\n\r\n", 5000);
    EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0u) << got;
    EXPECT_EQ(got.find("100 Continue"), std::string::npos) << got;
    EXPECT_TRUE(c.closed_within(5000));
}

// No Expect: the client sends its body at once; the 401 comes after its first 64 KiB, while
// the rest of the megabyte is still to be sent.
TEST(Credentials, TheRefusalComesBeforeTheBodyIsSent) {
    TempDir dir;
    auto node = start_node(dir);
    for (const auto& [target, auth, status] :
         {std::tuple<std::string, std::string, int>{"/t/acme/query", "", 401},
          {"/_admin/tenants", "", 401},
          {"/_admin/tenants", "Authorization: Bearer " + D + "\r\n", 403},
          {"/t/acme/query", "Authorization: Bearer " + A + "\r\n", 403}}) {
        Client c(node->port());
        ASSERT_TRUE(c.send_raw(head(target, 1 << 20, auth)));
        ASSERT_TRUE(c.send_raw(std::string(64 << 10, ' ')));
        auto r = c.read_reply();
        ASSERT_TRUE(r) << target;
        EXPECT_EQ(r->status, status) << target << " " << r->body;
        EXPECT_TRUE(r->closed) << target;
    }
}

TEST(Credentials, ACredentialedHeadStillGets100) {
    TempDir dir;
    auto node = start_node(dir);
    Client c(node->port());
    const std::string body = R"J({"schema":["create collection notes (title text)"]})J";
    ASSERT_TRUE(c.send_raw(
        "PUT /_admin/tenants/acme HTTP/1.1\r\nHost: x\r\nContent-Type: "
        "application/json\r\nAuthorization: Bearer " +
        A + "\r\nExpect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n\r\n"));
    const std::string got = c.read_until("\r\n\r\n", 5000);
    EXPECT_EQ(got.rfind("HTTP/1.1 100", 0), 0u) << got;
    c.drop(got.find("\r\n\r\n") + 4);
    ASSERT_TRUE(c.send_raw(body));
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 201) << r->body;
}

}  // namespace
}  // namespace fenec::test::credentials_head_test
