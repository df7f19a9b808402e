// test/server/node/replication_copy_test.cc: how a copy's file is replaced or removed under
// replication (node-http.md §8.1, §8.7, §10.2, §10.4, §11): a delete ends the tenant's feed
// streams `deleted`; a follower's image goes through the registry's out-of-service install,
// ending the copy's subscribers and the streams served from it `closing`; a follow with no copy
// here makes an empty one of the given lineage, which answers lineage checks and promotes; a
// block over the frame bound goes as `C` continuation frames and replicates whole.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "server/node/replication.h"
#include "test/server/node/node_fixture.h"

namespace fenec::test::replication_copy_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";
const std::string R = "replication-token-r";

struct Node {
    TempDir dir;
    std::unique_ptr<NodeProcess> proc;

    void start() {
        proc = std::make_unique<NodeProcess>(
            dir.path(), std::vector<std::string>{"--token", D, "--admin-token", A,
                                                 "--replication-token", R, "--auth-delay", "0"});
        ASSERT_NE(proc->port(), 0) << proc->first_line();
    }
    uint16_t port() const { return proc->port(); }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }
    Reply call(std::string_view method, std::string_view target, std::string_view body,
               const std::string& token) {
        Client c(port());
        return c.request(method, target, body, bearer(token)).value_or(Reply{});
    }
    Reply admin(std::string_view method, std::string_view target, std::string_view body = {}) {
        return call(method, target, body, A);
    }
    Reply put(const std::string& title) {
        return call("POST", "/t/acme/query",
                    "{\"query\":\"put notes {title: $1}\",\"params\":[\"" + title + "\"]}", D);
    }
    std::string count() { return call("GET", "/t/acme/c/notes?count", {}, D).body; }
    // A raw stream opened on `c`: the feed (replication token) or a subscription (data token).
    static void open_feed(Client& c) {
        c.send_raw("GET /_replication/tenants/acme HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                   R + "\r\n\r\n");
    }
    static void open_changes(Client& c) {
        c.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
                   "\r\n\r\n");
    }
};

std::string member(const std::string& body, const std::string& key) {
    const size_t at = body.find("\"" + key + "\":");
    if (at == std::string::npos) return "";
    size_t from = at + key.size() + 3;
    size_t end = from;
    if (body[from] == '"') {
        end = body.find('"', from + 1);
        return body.substr(from + 1, end - from - 1);
    }
    while (end < body.size() && body[end] != ',' && body[end] != '}') ++end;
    return body.substr(from, end - from);
}

bool eventually(const std::function<bool()>& ok, int ms = 8000) {
    return wait_until(ok, std::chrono::milliseconds(ms));
}

