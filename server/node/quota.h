// server/node/quota.h: a tenant's quotas (node-http.md §7, §8.5). The quota lives beside the
// tenant's file in `<t>.quota` (JSON, written to `<t>.quota.new`, fsynced, renamed, the directory
// fsynced) and is applied as the tenant opens and whenever `PUT /_admin/tenants/<t>/quota`
// replaces it. The engine enforces `bytes`, `rows` and the two rates as blocks land
// (Database::set_limit); the node enforces `streams` at a subscription's open and `requests` at
// arrival, from Tenant's counts.
//
// Invariants: a tenant with no quota touches none of it — no side file, no set_limit; a refusal
// names the quota, never an amount; only the admin token reads usage (the admin plane's route).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/node/node.h"
#include "server/node/tenant.h"
#include "server/runtime/http.h"

namespace fenec::node {

// The six limits of §7; each unset is no limit.
struct Quota {
    std::optional<uint64_t> bytes;
    std::optional<uint64_t> rows;
    std::optional<uint64_t> streams;
    std::optional<uint64_t> requests;
    std::optional<uint64_t> rows_per_s;
    std::optional<uint64_t> bytes_per_s;
    bool any() const { return bytes || rows || streams || requests || rows_per_s || bytes_per_s; }
};

// A quota object as PUT's body and the side file hold it: `{"rows":4,...}`, a field absent or
// null no limit. "" or why not, naming the field; `field` is set to it when one is to blame.
std::string parse_quota(std::string_view json, Quota& out, std::string* field = nullptr);
// The set fields only: `{}` for none.
std::string quota_json(const Quota& q);

// "tenant acme is at its rows quota" (§7); `tenant` empty: "the tenant".
std::string quota_refusal_message(std::string_view tenant, std::string_view quota);

// RegistryOptions::on_open: the side file, if there is one, applied to the tenant opening. A
// tenant never serves without the quota it was given: a side file that cannot be read is
// io_error (the open fails, 503: a descriptor or the disk may be back on the next try), one that
// does not parse is corruption (500); each names the file.
[[nodiscard]] engine::Status load_quota(Node& node, Tenant& t);

// GET and PUT /_admin/tenants/<t>/quota (§8.5), the credential already checked.
void serve_quota(Node& node, const std::shared_ptr<Call>& call);

// §7 `streams`, at a subscription's open: a 429 naming the quota when `t` is at it. Call it where
// the stream is then counted, under the same lock.
std::optional<http::Response> streams_refusal(Node& node, Tenant& t);

// §7 `requests`, at arrival on the data plane: counts `call` in flight on `t` until it is answered
// or dropped (Call::admitted), or a 429 naming the quota when `t` is at it.
std::optional<http::Response> admit_request(Node& node, Call& call,
                                            const std::shared_ptr<Tenant>& t);

}  // namespace fenec::node
