// test/shard/node_tokens_test.cc: no node's admin token in the directory file (issue 17 item 8;
// shard/node_tokens.h). Nodes registered with `token_env` and `token_file` are reached with the
// tokens read from the router's environment and disk, before and after a restart, while the file's
// bytes hold neither; a token given as `token` lands in the 0600 sidecar `<directory>.tokens`,
// never in the file; a directory written before these fields (tokens in its rows) is upgraded as a
// primary opens it: fields added, each token moved to the sidecar and cleared from its row.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>

#include "engine/database.h"
#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "shard/directory.h"
#include "test/shard/shard_fixture.h"
#include "test/support/file_search.h"

namespace fenec::test::node_tokens_test {
namespace {

const std::string ROOT = "root";
const std::string D = "data-token";

// Whether the file at `path` holds `needle` (false when it cannot be read: asserted separately).
bool holds(const std::string& path, const std::string& needle) {
    auto found = file_contains(path, {needle});
    return found && (*found)[0];
}

int others_bits(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return -1;
    return static_cast<int>(st.st_mode & 077);
}

struct TokenNode {
    TempDir dir;
    std::unique_ptr<NodeProcess> proc;
    explicit TokenNode(const std::string& admin) {
        proc = std::make_unique<NodeProcess>(
            dir.path(),
            std::vector<std::string>{"--token", D, "--admin-token", admin, "--auth-delay", "0"});
    }
    std::string addr() const { return "127.0.0.1:" + std::to_string(proc->port()); }
};

Reply call(RouterProcess& router, std::string_view method, std::string_view target,
           std::string_view body, const std::string& token) {
    Client c(router.port());
    return c.request(method, target, body, bearer(token)).value_or(Reply{});
}

TEST(Directory, HoldsNoToken) {
    const std::string by_env = "admin-token-read-from-env-5e1f";
    const std::string by_file = "admin-token-read-from-file-9c2a";
    TokenNode n1(by_env), n2(by_file);
    ASSERT_NE(n1.proc->port(), 0);
    ASSERT_NE(n2.proc->port(), 0);
    TempDir dir;
    const std::string path = dir.path() + "/shard.fenec";
    const std::string token_file = dir.path() + "/n2.token";
    { std::ofstream(token_file) << by_file << "\n"; }
    ASSERT_EQ(::chmod(token_file.c_str(), 0600), 0);
    ASSERT_EQ(::setenv("FENEC_TEST_N1_ADMIN", by_env.c_str(), 1), 0);  // the router inherits it
    const std::vector<std::string> flags = {"--token", ROOT,           "--directory",
                                            path,      "--auth-delay", "0"};

    auto router = std::make_unique<RouterProcess>(flags);
    ASSERT_NE(router->port(), 0);
    // The router asks each node's hello with the token it read before recording it (§6.3).
    auto r = call(*router, "PUT", "/_shard/nodes/n1",
                  "{\"addr\":\"" + n1.addr() + "\",\"token_env\":\"FENEC_TEST_N1_ADMIN\"}", ROOT);
    ASSERT_EQ(r.status, 201) << r.body;
    r = call(*router, "PUT", "/_shard/nodes/n2",
             "{\"addr\":\"" + n2.addr() + "\",\"token_file\":\"" + token_file + "\"}", ROOT);
    ASSERT_EQ(r.status, 201) << r.body;
    // Refused: an unset variable, a relative path, two ways at once.
    EXPECT_EQ(call(*router, "PUT", "/_shard/nodes/n3",
                   "{\"addr\":\"" + n1.addr() + "\",\"token_env\":\"FENEC_TEST_UNSET_7f\"}", ROOT)
                  .status,
              400);
    EXPECT_EQ(call(*router, "PUT", "/_shard/nodes/n3",
                   "{\"addr\":\"" + n1.addr() + "\",\"token_file\":\"n2.token\"}", ROOT)
                  .status,
              400);
    EXPECT_EQ(call(*router, "PUT", "/_shard/nodes/n3",
                   "{\"addr\":\"" + n1.addr() + "\",\"token\":\"x\",\"token_env\":\"HOME\"}", ROOT)
                  .status,
              400);
    // Creating a tenant is an admin call on its node, with the token read.
    EXPECT_EQ(call(*router, "PUT", "/_shard/tenants/acme", R"({"node":"n1"})", ROOT).status, 201);
    EXPECT_EQ(call(*router, "PUT", "/_shard/tenants/beta", R"({"node":"n2"})", ROOT).status, 201);

    // Restarted: the tokens are read again from the environment and the file.
    router.reset();
    router = std::make_unique<RouterProcess>(flags);
    ASSERT_NE(router->port(), 0);
    EXPECT_EQ(call(*router, "PUT", "/_shard/tenants/gamma", R"({"node":"n1"})", ROOT).status, 201);
    EXPECT_EQ(call(*router, "PUT", "/_shard/tenants/delta", R"({"node":"n2"})", ROOT).status, 201);
    router.reset();

    ASSERT_TRUE(file_contains(path, {"n1"}).has_value());
    EXPECT_FALSE(holds(path, by_env));
    EXPECT_FALSE(holds(path, by_file));
    EXPECT_TRUE(holds(path, "FENEC_TEST_N1_ADMIN"));  // the row names where it is read
    EXPECT_FALSE(std::filesystem::exists(path + ".tokens"));
}

TEST(Directory, ClearTokenGoesToTheSidecar) {
    TempDir dir;
    const std::string path = dir.path() + "/shard.fenec";
    const std::string sidecar = path + ".tokens";
    const std::string secret = "secret-given-in-the-clear-41d7";
    {
        auto d = shard::Directory::open(path);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        ASSERT_TRUE(
            (*d)->put_node({"n1", "127.0.0.1:1", secret, "", "", "unknown", "", ""}).is_ok());
        EXPECT_EQ((*d)->maps()->nodes.at("n1").token, secret);
    }
    EXPECT_FALSE(holds(path, secret));
    EXPECT_TRUE(holds(sidecar, secret));
    EXPECT_EQ(others_bits(sidecar), 0);
    {
        auto d = shard::Directory::open(path);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        EXPECT_EQ((*d)->maps()->nodes.at("n1").token, secret);
        // Named by a variable from then on: the secret kept for it goes.
        ASSERT_EQ(::setenv("FENEC_TEST_SIDECAR_N1", "from-env", 1), 0);
        shard::NodeRow row = (*d)->maps()->nodes.at("n1");
        row.token = "from-env";
        row.token_env = "FENEC_TEST_SIDECAR_N1";
        ASSERT_TRUE((*d)->put_node(row).is_ok());
    }
    EXPECT_FALSE(std::filesystem::exists(sidecar));
    auto d = shard::Directory::open(path);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    EXPECT_EQ((*d)->maps()->nodes.at("n1").token, "from-env");
    EXPECT_EQ((*d)->maps()->nodes.at("n1").token_env, "FENEC_TEST_SIDECAR_N1");
}

// Runs `statements` as one block on the directory file at `path` (created when `create`), as a
// router of before item 8 wrote it.
void write_as_before(
    const std::string& path, bool create,
    const std::vector<std::pair<std::string, std::vector<engine::Value>>>& statements) {
    index::IndexSet indexes;
    engine::OpenOptions o;
    o.tenant = "directory";
    o.sync = engine::SyncPolicy::every_block();
    o.hook = &indexes;
    auto db = create ? engine::Database::create(path, o) : engine::Database::open(path, o);
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    std::vector<ql::ParsedStatement> parsed;
    for (const auto& s : statements) {
        auto p = ql::parse(s.first);
        ASSERT_TRUE(p) << s.first;
        parsed.push_back(std::move(p.value()));
    }
    std::vector<ql::Item> items;
    for (size_t i = 0; i < statements.size(); ++i)
        items.push_back({&parsed[i], statements[i].second});
    ql::Executor ex(**db, indexes);
    ql::BlockOutcome out = ex.run_block(items, {});
    ASSERT_FALSE(out.error) << out.error->message;
    ASSERT_TRUE((*db)->sync().is_ok());
    ASSERT_TRUE((*db)->close().is_ok());
}

TEST(Directory, TokensInRowsMoveToTheSidecar) {
    TempDir dir;
    const std::string path = dir.path() + "/shard.fenec";
    const std::string secret = "secret-kept-in-a-row-3b80";
    write_as_before(
        path, true,
        {{"create collection directory (name text @unique, id text, scope text, format int, "
          "starts int)",
          {}},
         {"create collection terms (term int @unique, history text, at timestamp, `by` text)", {}},
         {"create collection nodes (name text @unique, addr text, token text, region text, "
          "zone text, lease text)",
          {}},
         {"create collection pairs (node text @unique, standby text)", {}},
         {"create collection tenants (name text @unique, node text @hash, state text, moving_to "
          "text, lineage text, forked text, failed_from text, quota json)",
          {}},
         {"create collection replicas (tenant text @unique, node text)", {}},
         {"create collection regions (name text @unique, routers [text])", {}},
         {"create collection leases (name text @unique, ms int, at timestamp, `by` text)", {}},
         {"insert directory {name: \"self\", id: \"00000000000000aa\", scope: \"global\", "
          "format: 1, starts: 0}",
          {}},
         {"insert terms {term: 0, history: \"00000000000000bb\", at: $1, `by`: \"\"}",
          {engine::Timestamp{0}}},
         {"insert nodes {name: \"n1\", addr: \"127.0.0.1:1\", token: $1, region: \"\", zone: "
          "\"\", lease: \"unknown\"}",
          {engine::Value(secret)}}});
    {
        auto d = shard::Directory::open(path);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        EXPECT_EQ((*d)->maps()->nodes.at("n1").token, secret);
        // The fields were added: a row naming a file is kept.
        shard::NodeRow row = (*d)->maps()->nodes.at("n1");
        row.name = "n2";
        row.token_file = dir.path() + "/n2.token";
        ASSERT_TRUE((*d)->put_node(row).is_ok());
    }
    EXPECT_TRUE(holds(path + ".tokens", secret));
    EXPECT_EQ(others_bits(path + ".tokens"), 0);
    // The row no longer holds it: without the sidecar, n1 has no token.
    ASSERT_TRUE(std::filesystem::remove(path + ".tokens"));
    auto d = shard::Directory::open(path);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    EXPECT_EQ((*d)->maps()->nodes.at("n1").token, "");
    EXPECT_EQ((*d)->maps()->nodes.at("n2").token_file, dir.path() + "/n2.token");
}

// A directory written before `tenants.moving_from` (an import's source, shard/two_level.h) and
// `tenants.moving_term` (the term a move's mark was made under, shard/move.h) has the fields added
// as it opens as a primary: a row that names them keeps them across a reopen, and rows already
// there read them as "" and -1 (none). So has the `thaws` collection (an undone move's owed thaw),
// and `tenants.moving_freeze` (the freeze id a move's mark names, kept only while `moving`).
TEST(Directory, AFileWrittenBeforeMovingFromAndMovingTermTakesThem) {
    TempDir dir;
    const std::string path = dir.path() + "/shard.fenec";
    write_as_before(
        path, true,
        {{"create collection directory (name text @unique, id text, scope text, format int, "
          "starts int)",
          {}},
         {"create collection terms (term int @unique, history text, at timestamp, `by` text)", {}},
         {"create collection nodes (name text @unique, addr text, token text, region text, "
          "zone text, lease text, token_env text, token_file text)",
          {}},
         {"create collection pairs (node text @unique, standby text)", {}},
         {"create collection tenants (name text @unique, node text @hash, state text, moving_to "
          "text, lineage text, forked text, failed_from text, quota json)",
          {}},
         {"create collection replicas (tenant text @unique, node text)", {}},
         {"create collection regions (name text @unique, routers [text])", {}},
         {"create collection leases (name text @unique, ms int, at timestamp, `by` text)", {}},
         {"insert directory {name: \"self\", id: \"00000000000000aa\", scope: \"global\", "
          "format: 1, starts: 0}",
          {}},
         {"insert terms {term: 0, history: \"00000000000000bb\", at: $1, `by`: \"\"}",
          {engine::Timestamp{0}}},
         {"insert tenants {name: \"old\", node: \"@us\", state: \"active\"}", {}}});
    {
        auto d = shard::Directory::open(path);
        ASSERT_TRUE(d.is_ok()) << d.status().to_string();
        EXPECT_EQ((*d)->maps()->tenants.at("old").moving_from, "");
        EXPECT_EQ((*d)->maps()->tenants.at("old").moving_term, -1);
        EXPECT_EQ((*d)->maps()->tenants.at("old").moving_freeze, "");
        shard::NodeRow n1;
        n1.name = "n1";
        n1.addr = "127.0.0.1:1";
        ASSERT_TRUE((*d)->put_node(n1).is_ok());
        shard::TenantRow moving;
        moving.name = "beta";
        moving.node = "n1";
        moving.state = "moving";
        moving.moving_to = "n2";
        moving.moving_term = 3;
        moving.moving_freeze = "f0";
        ASSERT_TRUE((*d)->put_tenant(moving).is_ok());
        shard::TenantRow row;
        row.name = "acme";
        row.node = "@ap";
        row.state = "importing";
        row.moving_from = "@us";
        row.moving_freeze = "stale";  // not `moving`: not kept
        ASSERT_TRUE((*d)->put_tenant(row).is_ok());
        shard::TenantRow back;
        back.name = "gamma";
        back.node = "n1";
        ASSERT_TRUE((*d)->put_tenant(back, shard::OwedThaw{"n1", "gamma", "f1"}).is_ok());
    }
    auto d = shard::Directory::open(path);
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    EXPECT_EQ((*d)->maps()->tenants.at("acme").moving_from, "@us");
    EXPECT_EQ((*d)->maps()->tenants.at("acme").moving_term, -1);
    EXPECT_EQ((*d)->maps()->tenants.at("beta").moving_term, 3);
    EXPECT_EQ((*d)->maps()->tenants.at("beta").moving_freeze, "f0");
    EXPECT_EQ((*d)->maps()->tenants.at("acme").moving_freeze, "");
    EXPECT_EQ((*d)->maps()->tenants.at("old").node, "@us");
    EXPECT_EQ((*d)->maps()->thaws.at("n1").at("gamma"), std::set<std::string>{"f1"});
}

}  // namespace
}  // namespace fenec::test::node_tokens_test
