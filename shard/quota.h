// shard/quota.h: quotas through the router (router.md §6.4 "Quota", seed 001). The router counts
// nothing and enforces nothing: it keeps each tenant's quota in the tenant's directory row
// (synced before anything is sent) and gives every copy its own, the primary's and each copy's
// node sent the whole quota with `PUT /_admin/tenants/<t>/quota`.
//
// Invariant: a node that did not take a tenant's quota (down, or refusing) is remembered, and is
// sent the quota the row holds then — never an older one — when it next answers
// (`QuotaSync::resend`, which Copies runs on its worker when told `node_answered`), until it
// takes it or no longer keeps a copy of the tenant. A resend claims the tenant, so it cannot
// cross a change of the quota made at the same time.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "server/runtime/http.h"
#include "shard/directory.h"
#include "shard/router.h"

namespace fenec::shard {

struct QuotaSent {
    bool taken = false;
    std::string why;  // when not taken: what the node said, or that it did not answer
};

class QuotaSync {
  public:
    explicit QuotaSync(Router& router) : router_(router) {}

    // The tenant's recorded quota to `node`: a copy made (an attach, a move's target) or about
    // to be promoted. Nothing is sent for a tenant with no quota, unless `node` still owes the
    // removal of one. Not taken: logged as `role`'s, and kept for a resend.
    QuotaSent send_to(const NodeRow& node, const TenantRow& tenant, std::string_view role,
                      std::string_view request_id);
    // By names, for the failover (§9.1: the quota first, then the promotion): `node` and
    // `tenant` looked up in the directory now; an unknown one is not taken.
    QuotaSent send_to(const std::string& node, const std::string& tenant,
                      std::string_view request_id);
    // The recorded quota (none included: `{}`) to the tenant's primary and every copy; the
    // primary's outcome. Each node that did not take it is logged and kept for a resend.
    QuotaSent send_everywhere(const std::string& tenant, std::string_view request_id);

    // Whether `node` owes a quota (cheap: the lease thread asks after each answer).
    bool owed_by(const std::string& node) const;
    // Sends again, on the caller's thread, every quota `node` did not take.
    void resend(const std::string& node, std::string_view request_id);
    // A deleted tenant owes nothing.
    void forget(const std::string& tenant);

  private:
    void owe(const std::string& node, const std::string& tenant);
    void paid(const std::string& node, const std::string& tenant);
    bool owes(const std::string& node, const std::string& tenant) const;

    Router& router_;
    mutable std::mutex mu_;
    std::map<std::string, std::set<std::string>> owed_;  // node → tenants whose quota it lacks
};

// `PUT`, `GET`, `DELETE /_shard/tenants/<t>/quota` (§6.2, §6.4), on an API worker.
http::Response serve_quota(Router& router, const server::Request& request,
                           const Router::Answering& a, const std::string& tenant);

// The client's quota object, checked as the node checks it (node-http.md §8.5): the six fields
// only, each a non-negative integer, or absent or null for no limit. `error` says which field.
std::optional<Quota> parse_quota(std::string_view body, std::string& error);

}  // namespace fenec::shard
