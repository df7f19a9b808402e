// test/server/node/admin_test.cc: the admin plane's lifecycle over HTTP against the real binary
// (node-http.md §8.1-§8.3, §8.8, §14 cases 31, 41, 47, 51-57, 63): create and delete (a stream
// ends `gone`, files and sidecars removed, a delete refused 409 while a write is in flight),
// freeze and thaw (kept across a restart, held requests answered at once, a keyed write not
// replayed while frozen, the freeze answered only after the writes in flight, no acknowledged
// write lost under concurrent writers), the file image moved between two node processes (rows, a
// `near` query and the next seq identical), restored in place under a quota, a damaged image
// refused naming its offset, hello and the tenant list. Cases 53 and 63 use the
// `Fenec-Test-Stall: land=` hook of fenec-node-hooks.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "test/server/node/image_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::admin_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";
const std::string R = "replication-token-r";

bool file_there(const std::string& path) { return std::filesystem::exists(path); }

// One node with its own data dir and a client to it.
struct Node {
    explicit Node(std::vector<std::string> more = {}) { start(std::move(more)); }

    void start(std::vector<std::string> more = {}) {
        std::vector<std::string> flags = {
            "--token", D, "--admin-token", A, "--replication-token", R, "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        client.reset();
        process.reset();
        process = std::make_unique<NodeProcess>(dir.path(), flags);
        ASSERT_NE(process->port(), 0) << process->first_line();
        client = std::make_unique<Client>(process->port());
    }
    // SIGTERM and start again on the same files.
    void restart() {
        ASSERT_EQ(process->kill(SIGTERM), 0);
        start();
    }

    Reply call(std::string_view method, std::string_view target, const std::string& token,
               std::string_view body = {},
               std::vector<std::pair<std::string, std::string>> more = {}) {
        auto headers = bearer(token);
        headers.insert(headers.end(), more.begin(), more.end());
        auto r = client->request(method, target, body, headers);
        EXPECT_TRUE(r.has_value()) << method << " " << target;
        if (!r || r->closed) client = std::make_unique<Client>(process->port());
        return r.value_or(Reply{});
    }
    Reply admin(std::string_view method, std::string_view target, std::string_view body = {},
                std::vector<std::pair<std::string, std::string>> more = {}) {
        return call(method, target, A, body, std::move(more));
    }
    Reply query(const std::string& q, const std::string& params = "[]",
                std::vector<std::pair<std::string, std::string>> more = {}) {
        return call("POST", "/t/acme/query", D,
                    "{\"query\":\"" + q + "\",\"params\":" + params + "}", std::move(more));
    }
    Reply admin_query(const std::string& q) {
        return admin("POST", "/_admin/tenants/acme/query", "{\"query\":\"" + q + "\"}");
    }
    std::string path(const std::string& file) const { return dir.path() + "/" + file; }

    // §14's acme: notes with rows 1 "a" 2020, 2 "b" 2022, 3 "c" 2024.
    void make_acme(const std::string& more_schema = "") {
        std::string schema =
            R"J("create collection notes (title text, year int @sorted, tags [text])")J";
        if (!more_schema.empty()) schema += ",\"" + more_schema + "\"";
        auto r = admin("PUT", "/_admin/tenants/acme", "{\"schema\":[" + schema + "]}");
        ASSERT_EQ(r.status, 201) << r.body;
        for (auto [t, y] : {std::pair{"a", 2020}, {"b", 2022}, {"c", 2024}}) {
            auto p = query("put notes {title: $1, year: $2}",
                           "[\"" + std::string(t) + "\"," + std::to_string(y) + "]");
            ASSERT_EQ(p.status, 200) << p.body;
        }
    }
    uint64_t seq() {
        auto r = query("get notes limit 1");
        EXPECT_EQ(r.status, 200) << r.body;
        return std::stoull(r.header("Fenec-Seq").value_or("0"));
    }

    TempDir dir;
    std::unique_ptr<NodeProcess> process;
    std::unique_ptr<Client> client;
};

// Write statements the node has run (fenec_statements_total): one counted is one its worker has
// taken up, which then holds it if it waits.
uint64_t writes_run(Node& n) {
    const std::string body = n.admin("GET", "/_metrics").body;
    const std::string key = "fenec_statements_total{kind=\"write\"} ";
    const size_t at = body.find(key);
    return at == std::string::npos ? 0 : std::stoull(body.substr(at + key.size()));
}

// Opens a stream; returns the client with the head consumed.
std::unique_ptr<Client> subscribe(uint16_t port, const std::string& target) {
    auto c = std::make_unique<Client>(port);
    c->send_raw("GET " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
                "\r\n\r\n");
    std::string got = c->read_until("\r\n\r\n", 5000);
    EXPECT_NE(got.find("text/event-stream"), std::string::npos) << got;
    return c;
}

// Case 51, §8.8: create, create again, the list and the node's hello.
TEST(Admin, CreateListAndHello) {
    Node n;
    n.make_acme();
    auto r = n.admin("PUT", "/_admin/tenants/globex");
    ASSERT_EQ(r.status, 201) << r.body;
    const size_t at = r.body.find("\"lineage\":\"");
    ASSERT_NE(at, std::string::npos) << r.body;
    EXPECT_EQ(r.body.find('"', at + 11), at + 11 + 16) << r.body;  // 16 hex
    EXPECT_EQ(n.admin("PUT", "/_admin/tenants/globex").status, 409);

    auto list = n.admin("GET", "/_admin/tenants");
    ASSERT_EQ(list.status, 200);
    EXPECT_NE(list.body.find(R"({"name":"acme","bytes":)"), std::string::npos) << list.body;
    EXPECT_NE(list.body.find(R"("role":"primary","open":true,"frozen":false})"), std::string::npos)
        << list.body;
    EXPECT_LT(list.body.find("acme"), list.body.find("globex")) << list.body;
    EXPECT_EQ(list.body.find("lineage"), std::string::npos) << list.body;
    auto detail = n.admin("GET", "/_admin/tenants?detail");
    EXPECT_NE(detail.body.find(R"("forks":[{"history":)"), std::string::npos) << detail.body;
    EXPECT_NE(detail.body.find(R"("following":null)"), std::string::npos) << detail.body;

    auto hello = n.admin("GET", "/_admin/hello");
    ASSERT_EQ(hello.status, 200);
    for (const char* k : {"\"node\":", "\"version\":\"", "\"boot_id\":\"", "\"started\":\"",
                          "\"takes_leases\":false", "\"holder\":null", "\"tenants\":2", "\"open\":",
                          "\"disk_bytes\":", "\"memory_bytes\":", "\"memory_limit_bytes\":0"}) {
        EXPECT_NE(hello.body.find(k), std::string::npos) << k << " in " << hello.body;
    }
    EXPECT_EQ(n.call("GET", "/_admin/hello", D).status, 403);
    EXPECT_EQ(n.admin("POST", "/_admin/hello", "{}").status, 405);
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/acme/file", "{}").status, 405);
}

// Case 47 and §8.1: a stream on acme ends `gone`, the delete answers 204, the file and its
// sidecars are gone, and the tenant is unknown.
TEST(Admin, DeleteEndsStreamsGoneAndRemovesFiles) {
    Node n;
    n.make_acme();
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    std::ofstream(n.path("acme.quota")) << "{}\n";
    std::ofstream(n.path("acme.follows")) << "{}\n";
    auto s = subscribe(n.process->port(), "/t/acme/c/notes/changes");
    EXPECT_NE(s->read_until("event: seed", 5000).find("event: seed"), std::string::npos);

    auto del = n.admin("DELETE", "/_admin/tenants/acme");
    EXPECT_EQ(del.status, 204) << del.body;
    const std::string got = s->read_until("\"reason\":\"gone\"", 5000);
    EXPECT_NE(got.find("event: error"), std::string::npos) << got;
    EXPECT_NE(got.find("\"reason\":\"gone\""), std::string::npos) << got;
    EXPECT_TRUE(s->closed_within(5000));

    for (const char* f : {"acme.fenec", "acme.quota", "acme.follows", "acme.frozen"}) {
        EXPECT_FALSE(file_there(n.path(f))) << f;
    }
    // The file's blocks are freed after the answer, under the name it was moved to.
    EXPECT_TRUE(wait_until([&] { return !file_there(n.path("acme.fenec.deleted")); }));
    EXPECT_EQ(n.query("get notes").status, 404);
    EXPECT_EQ(n.admin("GET", "/_admin/tenants").body, "[]");
    EXPECT_EQ(n.admin("DELETE", "/_admin/tenants/acme").status, 404);
    // Made again under the same name: a new file with a new lineage.
    EXPECT_EQ(n.admin("PUT", "/_admin/tenants/acme").status, 201);
    // One a crash left before it was unlinked goes when the node starts.
    std::ofstream(n.path("other.fenec.deleted")) << "left by a crash";
    n.restart();
    EXPECT_FALSE(file_there(n.path("other.fenec.deleted")));
    EXPECT_EQ(n.admin("GET", "/_admin/tenants").status, 200);
}

// Case 52: frozen refuses writes (503, Retry-After: 1) and serves reads; idempotent; thawed it
// writes; frozen across a restart.
TEST(Admin, FreezeRefusesWritesAndSurvivesRestart) {
    Node n;
    n.make_acme();
    auto f = n.admin("POST", "/_admin/tenants/acme/freeze");
    ASSERT_EQ(f.status, 200) << f.body;
    EXPECT_EQ(f.body, R"({"frozen":true,"seq":4,"history":")" +
                          n.query("get notes").header("Fenec-History").value_or("") + "\"}");
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").body, f.body);  // idempotent
    auto put = n.query(R"(put notes {title: \"z\"})");
    EXPECT_EQ(put.status, 503) << put.body;
    EXPECT_EQ(put.header("Retry-After").value_or(""), "1");
    EXPECT_NE(put.body.find("\"reason\":\"frozen\""), std::string::npos) << put.body;
    auto rest = n.call("PUT", "/t/acme/c/notes/9", D, R"({"title":"n"})");
    EXPECT_EQ(rest.status, 503) << rest.body;
    EXPECT_EQ(n.query("get notes").status, 200);
    EXPECT_NE(n.admin("GET", "/_admin/tenants").body.find("\"frozen\":true"), std::string::npos);
    EXPECT_NE(n.admin("GET", "/_admin/tenants/acme").body.find("\"frozen\":true"),
              std::string::npos);

