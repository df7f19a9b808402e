// server/node/handlers.h: the routes' entry points, each in its own file, all run on the worker
// pool with the call already past its credential check (node.cc).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "engine/database.h"
#include "json/writer.h"
#include "ql/error.h"
#include "ql/executor.h"
#include "server/node/node.h"
#include "server/node/wire.h"
#include "server/runtime/http.h"

namespace fenec::node {

// data.cc: /t/<tenant>/... (node-http.md §5).
void serve_data(Node& node, const std::shared_ptr<Call>& call);
// data.cc: a point read on an open tenant answered on the calling (loop) thread; false when the
// call must go to the pool.
bool serve_inline(Node& node, const std::shared_ptr<Call>& call);
// data.cc: a small REST write to an open tenant under --sync always, landed on the calling (loop)
// thread and answered by the Syncer once durable; false when the call must go to the pool.
bool serve_inline_write(Node& node, const std::shared_ptr<Call>& call);
// rest.cc: the statement reading one document of `collection` by `_id` ($1), as REST's GET
// and the loop's point read both run it.
std::string document_read(std::string_view collection);
// admin.cc: /_admin/... (node-http.md §8).
void serve_admin(Node& node, const std::shared_ptr<Call>& call);

// errors.cc: the one place a refusal from FenecQL or the engine becomes an HTTP answer (§6):
// its status, its JSON body and the headers its status carries (Retry-After on 429 and 503,
// the quota's name on 429 and 507, the 503's reason).
// A tenant the registry could not give: 404 unknown, 503 `memory`, 500 a file that does not open.
http::Response acquire_refusal(const Node& node, const Acquired& acquired);
// The tenants could not be listed (Registry::list's error): 503 with Retry-After, naming the
// failure, `"reason":"descriptors"` when the node is out of them (EMFILE, ENFILE), else `"io"`.
http::Response listing_refusal(const Node& node, const engine::Status& status);

// An answer of `status` whose body is JSON already written (rest.cc, lease_admin.cc).
inline http::Response json_answer(int status, std::string body) {
    http::Response r;
    r.status = status;
    r.body = std::move(body);
    return r;
}

// data.cc, shared with statements.cc: what §5.8 checks before a statement runs for the
// credential (a JWT runs no schema statement, one of scope "read" runs reads only, §3.2); the
// headers of §4.1 that bear on reading and holding (Fenec-After, Fenec-History, Fenec-Wait);
// whether this copy holds write `after` of `history` (§5.6): yes, not yet (wait), or never; and
// the answer to a write it does not hold.
std::optional<http::Response> scope_refusal(
    Node& node, const Call& call, std::span<const std::shared_ptr<const ql::ParsedStatement>> all);
struct ReadAfter {
    std::optional<uint64_t> after;
    std::optional<uint64_t> history;
    std::optional<uint64_t> wait_ms;
};
std::optional<http::Response> read_after_headers(Node& node, const Call& call, ReadAfter& out);
enum class Holds : uint8_t { yes, not_yet, never };
Holds holds_write(Tenant& t, uint64_t after, std::optional<uint64_t> history);
http::Response not_held(Node& node, Tenant& t, uint64_t after, std::optional<uint64_t> history);
// A read's `run` once this copy holds `ra.after` (§5.6): at once when it does or none was asked
// for; 504 (not_held) when it never will; else parked up to `ra.wait_ms` (5 s unless given) and
// run when a write or a sync brings it, 504 when the wait runs out. `run` answers the call.
void run_when_held(Node& node, const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& t,
                   const ReadAfter& ra, std::function<void()> run);

// statements.cc: §5.8 step 4, admission of a write before its key is looked up: the node
// stopping, the tenant frozen (503 with the reason). nullopt: admitted.
std::optional<http::Response> write_refusal(Node& node, Tenant& tenant);

// errors.cc: the budget one run of a request's statements gets (--statement-rows,
// --statement-ms; ql/budget.h). Passed, error_response answers it: rows 400, time 503.
ql::BudgetLimits statement_budget(const Node& node);

// `more` writes members after the error's own (a batch's `completed` and `at`). A quota's
// refusal (507, 429) names `tenant` and the quota, never an amount (§7), and is counted.
http::Response error_response(Node& node, std::string_view tenant, const ql::Error& error,
                              const std::function<void(json::Writer&)>& more = {});
// As above, for a refusal on no tenant's behalf (a parse error, an admin route's).
http::Response error_response(Node& node, const ql::Error& error,
                              const std::function<void(json::Writer&)>& more = {});
// A stream or subscription refused while `tenant` is latched by a failed write (§5.8): 503,
// `"reason":"latched"`, Retry-After the seconds until its reopen at the latest.
http::Response latched_refusal(Node& node, std::string_view tenant);
// A write refused for the lease (§9.4): 503, Retry-After: 1, Fenec-Lease and the reason by
// `verdict`, the message naming the node (and `tenant` for lease-elsewhere).
http::Response lease_refusal(Node& node, engine::LeaseVerdict verdict, std::string_view tenant,
                             const std::function<void(json::Writer&)>& more = {});

// outcome.cc: §5.8 steps 10 and 11, the one way every write's outcome is answered (statements,
// batches, held runs, REST): a landed write stalls under the test hook `Fenec-Test-Stall:
// land=<ms>`, is checked against the lease again, and one that landed and then failed that check
// or its fsync is answered 500 "outcome":"unknown" with `seq` and `history` and no Fenec-Seq;
// any other outcome is answered by `respond`. `place`, for a batch whose outcome already carries
// its error, gives the `completed` and `at` of the unknown answer.
struct BatchPlace {
    size_t completed = 0;
    size_t at = 0;
};
using Respond = std::function<http::Response(const ql::BlockOutcome&)>;
void answer_write(Node& node, Call& call, Tenant& tenant, ql::BlockOutcome outcome,
                  const Respond& respond, std::optional<BatchPlace> place = std::nullopt);
// answer_write for a block run with ql::RunOptions::defer_durable (--sync always): one that
// landed and is not yet durable is shaped by `respond` now and answered once an fsync covers it
// (Database::when_durable, the node's Syncer), from a worker of its tenant's share, its tenant
// held open and `ticket` held until then; a failed fsync answers 500 "outcome":"unknown". Any
// other outcome is answered at once. The worker that ran the block goes on to the next request
// meanwhile, so the writes waiting on one fsync are not bounded by the workers (§2.1).
void answer_write_durable(Node& node, const std::shared_ptr<Call>& call, Tenant& tenant,
                          ql::BlockOutcome outcome, const Respond& respond,
                          std::optional<BatchPlace> place, Tenant::WriteTicket ticket);

// lease_admin.cc: POST, GET and DELETE /_admin/lease (§9.2).
void serve_lease(Node& node, const std::shared_ptr<Call>& call);
// lease_admin.cc: what a fence that is not ok answers (§9.5): 409 {"error","holder":{...}}
// naming the holder, or 500 when the raised term could not be persisted. For promote and
// follow: `auto f = node.fencing().fence(authority, term); if (!f.ok()) answer fence_refusal`.
struct FenceOutcome;
struct Holder;
http::Response fence_refusal(const Node& node, const FenceOutcome& fence);
// lease_admin.cc: a holder as §9.2 and §8.8 write it, `null` for none.
void write_holder(json::Writer& w, const std::optional<Holder>& holder);

// idempotency.cc (§5.7).
void load_idempotency_keys(Tenant& tenant);

struct KeyedWrite {
    std::string user_key;     // user "\n" key: the key table's index
    std::string key;
    std::string fingerprint;  // hex SHA-256 of method, target and body
    int64_t at_ms = 0;   // when the write was asked
    int64_t ttl_ms = 0;  // --idempotency-ttl
    bool claimed = false;
    std::optional<engine::DocId> row;  // set by store_key
};

// Reads `Idempotency-Key` for a write: nullopt when there is none (or a 400 in `refusal`); a
// replayed answer or 422 in `refusal`; otherwise the key, claimed until finish_key.
std::optional<KeyedWrite> begin_key(Node& node, Call& call, Tenant& tenant,
                                    std::optional<http::Response>& refusal);
// Lands the key's row in `block` (the write's own): status and body as they will be answered.
engine::Status store_key(engine::Block& block, KeyedWrite& key, int status,
                         const std::string& body);
// Releases the key; where its block landed, the table points at the row store_key wrote.
void finish_key(Tenant& tenant, KeyedWrite& key, bool landed);
// Whether a write runs with ql::RunOptions::defer_durable and is answered through
// answer_write_durable: under --sync always (the node has a Syncer), unless it holds an
// Idempotency-Key, whose claim finish_key releases only once its block is durable, so a retry
// never replays an answer a power cut could take back.
inline bool defer_durable(Node& node, const std::optional<KeyedWrite>& key) {
    return node.syncer() != nullptr && !key;
}

}  // namespace fenec::node
