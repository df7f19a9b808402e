// test/shard/standby_tokens_test.cc: the nodes' tokens given in the clear reach a standby router
// without going through the directory file (shard/node_tokens.h): it fetches its primary's sidecar
// over `GET /_replication/tokens` (the replication token's route, 409 on a standby) into a 0600
// sidecar of its own, neither directory file holds a token, and once promoted it calls the nodes
// with them.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "test/shard/standby_fixture.h"
#include "test/support/file_search.h"

namespace fenec::test::standby_tokens_test {
namespace {

class StandbyTokens : public StandbyTest {};

TEST_F(StandbyTokens, AStandbyTakesItsPrimarysTokensIntoASidecarOfItsOwn) {
    const std::vector<std::string> tokens = {node_admin_token(0), node_admin_token(1)};
    start_standby();
    ASSERT_TRUE(eventually([&] { return caught_up(); }));
    const std::string sidecar = sdir_.path() + "/standby.fenec.tokens";
    ASSERT_TRUE(eventually([&] {
        auto found = file_contains(sidecar, tokens);
        return found && (*found)[0] && (*found)[1];
    })) << read_file(sdir_.path() + "/standby.err");
    struct stat st {};
    ASSERT_EQ(::stat(sidecar.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u);
    for (const std::string& file :
         {dir_.path() + "/shard.fenec", sdir_.path() + "/standby.fenec"}) {
        auto found = file_contains(file, tokens);
        ASSERT_TRUE(found) << file;
        EXPECT_FALSE((*found)[0] || (*found)[1]) << file;
    }
    EXPECT_EQ(on_r("GET", "/_replication/tokens").status, 401);  // the router's --token is not it
    EXPECT_EQ(on_s("GET", "/_replication/tokens", {}, kReplication).status, 409);

    // Promoted, it reaches the nodes with them: a create is an admin call on the node.
    ASSERT_EQ(on_s("POST", "/_replication/promote", {}, kReplication).status, 200);
    Reply c = on_s("PUT", "/_shard/tenants/" + tenant("acme"), R"({"node":"n1"})");
    EXPECT_EQ(c.status, 201) << c.body;
}

}  // namespace
}  // namespace fenec::test::standby_tokens_test
