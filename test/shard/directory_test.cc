// test/shard/directory_test.cc: the directory file (router.md §4) in process: created with its
// row and term, every change visible in the maps once written, and everything there again when
// the file is reopened (the oracle: a second Directory opened on the same file).
#include <gtest/gtest.h>

#include "shard/directory.h"
#include "test/server/node/node_fixture.h"

namespace fenec::shard {
namespace {

TEST(Directory, ChangesSurviveReopen) {
    test::TempDir dir;
    const std::string path = dir.path() + "/shard.fenec";
    std::string id;
    {
        auto d = Directory::open(path);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        auto m = (*d)->maps();
        EXPECT_EQ(m->scope, "global");
        EXPECT_EQ(m->id.size(), 16u);
        EXPECT_EQ(m->starts, 1);
        EXPECT_EQ(m->term, 0);
        id = m->id;
        ASSERT_TRUE((*d)->put_node({"n1", "127.0.0.1:1", "a1", "", "", "unknown"}).is_ok());
        ASSERT_TRUE((*d)->put_node({"n2", "127.0.0.1:2", "a2", "eu", "fra", "none"}).is_ok());
        ASSERT_TRUE((*d)->put_node({"n1", "127.0.0.1:3", "a1b", "", "", "unknown"}).is_ok());
        ASSERT_TRUE((*d)->put_tenant({"acme", "n1", "active", "", "00000000000000ab"}).is_ok());
        ASSERT_TRUE((*d)->put_tenant({"beta", "n2", "active", "", ""}).is_ok());
        ASSERT_TRUE((*d)->remove_tenant("beta").is_ok());
        ASSERT_TRUE((*d)->remove_node("n2").is_ok());
        EXPECT_EQ((*d)->maps()->nodes.size(), 1u);
    }
    auto d = Directory::open(path);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    auto m = (*d)->maps();
    EXPECT_EQ(m->id, id);
    EXPECT_EQ(m->starts, 2);  // a start is counted each time it opens (§2.3)
    ASSERT_EQ(m->nodes.size(), 1u);
    EXPECT_EQ(m->nodes.at("n1").addr, "127.0.0.1:3");
    EXPECT_EQ(m->nodes.at("n1").token, "a1b");
    ASSERT_EQ(m->tenants.size(), 1u);
    EXPECT_EQ(m->tenants.at("acme").node, "n1");
    EXPECT_EQ(m->tenants.at("acme").lineage, "00000000000000ab");
}

TEST(Directory, NamesAreChecked) {
    EXPECT_TRUE(valid_name("acme-1_x"));
    EXPECT_FALSE(valid_name(""));
    EXPECT_FALSE(valid_name("Acme"));
    EXPECT_FALSE(valid_name("a!"));
    EXPECT_FALSE(valid_name(std::string(65, 'a')));
}

}  // namespace
}  // namespace fenec::shard
