// test/shard/drain_test.cc: a router's stop (SIGTERM, router.md §2.3) while its own work waits on
// a node that answers nothing is bounded by the drain's 10 s, not by --upstream-timeout per call.
// The node "cut off" is SIGSTOPped: its kernel takes the bytes, nothing answers.
#include <gtest/gtest.h>

#include <csignal>
#include <future>

#include "test/shard/cluster_fixture.h"

namespace fenec::test::drain_test {
namespace {

class Drain : public ClusterTest<2> {};

// A move whose source is stopped as it freezes. Before, the router's stop waited for the freeze
// and then for the undo's thaw, each for --upstream-timeout (two minutes at its default). Now,
// 10 s in, the calls still out are cut and the undo's thaw given a second: the move is undone, its
// thaw owed (in the directory), its 502 answered, and the router exits 0. Started again, it pays
// that thaw once the node answers (a repair's survey here), and the tenant takes writes.
TEST_F(Drain, AMoveWaitingOnASilentSourceDoesNotHoldTheStop) {
    ASSERT_NO_FATAL_FAILURE(start_router());
    ASSERT_EQ(add(0, "n1").status, 201);
    ASSERT_EQ(add(1, "n2").status, 201);
    const std::string t = tenant("drain");
    ASSERT_EQ(create(t, "n1").status, 201);
    nodes_->procs[0]->signal(SIGSTOP);  // TearDown continues it
    const uint16_t port = router_->port();
    auto move = std::async(std::launch::async, [port, t] {
        Client c(port, 60'000);
        return c.request("POST", "/_shard/tenants/" + t + "/move", R"({"to":"n2"})", bearer(kRoot))
            .value_or(Reply{});
    });
    ASSERT_TRUE(eventually([&] {
        return Json(shard("GET", "/_shard/tenants/" + t).body).text("state") == "moving";
    })) << shard("GET", "/_shard/tenants/" + t).body;
    client_.reset();
    const int status = stop_within(router_->pid(), std::chrono::seconds(30),
                                   [&] { return router_->kill(SIGTERM); });
    EXPECT_EQ(status, 0) << "128 + 9: no exit within 30 s of SIGTERM\n"
                         << read_file(dir_.path() + "/router.err");
    // The move's own answer went out: undone, and why.
    const Reply m = move.get();
    EXPECT_EQ(m.status, 502) << m.body;
    EXPECT_NE(m.body.find("this router is stopping"), std::string::npos) << m.body;
    const std::string err = read_file(dir_.path() + "/router.err");
    EXPECT_NE(err.find("stopping: the calls to nodes and routers still out after 10 s are cut"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("the move of `" + t + "` is undone, but `n1` did not answer its thaw"),
              std::string::npos)
        << err;

    ASSERT_NO_FATAL_FAILURE(start_router());
    EXPECT_EQ(Json(shard("GET", "/_shard/tenants/" + t).body).text("state"), "active");
    nodes_->procs[0]->signal(SIGCONT);
    EXPECT_TRUE(eventually(
        [&] {
            (void)shard("POST", "/_shard/replicas", "{}");
            return data("POST", "/t/" + t + "/c/notes", R"({"title":"after"})").status == 201;
        },
        10000))
        << copy_on(0, t).body << read_file(dir_.path() + "/router.err");
}

}  // namespace
}  // namespace fenec::test::drain_test
