// test/server/node/fault_node_fixture.h: fenec-node in process on the fault-injecting file system
// (test/support/fault_fs.h) and fake clocks, handed to it as main() hands it the real ones
// (NodeEnv), spoken to over HTTP on a loopback port; start() again after stop() is a restart on
// the same files. Shared by the fault tests (fault_fs_node_test.cc: side files, creates, leases;
// fault_open_test.cc: a tenant's open; fault_install_test.cc: an image's install).
#pragma once

#include <cerrno>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/clock.h"
#include "server/node/node.h"
#include "test/server/node/node_fixture.h"
#include "test/support/fault_fs.h"

namespace fenec::test {

inline bool has(const std::string& body, const std::string& part) {
    return body.find(part) != std::string::npos;
}

// The ways a durable replace of a file can fail, each armed on the next call of its kind.
enum class Step { write, fsync, rename, dir_fsync };
inline constexpr Step steps[] = {Step::write, Step::fsync, Step::rename, Step::dir_fsync};

inline void arm(FaultFs& fs, Step step) {
    switch (step) {
        case Step::write:
            fs.fail_append(1, ENOSPC);
            break;
        case Step::fsync:
            fs.fail_sync(1);
            break;
        case Step::rename:
            fs.fail_rename(1);
            break;
        case Step::dir_fsync:
            fs.fail_sync_dir(1);
            break;
    }
}

// The wall clock the node starts on, which its files carry.
inline constexpr int64_t fault_node_wall_ms = 1'750'000'000'000;

class FaultFsNode : public ::testing::Test {
  protected:
    void TearDown() override { stop(); }

    void start(bool lease = false) {
        client_.reset();
        node::NodeOptions o;
        o.listen = "127.0.0.1:0";
        o.data_dir = dir_;
        o.workers = 1;
        o.node_name = "n1";
        o.auth_delay_ms = 0;
        o.lease = lease;
        if (options_) options_(o);
        node_ = std::make_unique<node::Node>(
            o, node::NodeEnv{env_fs_ ? *env_fs_ : fs_, clock_, boot_clock_, boot_id_});
        ASSERT_EQ(node_->prepare(), "");
        ASSERT_EQ(node_->serve(), "");
        client_ = std::make_unique<Client>(node_->port());
        ASSERT_TRUE(client_->ok());
    }
    void stop() {
        client_.reset();
        node_.reset();
    }

    Reply call(std::string_view method, std::string_view target, std::string_view body = {},
               std::vector<std::pair<std::string, std::string>> headers = {}) {
        auto r = client_->request(method, target, body, std::move(headers));
        EXPECT_TRUE(r.has_value()) << method << " " << target;
        if (!r || r->closed) client_ = std::make_unique<Client>(node_->port());
        return r.value_or(Reply{});
    }
    void create(
        const std::string& tenant,
        const std::string& schema = R"J({"schema":["create collection notes (title text)"]})J") {
        auto r = call("PUT", "/_admin/tenants/" + tenant, schema);
        ASSERT_EQ(r.status, 201) << r.body;
    }
    Reply put(const std::string& tenant, const std::string& title) {
        return call("POST", "/t/" + tenant + "/query",
                    "{\"query\":\"put notes {title: $1}\",\"params\":[\"" + title + "\"]}");
    }
    Reply describe(const std::string& tenant) { return call("GET", "/_admin/tenants/" + tenant); }
    std::string text(const std::string& path) const {
        const std::vector<std::byte> b = fs_.contents(path);
        return {reinterpret_cast<const char*>(b.data()), b.size()};
    }

    // Opens a subscription to acme's notes (`query` after the path); the head consumed.
    std::unique_ptr<Client> subscribe(const std::string& query) {
        auto c = std::make_unique<Client>(node_->port());
        c->send_raw("GET /t/acme/c/notes/changes" + query + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        const std::string got = c->read_until("\r\n\r\n", 5000);
        const size_t end = got.find("\r\n\r\n");
        EXPECT_NE(end, std::string::npos) << got;
        EXPECT_NE(got.find(" 200 "), std::string::npos) << got;
        c->drop(end + 4);
        return c;
    }

    std::function<void(node::NodeOptions&)> options_;  // run on the options of each start
    engine::Fs* env_fs_ = nullptr;  // the node's file system where a case wraps fs_ (else fs_)
    const std::string dir_ = "/n1";
    const std::string boot_id_ = "0b00710d-f00d-4e5e-9a1b-000000000001";  // as main() reads it
    FaultFs fs_;
    engine::FakeClock clock_{fault_node_wall_ms};
    engine::FakeBootClock boot_clock_;
    std::unique_ptr<node::Node> node_;
    std::unique_ptr<Client> client_;
};

}  // namespace fenec::test
