// test/shard/router_clock_test.cc: the router reads time through the clock main() hands it
// (shard/router.h): run in process on a fake clock, its audit lines carry the fake wall time as
// the test moves it, whatever the machine's clock says.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/clock.h"
#include "server/obs/audit.h"
#include "shard/router.h"
#include "test/server/node/node_fixture.h"

namespace fenec::test::router_clock_test {
namespace {

const std::string root = "root-token-for-the-clock";

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(RouterClock, AuditLinesCarryTheInjectedWallClock) {
    TempDir dir;
    shard::RouterOptions o;
    o.listen = "127.0.0.1:0";
    o.token = root;
    o.directory = dir.path() + "/shard.fenec";
    o.audit = dir.path() + "/audit.log";
    o.workers = 1;
    o.auth_delay_ms = 0;
    engine::FakeClock clock(1'750'000'000'000);
    shard::Router router(o, clock);
    ASSERT_EQ(router.prepare(), "");
    router.serve();
    auto refuse = [&](std::string_view target) {  // a 401 closes its connection: one each
        Client c(router.port());
        auto r = c.request("GET", target, {}, bearer("not-the-token"));
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 401);
    };
    refuse("/_shard/tenants");
    clock.advance_ms(60'000);
    refuse("/_shard/nodes");
    std::string audit;
    EXPECT_TRUE(wait_until([&] {  // the audit log's flush, within a second
        audit = slurp(*o.audit);
        return std::count(audit.begin(), audit.end(), '\n') >= 2;
    }));
    for (int64_t at_ms : {int64_t{1'750'000'000'000}, int64_t{1'750'000'060'000}}) {
        const std::string at = "\"at\":\"" + obs::iso_time_ms(at_ms) + "\"";
        EXPECT_NE(audit.find(at), std::string::npos) << at << " in " << audit;
    }
}

}  // namespace
}  // namespace fenec::test::router_clock_test
