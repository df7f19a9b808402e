// test/shard/held_grant_test.cc: a grant held on its way gives no lease (router.md §9.6, §18
// cases 62 and 63 over real processes). R leases n1 through P, a fault proxy
// (test/support/fault_proxy.h), while a client writes to n1 straight, past P. P holds a grant R
// sends n1 and R is frozen with it, so that grant, naming the tenant, is the last n1 will get.
// n1's lease runs out and n1 refuses the client's writes. Then P lets the grant through — read
// late, after its sender gave up on it — and it acknowledges an answer too old to give a lease:
// n1 goes on refusing, and takes no write for the tenant after its first refusal. R, woken,
// judges no lease before a grant sent since has come back (it was stopped past a grant's
// period): n1, alive, takes that grant, and the tenant takes writes on n1 again, failed over
// nowhere. Every write goes through RecordedWrites, and the lease-safety checker is run over them
// at the end. Network traffic goes to 127.0.0.1 only.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "test/shard/cluster_fixture.h"
#include "test/shard/recorded_writes.h"
#include "test/support/fault_proxy.h"

namespace fenec::test::held_grant_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using HeldGrants = LeasedClusterTest<2>;

TEST_F(HeldGrants, AGrantHeldOnItsWayGivesNoLease) {
    RecordedWrites rec(first_nodes(*nodes_, 2), true);  // n1 polled straight, not through P
    FaultProxy p(nodes_->port(0));
    ASSERT_NE(p.port(), 0);
    start_router({"--auto-failover", "1"});
    const std::string t = tenant("held");
    // n1 recorded at P's port: everything R sends n1 goes through P.
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n1",
                    "{\"addr\":\"127.0.0.1:" + std::to_string(p.port()) + "\",\"token\":\"" +
                        node_admin_token(0) + "\"}")
                  .status,
              201);
    ASSERT_EQ(add(1, "n2").status, 201);
    ASSERT_EQ(shard("PUT", "/_shard/nodes/n1", R"({"standby":"n2"})").status, 200);
    ASSERT_EQ(create(t, "n1").status, 201);
    ASSERT_EQ(rec.write_at(router_->port(), t, "n1").status, 201);
    ASSERT_TRUE(eventually([&] {
        return copy_on(1, t).body.find("\"role\":\"replica\"") != std::string::npos &&
               count_on(1, t) == count_on(0, t);
    }));

    // A client writing to n1 straight, as long as n1 takes its writes: when it last sent one n1
    // took. The sending, not the 201's arrival: n1 may take a write just before its lease ends
    // and its 201 be read after another client's refusal, by a thread a loaded machine ran late
    // (seen: 10 ms after). A write sent after a refusal came back and taken was taken after it.
    std::atomic<bool> stop{false};
    std::atomic<int64_t> direct_writes{0};
    std::atomic<int64_t> direct_tries{0};
    std::atomic<Clock::rep> last_taken_sent{0};
    std::thread writer([&] {
        while (!stop) {
            const Clock::rep sent = Clock::now().time_since_epoch().count();
            Reply r = rec.write_at(nodes_->port(0), t, "n1");
            ++direct_tries;
            if (r.status == 201) {
                ++direct_writes;
                last_taken_sent = sent;
            }
            std::this_thread::sleep_for(5ms);
        }
    });
    struct Join {
        std::atomic<bool>& stop;
        std::thread& t;
        ~Join() {
            stop = true;
            if (t.joinable()) t.join();
        }
    } join{stop, writer};
    ASSERT_TRUE(eventually([&] { return direct_writes > 0; }));

    // One grant of R's held on its way, and R frozen with it: the last grant n1 will read.
    p.hold();
    ASSERT_TRUE(eventually([&] { return p.held_bytes() > 0; }, 5000));
    router_->signal(SIGSTOP);
    ASSERT_TRUE(eventually(
        [&] {
            Reply r = rec.write_at(nodes_->port(0), t, "n1");
            return r.status == 503 && r.header("Fenec-Lease").has_value();
        },
        5000));
    const Clock::rep refused = Clock::now().time_since_epoch().count();
    EXPECT_LT(last_taken_sent.load(), refused);
    // A whole lease more: the held grant acknowledges an answer n1 gave before it was held, so
    // whatever lease that answer could still give (it may outlast the one n1 had, by up to a
    // third of a lease) has ended by now. Nothing reaches n1 meanwhile.
    std::this_thread::sleep_for(1200ms);

    // The held grant reaches n1 now, late: it names the tenant, and gives no lease.
    p.release();
    EXPECT_TRUE(eventually([&] { return p.held_bytes() == 0; }));
    // The client's next twenty writes, after the held grant was read, all refused.
    const int64_t tried = direct_tries;
    ASSERT_TRUE(eventually([&] { return direct_tries >= tried + 20; }));
    EXPECT_LT(last_taken_sent.load(), refused) << "n1 took a write on a grant read late";
    EXPECT_NE(node(0, "GET", "/_admin/lease").body.find("\"lease\":null"), std::string::npos)
        << node(0, "GET", "/_admin/lease").body;

    stop = true;
    writer.join();
    EXPECT_LT(last_taken_sent.load(), refused) << "n1 took a direct write after its lease ran out";

    // R, woken with n1's lapse point long past, grants before it judges: n1 answers, and is
    // leased again rather than failed over. Before, R failed the live n1 over onto n2 at once.
    router_->signal(SIGCONT);
    EXPECT_TRUE(eventually([&] { return rec.write_at(router_->port(), t, "n1").status == 201; },
                           8000));
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("node"), "n1");
    EXPECT_EQ(sample(metrics(), "fenec_router_failovers_total{trigger=\"lease\",outcome=\"done\"}"),
              "0");
    EXPECT_TRUE(
        logged(dir_.path() + "/router.err", "ms past its time (this router stopped or starved)"));
    EXPECT_EQ(rec.check({{t, nodes_->port(0)}}), "");
}

}  // namespace
}  // namespace fenec::test::held_grant_test
