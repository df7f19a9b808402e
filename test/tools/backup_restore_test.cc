// test/tools/backup_restore_test.cc: proves `fenec backup` and `fenec restore` against real
// fenec-node and fenec-shard processes on loopback ports: a tenant backed up, deleted and
// restored answers the same rows, straight from its node and through a router (its whole
// directory with --all and --tenants, each image from and to the node the router names); a
// second backup into the same folder keeps the images still whole and takes again one that is
// not; a tenant the node holds is replaced only with --replace, in place; a damaged image is
// refused before the node is touched; a node's refusal (a wrong token) exits 1.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "test/shard/shard_fixture.h"
#include "test/support/wait.h"
#include "test/tools/run_tool.h"

namespace fenec::test {
namespace {

const std::string schema = R"j({"schema": ["create collection books (title text, year int)"]})j";
const std::string rows_query = R"({"query": "get books order _id"})";

std::string addr(uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

// The books of `tenant` as `port` answers them (a node, or a router passing it on).
std::string rows(uint16_t port, const std::string& tenant) {
    Client c(port);
    auto r = c.request("POST", "/t/" + tenant + "/query", rows_query, bearer("data"));
    if (!r) return "(no answer)";
    return std::to_string(r->status) + " " + r->body;
}

void insert(uint16_t port, const std::string& tenant, const std::string& title, int year) {
    Client c(port);
    auto r = c.request("POST", "/t/" + tenant + "/query",
                       R"({"query": "insert books {title: \")" + title + R"(\", year: )" +
                           std::to_string(year) + "}\"}",
                       bearer("data"));
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->status, 200) << r->body;
}

void flip_byte(const std::string& path, std::streamoff at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    char b = 0;
    f.read(&b, 1);
    b ^= 0x5a;
    f.seekp(at);
    f.write(&b, 1);
}

ino_t inode_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// A node holding `acme` with three books; its admin token `adm`, its data token `data`.
class NodeBackup : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_NE(node.port(), 0);
        Client c(node.port());
        auto made = c.request("PUT", "/_admin/tenants/acme", schema, bearer("adm"));
        ASSERT_TRUE(made && made->status == 201) << (made ? made->body : "no answer");
        insert(node.port(), "acme", "Dune", 1965);
        insert(node.port(), "acme", "Emma", 1815);
        insert(node.port(), "acme", "Kim", 1901);
        before = rows(node.port(), "acme");
        ASSERT_TRUE(before.starts_with("200 ")) << before;
    }
    std::string url() const { return addr(node.port()) + "/t/acme"; }
    ToolRun backup(const std::string& extra = {}) {
        return fenec("backup " + url() + " -o '" + out.path() + "'" + extra,
                     "FENEC_ADMIN_TOKEN=adm");
    }
    ToolRun restore(const std::string& from, const std::string& extra = {}) {
        return fenec("restore '" + from + "' " + url() + extra, "FENEC_ADMIN_TOKEN=adm");
    }

    TempDir data, out;
    NodeProcess node{data.path(), {"--admin-token", "adm", "--token", "data"}};
    std::string before;
};

TEST_F(NodeBackup, BackupDeleteRestoreAnswersTheSameRows) {
    const ToolRun b = backup();
    ASSERT_EQ(b.status, 0) << b.err;
    EXPECT_NE(b.out.find("saved acme: "), std::string::npos) << b.out;
    EXPECT_TRUE(std::filesystem::exists(out.path() + "/acme.fenec"));
    EXPECT_TRUE(std::filesystem::exists(out.path() + "/fenec-backup.json"));
    EXPECT_FALSE(std::filesystem::exists(out.path() + "/acme.fenec.part"));

    Client c(node.port());
    auto gone = c.request("DELETE", "/_admin/tenants/acme", {}, bearer("adm"));
    ASSERT_TRUE(gone && gone->status == 204);
    EXPECT_TRUE(rows(node.port(), "acme").starts_with("404")) << rows(node.port(), "acme");

    const ToolRun r = restore(out.path());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("restored acme on "), std::string::npos) << r.out;
    EXPECT_EQ(rows(node.port(), "acme"), before);

    // The image alone, as a FILE, restores as well (into another tenant's name).
    const ToolRun as_file =
        fenec("restore '" + out.path() + "/acme.fenec' " + addr(node.port()) + "/t/copy",
              "FENEC_ADMIN_TOKEN=adm");
    ASSERT_EQ(as_file.status, 0) << as_file.err;
    EXPECT_EQ(rows(node.port(), "copy"), before);
}