    auto t = n.admin("POST", "/_admin/tenants/acme/thaw");
    EXPECT_EQ(t.status, 200);
    EXPECT_EQ(t.body, R"({"frozen":false})");
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw").body, t.body);
    EXPECT_EQ(n.query(R"(put notes {title: \"z\"})").status, 200);

    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    EXPECT_TRUE(file_there(n.path("acme.frozen")));
    n.restart();
    // Closed: the list reads the mark; open, the tenant opened frozen.
    EXPECT_NE(n.admin("GET", "/_admin/tenants").body.find("\"frozen\":true"), std::string::npos);
    EXPECT_EQ(n.query(R"(put notes {title: \"y\"})").status, 503);
    EXPECT_EQ(n.query("get notes").status, 200);
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw").status, 200);
    EXPECT_FALSE(file_there(n.path("acme.frozen")));
    EXPECT_EQ(n.query(R"(put notes {title: \"y\"})").status, 200);
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/nope/freeze").status, 404);
}

// A freeze read after a thaw of the same freeze id (Fenec-Freeze-Id) is refused: a router that
// gave up on a move's freeze (this node stopped, the request left in its socket) and undid the
// move sends its thaw under the move's id, and the freeze, read once the node runs again, must
// not leave the tenant frozen for good. A thaw under an id undoes only that id's freeze: a stale
// one leaves a later move's freeze alone. Without an id, freeze and thaw are as they were.
TEST(Admin, AFreezeIdThawedFirstIsRefusedAndAThawUndoesOnlyItsOwnFreeze) {
    Node n;
    n.make_acme();
    using Headers = std::vector<std::pair<std::string, std::string>>;
    const Headers one{{"Fenec-Freeze-Id", "move-1"}}, two{{"Fenec-Freeze-Id", "move-2"}};
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw", "", one).status, 200);
    auto late = n.admin("POST", "/_admin/tenants/acme/freeze", "", one);
    EXPECT_EQ(late.status, 409) << late.body;
    EXPECT_NE(late.body.find(R"("reason":"thawed")"), std::string::npos) << late.body;
    EXPECT_EQ(n.query(R"(put notes {title: \"z\"})").status, 200);
    EXPECT_NE(n.admin("GET", "/_admin/tenants/acme").body.find("\"frozen\":false"),
              std::string::npos);
    // Another id's freeze freezes, and a stale thaw of the first id leaves it frozen.
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze", "", two).status, 200);
    auto stale = n.admin("POST", "/_admin/tenants/acme/thaw", "", one);
    EXPECT_EQ(stale.status, 200) << stale.body;
    EXPECT_EQ(stale.body, R"({"frozen":true})");
    EXPECT_EQ(n.query(R"(put notes {title: \"y\"})").status, 503);
    // Its own thaw, or one without an id (an operator's, a settling router's), thaws it.
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw", "", two).body, R"({"frozen":false})");
    EXPECT_EQ(n.query(R"(put notes {title: \"y\"})").status, 200);
    ASSERT_EQ(
        n.admin("POST", "/_admin/tenants/acme/freeze", "", Headers{{"X-Request-Id", "r"}}).status,
        200);
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw", "", Headers{{"X-Request-Id", "r"}}).body,
              R"({"frozen":false})");
    ASSERT_EQ(
        n.admin("POST", "/_admin/tenants/acme/freeze", "", Headers{{"X-Request-Id", "r"}}).status,
        200);  // an X-Request-Id is no freeze id: a client may send one twice
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw").status, 200);
}

