// test/server/node/delete_free_test.cc: a tenant installed from an image keeps the received
// body as its documents' store for its life (engine Collection::adopt), and a DELETE frees the
// closed tenant's memory only after its answer (server/node/lifecycle.cc): against the real
// binary, an installed tenant answers reads and writes as its source did, and a DELETE followed
// at once by a PUT of the same name (an image, or a fresh tenant) -- while the old one may still
// be freeing -- serves the new one, round after round and across a restart.
#include <gtest/gtest.h>

#include <filesystem>

#include "test/server/node/image_fixture.h"

namespace fenec::test::delete_free_test {
namespace {

const std::string& D = image_data_token;
const std::string& A = image_admin_token;
using Node = ImageNode;

const char* near_query = "get docs near v [2, 1, 1] limit 5";

TEST(DeleteFree, InstalledTenantServesFromItsBodyThroughWritesAndARewrite) {
    Node n;
    Reply img = acme_image(n);
    ASSERT_EQ(img.status, 200);
    const std::string before = n.query(near_query).body;
    Node n2;
    ASSERT_EQ(n2.put_image(img.body, image_digest_hex(img.body)).status, 201);
    // Every document read from the adopted body, then beside documents written after it.
    auto all = n2.query("get docs select title where title = \\\"d59\\\"");
    ASSERT_EQ(all.status, 200) << all.body;
    EXPECT_NE(all.body.find("d59"), std::string::npos) << all.body;
    EXPECT_EQ(n2.query(near_query).body, before);
    for (int i = 0; i < 20; ++i) {
        ASSERT_EQ(n2.query("put docs {title: \\\"w" + std::to_string(i) + "\\\", v: [1, 2, 3]}")
                      .status,
                  200);
    }
    auto c = n2.query("get docs select count(*)");
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_NE(c.body.find("80"), std::string::npos) << c.body;
    auto d = n2.query("get docs select title where title = \\\"d0\\\"");
    EXPECT_NE(d.body.find("d0"), std::string::npos) << d.body;
}

TEST(DeleteFree, DeleteThenAnImmediateInstallOrCreateOfTheSameNameServesTheNewOne) {
    Node n;
    Reply img = acme_image(n);
    ASSERT_EQ(img.status, 200);
    const std::string before = n.query(near_query).body;
    const std::string digest = image_digest_hex(img.body);
    auto del = n.admin("DELETE", "/_admin/tenants/acme");
    ASSERT_EQ(del.status, 204) << del.body;
    for (int round = 0; round < 4; ++round) {
        // An image installed, served, deleted; the next PUT comes at once.
        auto put = n.put_image(img.body, digest);
        ASSERT_EQ(put.status, 201) << "round " << round << ": " << put.body;
        ASSERT_EQ(n.query(near_query).body, before) << "round " << round;
        del = n.admin("DELETE", "/_admin/tenants/acme");
        ASSERT_EQ(del.status, 204) << "round " << round << ": " << del.body;
        // A fresh tenant of the same name, written, deleted.
        auto made = n.admin("PUT", "/_admin/tenants/acme",
                            R"J({"schema":["create collection docs (title text, v vector<3> @hnsw)"]})J");
        ASSERT_EQ(made.status, 201) << "round " << round << ": " << made.body;
        ASSERT_EQ(n.query("put docs {title: \\\"fresh\\\", v: [1, 1, 1]}").status, 200);
        auto c = n.query("get docs select count(*)");
        EXPECT_NE(c.body.find(":1}"), std::string::npos) << "round " << round << ": " << c.body;
        del = n.admin("DELETE", "/_admin/tenants/acme");
        ASSERT_EQ(del.status, 204) << "round " << round << ": " << del.body;
        EXPECT_FALSE(std::filesystem::exists(n.path("acme.fenec")));
    }
    ASSERT_EQ(n.put_image(img.body, digest).status, 201);
    n.start();
    auto after = n.query(near_query);
    ASSERT_EQ(after.status, 200) << after.body;
    EXPECT_EQ(after.body, before);
}

}  // namespace
}  // namespace fenec::test::delete_free_test
