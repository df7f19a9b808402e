// test/server/node/delete_free_test.cc: a tenant installed from an image keeps the received
// body as its documents' store for its life (engine Collection::adopt), and a DELETE frees the
// closed tenant's memory only after its answer (server/node/lifecycle.cc): against the real
// binary, an installed tenant answers reads and writes as its source did, and a DELETE followed
// at once by a PUT of the same name (an image, or a fresh tenant) -- while the old one may still
// be freeing -- serves the new one, round after round and across a restart.
#include <xxhash.h>

#include <filesystem>

#include "test/server/node/node_fixture.h"

namespace fenec::test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

std::string xxh128_hex(std::string_view bytes) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), bytes.size()));
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : c.digest) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

struct Node {
    Node() { start(); }
    void start() {
        client.reset();
        process.reset();
        process = std::make_unique<NodeProcess>(
            dir.path(),
            std::vector<std::string>{"--token", D, "--admin-token", A, "--auth-delay", "0"});
        ASSERT_NE(process->port(), 0) << process->first_line();
        client = std::make_unique<Client>(process->port());
    }
    Reply call(std::string_view method, std::string_view target, const std::string& token,
               std::string_view body = {},
               std::vector<std::pair<std::string, std::string>> more = {}) {
        auto headers = bearer(token);
        headers.insert(headers.end(), more.begin(), more.end());
        auto r = client->request(method, target, body, headers);
        EXPECT_TRUE(r.has_value()) << method << " " << target;
        if (!r || r->closed) client = std::make_unique<Client>(process->port());
        return r.value_or(Reply{});
    }
    Reply admin(std::string_view method, std::string_view target, std::string_view body = {},
                std::vector<std::pair<std::string, std::string>> more = {}) {
        return call(method, target, A, body, std::move(more));
    }
    Reply query(const std::string& q) {
        return call("POST", "/t/acme/query", D, "{\"query\":\"" + q + "\"}");
    }
    Reply put_image(const std::string& body, const std::string& digest) {
        return admin(
            "PUT", "/_admin/tenants/acme/file", body,
            {{"Content-Type", "application/octet-stream"}, {"Fenec-Image-Digest", digest}});
    }
    std::string path(const std::string& file) const { return dir.path() + "/" + file; }

    TempDir dir;
    std::unique_ptr<NodeProcess> process;
    std::unique_ptr<Client> client;
};

// acme with docs (title, v vector<3> @hnsw) of 60 rows, frozen; its image.
Reply acme_image(Node& n) {
    auto r = n.admin("PUT", "/_admin/tenants/acme",
                     R"J({"schema":["create collection docs (title text, v vector<3> @hnsw)"]})J");
    EXPECT_EQ(r.status, 201) << r.body;
    for (int i = 0; i < 60; ++i) {
        const std::string v = "[" + std::to_string(i % 7 + 1) + "," + std::to_string(i % 5) + "," +
                              std::to_string(i % 3) + "]";
        auto p = n.query("put docs {title: \\\"d" + std::to_string(i) + "\\\", v: " + v + "}");
        EXPECT_EQ(p.status, 200) << p.body;
    }
    EXPECT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    auto img = n.admin("GET", "/_admin/tenants/acme/file");
    EXPECT_EQ(img.status, 200) << img.body;
    return img;
}

const char* near_query = "get docs near v [2, 1, 1] limit 5";

TEST(DeleteFree, InstalledTenantServesFromItsBodyThroughWritesAndARewrite) {
    Node n;
    Reply img = acme_image(n);
    ASSERT_EQ(img.status, 200);
    const std::string before = n.query(near_query).body;
    Node n2;
    ASSERT_EQ(n2.put_image(img.body, xxh128_hex(img.body)).status, 201);
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
    const std::string digest = xxh128_hex(img.body);
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
}  // namespace fenec::test
