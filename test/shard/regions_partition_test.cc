// test/shard/regions_partition_test.cc: a partition between two regions (router.md §11.10) and
// leases by region (§11.8), over real processes on loopback. The global router G keeps eu's node
// eu1 itself and leases it; us keeps a directory of its own, kept by its router U (`--region us
// --global`), which leases us1 and us2 under --replicas. G reaches U only through a fault proxy
// standing for the link between the regions (G's `regions` row names the proxy), and U follows G's
// directory through a second proxy, the link's other way; the link cut is both proxies gone (every
// connection over them ended, every new one refused), the link back both made again on their
// ports. U reaches us1 through a proxy of its own, so us1 can be cut off from U while it still
// answers its clients.
//
// It proves: with the link cut, us's clients write through U as before (U renews us's leases past
// a lease's length), a request from G for a us tenant is 502 naming the region, eu's tenants write
// through G; us1 cut off from U stops taking writes as its lease lapses and U promotes its tenant
// on its replica in us; the lease-safety checker finds no write acknowledged outside a lease, no
// two nodes leasing the tenant at once and none lost; with the link back, G's next request reaches
// the tenant on its new node. And §11.8: us's nodes are leased under us's directory's authority
// and term, not the global one's, and us's standby router promoted over U leases them at a higher
// term, fencing U at the nodes. The oracles are the nodes asked directly (their rows, their
// `GET /_admin/lease`) and what each router says of itself at /_health.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <future>
#include <thread>

#include "shard/directory.h"
#include "test/shard/recorded_writes.h"
#include "test/shard/standby_fixture.h"
#include "test/support/fault_proxy.h"
#include "test/support/file_search.h"

namespace fenec::test::regions_partition_test {
namespace {

// The lease both directories grant, in seconds: a lapse and a failover well inside the waits.
const std::string kLease = "1";

// Nodes: eu1 (index 0), kept by G; us1 (1) and us2 (2), kept by U.
class RegionsPartition : public LeasedClusterTest<3> {
  protected:
    void SetUp() override {
        acme_ = tenant("acme");
        euro_ = tenant("euro");
        start_global();
        const uint16_t g_port = router_->port();
        link_back_ = std::make_unique<FaultProxy>(g_port);
        ASSERT_NE(link_back_->port(), 0);
        us1_link_ = std::make_unique<FaultProxy>(nodes_->port(1));
        ASSERT_NE(us1_link_->port(), 0);
        u_ = std::make_unique<RouterProcess>(
            std::vector<std::string>{"--token", kRoot, "--directory", dir_.file("us.fenec"),
                                     "--region", "us", "--global", url_of(link_back_->port()),
                                     "--replication-token", kReplication, "--auto-failover",
                                     kLease, "--replicas", "--auth-delay", "0"},
            dir_.file("us.err"));
        ASSERT_NE(u_->port(), 0) << read_file(dir_.file("us.err"));
        link_ = std::make_unique<FaultProxy>(u_->port());
        ASSERT_NE(link_->port(), 0);

        // us's nodes and tenant, on U: acme on us1 (reached through its proxy), its replica on us2.
        ASSERT_EQ(on_u("PUT", "/_shard/nodes/us1", node_body(us1_link_->port(), 1, "iad")).status,
                  201);
        ASSERT_EQ(on_u("PUT", "/_shard/nodes/us2", node_body(nodes_->port(2), 2, "pdx")).status,
                  201);
        // us's routers recorded on G as the link's end; then acme created through U, which
        // relays the create to G (its home `@us` written there) and makes it when G asks (§11.4).
        Reply region =
            shard("PUT", "/_shard/regions/us", "{\"routers\":[\"" + url_of(link_->port()) + "\"]}");
        ASSERT_EQ(region.status, 201) << region.body;
        Reply made = on_u("PUT", "/_shard/tenants/" + acme_,
                          R"J({"node":"us1","schema":["create collection notes (title text)"]})J");
        ASSERT_EQ(made.status, 201) << made.body;
        ASSERT_EQ(Json(made.body).text("replica_on"), "us2") << made.body;
        ASSERT_EQ(Json(shard("GET", "/_shard/tenants/" + acme_).body).text("node"), "@us");
        // eu's node and tenant, on G.
        ASSERT_EQ(add(0, "eu1", "eu").status, 201);
        ASSERT_EQ(create(euro_, "eu1").status, 201);
    }

