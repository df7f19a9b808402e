// shard/status.h: `GET /_shard/status`, the read the operator console (shard/console.h) needs
// beside `/_shard/nodes` and `/_shard/tenants`, made of what the router keeps already: each node
// asked for its copies at once (`GET /_admin/tenants`, every call bounded by status_survey_ms, so
// a node down or cut off shows as not answering instead of holding the answer up); the tenants'
// sizes from those answers; the moves in progress, each at the step its row, its claim and the
// nodes' copies show; the lease granted and the record; and the last failovers, from the ring of
// recent_failovers_max the Cluster keeps (RecentFailovers below).
//
// Read-only: it claims nothing and writes nothing, on a primary or a standby alike.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "server/runtime/http.h"
#include "shard/router.h"

namespace fenec::shard {

// Each node's survey for the status, all at once: a node that has not answered in this long is
// shown as not answering. A node on the same network answers its list in milliseconds; a page
// refreshing every few seconds cannot wait for --upstream-timeout on a node cut off.
inline constexpr int64_t status_survey_ms = 1500;
// Nodes asked at once by one status: a thread each. Beyond it the rest wait their turn.
inline constexpr size_t status_survey_threads_max = 32;
// Failovers the status shows: enough to see a burst (a zone lost fails over each of its nodes),
// few enough that the ring's memory and the answer stay small.
inline constexpr size_t recent_failovers_max = 16;

// One failover as it ended (shard/failover.h's FailoverResult), with the router's wall time.
struct FailoverSeen {
    int64_t at_ms = 0;
    std::string node;
    std::string trigger;                                        // "hand" or "lease"
    std::vector<std::pair<std::string, std::string>> promoted;  // tenant, the node it is on now
    std::vector<std::pair<std::string, std::string>> failed;    // tenant, why
    std::vector<std::pair<std::string, std::string>> waiting;   // tenant, what holds it
};

// The last recent_failovers_max failovers, newest last. Thread-safe.
class RecentFailovers {
  public:
    void add(FailoverSeen seen);
    // Each failover of `node` that left `tenant` waiting: it moves to `promoted` (onto `to`) or,
    // `to` empty, to `failed` (`why`). None such (pushed out of the ring): nothing.
    void settled(const std::string& node, const std::string& tenant, const std::string& to,
                 const std::string& why);
    std::vector<FailoverSeen> list() const;

  private:
    mutable std::mutex mu_;
    std::deque<FailoverSeen> ring_;
};

// GET /_shard/status, on an API worker (it waits on the nodes' answers).
http::Response serve_status(Router& router, const server::Request& request,
                            const Router::Answering& a);

}  // namespace fenec::shard