// Case 41: a held write is answered 503 at once by a freeze, which does not wait for it.
TEST(Admin, FreezeAnswersHeldRequestsAtOnce) {
    Node n;
    n.make_acme();
    const uint64_t writes = writes_run(n);
    Client held(n.process->port());
    const std::string body = R"({"query":"del notes where title = \"nothing\""})";
    held.send_raw("POST /t/acme/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
                  "\r\nFenec-Wait: 10000\r\nContent-Length: " + std::to_string(body.size()) +
                  "\r\n\r\n" + body);
    ASSERT_TRUE(wait_until([&] { return writes_run(n) > writes; }));  // run, found nothing: held
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    auto r = held.read_reply();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_EQ(r->header("Retry-After").value_or(""), "1");
    EXPECT_LT(ms, 2000);
}

// Case 57: the admin query refuses a writing statement (403, nothing landing) and answers reads,
// frozen or not.
TEST(Admin, AdminQueryRefusesWritesFrozenOrNot) {
    Node n;
    n.make_acme();
    for (bool frozen : {false, true}) {
        if (frozen) {
            ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
        }
        const uint64_t before = n.seq();
        auto w = n.admin_query(R"(put notes {title: \"z\"})");
        EXPECT_EQ(w.status, 403) << w.body;
        EXPECT_EQ(n.seq(), before);
        auto r = n.admin_query("get notes");
        EXPECT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.body.rfind("{\"rows\":[", 0), 0u) << r.body;
        EXPECT_EQ(r.header("Fenec-Seq").value_or(""), std::to_string(before));
    }
}

