// server/node/subscriptions.cc: one stream's life: cursor, seed, changes, keepalive, end.
//
// The rows of an event are read through FenecQL: the shape's own `get` statement (rest_filter's
// build_statement) with `_id in (the ids the block touched)` added, so a row is in the shape
// exactly when the REST list would answer it. `puts` are the rows it returns (whole and
// current); `dels` the touched ids this stream had sent that it no longer returns. A resumed
// stream has sent nothing: it takes the shape as it stands for sent, and reseeds when a change
// after its cursor took a row out of the shape that the subscriber may hold (resume_locked).
#include "server/node/subscriptions.h"

#include <algorithm>
#include <charconv>

#include "ql/answer.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "server/node/handlers.h"
#include "server/node/jwt.h"
#include "server/node/quota.h"
#include "server/node/rest_filter.h"

namespace fenec::node {

namespace {

// An event's id is its seq and the history it was sent on, `<seq>-<16 hex>`: what a browser's
// EventSource sends back as Last-Event-ID when it reconnects. With the seq alone, a cursor from a
// primary lost after it wrote past what its replica held was resumed on the promoted copy, whose
// own writes took those seqs: the client kept rows that were never written there and missed
// the ones that were.
// Whether this copy's `h` holds seq `cursor` of history `of`: `of` is its current history, or
// one it forked from at or after `cursor` (node-http.md §5.4: "a history whose fork does not hold
// it" reseeds).
bool holds(const engine::History& h, uint64_t of, uint64_t cursor) {
    for (size_t k = 0; k < h.forks.size(); ++k) {
        if (h.forks[k].history.v != of) continue;
        return k + 1 == h.forks.size() || cursor <= h.forks[k + 1].seq.v;
    }
    return false;
}

// A cursor: `<seq>` or an event's id, `<seq>-<16 hex>`.
struct Cursor {
    uint64_t seq = 0;
    std::optional<uint64_t> history;
};
std::optional<Cursor> parse_cursor(std::string_view text) {
    Cursor c;
    const size_t dash = text.find('-');
    std::optional<uint64_t> seq = parse_decimal(text.substr(0, dash));
    if (!seq) return std::nullopt;
    c.seq = *seq;
    if (dash != std::string_view::npos) {
        c.history = engine::format::parse_hex16(text.substr(dash + 1));
        if (!c.history) return std::nullopt;
    }
    return c;
}

std::string event(std::string_view name, std::optional<uint64_t> id, uint64_t history,
                  std::string_view data) {
    std::string out = "event: ";
    out += name;
    out += '\n';
    if (id) out += "id: " + std::to_string(*id) + "-" + engine::format::hex16(history) + "\n";
    out += "data: ";
    out += data;
    out += "\n\n";
    return out;
}

}  // namespace

class Subscription final : public ChangeWatcher, public std::enable_shared_from_this<Subscription> {
  public:
    Subscription(Node& node, Subscriptions& owner, std::shared_ptr<Call> call,
                 std::shared_ptr<Tenant> tenant, std::string collection, RestQuery shape)
        : node_(node),
          owner_(owner),
          call_(std::move(call)),
          tenant_(std::move(tenant)),
          collection_(std::move(collection)),
          shape_(std::move(shape)) {}

    // Seeds (or resumes from `cursor`) and starts following. On the worker that opened it.
    void begin(std::optional<uint64_t> cursor, std::optional<uint64_t> history) {
        std::lock_guard lock(mu_);
        last_write_ms_ = node_.now_ms();
        if (!resolve_locked()) return;
        const uint64_t seq = tenant_->db().seq().v;
        std::vector<ChangeEntry> entries;
        const bool resumable = cursor && *cursor <= seq &&
                               (!history || holds(tenant_->db().history(), *history, *cursor)) &&
                               tenant_->changes_after(engine::Seq{*cursor}, entries);
        if (!resumable) {
            if (cursor) node_.counters().reseeds->inc();
            seed_locked();
            return;
        }
        resume_locked(*cursor);
    }

