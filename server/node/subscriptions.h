// server/node/subscriptions.h: `GET /t/<t>/c/<c>/changes` (node-http.md §5.4): server-sent
// events of a shape (§5.3's filters and `select`) — a seed of the whole shape, then one change
// event per landed block that touched it, resumable from a cursor while the tenant's change ring
// reaches back to it, a reseed otherwise. A subscription is parked state: it holds its tenant
// open and runs on the worker pool only when a block lands, never on a thread of its own.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>

#include "server/node/node.h"
#include "server/node/tenant.h"

namespace fenec::node {

class Subscription;

class Subscriptions {
public:
    explicit Subscriptions(Node& node) : node_(node) {}

    // On a worker, the call past its credential: checks the limits and the shape, answers the
    // head and the seed (or the changes after the cursor), and keeps the stream.
    void open(const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& tenant);
    // Once a second: keepalive comments, JWTs that reached `exp`.
    void tick();
    // Ends every stream with an `error` event of `reason` (shutdown).
    void end_all(std::string_view reason);
    // Ends the streams on `tenant` (its deletion: `gone`).
    void end_tenant(const std::string& tenant, std::string_view reason);
    size_t count() const;

    void remove(const Subscription* s);

private:
    Node& node_;
    mutable std::mutex mu_;
    std::set<std::shared_ptr<Subscription>> subs_;
};

}  // namespace fenec::node
