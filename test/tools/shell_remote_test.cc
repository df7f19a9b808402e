// test/tools/shell_remote_test.cc: proves `fenec shell http://HOST:PORT/t/<tenant>` answers as
// `fenec shell FILE` does. A real fenec-node (FENEC_NODE_BIN) is started on a loopback port it
// picks, with a data token; the same statements — schema, writes, reads, refusals of each kind —
// go to it through the shell and to a fresh tenant file through the shell, and each answer, its
// exit status, the table view, `.collections` and `.describe` must be byte for byte the same.
// Also: the token from the environment or --token, and a wrong token, a missing tenant or no
// node at all said at once with exit 1.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/server/node/node_fixture.h"
#include "test/tools/shell_process.h"

namespace fenec::test::shell_remote_test {
namespace {

using shell::Ran;
using shell::run_fenec;

class ShellRemote : public ::testing::Test {
  protected:
    void SetUp() override {
        node_ = std::make_unique<NodeProcess>(
            data_.path(),
            std::vector<std::string>{"--token", "data-secret", "--admin-token", "admin-secret"}, "",
            FENEC_NODE_BIN);
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        Client admin(node_->port());
        const std::optional<Reply> made =
            admin.request("PUT", "/_admin/tenants/acme", "{}", bearer("admin-secret"));
        ASSERT_TRUE(made);
        ASSERT_EQ(made->status, 201) << made->body;
        url_ = "http://127.0.0.1:" + std::to_string(node_->port()) + "/t/acme";
    }

    Ran remote(std::vector<std::string> args, const std::string& input = {}) {
        args.insert(args.begin(), {"shell", url_});
        return run_fenec(args, input, dir_.path(), {{"FENEC_TOKEN", "data-secret"}});
    }
    Ran file(std::vector<std::string> args, const std::string& input = {}) {
        args.insert(args.begin(), {"shell", "acme.fenec"});
        return run_fenec(args, input, dir_.path());
    }

    TempDir data_;
    shell::ShellDir dir_{"shell-remote"};
    std::unique_ptr<NodeProcess> node_;
    std::string url_;
};

TEST_F(ShellRemote, AnswersEqualTheFileShells) {
    struct Case {
        std::string statement;
        bool ok;
    };
    const std::vector<Case> cases = {
        {"create collection books (title text @text, year int @sorted, tags [text], "
         "price float, meta json)",
         true},
        {"insert books [{title: \"Dune\", year: 1965, tags: [\"sf\"], price: 9.5},\n"
         "  {title: \"Emma\", year: 1815, meta: {pages: 474, lang: \"en\"}},\n"
         "  {title: \"Ulysses\", year: 1922, price: 12}]",
         true},
        {"get books order year", true},
        {"get books select title, year where year > 1900 order year desc", true},
        {"get books select count(*), sum(price), avg(price), min(year)", true},
        {"get books match title \"dune\"", true},
        {"set books {price: 10.25} where title = \"Emma\" returning title, price", true},
        {"get books where yeer > 1", false},                 // no such field, with a position
        {"get books where", false},                          // a parse error
        {"insert books {_id: 1, title: \"again\"}", false},  // an id taken: 409
        {"insert books {title: 5}", false},                  // a value of the wrong type
        {"del books where year < 1900", true},
        {"get nosuch", false},
        {"alter collection books add field isbn text", true},
        {"get books select _id, isbn order _id limit 2 offset 1", true},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.statement);
        const Ran r = remote({"--json", "-c", c.statement});
        const Ran f = file({"--json", "-c", c.statement});
        EXPECT_EQ(r.out, f.out) << r.err;
        EXPECT_EQ(r.status, c.ok ? 0 : 1);
        EXPECT_EQ(f.status, c.ok ? 0 : 1);
        EXPECT_EQ(r.out.find("{\"error\":") == 0, !c.ok) << r.out;
        // The table view of what it answered (a read again; a refusal again, on stderr).
        if (!c.ok || c.statement.starts_with("get")) {
            const Ran rt = remote({"--table", "-c", c.statement});
            const Ran ft = file({"--table", "-c", c.statement});
            EXPECT_EQ(rt.out, ft.out);
            EXPECT_EQ(rt.err, ft.err);
            EXPECT_FALSE(rt.out.empty() && rt.err.empty());
        }
    }
    for (const char* command : {".collections", ".describe", "\\d books", "help"}) {
        SCOPED_TRACE(command);
        const Ran r = remote({"-c", command});
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.out, file({"-c", command}).out);
    }
    const std::string listed = remote({"-c", ".collections"}).out;
    EXPECT_NE(listed.find("books (2 rows): title text @text"), std::string::npos) << listed;
}

TEST_F(ShellRemote, AScriptRunsAndStopsAsOnAFile) {
    const std::string script =
        "create collection t (a int, b text)\n"
        "insert t [{a: 1, b: \"x (\"},\n"
        "  {a: 2}]\n"
        "get t\n"
        "get t where c = 1\n"
        "insert t {a: 3}\n";
    const Ran r = remote({}, script);
    const Ran f = file({}, script);
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.status, f.status);
    EXPECT_EQ(r.out, f.out);
    EXPECT_EQ(r.err, f.err);
    EXPECT_EQ(remote({"-c", "get t select count(*)"}).out, "{\"rows\":[{\"count(*)\":2}]}\n");
}

TEST_F(ShellRemote, TheTokenFromAFlagOrTheEnvironment) {
    // --token, no environment.
    Ran r = run_fenec({"shell", url_, "--token", "data-secret", "-c", "help"}, {}, dir_.path());
    EXPECT_EQ(r.status, 0) << r.err;
    // No token at all, or a wrong one: refused before any statement, exit 1.
    r = run_fenec({"shell", url_, "-c", "help"}, {}, dir_.path());
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("HTTP 401"), std::string::npos) << r.err;
    r = run_fenec({"shell", url_, "-c", "help"}, {}, dir_.path(), {{"FENEC_TOKEN", "wrong"}});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("HTTP 401"), std::string::npos) << r.err;
    // The flag wins over the environment.
    r = run_fenec({"shell", url_, "--token=data-secret", "-c", "help"}, {}, dir_.path(),
                  {{"FENEC_TOKEN", "wrong"}});
    EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(ShellRemote, AMissingTenantOrNodeIsSaidAtOnce) {
    const std::string port = std::to_string(node_->port());
    Ran r = run_fenec({"shell", "http://127.0.0.1:" + port + "/t/nosuch", "-c", "help"}, {},
                      dir_.path(), {{"FENEC_TOKEN", "data-secret"}});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("HTTP 404"), std::string::npos) << r.err;
    node_->kill(SIGKILL);
    r = remote({"-c", "help"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("fenec shell: http://127.0.0.1:" + port + "/t/acme: "), std::string::npos)
        << r.err;
    // Not a URL the shell takes: a usage error.
    EXPECT_EQ(run_fenec({"shell", "https://127.0.0.1:1/t/a"}, {}, dir_.path()).status, 2);
    EXPECT_EQ(run_fenec({"shell", "http://127.0.0.1:1/x/a"}, {}, dir_.path()).status, 2);
}

}  // namespace
}  // namespace fenec::test::shell_remote_test