    void wake() override {
        if (ended_ || scheduled_.exchange(true)) return;
        auto self = shared_from_this();
        if (!node_.submit_task([self] {
                self->scheduled_ = false;
                std::lock_guard lock(self->mu_);
                self->pump_locked();
            })) {
            scheduled_ = false;  // the next tick wakes it again
        }
    }

    // Once a second, from the node's ticker.
    void tick(int64_t now_ms) {
        std::lock_guard lock(mu_);
        if (ended_) return;
        // The door's judgement (auth::expired, with the skew): a stream ended at `exp` itself
        // was admitted inside the skew, seeded, and cut at once, and an EventSource client came
        // back for a seed in a loop.
        if (call_->who.credential == auth::Credential::jwt && auth::expired(call_->who, now_ms)) {
            return end_locked("expired", "the JWT expired", 401);
        }
        if (now_ms - last_write_ms_ >= int64_t{node_.options().keepalive_s} * 1000) {
            send_locked(": keepalive\n\n");
        }
        if (position_ < tenant_->visible_seq().v) {
            scheduled_ = false;
            pump_locked();  // a wake lost to a full pool
        }
    }

    void end(std::string_view reason, std::string_view message) {
        std::lock_guard lock(mu_);
        end_locked(reason, message, 0);
    }

    const std::string& tenant_name() const { return tenant_->name(); }
    bool ended() const { return ended_.load(); }

  private:
    // The collection's id as it stands, and its schema into `schema` when given; false (the
    // stream ended `dropped`) when it is gone.
    bool resolve_locked(engine::Schema* schema = nullptr) {
        engine::ReadView view = tenant_->db().read();
        engine::Result<engine::CollectionId> c = view.find(collection_);
        if (!c.is_ok()) {
            end_locked("dropped", "collection `" + collection_ + "` was dropped", 0);
            return false;
        }
        collection_id_ = *c;
        if (schema) *schema = *view.schema(*c);
        return true;
    }

    // A resume (§5.4): the subscriber holds the shape as it stood at `cursor`, which this stream
    // never sent. A row in the shape now is put again by the changes that touched it; a row
    // touched after the cursor and not in the shape now was deleted or left it, and the
    // subscriber holds it if the shape held it before. The ring keeps no before-image to judge
    // that by, so such a row reseeds rather than be dropped (a client would keep it for good) or
    // named unjudged (which would name rows the shape never held). The shape is read first and
    // the changes after it, so every change up to the read is judged.
    void resume_locked(uint64_t cursor) {
        std::string rows;
        std::set<uint64_t> now;
        uint64_t read_seq = 0;
        if (!query_locked({}, rows, now, &read_seq)) return;
        std::vector<ChangeEntry> entries;
        if (!tenant_->changes_after(engine::Seq{cursor}, entries)) {
            node_.counters().reseeds->inc();
            return seed_locked();  // the ring moved past the cursor meanwhile
        }
        std::vector<uint64_t> touched;
        for (const ChangeEntry& e : entries) {
            if (e.last.v <= read_seq) collect(e, touched);
        }
        for (uint64_t id : touched) {
            if (!now.contains(id)) {
                node_.counters().reseeds->inc();
                return seed_locked();
            }
        }
        sent_ = std::move(now);
        position_ = cursor;
        pump_locked();
    }

    void collect(const ChangeEntry& e, std::vector<uint64_t>& ids) const {
        for (const engine::CollectionChange& c : e.changes) {
            if (c.collection.v != collection_id_.v) continue;
            for (engine::DocId id : c.put) ids.push_back(id.v);
            for (engine::DocId id : c.deleted) ids.push_back(id.v);
        }
    }

