// test/server/node/image_memory_test.cc: what an image PUT received in memory costs the node while
// its body is pending (issue 17 item 9, server/node/image.cc): resident memory follows the bytes
// that arrived, not the Content-Length declared. A client that declares 512 MiB and sends 1 MiB
// grows the node's RSS by less than 64 MiB; once it leaves, the node serves and the tenant's
// name is free again. The bytes that arrived are charged to the node's memory (hello's
// memory_bytes, which --max-memory bounds) until the body is refused or installed; an image
// declared larger than --max-memory is received on disk instead.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "test/server/node/image_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::image_memory_test {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t mib = uint64_t{1} << 20;
constexpr uint64_t declared_bytes = 512 * mib;  // under the in-memory bound (1 GiB)
constexpr uint64_t sent_bytes = 1 * mib;
// The prefault window (four 8 MiB slices past the bytes received) and slack: +32 MiB is what the
// plain build grows by. Under ASan the same window grows the RSS by +60 to +64 MiB (measured on
// main before and after 2026-12-02; its allocator and shadow pages), so 64 MiB was the edge
// there: twice the bound, still an eighth of the length declared.
#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t growth_bytes_max = 128 * mib;
#else
constexpr uint64_t growth_bytes_max = 64 * mib;
#endif

// The process's resident set (VmRSS), in bytes; 0 if it cannot be read.
uint64_t rss_bytes(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
        if (line.starts_with("VmRSS:")) return std::stoull(line.substr(6)) * 1024;  // kB
    }
    return 0;
}

std::string put_head(uint64_t length) {
    return "PUT /_admin/tenants/acme/file HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
           image_admin_token + "\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
           std::to_string(length) + "\r\n\r\n";
}

TEST(ImageMemory, APendingBodyHoldsTheBytesSentNotTheLengthDeclared) {
    ImageNode n;
    ASSERT_EQ(n.admin("GET", "/_admin/hello").status, 200);
    const pid_t pid = n.process->pid();
    const uint64_t before = rss_bytes(pid);
    ASSERT_GT(before, 0u);

    auto c = std::make_unique<Client>(n.process->port());
    ASSERT_TRUE(c->ok());
    // Sent at once: far above --body-rate-min (4096 B/s on average), so the node does not cut
    // the body for slowness while it is measured.
    ASSERT_TRUE(c->send_raw(put_head(declared_bytes) + std::string(sent_bytes, 'x')));
    // The handler has the body once the bytes land in the node's buffer.
    ASSERT_TRUE(wait_until([&] { return rss_bytes(pid) >= before + sent_bytes; }))
        << "RSS " << rss_bytes(pid) << " from " << before;
    // The window in which nothing may happen: the node holds the pending body as it is.
    uint64_t peak = 0;
    const auto end = std::chrono::steady_clock::now() + 1500ms;
    while (std::chrono::steady_clock::now() < end) {
        peak = std::max(peak, rss_bytes(pid));
        std::this_thread::sleep_for(20ms);
    }
    // Measured while the body was still pending: the node has answered nothing (no 408).
    EXPECT_EQ(c->read_until("HTTP/1.1", 1), "");
    const uint64_t grown = peak - before;
    std::printf(
        "[ image_memory ] RSS %.1f MiB -> %.1f MiB (+%.1f MiB) for %llu MiB declared, "
        "%llu MiB sent\n",
        static_cast<double>(before) / mib, static_cast<double>(peak) / mib,
        static_cast<double>(grown) / mib, static_cast<unsigned long long>(declared_bytes / mib),
        static_cast<unsigned long long>(sent_bytes / mib));
    EXPECT_LT(grown, growth_bytes_max) << "RSS " << before << " -> " << peak;

    c.reset();  // the client leaves part-way
    EXPECT_EQ(n.admin("GET", "/_admin/hello").status, 200);
    // The cut body is refused and the tenant put back: its name takes a create.
    Reply created;
    ASSERT_TRUE(wait_until([&] {
        created = n.admin("PUT", "/_admin/tenants/acme",
                          R"J({"schema":["create collection notes (title text)"]})J");
        return created.status != 409;
    }));
    EXPECT_EQ(created.status, 201) << created.body;
}