    // G: leasing eu1, serving its directory's feed.
    void start_global(uint16_t port = 0) {
        std::vector<std::string> flags = {"--replication-token", kReplication, "--auto-failover",
                                          kLease};
        if (port) {
            flags.push_back("--listen");
            flags.push_back("127.0.0.1:" + std::to_string(port));
        }
        start_router(flags);
    }
    std::string node_body(uint16_t port, int i, const std::string& zone) {
        return "{\"addr\":\"127.0.0.1:" + std::to_string(port) + "\",\"token\":\"" +
               node_admin_token(i) + "\",\"region\":\"us\",\"zone\":\"" + zone + "\"}";
    }
    Reply on_u(std::string_view method, std::string_view target, std::string_view body = {},
               const std::string& token = kRoot) {
        Client c(u_->port());
        return c.request(method, target, body, bearer(token)).value_or(Reply{});
    }

    // The link between the regions goes down: both ways, every connection ended, every new one
    // refused.
    void cut_link() {
        link_.reset();
        link_back_.reset();
    }
    // The link comes back, on the ports G and U know it by.
    void heal_link(uint16_t link_port, uint16_t back_port) {
        link_ = std::make_unique<FaultProxy>(u_->port(), link_port);
        ASSERT_EQ(link_->port(), link_port);
        link_back_ = std::make_unique<FaultProxy>(router_->port(), back_port);
        ASSERT_EQ(link_back_->port(), back_port);
    }

    // What node i says of its lease (GET /_admin/lease).
    struct Lease {
        std::string authority;
        int64_t term = -1;
        int64_t grant = -1;
        std::string tenants;  // the list, as its JSON text
    };
    Lease lease_of(int i) {
        Reply r = node(i, "GET", "/_admin/lease");
        Json j(r.body);
        Lease l;
        simdjson::dom::element lease;
        if (!j.ok || j.doc["lease"].get(lease) || !lease.is_object()) return l;
        l.authority = Json::text(lease, "authority");
        if (lease["term"].get_int64().get(l.term)) l.term = -1;
        if (lease["grant"].get_int64().get(l.grant)) l.grant = -1;
        simdjson::dom::element list;
        if (!j.doc["tenants"].get(list)) l.tenants = simdjson::minify(list);
        return l;
    }
    // The term a router's /_health names, or -1.
    static int64_t term_of(const Reply& health) {
        Json j(health.body);
        int64_t t = -1;
        return j.ok && !j.doc["term"].get_int64().get(t) ? t : -1;
    }
    // A note written to `t` through the router on `port`.
    static Reply write(uint16_t port, const std::string& t, const std::string& title) {
        Client c(port);
        return c.request("POST", "/t/" + t + "/c/notes", "{\"title\":\"" + title + "\"}",
                         bearer(kData))
            .value_or(Reply{});
    }
    std::vector<RecordedWrites::Node> us_nodes() const {
        return {{"us1", nodes_->port(1), node_admin_token(1)},
                {"us2", nodes_->port(2), node_admin_token(2)}};
    }

