// test/server/runtime/mark_test.cc: the router's mark (server/runtime/mark.h), the one codec the
// router makes and the node verifies: it is exactly HMAC-SHA256 over "fenec-router\n<client>\n<id>"
// cut to 16 bytes (OpenSSL's one-shot HMAC as the oracle) for short, block-sized and long tokens,
// again with the prepared state reused and on another thread; it round-trips through
// verify_router_mark and a tampered mark, client, id or token is refused. The relay mark (§11.5):
// its message with the request line last, and refused on any other request.
#include "server/runtime/mark.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>
#include <thread>

#include "server/runtime/base64url.h"

namespace fenec::server::mark_test {
namespace {

// The mark computed independently of the code under test.
std::string oracle(std::string_view token, std::string_view client, std::string_view id) {
    const std::string message = "fenec-router\n" + std::string(client) + "\n" + std::string(id);
    unsigned char mac[32];
    unsigned int len = 0;
    HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
         reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
    return base64url_encode(std::string_view(reinterpret_cast<char*>(mac), 16));
}

TEST(RouterMark, IsTheHmacOfItsMessage) {
    const std::string tokens[] = {
        "a", "bench-admin-token", std::string(64, 'k'), std::string(65, 'k'), std::string(300, 'z'),
        ""};
    for (const std::string& token : tokens) {
        for (const char* id : {"0123456789abcdef", "x", ""}) {
            EXPECT_EQ(router_mark(token, "127.0.0.1", id), oracle(token, "127.0.0.1", id))
                << "token of " << token.size() << " bytes, id " << id;
            // Again: the prepared state is reused, not consumed.
            EXPECT_EQ(router_mark(token, "::1", id), oracle(token, "::1", id));
        }
    }
    std::string other;
    std::thread t([&] { other = router_mark("bench-admin-token", "10.0.0.1", "r1"); });
    t.join();
    EXPECT_EQ(other, oracle("bench-admin-token", "10.0.0.1", "r1"));
}

TEST(RouterMark, RoundTripsAndRefusesTampering) {
    const std::string admin = "A-token";
    std::string mark = router_mark(admin, "203.0.113.9", "req-1");
    EXPECT_EQ(mark.size(), 22u);  // 16 bytes, base64url without padding
    EXPECT_EQ(base64url_decode(mark)->size(), 16u);
    std::string client;
    ASSERT_TRUE(verify_router_mark(admin, "203.0.113.9 " + mark, "req-1", client));
    EXPECT_EQ(client, "203.0.113.9");
    std::string v6 = router_mark(admin, "2001:db8::1", "r");
    ASSERT_TRUE(verify_router_mark(admin, "2001:db8::1 " + v6, "r", client));
    EXPECT_EQ(client, "2001:db8::1");

    client.clear();
    std::string tampered = mark;
    tampered[3] = tampered[3] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(verify_router_mark(admin, "203.0.113.9 " + tampered, "req-1", client));
    EXPECT_FALSE(verify_router_mark(admin, "203.0.113.8 " + mark, "req-1", client));
    EXPECT_FALSE(verify_router_mark(admin, "203.0.113.9 " + mark, "req-2", client));
    EXPECT_FALSE(verify_router_mark("other", "203.0.113.9 " + mark, "req-1", client));
    EXPECT_FALSE(verify_router_mark("", "203.0.113.9 " + router_mark("", "203.0.113.9", "req-1"),
                                    "req-1", client));
    EXPECT_FALSE(verify_router_mark(admin, mark, "req-1", client));
    EXPECT_FALSE(verify_router_mark(admin, "203.0.113.9 " + mark + "A", "req-1", client));
    EXPECT_EQ(client, "");
}

// The relay mark computed independently: §11.5's message, the request line last.
std::string relay_oracle(std::string_view token, std::string_view client, std::string_view id,
                         std::string_view method, std::string_view target) {
    const std::string message = "fenec-relay\n" + std::string(client) + "\n" + std::string(id) +
                                "\n" + std::string(method) + " " + std::string(target);
    unsigned char mac[32];
    unsigned int len = 0;
    HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
         reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
    return base64url_encode(std::string_view(reinterpret_cast<char*>(mac), 16));
}

TEST(RelayMark, IsTheHmacOfItsMessage) {
    for (const std::string& token :
         {std::string("root"), std::string(64, 'r'), std::string(90, 'q')}) {
        EXPECT_EQ(relay_mark(token, "198.51.100.7", "id-1", "PUT", "/_shard/tenants/acme"),
                  relay_oracle(token, "198.51.100.7", "id-1", "PUT", "/_shard/tenants/acme"));
        EXPECT_EQ(relay_mark(token, "::1", "", "GET", "/t/acme/c/books/1?x=1"),
                  relay_oracle(token, "::1", "", "GET", "/t/acme/c/books/1?x=1"));
    }
    // The same token's router mark is another message, so another mark.
    EXPECT_NE(relay_mark("root", "198.51.100.7", "id-1", "", ""),
              router_mark("root", "198.51.100.7", "id-1"));
}

TEST(RelayMark, VerifiesOnlyOnTheRequestItWasMadeFor) {
    const std::string token = "shared-root-token";
    const std::string mark = relay_mark(token, "203.0.113.9", "req-1", "POST", "/t/acme/query");
    std::string client;
    ASSERT_TRUE(
        verify_relay_mark(token, "203.0.113.9 " + mark, "req-1", "POST", "/t/acme/query", client));
    EXPECT_EQ(client, "203.0.113.9");

    client.clear();
    const std::string value = "203.0.113.9 " + mark;
    // Replayed on another request: another id, method or target.
    EXPECT_FALSE(verify_relay_mark(token, value, "req-2", "POST", "/t/acme/query", client));
    EXPECT_FALSE(verify_relay_mark(token, value, "req-1", "PUT", "/t/acme/query", client));
    EXPECT_FALSE(verify_relay_mark(token, value, "req-1", "POST", "/t/other/query", client));
    // Another client named, another token, none, or a router's mark in its place.
    EXPECT_FALSE(
        verify_relay_mark(token, "203.0.113.8 " + mark, "req-1", "POST", "/t/acme/query", client));
    EXPECT_FALSE(verify_relay_mark("other", value, "req-1", "POST", "/t/acme/query", client));
    EXPECT_FALSE(verify_relay_mark(
        "", "203.0.113.9 " + relay_mark("", "203.0.113.9", "req-1", "POST", "/t/acme/query"),
        "req-1", "POST", "/t/acme/query", client));
    EXPECT_FALSE(verify_relay_mark(token,
                                   "203.0.113.9 " + router_mark(token, "203.0.113.9", "req-1"),
                                   "req-1", "POST", "/t/acme/query", client));
    EXPECT_FALSE(verify_relay_mark(token, mark, "req-1", "POST", "/t/acme/query", client));
    EXPECT_FALSE(verify_relay_mark(token, std::string("\x01") + "bad " + mark, "req-1", "POST",
                                   "/t/acme/query", client));
    EXPECT_EQ(client, "");
}

}  // namespace
}  // namespace fenec::server::mark_test
