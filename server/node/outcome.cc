// server/node/outcome.cc: how a write is answered (node-http.md §5.8 steps 10-11, §9.4). Every
// write path hands its outcome to answer_write, so the answer check runs once for all of them:
// a write that landed while the lease ran and is answered after it lapsed, or after a grant
// dropped its tenant, is in this copy's file while its tenant may have been failed over without
// it — the client is told the outcome is unknown, with the seq and history to settle it by
// (§5.6), and never a Fenec-Seq it would take as its own position.
#include "server/node/handlers.h"
#include "server/node/lease.h"
#include "server/node/replication.h"
#include "server/node/test_hooks.h"

namespace fenec::node {

namespace {

// 500 {"error","outcome":"unknown","seq","history"[,"completed","at"]}, no Fenec-Seq (§4.2).
http::Response unknown_outcome(const Node& node, const ql::BlockOutcome& o, std::string_view why,
                               const std::optional<BatchPlace>& place) {
    return node.refusal(500,
                        "the write landed at seq " + std::to_string(o.seq.v) +
                            " and could not be confirmed: " + std::string(why),
                        {}, [&](json::Writer& w) {
                            w.key("outcome");
                            w.string("unknown");
                            w.key("seq");
                            w.uint64(o.seq.v);
                            w.key("history");
                            w.string(engine::format::hex16(o.history.v));
                            if (!place) return;
                            w.key("completed");
                            w.uint64(place->completed);
                            w.key("at");
                            w.uint64(place->at);
                        });
}

}  // namespace

void answer_write(Node& node, Call& call, Tenant& tenant, ql::BlockOutcome o, const Respond& respond,
                  std::optional<BatchPlace> place) {
    if (o.landed) test_hooks::stall_landed(call.request.head);
    Leases* leases = node.leases();
    if (o.error && leases && o.error->engine_code == engine::Code::not_leased && o.error->engine_detail) {
        // Refused at begin or landing by the engine's guard: the node's words for it (§9.4).
        o.error->message = leases->refusal_message(o.error->engine_detail->lease, tenant.name());
    }
    if (o.landed && o.error) {  // its fsync failed, or a compact batch refused part-way (§5.8)
        node.counters().outcome_unknown->inc();
        return node.answer(call, unknown_outcome(node, o, o.error->message, place));
    }
    // §5.8 step 9, for every write path: up to --replica-wait for the block to reach the
    // followers' streams, so a write answered is on its way to each connected copy, and the
    // answer check below sees any lease that lapsed meanwhile.
    if (o.landed && !o.error) node.replication().wait_handed(tenant.name(), o.seq.v);
    if (o.landed && leases) {  // §5.8 step 10: the answer check
        const engine::LeaseVerdict v = leases->check(tenant.name());
        if (v != engine::LeaseVerdict::ok) {
            node.counters().outcome_unknown->inc();
            return node.answer(call, unknown_outcome(node, o, leases->refusal_message(v, tenant.name()),
                                                     std::nullopt));
        }
    }
    node.answer(call, respond(o));
}

}  // namespace fenec::node