// Case 54: acme (with an @hnsw field) moved to a second node answers the same rows, the same
// `near` query and the same seq there, and its next write gets s+1.
TEST(Admin, ImageMovesBetweenNodes) {
    Node n;
    n.make_acme("create collection docs (title text, v vector<3> @hnsw)");
    for (int i = 0; i < 40; ++i) {
        const std::string v = "[" + std::to_string(i % 7 + 1) + "," + std::to_string(i % 5) + "," +
                              std::to_string(i % 3) + "]";
        auto p = n.query("put docs {title: $1, v: " + v + "}", "[\"d" + std::to_string(i) + "\"]");
        ASSERT_EQ(p.status, 200) << p.body;
    }
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    const uint64_t s = n.seq();
    auto img = n.admin("GET", "/_admin/tenants/acme/file");
    ASSERT_EQ(img.status, 200) << img.body;
    EXPECT_EQ(img.header("Content-Type").value_or(""), "application/octet-stream");
    EXPECT_EQ(img.header("Content-Length").value_or(""), std::to_string(img.body.size()));
    EXPECT_EQ(img.header("Fenec-Seq").value_or(""), std::to_string(s));
    const std::string history = img.header("Fenec-History").value_or("");
    const std::string lineage = img.header("Fenec-Lineage").value_or("");
    EXPECT_EQ(history.size(), 16u);
    EXPECT_EQ(lineage.size(), 16u);
    EXPECT_EQ(img.header("Fenec-Image-Digest").value_or(""), image_digest_hex(img.body));

    Node n2;
    auto put = n2.admin("PUT", "/_admin/tenants/acme/file", img.body,
                        {{"Content-Type", "application/octet-stream"},
                         {"Fenec-Seq", std::to_string(s)},
                         {"Fenec-Lineage", lineage},
                         {"Fenec-Image-Digest", image_digest_hex(img.body)}});
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(put.body, "{\"installed\":\"acme\",\"seq\":" + std::to_string(s) + ",\"history\":\"" +
                            history + "\",\"lineage\":\"" + lineage +
                            "\",\"bytes\":" + std::to_string(img.body.size()) + "}");
    for (const char* q : {"get notes", "get docs", "get docs near v [2, 1, 1] limit 5"}) {
        auto a = n.query(q);
        auto b = n2.query(q);
        EXPECT_EQ(a.status, 200) << a.body;
        EXPECT_EQ(a.body, b.body) << q;
        EXPECT_EQ(b.header("Fenec-Seq").value_or(""), std::to_string(s)) << q;
        EXPECT_EQ(b.header("Fenec-History").value_or(""), history) << q;
    }
    EXPECT_NE(n2.admin("GET", "/_admin/tenants/acme").body.find("\"lineage\":\"" + lineage + "\""),
              std::string::npos);
    auto next = n2.query(R"(put notes {title: \"after\"})");
    ASSERT_EQ(next.status, 200) << next.body;  // installed thawed
    EXPECT_EQ(next.header("Fenec-Seq").value_or(""), std::to_string(s + 1));

    // DELETE …/file then PUT …/file restores in place: the sidecars stay across the delete, and
    // the installed tenant is thawed.
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    std::ofstream(n.path("acme.quota")) << "{}\n";
    EXPECT_EQ(n.admin("DELETE", "/_admin/tenants/acme/file").status, 204);
    EXPECT_FALSE(file_there(n.path("acme.fenec")));
    EXPECT_TRUE(file_there(n.path("acme.quota")));
    EXPECT_TRUE(file_there(n.path("acme.frozen")));
    EXPECT_EQ(n.query("get notes").status, 404);
    EXPECT_EQ(n.admin("DELETE", "/_admin/tenants/acme/file").status, 404);
    auto back = n.admin("PUT", "/_admin/tenants/acme/file", img.body,
                        {{"Content-Type", "application/octet-stream"}});
    ASSERT_EQ(back.status, 201) << back.body;
    EXPECT_TRUE(file_there(n.path("acme.quota")));
    EXPECT_FALSE(file_there(n.path("acme.frozen")));
    EXPECT_EQ(n.query(R"(put notes {title: \"again\"})").header("Fenec-Seq").value_or(""),
              std::to_string(s + 1));
}

