// test/routes/route_table_test.cc: proves the path-pattern matcher (server/runtime/route_table.h)
// and the method sets' Allow text, and that each binary's table finds the row its dispatch
// expects for the paths that share a prefix (a literal before a wildcard).
#include "server/runtime/route_table.h"

#include <gtest/gtest.h>

#include "server/node/routes.h"
#include "shard/routes.h"

namespace fenec {
namespace {

using server::path_matches;

TEST(PathMatches, LiteralsAndWildcards) {
    EXPECT_TRUE(path_matches("/_health", "/_health"));
    EXPECT_FALSE(path_matches("/_health", "/_health/x"));
    EXPECT_FALSE(path_matches("/_health", "/_healthy"));
    EXPECT_TRUE(path_matches("/t/<tenant>/query", "/t/acme/query"));
    EXPECT_FALSE(path_matches("/t/<tenant>/query", "/t//query"));  // a wildcard is never empty
    EXPECT_FALSE(path_matches("/t/<tenant>/query", "/t/acme/query/"));
    EXPECT_FALSE(path_matches("/t/<tenant>/query", "/t/acme"));
}

TEST(PathMatches, TrailingSlashAndRest) {
    EXPECT_TRUE(path_matches("/t/<tenant>/", "/t/acme/"));
    EXPECT_TRUE(path_matches("/t/<tenant>/", "/t/acme"));
    EXPECT_FALSE(path_matches("/t/<tenant>/", "/t/acme/x"));
    EXPECT_TRUE(path_matches("/t/<tenant>/…", "/t/acme"));
    EXPECT_TRUE(path_matches("/t/<tenant>/…", "/t/acme/c/books/7"));
    EXPECT_FALSE(path_matches("/t/<tenant>/…", "/t"));
    EXPECT_FALSE(path_matches("/t/<tenant>/…", "/x/acme"));
}

TEST(MethodSet, AllowInMethodOrder) {
    using M = http::Method;
    EXPECT_EQ((server::MethodSet{M::del, M::get, M::put}.allow()), "GET, PUT, DELETE");
    EXPECT_EQ((server::MethodSet{M::post}.allow()), "POST");
    EXPECT_TRUE(server::MethodSet::any().has(M::patch));
    EXPECT_FALSE(server::MethodSet::any().has(M::other));
    EXPECT_FALSE((server::MethodSet{M::get}.has(M::head)));
}

TEST(NodeRoutes, LiteralBeforeWildcard) {
    ASSERT_NE(node::find_node_route("/t/acme/c/books/changes"), nullptr);
    EXPECT_EQ(node::find_node_route("/t/acme/c/books/changes")->id, node::RouteId::changes);
    EXPECT_EQ(node::find_node_route("/t/acme/c/books/7")->id, node::RouteId::document);
    EXPECT_EQ(node::find_node_route("/t/acme/c/books")->id, node::RouteId::collection);
    EXPECT_EQ(node::find_node_route("/t/acme")->id, node::RouteId::describe);
    EXPECT_EQ(node::find_node_route("/_admin/tenants/acme/file")->id, node::RouteId::file);
    EXPECT_EQ(node::find_node_route("/t/acme/c"), nullptr);
    EXPECT_EQ(node::find_node_route("/_admin/tenants/acme/x"), nullptr);
}

// A row's plane is the plane its prefix is judged on (routes.h): dispatch asks one credential for
// a path whether or not a row names it.
TEST(NodeRoutes, PlaneIsThePrefixs) {
    for (const node::NodeRoute& r : node::node_routes()) {
        EXPECT_EQ(r.plane, node::plane_of_prefix(r.pattern)) << r.pattern;
    }
}

TEST(ShardRoutes, Rows) {
    EXPECT_EQ(shard::find_shard_route("/_shard/query")->id, shard::ShardRouteId::query);
    EXPECT_EQ(shard::find_shard_route("/_shard/tenants/acme/move")->id, shard::ShardRouteId::move);
    EXPECT_EQ(shard::find_shard_route("/_replication")->id, shard::ShardRouteId::feed);
    EXPECT_EQ(shard::find_shard_route("/t/acme/query")->id, shard::ShardRouteId::tenant);
    EXPECT_EQ(shard::find_shard_route("/_shard/nope"), nullptr);
}

}  // namespace
}  // namespace fenec
