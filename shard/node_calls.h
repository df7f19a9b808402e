// shard/node_calls.h: every admin call the router makes to a node (router.md §13), typed, in one
// place: the node's hello, its tenants (the repair's survey with `?detail`), a tenant created or
// deleted, a copy told to follow or promoted, a quota put or read, a lease granted. Each call
// writes its request with the node's admin token and the request id, reads the answer, and hands
// back a typed result carrying the node's status and its error text (its `error` member, or why
// nothing came back), so no caller matches a message or parses a node's JSON itself.
//
// Every call blocks on the router's one blocking call to a node (Upstream::admin, over the
// runtime's client), so it runs on an API worker, the copies' worker or a lease thread, never on
// a loop. Thread-safe: it keeps no state between calls.
//
// Calls that running twice leaves as once (the reads, a delete, a quota that replaces the whole)
// may be sent again on a fresh connection after a cut; the others (create, follow, promote,
// grant) are not.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shard/directory.h"
#include "shard/lease_book.h"

namespace fenec::shard {

class Upstream;

// What every answer carries.
struct NodeAnswer {
    bool answered = false;  // an HTTP answer came back
    int status = 0;         // the node's status; 0 when nothing came back
    std::string error;      // the node's `error`, or why nothing came back; "" on a success
    std::string body;       // the answer's body as the node sent it, for passing on
    bool ok() const { return answered && status >= 200 && status < 300; }
    // A delete is done when the copy is gone: 204, 200 or 404 (§6.4).
    bool gone() const { return answered && (status == 204 || status == 200 || status == 404); }
    // "node `n1` answered 409: <error>" or "<why nothing came back>", for logs and answers.
    std::string said(const NodeRow& node) const;
};

// GET /_admin/hello (§6.3): the node checked, whether it takes leases, its bytes for placement.
struct HelloReply : NodeAnswer {
    uint64_t disk_bytes = 0;
    std::string lease = "unknown";  // "takes", "none" or "unknown" (the directory's nodes.lease)
};

// One copy a node holds, as `GET /_admin/tenants[?detail]` tells it (node-http.md §8, §8.8).
struct CopyInfo {
    std::string name;
    uint64_t bytes = 0;
    std::string role;  // "primary" or "replica"
    bool frozen = false;
    // With ?detail: "" where the node could not open the copy to tell.
    std::string lineage;
    std::string history;
    std::vector<std::string> forks;  // the histories of its forks, oldest first
    struct Following {
        std::string from;  // http://host:port
        uint64_t told = 0;
        bool heard = false;  // it heard from `from` since it was last told to follow it
    };
    std::optional<Following> following;  // none: it follows nobody
};

// GET /_admin/tenants/<t> (node-http.md §8): what the node says of its copy of one tenant.
struct DescribeReply : NodeAnswer {
    bool read = false;  // a 200 with the members below, or a 404 (found false)
    bool found = false;
    std::string lineage, history;
    uint64_t seq = 0;
    uint64_t durable = 0;  // the durable seq, where the node says it (else its seq)
    bool frozen = false;
    std::string following;  // the primary a copy follows (`following.from`), "" for none
};

// GET /_admin/lease (node-http.md §9): who holds the node's lease, if anyone.
struct LeaseHolderReply : NodeAnswer {
    std::optional<std::string> authority;  // none: no holder, or not said
    int64_t term = 0;
};

// GET /_admin/tenants, with ?detail the repair's survey (§8.3 step 1).
struct SurveyReply : NodeAnswer {
    std::vector<CopyInfo> copies;  // by name
    const CopyInfo* find(std::string_view tenant) const;
};

// PUT /_admin/tenants/<t> (§6.4 step 4).
struct CreateReply : NodeAnswer {
    std::string lineage;  // "" when the node did not say
};

// POST /_admin/tenants/<t>/follow (§8.2's attach, node-http.md §8.7).
struct FollowWire {
    std::string from;       // http://<primary addr>
    std::string lineage;    // "" leaves it out
    std::string authority;  // `<id>/<scope>` (§9.8)
    int64_t term = 0;
    uint64_t wait_ms = 0;  // 0 leaves it out
};
struct FollowReply : NodeAnswer {
    uint64_t told = 0;
    bool heard = false;
};

// POST /_admin/tenants/<t>/promote (§9.1, node-http.md §8.6).
struct PromoteWire {
    std::string lineage;  // "" leaves it out (only with force)
    std::string forked;   // "" is null: no failover yet
    std::string authority;
    int64_t term = 0;
    bool force = false;
};
struct PromoteReply : NodeAnswer {
    std::string lineage;
    std::string history;  // the new history, the one the directory records as `forked`
    uint64_t seq = 0;
    bool forked = false;  // false: the copy was a primary already, its history unchanged
    // On a 409: the copy's own lineage when it is of another (§9.2), or the holder that fenced
    // the call (`authority/term`) when a higher term holds the node (§9.8).
    std::string other_lineage;
    std::string holder;
};

// The node's quota object (node-http.md §8.5): the limits recorded, none where absent.
std::string quota_body(const std::optional<Quota>& quota);

class NodeCalls {
  public:
    explicit NodeCalls(Upstream& upstream) : upstream_(upstream) {}