// Case 50, seed 000's move: freeze, copy the image, install, delete. The source's stream ends
// `gone`; a client that had seen everything resumes on the target from its cursor with no seed,
// and the target's next write is its next change.
// A frozen tenant whose file is being read out as its image (a move's source, behind a slow
// reader) stays readable and can be thawed. The image held the file, and its lock, while the
// tenant closed when idle: the next open found the file locked and every request was 500 for
// ten seconds (and a move's rollback could not thaw it). The tenant is now held while its file
// is read out.
TEST(Admin, AFrozenTenantBeingReadOutStaysServed) {
    Node n;
    n.make_acme();
    const std::string mb(1 << 20, 'x');
    for (int i = 0; i < 24; ++i) {  // 24 MiB: more than the sockets hold, so the stream waits
        ASSERT_EQ(n.query("put notes {title: $1}", "[\"" + mb + "\"]").status, 200);
    }
    // `other`: a tenant used after acme's stream began, whose idle close shows the sweeps have
    // passed acme's idle time too.
    ASSERT_EQ(n.admin("PUT", "/_admin/tenants/other",
                      R"J({"schema":["create collection notes (title text)"]})J")
                  .status,
              201);
    ASSERT_EQ(n.process->kill(SIGTERM), 0);
    n.start({"--close-idle", "1"});  // opened afresh: nothing lands before its close
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    Client reader(n.process->port());
    ASSERT_TRUE(
        reader.send_raw("GET /_admin/tenants/acme/file HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Authorization: Bearer " +
                        A + "\r\n\r\n"));
    ASSERT_NE(reader.read_until("\r\n\r\n", 5000).find("200 OK"), std::string::npos);
    // The reader reads no more. `other`, opened now, is closed once idle past the bound.
    ASSERT_EQ(n.call("GET", "/t/other/c/notes?count", D).status, 200);
    auto other_closed = [&] {
        const std::string listed = n.admin("GET", "/_admin/tenants").body;
        const size_t at = listed.find(R"("name":"other")");
        return at != std::string::npos &&
               listed.substr(at, listed.find('}', at) - at).find(R"("open":false)") !=
                   std::string::npos;
    };
    ASSERT_TRUE(wait_until(other_closed, std::chrono::seconds(10)))
        << n.admin("GET", "/_admin/tenants").body;
    const Reply read = n.call("GET", "/t/acme/c/notes?count", D);
    EXPECT_EQ(read.status, 200) << read.body;
    const Reply thaw = n.admin("POST", "/_admin/tenants/acme/thaw");
    EXPECT_EQ(thaw.status, 200) << thaw.body;
}

TEST(Admin, MovedTenantResumesOnTheTargetWithoutASeed) {
    Node n;
    n.make_acme();
    auto s = subscribe(n.process->port(), "/t/acme/c/notes/changes");
    ASSERT_NE(s->read_until("event: seed", 5000).find("event: seed"), std::string::npos);
    ASSERT_EQ(n.query(R"(put notes {title: \"d\"})").status, 200);
    const std::string seen = s->read_until("event: change", 5000);
    ASSERT_NE(seen.find("event: change"), std::string::npos) << seen;
    const std::string cursor = std::to_string(n.seq());

    Node n2;
    // The seed's steps 2, 3 and 5 (1 and 4 are the directory's).
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    auto img = n.admin("GET", "/_admin/tenants/acme/file");
    ASSERT_EQ(img.status, 200);
    auto put = n2.admin("PUT", "/_admin/tenants/acme/file", img.body,
                        {{"Content-Type", "application/octet-stream"}});
    ASSERT_EQ(put.status, 201) << put.body;
    ASSERT_EQ(n.admin("DELETE", "/_admin/tenants/acme").status, 204);
    const std::string ended = s->read_until("\"reason\":\"gone\"", 5000);
    EXPECT_NE(ended.find("\"reason\":\"gone\""), std::string::npos) << ended;

    Client c(n2.process->port());
    c.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D +
               "\r\nLast-Event-ID: " + cursor + "\r\n\r\n");
    ASSERT_NE(c.read_until("\r\n\r\n", 5000).find("text/event-stream"), std::string::npos);
    ASSERT_EQ(n2.query(R"(put notes {title: \"on n2\"})").status, 200);
    const std::string got = c.read_until("on n2", 5000);
    EXPECT_EQ(got.find("event: seed"), std::string::npos) << got;
    EXPECT_NE(got.find("event: change\nid: " + std::to_string(std::stoull(cursor) + 1)),
              std::string::npos)
        << got;
}

