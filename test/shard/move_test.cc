// test/shard/move_test.cc: moves through fenec-shard (router.md §7, seed 000's five steps) with
// three real fenec-node processes: a vector tenant moved and found the same on the target, ids
// going on (cases 38, 41); writes under a concurrent writer with Idempotency-Keys, none
// acknowledged lost, the freeze's 503s passed through and taken when sent again, reads answered
// throughout, the tenant held by the move (cases 39, 49); a subscription resuming on the target
// from its cursor without a seed (case 40); a router killed mid-move and restarted (case 44, 42);
// a move to a node that is down rolled back (case 43); the refusals of §7.1.
//
// The tests that stop a move part-way use FENEC_TEST_MOVE_STALL (shard/test_hooks.h), which
// fenec-shard-hooks, the router these tests start, reads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "test/shard/shard_fixture.h"

namespace fenec::test::move_test {
namespace {

const std::string ROOT = "root";
const std::string D = "data-token";
std::string admin(int i) { return "admin-token-of-node-" + std::to_string(i + 1); }

// The router's environment for one start: FENEC_TEST_MOVE_STALL set while it forks, then cleared.
class Move : public ::testing::Test {
protected:
    void SetUp() override {
        for (int i = 0; i < 3; ++i) start_node(i);
        start_router();
        for (int i = 0; i < 3; ++i) add_node(i);
    }

