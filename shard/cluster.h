// shard/cluster.h: the router's leasing and failover wired to the rest of it (router.md §9): the
// LeaseHost and FailoverHost that shard/leases.h and shard/failover.h ask for, over the
// directory, the admin calls to nodes (shard/node_calls.h), the copies (shard/copies.h), the
// claims, the forwards' cut (§9.10) and the audit log. Owns the Failover (always: a failover by
// hand needs no lease), with --auto-failover the Leases, and the ring of the last failovers
// (GET /_shard/status, shard/status.h).
//
// Threads: the hosts' calls come from the lease threads, the judge and the failover's worker;
// none of them blocks on a loop. start() after the directory is open and the listener bound
// (§2.3 step 5); stop() before the upstream loops stop.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shard/failover.h"
#include "shard/leases.h"
#include "shard/status.h"

namespace fenec::shard {

class Router;

class Cluster final : public LeaseHost, public FailoverHost {
  public:
    explicit Cluster(Router& router);
    ~Cluster() override;
    Cluster(const Cluster&) = delete;
    Cluster& operator=(const Cluster&) = delete;

    // Leasing, with --auto-failover: the record raised where needed, then the threads. Once:
    // a primary's start, or a standby's promotion.
    void start();
    void stop();

    Failover& failover() { return *failover_; }
    // nullptr without --auto-failover.
    Leases* leases() { return leases_.get(); }

    // A claim released (Router::release): a tenant waiting for it is failed over now (§9.3).
    void released(const std::string& tenant);
    // `node`'s list changed (a create, delete, move or a node added or removed; "" for all):
    // granted at once where leasing runs.
    void changed(const std::string& node = "");

    // LeaseHost and FailoverHost.
    std::shared_ptr<const DirectoryMaps> maps() const override;
    Directory& directory() override;
    GrantReply grant(const NodeRow& node, const GrantWire& grant, int64_t deadline_ns) override;
    engine::Status put_lease_record(const LeaseRecord& record) override;
    void wait_for_standbys(int64_t bound_ms) override;
    void lapsed(const std::string& node) override;
    bool superseded() const override;
    void answered(const std::string& node, bool returned) override;
    void cut_calls(const std::string& node) override;
    void heard(const std::string& node) override;
    void settled_waiting(const std::string& node, const std::string& tenant, const std::string& to,
                         const std::string& why) override;
    bool claim(const std::string& tenant, std::string_view what) override;
    void release(const std::string& tenant) override;
    std::string held_by(const std::string& tenant) override;
    bool reserve(const std::string& tenant) override;
    void unreserve(const std::string& tenant) override;
    PromoteReply promote(const NodeRow& node, const std::string& tenant,
                         const PromoteWire& ask) override;
    bool send_quota(const NodeRow& node, const TenantRow& tenant) override;
    void cut(const std::string& tenant, const std::string& from) override;
    void grant_now(const std::string& node) override;
    void failover_ended(const std::string& node, bool promoted_any) override;
    void withhold(const std::string& node, const std::string& tenant) override;
    bool fence(const std::string& node, const std::vector<std::string>& tenants) override;
    void unfence(const std::string& node, const std::vector<std::string>& tenants) override;
    void restore(const std::string& node, const std::string& tenant) override;
    void repair(std::string_view why) override;
    void note(const std::string& line, std::string_view event,
              std::vector<obs::JsonField> fields) override;
    void failed_over(const std::string& node, std::string_view trigger,
                     const FailoverResult& result) override;

    // The last failovers, for GET /_shard/status.
    const RecentFailovers& recent_failovers() const { return recent_failovers_; }

  private:
    Router& router_;
    std::unique_ptr<Failover> failover_;
    std::unique_ptr<Leases> leases_;
    std::atomic<bool> started_{false};
    RecentFailovers recent_failovers_;
};

}  // namespace fenec::shard
