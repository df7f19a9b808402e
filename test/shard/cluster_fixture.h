// test/shard/cluster_fixture.h: a router in front of several real fenec-node processes that keep
// copies of each other's tenants (router.md §8): every node shares one --replication-token, so a
// copy told to follow reaches its primary's feed. The nodes are started once for a test suite
// and shared by its cases, each case with a router and directory of its own and tenants named
// for it alone, so a node's leftovers from another case are copies no directory knows. Network
// traffic goes to 127.0.0.1 only.
#pragma once

#include <signal.h>
#include <simdjson.h>

#include <array>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "test/shard/shard_fixture.h"

namespace fenec::test {

inline const std::string kRoot = "root";
inline const std::string kData = "data-token";
inline const std::string kReplication = "replication-token";
// Connections to 127.0.0.1:`port` whose bytes wait unread in the receive queue: requests sent
// whole to a stopped node, awaiting its answer (/proc/net/tcp: local port, state 01, rx_queue).
inline int requests_waiting_at(uint16_t port) {
    std::ifstream in("/proc/net/tcp");
    std::string line;
    std::getline(in, line);  // the header
    int n = 0;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string sl, local, remote, st, queues;
        f >> sl >> local >> remote >> st >> queues;
        const size_t colon = local.find(':');
        if (colon == std::string::npos || st != "01") continue;
        if (std::stoul(local.substr(colon + 1), nullptr, 16) != port) continue;
        const size_t q = queues.find(':');
        if (q != std::string::npos && std::stoul(queues.substr(q + 1), nullptr, 16) > 0) ++n;
    }
    return n;
}

inline std::string node_admin_token(int i) {
    return "admin-token-of-node-" + std::to_string(i + 1);
}

// Up to four nodes for a suite, each on a data directory of its own.
struct SharedNodes {
    static constexpr int max = 4;
    std::array<TempDir, max> dirs;
    std::array<std::unique_ptr<NodeProcess>, max> procs;

    // Starts node i, on `port` when given (a restart where the router knows it), else one it
    // picks. The last --listen is the one the node takes.
    void start(int i, uint16_t port = 0, const std::vector<std::string>& more = {}) {
        std::vector<std::string> flags = {"--token",
                                          kData,
                                          "--admin-token",
                                          node_admin_token(i),
                                          "--replication-token",
                                          kReplication,
                                          "--auth-delay",
                                          "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        if (port) {
            flags.push_back("--listen");
            flags.push_back("127.0.0.1:" + std::to_string(port));
        }
        procs[i].reset();
        procs[i] = std::make_unique<NodeProcess>(dirs[i].path(), flags);
        ASSERT_NE(procs[i]->port(), 0) << procs[i]->first_line();
    }
    uint16_t port(int i) const { return procs[i]->port(); }
};

