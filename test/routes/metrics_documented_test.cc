// test/routes/metrics_documented_test.cc: proves that docs/operations.md names every metric
// family each binary exports. It starts the release binaries (fenec-node, and fenec-shard under
// --auto-failover, which adds the lease metrics), reads each one's /_metrics, takes the families
// from the `# TYPE` lines (a family is listed there even before it has a sample) and fails on a
// family the page's metric tables do not name, printing them; and on a family the page names in
// a binary's table that the binary does not export.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "test/shard/shard_fixture.h"

namespace fenec::test {
namespace {

std::set<std::string> exported(const std::string& body) {
    std::set<std::string> out;
    std::istringstream in(body);
    std::string line;
    while (std::getline(in, line)) {
        if (!line.starts_with("# TYPE ")) continue;
        const std::string rest = line.substr(7);
        out.insert(rest.substr(0, rest.find(' ')));
    }
    return out;
}

// The metrics named in the first cell of the table rows under `### <heading>` in operations.md's
// `## Metrics` section, up to the next `###` or `##` heading.
std::set<std::string> documented(const std::string& heading) {
    std::ifstream in(std::string(FENEC_DOCS_DIR) + "/operations.md");
    EXPECT_TRUE(in) << "cannot read operations.md";
    std::set<std::string> out;
    bool in_metrics = false, in_section = false;
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("## ")) in_metrics = line == "## Metrics";
        if (line.starts_with("### ")) in_section = in_metrics && line == "### " + heading;
        if (!in_section || !line.starts_with("| `fenec_")) continue;
        const size_t end = line.find('`', 3);
        out.insert(line.substr(3, end - 3));
    }
    return out;
}

void compare(const std::string& binary, const std::set<std::string>& got,
             const std::set<std::string>& doc) {
    std::string missing, extra;
    for (const std::string& m : got) {
        if (!doc.contains(m)) missing += "\n  " + m;
    }
    for (const std::string& m : doc) {
        if (!got.contains(m)) extra += "\n  " + m;
    }
    std::cout << binary << ": " << got.size() << " metric families exported, " << doc.size()
              << " documented\n";
    EXPECT_TRUE(missing.empty()) << "operations.md does not name what " << binary
                                 << " exports:" << missing;
    EXPECT_TRUE(extra.empty()) << "operations.md names what " << binary
                               << " does not export:" << extra;
}

TEST(OperationsMetrics, Node) {
    TempDir dir;
    NodeProcess node(dir.path(), {"--admin-token", "admin-secret"}, {}, FENEC_NODE_BIN);
    ASSERT_NE(node.port(), 0);
    Client c(node.port());
    auto r = c.request("GET", "/_metrics", {}, {{"Authorization", "Bearer admin-secret"}});
    ASSERT_TRUE(r && r->status == 200);
    compare("fenec-node", exported(r->body), documented("fenec-node"));
}

TEST(OperationsMetrics, Router) {
    TempDir dir;
    RouterProcess router({"--directory", dir.path() + "/shard.fenec", "--auto-failover", "5"});
    ASSERT_NE(router.port(), 0);
    Client c(router.port());
    auto r = c.request("GET", "/_metrics");
    ASSERT_TRUE(r && r->status == 200);
    compare("fenec-shard", exported(r->body), documented("fenec-shard"));
}

}  // namespace
}  // namespace fenec::test