    std::string acme_;  // at home in us: on us1, its replica on us2
    std::string euro_;  // eu's, on eu1
    std::unique_ptr<FaultProxy> link_back_;  // U → G: U follows the global directory over it
    std::unique_ptr<FaultProxy> us1_link_;   // U → us1
    std::unique_ptr<RouterProcess> u_;
    std::unique_ptr<FaultProxy> link_;  // G → U: G's `regions` row names it
};

// §11.10 step by step, the region cut off from G throughout the failover of one of its nodes.
TEST_F(RegionsPartition, ARegionCutOffWritesOnAndFailsItsOwnNodesOver) {
    RecordedWrites rec(us_nodes(), true);
    // Both levels answer: G relays acme's writes to U, which sends them to us1. (The nodes outlive
    // cases: a lease of another case's router runs out first.)
    ASSERT_TRUE(eventually([&] { return rec.write_at(router_->port(), acme_, "us1").status == 201; },
                           8000))
        << write(router_->port(), acme_, "probe").body;
    ASSERT_TRUE(
        eventually([&] { return write(router_->port(), euro_, "eu").status == 201; }, 8000));
    ASSERT_EQ(rec.write_at(u_->port(), acme_, "us1").status, 201);
    const uint16_t link_port = link_->port(), back_port = link_back_->port();

    cut_link();
    // A request from eu for a us tenant, a write or a read: 502 naming the region, as a node out
    // of reach is. eu's tenants are written as before.
    const std::string out_of_reach =
        R"({"error":"region `us` is out of reach: none of its routers answered","region":"us"})";
    Reply relayed = write(router_->port(), acme_, "from eu");
    EXPECT_EQ(relayed.status, 502) << relayed.body;
    EXPECT_EQ(relayed.body, out_of_reach);
    Reply read = data("GET", "/t/" + acme_ + "/c/notes?count");
    EXPECT_EQ(read.status, 502) << read.body;
    EXPECT_EQ(read.body, out_of_reach);
    EXPECT_EQ(write(router_->port(), euro_, "eu while cut").status, 201);
    // Inside us nothing changes: U renews us1's lease past a whole lease from the cut (a grant
    // every third of it), and us's clients write through U.
    const int64_t grant_at_cut = lease_of(1).grant;
    ASSERT_GT(grant_at_cut, 0);
    ASSERT_TRUE(eventually([&] { return lease_of(1).grant >= grant_at_cut + 4; }, 5000))
        << node(1, "GET", "/_admin/lease").body;
    Reply inside = rec.write_at(u_->port(), acme_, "us1");
    EXPECT_EQ(inside.status, 201) << inside.body;

    // us1 cut off from U (it still answers its own clients): a writer straight to each us node,
    // as a router that still believed either would.
    std::atomic<bool> done{false};
    std::vector<std::thread> writers;
    for (int i = 1; i <= 2; ++i) {
        writers.emplace_back([&, i] {
            while (!done) rec.write_at(nodes_->port(i), acme_, "us" + std::to_string(i));
        });
    }
    struct Join {  // whatever an assertion below does, the writers end before the record does
        std::atomic<bool>& done;
        std::vector<std::thread>& threads;
        ~Join() {
            done = true;
            for (auto& th : threads) {
                if (th.joinable()) th.join();
            }
        }
    } join{done, writers};
    ASSERT_TRUE(eventually([&] { return rec.writes() >= 10; }));
    us1_link_->hold();
    // us1 stops taking writes as its lease lapses, refusing them for it.
    ASSERT_TRUE(eventually(
        [&] {
            Reply r = node(1, "POST", "/t/" + acme_ + "/c/notes", R"({"title":"probe"})", kData);
            return r.status == 503 && r.header("Fenec-Lease").has_value();
        },
        5000));
    // U promotes acme on its replica in us; it takes writes there.
    ASSERT_TRUE(eventually(
        [&] { return Json(on_u("GET", "/_shard/tenants/" + acme_).body).text("node") == "us2"; },
        8000))
        << on_u("GET", "/_shard/tenants/" + acme_).body;
    const size_t before = rec.writes();
    ASSERT_TRUE(eventually([&] { return rec.writes() >= before + 10; }))
        << "us2 took no write after the failover";
    done = true;
    for (auto& th : writers) th.join();
    ASSERT_TRUE(
        eventually([&] { return rec.write_at(u_->port(), acme_, "us2").status == 201; }, 5000));
    // Still cut: G knows nothing of the failover and needs not to.
    EXPECT_EQ(data("GET", "/t/" + acme_ + "/c/notes?count").status, 502);

    // The link back: G's next request reaches acme on its new node.
    ASSERT_NO_FATAL_FAILURE(heal_link(link_port, back_port));
    Reply back = rec.write_at(router_->port(), acme_, "us2");
    EXPECT_EQ(back.status, 201) << back.body;
    Reply count = data("GET", "/t/" + acme_ + "/c/notes?count");
    EXPECT_EQ(count.status, 200) << count.body;
    EXPECT_EQ(count.body, count_on(2, acme_));

    EXPECT_EQ(rec.check({{acme_, nodes_->port(2)}}), "");  // us2, the new primary
}

// §11.10: with the link down, a create in us and a delete of a us tenant are refused 503
// `Retry-After: 5` through either router and change nothing; once the link is back, the same
// changes asked again go through.
TEST_F(RegionsPartition, ChangesTouchingACutRegionAreRefusedThenGoThroughOnceTheLinkIsBack) {
    const std::string via_g = tenant("via-g"), via_u = tenant("via-u");
    const std::string schema = R"J(,"schema":["create collection notes (title text)"]})J";
    const std::string in_us = R"J({"region":"us")J" + schema;
    const std::string on_us2 = R"J({"node":"us2")J" + schema;
    const uint16_t link_port = link_->port(), back_port = link_back_->port();

    cut_link();
    auto refused = [&](const Reply& r) {
        EXPECT_EQ(r.status, 503) << r.body;
        EXPECT_EQ(r.header("Retry-After").value_or(""), "5") << r.body;
        EXPECT_EQ(Json(r.body).text("region"), "us") << r.body;
    };
    refused(shard("PUT", "/_shard/tenants/" + via_g, in_us));
    refused(shard("DELETE", "/_shard/tenants/" + acme_));
    // U relays a create to G, which the cut link keeps from it: refused as well, naming G's level.
    Reply from_u = on_u("PUT", "/_shard/tenants/" + via_u, on_us2);
    EXPECT_EQ(from_u.status, 503) << from_u.body;
    EXPECT_EQ(from_u.header("Retry-After").value_or(""), "5") << from_u.body;
    // Nothing changed on either level.
    EXPECT_EQ(shard("GET", "/_shard/tenants/" + via_g).status, 404);
    EXPECT_EQ(on_u("GET", "/_shard/tenants/" + via_u).status, 404);
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + acme_).body).text("state"), "active");
    EXPECT_EQ(Json(on_u("GET", "/_shard/tenants/" + acme_).body).text("node"), "us1");

    ASSERT_NO_FATAL_FAILURE(heal_link(link_port, back_port));
    Reply made_g;
    EXPECT_TRUE(eventually([&] {
        made_g = shard("PUT", "/_shard/tenants/" + via_g, in_us);
        return made_g.status == 201;
    })) << made_g.body;
    Reply made_u;
    EXPECT_TRUE(eventually([&] {
        made_u = on_u("PUT", "/_shard/tenants/" + via_u, on_us2);
        return made_u.status == 201;
    })) << made_u.body;
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + via_u).body).text("node"), "@us");
    EXPECT_EQ(Json(on_u("GET", "/_shard/tenants/" + via_u).body).text("node"), "us2");
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + via_g).body).text("node"), "@us");
    Reply deleted = shard("DELETE", "/_shard/tenants/" + acme_);
    EXPECT_EQ(deleted.status, 204) << deleted.body;
    EXPECT_EQ(shard("GET", "/_shard/tenants/" + acme_).status, 404);
    EXPECT_EQ(on_u("GET", "/_shard/tenants/" + acme_).status, 404);
}