// hello's memory_bytes (what --max-memory bounds), read from its answer.
uint64_t memory_bytes(ImageNode& n) {
    const Reply r = n.admin("GET", "/_admin/hello");
    const size_t at = r.body.find("\"memory_bytes\":");
    EXPECT_NE(at, std::string::npos) << r.status << " " << r.body;
    return at == std::string::npos ? 0 : std::stoull(r.body.substr(at + 15));
}

// The bytes that arrived are charged to the node's memory as they arrive, so --max-memory makes
// room for them (the sweep closes idle tenants), and given back once the client leaves.
TEST(ImageMemory, ThePendingBytesAreChargedToTheNodesMemoryAsTheyArrive) {
    ImageNode n;
    ASSERT_EQ(memory_bytes(n), 0u) << "no tenant open";
    constexpr uint64_t sent = 16 * mib;  // at least one of the receive's slices (8 MiB)
    auto c = std::make_unique<Client>(n.process->port());
    ASSERT_TRUE(c->send_raw(put_head(declared_bytes) + std::string(sent, 'x')));
    uint64_t charged = 0;
    ASSERT_TRUE(wait_until([&] { return (charged = memory_bytes(n)) > 0; }));
    EXPECT_LE(charged, sent) << "charged as they arrive, not as declared";
    c.reset();
    EXPECT_TRUE(wait_until([&] { return memory_bytes(n) == 0; })) << "given back";
}

// An image declared larger than --max-memory could never be charged under it: it is received on
// disk (one chunk in memory at a time) and installed closed, as one past the in-memory bound is.
TEST(ImageMemory, AnImageLargerThanMaxMemoryIsReceivedOnDisk) {
    ImageNode source;
    ASSERT_EQ(source
                  .admin("PUT", "/_admin/tenants/acme",
                         R"J({"schema":["create collection notes (title text)"]})J")
                  .status,
              201);
    std::string docs = "[";
    for (int i = 0; i < 300; ++i) {
        docs += (i ? ",{\"title\":\"" : "{\"title\":\"") + std::string(5000, 'a' + i % 26) + "\"}";
    }
    docs += "]";
    ASSERT_EQ(source.call("POST", "/t/acme/c/notes", image_data_token, docs).status, 201);
    const Reply image = source.admin("GET", "/_admin/tenants/acme/file");
    ASSERT_EQ(image.status, 200);
    ASSERT_GT(image.body.size(), mib);

    TempDir dir;
    NodeProcess target(dir.path(), {"--token", image_data_token, "--admin-token", image_admin_token,
                                    "--auth-delay", "0", "--max-memory", "1"});
    ASSERT_NE(target.port(), 0) << target.first_line();
    Client c(target.port());
    auto put = c.request("PUT", "/_admin/tenants/acme/file", image.body,
                         {{"Authorization", "Bearer " + image_admin_token},
                          {"Content-Type", "application/octet-stream"}});
    ASSERT_TRUE(put);
    ASSERT_EQ(put->status, 201) << put->body;
    // Verified from the file, not opened by the install (an in-memory install leaves it open).
    auto listed = c.request("GET", "/_admin/tenants", {}, bearer(image_admin_token));
    ASSERT_TRUE(listed);
    EXPECT_NE(listed->body.find("\"open\":false"), std::string::npos) << listed->body;
    EXPECT_NE(put->body.find("\"bytes\":" + std::to_string(image.body.size())), std::string::npos)
        << put->body;
    EXPECT_EQ(std::filesystem::file_size(dir.path() + "/acme.fenec"), image.body.size());
}

}  // namespace
}  // namespace fenec::test::image_memory_test
