// test/server/node/registry_obs_test.cc: the tenant registry's memory bound and the node's logs
// against the real binary (node-http.md §14 cases 88, 90, 92), and the transport details of
// §2-§4 the other node tests leave out: HEAD, the tenant's description, 405 with Allow, the 404
// naming the planes, X-Request-Id on a 401, Fenec-Seq on REST writes, and CORS (§2.3).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "test/server/node/node_fixture.h"

namespace fenec::test::registry_obs_test {
namespace {

const std::string D = "data-token-d-7f3k";
const std::string A = "admin-token-a-9q2m";

constexpr int reply_timeout_ms = 3000;  // every answer here comes at once; fail fast if not

std::unique_ptr<NodeProcess> start_node(const TempDir& dir, std::vector<std::string> more = {},
                                        std::string stderr_path = {}) {
    std::vector<std::string> flags = {"--token", D, "--admin-token", A, "--auth-delay", "0"};
    flags.insert(flags.end(), more.begin(), more.end());
    auto n = std::make_unique<NodeProcess>(dir.path(), flags, std::move(stderr_path));
    EXPECT_NE(n->port(), 0) << n->first_line();
    return n;
}

void make_tenant(uint16_t port, const std::string& name) {
    Client c(port, reply_timeout_ms);
    auto r = c.request("PUT", "/_admin/tenants/" + name,
                       R"J({"schema":["create collection notes (title text, year int @sorted)"]})J",
                       bearer(A));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
}

// Reads an answer's head only: a HEAD's, or a 204's (which has no length to frame a body by).
std::optional<Reply> read_head(Client& c, int timeout_ms = reply_timeout_ms) {
    c.read_until("\r\n\r\n", timeout_ms);
    http::ResponseHead head;
    size_t used = 0;
    http::ParseError err;
    if (http::parse_response_head(c.buffer(), head, used, err) != http::ParseStatus::done) {
        return std::nullopt;
    }
    Reply r;
    r.status = head.status;
    for (const auto& h : head.headers) r.headers.emplace_back(h.name, h.value);
    c.drop(used);
    return r;
}

// The value of one series (`name{labels}`) in a Prometheus text body.
std::optional<double> metric(const std::string& body, const std::string& series) {
    std::istringstream in(body);
    for (std::string line; std::getline(in, line);) {
        if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
            line[series.size()] == ' ') {
            return std::stod(line.substr(series.size() + 1));
        }
    }
    return std::nullopt;
}

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The file's content once it holds `needle`, or what it holds after `timeout_ms`.
std::string wait_for_file(const std::string& path, std::string_view needle, int timeout_ms) {
    std::string s;
    wait_until(
        [&] {
            s = slurp(path);
            return s.find(needle) != std::string::npos;
        },
        std::chrono::milliseconds(timeout_ms));
    return s;
}

// The first line of `text` holding every one of `parts`, or "".
std::string line_with(const std::string& text, std::initializer_list<std::string_view> parts) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        bool all = true;
        for (std::string_view p : parts) all &= line.find(p) != std::string::npos;
        if (all) return line;
    }
    return "";
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// "a" is open (true), closed (false), or not listed (nullopt) in GET /_admin/tenants.
std::optional<bool> listed_open(const std::string& list, const std::string& name) {
    const size_t at = list.find("{\"name\":\"" + name + "\"");
    if (at == std::string::npos) return std::nullopt;
    const size_t end = list.find('}', at);
    const std::string entry = list.substr(at, end - at);
    if (entry.find("\"open\":true") != std::string::npos) return true;
    if (entry.find("\"open\":false") != std::string::npos) return false;
    return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Case 88: --max-memory fitting two tenants, both idle; reading a third closes the least
// recently used one.

TEST(RegistryObs, MemoryBoundClosesTheLeastRecentlyUsedIdleTenant) {
    TempDir dir;
    // Short rows under a sorted index: a tenant holds ~4 times its file in memory (the bodies,
    // the id map, the index's entries), so two open fit beside a third being opened; see the
    // sizing below.
    constexpr int rows = 32000;  // a file over 0.5 MiB: twice it passes the bound's rounding up
    {
        auto node = start_node(dir, {"--close-idle", "0"});
        std::string docs = "[";
        for (int i = 0; i < rows; ++i) {
            docs += (i ? ",{\"title\":\"" : "{\"title\":\"") + std::string("x") +
                    "\",\"year\":" + std::to_string(i) + "}";
        }
        docs += "]";
        Client c(node->port(), reply_timeout_ms);
        for (const char* t : {"ta", "tb", "tc"}) {
            make_tenant(node->port(), t);
            auto r = c.request("POST", std::string("/t/") + t + "/c/notes", docs, bearer(D));
            ASSERT_TRUE(r);
            ASSERT_EQ(r->status, 201) << r->body.substr(0, 200);
        }
    }
    // One tenant's memory as it opens from its file (the figure the bound is judged by).
    uint64_t one = 0;
    {
        auto node = start_node(dir, {"--close-idle", "0"});
        Client c(node->port(), reply_timeout_ms);
        ASSERT_EQ(c.request("GET", "/t/ta/c/notes/1", {}, bearer(D))->status, 200);
        auto m = c.request("GET", "/_metrics", {}, bearer(A));
        ASSERT_TRUE(m);
        one = static_cast<uint64_t>(metric(m->body, "fenec_memory_bytes").value_or(0));
        ASSERT_GT(one, 0u) << m->body;
    }
    const uint64_t file = std::filesystem::file_size(dir.path() + "/ta.fenec");
    // Two open fit (2 x one ≤ bound), and so does one open beside a second being opened, which
    // counts twice its file until open (one + 2 x file ≤ bound); a third's open does not
    // (2 x one + 2 x file > bound).
    const uint64_t mib = 1 << 20;
    const uint64_t bound_mib = (2 * one + mib - 1) / mib;
    ASSERT_LE(one + 2 * file, bound_mib * mib)
        << "a tenant's file is too big beside its memory for this sizing; one=" << one
        << " file=" << file;
    ASSERT_LT(bound_mib * mib, 2 * one + 2 * file)
        << "the rows no longer size the tenants for an integer --max-memory; one=" << one
        << " file=" << file;

    auto node = start_node(dir, {"--close-idle", "0", "--max-memory", std::to_string(bound_mib)});
    Client c(node->port(), reply_timeout_ms);
    auto get = [&](const std::string& t) {
        auto r = c.request("GET", "/t/" + t + "/c/notes/2", {}, bearer(D));
        EXPECT_TRUE(r);
        if (!r) return 0;
        EXPECT_NE(r->body.find("\"year\":1"), std::string::npos)
            << t << ": " << r->body.substr(0, 200);
        return r->status;
    };
    // Used in the order ta, tb, ta: tb is the least recently used. The pauses stay: a tenant's
    // last use is its wall-clock ms as the worker that answered lets it go, after the answer,
    // and nothing the node answers says when that was; they are a margin, not a wait for it.
    ASSERT_EQ(get("ta"), 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(get("tb"), 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(get("ta"), 200);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(100));  // both idle: no request holds them
    auto list = c.request("GET", "/_admin/tenants", {}, bearer(A));
    ASSERT_TRUE(list);
    EXPECT_EQ(listed_open(list->body, "ta"), true) << list->body;
    EXPECT_EQ(listed_open(list->body, "tb"), true) << list->body;
    EXPECT_EQ(listed_open(list->body, "tc"), false) << list->body;

    ASSERT_EQ(get("tc"), 200);  // not 503 memory: an idle tenant could be closed for it
    list = c.request("GET", "/_admin/tenants", {}, bearer(A));
    ASSERT_TRUE(list);
    EXPECT_EQ(listed_open(list->body, "ta"), true) << list->body;
    EXPECT_EQ(listed_open(list->body, "tb"), false) << list->body;
    EXPECT_EQ(listed_open(list->body, "tc"), true) << list->body;
    auto m = c.request("GET", "/_metrics", {}, bearer(A));
    ASSERT_TRUE(m);
    EXPECT_EQ(metric(m->body, "fenec_tenant_closes_total{reason=\"memory\"}"), 1.0) << m->body;
    EXPECT_EQ(metric(m->body, "fenec_tenants_open"), 2.0);
    EXPECT_EQ(metric(m->body, "fenec_memory_limit_bytes"), static_cast<double>(bound_mib * mib));
}

// ---------------------------------------------------------------------------------------------
// Issue 17 item 9: the memory figure counts what tenants hold, and follows a write at once.

// hello's memory_bytes.
uint64_t hello_memory(Client& c) {
    auto r = c.request("GET", "/_admin/hello", {}, bearer(A));
    EXPECT_TRUE(r);
    if (!r) return 0;
    const std::string key = "\"memory_bytes\":";
    const size_t at = r->body.find(key);
    EXPECT_NE(at, std::string::npos) << r->body;
    return at == std::string::npos ? 0 : std::stoull(r->body.substr(at + key.size()));
}

TEST(RegistryObs, TenantsWrittenOnceCountKilobytesEach) {
    TempDir dir;
    auto node = start_node(dir, {"--close-idle", "0"});
    Client c(node->port(), reply_timeout_ms);
    constexpr int tenants = 40;
    for (int i = 0; i < tenants; ++i) {
        const std::string t = "m" + std::to_string(i);
        make_tenant(node->port(), t);
        auto r = c.request("POST", "/t/" + t + "/c/notes", R"J({"title":"hi","year":1})J", bearer(D));
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 201) << r->body;
    }
    // Was 1 MiB and more a tenant: a first segment reserved whole, never touched (20,000 such
    // tenants counted 20 GB on a node holding 205 MB).
    const uint64_t each = hello_memory(c) / tenants;
    EXPECT_GT(each, 0u);
    EXPECT_LT(each, 64u << 10);
}

// The series the deploy kit's alerts read with rate() or increase() are there at 0 from the
// start: a series born at 1 with its first event increases by nothing, and the alert on a
// node's first failed compaction or first descriptor close never fired.
TEST(RegistryObs, TheAlertsCountersAreThereAtZeroFromTheStart) {
    TempDir dir;
    auto node = start_node(dir, {});
    Client c(node->port(), reply_timeout_ms);
    auto m = c.request("GET", "/_metrics", {}, bearer(A));
    ASSERT_TRUE(m);
    for (const char* series : {R"(fenec_compactions_total{trigger="auto",outcome="failed"})",
                               R"(fenec_compactions_total{trigger="statement",outcome="ok"})",
                               R"(fenec_tenant_closes_total{reason="descriptors"})",
                               R"(fenec_tenant_closes_total{reason="latched"})",
                               R"(fenec_writes_refused_total{reason="lease-elsewhere"})"}) {
        EXPECT_EQ(metric(m->body, series), 0.0) << series << "\n" << m->body;
    }
}

TEST(RegistryObs, AWriteCountsAtOnceNotAtTheNextSweep) {
    TempDir dir;
    auto node = start_node(dir, {"--close-idle", "0"});
    make_tenant(node->port(), "big");
    Client c(node->port(), reply_timeout_ms);
    std::string docs = "[";
    for (int i = 0; i < 4000; ++i) {
        docs += (i ? ",{\"title\":\"" : "{\"title\":\"") + std::string(1000, 'x') +
                "\",\"year\":" + std::to_string(i) + "}";
    }
    docs += "]";
    const uint64_t before = hello_memory(c);
    auto r = c.request("POST", "/t/big/c/notes", docs, bearer(D));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body.substr(0, 200);
    // Asked straight after the answer, well inside the registry's once-a-second refresh: the
    // block that landed the rows set the figure (4,000 bodies of 1 KB, and the sorted index).
    EXPECT_GE(hello_memory(c), before + 4000 * 1000);
}

// ---------------------------------------------------------------------------------------------
// Case 90: --audit <p>: a 401 (and a 403) writes a `refused` line; no token is ever written.

TEST(RegistryObs, AuditLogsRefusalsAndNeverAToken) {
    TempDir dir;
    const std::string log = dir.path() + "/audit.log";
    auto node = start_node(dir, {"--audit", log});
    make_tenant(node->port(), "acme");
    Client c(node->port(), reply_timeout_ms);
    const std::string bad = "not-a-token-zz9";
    const auto asked = std::chrono::steady_clock::now();
    auto r = c.request("GET", "/t/acme/c/notes?year=ge.2020", {},
                       {{"Authorization", "Bearer " + bad}, {"X-Request-Id", "audit-401"}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 401);
    // A known credential where it does not reach: 403, audited too.
    r = c.request("GET", "/t/acme/c/notes/1", {},
                  {{"Authorization", "Bearer " + A}, {"X-Request-Id", "audit-403"}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 403);

    // Flushed within a second (§13.3); a little slack for a loaded machine.
    const std::string text = wait_for_file(log, "audit-403", 1500);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - asked);
    EXPECT_LT(took.count(), 1500);
    const std::string l401 = line_with(text, {"\"request_id\":\"audit-401\""});
    ASSERT_FALSE(l401.empty()) << text;
    EXPECT_NE(l401.find("\"event\":\"refused\""), std::string::npos) << l401;
    EXPECT_NE(l401.find("\"at\":\"20"), std::string::npos) << l401;
    EXPECT_NE(l401.find("\"peer\":\"127.0.0.1"), std::string::npos) << l401;
    EXPECT_NE(l401.find("\"path\":\"/t/acme/c/notes\""), std::string::npos)
        << l401;  // no query string
    EXPECT_NE(l401.find("\"method\":\"GET\""), std::string::npos) << l401;
    EXPECT_NE(l401.find("\"status\":401"), std::string::npos) << l401;
    EXPECT_NE(l401.find("\"who\":{\"credential\":\"none\"}"), std::string::npos) << l401;
    const std::string l403 = line_with(text, {"\"request_id\":\"audit-403\""});
    ASSERT_FALSE(l403.empty()) << text;
    EXPECT_NE(l403.find("\"event\":\"refused\""), std::string::npos) << l403;
    EXPECT_NE(l403.find("\"status\":403"), std::string::npos) << l403;
    EXPECT_NE(l403.find("\"credential\":\"admin\""), std::string::npos) << l403;
    // No token, good or bad, anywhere in the file (the tenant's creation, audited, used A too).
    EXPECT_EQ(text.find(bad), std::string::npos) << text;
    EXPECT_EQ(text.find(A), std::string::npos) << text;
    EXPECT_EQ(text.find(D), std::string::npos) << text;
    EXPECT_EQ(text.find("Bearer"), std::string::npos) << text;
}

// ---------------------------------------------------------------------------------------------
// Case 92: --slow-ms 0: every request gets a `slow` line on stderr with the statement's shape;
// a parameter never appears.

TEST(RegistryObs, SlowLogShowsTheShapeNeverAParameter) {
    TempDir dir;
    const std::string err = dir.path() + "/stderr.log";
    auto node = start_node(dir, {"--slow-ms", "0"}, err);
    make_tenant(node->port(), "acme");
    Client c(node->port(), reply_timeout_ms);
    auto put = c.request("POST", "/t/acme/query",
                         R"({"query":"put notes {title: $1, year: 2021}","params":["secret"]})",
                         bearer(D));
    ASSERT_TRUE(put);
    ASSERT_EQ(put->status, 200) << put->body;
    auto get =
        c.request("POST", "/t/acme/query",
                  R"({"query":"get notes where title = $1 and year >= 2020","params":["secret"]})",
                  {{"Authorization", "Bearer " + D}, {"X-Request-Id", "slow-get"}});
    ASSERT_TRUE(get);
    ASSERT_EQ(get->status, 200) << get->body;
    ASSERT_NE(get->body.find("secret"), std::string::npos);  // the row is there: the shape is not

    const std::string text = wait_for_file(err, "slow-get", 1500);
    const std::string line = line_with(text, {"\"request_id\":\"slow-get\""});
    ASSERT_FALSE(line.empty()) << text;
    EXPECT_NE(line.find("\"event\":\"slow\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"route\":\"query\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"tenant\":\"acme\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"status\":200"), std::string::npos) << line;
    EXPECT_NE(line.find("\"ms\":"), std::string::npos) << line;
    EXPECT_NE(line.find("\"peer\":\"127.0.0.1"), std::string::npos) << line;
    // The shape: names and $1 kept, the literal 2020 gone.
    EXPECT_NE(line.find("\"statement\":\"get notes where title = $1 and year >= ?\""),
              std::string::npos)
        << line;
    EXPECT_EQ(line.find("2020"), std::string::npos) << line;
    const std::string put_line = line_with(text, {"\"statement\":\"put notes"});
    EXPECT_FALSE(put_line.empty()) << text;
    EXPECT_EQ(put_line.find("2021"), std::string::npos) << put_line;
    EXPECT_EQ(text.find("secret"), std::string::npos) << text;
}

// A stderr nobody reads (a pipe whose reader has stopped) fills, and a write(2) to it blocks. The
// slow lines go through a queue: the node keeps answering, and the lines it could not queue are
// counted. Nine answers in ten here write a slow line of ~250 bytes and the tenth one of ~6.8 KB,
// longer than a pipe takes in one write (PIPE_BUF): a 64 KiB pipe takes a few dozen, the writer's
// batch and the queue up to 4,096 lines or 16 MiB each, and the rest of 12,000 are dropped.
TEST(RegistryObs, AStderrNobodyReadsDropsSlowLinesAndBlocksNoAnswer) {
    TempDir dir;
    const std::string fifo = dir.path() + "/stderr.fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // never read
    ASSERT_GE(reader, 0) << std::strerror(errno);
    auto node = start_node(dir, {"--slow-ms", "0"}, fifo);
    make_tenant(node->port(), "acme");
    Client c(node->port(), reply_timeout_ms);
    std::string long_where = "year >= 2020";
    for (int k = 0; k < 500; ++k) long_where += " or year >= 2020";  // its shape: ~6.8 KB
    const std::string long_query = R"({"query":"get notes where )" + long_where + R"("})";
    for (int i = 0; i < 12000; ++i) {
        auto r = c.request("POST", "/t/acme/query",
                           i % 10 == 0 ? long_query : R"({"query":"get notes where year >= 2020"})",
                           bearer(D));
        ASSERT_TRUE(r) << "request " << i << " was not answered";
        ASSERT_EQ(r->status, 200) << r->body;
    }
    auto m = c.request("GET", "/_metrics", "", bearer(A));
    ASSERT_TRUE(m);
    EXPECT_GT(metric_value(m->body, "fenec_slow_lines_dropped_total"), 0u);
    EXPECT_GE(metric_value(m->body, "fenec_slow_requests_total"), 12000u);
    // Nor does it hold a stop: the lines stderr will not take are given up once the node closes.
    const int status =
        stop_within(node->pid(), std::chrono::seconds(10), [&] { return node->kill(SIGTERM); });
    EXPECT_NE(status, 128 + SIGKILL) << "no exit within 10 s of SIGTERM";
    ::close(reader);
}

// A tenant whose file cannot be opened (a byte flipped in its image region) is answered 500 with
// the open's verdict, and the node says the same on stderr, where operations.md promises its
// failures: once, however many requests meet the kept failure, and not mixed into another line.
TEST(RegistryObs, ATenantThatCannotBeOpenedIsSaidOnStderrOnce) {
    TempDir dir;
    const std::string err = dir.path() + "/stderr.log";
    {
        auto node = start_node(dir);
        Client c(node->port(), reply_timeout_ms);
        for (const char* t : {"acme", "beta"}) {  // beta: a later line, below
            make_tenant(node->port(), t);
            auto put = c.request("POST", std::string("/t/") + t + "/query",
                                 R"({"query":"put notes {title: \"a\", year: 2021}"})", bearer(D));
            ASSERT_TRUE(put);
            ASSERT_EQ(put->status, 200) << put->body;
        }
        ASSERT_EQ(node->kill(SIGTERM), 0);  // a clean stop: the file closes on a checkpoint
    }
    for (const char* t : {"acme", "beta"}) {
        // The first record's body, inside the image the close wrote: corruption, never a tear.
        std::fstream f(dir.path() + "/" + t + ".fenec",
                       std::ios::in | std::ios::out | std::ios::binary);
        ASSERT_TRUE(f);
        f.seekg(84);
        char b = 0;
        f.read(&b, 1);
        f.seekp(84);
        b = static_cast<char>(b ^ 0x20);
        f.write(&b, 1);
    }
    auto node = start_node(dir, {}, err);
    Client c(node->port(), reply_timeout_ms);
    for (int i = 0; i < 5; ++i) {
        auto r = c.request("POST", "/t/acme/query", R"({"query":"get notes"})", bearer(D));
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 500) << r->body;
        ASSERT_NE(r->body.find("tenant `acme` cannot be opened: corruption:"), std::string::npos)
            << r->body;
    }
    const std::string text = wait_for_file(err, "cannot be opened", 1500);
    const std::string line = line_with(text, {"fenec-node: tenant `acme` cannot be opened: "});
    ASSERT_FALSE(line.empty()) << text;
    EXPECT_NE(line.find("corruption: "), std::string::npos) << line;
    EXPECT_NE(line.find(" at offset "), std::string::npos) << line;
    // The node's lines leave in order: once beta's, asked after acme's five, is there, any
    // second acme line would be there before it.
    auto beta = c.request("POST", "/t/beta/query", R"({"query":"get notes"})", bearer(D));
    ASSERT_TRUE(beta);
    ASSERT_EQ(beta->status, 500) << beta->body;
    const std::string later = wait_for_file(err, "tenant `beta` cannot be opened", 1500);
    ASSERT_NE(later.find("tenant `beta` cannot be opened"), std::string::npos) << later;
    size_t said = 0;
    for (size_t at = later.find("tenant `acme` cannot be opened"); at != std::string::npos;
         at = later.find("tenant `acme` cannot be opened", at + 1)) {
        ++said;
    }
    EXPECT_EQ(said, 1u) << later;
}

// ---------------------------------------------------------------------------------------------
// §2-§4 details, one node without --cors.

class SurfacePlane : public ::testing::Test {
  protected:
    void SetUp() override {
        node_ = start_node(dir_);
        make_tenant(node_->port(), "acme");
        client_ = std::make_unique<Client>(node_->port(), reply_timeout_ms);
        auto p = client_->request("POST", "/t/acme/query",
                                  R"({"query":"put notes {title: \"a\", year: 2020}"})", bearer(D));
        ASSERT_TRUE(p);
        ASSERT_EQ(p->status, 200) << p->body;
    }
    Reply req(std::string_view method, std::string_view target, std::string_view body = {},
              std::vector<std::pair<std::string, std::string>> headers = bearer(D)) {
        auto r = client_->request(method, target, body, std::move(headers));
        EXPECT_TRUE(r) << method << " " << target;
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port(), reply_timeout_ms);
        return r.value_or(Reply{});
    }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

// §2.1: HEAD is GET without the body; the length is the GET's.
TEST_F(SurfacePlane, HeadOnADocumentHasTheLengthAndNoBody) {
    auto get = req("GET", "/t/acme/c/notes/1");
    ASSERT_EQ(get.status, 200);
    ASSERT_TRUE(client_->send_raw(
        "HEAD /t/acme/c/notes/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + D + "\r\n\r\n"));
    auto head = read_head(*client_);
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 200);
    EXPECT_EQ(head->header("Content-Length"), std::to_string(get.body.size()));
    EXPECT_EQ(head->header("Content-Type"), "application/json; charset=utf-8");
    EXPECT_TRUE(head->header("Fenec-Seq"));
    // No body byte follows: the next answer on the connection starts right away.
    EXPECT_EQ(client_->read_until("\x01", 200), "");
    auto health = client_->request("GET", "/_health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    EXPECT_NE(health->body.find("\"ok\":true"), std::string::npos);
}

// §5: GET /t/<t>/ describes the tenant; `_` collections are not shown. No CORS header without
// --cors (§2.3).
TEST_F(SurfacePlane, TenantRootDescribesCollections) {
    auto keyed = req("POST", "/t/acme/query", R"({"query":"put notes {title: \"k\"}"})",
                     {{"Authorization", "Bearer " + D}, {"Idempotency-Key", "k1"}});
    ASSERT_EQ(keyed.status, 200) << keyed.body;  // lands an _idempotency row
    auto r = req("GET", "/t/acme/");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"tenant\":\"acme\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("\"seq\":"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("\"history\":\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("\"collections\":[{\"name\":\"notes\",\"fields\":["), std::string::npos)
        << r.body;
    EXPECT_NE(r.body.find("\"name\":\"title\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("\"name\":\"year\""), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("_idempotency"), std::string::npos) << r.body;
    EXPECT_EQ(r.header("Fenec-Seq"), keyed.header("Fenec-Seq"));
    EXPECT_NE(r.body.find("\"seq\":" + keyed.header("Fenec-Seq").value_or("?")), std::string::npos)
        << r.body;
    EXPECT_FALSE(r.header("Access-Control-Allow-Origin"));
    EXPECT_FALSE(keyed.header("Access-Control-Allow-Origin"));
    EXPECT_EQ(req("GET", "/t/nope/").status, 404);
}

