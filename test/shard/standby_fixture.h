// test/shard/standby_fixture.h: a primary router R serving its directory's feed behind
// --replication-token, in front of two real fenec-node processes (n1, n2 registered), and a
// standby router S started by the case with --replica-of R over a file of its own; requests to
// either, and what S answers compared with what R does (the oracle). Network traffic goes to
// 127.0.0.1 only.
#pragma once

#include "test/shard/cluster_fixture.h"

namespace fenec::test {

inline std::string url_of(uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }

// What a suite with a standby router adds to its cluster `Base` (ClusterTest<N> or
// LeasedClusterTest<N>).
template <class Base>
class WithStandby : public Base {
  protected:
    // S: a standby of the router on `primary` (R's port unless said), over a file of its own.
    void start_standby(std::vector<std::string> more = {}, uint16_t primary = 0) {
        std::vector<std::string> flags = {"--token",
                                          kRoot,
                                          "--directory",
                                          sdir_.path() + "/standby.fenec",
                                          "--replication-token",
                                          kReplication,
                                          "--auth-delay",
                                          "0"};
        if (primary != 1) {  // 1: started without --replica-of (a promotion at start)
            flags.push_back("--replica-of");
            flags.push_back(url_of(primary ? primary : this->router_->port()));
        }
        flags.insert(flags.end(), more.begin(), more.end());
        standby_.reset();
        standby_ = std::make_unique<RouterProcess>(flags, sdir_.path() + "/standby.err");
        ASSERT_NE(standby_->port(), 0) << read_file(sdir_.path() + "/standby.err");
    }
    // A request to S (token: the router's unless said).
    Reply on_s(std::string_view method, std::string_view target, std::string_view body = {},
               const std::string& token = kRoot) {
        Client c(standby_->port());
        return c.request(method, target, body, bearer(token)).value_or(Reply{});
    }
    Reply on_r(std::string_view method, std::string_view target, std::string_view body = {},
               const std::string& token = kRoot) {
        Client c(this->router_->port());
        return c.request(method, target, body, bearer(token)).value_or(Reply{});
    }
    // Whether S answers `target` as R does.
    bool same(const std::string& target) {
        Reply s = on_s("GET", target);
        Reply r = on_r("GET", target);
        return s.status == r.status && s.body == r.body;
    }
    // Whether S has its directory (an empty list from a standby still waiting would match R's
    // too) and answers the tenants and nodes as R does.
    bool caught_up() {
        return on_s("GET", "/_health").body.find(R"("directory":"ready")") != std::string::npos &&
               same("/_shard/tenants") && same("/_shard/nodes");
    }
    int64_t term_of(Reply health) {
        Json j(health.body);
        int64_t t = -1;
        return j.ok && !j.doc["term"].get_int64().get(t) ? t : -1;
    }

    TempDir sdir_;
    std::unique_ptr<RouterProcess> standby_;
};

class StandbyTest : public WithStandby<ClusterTest<2>> {
  protected:
    void SetUp() override {
        start_router({"--replication-token", kReplication});
        ASSERT_EQ(add(0, "n1").status, 201);
        ASSERT_EQ(add(1, "n2").status, 201);
    }
};

}  // namespace fenec::test
