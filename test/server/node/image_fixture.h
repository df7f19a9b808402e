// test/server/node/image_fixture.h: what the image tests share (image_install_test.cc,
// file_image_test.cc, delete_free_test.cc, admin_test.cc): the image digest as server/README.md
// defines it, a node started with a data and an admin token and a client that reconnects after a
// close, and a frozen tenant with an @hnsw field and its image.
#pragma once

#include <xxhash.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "test/server/node/node_fixture.h"

namespace fenec::test {

inline const std::string image_data_token = "data-token-d";
inline const std::string image_admin_token = "admin-token-a";

// The image digest: XXH3-128, canonical order, 32 hex (xxhsum -H2).
inline std::string image_digest_hex(std::string_view bytes) {
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

// A fenec-node in its own folder; start() again restarts it on the same folder.
struct ImageNode {
    using Headers = std::vector<std::pair<std::string, std::string>>;

    ImageNode() { start(); }
    void start() {
        client.reset();
        process.reset();
        process = std::make_unique<NodeProcess>(
            dir.path(), std::vector<std::string>{"--token", image_data_token, "--admin-token",
                                                 image_admin_token, "--auth-delay", "0"});
        ASSERT_NE(process->port(), 0) << process->first_line();
        client = std::make_unique<Client>(process->port());
    }
    Reply call(std::string_view method, std::string_view target, const std::string& token,
               std::string_view body = {}, Headers more = {}) {
        auto headers = bearer(token);
        headers.insert(headers.end(), more.begin(), more.end());
        auto r = client->request(method, target, body, headers);
        EXPECT_TRUE(r.has_value()) << method << " " << target;
        if (!r || r->closed) client = std::make_unique<Client>(process->port());
        return r.value_or(Reply{});
    }
    Reply admin(std::string_view method, std::string_view target, std::string_view body = {},
                Headers more = {}) {
        return call(method, target, image_admin_token, body, std::move(more));
    }
    Reply query(const std::string& q) {
        return call("POST", "/t/acme/query", image_data_token, "{\"query\":\"" + q + "\"}");
    }
    // PUT …/acme/file with `headers` besides its Content-Type.
    Reply put_image(const std::string& body, Headers headers) {
        headers.emplace_back("Content-Type", "application/octet-stream");
        return admin("PUT", "/_admin/tenants/acme/file", body, std::move(headers));
    }
    Reply put_image(const std::string& body, const std::string& digest) {
        return put_image(body, Headers{{"Fenec-Image-Digest", digest}});
    }
    std::string path(const std::string& file) const { return dir.path() + "/" + file; }

    TempDir dir;
    std::unique_ptr<NodeProcess> process;
    std::unique_ptr<Client> client;
};

// acme with docs (title, v vector<3> @hnsw) of 60 rows, frozen; its image.
inline Reply acme_image(ImageNode& n) {
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

}  // namespace fenec::test