    // Runs the shape, limited to `ids` when given; `rows` gets its JSON array, `in` its ids.
    bool query_locked(const std::vector<uint64_t>& ids, std::string& rows, std::set<uint64_t>& in,
                      uint64_t* seq = nullptr) {
        RestQuery q = shape_;
        if (!ids.empty()) {
            Condition c;
            c.field = "_id";
            c.op = FilterOp::in;
            for (uint64_t id : ids) c.values.push_back(std::to_string(id));
            q.conditions.push_back(std::move(c));
        }
        engine::Schema schema;
        if (!resolve_locked(&schema)) return false;
        auto st = build_statement(q, collection_, schema);
        if (!st) {
            end_locked("dropped",
                       "the shape no longer fits " + collection_ + ": " + st.error().message, 0);
            return false;
        }
        ql::QlResult<ql::ParsedStatement> parsed = ql::parse(st->text);
        if (!parsed) {
            end_locked("closing", "the shape did not parse: " + parsed.error().message, 0);
            return false;
        }
        ql::Executor ex(tenant_->db(), tenant_->indexes());
        ql::Item item{&parsed.value(), st->params};
        ql::BlockOutcome o =
            ex.run_block(std::span(&item, 1), ql::RunOptions{.budget = statement_budget(node_)});
        if (o.error) {
            if (o.error->budget != ql::BudgetKind::none) {
                node_.counters()
                    .over_budget->with({std::string(ql::budget_name(o.error->budget))})
                    .inc();
            }
            end_locked("closing", o.error->message, 0);
            return false;
        }
        // Nothing is sent before it is durable (INVARIANTS N22): a row as a later block left it
        // could be taken back by a power cut, and the subscriber would hold it under a cursor
        // that then names other data.
        if (engine::Status synced = tenant_->wait_visible(o.seq); !synced.is_ok()) {
            end_locked("closing", synced.to_string(), 0);
            return false;
        }
        const ql::Answer& a = o.answers.front();
        rows = ql::rows_json(a.table);
        const auto& cols = *a.table.columns;
        const size_t id_col = std::find(cols.begin(), cols.end(), "_id") - cols.begin();
        for (const ql::Row& r : a.table.rows) {
            if (id_col < r.cells.size()) {
                if (const auto* v = std::get_if<int64_t>(&r.cells[id_col].rep))
                    in.insert(static_cast<uint64_t>(*v));
            }
        }
        if (seq) *seq = o.seq.v;
        return true;
    }

    void seed_locked() {
        sent_.clear();
        std::string rows;
        uint64_t seq = 0;
        if (!query_locked({}, rows, sent_, &seq)) return;
        position_ = seq;
        std::string data = "{\"seq\":" + std::to_string(seq) + ",\"history\":\"" +
                           engine::format::hex16(tenant_->db().history().current().v) +
                           "\",\"rows\":" + rows + "}";
        send_locked(event("seed", seq, tenant_->db().history().current().v, data));
    }

    void pump_locked() {
        if (ended_) return;
        std::vector<ChangeEntry> entries;
        if (!tenant_->changes_after(engine::Seq{position_}, entries)) {
            node_.counters().reseeds->inc();
            return seed_locked();  // fell behind the ring
        }
        for (const ChangeEntry& e : entries) {
            if (ended_) return;
            bool schema_changed = false;
            for (const engine::CollectionChange& c : e.changes) {
                schema_changed |= c.collection.v == collection_id_.v && c.schema_changed;
            }
            if (schema_changed) {
                node_.counters().reseeds->inc();
                return seed_locked();
            }
            std::vector<uint64_t> touched;
            collect(e, touched);
            position_ = e.last.v;
            if (touched.empty()) continue;
            std::sort(touched.begin(), touched.end());
            touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
            std::string rows;
            std::set<uint64_t> in;
            if (!query_locked(touched, rows, in)) return;
            std::string dels;
            for (uint64_t id : touched) {
                if (in.contains(id)) continue;
                if (sent_.erase(id)) dels += (dels.empty() ? "" : ",") + std::to_string(id);
            }
            sent_.insert(in.begin(), in.end());
            if (in.empty() && dels.empty()) continue;
            send_locked(event("change", e.last.v, tenant_->db().history().current().v,
                              "{\"seq\":" + std::to_string(e.last.v) + ",\"puts\":" + rows +
                                  ",\"dels\":[" + dels + "]}"));
        }
    }

