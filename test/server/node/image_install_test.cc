// test/server/node/image_install_test.cc: the image install as a move uses it (node-http.md §8.3,
// server/README.md's image digest), against the real binary: a PUT leaves the tenant open and
// served (its `near` answered as the source answers it, no reopen), a DELETE …/file of an open,
// written tenant (closed without a checkpoint) followed by a PUT of the image again is safe and
// survives a restart, the digest is XXH3-128 in 32 hex, a SHA-256-length or wrong digest
// refused naming the header, and an image sent with `Fenec-Frozen: true` (a move's target across
// regions, shard/handoff.h) is served frozen from its first request, in memory or from disk, and
// stays so across a restart until thawed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/huge_pages.h"
#include "test/server/node/image_fixture.h"

namespace fenec::test::image_install_test {
namespace {

const std::string& D = image_data_token;
const std::string& A = image_admin_token;
using Node = ImageNode;

const char* near_query = "get docs near v [2, 1, 1] limit 5";

TEST(ImageInstall, InstalledTenantIsServedOpenAsTheSourceAnswers) {
    Node n;
    Reply img = acme_image(n);
    ASSERT_EQ(img.status, 200);
    Node n2;
    auto put = n2.put_image(img.body, image_digest_hex(img.body));
    ASSERT_EQ(put.status, 201) << put.body;
    // Open from the install on: the verification's database is the one served.
    auto list = n2.admin("GET", "/_admin/tenants");
    EXPECT_NE(list.body.find("\"name\":\"acme\""), std::string::npos) << list.body;
    EXPECT_NE(list.body.find("\"open\":true"), std::string::npos) << list.body;
    EXPECT_NE(list.body.find("\"frozen\":false"), std::string::npos) << list.body;
    EXPECT_FALSE(std::filesystem::exists(n2.path("acme.fenec.incoming")));
    auto a = n.query(near_query);
    auto b = n2.query(near_query);
    ASSERT_EQ(b.status, 200) << b.body;
    EXPECT_EQ(a.body, b.body);
    // It takes writes (thawed) and they land in the installed file.
    ASSERT_EQ(n2.query("put docs {title: \\\"after\\\", v: [1, 1, 1]}").status, 200);
    n2.start();  // the same data dir: the installed file, reopened
    auto c = n2.query("get docs select count(*)");
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_NE(c.body.find("61"), std::string::npos) << c.body;
}

// A tenant taken out for a delete closes without a checkpoint: its file goes, and the image put
// back after it installs and reopens whole.
// An image past engine::huge_buffer_min is received into huge pages (server/node/image.cc):
// installed, served as the source answers, and reopened from its file after a restart.
TEST(ImageInstall, AnImageLargeEnoughForHugePagesIsInstalledAndServed) {
    Node n;
    auto r = n.admin("PUT", "/_admin/tenants/acme",
                     R"J({"schema":["create collection docs (title text, v vector<3> @hnsw)"]})J");
    ASSERT_EQ(r.status, 201) << r.body;
    for (int i = 0; i < 36; ++i) {  // 1 MB titles: 36 MB
        const std::string title(1'000'000, char('a' + i % 26));
        const std::string v = "[" + std::to_string(i % 7 + 1) + "," + std::to_string(i % 5) + ",1]";
        auto p = n.query("put docs {title: \\\"" + title + "\\\", v: " + v + "}");
        ASSERT_EQ(p.status, 200) << p.body.substr(0, 200);
    }
    ASSERT_EQ(n.admin("POST", "/_admin/tenants/acme/freeze").status, 200);
    Reply img = n.admin("GET", "/_admin/tenants/acme/file");
    ASSERT_EQ(img.status, 200);
    ASSERT_GE(img.body.size(), engine::huge_buffer_min) << "the image does not reach huge pages";

    Node n2;
    auto put = n2.put_image(img.body, image_digest_hex(img.body));
    ASSERT_EQ(put.status, 201) << put.body;
    const std::string q = "get docs near v [2, 1, 1] limit 2";
    const Reply a = n.query(q);
    ASSERT_EQ(a.status, 200);
    EXPECT_EQ(n2.query(q).body, a.body);
    n2.start();
    EXPECT_EQ(n2.query(q).body, a.body);
}

TEST(ImageInstall, DeleteOfAnOpenTenantThenReinstallIsSafeAcrossARestart) {
    Node n;
    Reply img = acme_image(n);
    ASSERT_EQ(img.status, 200);
    ASSERT_EQ(n.query(near_query).status, 200);  // open, graph built
    const std::string before = n.query(near_query).body;
    auto del = n.admin("DELETE", "/_admin/tenants/acme/file");
    ASSERT_EQ(del.status, 204) << del.body;
    EXPECT_FALSE(std::filesystem::exists(n.path("acme.fenec")));
    EXPECT_EQ(n.query(near_query).status, 404);

    auto put = n.put_image(img.body, image_digest_hex(img.body));
    ASSERT_EQ(put.status, 201) << put.body;
    EXPECT_EQ(n.query(near_query).body, before);
    n.start();
    auto after = n.query(near_query);
    ASSERT_EQ(after.status, 200) << after.body;
    EXPECT_EQ(after.body, before);
}

TEST(ImageInstall, DigestIsXxh3_128AndADamagedDigestIsRefused) {
    Node n;
    Reply img = acme_image(n);
    ASSERT_EQ(img.status, 200);
    const std::string digest = img.header("Fenec-Image-Digest").value_or("");
    EXPECT_EQ(digest.size(), 32u);
    EXPECT_EQ(digest, image_digest_hex(img.body));

    Node n2;
    // A SHA-256-length digest: the header's form, refused before anything is written.
    auto sha = n2.put_image(img.body, std::string(64, 'a'));
    EXPECT_EQ(sha.status, 400) << sha.body;
    EXPECT_NE(sha.body.find("XXH3-128"), std::string::npos) << sha.body;
    // One digit changed: the body's digest does not match.
    std::string damaged = digest;
    damaged[5] = damaged[5] == '0' ? '1' : '0';
    auto bad = n2.put_image(img.body, damaged);
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("Fenec-Image-Digest does not match"), std::string::npos) << bad.body;
    EXPECT_FALSE(std::filesystem::exists(n2.path("acme.fenec")));
    EXPECT_FALSE(std::filesystem::exists(n2.path("acme.fenec.incoming")));
    // The body damaged under a right digest of the original: refused by the digest too.
    std::string flipped = img.body;
    flipped[flipped.size() / 3] ^= 0x01;
    EXPECT_EQ(n2.put_image(flipped, digest).status, 400);
    EXPECT_EQ(n2.put_image(img.body, digest).status, 201);
}

// Fenec-Frozen: true. Reads are answered, writes refused 503 `frozen` from the first request on,
// whether the image was installed open from memory or renamed from disk (the mark applied as it
// opens); across a restart too; a thaw takes writes again. A value other than true or false is
// refused before anything is written.
TEST(ImageInstall, AnImageSentFrozenIsServedFrozenUntilThawed) {
    Node n;
    Reply img = acme_image(n);
    ASSERT_EQ(img.status, 200);
    const std::string digest = image_digest_hex(img.body);
    const std::string put = "put docs {title: \\\"after\\\", v: [1, 1, 1]}";
    for (const char* in_memory_bytes : {"", "0"}) {  // "0": every image received to disk
        SCOPED_TRACE(*in_memory_bytes ? "to disk" : "in memory");
        if (*in_memory_bytes) ::setenv("FENEC_TEST_IMAGE_IN_MEMORY_BYTES", in_memory_bytes, 1);
        Node n2;
        ::unsetenv("FENEC_TEST_IMAGE_IN_MEMORY_BYTES");
        auto odd =
            n2.put_image(img.body, {{"Fenec-Image-Digest", digest}, {"Fenec-Frozen", "yes"}});
        EXPECT_EQ(odd.status, 400) << odd.body;
        EXPECT_NE(odd.body.find("Fenec-Frozen"), std::string::npos) << odd.body;
        EXPECT_FALSE(std::filesystem::exists(n2.path("acme.fenec")));

        auto installed =
            n2.put_image(img.body, {{"Fenec-Image-Digest", digest}, {"Fenec-Frozen", "true"}});
        ASSERT_EQ(installed.status, 201) << installed.body;
        for (int life = 0; life < 2; ++life) {
            SCOPED_TRACE(life == 0 ? "as installed" : "after a restart");
            auto about = n2.admin("GET", "/_admin/tenants/acme");
            EXPECT_NE(about.body.find("\"frozen\":true"), std::string::npos) << about.body;
            auto write = n2.query(put);
            EXPECT_EQ(write.status, 503) << write.body;
            EXPECT_NE(write.body.find("\"reason\":\"frozen\""), std::string::npos) << write.body;
            auto count = n2.query("get docs select count(*)");
            ASSERT_EQ(count.status, 200) << count.body;
            EXPECT_NE(count.body.find("60"), std::string::npos) << count.body;
            if (life == 0) n2.start();
        }
        ASSERT_EQ(n2.admin("POST", "/_admin/tenants/acme/thaw").status, 200);
        EXPECT_EQ(n2.query(put).status, 200);
        EXPECT_NE(n2.query("get docs select count(*)").body.find("61"), std::string::npos);
    }
}

}  // namespace
}  // namespace fenec::test::image_install_test