// Waits for `ok` up to `ms`, looking every 20 ms.
inline bool eventually(const std::function<bool()>& ok, int ms = 5000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
        if (ok()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ok();
}

// Waits up to `ms` for `text` in the log at `path`: a process logs what it did after the change a
// test waits for (a row turned active, removed or put back), so the line may lag the change.
inline bool logged(const std::string& path, std::string_view text, int ms = 5000) {
    return eventually([&] { return read_file(path).find(text) != std::string::npos; }, ms);
}

// A JSON answer read whole, for looking members up.
struct Json {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    bool ok = false;
    explicit Json(const std::string& text) { ok = !parser.parse(text).get(doc); }
    // A text member of the top object (or of `e`), "" when absent or of another kind.
    static std::string text(simdjson::dom::element e, std::string_view key) {
        std::string_view s;
        return e[key].get_string().get(s) ? std::string() : std::string(s);
    }
    std::string text(std::string_view key) const { return ok ? text(doc, key) : ""; }
    bool has(std::string_view key) const {
        simdjson::dom::element e;
        return ok && !doc[key].get(e);
    }
    bool boolean(std::string_view key) const {
        bool b = false;
        return ok && !doc[key].get_bool().get(b) && b;
    }
};

// The value of a metric's sample, as text (`name{labels}`), or "" when absent.
// Whether the router at `port` had handed every follower of its directory keeping up all the
// file holds (each `keeping_up` one of its GET /_replication/status `behind` 0, and at least one),
// read at once: what a step answered only once those were sent the change promises at its answer.
inline bool feed_handed_all(uint16_t port) {
    Client c(port);
    const Reply st =
        c.request("GET", "/_replication/status", {}, bearer(kReplication)).value_or(Reply{});
    simdjson::dom::parser parser;
    simdjson::dom::array followers;
    if (st.status != 200 || parser.parse(st.body)["followers"].get(followers)) return false;
    int keeping_up = 0;
    for (simdjson::dom::element f : followers) {
        bool up = false;
        uint64_t behind = 1;
        if (f["keeping_up"].get(up) || f["behind"].get(behind)) return false;
        if (!up) continue;  // not waited for
        if (behind != 0) return false;
        ++keeping_up;
    }
    return keeping_up > 0;
}

inline std::string sample(const std::string& metrics, const std::string& series) {
    const size_t at = metrics.find("\n" + series + " ");
    if (at == std::string::npos) return "";
    const size_t from = at + series.size() + 2;
    return metrics.substr(from, metrics.find('\n', from) - from);
}

template <int N>
class ClusterTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        nodes_ = new SharedNodes();
        for (int i = 0; i < N; ++i) nodes_->start(i);
    }
    static void TearDownTestSuite() {
        delete nodes_;
        nodes_ = nullptr;
    }
    // A case may SIGSTOP a node (a node cut off): every node is continued after it, so the next
    // case finds them answering.
    void TearDown() override {
        for (int i = 0; nodes_ && i < N; ++i) {
            if (nodes_->procs[i]) nodes_->procs[i]->signal(SIGCONT);
        }
    }

    void start_router(std::vector<std::string> more = {}) {
        std::vector<std::string> flags = {"--token",      kRoot,
                                          "--directory",  dir_.path() + "/shard.fenec",
                                          "--audit",      dir_.path() + "/audit.log",
                                          "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        client_.reset();
        router_.reset();
        router_ = std::make_unique<RouterProcess>(flags, dir_.path() + "/router.err");
        ASSERT_NE(router_->port(), 0) << read_file(dir_.path() + "/router.err");
        client_ = std::make_unique<Client>(router_->port());
    }

    Reply call(std::string_view method, std::string_view target, std::string_view body,
               const std::string& token) {
        // A start_router that failed its assertion left none: a failure, not a crash that would
        // leave this binary's nodes running.
        if (!client_) {
            ADD_FAILURE() << "no router to ask " << method << " " << target;
            return Reply{};
        }
        auto r = client_->request(method, target, body, bearer(token));
        EXPECT_TRUE(r.has_value()) << method << " " << target;
        if (!r || r->closed) client_ = std::make_unique<Client>(router_->port());
        return r.value_or(Reply{});
    }
    Reply shard(std::string_view method, std::string_view target, std::string_view body = {}) {
        return call(method, target, body, kRoot);
    }
    // As shard(), asked again while a repair holds the tenant (409 `held_by: repair`), as a
    // client would: a node's arrival starts a repair, which claims each tenant it looks at.
    Reply shard_past_repair(std::string_view method, std::string_view target,
                            std::string_view body = {}) {
        Reply r;
        eventually([&] {
            r = shard(method, target, body);
            return r.status != 409 || r.body.find(R"("held_by":"repair")") == std::string::npos;
        });
        return r;
    }
    Reply data(std::string_view method, std::string_view target, std::string_view body = {}) {
        return call(method, target, body, kData);
    }
    // A request straight to node i: the oracle.
    Reply node(int i, std::string_view method, std::string_view target, std::string_view body = {},
               const std::string& token = {}) {
        Client c(nodes_->port(i));
        return c.request(method, target, body, bearer(token.empty() ? node_admin_token(i) : token))
            .value_or(Reply{});
    }
    // Whether node i names a lease holder at `term` (GET /_admin/lease), within `ms`.
    bool held_at_term(int i, int64_t term, int ms = 5000) {
        return eventually(
            [&] {
                Json j(node(i, "GET", "/_admin/lease").body);
                int64_t t = -1;
                return j.ok && !j.doc["holder"]["term"].get_int64().get(t) && t == term;
            },
            ms);
    }
    // Node i registered as `name`, in `region` and `zone` ("" leaves them unrecorded).
    Reply add(int i, const std::string& name, const std::string& region = "",
              const std::string& zone = "") {
        return shard("PUT", "/_shard/nodes/" + name,
                     "{\"addr\":\"127.0.0.1:" + std::to_string(nodes_->port(i)) +
                         "\",\"token\":\"" + node_admin_token(i) + "\",\"region\":\"" + region +
                         "\",\"zone\":\"" + zone + "\"}");
    }
    // A tenant of this case alone, with a `notes` collection, on `node`.
    Reply create(const std::string& tenant, const std::string& node_name) {
        return shard("PUT", "/_shard/tenants/" + tenant,
                     "{\"node\":\"" + node_name +
                         "\",\"schema\":[\"create collection notes (title text)\"]}");
    }
    // n1 (node 0) paired with n2 (node 1) as its standby, and `tenant` created on n1. Fatal
    // failures: call it under ASSERT_NO_FATAL_FAILURE.
    void pair_n1_n2_with(const std::string& tenant) {
        ASSERT_EQ(add(0, "n1").status, 201);
        ASSERT_EQ(add(1, "n2").status, 201);
        const Reply p = shard("PUT", "/_shard/nodes/n1", R"({"standby":"n2"})");
        ASSERT_EQ(p.status, 200) << p.body;
        ASSERT_EQ(create(tenant, "n1").status, 201);
    }
    // What node i says of its copy of `tenant` (GET /_admin/tenants/<t>), or 404.
    Reply copy_on(int i, const std::string& tenant) {
        return node(i, "GET", "/_admin/tenants/" + tenant);
    }
    // Whether node i's copy of `tenant` follows node j.
    bool follows(int i, const std::string& tenant, int j) {
        Reply r = copy_on(i, tenant);
        return r.status == 200 && r.body.find("\"role\":\"replica\"") != std::string::npos &&
               r.body.find("\"from\":\"http://127.0.0.1:" + std::to_string(nodes_->port(j)) +
                           "\"") != std::string::npos;
    }
    // The notes node i holds of `tenant`, as its count.
    std::string count_on(int i, const std::string& tenant) {
        return node(i, "GET", "/t/" + tenant + "/c/notes?count", {}, kData).body;
    }
    std::string metrics() { return shard("GET", "/_metrics").body; }
    // The name of a tenant for this case alone: nodes outlive cases.
    std::string tenant(const std::string& base) {
        std::string name = base + "-";
        for (char c :
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {
            name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        return name.substr(0, 64);
    }

    static inline SharedNodes* nodes_ = nullptr;
    TempDir dir_;
    std::unique_ptr<RouterProcess> router_;
    std::unique_ptr<Client> client_;
};

// A suite whose nodes take leases (--lease). A write answered has reached each connected copy's
// stream (--replica-wait, a bound a loaded machine does not run out of), so a node stopped after
// answering loses none of what it answered to a connected copy.
template <int N>
class LeasedClusterTest : public ClusterTest<N> {
  protected:
    static void SetUpTestSuite() {
        ClusterTest<N>::nodes_ = new SharedNodes();
        for (int i = 0; i < N; ++i) {
            ClusterTest<N>::nodes_->start(i, 0, {"--lease", "--replica-wait", "5000"});
        }
    }
};

}  // namespace fenec::test