// §2.1: a known path with a method it does not take → 405 with Allow (data plane, metrics).
TEST_F(SurfacePlane, WrongMethodIs405WithAllow) {
    struct Case {
        const char* method;
        const char* target;
        const char* must_allow;
        std::string token;
    };
    const Case cases[] = {
        {"DELETE", "/t/acme/query", "POST", D}, {"GET", "/t/acme/batch", "POST", D},
        {"PUT", "/t/acme/c/notes", "POST", D},  {"POST", "/t/acme/c/notes/changes", "GET", D},
        {"POST", "/t/acme/", "GET", D},         {"POST", "/t/acme/c/notes/1", "PUT", D},
        {"POST", "/_metrics", "GET", A},        {"DELETE", "/_admin/tenants", "GET", A},
    };
    for (const Case& k : cases) {
        auto r = req(k.method, k.target, {}, bearer(k.token));
        EXPECT_EQ(r.status, 405) << k.method << " " << k.target << ": " << r.body;
        const std::string allow = r.header("Allow").value_or("");
        EXPECT_NE(allow.find(k.must_allow), std::string::npos)
            << k.method << " " << k.target << ": Allow " << allow;
        EXPECT_EQ(allow.find(k.method), std::string::npos)
            << k.method << " " << k.target << ": Allow " << allow;
    }
}