// §9.12: U forwards a write for euro_, eu's tenant, to eu1 by its copy of the global directory;
// G leases eu1. With G stopped, eu1 refuses for its lease. U, which leases us's nodes but not
// eu1, asks again every 50 ms for two thirds of the lease G recorded, as a standby does, and the
// write is taken once G grants again. Before, U took itself for eu1's leaser: it asked its own
// (absent) grant twice at once and passed the refusal on within milliseconds.
TEST_F(RegionsPartition, AWriteToANodeTheGlobalRouterLeasesIsAskedAgainThroughARegionsRouter) {
    ASSERT_TRUE(eventually([&] { return write(u_->port(), euro_, "probe").status == 201; }, 8000))
        << write(u_->port(), euro_, "probe").body;
    router_->signal(SIGSTOP);  // G grants nothing: eu1's lease runs out
    auto eu1_refuses = [&] {
        Reply r = node(0, "POST", "/t/" + euro_ + "/c/notes", R"({"title":"direct"})", kData);
        return r.status == 503 && r.header("Fenec-Lease").has_value();
    };
    ASSERT_TRUE(eventually(eu1_refuses, 5000));
    auto retries = [&] {
        const std::string v =
            sample(on_u("GET", "/_metrics").body, "fenec_router_retries_total{reason=\"lease\"}");
        return v.empty() ? 0.0 : std::stod(v);
    };
    const double before = retries();
    const auto began = std::chrono::steady_clock::now();
    const Reply refused = write(u_->port(), euro_, "refused");
    const auto took = std::chrono::steady_clock::now() - began;
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_TRUE(refused.header("Fenec-Lease").has_value()) << refused.body;
    EXPECT_GE(took, std::chrono::milliseconds(550)) << "two thirds of G's 1 s lease: 667 ms";

    const double asked = retries();
    EXPECT_GE(asked - before, 5) << "asked again every 50 ms, not twice at once";
    auto taken = std::async(std::launch::async, [&] { return write(u_->port(), euro_, "taken"); });
    ASSERT_TRUE(eventually([&] { return retries() > asked; }, 2000));  // refused, asking again
    router_->signal(SIGCONT);  // G's next grant names euro_ on eu1 again
    const Reply r = taken.get();
    EXPECT_EQ(r.status, 201) << r.body;
}

