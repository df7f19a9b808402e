// test/server/node/file_image_test.cc: a frozen tenant's file sent as its image and the install
// that writes a body as it arrives (node-http.md §8.3; engine/file_image.cc,
// server/node/image.cc),
// against the real binary: the GET of a frozen tenant is its file on disk byte for byte (nothing
// built), its digest the file's XXH3-128; that file installs on another node, open and answering
// as the source does, and reopens whole after a restart; an install whose body is cut half-way
// leaves nothing served and no `.incoming`, as does one whose Fenec-Seq or digest does not match,
// and the whole body installs after them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "test/server/node/image_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::file_image_test {
namespace {

const std::string& D = image_data_token;
const std::string& A = image_admin_token;
using Node = ImageNode;

std::string file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// acme with docs (title text, v vector<3> @hnsw): 40 rows whose long titles outweigh any graph
// record the flusher writes meanwhile (a file more than a quarter dead is built instead), frozen.
void frozen_acme(Node& n) {
    auto r = n.admin("PUT", "/_admin/tenants/acme",
                     R"J({"schema":["create collection docs (title text, v vector<3> @hnsw)"]})J");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string pad(2000, 'x');
    for (int i = 0; i < 40; ++i) {
        const std::string v = "[" + std::to_string(i % 7 + 1) + "," + std::to_string(i % 5) + "," +
                              std::to_string(i % 3) + "]";
        auto p = n.query("put docs {title: \\\"d" + std::to_string(i) + pad + "\\\", v: " + v +
                         "}");
        ASSERT_EQ(p.status, 200) << p.body;
    }
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
}

const char* near_query = "get docs select title near v [2, 1, 1] limit 5";

TEST(FileImage, AFrozenTenantsImageIsItsFileAndInstallsOpenAndWhole) {
    Node n;
    frozen_acme(n);
    if (HasFailure()) return;
    auto img = n.admin("GET", "/_admin/tenants/acme/file");
    ASSERT_EQ(img.status, 200) << img.body;
    // The graph tail was written by the GET, once; the file stands as it was sent.
    EXPECT_EQ(img.body, file_bytes(n.path("acme.fenec")));
    EXPECT_EQ(img.header("Fenec-Image-Digest").value_or(""), image_digest_hex(img.body));
    EXPECT_EQ(n.admin("GET", "/_admin/tenants/acme/file").body, img.body) << "nothing more written";

    Node n2;
    const std::string lineage = img.header("Fenec-Lineage").value_or("");
    auto put = n2.put_image(img.body, {{"Fenec-Image-Digest", image_digest_hex(img.body)},
                                       {"Fenec-Seq", img.header("Fenec-Seq").value_or("")},
                                       {"Fenec-Lineage", lineage}});
    ASSERT_EQ(put.status, 201) << put.body;
    const std::string timing = put.header("Server-Timing").value_or("");
    EXPECT_NE(timing.find("receive;dur="), std::string::npos) << timing;
    EXPECT_NE(timing.find("install;dur="), std::string::npos) << timing;
    EXPECT_FALSE(std::filesystem::exists(n2.path("acme.fenec.incoming")));
    EXPECT_EQ(file_bytes(n2.path("acme.fenec")), img.body);
    const std::string source = n.query(near_query).body;
    EXPECT_EQ(n2.query(near_query).body, source);
    ASSERT_EQ(n2.query("put docs {title: \\\"after\\\", v: [1, 1, 1]}").status, 200);
    n2.start();
    auto c = n2.query("get docs select count(*)");
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_NE(c.body.find("41"), std::string::npos) << c.body;
}

TEST(FileImage, ACutBodyOrAWrongSeqOrDigestLeavesNothingServed) {
    Node n;
    frozen_acme(n);
    if (HasFailure()) return;
    auto img = n.admin("GET", "/_admin/tenants/acme/file");
    ASSERT_EQ(img.status, 200) << img.body;
    const std::string digest = image_digest_hex(img.body);

    Node n2;
    auto nothing_left = [&](const std::string& what) {
        // A cut body is noticed by the node as the connection ends. Until that install has let
        // the tenant go, a PUT is refused 409 (`being deleted or installed`); a byte is no image,
        // so the PUT that asks is refused 400 and installs nothing either.
        EXPECT_TRUE(wait_until([&] {
            return n2.put_image("x", ImageNode::Headers{}).status != 409;
        })) << what;
        EXPECT_FALSE(std::filesystem::exists(n2.path("acme.fenec.incoming"))) << what;
        EXPECT_FALSE(std::filesystem::exists(n2.path("acme.fenec"))) << what;
        EXPECT_EQ(n2.query(near_query).status, 404) << what;
    };
    {
        // Half the body, then the connection closed.
        Client raw(n2.process->port());
        std::string head = "PUT /_admin/tenants/acme/file HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           "Authorization: Bearer " + A + "\r\n"
                           "Content-Type: application/octet-stream\r\n"
                           "Fenec-Image-Digest: " + digest + "\r\n"
                           "Content-Length: " + std::to_string(img.body.size()) + "\r\n\r\n";
        ASSERT_TRUE(raw.send_raw(head + img.body.substr(0, img.body.size() / 2)));
    }  // closed: the node reads the half sent before the close that follows it
    nothing_left("a body cut half-way");
    auto seq = n2.put_image(img.body, {{"Fenec-Image-Digest", digest}, {"Fenec-Seq", "1"}});
    EXPECT_EQ(seq.status, 400) << seq.body;
    EXPECT_NE(seq.body.find("Fenec-Seq"), std::string::npos) << seq.body;
    nothing_left("a wrong Fenec-Seq");
    std::string damaged = img.body;
    damaged[damaged.size() - 5] ^= 0x10;
    auto bad = n2.put_image(damaged, {{"Fenec-Image-Digest", digest}});
    EXPECT_EQ(bad.status, 400) << bad.body;
    nothing_left("a body that does not match its digest");

    auto put = n2.put_image(img.body, {{"Fenec-Image-Digest", digest}});
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(n2.query(near_query).body, n.query(near_query).body);
}

}  // namespace
}  // namespace fenec::test::file_image_test