// Case 55: a damaged image is refused 400 naming an offset, nothing installed; headers that do
// not match are refused naming the header; an existing tenant is refused 409 before the body.
TEST(Admin, DamagedImageRefusedNothingInstalled) {
    Node n;
    n.make_acme();
    auto img = n.admin("GET", "/_admin/tenants/acme/file");
    ASSERT_EQ(img.status, 200);
    const std::vector<std::pair<std::string, std::string>> octets = {
        {"Content-Type", "application/octet-stream"}};

    Node n2;
    std::string flipped = img.body;
    flipped[flipped.size() / 2] ^= 0x20;
    auto bad = n2.admin("PUT", "/_admin/tenants/acme/file", flipped, octets);
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("offset"), std::string::npos) << bad.body;
    EXPECT_NE(bad.body.find("\"offset\":"), std::string::npos) << bad.body;
    EXPECT_EQ(n2.admin("GET", "/_admin/tenants").body, "[]");
    EXPECT_FALSE(file_there(n2.path("acme.fenec.incoming")));
    EXPECT_EQ(n2.query("get notes").status, 404);

    auto cut = n2.admin("PUT", "/_admin/tenants/acme/file", img.body.substr(0, img.body.size() - 8),
                        octets);
    EXPECT_EQ(cut.status, 400) << cut.body;
    auto more = octets;
    more.emplace_back("Fenec-Image-Digest", std::string(32, '0'));
    auto digest = n2.admin("PUT", "/_admin/tenants/acme/file", img.body, more);
    EXPECT_EQ(digest.status, 400);
    EXPECT_NE(digest.body.find("Fenec-Image-Digest"), std::string::npos) << digest.body;
    more = octets;
    more.emplace_back("Fenec-Seq", "999");
    auto seq = n2.admin("PUT", "/_admin/tenants/acme/file", img.body, more);
    EXPECT_EQ(seq.status, 400);
    EXPECT_NE(seq.body.find("Fenec-Seq"), std::string::npos) << seq.body;
    more = octets;
    more.emplace_back("Fenec-Lineage", "0123456789abcdef");
    EXPECT_EQ(n2.admin("PUT", "/_admin/tenants/acme/file", img.body, more).status, 400);
    EXPECT_EQ(n2.admin("GET", "/_admin/tenants").body, "[]");
    EXPECT_EQ(n2.admin("PUT", "/_admin/tenants/acme/file", img.body,
                       {{"Content-Type", "application/json"}})
                  .status,
              415);

    // Existing: 409 on the head alone, with Expect: 100-continue and no body byte sent.
    ASSERT_EQ(n2.admin("PUT", "/_admin/tenants/acme/file", img.body, octets).status, 201);
    Client c(n2.process->port());
    c.send_raw("PUT /_admin/tenants/acme/file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + A +
               "\r\nContent-Type: application/octet-stream\r\nExpect: 100-continue\r\n"
               "Content-Length: 1000000\r\n\r\n");
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 409) << r->body;
    // Without the admin token the head is not judged: the body bound is --max-body and the
    // answer is the credential's.
    auto anon = n2.call("PUT", "/_admin/tenants/acme/file", D, img.body, octets);
    EXPECT_EQ(anon.status, 403);
}

// §8.2 under load: writers with Idempotency-Keys while freezes and thaws come and go. Every write
// acknowledged 200 is there afterwards; writes refused while frozen are 503 `frozen` with
// Retry-After: 1; reads are served throughout; the seq a freeze answers does not move until the
// thaw.
TEST(Admin, FreezeUnderConcurrentWriters) {
    Node n;
    n.make_acme();
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::vector<std::string> acknowledged;
    std::atomic<int> refused{0}, bad{0}, reads_failed{0};
    auto writer = [&](int id) {
        Client c(n.process->port());
        for (int i = 0; !stop; ++i) {
            const std::string title = "w" + std::to_string(id) + "-" + std::to_string(i);
            const std::string body =
                R"({"query":"put notes {title: $1}","params":[")" + title + "\"]}";
            auto h = bearer(D);
            h.emplace_back("Idempotency-Key", title);
            auto r = c.request("POST", "/t/acme/query", body, h);
            if (!r) {
                ++bad;
                return;
            }
            if (r->status == 200) {
                std::lock_guard lock(mu);
                acknowledged.push_back(title);
            } else if (r->status == 503 && r->header("Retry-After") == "1" &&
                       r->body.find("\"reason\":\"frozen\"") != std::string::npos) {
                ++refused;
            } else {
                ++bad;
            }
        }
    };
    auto reader = [&] {
        Client c(n.process->port());
        while (!stop) {
            auto r =
                c.request("POST", "/t/acme/query", R"({"query":"get notes limit 1"})", bearer(D));
            if (!r || r->status != 200) ++reads_failed;
        }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) threads.emplace_back(writer, i);
    threads.emplace_back(reader);
    for (int round = 0; round < 5; ++round) {
        // Writes landing again since the last thaw: the freeze comes with writes in flight.
        const uint64_t thawed_at = n.seq();
        EXPECT_TRUE(wait_until([&] { return n.seq() >= thawed_at + 3; })) << round;
        auto f = n.admin("POST", "/_admin/tenants/acme/freeze");
        ASSERT_EQ(f.status, 200) << f.body;
        const std::string frozen_at = f.body.substr(f.body.find("\"seq\":") + 6);
        // The behaviour under test: a window in which the writers keep asking and nothing lands.
        std::this_thread::sleep_for(std::chrono::milliseconds(80));
        const uint64_t now = n.seq();
        EXPECT_EQ(std::to_string(now), frozen_at.substr(0, frozen_at.find(','))) << round;
        ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw").status, 200);
    }
    stop = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(reads_failed.load(), 0);
    EXPECT_GT(refused.load(), 0);
    ASSERT_FALSE(acknowledged.empty());
    auto all = n.query("get notes select title limit 10000");
    ASSERT_EQ(all.status, 200);
    for (const std::string& t : acknowledged) {
        EXPECT_NE(all.body.find("\"" + t + "\""), std::string::npos) << t;
    }
}

