// test/server/node/quota_open_test.cc: a tenant never serves without the quota it was given
// (issue 17 item 9): a `<t>.quota` that cannot be read fails the tenant's open with 503 and
// Retry-After (transient: asked again at the next use), one that does not parse with 500, each
// naming the file; with the file back the tenant opens under its quota. Before, the file was
// said on stderr and ignored, so running out of descriptors lifted a tenant's quota.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test/server/node/node_fixture.h"

namespace fenec::test::quota_open_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

struct QuotaNode {
    TempDir dir;
    std::unique_ptr<NodeProcess> proc;
    void start() {
        proc.reset();
        proc = std::make_unique<NodeProcess>(
            dir.path(),
            std::vector<std::string>{"--token", D, "--admin-token", A, "--auth-delay", "0"});
        ASSERT_NE(proc->port(), 0) << proc->first_line();
    }
    Reply send(const std::string& token, std::string_view method, std::string_view target,
               std::string_view body = {}) {
        Client c(proc->port());
        return c.request(method, target, body, bearer(token)).value_or(Reply{});
    }
    Reply put(const std::string& title) {
        return send(D, "POST", "/t/acme/query",
                    "{\"query\":\"put notes {title: $1}\",\"params\":[\"" + title + "\"]}");
    }
    std::string path(const std::string& name) const { return dir.path() + "/" + name; }
};

TEST(QuotaOpen, ATenantNeverServesWithoutItsQuota) {
    QuotaNode n;
    n.start();
    auto r = n.send(A, "PUT", "/_admin/tenants/acme",
                    R"J({"schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(r.status, 201) << r.body;
    ASSERT_EQ(n.send(A, "PUT", "/_admin/tenants/acme/quota", R"({"rows":1})").status, 200);
    ASSERT_EQ(n.proc->kill(SIGTERM), 0);

    // Unreadable: a folder in the file's place (a read fails whoever runs the test, root too).
    std::filesystem::rename(n.path("acme.quota"), n.path("kept.quota"));
    std::filesystem::create_directory(n.path("acme.quota"));
    n.start();
    r = n.put("a");
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.header("Retry-After").value_or(""), "1");
    EXPECT_NE(r.body.find("acme.quota"), std::string::npos) << r.body;
    EXPECT_EQ(n.send(A, "GET", "/_admin/tenants/acme/quota").status, 503);

    // Not a quota: 500, naming it.
    std::filesystem::remove(n.path("acme.quota"));
    { std::ofstream(n.path("acme.quota")) << "{\"rows\":"; }
    r = n.put("a");
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_NE(r.body.find("acme.quota"), std::string::npos) << r.body;

    // The file back: the tenant opens under its quota.
    ASSERT_EQ(n.proc->kill(SIGTERM), 0);
    std::filesystem::rename(n.path("kept.quota"), n.path("acme.quota"));
    n.start();
    EXPECT_EQ(n.put("a").status, 200);
    EXPECT_EQ(n.put("b").status, 507);  // past its rows quota
}

}  // namespace
}  // namespace fenec::test::quota_open_test