// §2.1 on the admin plane: /_admin/tenants/<t> and its query are known paths too.
TEST_F(SurfacePlane, AdminWrongMethodIs405WithAllow) {
    // NOTE: admin.cc answers 404 "no admin route" for a known path under /_admin/tenants/<t> with
    // a method it does not take; §2.1 says 405 with Allow. Expected to fail until it does.
    struct Case {
        const char* method;
        const char* target;
        const char* must_allow;
    };
    const Case cases[] = {
        {"POST", "/_admin/tenants/acme", "GET"},
        {"GET", "/_admin/tenants/acme/query", "POST"},
    };
    for (const Case& k : cases) {
        auto r = req(k.method, k.target, {}, bearer(A));
        EXPECT_EQ(r.status, 405) << k.method << " " << k.target << ": " << r.body;
        const std::string allow = r.header("Allow").value_or("");
        EXPECT_NE(allow.find(k.must_allow), std::string::npos)
            << k.method << " " << k.target << ": Allow " << allow;
    }
}

// §3.1: any other path → 404 naming the planes; no credential is asked for it.
TEST_F(SurfacePlane, UnknownPathIs404NamingThePlanes) {
    for (const char* path : {"/nope", "/", "/_nope/x", "/tenants/acme"}) {
        auto r = req("GET", path, {}, {});
        EXPECT_EQ(r.status, 404) << path << ": " << r.body;
        for (const char* plane : {"/t/", "/_admin/", "/_replication/", "/_metrics", "/_health"}) {
            EXPECT_NE(r.body.find(plane), std::string::npos)
                << path << " does not name " << plane << ": " << r.body;
        }
        EXPECT_FALSE(r.header("WWW-Authenticate")) << path;
        EXPECT_EQ(r.header("Content-Type"), "application/json; charset=utf-8") << path;
    }
}

