// test/server/node/file_room_node_test.cc: a tenant's file keeps room of zeros past its records
// while the node writes it (File::keep_room, docs/operations.md "Files on disk"), against the real
// binary under --sync always: the file on disk grows ahead of the records GET /_admin/tenants
// reports; a node killed then loses no answered write, and the reopened file ends at its last
// record; a clean stop leaves every file ending at its last record.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "test/server/node/node_fixture.h"

namespace fenec::test::file_room_node_test {
namespace {

const std::string D = "data-token-d";
const std::string A = "admin-token-a";

class FileRoomNode : public ::testing::Test {
  protected:
    void start() {
        node_.reset();
        node_ = std::make_unique<NodeProcess>(
            dir_.path(), std::vector<std::string>{"--token", D, "--admin-token", A,
                                                  "--auth-delay", "0", "--sync", "always"});
        ASSERT_NE(node_->port(), 0) << node_->first_line();
        client_ = std::make_unique<Client>(node_->port());
    }
    Reply send(const std::string& token, std::string_view method, std::string_view target,
               std::string_view body = {}) {
        auto r = client_->request(method, target, body, bearer(token));
        EXPECT_TRUE(r.has_value());
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    // The records' bytes of `acme` as the node reports them.
    uint64_t reported_bytes() {
        const Reply r = send(A, "GET", "/_admin/tenants");
        EXPECT_EQ(r.status, 200) << r.body;
        const size_t at = r.body.find("\"bytes\":");  // [{"name":"acme","bytes":N,...}]
        if (at == std::string::npos) return 0;
        return std::stoull(r.body.substr(at + 8));
    }
    uint64_t on_disk() { return std::filesystem::file_size(dir_.path() + "/acme.fenec"); }

    TempDir dir_;
    std::unique_ptr<NodeProcess> node_;
    std::unique_ptr<Client> client_;
};

TEST_F(FileRoomNode, AFileWrittenOnKeepsRoomAKilledNodeLosesNoWriteAndAStopCutsIt) {
    start();
    auto made = send(A, "PUT", "/_admin/tenants/acme",
                     R"J({"schema":["create collection items (n int, s text)"]})J");
    ASSERT_EQ(made.status, 201) << made.body;
    // 400 writes of 1 KiB, each answered after its fsync: past the 256 KiB a file takes before
    // it keeps room.
    const std::string filler(1024, 'x');
    constexpr int writes = 400;
    for (int i = 0; i < writes; ++i) {
        const Reply r = send(D, "POST", "/t/acme/c/items",
                             "{\"n\":" + std::to_string(i) + ",\"s\":\"" + filler + "\"}");
        ASSERT_EQ(r.status, 201) << r.body;
    }
    const uint64_t records = reported_bytes();
    ASSERT_GT(records, uint64_t{256} << 10);
    EXPECT_GT(on_disk(), records) << "the file keeps room past its records";

    ASSERT_EQ(node_->kill(SIGKILL), 128 + SIGKILL);
    start();
    const Reply count = send(D, "POST", "/t/acme/query",
                             R"J({"query":"get items select count(*), sum(n)"})J");
    ASSERT_EQ(count.status, 200) << count.body;
    EXPECT_NE(count.body.find("\"count(*)\":" + std::to_string(writes)), std::string::npos)
        << count.body;
    EXPECT_NE(count.body.find("\"sum(n)\":" + std::to_string(writes * (writes - 1) / 2)),
              std::string::npos)
        << count.body;
    EXPECT_EQ(reported_bytes(), records);
    EXPECT_EQ(on_disk(), records) << "the open cut the room's zeros";

    // Written on again, then stopped: the stop's close cuts the room.
    for (int i = 0; i < writes; ++i) {
        ASSERT_EQ(send(D, "POST", "/t/acme/c/items", "{\"n\":0,\"s\":\"" + filler + "\"}").status,
                  201);
    }
    EXPECT_GT(on_disk(), reported_bytes());
    ASSERT_EQ(node_->kill(SIGTERM), 0);
    const uint64_t stopped = on_disk();
    // Had the stop left zeros, the next open would cut them: the file would shrink.
    start();
    ASSERT_EQ(send(D, "POST", "/t/acme/query", R"J({"query":"get items select count(*)"})J").status,
              200);
    EXPECT_EQ(reported_bytes(), stopped);
    EXPECT_EQ(on_disk(), stopped) << "the stop left the file ending at its last record";
}

}  // namespace
}  // namespace fenec::test::file_room_node_test
