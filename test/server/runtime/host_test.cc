// test/server/runtime/host_test.cc: the open plane's Host rule (server/runtime/host.h): localhost
// and literal addresses pass with or without a port; a name, a malformed literal or port, and a
// missing Host on HTTP/1.1 are refused.
#include "server/runtime/host.h"

#include <gtest/gtest.h>

namespace fenec::server::host_test {
namespace {

bool ok(std::string_view host) { return host_is_local_or_literal(host, 1); }

TEST(OpenPlaneHost, LocalhostAndLiteralsPass) {
    for (std::string_view h :
         {"localhost", "LocalHost:8081", "127.0.0.1", "127.0.0.1:65535", "10.1.2.3:80", "[::1]",
          "[::1]:8081", "[fe80::1]", "[::ffff:127.0.0.1]:1"}) {
        EXPECT_TRUE(ok(h)) << h;
    }
}

TEST(OpenPlaneHost, NamesAndMalformedAreRefused) {
    for (std::string_view h : {"evil.example", "evil.example:8081", "localhost.evil.example",
                               "localhost.", "127.0.0.1.nip.io", "127.1", "0x7f.0.0.1",
                               "127.0.0.1:", "127.0.0.1:123456", "127.0.0.1:80a", "[::1", "::1",
                               "[::1]8081", "[::1]:", "[evil]", "", ":8081", "localhost:80:80"}) {
        EXPECT_FALSE(ok(h)) << h;
    }
}

TEST(OpenPlaneHost, MissingHostOnlyOnHttp10) {
    EXPECT_TRUE(host_is_local_or_literal(std::nullopt, 0));
    EXPECT_FALSE(host_is_local_or_literal(std::nullopt, 1));
}

}  // namespace
}  // namespace fenec::server::host_test