    void send_locked(std::string bytes) {
        if (ended_) return;
        last_write_ms_ = node_.now_ms();
        if (!call_->exchange->write(std::move(bytes))) {
            // Gone, or 1 MiB unread (§5.4 `slow`): nothing more can reach this reader.
            ended_ = true;
            node_.counters()
                .subscriptions_ended->with({call_->exchange->closed() ? "closed" : "slow"})
                .inc();
            call_->exchange->end();
            finish();
        }
    }

    void end_locked(std::string_view reason, std::string_view message, int status) {
        if (ended_) return;
        std::string data;
        json::Writer w(data);
        w.begin_object();
        w.key("error");
        w.string(message);
        w.key("reason");
        w.string(reason);
        if (status) {
            w.key("status");
            w.int64(status);
        }
        w.end_object();
        send_locked(event("error", std::nullopt, 0, data));
        if (ended_) return;
        ended_ = true;
        node_.counters().subscriptions_ended->with({reason}).inc();
        call_->exchange->end();
        finish();
    }

    void finish() {
        tenant_->unwatch(this);
        tenant_->streams.fetch_sub(1);
        auto self = shared_from_this();
        // Leaves the set on a worker (this runs under the stream's lock, and the set may hold
        // its last reference); were the pool full, the next tick sweeps it out.
        (void)node_.submit_task([self, &owner = owner_] { owner.remove(self.get()); });
    }

    Node& node_;
    Subscriptions& owner_;
    std::shared_ptr<Call> call_;
    std::shared_ptr<Tenant> tenant_;
    const std::string collection_;
    const RestQuery shape_;
    engine::CollectionId collection_id_{};

