// test/server/node/test_hooks_test.cc: the test hooks (server/node/test_hooks.h) are in the node
// the tests start and in no release. fenec-node holds none of the hooks' header or variable names,
// which fenec-node-hooks holds (so the look finds them where they are); a `Fenec-Test-Now` pins a
// statement's `now` on fenec-node-hooks and is ignored by fenec-node; a `Fenec-Test-Stall: land=`
// holds a write's answer on fenec-node-hooks and not on fenec-node; FENEC_TEST_FEED_FRAME_BYTES
// cuts a block into `C` frames on fenec-node-hooks' feed and not on fenec-node's.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iterator>
#include <memory>

#include "test/server/node/node_fixture.h"
#include "test/support/file_search.h"

namespace fenec::test::test_hooks_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";
const std::string R = "replication-token-r";

// The names by which a request or the environment reaches a hook.
const char* const hook_names[] = {"Fenec-Test-Stall", "Fenec-Test-Now",
                                  "FENEC_TEST_FEED_FRAME_BYTES",
                                  "FENEC_TEST_IMAGE_IN_MEMORY_BYTES"};

TEST(TestHooks, OnlyTheHooksBuildNamesThem) {
    // The hooks build holds each name; the release none, nor anything under the two prefixes.
    std::vector<std::string> names(std::begin(hook_names), std::end(hook_names));
    const auto hooks = file_contains(FENEC_NODE_BIN, names);
    ASSERT_TRUE(hooks.has_value()) << FENEC_NODE_BIN;
    for (size_t i = 0; i < names.size(); ++i) {
        EXPECT_TRUE((*hooks)[i]) << names[i] << " not in " << FENEC_NODE_BIN;
    }
    const std::vector<std::string> prefixes = {"Fenec-Test-", "FENEC_TEST_"};
    const auto release = file_contains(FENEC_NODE_RELEASE_BIN, prefixes);
    ASSERT_TRUE(release.has_value()) << FENEC_NODE_RELEASE_BIN;
    for (size_t i = 0; i < prefixes.size(); ++i) {
        EXPECT_FALSE((*release)[i]) << prefixes[i] << " in " << FENEC_NODE_RELEASE_BIN;
    }
}

// One node process (`binary`) with tenant acme holding `events (t timestamp, title text)`.
class Started {
  public:
    explicit Started(const char* binary)
        : node_(dir_.path(),
                {"--token", D, "--admin-token", A, "--replication-token", R, "--auth-delay", "0"},
                {}, binary) {
        EXPECT_NE(node_.port(), 0) << binary << ": " << node_.first_line();
        client_ = std::make_unique<Client>(node_.port());
        auto r = client_->request(
            "PUT", "/_admin/tenants/acme",
            R"J({"schema":["create collection events (t timestamp, title text)"]})J", bearer(A));
        EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    }
    uint16_t port() const { return node_.port(); }
    Reply query(const std::string& body,
                std::vector<std::pair<std::string, std::string>> more = {}) {
        auto h = bearer(D);
        h.insert(h.end(), more.begin(), more.end());
        auto r = client_->request("POST", "/t/acme/query", body, h);
        EXPECT_TRUE(r.has_value());
        return r.value_or(Reply{});
    }

  private:
    TempDir dir_;
    NodeProcess node_;
    std::unique_ptr<Client> client_;
};

// The `t` of the one row the statement `put events {t: now()}` wrote under `headers`.
std::string now_written(Started& n, std::vector<std::pair<std::string, std::string>> headers) {
    Reply put = n.query(R"({"query":"put events {t: now()}"})", headers);
    EXPECT_EQ(put.status, 200) << put.body;
    Reply got = n.query(R"({"query":"get events select t"})");
    EXPECT_EQ(got.status, 200) << got.body;
    return got.body;
}

TEST(TestHooks, FenecTestNowPinsNowOnlyInTheHooksBuild) {
    const std::vector<std::pair<std::string, std::string>> pinned = {
        {"Fenec-Test-Now", "2001-02-03T04:05:06.007Z"}};
    Started hooks(FENEC_NODE_BIN);
    EXPECT_EQ(now_written(hooks, pinned), R"({"rows":[{"t":"2001-02-03T04:05:06.007Z"}]})");
    Started release(FENEC_NODE_RELEASE_BIN);
    const std::string body = now_written(release, pinned);
    EXPECT_EQ(body.find("2001-"), std::string::npos) << body;
    EXPECT_NE(body.find(R"({"rows":[{"t":"20)"), std::string::npos) << body;
}

// The time a put under `Fenec-Test-Stall: land=<stall_ms>` takes to be answered.
int64_t answered_after_ms(Started& n, int64_t stall_ms) {
    const auto start = std::chrono::steady_clock::now();
    Reply r = n.query(R"({"query":"put events {t: now()}"})",
                      {{"Fenec-Test-Stall", "land=" + std::to_string(stall_ms)}});
    EXPECT_EQ(r.status, 200) << r.body;
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
}

TEST(TestHooks, FenecTestStallHoldsAWriteOnlyInTheHooksBuild) {
    // A put on a tenant already open is answered in milliseconds (tens under ASan): the release
    // node answers well inside the stall asked for, the hooks build only after it.
    constexpr int64_t stall_ms = 2000;
    Started release(FENEC_NODE_RELEASE_BIN);
    EXPECT_LT(answered_after_ms(release, stall_ms), stall_ms / 2);
    Started hooks(FENEC_NODE_BIN);
    EXPECT_GE(answered_after_ms(hooks, stall_ms), stall_ms);
}

// What acme's feed sends, as it sends it, while a 64 KiB block and then a small one land on a
// node (`binary`) started with FENEC_TEST_FEED_FRAME_BYTES=4096.
std::string feed_of_a_big_block(const char* binary) {
    ::setenv("FENEC_TEST_FEED_FRAME_BYTES", "4096", 1);
    Started n(binary);
    ::unsetenv("FENEC_TEST_FEED_FRAME_BYTES");
    Client feed(n.port(), 5000);
    feed.send_raw("GET /_replication/tenants/acme HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                  R + "\r\n\r\n");
    EXPECT_NE(feed.read_until("\"digest\"", 3000).find("\"digest\""), std::string::npos);
    const std::string put = R"({"query":"put events {title: $1}","params":[")";
    EXPECT_EQ(n.query(put + std::string(64 << 10, 'q') + "\"]}").status, 200);
    EXPECT_EQ(n.query(put + "the end\"]}").status, 200);
    return feed.read_until("the end", 5000);
}

TEST(TestHooks, FeedFrameBytesCutsABlockOnlyInTheHooksBuild) {
    // A `C` frame's head: its kind, then its length (u32 LE), here the bound: 4096.
    const std::string piece_head("C\x00\x10\x00\x00", 5);
    const std::string hooks = feed_of_a_big_block(FENEC_NODE_BIN);
    EXPECT_NE(hooks.find("the end"), std::string::npos);
    EXPECT_NE(hooks.find(piece_head + std::string(4096, 'q')), std::string::npos);
    const std::string release = feed_of_a_big_block(FENEC_NODE_RELEASE_BIN);
    EXPECT_NE(release.find("the end"), std::string::npos);
    EXPECT_NE(release.find(std::string(64 << 10, 'q')), std::string::npos);  // one `B`, whole
    EXPECT_EQ(release.find(piece_head), std::string::npos);
}

}  // namespace
}  // namespace fenec::test::test_hooks_test