    void start_node(int i) {
        nodes_[i].reset();
        nodes_[i] = std::make_unique<NodeProcess>(
            node_dirs_[i].path(),
            std::vector<std::string>{"--token", D, "--admin-token", admin(i), "--auth-delay", "0"});
        ASSERT_NE(nodes_[i]->port(), 0) << nodes_[i]->first_line();
    }
    void start_router(const std::string& stall = {}) {
        client_.reset();
        router_.reset();
        HookEnv env("FENEC_TEST_MOVE_STALL", stall);
        router_ = std::make_unique<RouterProcess>(
            std::vector<std::string>{"--token", ROOT, "--directory", dir_.path() + "/shard.fenec",
                                     "--audit", dir_.path() + "/audit.log", "--auth-delay", "0"},
            dir_.path() + "/router.err");
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
    Reply data(std::string_view method, std::string_view target, std::string_view body = {}) {
        return call(method, target, body, bearer(D));
    }
    Reply node_admin(int i, std::string_view method, std::string_view target) {
        Client c(nodes_[i]->port());
        return c.request(method, target, {}, bearer(admin(i))).value_or(Reply{});
    }
    bool node_holds(int i, const std::string& tenant) {
        return node_admin(i, "GET", "/_admin/tenants").body.find("\"name\":\"" + tenant + "\"") !=
               std::string::npos;
    }
    void add_node(int i) {
        auto r = shard("PUT", "/_shard/nodes/n" + std::to_string(i + 1),
                       "{\"addr\":\"127.0.0.1:" + std::to_string(nodes_[i]->port()) +
                           "\",\"token\":\"" + admin(i) + "\"}");
        ASSERT_EQ(r.status, 201) << r.body;
    }
    void make_acme() {
        auto r = shard("PUT", "/_shard/tenants/acme",
                       R"J({"node":"n1","schema":["create collection notes (title text, n int)"]})J");
        ASSERT_EQ(r.status, 201) << r.body;
    }
    std::string metrics() { return shard("GET", "/_metrics").body; }

    TempDir dir_;
    TempDir node_dirs_[3];
    std::unique_ptr<NodeProcess> nodes_[3];
    std::unique_ptr<RouterProcess> router_;
    std::unique_ptr<Client> client_;
};

// Cases 38 and 41: an @hnsw tenant moved n1 → n2: the answer's fields, only n2 holds it, a `near`
// query through the router finds the same document, and ids go on from the source's.
TEST_F(Move, MovesAVectorTenant) {
    auto r = shard("PUT", "/_shard/tenants/acme",
                   R"J({"node":"n1","schema":["create collection docs (title text, v vector<4> @hnsw)"]})J");
    ASSERT_EQ(r.status, 201) << r.body;
    ASSERT_EQ(data("POST", "/t/acme/c/docs", R"({"title":"a","v":[1,0,0,0]})").status, 201);
    ASSERT_EQ(data("POST", "/t/acme/c/docs", R"({"title":"b","v":[0,1,0,0]})").status, 201);
    const std::string near =
        R"({"query":"get docs select title near v $1 limit 1","params":[[0.1,0.9,0,0]]})";
    auto before = data("POST", "/t/acme/query", near);
    ASSERT_EQ(before.status, 200) << before.body;
    ASSERT_NE(before.body.find("\"b\""), std::string::npos) << before.body;

    r = shard("POST", "/_shard/tenants/acme/move", R"({"to":"n2"})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(R"("tenant":"acme","from":"n1","to":"n2","region":"")"),
              std::string::npos) << r.body;
    EXPECT_NE(r.body.find(R"("source_removed":true)"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find(R"("bytes":0,)"), std::string::npos) << r.body;
    EXPECT_FALSE(node_holds(0, "acme"));
    EXPECT_TRUE(node_holds(1, "acme"));
    auto row = shard("GET", "/_shard/tenants/acme");
    EXPECT_NE(row.body.find(R"("node":"n2","state":"active")"), std::string::npos) << row.body;
    EXPECT_EQ(row.body.find("moving_to"), std::string::npos) << row.body;

    auto after = data("POST", "/t/acme/query", near);
    ASSERT_EQ(after.status, 200) << after.body;
    EXPECT_EQ(after.body, before.body);
    auto put = data("POST", "/t/acme/c/docs", R"({"title":"c","v":[0,0,1,0]})");
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_NE(put.body.find("[3]"), std::string::npos) << put.body;

    const std::string m = metrics();
    EXPECT_NE(m.find(R"(fenec_router_moves_total{outcome="done",scope="directory"} 1)"),
              std::string::npos) << m;
    EXPECT_NE(m.find("fenec_router_move_duration_seconds_count 1"), std::string::npos) << m;
    EXPECT_TRUE(wait_until([&] {  // the audit log's flush, within a second
        return read_file(dir_.path() + "/audit.log").find("/_shard/tenants/acme/move") !=
               std::string::npos;
    }));
    EXPECT_NE(read_file(dir_.path() + "/audit.log").find(
                  R"("method":"POST","path":"/_shard/tenants/acme/move","status":200)"),
              std::string::npos);
}

// §7.1: refusals before anything is done, counted as no move.
TEST_F(Move, RefusesBadMoves) {
    make_acme();
    struct Case {
        std::string target, body;
        int status;
        std::string says;
    };
    const Case cases[] = {
        {"/_shard/tenants/acme/move", "", 400, "needs `to`"},
        {"/_shard/tenants/acme/move", "[1]", 400, "not a JSON object"},
        {"/_shard/tenants/acme/move", R"({"to":"n2","fast":true})", 400, "unknown field `fast`"},
        {"/_shard/tenants/acme/move", R"({"to":7})", 400, "`to` must be a string"},
        {"/_shard/tenants/acme/move", R"({"to":"N2"})", 400, "is not [a-z0-9_-]"},
        {"/_shard/tenants/acme/move", R"({"to":"n9"})", 404, "no node `n9`"},
        {"/_shard/tenants/nosuch/move", R"({"to":"n2"})", 404, "nosuch"},
        {"/_shard/tenants/acme/move", R"({"to":"n1"})", 409, "on node `n1` already"},
        {"/_shard/tenants/acme/move", R"({"region":"us"})", 404, "no region `us`"},
        {"/_shard/tenants/acme/move", R"({"region":"US"})", 400, "field `region`"},
        {"/_shard/tenants/acme/move", R"({"region":7})", 400, "`region` must be a string"},
        {"/_shard/tenants/acme/move", R"({"to":"n2","region":"us"})", 409, "not `us`"},
    };
    for (const Case& c : cases) {
        auto r = shard("POST", c.target, c.body);
        EXPECT_EQ(r.status, c.status) << c.body << " " << r.body;
        EXPECT_NE(r.body.find(c.says), std::string::npos) << c.body << " " << r.body;
    }
    EXPECT_EQ(shard("GET", "/_shard/tenants/acme/move").status, 405);
    EXPECT_EQ(moves_counted(metrics()), 0) << metrics();
    EXPECT_NE(shard("GET", "/_shard/tenants/acme").body.find(R"("node":"n1","state":"active")"),
              std::string::npos);
}

// Cases 39 and 49 under load: a writer sending each write with its own Idempotency-Key (again
// after a 503 or a cut connection) and a reader, through the router, while acme moves n1 → n2
// held 500 ms in the freeze. Writes in the freeze are 503 with Retry-After: 1 and taken when sent
// again; every read is 200; no acknowledged write is missing on n2; a delete meanwhile is 409
// held by the move.
TEST_F(Move, ConcurrentWriterLosesNothing) {
    start_router("frozen:500");
    make_acme();
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::set<int> acked;
    std::atomic<int> frozen_503{0}, bad_retry_after{0}, unexpected{0}, reads{0}, bad_reads{0};
    const uint16_t port = router_->port();
    std::thread writer([&] {
        auto c = std::make_unique<Client>(port);
        for (int i = 1; !stop; ++i) {
            const std::string body = "{\"title\":\"w" + std::to_string(i) + "\",\"n\":" +
                                     std::to_string(i) + "}";
            for (int attempt = 0; attempt < 200; ++attempt) {
                auto r = c->request("POST", "/t/acme/c/notes", body,
                                    {{"Authorization", "Bearer " + D},
                                     {"Content-Type", "application/json"},
                                     {"Idempotency-Key", "w-" + std::to_string(i)}});
                if (!r || r->closed) c = std::make_unique<Client>(port);
                if (!r) continue;  // cut: the same key again
                if (r->status == 201) {
                    std::lock_guard lock(mu);
                    acked.insert(i);
                    break;
                }
                if (r->status == 503) {
                    ++frozen_503;
                    if (r->header("Retry-After") != "1") ++bad_retry_after;
                    // A client honouring Retry-After a little sooner: its pacing, not a wait.
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
                    continue;
                }
                ++unexpected;
                ADD_FAILURE() << "write " << i << ": " << r->status << " " << r->body;
                break;
            }
        }
    });
    std::thread reader([&] {
        auto c = std::make_unique<Client>(port);
        while (!stop) {
            auto r = c->request("GET", "/t/acme/c/notes?limit=5", {}, {{"Authorization", "Bearer " + D}});
            if (!r || r->closed) c = std::make_unique<Client>(port);
            ++reads;
            if (!r || r->status != 200) {
                ++bad_reads;
                ADD_FAILURE() << "read: " << (r ? std::to_string(r->status) + " " + r->body : "cut");
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a steady reader's pace
        }
    });
    EXPECT_TRUE(wait_until([&] {  // writes and reads going before the move
        std::lock_guard lock(mu);
        return acked.size() >= 5 && reads.load() >= 5;
    }));
    Reply moved;
    std::thread mover([&] {
        Client c(port);
        moved = c.request("POST", "/_shard/tenants/acme/move", R"({"to":"n2"})", bearer(ROOT))
                    .value_or(Reply{});
    });
    // The move under way (acme marked moving, claimed until it ends), inside the freeze's 500 ms.
    EXPECT_TRUE(wait_until([&] {
        return shard("GET", "/_shard/tenants/acme").body.find("moving_to") != std::string::npos;
    }));
    auto held = shard("DELETE", "/_shard/tenants/acme");
    EXPECT_EQ(held.status, 409) << held.body;
    EXPECT_NE(held.body.find(R"("held_by":"move")"), std::string::npos) << held.body;
    mover.join();
    size_t moved_at = 0;
    {
        std::lock_guard lock(mu);
        moved_at = acked.size();
    }
    EXPECT_TRUE(wait_until([&] {  // writes taken on the new node after the move
        std::lock_guard lock(mu);
        return acked.size() >= moved_at + 3;
    }));
    stop = true;
    writer.join();
    reader.join();
    ASSERT_EQ(moved.status, 200) << moved.body;
    EXPECT_GT(frozen_503.load(), 0) << "no write fell in the freeze";
    EXPECT_EQ(bad_retry_after.load(), 0);
    EXPECT_EQ(unexpected.load(), 0);
    EXPECT_EQ(bad_reads.load(), 0);
    EXPECT_GT(reads.load(), 20);

    // Every acknowledged write is on n2, once.
    Client n2(nodes_[1]->port());
    auto all = n2.request("POST", "/t/acme/query", R"({"query":"get notes select n"})",
                          bearer(D)).value_or(Reply{});
    ASSERT_EQ(all.status, 200) << all.body;
    std::lock_guard lock(mu);
    ASSERT_GT(acked.size(), 5u);
    for (int i : acked) {
        const std::string needle = "{\"n\":" + std::to_string(i) + "}";
        const size_t at = all.body.find(needle);
        EXPECT_NE(at, std::string::npos) << "acknowledged write " << i << " is missing";
        if (at != std::string::npos) {
            EXPECT_EQ(all.body.find(needle, at + 1), std::string::npos) << "write " << i << " twice";
        }
    }
    EXPECT_FALSE(node_holds(0, "acme"));
}

// Case 40: a subscriber that had seen everything: the move ends its stream with `gone`, and
// reconnecting through the router with Last-Event-ID resumes on n2 with the next change, no seed.
TEST_F(Move, SubscriptionResumesOnTheTargetWithoutASeed) {
    make_acme();
    ASSERT_EQ(data("POST", "/t/acme/c/notes", R"({"title":"a","n":1})").status, 201);
    auto s = std::make_unique<Client>(router_->port());
    s->send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
                "\r\n\r\n");
    ASSERT_NE(s->read_until("event: seed", 5000).find("event: seed"), std::string::npos);
    ASSERT_EQ(data("POST", "/t/acme/c/notes", R"({"title":"b","n":2})").status, 201);
    const std::string seen = s->read_until("\"b\"", 5000);
    const size_t id_at = seen.rfind("event: change\nid: ");
    ASSERT_NE(id_at, std::string::npos) << seen;
    const std::string cursor = seen.substr(id_at + 18, seen.find('\n', id_at + 18) - id_at - 18);

    auto r = shard("POST", "/_shard/tenants/acme/move", R"({"to":"n2"})");
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string ended = s->read_until("\"reason\":\"gone\"", 5000);
    EXPECT_NE(ended.find("event: error"), std::string::npos) << ended;
    EXPECT_NE(ended.find("\"reason\":\"gone\""), std::string::npos) << ended;

    Client again(router_->port());
    again.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
                   "\r\nLast-Event-ID: " + cursor + "\r\n\r\n");
    ASSERT_NE(again.read_until("\r\n\r\n", 5000).find("text/event-stream"), std::string::npos);
    ASSERT_EQ(data("POST", "/t/acme/c/notes", R"({"title":"on n2","n":3})").status, 201);
    const std::string got = again.read_until("on n2", 5000);
    EXPECT_EQ(got.find("event: seed"), std::string::npos) << got;
    EXPECT_NE(got.find("event: change\nid: " + std::to_string(std::stoull(cursor) + 1)),
              std::string::npos) << got;
}

// node-http.md §5.4 across a move: a subscriber away while its row was deleted on n1, which then
// moved to n2, resumes through the router with Last-Event-ID; n2's ring starts at its seq, past
// the cursor, so the stream reseeds without the row (before: the row stayed with it for good).
TEST_F(Move, ResumedStreamAcrossAMoveHearsTheDelete) {
    make_acme();
    ASSERT_EQ(data("POST", "/t/acme/c/notes", R"({"title":"a","n":1})").status, 201);
    ASSERT_EQ(data("POST", "/t/acme/c/notes", R"({"title":"b","n":2})").status, 201);
    std::string cursor;
    {
        Client s(router_->port());
        s.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
                   "\r\n\r\n");
        const std::string seen = s.read_until("\n\n", 5000);
        ASSERT_NE(seen.find("\"b\""), std::string::npos) << seen;
        const size_t id_at = seen.find("event: seed\nid: ");
        ASSERT_NE(id_at, std::string::npos) << seen;
        cursor = seen.substr(id_at + 16, seen.find('\n', id_at + 16) - id_at - 16);
    }
    ASSERT_EQ(data("DELETE", "/t/acme/c/notes/2").status, 200);
    auto r = shard("POST", "/_shard/tenants/acme/move", R"({"to":"n2"})");
    ASSERT_EQ(r.status, 200) << r.body;
    Client again(router_->port());
    again.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
                   "\r\nLast-Event-ID: " + cursor + "\r\n\r\n");
    const std::string got = again.read_until("\n\n", 5000);
    const size_t seed = got.find("event: seed");
    const bool named = got.find("\"dels\":[2]") != std::string::npos;
    const bool reseeded =
        seed != std::string::npos && got.find("\"b\"", seed) == std::string::npos;
    EXPECT_TRUE(named || reseeded) << got;
}

// Cases 44 and 42: the router SIGKILLed once the image is installed on n2, before the flip. It
// comes back with acme routed to n1 and marked moving, n1 thawed (a write is taken there); moving
// again replaces the stale copy on n2, whose reads then give the source's rows.
TEST_F(Move, RouterKilledMidMoveComesBackOnTheSource) {
    start_router("installed:30000");
    make_acme();
    ASSERT_EQ(data("POST", "/t/acme/c/notes", R"({"title":"before","n":1})").status, 201);
    const uint16_t port = router_->port();
    std::thread mover([port] {
        Client c(port, 60'000);
        (void)c.request("POST", "/_shard/tenants/acme/move", R"({"to":"n2"})", bearer(ROOT));
    });
    const bool installed = wait_until([&] { return node_holds(1, "acme"); });
    ASSERT_TRUE(installed) << "the image never reached n2";
    auto frozen = data("POST", "/t/acme/c/notes", R"({"title":"frozen","n":9})");
    EXPECT_EQ(frozen.status, 503) << frozen.body;
    EXPECT_EQ(frozen.header("Retry-After"), "1");
    EXPECT_EQ(router_->kill(SIGKILL), 128 + SIGKILL);
    mover.join();

    start_router();
    auto row = shard("GET", "/_shard/tenants/acme");
    EXPECT_NE(row.body.find(R"("node":"n1","state":"moving")"), std::string::npos) << row.body;
    EXPECT_NE(row.body.find(R"("moving_to":"n2")"), std::string::npos) << row.body;
    EXPECT_NE(metrics().find("fenec_router_tenants_moving 1"), std::string::npos);
    auto w = data("POST", "/t/acme/c/notes", R"({"title":"after restart","n":2})");
    ASSERT_EQ(w.status, 201) << "the source was not thawed: " << w.body;

    auto r = shard("POST", "/_shard/tenants/acme/move", R"({"to":"n2"})");
    ASSERT_EQ(r.status, 200) << r.body;
    auto rows = data("GET", "/t/acme/c/notes");
    ASSERT_EQ(rows.status, 200) << rows.body;
    EXPECT_NE(rows.body.find("after restart"), std::string::npos) << "n2 kept the stale copy: "
                                                                  << rows.body;
    EXPECT_NE(rows.body.find("before"), std::string::npos) << rows.body;
    EXPECT_FALSE(node_holds(0, "acme"));
    EXPECT_NE(shard("GET", "/_shard/tenants/acme").body.find(R"("node":"n2","state":"active")"),
              std::string::npos);
}

// Case 43: a move to a node that is down fails at the install, 502 naming it; the source is
// thawed and the row put back: acme active on n1, writable, the move counted failed.
TEST_F(Move, FailedMoveThawsTheSourceAndRestoresTheDirectory) {
    make_acme();
    ASSERT_EQ(data("POST", "/t/acme/c/notes", R"({"title":"a","n":1})").status, 201);
    nodes_[2]->kill(SIGKILL);
    auto r = shard("POST", "/_shard/tenants/acme/move", R"({"to":"n3"})");
    EXPECT_EQ(r.status, 502) << r.body;
    EXPECT_NE(r.body.find("n3"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find(R"("step":"install")"), std::string::npos) << r.body;
    auto row = shard("GET", "/_shard/tenants/acme");
    EXPECT_NE(row.body.find(R"("node":"n1","state":"active")"), std::string::npos) << row.body;
    EXPECT_EQ(row.body.find("moving_to"), std::string::npos) << row.body;
    auto w = data("POST", "/t/acme/c/notes", R"({"title":"b","n":2})");
    EXPECT_EQ(w.status, 201) << "the source was left frozen: " << w.body;
    EXPECT_NE(metrics().find(R"(fenec_router_moves_total{outcome="failed",scope="directory"} 1)"),
              std::string::npos);
    EXPECT_TRUE(node_holds(0, "acme"));
    // Said on stderr (its log's flush), as a move done is: an operator reading the log sees it.
    EXPECT_TRUE(wait_until([&] {
        return read_file(dir_.path() + "/router.err")
                   .find("the move of `acme` from `n1` to `n3` failed at its step `install`") !=
               std::string::npos;
    })) << read_file(dir_.path() + "/router.err");
}

}  // namespace
}  // namespace fenec::test::move_test