// §11.8: each directory leases the nodes it keeps under its own authority and term; us's standby
// router, promoted over U while U still runs, leases them at a higher term and U is fenced there.
TEST_F(RegionsPartition, ARegionsNodesAreLeasedUnderItsOwnAuthorityAndTerm) {
    ASSERT_TRUE(eventually([&] { return write(u_->port(), acme_, "a").status == 201; }, 8000));
    ASSERT_TRUE(
        eventually([&] { return write(router_->port(), euro_, "e").status == 201; }, 8000));
    // The nodes outlive cases: a lease another case's router granted runs out first.
    ASSERT_TRUE(eventually([&] { return lease_of(2).authority == lease_of(1).authority; }, 5000))
        << node(2, "GET", "/_admin/lease").body;
    const int64_t u_term = term_of(on_u("GET", "/_health"));
    ASSERT_GE(u_term, 0);
    // us1 and us2 under us's directory, at its term; eu1 under the global directory's.
    const Lease us1 = lease_of(1), us2 = lease_of(2), eu1 = lease_of(0);
    EXPECT_TRUE(us1.authority.ends_with("/us")) << us1.authority;
    EXPECT_EQ(us1.term, u_term);
    EXPECT_EQ(us2.authority, us1.authority);
    EXPECT_TRUE(eu1.authority.ends_with("/global")) << eu1.authority;
    EXPECT_NE(eu1.authority.substr(0, 16), us1.authority.substr(0, 16));
    EXPECT_NE(us1.tenants.find(acme_), std::string::npos) << us1.tenants;
    EXPECT_NE(eu1.tenants.find(euro_), std::string::npos) << eu1.tenants;

    // S: us's standby router, following U's directory (scope us), promoted while U runs.
    TempDir sdir;
    RouterProcess s({"--token", kRoot, "--directory", sdir.path() + "/us-standby.fenec", "--region",
                     "us", "--global", url_of(link_back_->port()), "--replica-of",
                     url_of(u_->port()), "--replication-token", kReplication, "--auto-failover",
                     kLease, "--auth-delay", "0"},
                    sdir.path() + "/s.err");
    ASSERT_NE(s.port(), 0) << read_file(sdir.path() + "/s.err");
    auto on_s = [&](std::string_view method, std::string_view target, const std::string& token) {
        Client c(s.port());
        return c.request(method, target, {}, bearer(token)).value_or(Reply{});
    };
    ASSERT_TRUE(
        eventually([&] { return on_s("GET", "/_shard/tenants/" + acme_, kRoot).status == 200; }))
        << read_file(sdir.path() + "/s.err");
    // And the nodes' tokens, which it fetches from U apart from the directory: promoted without
    // them it could not call the nodes at all.
    ASSERT_TRUE(eventually([&] {
        auto found = file_contains(sdir.path() + "/us-standby.fenec.tokens",
                                   {node_admin_token(1), node_admin_token(2)});
        return found && (*found)[0] && (*found)[1];
    })) << read_file(sdir.path() + "/s.err");
    Reply promoted = on_s("POST", "/_replication/promote", kReplication);
    ASSERT_EQ(promoted.status, 200) << promoted.body;
    EXPECT_NE(promoted.body.find("\"term\":" + std::to_string(u_term + 1)), std::string::npos)
        << promoted.body;
    // The nodes take S's grants at the higher term, same authority; U's next grant is refused.
    for (int i : {1, 2}) {
        EXPECT_TRUE(eventually([&] { return lease_of(i).term == u_term + 1; }, 5000))
            << node(i, "GET", "/_admin/lease").body << read_file(sdir.path() + "/s.err");
        EXPECT_EQ(lease_of(i).authority, us1.authority);
    }
    EXPECT_TRUE(eventually([&] {
        const std::string err = read_file(dir_.file("us.err"));
        return err.find("fenced at `us1`") != std::string::npos &&
               err.find("fenced at `us2`") != std::string::npos;
    })) << read_file(dir_.file("us.err"));
    // Writes go on through the promoted router; the global router's own lease is untouched.
    Client cs(s.port());
    Reply w = cs.request("POST", "/t/" + acme_ + "/c/notes", R"({"title":"s"})", bearer(kData))
                  .value_or(Reply{});
    EXPECT_EQ(w.status, 201) << w.body;
    EXPECT_EQ(lease_of(0).authority, eu1.authority);
    EXPECT_EQ(lease_of(0).term, eu1.term);
}

}  // namespace
}  // namespace fenec::test::regions_partition_test
