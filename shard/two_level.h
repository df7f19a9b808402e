// shard/two_level.h: on the global router, a tenant created or deleted at home in a region that
// keeps its own directory (router.md §11.4): the global directory takes the name, the region's
// router makes the tenant; and the rows a stop left half-way settled by asking the region.
//
// Create: the row `{node: "@<r>", state: "creating"}` synced; the create relayed (with `node` and
// `schema` where given) to the region's routers (shard/relay.h), which place and record it as
// §6.4; refused or not reached, the row is deleted and the region's status (or 503) answered;
// made, or answered "exists" (a create whose answer was lost), the row becomes `active`.
// Delete: the row `deleting` synced; the delete relayed; done (204 or 404 there), the row
// removed; refused or not reached, the row back as it was.
// A relay that may have run (sent whole, no answer) leaves the row `creating` or `deleting`;
// settle() asks the region (`GET /_shard/tenants/<t>`) for each such row, at start and every
// settle_period_ms: there, a creating row becomes active and a deleting one is deleted again;
// not there, the row is removed.
// A row `importing` here is a move into a region this directory keeps itself, stopped between
// its import and its home statement (this router stopped): the region it came from (the row's
// `moving_from`) is asked the same question, of its primary; released to this region (its row
// `@<here>`), the import is activated; held on a node of its own again, `active` (its export
// lapsed), the import is deleted and the home `moving_from` put back; otherwise the row is left
// for the next round. A row without `moving_from` (written before the field) takes for its
// source the one region that knows the tenant, every other answering 404; else it is left.
//
// Invariant: a row is written `creating`/`deleting` before its region hears of the change and
// settled only under the tenant's claim, so a create or delete in progress is never settled
// under it. Threads: create and remove on API workers (they block on the relay); settle() on
// this object's own thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "server/runtime/http.h"
#include "shard/directory.h"
#include "shard/relay.h"

namespace fenec::shard {

class Router;

// §11.4 [ours]: rows left `creating` or `deleting` are settled this often, and once at start.
inline constexpr int64_t settle_period_ms = 60'000;

// Who asked: the client the first router saw and the request id, which the relays' marks cover.
struct Asker {
    std::string client;
    std::string request_id;
};

// Once the home of `tenant` moved to a region that took it from `source` (a settling's
// activation or home statement): `source` asked to drop its frozen copy and its row, the move's
// last step (shard/handoff.h); never before, since that row passes the tenant's requests on until
// the home moves. Logged; a drop not taken is left for the next import there. Blocks.
void drop_source(Router& router, const RelayTo& source, const std::string& tenant,
                 const Asker& asker);

class TwoLevel {
  public:
    explicit TwoLevel(Router& router);
    ~TwoLevel();
    TwoLevel(const TwoLevel&) = delete;
    TwoLevel& operator=(const TwoLevel&) = delete;

    // §11.4's create of `tenant` in `region` (its routers): the caller checked the body, holds
    // the tenant's claim and found the name free.
    http::Response create(const std::string& tenant, const RelayTo& region,
                          const std::optional<std::string>& node,
                          const std::optional<std::string>& schema, const Asker& asker);
    // §11.4's delete of `row` (at home in `region`): the caller holds the tenant's claim.
    http::Response remove(const TenantRow& row, const RelayTo& region, const Asker& asker);

    // Settles every row left `creating` or `deleting` whose tenant is not claimed. Blocks.
    void settle();
    // The settling thread: settle() now, then every settle_period_ms; stop() joins it.
    void start();
    void stop();

  private:
    // What the region says of `tenant`: true there, false not there, nullopt no answer.
    std::optional<bool> ask(const RelayTo& region, const std::string& tenant, const Asker& asker);
    void settle_one(const std::string& tenant);
    void settle_import(const std::string& tenant);

    Router& router_;
    std::mutex mu_;
    std::condition_variable wake_;
    bool stopping_ = false;  // under mu_
    std::thread thread_;
};

}  // namespace fenec::shard
