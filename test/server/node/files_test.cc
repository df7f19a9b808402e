// test/server/node/files_test.cc: the files a node writes are its own alone (issue 17 item 8):
// with umask 0 in the node (nothing taken away by the umask), the data folder it makes is 0700 and
// the tenant file, its `.quota`, `.frozen` and (on a follower, whose image comes through the Fs)
// `.follows` sidecars and `fenec-node.state` are 0600: no group or other bit.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "test/server/node/node_fixture.h"

namespace fenec::test::files_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";
const std::string R = "replication-token-r";

// A node started with umask 0 on `<tmp>/data`, a folder it makes itself.
struct OpenUmaskNode {
    TempDir tmp;
    std::unique_ptr<NodeProcess> proc;

    explicit OpenUmaskNode(std::vector<std::string> more) {
        std::vector<std::string> flags = {
            "--token", D, "--admin-token", A, "--replication-token", R, "--auth-delay", "0"};
        flags.insert(flags.end(), more.begin(), more.end());
        proc = std::make_unique<NodeProcess>(dir(), flags, "", FENEC_NODE_BIN, [] { ::umask(0); });
    }
    std::string dir() const { return tmp.path() + "/data"; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(proc->port()); }
    Reply admin(std::string_view method, std::string_view target, std::string_view body = {}) {
        Client c(proc->port());
        return c.request(method, target, body, bearer(A)).value_or(Reply{});
    }
};

// The permission bits others have on `path`, or -1 when it cannot be read.
int others_bits(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return -1;
    return static_cast<int>(st.st_mode & 077);
}

TEST(Files, TenantAndSidecarsAreOwnerOnly) {
    OpenUmaskNode primary({"--lease", "--node-name", "n1"});
    ASSERT_NE(primary.proc->port(), 0) << primary.proc->first_line();
    OpenUmaskNode copy({});
    ASSERT_NE(copy.proc->port(), 0) << copy.proc->first_line();

    auto r = primary.admin("PUT", "/_admin/tenants/acme",
                           R"J({"schema":["create collection notes (title text)"]})J");
    ASSERT_EQ(r.status, 201) << r.body;
    ASSERT_EQ(primary.admin("PUT", "/_admin/tenants/acme/quota", R"({"rows":100})").status, 200);
    // A grant at a term the node has not seen is kept in fenec-node.state before it answers.
    r = primary.admin("POST", "/_admin/lease",
                      R"({"authority":"9e2d41c07a5b3f18/eu","term":3,"history":"c04b7e1a9d2f6385",)"
                      R"("grant":1,"acked":0,"lease_ms":5000,"list":1,"tenants":["acme"]})");
    ASSERT_EQ(r.status, 200) << r.body;
    r = copy.admin("POST", "/_admin/tenants/acme/follow",
                   "{\"from\":\"" + primary.url() + "\",\"wait_ms\":3000}");
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_TRUE(wait_until([&] { return others_bits(copy.dir() + "/acme.fenec") >= 0; }));
    ASSERT_EQ(primary.admin("POST", "/_admin/tenants/acme/freeze").status, 200);

    for (const char* f : {"", "/acme.fenec", "/acme.quota", "/acme.frozen", "/fenec-node.state",
                          "/fenec-node.lock"}) {
        EXPECT_EQ(others_bits(primary.dir() + f), 0) << "primary" << f;
    }
    for (const char* f : {"", "/acme.fenec", "/acme.follows"}) {
        EXPECT_EQ(others_bits(copy.dir() + f), 0) << "copy" << f;
    }
}

}  // namespace
}  // namespace fenec::test::files_test