// §4.1, §4.2: X-Request-Id is kept on a refusal too, with WWW-Authenticate on the 401.
TEST_F(SurfacePlane, RequestIdIsEchoedOnA401) {
    auto none = req("GET", "/t/acme/c/notes/1", {}, {{"X-Request-Id", "order-401"}});
    EXPECT_EQ(none.status, 401);
    EXPECT_EQ(none.header("X-Request-Id"), "order-401");
    EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer");
    auto bad = req("GET", "/_admin/tenants", {},
                   {{"Authorization", "Bearer wrong"}, {"X-Request-Id", "order-401b"}});
    EXPECT_EQ(bad.status, 401);
    EXPECT_EQ(bad.header("X-Request-Id"), "order-401b");
    EXPECT_EQ(bad.header("WWW-Authenticate"), "Bearer");
    auto scope = req("GET", "/_admin/tenants", {},
                     {{"Authorization", "Bearer " + D}, {"X-Request-Id", "order-403"}});
    EXPECT_EQ(scope.status, 403);
    EXPECT_EQ(scope.header("X-Request-Id"), "order-403");
    EXPECT_FALSE(scope.header("WWW-Authenticate"));
}

// §4.2: every successful REST write carries the block's Fenec-Seq and Fenec-History.
TEST_F(SurfacePlane, RestWritesCarryFenecSeqAndHistory) {
    auto seq_of = [](const Reply& r) -> uint64_t {
        auto s = r.header("Fenec-Seq");
        EXPECT_TRUE(s) << r.status << " " << r.body;
        return s ? std::stoull(*s) : 0;
    };
    auto history_ok = [](const Reply& r) {
        auto h = r.header("Fenec-History");
        if (!h || h->size() != 16) return false;
        return std::all_of(h->begin(), h->end(), [](char c) {
            return std::isxdigit(static_cast<unsigned char>(c)) &&
                   !std::isupper(static_cast<unsigned char>(c));
        });
    };
    const uint64_t s0 = seq_of(req("GET", "/t/acme/"));
    auto put = req("PUT", "/t/acme/c/notes/9", R"({"title":"n"})");
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(seq_of(put), s0 + 1);
    EXPECT_TRUE(history_ok(put));
    auto again = req("PUT", "/t/acme/c/notes/9", R"({"title":"n2"})");
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(seq_of(again), s0 + 2);
    auto patch = req("PATCH", "/t/acme/c/notes/9", R"({"year":2030})");
    ASSERT_EQ(patch.status, 200) << patch.body;
    EXPECT_EQ(seq_of(patch), s0 + 3);
    EXPECT_TRUE(history_ok(patch));
    auto post = req("POST", "/t/acme/c/notes", R"([{"title":"p"},{"title":"q"}])");
    ASSERT_EQ(post.status, 201) << post.body;
    const uint64_t after_post = seq_of(post);
    EXPECT_GT(after_post, s0 + 3);
    EXPECT_TRUE(history_ok(post));
    auto del = req("DELETE", "/t/acme/c/notes/9");
    ASSERT_EQ(del.status, 200) << del.body;
    EXPECT_EQ(seq_of(del), after_post + 1);
    EXPECT_TRUE(history_ok(del));
    EXPECT_EQ(put.header("Fenec-History"), del.header("Fenec-History"));
    // A read after them sees the last write's seq.
    EXPECT_EQ(seq_of(req("GET", "/t/acme/c/notes/1")), after_post + 1);
}

