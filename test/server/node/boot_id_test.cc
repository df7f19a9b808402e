// test/server/node/boot_id_test.cc: `GET /_admin/hello` at the descriptor limit. The node's
// RLIMIT_NOFILE is lowered (prlimit) so that the hello's own connection takes its last
// descriptor. The boot id (§8.8) was read from /proc per call then and answered ""; it is read
// once at start (the in-process fault_fs_node_test.cc checks hello answers the one main() read).
// The tenant count was then read from a listing that failed silently and answered `tenants: 0`;
// hello now answers 503 naming the descriptors, never a 200 with an empty id or a wrong count,
// and once descriptors are free again answers 200 with the boot id and the count.
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "test/server/node/node_fixture.h"

namespace fenec::test::boot_id_test {
namespace {

const std::string A = "admin-token-a";

TEST(AdminHello, AtTheDescriptorLimitHelloIsRefusedNeverWrong) {
    std::string want;
    std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), want);
    ASSERT_EQ(want.size(), 36u);
    TempDir dir;
    NodeProcess node(dir.path(), {"--admin-token", A, "--auth-delay", "0"});
    ASSERT_NE(node.port(), 0) << node.first_line();
    Client first(node.port());
    auto r = first.request("PUT", "/_admin/tenants/acme",
                           R"J({"schema":["create collection notes (title text)"]})J", bearer(A));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    r = first.request("GET", "/_admin/hello", {}, bearer(A));
    ASSERT_TRUE(r);
    ASSERT_NE(r->body.find("\"boot_id\":\"" + want + "\""), std::string::npos) << r->body;
    ASSERT_NE(r->body.find("\"tenants\":1,"), std::string::npos) << r->body;

    // The lowest descriptor free in the node: the next connection takes it, nothing after it.
    std::set<int> used;
    for (const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(node.pid()) + "/fd")) {
        used.insert(std::stoi(e.path().filename().string()));
    }
    int lowest = 0;
    while (used.count(lowest)) ++lowest;
    rlimit old{};
    ASSERT_EQ(::prlimit(node.pid(), RLIMIT_NOFILE, nullptr, &old), 0);
    const rlimit tight{static_cast<rlim_t>(lowest + 1), old.rlim_max};
    ASSERT_EQ(::prlimit(node.pid(), RLIMIT_NOFILE, &tight, nullptr), 0);

    {
        Client last(node.port());
        r = last.request("GET", "/_admin/hello", {}, bearer(A));
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 503) << r->body;
        EXPECT_NE(r->body.find("the data directory cannot be listed"), std::string::npos)
            << r->body;
        EXPECT_NE(r->body.find("\"reason\":\"descriptors\""), std::string::npos) << r->body;
        EXPECT_EQ(r->body.find("\"tenants\""), std::string::npos) << r->body;
        EXPECT_EQ(r->body.find("\"boot_id\":\"\""), std::string::npos) << r->body;
    }

    ASSERT_EQ(::prlimit(node.pid(), RLIMIT_NOFILE, &old, nullptr), 0);
    Client again(node.port());
    r = again.request("GET", "/_admin/hello", {}, bearer(A));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->body.find("\"boot_id\":\"" + want + "\""), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("\"tenants\":1,"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace fenec::test::boot_id_test