    // Called with the holder (authority, term) that a node names in any 409 it answers to one
    // of these calls (§9.8: a grant, a promotion, a change fenced by its `Fenec-Fence`): how the
    // router learns it was promoted over (Router::heard_holder). Set once, before any call.
    using HolderHeard = std::function<void(const NodeRow&, std::string_view, int64_t)>;
    void on_holder(HolderHeard f) { on_holder_ = std::move(f); }

    // `GET /_admin/hello` with `token` (the new one of a PUT, or the recorded one). A node from
    // before hello answers 404, and then `GET /_admin/tenants` proves the token and gives the
    // bytes as their sum.
    HelloReply hello(const NodeRow& node, std::string_view request_id);
    // `GET /_admin/tenants`, with `?detail` when `detail`.
    SurveyReply tenants(const NodeRow& node, bool detail, std::string_view request_id);
    // `PUT /_admin/tenants/<t>`; `schema` (a JSON array) goes as `{"schema": …}` when given.
    CreateReply create(const NodeRow& node, std::string_view tenant,
                       const std::optional<std::string>& schema, std::string_view request_id);
    // `DELETE /_admin/tenants/<t>`.
    NodeAnswer remove(const NodeRow& node, std::string_view tenant, std::string_view request_id);
    FollowReply follow(const NodeRow& node, std::string_view tenant, const FollowWire& wire,
                       std::string_view request_id);
    PromoteReply promote(const NodeRow& node, std::string_view tenant, const PromoteWire& wire,
                         std::string_view request_id);
    // `PUT /_admin/tenants/<t>/quota`, the whole quota; none sends `{}`.
    NodeAnswer put_quota(const NodeRow& node, std::string_view tenant,
                         const std::optional<Quota>& quota, std::string_view request_id);
    // `GET /_admin/tenants/<t>/quota`: limits and usage, in `body`.
    NodeAnswer get_quota(const NodeRow& node, std::string_view tenant, std::string_view request_id);
    // `GET /_admin/tenants/<t>`, within `deadline` where one is given (else --upstream-timeout).
    DescribeReply describe(const NodeRow& node, std::string_view tenant,
                           std::string_view request_id,
                           std::chrono::steady_clock::time_point deadline =
                               std::chrono::steady_clock::time_point::max());
    // `GET /_admin/lease`, the whole call within `deadline`.
    LeaseHolderReply lease_holder(const NodeRow& node, std::string_view request_id,
                                  std::chrono::steady_clock::time_point deadline);
    // `POST /_admin/lease` (§9.5) within `deadline`: an answer not back by then is `silent`, as
    // is a deadline already past, so a late answer is never counted. The deadline bounds the
    // whole call, name lookup, connect, send and answer (server/runtime/client.h's Until).
    GrantReply grant(const NodeRow& node, const GrantWire& wire,
                     std::chrono::steady_clock::time_point deadline,
                     std::string_view request_id = {});

    // `DELETE /_admin/lease` (node-http.md §9.2, router.md §11.9): what `node` took from
    // `authority` dropped at once, so another directory's grants are taken without waiting for
    // the lapse. 200 either way (`{"released":…}`); 409 when a higher term holds it.
    NodeAnswer release_lease(const NodeRow& node, std::string_view authority, int64_t term,
                             std::string_view request_id);

  private:
    NodeAnswer exchange(const NodeRow& node, std::string_view method, std::string_view target,
                        std::string_view body, bool resendable, std::string_view request_id,
                        std::chrono::steady_clock::time_point deadline =
                            std::chrono::steady_clock::time_point::max(),
                        bool cut_on_lapse = true);  // AdminCall::cut_on_lapse

    Upstream& upstream_;
    HolderHeard on_holder_;
};

// Reading answers, apart from the I/O so the shapes are tested on their own.
namespace node_answers {
// The `error` member of a node's JSON refusal, or the body's first bytes.
std::string error_of(std::string_view body);
// The `reason` member of a node's JSON refusal (`frozen`, docs/http-node.md), or "".
std::string reason_of(std::string_view body);
void read_hello(HelloReply& r);
void read_tenants(SurveyReply& r);
void read_create(CreateReply& r);
void read_follow(FollowReply& r);
void read_promote(PromoteReply& r);
GrantReply read_grant(int status, std::string_view body);
void read_describe(DescribeReply& r);
void read_lease_holder(LeaseHolderReply& r);
}  // namespace node_answers

}  // namespace fenec::shard
