// server/node/statements.cc: the life of a statement request (node-http.md §5.8): parsed and
// classified, checked against the credential and the copy, its key looked up, run as one block,
// its answer shaped. Reads may wait for Fenec-After (§5.6); writes with Fenec-Wait are held until
// they write (§5.5). Both park on the tenant (parked.h), never on a thread.
#include "json/timestamp.h"
#include "ql/answer.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "ql/value_json.h"
#include "server/node/handlers.h"
#include "server/node/json_body.h"
#include "server/node/lease.h"
#include "server/node/parked.h"
#include "server/node/replication.h"
#include "server/node/statement_shape.h"
#include "server/node/test_hooks.h"
#include "server/obs/audit.h"

namespace fenec::node {

using Parsed = std::shared_ptr<const ql::ParsedStatement>;

namespace {

constexpr int64_t after_wait_default_ms = 5000;  // §4.1: Fenec-After's wait when none is sent

// A request's statements, parsed, with the parameters they run with.
struct Statements {
    std::vector<QueryBody> bodies;
    std::vector<Parsed> parsed;  // shared with the node's statement cache
    bool batch = false;
    bool writes = false;
    bool compact = false;

    std::vector<ql::Item> items() const {
        std::vector<ql::Item> out;
        for (size_t i = 0; i < parsed.size(); ++i) out.push_back(ql::Item{parsed[i].get(), bodies[i].params});
        return out;
    }
};

// {"results":[…],"completed":n} for a batch, the one answer for /query.
std::string success_body(std::span<const ql::Answer> answers, bool batch) {
    if (!batch) return ql::to_json(answers.front());
    std::string out = "{\"results\":[";
    for (size_t i = 0; i < answers.size(); ++i) {
        if (i) out += ',';
        out += ql::to_json(answers[i]);
    }
    out += "],\"completed\":" + std::to_string(answers.size()) + "}";
    return out;
}

void seq_headers(http::Response& r, uint64_t seq, uint64_t history) {
    r.header("Fenec-Seq", std::to_string(seq));
    r.header("Fenec-History", engine::format::hex16(history));
}

// The answer to a block's outcome that answer_write leaves to its caller (§5.1, §5.2): a
// refusal, or the success with its seq. A write's outcome goes through answer_write (outcome.cc).
http::Response outcome_response(Node& node, const Tenant& t, const ql::BlockOutcome& o,
                                bool batch, size_t completed_before = 0) {
    if (o.error) {
        return error_response(node, t.name(), *o.error, [&](json::Writer& w) {
            if (!batch) return;
            w.key("completed");
            w.uint64(completed_before);
            w.key("at");
            w.uint64(completed_before + o.failed_at);
        });
    }
    http::Response r;
    r.body = success_body(o.answers, batch);
    seq_headers(r, o.seq.v, o.history.v);
    return r;
}

uint64_t written_rows(std::span<const ql::Answer> answers) {
    uint64_t n = 0;
    for (const ql::Answer& a : answers) {
        if (a.kind == ql::Answer::Kind::affected || a.kind == ql::Answer::Kind::ids) n += a.affected;
    }
    return n;
}

ql::RunOptions run_options(const Node& node, const Call& call) {
    ql::RunOptions o;
    o.budget = statement_budget(node);  // fresh per run: a held claim's every run gets its own
    if (auto ms = test_hooks::now_ms(call.request.head)) o.now_ms = *ms;
    return o;
}

// Runs a write block with the key's row landing in it; the key is released after.
ql::BlockOutcome run_keyed(const Node& node, const Call& call, Tenant& t, const Statements& s,
                           std::optional<KeyedWrite>& key, bool store_only_if_written,
                           bool defer = false) {
    ql::Executor ex(t.db(), t.indexes());
    const std::vector<ql::Item> items = s.items();
    ql::BeforeCommit before;
    if (key) {
        before = [&](engine::Block& block, std::span<const ql::Answer> answers) {
            if (store_only_if_written && written_rows(answers) == 0) return engine::Status::ok();
            return store_key(block, *key, 200, success_body(answers, s.batch));
        };
    }
    // Its answer goes through answer_write, which waits for the followers' streams (§5.8 step 9).
    ql::RunOptions options = run_options(node, call);
    options.defer_durable = defer;
    return ex.run_block(items, options, before);
}

void count_statements(Node& node, const Statements& s) {
    uint64_t writes = 0;
    for (const Parsed& p : s.parsed) writes += p->statement.writes();
    if (writes) node.counters().statements->with({"write"}).inc(writes);
    if (s.parsed.size() > writes) node.counters().statements->with({"read"}).inc(s.parsed.size() - writes);
}

// A client's `compact`, counted beside the background's (compactor.h); `before`: the file's
// bytes before it ran.
void count_compact(Node& node, Tenant& t, uint64_t before, const ql::BlockOutcome& o) {
    node.compactor().count_statement(o.error ? o.error->engine_code : std::nullopt, before,
                                     o.error ? before : t.db().usage().file_bytes);
}

// A batch holding `compact` runs each statement alone, stopping at the first failure (§5.2).
// One refused for the lease after earlier ones landed would tell the client to come back as if
// none had: its outcome is unknown, at the last landed statement's seq (§5.8, seed 001).
void run_one_by_one(Node& node, Call& call, Tenant& t, const Statements& s) {
    ql::Executor ex(t.db(), t.indexes());
    ql::BlockOutcome all;
    all.seq = t.db().seq();
    all.history = t.db().history().current();
    for (size_t i = 0; i < s.parsed.size(); ++i) {
        if (i > 0) test_hooks::stall_between_statements(call.request.head);
        ql::Item item{s.parsed[i].get(), s.bodies[i].params};
        const bool compacting = s.parsed[i]->statement.kind() == ql::StatementKind::compact;
        const uint64_t before = compacting ? t.db().usage().file_bytes : 0;
        ql::BlockOutcome o = ex.run_block(std::span(&item, 1), run_options(node, call));
        if (compacting) count_compact(node, t, before, o);
        if (o.error) {
            o.failed_at = 0;
            // A later statement refused for the lease, or for a latch (an earlier one's fsync
            // failed): what landed before it may not survive, so the outcome is unknown.
            const std::optional<engine::Code> code = o.error->engine_code;
            if (!o.landed && all.landed &&
                (code == engine::Code::not_leased || code == engine::Code::latched)) {
                o.landed = true;
                o.seq = all.seq;
                o.history = all.history;
            }
            return answer_write(node, call, t, std::move(o), [&](const ql::BlockOutcome& r) {
                return outcome_response(node, t, r, true, i);
            }, BatchPlace{i, i});
        }
        all.answers.push_back(std::move(o.answers.front()));
        all.landed |= o.landed;
        if (o.landed || o.seq.v > all.seq.v) {
            all.seq = o.seq;
            all.history = o.history;
        }
    }
    answer_write(node, call, t, std::move(all), [&](const ql::BlockOutcome& r) {
        return outcome_response(node, t, r, true);
    });
}

// §5.5: a held write may hold set, del and reads only.
std::optional<http::Response> held_refusal(Node& node, const Statements& s) {
    using K = ql::StatementKind;
    for (const Parsed& p : s.parsed) {
        const K k = p->statement.kind();
        if (k != K::set && k != K::del && k != K::get && k != K::select) {
            return node.refusal(400, "Fenec-Wait holds `set` and `del` only, not `" +
                                         std::string(p->statement.first_word()) + "`");
        }
    }
    return std::nullopt;
}

// The queue a held request joins: its statements' text and parameters (§5.5).
std::string held_key(const Statements& s) {
    std::string key;
    for (const QueryBody& b : s.bodies) {
        key += b.query;
        key += '\n';
        json::Writer w(key);
        w.begin_array();
        for (const engine::Value& v : b.params) ql::write_value(w, v);
        w.end_array();
        key += '\n';
    }
    return key;
}

void run_held(Node& node, const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& t,
              std::shared_ptr<Statements> s, int64_t wait_ms) {
    auto last = std::make_shared<http::Response>();
    // One run: answered (true) when it wrote a row or was refused for another reason than an
    // unmet `require`; otherwise its answer is kept for the end of the wait.
    auto ran = std::make_shared<std::atomic<bool>>(false);
    auto run = [&node, call, t, s, last, ran]() -> bool {
        *ran = true;
        if (auto r = node.expired_meanwhile(*call)) {
            node.answer(*call, std::move(*r));
            return true;
        }
        const Tenant::WriteTicket ticket = t->admit_write();  // until this run answers (§8.2)
        if (auto r = write_refusal(node, *t)) {  // each run is a write (§5.5)
            node.answer(*call, std::move(*r));
            return true;
        }
        std::optional<http::Response> refusal;
        std::optional<KeyedWrite> key = begin_key(node, *call, *t, refusal);
        if (refusal) {
            node.answer(*call, std::move(*refusal));
            return true;
        }
        ql::BlockOutcome o = run_keyed(node, *call, *t, *s, key, true);
        if (key) finish_key(*t, *key, !o.error);
        const bool unmet = o.error && !o.landed && o.error->status() == 412;
        if ((!o.error && written_rows(o.answers) == 0) || unmet) {
            *last = outcome_response(node, *t, o, s->batch);
            return false;
        }
        const std::optional<BatchPlace> place =
            s->batch ? std::optional(BatchPlace{0, o.failed_at}) : std::nullopt;
        answer_write(node, *call, *t, std::move(o), [&node, s, t](const ql::BlockOutcome& r) {
            return outcome_response(node, *t, r, s->batch);
        }, place);
        return true;
    };
    const std::string queue = held_key(*s);
    auto self = std::make_shared<std::weak_ptr<Parked>>();
    // Only the oldest of a queue runs; the others wait their turn (woken as it leaves).
    auto attempt = [t, queue, self, run]() -> bool {
        auto p = self->lock();
        if (p && !t->held_first(queue, p.get())) return false;
        return run();
    };
    auto parked = std::make_shared<Parked>(node, t, attempt, [&node, call, last, ran, run] {
        // Queued behind an older one the whole wait: its one run is now (§5.5: the last run's
        // answer). While stopping, 503 as every run then is.
        if (!*ran && run()) return;
        node.answer(*call, std::move(*last));
    });
    *self = parked;
    parked->on_done([t, queue, raw = parked.get()] {
        if (auto next = t->held_leave(queue, raw)) next->wake();
    });
    const bool first = t->held_join(queue, parked);
    // It runs at once (§5.5) unless an older identical request waits before it.
    if (first && run()) {
        (void)parked->cancel();  // answered: leaves the queue, never parked
        return;
    }
    std::weak_ptr<Parked> weak = parked;
    call->exchange->on_close([weak, &node] {
        // A client that goes away leaves the queue; off the loop, as cancel may wait for a run.
        if (auto p = weak.lock()) {
            (void)node.submit_task([p, &node] {
                if (p->cancel()) node.abandoned();
            });
        }
    });
    parked->park(wait_ms);
}

void run_reads(Node& node, const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& t,
               std::shared_ptr<Statements> s, const ReadAfter& ra) {
    auto run = [&node, call, t, s] {
        ql::Executor ex(t->db(), t->indexes());
        const std::vector<ql::Item> items = s->items();
        const ql::BlockOutcome o = ex.run_block(items, run_options(node, *call));
        node.answer(*call, outcome_response(node, *t, o, s->batch));
    };
    if (!ra.after) return run();  // the common case: no std::function made for a wait
    run_when_held(node, call, t, ra, std::move(run));
}

}  // namespace

void run_when_held(Node& node, const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& t,
                   const ReadAfter& ra, std::function<void()> run) {
    if (!ra.after) return run();
    Holds holds = holds_write(*t, *ra.after, ra.history);
    if (holds == Holds::not_yet && t->db().seq().v >= *ra.after) {
        // Landed but not yet durable (N22): one fsync away, taken now rather than waited for
        // to the next --sync interval. A failed one leaves it not held.
        (void)t->wait_visible(engine::Seq{*ra.after});
        holds = holds_write(*t, *ra.after, ra.history);
    }
    if (holds == Holds::yes) return run();
    if (holds == Holds::never) return node.answer(*call, not_held(node, *t, *ra.after, ra.history));
    const int64_t wait = ra.wait_ms ? static_cast<int64_t>(*ra.wait_ms) : after_wait_default_ms;
    auto attempt = [&node, call, t, ra, run]() {
        if (t->leaving) {  // deleted or replaced while it waited (§8.1: held requests get 503)
            node.answer(*call, node.refusal(503, "tenant `" + t->name() + "` is leaving this node",
                                            "gone"));
            return true;
        }
        if (holds_write(*t, *ra.after, ra.history) != Holds::yes) return false;
        if (auto r = node.expired_meanwhile(*call)) {
            node.answer(*call, std::move(*r));
            return true;
        }
        run();
        return true;
    };
    auto parked = std::make_shared<Parked>(node, t, attempt, [&node, call, t, ra] {
        node.answer(*call, not_held(node, *t, *ra.after, ra.history));
    });
    parked->park(wait);
}

std::optional<http::Response> write_refusal(Node& node, Tenant& t) {
    if (node.stopping()) {
        node.counters().writes_refused->with({"stopping"}).inc();
        return node.refusal(503, "the node is stopping", "stopping");
    }
    if (t.db().frozen()) {
        node.counters().writes_refused->with({"frozen"}).inc();
        return node.refusal(503, "tenant `" + t.name() + "` is frozen", "frozen");
    }
    if (t.leaving) {  // being deleted or replaced (Registry::take_out)
        node.counters().writes_refused->with({"gone"}).inc();
        return node.refusal(503, "tenant `" + t.name() + "` is leaving this node", "gone");
    }
    if (const Leases* leases = node.leases()) {  // §9.4: refused unrun, before the key is looked up
        const engine::LeaseVerdict v = leases->check(t.name());
        if (v != engine::LeaseVerdict::ok) {
            http::Response r = lease_refusal(node, v, t.name());
            node.counters().writes_refused->with({v == engine::LeaseVerdict::lapsed      ? "lease-lapsed"
                                                  : v == engine::LeaseVerdict::not_named ? "lease-elsewhere"
                                                                                         : "lease-none"})
                .inc();
            return r;
        }
    }
    return std::nullopt;
}

void run_statements(Node& node, const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& t,
                    std::vector<QueryBody> bodies, bool batch) {
    auto s = std::make_shared<Statements>();
    s->bodies = std::move(bodies);
    s->batch = batch;
    for (size_t i = 0; i < s->bodies.size(); ++i) {
        ql::Error error;
        Parsed p = node.statements().get(s->bodies[i].query, error);
        if (!p) {
            return node.answer(*call, error_response(node, error, [&](json::Writer& w) {
                if (!batch) return;
                w.key("completed");
                w.uint64(0);
                w.key("at");
                w.uint64(i);
            }));
        }
        s->writes |= p->statement.writes();
        s->compact |= p->statement.kind() == ql::StatementKind::compact;
        s->parsed.push_back(std::move(p));
    }
    if (node.options().slow_ms) call->shape = statement_shape(s->bodies.front().query);
    if (auto r = scope_refusal(node, *call, s->parsed)) return node.answer(*call, std::move(*r));
    ReadAfter ra;
    if (auto r = read_after_headers(node, *call, ra)) return node.answer(*call, std::move(*r));
    count_statements(node, *s);
    if (!s->writes) return run_reads(node, call, t, s, ra);

    if (ra.after) return node.answer(*call, node.refusal(400, "Fenec-After is for reads; this request writes"));
    Tenant::WriteTicket ticket = t->admit_write();  // until answered (§8.2)
    if (auto r = write_refusal(node, *t)) return node.answer(*call, std::move(*r));
    // `compact` lands no block, so there is nothing a key could record and answer again: said as
    // the key's refusal (the executor's "runs alone" named the statement, not the key).
    if (s->compact && call->request.head.header("Idempotency-Key")) {
        return node.answer(
            *call,
            node.refusal(400, s->parsed.size() > 1 ? "a batch holding `compact` lands statement by "
                                                     "statement and takes no Idempotency-Key"
                                                   : "`compact` lands no block, so it takes no "
                                                     "Idempotency-Key: send it without one"));
    }
    if (s->compact && s->parsed.size() > 1) {
        return run_one_by_one(node, *call, *t, *s);
    }
    if (ra.wait_ms && *ra.wait_ms > 0) {
        if (auto r = held_refusal(node, *s)) return node.answer(*call, std::move(*r));
        return run_held(node, call, t, s, static_cast<int64_t>(*ra.wait_ms));
    }
    std::optional<http::Response> refusal;
    std::optional<KeyedWrite> key = begin_key(node, *call, *t, refusal);
    if (refusal) return node.answer(*call, std::move(*refusal));
    const uint64_t before = s->compact ? t->db().usage().file_bytes : 0;
    // Answered once an fsync covers it, the worker going on meanwhile (answer_write_durable).
    ql::BlockOutcome o = run_keyed(node, *call, *t, *s, key, false, defer_durable(node, key));
    if (s->compact) count_compact(node, *t, before, o);
    if (key) finish_key(*t, *key, !o.error);
    const std::optional<BatchPlace> place =
        s->batch ? std::optional(BatchPlace{0, o.failed_at}) : std::nullopt;
    answer_write_durable(node, call, *t, std::move(o), [&](const ql::BlockOutcome& r) {
        return outcome_response(node, *t, r, s->batch);
    }, place, std::move(ticket));
}

}  // namespace fenec::node
