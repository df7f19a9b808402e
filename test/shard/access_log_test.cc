// test/shard/access_log_test.cc: `--access-log <path>` on a real fenec-shard in front of a real
// fenec-node: one JSON line per request the router answered, forwarded or its own, refused at the
// head or not; each with the method, the target (a filter's value elided), the status, bytes in
// and out, the duration, the X-Request-Id the client got and the tenant; no token in the file.
#include <gtest/gtest.h>

#include <map>

#include "test/shard/shard_fixture.h"
#include "test/support/json_value.h"

namespace fenec::test::router_access_log_test {
namespace {

const std::string ROOT = "root";
const std::string D = "data-token";
const std::string ADMIN = "admin-token-of-node-1";

std::string text_of(const engine::Value& line, std::string_view key) {
    const engine::Value* v = json_member(line, key);
    const auto* s = v ? std::get_if<std::string>(&v->rep) : nullptr;
    return s ? *s : std::string();
}

int64_t int_of(const engine::Value& line, std::string_view key) {
    const engine::Value* v = json_member(line, key);
    const auto* i = v ? std::get_if<int64_t>(&v->rep) : nullptr;
    return i ? *i : -1;
}

std::vector<engine::Value> lines_of(const std::string& text) {
    std::vector<engine::Value> out;
    size_t at = 0;
    while (at < text.size()) {
        const size_t end = text.find('\n', at);
        if (end == std::string::npos) break;
        std::string error;
        auto v = parse_json(std::string_view(text).substr(at, end - at), &error);
        EXPECT_TRUE(v) << error << " in " << text.substr(at, end - at);
        if (v) out.push_back(std::move(*v));
        at = end + 1;
    }
    return out;
}

TEST(RouterAccessLog, OneLinePerRequestAnswered) {
    TempDir node_dir;
    TempDir dir;
    NodeProcess node(node_dir.path(),
                     {"--token", D, "--admin-token", ADMIN, "--auth-delay", "0"});
    ASSERT_NE(node.port(), 0) << node.first_line();
    const std::string log = dir.path() + "/access.log";
    RouterProcess router({"--token", ROOT, "--directory", dir.path() + "/shard.fenec",
                          "--auth-delay", "0", "--access-log", log});
    ASSERT_NE(router.port(), 0);
    Client c(router.port());
    auto added = c.request("PUT", "/_shard/nodes/n1",
                           "{\"addr\":\"127.0.0.1:" + std::to_string(node.port()) +
                               "\",\"token\":\"" + ADMIN + "\"}",
                           bearer(ROOT));
    ASSERT_TRUE(added && added->status == 201) << (added ? added->body : "no answer");
    auto made = c.request(
        "PUT", "/_shard/tenants/acme",
        R"J({"node":"n1","schema":["create collection notes (title text, year int)"]})J",
        bearer(ROOT));
    ASSERT_TRUE(made && made->status == 201) << (made ? made->body : "no answer");
    const std::string insert = R"({"query":"insert notes {title: \"topsecret\", year: 2024}"})";
    auto q = c.request("POST", "/t/acme/query", insert, bearer(D));
    ASSERT_TRUE(q && q->status == 200) << (q ? q->body : "no answer");
    auto filtered = c.request("GET", "/t/acme/c/notes?title=eq.topsecret&limit=5", {}, bearer(D));
    ASSERT_TRUE(filtered && filtered->status == 200) << (filtered ? filtered->body : "no answer");
    EXPECT_NE(filtered->body.find("topsecret"), std::string::npos) << filtered->body;
    auto described = c.request("GET", "/_shard/tenants/acme", {}, bearer(ROOT));
    ASSERT_TRUE(described && described->status == 200);
    Client other(router.port());
    auto refused = other.request("GET", "/_shard/tenants");
    ASSERT_TRUE(refused && refused->status == 401);

    std::vector<engine::Value> lines;
    std::string text;
    ASSERT_TRUE(wait_until([&] {
        text = read_file(log);
        lines = lines_of(text);
        return lines.size() >= 6;
    })) << text;
    EXPECT_EQ(lines.size(), 6u) << text;
    EXPECT_EQ(text.find("topsecret"), std::string::npos) << "a filter's value is elided";
    for (const std::string& token : {ROOT, D, ADMIN}) {
        EXPECT_EQ(text.find(token), std::string::npos) << "no token: " << token;
    }
    std::map<std::string, engine::Value> by;  // "<method> <target> <status>"
    for (const engine::Value& l : lines) {
        EXPECT_EQ(text_of(l, "peer").rfind("127.0.0.1:", 0), 0u) << text;
        EXPECT_GE(int_of(l, "us"), 0) << text;
        EXPECT_FALSE(text_of(l, "request_id").empty()) << text;
        by.emplace(text_of(l, "method") + " " + text_of(l, "target") + " " +
                       std::to_string(int_of(l, "status")),
                   l);
    }
    auto line = [&](const std::string& key) -> const engine::Value& {
        static const engine::Value none;
        auto it = by.find(key);
        EXPECT_NE(it, by.end()) << key << " not in\n" << text;
        return it == by.end() ? none : it->second;
    };
    EXPECT_EQ(text_of(line("PUT /_shard/tenants/acme 201"), "tenant"), "acme");
    const engine::Value* no_tenant = json_member(line("PUT /_shard/nodes/n1 201"), "tenant");
    EXPECT_TRUE(no_tenant && no_tenant->is_null()) << text;
    const engine::Value& query = line("POST /t/acme/query 200");
    EXPECT_EQ(int_of(query, "bytes_in"), static_cast<int64_t>(insert.size()));
    EXPECT_GT(int_of(query, "bytes_out"), static_cast<int64_t>(q->body.size()));
    EXPECT_EQ(text_of(query, "request_id"), q->header("X-Request-Id").value_or("?"));
    EXPECT_EQ(text_of(query, "tenant"), "acme");
    const engine::Value& get = line("GET /t/acme/c/notes?title=\u2026&limit=5 200");
    EXPECT_EQ(text_of(get, "request_id"), filtered->header("X-Request-Id").value_or("?"));
    EXPECT_EQ(text_of(line("GET /_shard/tenants/acme 200"), "tenant"), "acme");
    const engine::Value& no_token = line("GET /_shard/tenants 401");
    EXPECT_EQ(text_of(no_token, "request_id"), refused->header("X-Request-Id").value_or("?"));
}

}  // namespace
}  // namespace fenec::test::router_access_log_test