// Case 31: a keyed write already made, sent again while acme is frozen, is refused 503 `frozen`
// and not replayed; thawed, the same request replays the first answer and adds nothing.
TEST(Admin, FrozenRefusesAKeyedWriteAlreadyMadeWithoutReplay) {
    Node n;
    n.make_acme();
    const std::vector<std::pair<std::string, std::string>> key = {{"Idempotency-Key", "k1"}};
    auto first = n.query(R"(put notes {title: \"keyed\"})", "[]", key);
    ASSERT_EQ(first.status, 200) << first.body;
    const uint64_t s = n.seq();
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    auto again = n.query(R"(put notes {title: \"keyed\"})", "[]", key);
    EXPECT_EQ(again.status, 503) << again.body;
    EXPECT_EQ(again.header("Retry-After").value_or(""), "1");
    EXPECT_NE(again.body.find("\"reason\":\"frozen\""), std::string::npos) << again.body;
    EXPECT_FALSE(again.header("Idempotent-Replayed").has_value());
    EXPECT_FALSE(again.header("Fenec-Seq").has_value());
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw").status, 200);
    auto thawed = n.query(R"(put notes {title: \"keyed\"})", "[]", key);
    EXPECT_EQ(thawed.status, 200) << thawed.body;
    EXPECT_EQ(thawed.header("Idempotent-Replayed").value_or(""), "true");
    EXPECT_EQ(thawed.body, first.body);
    EXPECT_EQ(n.seq(), s);
    EXPECT_EQ(n.query("select count(*) from notes").body, R"J({"rows":[{"count(*)":4}]})J");
}

// Case 53: a freeze asked while a write is stalled between landing and its answer answers only
// after that write was answered, and its seq counts the write. The order is read off the write's
// socket once the freeze has answered (its answer is there already, the node having one event
// loop), not off two threads' clocks, which a loaded machine may schedule either way.
TEST(Admin, FreezeWaitsForTheWriteInFlight) {
    Node n;
    n.make_acme();
    const uint64_t s = n.seq();
    Client writer(n.process->port());
    const std::string body = R"({"query":"put notes {title: \"stalled\"}"})";
    ASSERT_TRUE(writer.send_raw("POST /t/acme/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                D + "\r\nFenec-Test-Stall: land=500\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body));
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(wait_until([&] { return n.seq() == s + 1; }));  // landed, and stalled from there
    auto f = n.admin("POST", "/_admin/tenants/acme/freeze");
    const auto freeze_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count();
    // The write's answer was sent before the freeze's; a little grace for the loopback's delivery
    // (without the wait the write answers some 350 ms after the freeze).
    const std::string early = writer.read_until("\r\n\r\n", 100);
    EXPECT_EQ(early.rfind("HTTP/1.1 200", 0), 0u) << early;
    auto write = writer.read_reply();
    ASSERT_TRUE(write);
    EXPECT_EQ(write->status, 200) << write->body;
    EXPECT_EQ(write->header("Fenec-Seq").value_or(""), std::to_string(s + 1));
    ASSERT_EQ(f.status, 200) << f.body;
    EXPECT_NE(f.body.find("\"seq\":" + std::to_string(s + 1) + ","), std::string::npos) << f.body;
    EXPECT_GE(freeze_ms, 450);
}