// ---------------------------------------------------------------------------------------------
// §2.3: --cors: a preflight is answered 204 before any credential; answers carry the origin.

TEST(RegistryObs, CorsPreflightAndAnswers) {
    TempDir dir;
    const std::string origin = "https://x.example";
    auto node = start_node(dir, {"--cors", origin});
    make_tenant(node->port(), "acme");
    Client c(node->port(), reply_timeout_ms);
    for (const char* path : {"/t/acme/query", "/t/acme/c/notes/1", "/_admin/tenants"}) {
        ASSERT_TRUE(c.send_raw(std::string("OPTIONS ") + path +
                               " HTTP/1.1\r\nHost: x\r\nOrigin: " + origin +
                               "\r\nAccess-Control-Request-Method: POST\r\n"
                               "Access-Control-Request-Headers: authorization, content-type, "
                               "idempotency-key\r\n\r\n"));
        auto pre = read_head(c);
        ASSERT_TRUE(pre) << path;
        EXPECT_EQ(pre->status, 204) << path;  // no credential asked for
        EXPECT_FALSE(pre->header("WWW-Authenticate")) << path;
        EXPECT_EQ(pre->header("Access-Control-Allow-Origin"), origin) << path;
        const std::string methods = pre->header("Access-Control-Allow-Methods").value_or("");
        for (const char* m : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
            EXPECT_NE(methods.find(m), std::string::npos) << path << ": " << methods;
        }
        const std::string headers = lower(pre->header("Access-Control-Allow-Headers").value_or(""));
        for (const char* h :
             {"authorization", "content-type", "idempotency-key", "fenec-after", "fenec-history",
              "fenec-wait", "last-event-id", "x-request-id", "traceparent", "tracestate"}) {
            EXPECT_NE(headers.find(h), std::string::npos) << path << ": " << headers;
        }
        if (pre->status != 204) {
            c.read_until("\x01", 200);  // drop a refusal's body
            c.drop(c.buffer().size());
        }
    }
    // An ordinary answer carries the origin, Vary and the exposed headers; so does a refusal.
    auto ok = c.request("POST", "/t/acme/query", R"({"query":"put notes {title: \"c\"}"})",
                        {{"Authorization", "Bearer " + D}, {"Origin", origin}});
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
    EXPECT_EQ(ok->header("Access-Control-Allow-Origin"), origin);
    EXPECT_NE(ok->header("Vary").value_or("").find("Origin"), std::string::npos);
    const std::string exposed = lower(ok->header("Access-Control-Expose-Headers").value_or(""));
    for (const char* h : {"fenec-seq", "fenec-history", "idempotent-replayed", "x-request-id"}) {
        EXPECT_NE(exposed.find(h), std::string::npos) << exposed;
    }
    auto refused = c.request("GET", "/t/acme/c/notes/1", {}, {{"Origin", origin}});
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 401);
    EXPECT_EQ(refused->header("Access-Control-Allow-Origin"), origin);
}

}  // namespace
}  // namespace fenec::test::registry_obs_test