    std::mutex mu_;
    uint64_t position_ = 0;    // the last seq this stream has accounted for
    std::set<uint64_t> sent_;  // ids in the shape as this stream last told it
    int64_t last_write_ms_ = 0;
    std::atomic<bool> ended_{false};  // written under mu_; read without it by wake() and the sweep
    std::atomic<bool> scheduled_{false};
};

void Subscriptions::open(const std::shared_ptr<Call>& call, const std::shared_ptr<Tenant>& tenant) {
    const http::RequestHead& h = call->request.head;
    if (h.header("Fenec-After") || h.header("Fenec-History")) {
        return node_.answer(*call,
                            node_.refusal(400, "a subscription takes `since`, not Fenec-After"));
    }
    // A copy latched by a failed write is about to be closed and opened again (Node::tick), which
    // a subscription would hold off for good: asked again after its Retry-After, it opens on the
    // reopened file.
    if (tenant->db().failure()) return node_.answer(*call, latched_refusal(node_, tenant->name()));
    // The shape: §5.3's filters and select; the cursor keys are the stream's own.
    QueryPairs pairs;
    std::optional<std::string> since, history;
    for (const auto& [k, v] : h.query) {
        if (k == "since")
            since = v;
        else if (k == "history")
            history = v;
        else
            pairs.emplace_back(k, v);
    }
    auto shape = parse_rest_query(pairs, true);
    if (!shape)
        return node_.answer(*call, node_.refusal(shape.error().status, shape.error().message));
    std::optional<uint64_t> cursor;
    std::optional<uint64_t> hist;
    if (since) {
        std::optional<Cursor> c = parse_cursor(*since);
        if (!c) {
            return node_.answer(*call, node_.refusal(400,
                                                     "since must be a decimal seq or an "
                                                     "event's id (<seq>-<16 hex>)"));
        }
        cursor = c->seq;
        hist = c->history;
    } else if (auto last = h.header("Last-Event-ID")) {
        std::optional<Cursor> c = parse_cursor(*last);
        if (!c) {
            return node_.answer(*call, node_.refusal(400,
                                                     "Last-Event-ID must be an event's id "
                                                     "(<seq>-<16 hex>) or a decimal seq"));
        }
        cursor = c->seq;
        hist = c->history;
    }
    if (history) {  // history= goes with the cursor; one the cursor names too must be the same
        std::optional<uint64_t> given = engine::format::parse_hex16(*history);
        if (!given) return node_.answer(*call, node_.refusal(400, "history must be 16 hex digits"));
        if (hist && *hist != *given) {
            return node_.answer(*call, node_.refusal(400,
                                                     "history= names another history than "
                                                     "the cursor's id"));
        }
        hist = given;
    }
    const std::string& coll = call->rest[1];
    {
        engine::ReadView view = tenant->db().read();
        engine::Result<engine::CollectionId> c = view.find(coll);
        if (!c.is_ok() || coll.starts_with("_")) {
            return node_.answer(*call, node_.refusal(404, "no collection `" + coll + "`"));
        }
        // The shape's fields must be the collection's (404 naming one that is not).
        auto st = build_statement(shape.value(), coll, *view.schema(*c));
        if (!st) return node_.answer(*call, node_.refusal(st.error().status, st.error().message));
    }
    auto sub =
        std::make_shared<Subscription>(node_, *this, call, tenant, coll, std::move(shape.value()));
    {
        // The limits are checked and the stream counted under one lock, so opens racing each
        // other cannot pass them.
        std::lock_guard lock(mu_);
        if (subs_.size() >= node_.options().max_streams) {
            return node_.answer(*call,
                                node_.refusal(503,
                                              "the node is at --max-streams (" +
                                                  std::to_string(node_.options().max_streams) + ")",
                                              "streams"));
        }
        if (auto refused = streams_refusal(node_, *tenant)) {
            return node_.answer(*call, std::move(*refused));
        }
        if (tenant->streams.load() >= node_.options().tenant_streams) {
            return node_.answer(
                *call, node_.refusal(429,
                                     "tenant `" + tenant->name() + "` is at --tenant-streams (" +
                                         std::to_string(node_.options().tenant_streams) + ")",
                                     {}, [](json::Writer& w) {
                                         w.key("limit");
                                         w.string("tenant_streams");
                                     }));
        }
        tenant->streams.fetch_add(1);
        subs_.insert(sub);
    }
    node_.counters().subscriptions->add(1);
    http::Response head;
    head.stream = true;
    head.content_type = "text/event-stream";
    head.header("Cache-Control", "no-cache, no-transform");
    head.header("X-Accel-Buffering", "no");
    head.close = true;
    node_.answer(*call, std::move(head));
    std::weak_ptr<Subscription> weak = sub;
    call->exchange->on_close([weak] {
        if (auto s = weak.lock()) s->end("closed", "the client went away");
    });
    tenant->watch(sub);
    sub->begin(cursor, hist);
}

void Subscriptions::remove(const Subscription* s) {
    std::shared_ptr<Subscription> gone;
    {
        std::lock_guard lock(mu_);
        for (auto it = subs_.begin(); it != subs_.end(); ++it) {
            if (it->get() == s) {
                gone = *it;
                subs_.erase(it);
                break;
            }
        }
    }
    if (!gone) return;
    node_.counters().subscriptions->add(-1);
    gone->end("closed", "");  // already ended: a no-op; its tenant reference goes with `gone`
}

void Subscriptions::tick() {
    std::vector<std::shared_ptr<Subscription>> all;
    {
        std::lock_guard lock(mu_);
        all.assign(subs_.begin(), subs_.end());
    }
    const int64_t now = node_.now_ms();
    for (const auto& s : all) {
        if (s->ended()) {
            remove(s.get());  // ended with its removal lost to a full pool
        } else {
            s->tick(now);
        }
    }
}

void Subscriptions::end_all(std::string_view reason) {
    std::vector<std::shared_ptr<Subscription>> all;
    {
        std::lock_guard lock(mu_);
        all.assign(subs_.begin(), subs_.end());
    }
    for (const auto& s : all) s->end(reason, "the node is stopping");
}

void Subscriptions::end_tenant(const std::string& tenant, std::string_view reason) {
    std::vector<std::shared_ptr<Subscription>> all;
    {
        std::lock_guard lock(mu_);
        for (const auto& s : subs_) {
            if (s->tenant_name() == tenant) all.push_back(s);
        }
    }
    for (const auto& s : all) s->end(reason, "tenant `" + tenant + "` is gone from this node");
}

size_t Subscriptions::count() const {
    std::lock_guard lock(mu_);
    return subs_.size();
}

}  // namespace fenec::node