TEST_F(NodeBackup, ASecondRunKeepsWholeImagesAndTakesADamagedOneAgain) {
    ASSERT_EQ(backup().status, 0);
    const std::string image = out.path() + "/acme.fenec";
    const ino_t first = inode_of(image);
    const ToolRun again = backup();
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_NE(again.out.find("kept acme: "), std::string::npos) << again.out;
    EXPECT_EQ(again.out.find("saved acme"), std::string::npos) << again.out;
    EXPECT_EQ(inode_of(image), first);  // not written again

    flip_byte(image, 100);
    const ToolRun mended = backup();
    ASSERT_EQ(mended.status, 0) << mended.err;
    EXPECT_NE(mended.out.find("saved acme: "), std::string::npos) << mended.out;
    EXPECT_NE(inode_of(image), first);
    EXPECT_EQ(fenec("verify '" + image + "'").status, 0);
}

TEST_F(NodeBackup, ReplaceRestoresInPlaceAndOnlyWhenAsked) {
    ASSERT_EQ(backup().status, 0);
    insert(node.port(), "acme", "Ulysses", 1922);
    const std::string later = rows(node.port(), "acme");
    ASSERT_NE(later, before);

    const ToolRun refused = restore(out.path());
    EXPECT_EQ(refused.status, 1) << refused.out;
    EXPECT_NE(refused.err.find("--replace"), std::string::npos) << refused.err;
    EXPECT_EQ(rows(node.port(), "acme"), later);

    const ToolRun replaced = restore(out.path(), " --replace");
    ASSERT_EQ(replaced.status, 0) << replaced.err;
    EXPECT_EQ(rows(node.port(), "acme"), before);
}

TEST_F(NodeBackup, ADamagedImageIsRefusedBeforeTheNodeIsTouched) {
    ASSERT_EQ(backup().status, 0);
    insert(node.port(), "acme", "Ulysses", 1922);
    const std::string later = rows(node.port(), "acme");
    flip_byte(out.path() + "/acme.fenec", 100);
    const ToolRun r = restore(out.path(), " --replace");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.err.find("not a whole image"), std::string::npos) << r.err;
    EXPECT_EQ(rows(node.port(), "acme"), later);
}

TEST_F(NodeBackup, AWrongTokenIsRefused) {
    const ToolRun r = fenec("backup " + url() + " -o '" + out.path() + "' --admin-token nope");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.err.find("401"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out.path() + "/acme.fenec"));
}

// Two nodes behind a router: acme on n1, beta on n2, each node with its own admin token.
// A copy that follows a primary elsewhere is not restored in place, --replace or not: the node
// would install the image as a primary following nothing, cutting the replication the router set
// up. The restore names the primary, says to restore there, and changes nothing: the copy still
// follows and takes the primary's next write.
TEST(ReplicaRestore, ACopyFollowingAPrimaryIsRefusedBeforeAnythingChanges) {
    const std::vector<std::string> flags = {"--admin-token",       "adm", "--token", "data",
                                            "--replication-token", "repl"};
    TempDir primary_data, replica_data, out;
    NodeProcess primary{primary_data.path(), flags};
    NodeProcess replica{replica_data.path(), flags};
    ASSERT_NE(primary.port(), 0);
    ASSERT_NE(replica.port(), 0);
    Client c(primary.port());
    auto made = c.request("PUT", "/_admin/tenants/acme", schema, bearer("adm"));
    ASSERT_TRUE(made && made->status == 201) << (made ? made->body : "no answer");
    insert(primary.port(), "acme", "Dune", 1965);
    const ToolRun b = fenec("backup " + addr(primary.port()) + "/t/acme -o '" + out.path() + "'",
                            "FENEC_ADMIN_TOKEN=adm");
    ASSERT_EQ(b.status, 0) << b.err;
    insert(primary.port(), "acme", "Emma", 1815);
    Client r(replica.port());
    auto f =
        r.request("POST", "/_admin/tenants/acme/follow",
                  "{\"from\":\"" + addr(primary.port()) + "\",\"wait_ms\":3000}", bearer("adm"));
    ASSERT_TRUE(f && f->status == 200) << (f ? f->body : "no answer");
    const std::string both = rows(primary.port(), "acme");
    ASSERT_TRUE(wait_until([&] { return rows(replica.port(), "acme") == both; }))
        << rows(replica.port(), "acme");
    const std::string file = replica_data.path() + "/acme.fenec";
    const ino_t inode = inode_of(file);

    const ToolRun refused =
        fenec("restore '" + out.path() + "' " + addr(replica.port()) + "/t/acme --replace",
              "FENEC_ADMIN_TOKEN=adm");
    EXPECT_EQ(refused.status, 1) << refused.out << refused.err;
    EXPECT_NE(refused.err.find("as a replica following the primary at " + addr(primary.port())),
              std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("restore it on that primary"), std::string::npos) << refused.err;
    EXPECT_EQ(refused.out.find("restored acme"), std::string::npos) << refused.out;

    // Nothing changed: the same file, still a replica, and it follows on.
    EXPECT_EQ(inode_of(file), inode);
    auto d = r.request("GET", "/_admin/tenants/acme", {}, bearer("adm"));
    ASSERT_TRUE(d && d->status == 200);
    EXPECT_NE(d->body.find("\"role\":\"replica\""), std::string::npos) << d->body;
    insert(primary.port(), "acme", "Kim", 1901);
    const std::string three = rows(primary.port(), "acme");
    EXPECT_TRUE(wait_until([&] { return rows(replica.port(), "acme") == three; }))
        << rows(replica.port(), "acme");
}

