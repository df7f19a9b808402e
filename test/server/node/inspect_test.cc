// test/server/node/inspect_test.cc: `fenec inspect` on a file a running node has open reads it
// (no `busy: flock`: a read-only open takes no lock) and prints what the node answers for it; the
// file's creation time is shown as ISO-8601 UTC beside its milliseconds, by inspect and by the
// node's describe (`GET /_admin/tenants/<t>`: `created_ms` and `created_at`), the same instant.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "json/timestamp.h"
#include "test/server/node/node_fixture.h"
#include "test/support/json_value.h"

namespace fenec::test::inspect_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

// Runs `command`; its exit status and its stdout and stderr together.
std::pair<int, std::string> run(const std::string& command) {
    std::string output;
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) return {-1, "popen failed"};
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
    const int status = ::pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// The line of `text` that starts with `prefix`, without its line feed; empty when none does.
std::string line_of(const std::string& text, const std::string& prefix) {
    size_t at = text.starts_with(prefix) ? 0 : text.find("\n" + prefix);
    if (at == std::string::npos) return {};
    if (at != 0) ++at;
    return text.substr(at, text.find('\n', at) - at);
}

int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

TEST(Inspect, ReadsAFileTheNodeHasOpen) {
    TempDir dir;
    NodeProcess node(dir.path(), {"--token", D, "--admin-token", A, "--auth-delay", "0"});
    ASSERT_NE(node.port(), 0) << node.first_line();
    Client c(node.port());
    const int64_t before_ms = wall_ms();
    auto made = c.request("PUT", "/_admin/tenants/acme",
                          R"J({"schema":["create collection notes (title text, year int)"]})J",
                          bearer(A));
    const int64_t after_ms = wall_ms();
    ASSERT_TRUE(made && made->status == 201) << (made ? made->body : "no answer");
    for (const char* title : {"a", "b", "c"}) {
        auto put = c.request("POST", "/t/acme/query",
                             std::string(R"({"query":"insert notes {title: \")") + title +
                                 R"(\", year: 2024}"})",
                             bearer(D));
        ASSERT_TRUE(put && put->status == 200) << (put ? put->body : "no answer");
    }

    // The node's describe: the tenant open, its creation time twice, the same instant.
    auto described = c.request("GET", "/_admin/tenants/acme", {}, bearer(A));
    ASSERT_TRUE(described && described->status == 200);
    std::string error;
    auto doc = parse_json(described->body, &error);
    ASSERT_TRUE(doc) << error << ": " << described->body;
    const engine::Value* open = json_member(*doc, "open");
    ASSERT_TRUE(open && *open == engine::Value(true)) << described->body;
    const engine::Value* created_ms = json_member(*doc, "created_ms");
    const engine::Value* created_at = json_member(*doc, "created_at");
    ASSERT_TRUE(created_ms && created_at) << described->body;
    const int64_t ms = std::get<int64_t>(created_ms->rep);
    EXPECT_GE(ms, before_ms);
    EXPECT_LE(ms, after_ms);
    const std::string iso = std::get<std::string>(created_at->rep);
    EXPECT_EQ(json::parse_timestamp(iso), std::optional<int64_t>(ms)) << iso;
    EXPECT_TRUE(iso.ends_with("Z")) << iso;

    // inspect on the file the node holds (and has locked) reads it.
    const auto [status, out] =
        run(std::string(FENEC_TOOL_BIN) + " inspect '" + dir.path() + "/acme.fenec'");
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(out.find("busy"), std::string::npos) << out;
    EXPECT_NE(out.find("created_ms  " + std::to_string(ms) + " (" + iso + ")\n"),
              std::string::npos)
        << out;
    EXPECT_NE(line_of(out, "collection  notes ").find("): 3 rows"), std::string::npos) << out;
    EXPECT_EQ(out.find("torn"), std::string::npos) << out;

    // The node keeps its file and its lock: it goes on writing, and inspect sees the write.
    auto after = c.request("POST", "/t/acme/query", R"({"query":"insert notes {title: \"d\"}"})",
                           bearer(D));
    ASSERT_TRUE(after && after->status == 200) << (after ? after->body : "no answer");
    const auto [again_status, again] =
        run(std::string(FENEC_TOOL_BIN) + " inspect '" + dir.path() + "/acme.fenec'");
    EXPECT_EQ(again_status, 0) << again;
    EXPECT_NE(line_of(again, "collection  notes ").find("): 4 rows"), std::string::npos) << again;
}

}  // namespace
}  // namespace fenec::test::inspect_test
