// test/server/node/access_log_test.cc: `--access-log <path>` on a real fenec-node: one JSON line
// per request answered, whether the node's handlers answered it, refused its credential, or the
// server refused its framing (413), and a subscription's line when it ends; each line with the
// request's method, target (a filter's value elided), status, bytes in and out, duration, the
// answer's X-Request-Id and the tenant; no token and no filter value in the file.
#include <gtest/gtest.h>

#include <map>

#include "test/server/node/node_fixture.h"
#include "test/support/json_value.h"

namespace fenec::test::access_log_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

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

// The log's lines, parsed (a line that is not JSON fails the test).
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

TEST(AccessLog, OneLinePerRequestAnswered) {
    TempDir data;
    TempDir logs;
    const std::string log = logs.path() + "/access.log";
    NodeProcess node(data.path(), {"--token", D, "--admin-token", A, "--auth-delay", "0",
                                   "--max-body", "1", "--access-log", log});
    ASSERT_NE(node.port(), 0) << node.first_line();
    Client c(node.port());
    auto made = c.request("PUT", "/_admin/tenants/acme",
                          R"J({"schema":["create collection notes (title text, year int)"]})J",
                          bearer(A));
    ASSERT_TRUE(made && made->status == 201) << (made ? made->body : "no answer");
    const std::string insert = R"({"query":"insert notes {title: \"topsecret\", year: 2024}"})";
    auto q = c.request("POST", "/t/acme/query", insert, bearer(D));
    ASSERT_TRUE(q && q->status == 200) << (q ? q->body : "no answer");
    auto filtered = c.request("GET", "/t/acme/c/notes?title=eq.topsecret&limit=5", {}, bearer(D));
    ASSERT_TRUE(filtered && filtered->status == 200);
    auto refused = c.request("GET", "/t/acme/c/notes");
    ASSERT_TRUE(refused && refused->status == 401);
    {
        // Past --max-body, announced: the server's own 413, from the head alone.
        Client big(node.port());
        ASSERT_TRUE(big.send_raw("POST /t/acme/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                 D + "\r\nContent-Length: 1048577\r\n\r\n"));
        auto r = big.read_reply();
        ASSERT_TRUE(r && r->status == 413);
    }
    {
        // A subscription, closed by its client once seeded: its line comes at its end.
        Client sub(node.port());
        ASSERT_TRUE(sub.send_raw("GET /t/acme/c/notes/changes HTTP/1.1\r\nHost: x\r\n"
                                 "Authorization: Bearer " + D + "\r\n\r\n"));
        const std::string seen = sub.read_until("event: seed", 5000);
        ASSERT_NE(seen.find("event: seed"), std::string::npos) << seen;
    }

    std::vector<engine::Value> lines;
    ASSERT_TRUE(wait_until([&] {
        lines = lines_of(read_file(log));
        return lines.size() >= 6;
    })) << read_file(log);
    const std::string text = read_file(log);
    EXPECT_EQ(lines.size(), 6u) << text;
    EXPECT_EQ(text.find("topsecret"), std::string::npos) << "a filter's value is elided";
    EXPECT_EQ(text.find(D), std::string::npos) << "no token";
    EXPECT_EQ(text.find(A), std::string::npos) << "no token";

    std::map<std::string, engine::Value> by;  // "<method> <target>" or "<status>"
    for (const engine::Value& l : lines) {
        EXPECT_EQ(text_of(l, "peer").rfind("127.0.0.1:", 0), 0u) << text;
        EXPECT_GE(int_of(l, "us"), 0) << text;
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
    const engine::Value& create = line("PUT /_admin/tenants/acme 201");
    EXPECT_EQ(text_of(create, "tenant"), "acme");
    const engine::Value& query = line("POST /t/acme/query 200");
    EXPECT_EQ(int_of(query, "bytes_in"), static_cast<int64_t>(insert.size()));
    EXPECT_GT(int_of(query, "bytes_out"), static_cast<int64_t>(q->body.size()));
    EXPECT_EQ(text_of(query, "request_id"), q->header("X-Request-Id").value_or("?"));
    EXPECT_EQ(text_of(query, "tenant"), "acme");
    EXPECT_EQ(json_member(query, "stream"), nullptr);
    const engine::Value& get = line("GET /t/acme/c/notes?title=\u2026&limit=5 200");
    EXPECT_EQ(int_of(get, "bytes_in"), 0);
    EXPECT_EQ(text_of(get, "request_id"), filtered->header("X-Request-Id").value_or("?"));
    const engine::Value& no_token = line("GET /t/acme/c/notes 401");
    EXPECT_EQ(text_of(no_token, "request_id"), refused->header("X-Request-Id").value_or("?"));
    const engine::Value& too_big = line("POST /t/acme/query 413");
    EXPECT_EQ(int_of(too_big, "bytes_in"), 0);
    EXPECT_EQ(text_of(too_big, "tenant"), "acme");
    const engine::Value& stream = line("GET /t/acme/c/notes/changes 200");
    const engine::Value* is_stream = json_member(stream, "stream");
    EXPECT_TRUE(is_stream && *is_stream == engine::Value(true)) << text;
    EXPECT_GT(int_of(stream, "bytes_out"), 0);
}

}  // namespace
}  // namespace fenec::test::access_log_test