TEST(RouterBackup, EveryTenantBackedUpDeletedAndRestoredThroughTheRouter) {
    TempDir d1, d2, dr, out;
    NodeProcess n1(d1.path(), {"--admin-token", "n1-admin", "--token", "data"});
    NodeProcess n2(d2.path(), {"--admin-token", "n2-admin", "--token", "data"});
    RouterProcess router({"--token", "rt", "--directory", dr.path() + "/shard.fenec"});
    ASSERT_NE(router.port(), 0);
    Client c(router.port());
    for (auto [name, n, token] : {std::tuple{"n1", &n1, "n1-admin"}, {"n2", &n2, "n2-admin"}}) {
        auto r = c.request(
            "PUT", std::string("/_shard/nodes/") + name,
            R"({"addr":"127.0.0.1:)" + std::to_string(n->port()) + R"(","token":")" + token + "\"}",
            bearer("rt"));
        ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    }
    for (auto [tenant, node] : {std::pair{"acme", "n1"}, {"beta", "n2"}}) {
        auto r =
            c.request("PUT", std::string("/_shard/tenants/") + tenant,
                      R"({"node": ")" + std::string(node) +
                          R"j(", "schema": ["create collection books (title text, year int)"]})j",
                      bearer("rt"));
        ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
        insert(router.port(), tenant, std::string(tenant) + " one", 1900);
        insert(router.port(), tenant, std::string(tenant) + " two", 2000);
    }
    const std::string acme = rows(router.port(), "acme"), beta = rows(router.port(), "beta");
    ASSERT_TRUE(acme.starts_with("200 ") && beta.starts_with("200 ")) << acme << beta;
    const std::string tokens =
        " --router-token rt --node-token n1=n1-admin --node-token n2=n2-admin";

    const ToolRun b =
        fenec("backup " + addr(router.port()) + " --all -o '" + out.path() + "'" + tokens);
    ASSERT_EQ(b.status, 0) << b.err;
    EXPECT_NE(b.out.find("saved acme: "), std::string::npos) << b.out;
    EXPECT_NE(b.out.find("from n1"), std::string::npos) << b.out;
    EXPECT_NE(b.out.find("saved beta: "), std::string::npos) << b.out;
    EXPECT_NE(b.out.find("from n2"), std::string::npos) << b.out;

    for (const char* tenant : {"acme", "beta"}) {
        auto gone = c.request("DELETE", std::string("/_shard/tenants/") + tenant, {}, bearer("rt"));
        ASSERT_TRUE(gone && gone->status == 204) << (gone ? gone->body : "no answer");
    }
    EXPECT_FALSE(rows(router.port(), "acme").starts_with("200")) << rows(router.port(), "acme");

    const ToolRun r =
        fenec("restore '" + out.path() + "' " + addr(router.port()) + " --tenants" + tokens);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("created acme through the router"), std::string::npos) << r.out;
    EXPECT_EQ(rows(router.port(), "acme"), acme);
    EXPECT_EQ(rows(router.port(), "beta"), beta);

    // One tenant through the router, in place: the router names its node.
    insert(router.port(), "acme", "later", 2020);
    const ToolRun one =
        fenec("restore '" + out.path() + "' " + addr(router.port()) + "/t/acme --replace" + tokens);
    ASSERT_EQ(one.status, 0) << one.err;
    EXPECT_EQ(rows(router.port(), "acme"), acme);
}

}  // namespace
}  // namespace fenec::test
