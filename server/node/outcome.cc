// server/node/outcome.cc: how a write is answered (node-http.md §5.8 steps 10-11, §9.4). Every
// write path hands its outcome to answer_write, so the answer check runs once for all of them:
// a write that landed while the lease ran and is answered after it lapsed, or after a grant
// dropped its tenant, is in this copy's file while its tenant may have been failed over without
// it — the client is told the outcome is unknown, with the seq and history to settle it by
// (§5.6), and never a Fenec-Seq it would take as its own position.
#include <cassert>
#include <optional>
#include <thread>

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

// answer_write, which waits for the followers' streams (§5.8 step 9) only when `wait_streams`:
// a Syncer thread, which must never wait, answers only once Replication::handed has held, and a
// stream that went live or caught up since is not waited for, as it would not have been had it
// come a moment after the wait.
void answer_checked(Node& node, Call& call, Tenant& tenant, ql::BlockOutcome o,
                    const Respond& respond, std::optional<BatchPlace> place, bool wait_streams) {
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
    if (o.landed && !o.error && wait_streams)
        node.replication().wait_handed(tenant.name(), o.seq.v);
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

}  // namespace

void answer_write(Node& node, Call& call, Tenant& tenant, ql::BlockOutcome o,
                  const Respond& respond, std::optional<BatchPlace> place) {
    answer_checked(node, call, tenant, std::move(o), respond, place, true);
}

namespace {

// A landed write waiting for its fsync: what its answer needs once one covers it.
struct Deferred {
    std::shared_ptr<Call> call;
    std::shared_ptr<Tenant> tenant;  // kept open until answered
    ql::BlockOutcome outcome;
    http::Response response;  // shaped as the block landed
    std::optional<BatchPlace> place;
    Tenant::WriteTicket ticket;  // until answered (§8.2)
};

void answer_deferred(Node& node, Deferred& d, const engine::Status& synced, bool wait_streams) {
    if (!synced.is_ok()) {  // landed, then its fsync failed: in the file, the outcome unknown
        d.outcome.error = ql::engine_error(synced, "");
        d.outcome.answers.clear();
    }
    d.outcome.durable = synced.is_ok();
    answer_checked(
        node, *d.call, *d.tenant, std::move(d.outcome),
        [&d](const ql::BlockOutcome&) { return std::move(d.response); }, d.place, wait_streams);
}

}  // namespace

void answer_write_durable(Node& node, const std::shared_ptr<Call>& call, Tenant& tenant,
                          ql::BlockOutcome o, const Respond& respond,
                          std::optional<BatchPlace> place, Tenant::WriteTicket ticket) {
    // Only a block run with defer_durable waits here: under --sync <ms> or off (no Syncer) a
    // write is answered at landing, as the operator chose. A write landed on the loop
    // (serve_inline_write) goes through when_durable even if an fsync covered it already, since
    // answer_write may wait for the followers' streams and the loop must not.
    if (!node.syncer() || !o.landed || o.error || (o.durable && !call->on_loop)) {
        return answer_write(node, *call, tenant, std::move(o), respond, place);
    }
    const engine::Seq seq = o.seq;
    http::Response response = respond(o);  // `respond` may hold the caller's frame: shaped now
    std::shared_ptr<Tenant> held = tenant.self();
    assert(held);  // the registry makes every tenant through Tenant::make
    auto d = std::make_shared<Deferred>(Deferred{call, std::move(held), std::move(o),
                                                 std::move(response), place, std::move(ticket)});
    // Called on a Syncer thread, which must go on to the next round and so must not wait (or on
    // a thread that synced the file itself: this one, when the block was durable already; a
    // close). With nothing to wait for (a failed fsync; or every follower stream has sent the
    // block, or none is live, and no test stall) the answer is given here: a lease check and a
    // hand-off to the call's loop, a few µs, where a worker woken for it would cost a thread
    // crossing a write (node-bench ARGS=writes, docs/benchmarks.md). Otherwise it runs on a
    // worker, which waits for the streams up to --replica-wait, or here after all, that wait
    // included, when the pool refuses it (full, or stopping): a landed, durable write must be
    // answered, and not before its block is on its way to each copy.
    // The Deferred's tenant reference may be let go on this thread either way: never a tenant's
    // last with its database attached, as the registry detaches and closes every database before
    // it drops the tenant (a close here would wait on this round).
    // when_durable calls back at once, on this thread, when an fsync covered the block already:
    // for a write landed on the loop, that is the loop, which may not wait. Its job is then taken
    // past the pool's bound (the writes landed on a loop and waiting are bounded by its
    // connections); refused only as the node stops, its wait for the streams is one of none
    // (Replication::lag_short), as if --replica-wait had run out.
    const std::optional<std::thread::id> loop =
        call->on_loop ? std::optional(std::this_thread::get_id()) : std::nullopt;
    tenant.db().when_durable(seq, [&node, d, loop](const engine::Status& synced) {
        const bool waits =
            synced.is_ok() && (test_hooks::stalls_landed(d->call->request.head) ||
                               !node.replication().handed(d->tenant->name(), d->outcome.seq.v));
        const bool on_loop = loop == std::this_thread::get_id();
        auto job = [&node, d, synced] { answer_deferred(node, *d, synced, true); };
        if (waits &&
            (on_loop ? node.submit_answer(*d->call, job) : node.submit_task(*d->call, job))) {
            return;
        }
        if (waits && on_loop) {
            node.replication().lag_short(d->tenant->name(), d->outcome.seq.v);
            return answer_deferred(node, *d, synced, false);
        }
        answer_deferred(node, *d, synced, waits);
    });
}

}  // namespace fenec::node