// Case 63: a delete asked while a write is stalled for 6 s is refused 409 `still in use` after
// about 5 s; the file is kept and the tenant served as before, the stalled write included.
TEST(Admin, DeleteRefusedWhileAWriteIsInFlight) {
    Node n;
    n.make_acme();
    const uint64_t s = n.seq();
    std::optional<Reply> write;
    std::thread writer([&] {
        Client c(n.process->port());
        auto h = bearer(D);
        h.emplace_back("Fenec-Test-Stall", "land=6000");
        write = c.request("POST", "/t/acme/query", R"({"query":"put notes {title: \"stalled\"}"})",
                          h);
    });
    EXPECT_TRUE(wait_until([&] { return n.seq() == s + 1; }));  // landed, and stalled from there
    const auto start = std::chrono::steady_clock::now();
    auto del = n.admin("DELETE", "/_admin/tenants/acme");
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    EXPECT_EQ(del.status, 409) << del.body;
    EXPECT_NE(del.body.find("still in use"), std::string::npos) << del.body;
    EXPECT_GE(ms, 4900);
    EXPECT_LT(ms, 5800);
    EXPECT_TRUE(file_there(n.path("acme.fenec")));
    writer.join();
    ASSERT_TRUE(write);
    EXPECT_EQ(write->status, 200) << write->body;
    EXPECT_EQ(write->header("Fenec-Seq").value_or(""), std::to_string(s + 1));
    auto rows = n.query("get notes select title");
    EXPECT_EQ(rows.status, 200) << rows.body;
    EXPECT_NE(rows.body.find("\"stalled\""), std::string::npos) << rows.body;
    auto next = n.query(R"(put notes {title: \"after\"})");
    EXPECT_EQ(next.status, 200) << next.body;
    EXPECT_EQ(next.header("Fenec-Seq").value_or(""), std::to_string(s + 2));
    EXPECT_NE(n.admin("GET", "/_admin/tenants").body.find("\"name\":\"acme\""), std::string::npos);
}

// Case 56: DELETE …/file then PUT …/file with an older image keeps the quota (its sidecar
// outlives the delete): the install answers 201, the rows are the image's, and a put past the
// quota is refused 507.
TEST(Admin, RestoredOlderImageKeepsTheQuota) {
    Node n;
    n.make_acme();
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    auto img = n.admin("GET", "/_admin/tenants/acme/file");
    ASSERT_EQ(img.status, 200) << img.body;
    const std::string image_seq = img.header("Fenec-Seq").value_or("");
    const std::string image_rows = n.query("get notes").body;
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw").status, 200);
    ASSERT_EQ(n.query(R"(put notes {title: \"newer\"})").status, 200);  // the image is older now
    auto set = n.admin("PUT", "/_admin/tenants/acme/quota", R"({"rows":4})");
    ASSERT_EQ(set.status, 200) << set.body;
    EXPECT_EQ(n.query(R"(put notes {title: \"past\"})").status, 507);  // 4 rows already

    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    ASSERT_EQ(n.admin("DELETE", "/_admin/tenants/acme/file").status, 204);
    auto back = n.admin("PUT", "/_admin/tenants/acme/file", img.body,
                        {{"Content-Type", "application/octet-stream"}});
    ASSERT_EQ(back.status, 201) << back.body;
    auto rows = n.query("get notes");
    EXPECT_EQ(rows.status, 200) << rows.body;
    EXPECT_EQ(rows.body, image_rows);
    EXPECT_EQ(rows.header("Fenec-Seq").value_or(""), image_seq);
    auto q = n.admin("GET", "/_admin/tenants/acme/quota");
    EXPECT_EQ(q.status, 200) << q.body;
    EXPECT_NE(q.body.find(R"("quota":{"rows":4})"), std::string::npos) << q.body;
    EXPECT_EQ(n.query(R"(put notes {title: \"d\"})").status, 200);  // 3 rows: room for one
    auto past = n.query(R"(put notes {title: \"e\"})");
    EXPECT_EQ(past.status, 507) << past.body;
    EXPECT_EQ(past.body, R"({"error":"tenant `acme` is at its rows quota","quota":"rows"})");
}

// §13.3: every mutating admin route writes an `admin` audit line naming its path and status.
TEST(Admin, MutatingRoutesAreAudited) {
    TempDir logs;
    const std::string audit = logs.path() + "/audit.log";
    Node n({"--audit", audit});
    n.make_acme();
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/thaw").status, 200);
    ASSERT_EQ(n.admin("GET", "/_admin/tenants/acme/file").status, 200);
    ASSERT_EQ(n.admin("DELETE", "/_admin/tenants/acme").status, 204);
    std::string text;
    wait_until([&] {  // the log is flushed within a second (§13.3)
        std::ifstream in(audit);
        text.assign(std::istreambuf_iterator<char>(in), {});
        return text.find("\"method\":\"DELETE\"") != std::string::npos;
    });
    for (const char* want :
         {R"("path":"/_admin/tenants/acme/freeze")", R"("path":"/_admin/tenants/acme/thaw")",
          R"("method":"DELETE")", R"("status":204)"}) {
        EXPECT_NE(text.find(want), std::string::npos) << want << " in " << text;
    }
    EXPECT_EQ(text.find("/file"), std::string::npos) << "a GET is not audited: " << text;
}

}  // namespace
}  // namespace fenec::test::admin_test