int64_t ms_since(std::chrono::steady_clock::time_point t) {
    const auto d = std::chrono::steady_clock::now() - t;
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

class ReplicationCopy : public ::testing::Test {
protected:
    void SetUp() override {
        n.start();
        n2.start();
        create();
    }
    void create() {
        auto r = n.admin("PUT", "/_admin/tenants/acme",
                         R"J({"schema":["create collection notes (title text)"]})J");
        ASSERT_EQ(r.status, 201) << r.body;
        lineage = member(r.body, "lineage");
        ASSERT_EQ(n.put("a").status, 200);
    }
    Node n, n2;
    std::string lineage;
};

// §8.1, §10.2: a delete ends the tenant's feed streams with `E {"reason":"deleted"}` and does not
// wait on them.
TEST_F(ReplicationCopy, DeleteEndsItsFeedStreamsDeleted) {
    Client feed(n.port(), 5000);
    Node::open_feed(feed);
    ASSERT_NE(feed.read_until("\"digest\"", 3000).find("\"digest\""), std::string::npos);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(n.admin("DELETE", "/_admin/tenants/acme").status, 204);
    EXPECT_LT(ms_since(t0), 3000);
    const std::string got = feed.read_until("\"reason\":\"deleted\"", 3000);
    EXPECT_NE(got.find("\"reason\":\"deleted\""), std::string::npos);
    EXPECT_TRUE(feed.closed_within(3000));
}

// §8.1: deleting a followed copy stops its follower rather than wait on it, and removes
// `<t>.follows` with the file: the copy stays gone.
TEST_F(ReplicationCopy, DeletingAFollowedCopyStopsFollowing) {
    auto f = n2.admin("POST", "/_admin/tenants/acme/follow",
                      "{\"from\":\"" + n.url() + "\",\"wait_ms\":3000}");
    ASSERT_EQ(f.status, 200) << f.body;
    ASSERT_TRUE(eventually([&] { return n2.count() == R"({"count":1})"; })) << n2.count();
    const auto t0 = std::chrono::steady_clock::now();
    auto d = n2.admin("DELETE", "/_admin/tenants/acme");
    EXPECT_EQ(d.status, 204) << d.body;
    EXPECT_LT(ms_since(t0), 3000);
    ASSERT_EQ(n.put("b").status, 200);
    // The follower is gone: the primary streams to nobody, and the copy stays absent.
    EXPECT_TRUE(eventually([&] {
        return n.admin("GET", "/_admin/tenants/acme").body.find("\"followers\":[]") !=
               std::string::npos;
    }));
    EXPECT_EQ(n2.admin("GET", "/_admin/tenants/acme").status, 404);
    EXPECT_FALSE(std::filesystem::exists(n2.dir.path() + "/acme.follows"));
}

// §10.4, §11: a follower's image installs with its copy out of service: the copy's subscribers
// end `closing`, a stream served from the copy ends `closing`, and the new file is served.
TEST_F(ReplicationCopy, FollowersImageEndsSubscribersAndStreamsFromTheCopy) {
    auto f = n2.admin("POST", "/_admin/tenants/acme/follow",
                      "{\"from\":\"" + n.url() + "\",\"wait_ms\":3000}");
    ASSERT_EQ(f.status, 200) << f.body;
    ASSERT_TRUE(eventually([&] { return n2.count() == R"({"count":1})"; })) << n2.count();
    Client sub(n2.port(), 5000);
    Node::open_changes(sub);
    ASSERT_NE(sub.read_until("event: seed", 3000).find("event: seed"), std::string::npos);
    Client chained(n2.port(), 5000);
    Node::open_feed(chained);
    ASSERT_NE(chained.read_until("\"digest\"", 3000).find("\"digest\""), std::string::npos);

    // The primary's copy deleted and made again: another lineage, so the follower takes an image.
    ASSERT_EQ(n.admin("DELETE", "/_admin/tenants/acme").status, 204);
    create();
    ASSERT_EQ(n.put("b").status, 200);
    EXPECT_TRUE(eventually([&] { return n2.count() == R"({"count":2})"; })) << n2.count();
    EXPECT_EQ(member(n2.admin("GET", "/_admin/tenants/acme").body, "lineage"), lineage);
    EXPECT_EQ(member(n2.admin("GET", "/_admin/tenants/acme").body, "images"), "2");
    EXPECT_NE(sub.read_until("\"reason\":\"closing\"", 3000).find("\"reason\":\"closing\""),
              std::string::npos)
        << sub.buffer();
    EXPECT_NE(chained.read_until("\"reason\":\"closing\"", 3000).find("\"reason\":\"closing\""),
              std::string::npos);
}

// §8.7: with no copy here, follow makes an empty one of `lineage`; never imaged (its primary
// unreachable), it answers a lineage check and is promoted; another lineage is refused.
TEST_F(ReplicationCopy, FollowMakesAnEmptyCopyOfTheLineage) {
    const std::string l = "00000000000000ab";
    auto f = n2.admin("POST", "/_admin/tenants/acme/follow",
                      R"({"from":"http://127.0.0.1:1","lineage":")" + l + "\"}");
    ASSERT_EQ(f.status, 200) << f.body;
    auto look = n2.admin("GET", "/_admin/tenants/acme");
    ASSERT_EQ(look.status, 200) << look.body;
    EXPECT_EQ(member(look.body, "lineage"), l);
    EXPECT_EQ(member(look.body, "seq"), "0");
    const std::string schema = R"J({"query":"create collection notes (title text)"})J";
    EXPECT_EQ(n2.call("POST", "/t/acme/query", schema, D).status, 503);  // a replica
    EXPECT_EQ(n2.admin("POST", "/_admin/tenants/acme/promote", R"({"lineage":"00000000000000ac"})")
                  .status,
              409);
    auto p = n2.admin("POST", "/_admin/tenants/acme/promote", R"({"lineage":")" + l + "\"}");
    ASSERT_EQ(p.status, 200) << p.body;
    EXPECT_EQ(member(p.body, "forked"), "true");
    EXPECT_EQ(n2.call("POST", "/t/acme/query", schema, D).status, 200);
    EXPECT_EQ(n2.put("x").status, 200);
}

// §8.7, §10.3: an empty copy of the primary's lineage stands at 0 of it and catches up.
TEST_F(ReplicationCopy, AnEmptyCopyOfThePrimarysLineageCatchesUp) {
    auto f = n2.admin("POST", "/_admin/tenants/acme/follow",
                      "{\"from\":\"" + n.url() + "\",\"lineage\":\"" + lineage +
                          "\",\"wait_ms\":3000}");
    ASSERT_EQ(f.status, 200) << f.body;
    EXPECT_EQ(member(f.body, "heard"), "true") << f.body;
    EXPECT_TRUE(eventually([&] { return n2.count() == R"({"count":1})"; })) << n2.count();
    ASSERT_EQ(n.put("b").status, 200);
    EXPECT_TRUE(eventually([&] { return n2.count() == R"({"count":2})"; })) << n2.count();
    EXPECT_EQ(member(n2.admin("GET", "/_admin/tenants/acme").body, "lineage"), lineage);
}

// §10.2: a `B` payload past the bound is `C` pieces, each within it, then `B`; joined, it is the
// payload again. One within the bound is a lone `B`.
TEST(FeedFrames, ABlockPastTheBoundGoesInContinuationFrames) {
    std::string payload(10'000, '\0');
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
    const std::vector<std::string> frames = node::encode_block_frames(payload, 4096);
    ASSERT_EQ(frames.size(), 3u);
    std::string joined;
    for (size_t i = 0; i < frames.size(); ++i) {
        node::Frame f;
        size_t used = 0;
        std::string error;
        ASSERT_EQ(node::decode_frame(frames[i], f, used, error, 4096), node::FrameRead::frame)
            << error;
        EXPECT_EQ(used, frames[i].size());
        EXPECT_EQ(f.kind, i + 1 < frames.size() ? 'C' : 'B');
        EXPECT_LE(f.payload.size(), 4096u);
        joined += f.payload;
    }
    EXPECT_EQ(joined, payload);
    EXPECT_EQ(node::encode_block_frames("small", 4096).size(), 1u);
    // The receiver's bound refuses a frame past it.
    node::Frame f;
    size_t used = 0;
    std::string error;
    EXPECT_EQ(node::decode_frame(node::encode_frame('B', payload), f, used, error, 4096),
              node::FrameRead::bad);
    EXPECT_NE(error.find("over the bound"), std::string::npos) << error;
}

// §10.2 end to end: with the frame bound at 4 KiB on both nodes, a 64 KiB block replicates.
TEST(ReplicationBigBlock, ABlockPastTheFrameBoundReplicates) {
    ::setenv("FENEC_TEST_FEED_FRAME_BYTES", "4096", 1);
    Node n, n2;
    n.start();
    n2.start();
    ::unsetenv("FENEC_TEST_FEED_FRAME_BYTES");
    auto r = n.admin("PUT", "/_admin/tenants/acme",
                     R"J({"schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(r.status, 201) << r.body;
    ASSERT_EQ(n.put("a").status, 200);
    auto f = n2.admin("POST", "/_admin/tenants/acme/follow",
                      "{\"from\":\"" + n.url() + "\",\"wait_ms\":3000}");
    ASSERT_EQ(f.status, 200) << f.body;
    ASSERT_TRUE(eventually([&] { return n2.count() == R"({"count":1})"; })) << n2.count();
    const std::string big(64 << 10, 'q');
    ASSERT_EQ(n.put(big).status, 200);
    ASSERT_EQ(n.put("after").status, 200);
    EXPECT_TRUE(eventually([&] { return n2.count() == R"({"count":3})"; })) << n2.count();
    auto q = n2.call("POST", "/t/acme/query",
                     R"J({"query":"get notes where title = $1 select count(*)","params":[")J" +
                         big + "\"]}",
                     D);
    EXPECT_NE(q.body.find(":1}"), std::string::npos) << q.body.substr(0, 200);
    auto look = n2.admin("GET", "/_admin/tenants/acme");
    EXPECT_EQ(member(look.body, "images"), "1") << look.body;  // the first only: no reconnect
    EXPECT_EQ(member(look.body, "reconnects"), "0") << look.body;
}

}  // namespace
}  // namespace fenec::test::replication_copy_test
