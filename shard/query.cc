// shard/query.cc: `POST /_shard/query`, the query across tenants (router.md §12): the request
// read and checked, the tenants of the directory's snapshot asked through their nodes' read-only
// `POST /_admin/tenants/<t>/query` with the node's admin token, --fanout-concurrency at once over
// the pooled upstream connections, the tenants taken node by node in turn (a tenant another
// directory keeps, of a region keeping its own or on a region's router the global directory's,
// failed 421 from the start: §12.4.1); each answer prepared
// for the merge (shard/merge.h) on the upstream loop thread that fetched it, beside the calls
// still out; the limits counted as answers arrive; then the merge, the status, a span per query
// and per node (§16), the metrics and one audit line.
//
// The router parses no FenecQL and reads no schema: the statement and its parameters go to every
// tenant as they came; how rows combine is said in the request.
//
// Threads: serve_query runs on the client's server loop and never waits: the calls start there
// (Upstream::start runs a call on the loop that starts it), each answer is prepared in its call's
// callback on that loop, and the callback that ends the query merges and answers, so a query
// crosses no thread. A Fanout's state is under its mutex all the same (a call cancelled past a
// limit, or one started off a loop, ends elsewhere); a callback that comes after the query
// ended finds `finished_` and drops its answer.
#include <simdjson.h>

#include <cassert>
#include <deque>
#include <functional>
#include <map>
#include <mutex>

#include "engine/format.h"
#include "engine/hash.h"
#include "json/writer.h"
#include "server/obs/audit.h"
#include "server/runtime/mark.h"
#include "shard/global_copy.h"
#include "shard/merge.h"
#include "shard/router.h"
#include "shard/routes.h"
#include "shard/upstream.h"

namespace fenec::shard {

namespace {

using Response = http::Response;

// prepare_tenant parses a node's answer where it lies when the body has simdjson's padding.
static_assert(simdjson::SIMDJSON_PADDING <= server::answer_body_spare_bytes);

// A node's calls are re-asked at most this often when the directory moved its tenant (§12.4.5).
constexpr int reasks_max = 2;

struct Failure {
    std::string tenant;
    std::string node;
    int status = 0;
    std::string why;
};

struct Job {
    uint32_t tenant = 0;  // index in name order
    std::string node;
    int asks = 0;  // re-asks before this one
};

// A node's span (§16): its calls and failures, from its first call to its last answer.
struct NodeSpan {
    std::string span_id;
    int64_t start_wall_ms = 0;
    uint64_t start_ms = 0;
    uint64_t end_ms = 0;
    int calls = 0;
    int failures = 0;
    // The query's request to the node but for the tenant's name, which goes between the two:
    // every call of the query to one node sends the same head (its token, Fenec-Router's keyed
    // mark, traceparent) and body, so they are written once, not per call. Made for the node's
    // token and address kept beside them; made again should the directory change them.
    std::string request_before;
    std::string request_after;
    std::string made_token;
    std::string made_addr;
};

// The one place a tenant's name stands in the request line: never a tenant's (not [a-z0-9_-]).
constexpr std::string_view tenant_slot = "{tenant}";

uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

}  // namespace

class Fanout : public std::enable_shared_from_this<Fanout> {
  public:
    Fanout(Router& router, MergeSpec spec)
        : router_(router),
          spec_(std::move(spec)),
          calls_ok_(router.metrics().fanout_calls->with({"ok"})) {}

    // Set before start().
    bool partial = false;
    uint64_t timeout_ms = 0;
    std::string node_body;  // {"query":…,"params":…}
    std::string request_id;
    std::string client;    // the asking client's address, for Fenec-Router
    std::string trace_id;  // "" when not traced
    uint64_t random = 0;
    std::vector<std::string> names;                   // the tenants, name order
    std::deque<Job> queue;                            // calls not yet made, in call order
    std::shared_ptr<const DirectoryMaps> maps;        // the directory as last looked at
    std::shared_ptr<const DirectoryMaps> first_maps;  // as the query began

    // Asks every tenant (or until the first failure without `partial`, or a limit); returns once
    // every call out has ended, or at once past a limit.
    // Starts asking; `done` runs once, on the thread that ends the query (the last answer's, one
    // past a limit's, or this one when there is nothing to ask), without the lock held.
    void start(std::function<void(Fanout&)> done) {
        inputs_.resize(names.size());  // never resized again: the order merge points into it
        answered_.assign(names.size(), false);
        if (spec_.kind == MergeKind::order) order_.emplace(spec_);
        done_ = std::move(done);
        std::unique_lock lock(mu_);
        launch(lock);
    }

    // §12.4.1: a tenant another directory places, a failure from the start, never asked. Without
    // `partial` nothing is asked after it.
    void elsewhere(std::string tenant, std::string node, std::string why) {
        names.push_back(tenant);
        failures.push_back({std::move(tenant), std::move(node), 421, std::move(why)});
        ++kept_elsewhere;
        if (!partial) stop_ = true;
    }

    // Read in `done`.
    size_t kept_elsewhere = 0;  // tenants failed by elsewhere(): neither asked nor left unasked
    std::vector<TenantInput> inputs_;
    std::vector<bool> answered_;
    std::vector<Failure> failures;
    std::map<std::string, NodeSpan> spans;
    size_t asked = 0;
    uint64_t rows = 0;
    uint64_t bytes = 0;
    std::string limit;  // "rows" or "bytes" when one was passed

    // The order merge of every answer taken (empty unless an order), once the query has ended.
    std::vector<MergedRow> take_order() {
        return order_ ? order_->finish() : std::vector<MergedRow>{};
    }

    void on_answer(const Job& job, server::Answer answer) {
        const uint64_t body_bytes = answer.body.size();
        if (answer.status == 200) {
            TenantInput in;
            std::string why;
            const bool fits = prepare_tenant(spec_, std::move(answer.body), in, why);
            std::unique_lock lock(mu_);
            if (finished_) return;
            ended(job);
            bytes += body_bytes;
            if (!fits) {
                fail(job, 502, why, "misfit");
            } else {
                assert(!answered_[job.tenant] &&
                       "a tenant answers once: its input is pointed into");
                rows += in.rows.size();
                inputs_[job.tenant] = std::move(in);
                answered_[job.tenant] = true;
                // Merged now, between answers, rather than all at the end (OrderMerge).
                if (order_) order_->add(job.tenant, inputs_[job.tenant]);
                calls_ok_.inc();
            }
            return settle(lock);
        }
        const std::string why = node_error(answer.body, answer.status);
        std::unique_lock lock(mu_);
        if (finished_) return;
        ended(job);
        bytes += body_bytes;
        if (answer.status == 404) return relookup(lock, job, 404, why, "refused");
        fail(job, answer.status, why, "refused");
        settle(lock);
    }

    void on_failure(const Job& job, server::CallError error) {
        std::unique_lock lock(mu_);
        if (finished_) return;
        ended(job);
        switch (error.failure) {
            case server::CallFailure::too_large:
                limit = "bytes";
                return settle(lock);
            case server::CallFailure::timeout:
                fail(job, 504, std::move(error.message), "timeout");
                return settle(lock);
            case server::CallFailure::unreachable:
                // A node that does not take the connection may no longer hold the tenant.
                return relookup(lock, job, 502, std::move(error.message), "unreachable");
            case server::CallFailure::may_have_run:
            case server::CallFailure::cut:
            case server::CallFailure::cancelled:
                fail(job, 502, std::move(error.message), "unreachable");
                return settle(lock);
        }
    }

  private:
    // The node's own error text, or its status said.
    static std::string node_error(const std::string& body, int status) {
        simdjson::dom::parser p;
        std::string_view e;
        simdjson::dom::element doc;
        if (!p.parse(body).get(doc) && !doc["error"].get_string().get(e)) return std::string(e);
        return "the node answered " + std::to_string(status);
    }

    void ended(const Job& job) {
        --out_;
        NodeSpan& s = spans[job.node];
        s.end_ms = router_.now_ms();
    }

    void fail(const Job& job, int status, std::string why, std::string_view outcome) {
        failures.push_back({names[job.tenant], job.node, status, std::move(why)});
        ++spans[job.node].failures;
        router_.metrics().fanout_calls->with({outcome}).inc();
        if (!partial) stop_ = true;
    }

    // §12.4.5: a 404 or a refused connection is looked up in the current directory.
    void relookup(std::unique_lock<std::mutex>& lock, const Job& job, int status, std::string why,
                  std::string_view outcome) {
        auto now = router_.directory().maps();
        auto t = now->tenants.find(names[job.tenant]);
        if (t == now->tenants.end()) {
            fail(job, 404, "deleted while the query ran", outcome);
        } else if (t->second.node != job.node && job.asks < reasks_max &&
                   now->nodes.contains(t->second.node)) {
            router_.metrics().fanout_calls->with({"asked_again"}).inc();
            maps = now;
            queue.push_front({job.tenant, t->second.node, job.asks + 1});
        } else {
            fail(job, status, std::move(why), outcome);
        }
        settle(lock);
    }

    // After an answer: past a limit the query ends now; else more calls, or the end.
    void settle(std::unique_lock<std::mutex>& lock) {
        if (limit.empty() && rows > router_.options().fanout_max_rows) limit = "rows";
        if (limit.empty() && bytes > router_.options().fanout_max_bytes) limit = "bytes";
        if (!limit.empty()) {
            finished_ = true;
            auto calls = std::move(calls_);
            lock.unlock();
            for (auto& weak : calls) {  // abandoned: their connections closed
                if (auto c = weak.lock()) c->cancel();
            }
            return end();
        }
        launch(lock);
    }

    // Starts calls up to the concurrency; ends the query when nothing is out or left to ask.
    void launch(std::unique_lock<std::mutex>& lock) {
        std::vector<Job> go;
        const size_t concurrency = router_.options().fanout_concurrency;
        while (!stop_ && out_ < concurrency && !queue.empty()) {
            Job job = std::move(queue.front());
            queue.pop_front();
            if (job.asks == 0) ++asked;
            if (!find_node(job.node)) {  // a directory whose tenant names a node it lacks
                fail(job, 502, "placed on node `" + job.node + "`, which is not in the directory",
                     "unreachable");
                continue;
            }
            ++out_;
            go.push_back(std::move(job));
        }
        if (stop_) {
            // Stopped at a failure: a tenant found moved and queued to be asked again (asked
            // once, so counted asked) is a failure too, or it would be in no count at all.
            for (auto it = queue.begin(); it != queue.end();) {
                if (it->asks == 0) {
                    ++it;
                    continue;
                }
                fail(*it, 503,
                     "moved to node `" + it->node +
                         "` while the query ran, and not asked there: the query stopped at a "
                         "failure",
                     "refused");
                it = queue.erase(it);
            }
        }
        if (go.empty() && out_ == 0) {
            finished_ = true;
            lock.unlock();
            return end();
        }
        const uint64_t room = router_.options().fanout_max_bytes -
                              std::min(bytes, router_.options().fanout_max_bytes);
        std::vector<std::pair<Job, server::CallRequest>> requests;
        for (Job& job : go) {
            NodeSpan& s = spans[job.node];
            if (s.calls++ == 0) {
                random = mix(random + 0x9e3779b97f4a7c15ull);
                s.span_id = obs::span_id(random);
                s.start_wall_ms = router_.wall_ms();
                s.start_ms = router_.now_ms();
            }
            server::CallRequest r = request(job, s);
            r.body_bytes_max = std::max<uint64_t>(room, 1);
            requests.emplace_back(std::move(job), std::move(r));
        }
        lock.unlock();
        std::vector<std::weak_ptr<server::RingCall>> started;
        for (auto& [job, r] : requests) {
            started.push_back(router_.upstream().start(
                std::move(r), std::make_shared<Sink>(shared_from_this(), std::move(job))));
        }
        lock.lock();
        for (auto& c : started) calls_.push_back(std::move(c));
    }

    void end() {
        auto done = std::move(done_);  // the callback holds this Fanout: let go of it after
        done_ = nullptr;
        done(*this);
    }

    // A node by name in the directory as last looked at, else as the query began.
    const NodeRow* find_node(const std::string& name) const {
        for (const DirectoryMaps* m : {maps.get(), first_maps.get()}) {
            if (!m) continue;
            auto it = m->nodes.find(name);
            if (it != m->nodes.end()) return &it->second;
        }
        return nullptr;
    }

    server::CallRequest request(const Job& job, NodeSpan& span) {
        const NodeRow& node = *find_node(job.node);
        if (span.request_before.empty() || span.made_token != node.token ||
            span.made_addr != node.addr) {
            write_request_parts(node, span);
        }
        server::CallRequest r = to_node(node);
        r.about = names[job.tenant];
        r.resend_after_sent = true;  // a read-only statement: asking twice is harmless
        r.queue_send = true;         // many calls at once: see CallRequest::queue_send
        r.timeout_ms = timeout_ms;
        const std::string& name = names[job.tenant];
        r.bytes.reserve(span.request_before.size() + name.size() + span.request_after.size());
        r.bytes.append(span.request_before).append(name).append(span.request_after);
        return r;
    }

    // The node's request with tenant_slot for the tenant, split at it (NodeSpan).
    void write_request_parts(const NodeRow& node, NodeSpan& span) const {
        const std::string mark = client + " " + server::router_mark(node.token, client, request_id);
        const std::string traceparent =
            trace_id.empty() ? "" : obs::format_traceparent({trace_id, span.span_id, true});
        const std::string target = "/_admin/tenants/" + std::string(tenant_slot) + "/query";
        http::OutRequest out{.method = "POST", .target = target, .body = node_body};
        out.headers = {{"Content-Type", "application/json"}, {"Fenec-Router", mark}};
        if (!traceparent.empty()) out.headers.push_back({"traceparent", traceparent});
        const std::string whole = admin_request(node, request_id, std::move(out));
        const size_t at = whole.find(tenant_slot);  // the request line comes first
        assert(at != std::string::npos && at < whole.find("\r\n"));
        span.request_before = whole.substr(0, at);
        span.request_after = whole.substr(at + tenant_slot.size());
        span.made_token = node.token;
        span.made_addr = node.addr;
    }

    class Sink final : public server::CallSink {
      public:
        Sink(std::shared_ptr<Fanout> f, Job job) : f_(std::move(f)), job_(std::move(job)) {}
        void on_answer(server::Answer answer) override { f_->on_answer(job_, std::move(answer)); }
        void on_failure(server::CallError error) override {
            f_->on_failure(job_, std::move(error));
        }
        bool on_data(std::string) override { return false; }
        void on_end() override {}

      private:
        std::shared_ptr<Fanout> f_;
        Job job_;
    };

    Router& router_;
    const MergeSpec spec_;
    obs::Counter& calls_ok_;
    std::optional<OrderMerge> order_;  // an order's merge, fed as the answers come
    std::mutex mu_;
    std::function<void(Fanout&)> done_;
    size_t out_ = 0;
    bool stop_ = false;
    bool finished_ = false;
    std::vector<std::weak_ptr<server::RingCall>> calls_;
};

// The request (§12.2), checked (§12.3).
struct QueryRequest {
    simdjson::dom::parser parser;
    std::string statement;
    std::string params = "[]";
    MergeSpec spec;
    bool partial = false;
    uint64_t timeout_ms = 0;
};

namespace {

// `r`'s JSON body gains `"key":"value"` as its last member.
void add_member(Response& r, std::string_view key, std::string_view value) {
    std::string quoted;
    json::Writer w(quoted);
    w.string(value);
    r.body.pop_back();
    r.body.append(",\"").append(key).append("\":").append(quoted).append("}");
}

std::optional<Response> read_request(const std::string& body, uint64_t timeout_max_ms,
                                     QueryRequest& q) {
    auto bad = [](std::string m) { return Router::error(400, std::move(m)); };
    simdjson::dom::element doc;
    simdjson::dom::object o;
    if (q.parser.parse(body).get(doc)) return bad("the body is not JSON");
    if (doc.get_object().get(o)) return bad("the body is not a JSON object");
    q.timeout_ms = timeout_max_ms;
    const simdjson::dom::element* merge = nullptr;
    simdjson::dom::element merge_e;
    for (auto field : o) {
        const std::string_view k = field.key;
        if (k == "statement") {
            std::string_view s;
            if (field.value.get_string().get(s) || s.empty()) {
                return bad("`statement` is a non-empty text: one FenecQL statement");
            }
            q.statement = std::string(s);
        } else if (k == "params") {
            if (!field.value.is_array()) return bad("`params` is an array");
            q.params = std::string(member_bytes(body, "params").value_or("[]"));
        } else if (k == "merge") {
            merge_e = field.value;
            merge = &merge_e;
        } else if (k == "partial") {
            if (field.value.get_bool().get(q.partial)) return bad("`partial` is true or false");
        } else if (k == "timeout") {
            double s = 0;
            if (field.value.get_double().get(s) || !(s > 0) ||
                s * 1000 > static_cast<double>(timeout_max_ms)) {
                return bad("`timeout` is seconds, above 0 and at most --upstream-timeout (" +
                           std::to_string(timeout_max_ms / 1000.0) + ")");
            }
            q.timeout_ms = std::max<uint64_t>(1, static_cast<uint64_t>(s * 1000));
        } else {
            return bad("unknown field `" + std::string(k) +
                       "`: the query takes statement, params, merge, partial and timeout");
        }
    }
    if (q.statement.empty()) return bad("`statement` is required: one FenecQL statement");
    if (auto refusal = parse_merge(merge, q.spec)) {
        Response r = Router::error(400, refusal->message);
        if (!refusal->member.empty()) add_member(r, refusal->member, refusal->value);
        return r;
    }
    return std::nullopt;
}

// §12.4.1: why a tenant another directory places is not asked here.
std::string kept_elsewhere_why(const std::string& region) {
    return region == "global" ? std::string("kept by the global directory: ask the global router")
                              : "at home in region `" + region +
                                    "`, which keeps its own directory: ask its router";
}

// §12.4.1, §12.4.2: the tenants the directory places, in call order: nodes by name, each node's
// tenants by name, node by node in turn. Every other tenant the router knows of fails from the
// start (Fanout::elsewhere): a global row `@<r>`, and on a region's router (`global` its copy of
// the global directory, `scope` its region) a tenant the global directory places outside it.
void call_order(const DirectoryMaps& maps, const DirectoryMaps* global, const std::string& scope,
                Fanout& f) {
    std::map<std::string, std::vector<uint32_t>> by_node;
    for (const auto& [name, t] : maps.tenants) {
        if (std::optional<std::string_view> home = home_region(t.node)) {
            f.elsewhere(name, t.node, kept_elsewhere_why(std::string(*home)));
            continue;
        }
        by_node[t.node].push_back(static_cast<uint32_t>(f.names.size()));
        f.names.push_back(name);
    }
    if (global) {
        for (const auto& [name, t] : global->tenants) {
            if (maps.tenants.contains(name)) continue;
            std::optional<std::string_view> home = home_region(t.node);
            if (home && *home == scope) continue;  // ours, its create not landed here yet
            f.elsewhere(name, t.node, kept_elsewhere_why(home ? std::string(*home) : "global"));
        }
    }
    for (size_t round = 0;; ++round) {
        bool any = false;
        for (const auto& [node, tenants] : by_node) {
            if (round >= tenants.size()) continue;
            any = true;
            f.queue.push_back({tenants[round], node, 0});
        }
        if (!any) break;
    }
}

void write_failures(json::Writer& w, const std::vector<Failure>& failures) {
    w.key("failures");
    w.begin_array();
    for (const Failure& f : failures) {
        w.begin_object();
        w.key("tenant");
        w.string(f.tenant);
        w.key("node");
        w.string(f.node);
        w.key("status");
        w.int64(f.status);
        w.key("why");
        w.string(f.why);
        w.end_object();
    }
    w.end_array();
}

// §12.8's counts: the tenants in the directory, those asked, those that answered.
void write_counts(json::Writer& w, const Fanout& f, size_t answered) {
    w.key("tenants");
    w.int64(static_cast<int64_t>(f.names.size()));
    w.key("asked");
    w.int64(static_cast<int64_t>(f.asked));
    w.key("answered");
    w.int64(static_cast<int64_t>(answered));
}

// §12.7: a limit passed, 413 naming it.
Response limit_answer(const Fanout& f, const RouterOptions& o) {
    const bool by_rows = f.limit == "rows";
    const uint64_t max = by_rows ? o.fanout_max_rows : o.fanout_max_bytes;
    Response r = Router::error(413, std::string("the tenants' answers passed ") +
                                        (by_rows ? "--fanout-max-rows (" : "--fanout-max-bytes (") +
                                        std::to_string(max) + ")");
    r.body.pop_back();
    r.body += ",\"limit\":\"" + f.limit + "\",\"max\":" + std::to_string(max) + "}";
    return r;
}

// §12.6: tenants failed and the query is not partial (or nothing answered): the tenants' own
// status where every tenant whose call ended failed alike, else 502.
Response failed_answer(const Fanout& f, size_t answered) {
    int status = f.failures.front().status;
    for (const Failure& x : f.failures) {
        if (x.status != status) status = 502;
    }
    if (answered > 0) status = 502;
    Response r;
    r.status = status;
    json::Writer w(r.body);
    w.begin_object();
    w.key("error");
    w.string(std::to_string(f.failures.size()) + " of " + std::to_string(f.names.size()) +
             " tenants failed");
    write_failures(w, f.failures);
    w.key("not_asked");
    w.int64(static_cast<int64_t>(f.names.size() - f.asked - f.kept_elsewhere));
    write_counts(w, f, answered);
    w.end_object();
    return r;
}

// §12.5, §12.8: the answers merged (or folded: a sum past 64 bits is refused), the rows each
// with its tenant, and the counts. `outcome` is "ok", "partial" or "refused".
Response rows_answer(Fanout& f, const QueryRequest& q,
                     const std::vector<const TenantInput*>& inputs, size_t answered,
                     uint64_t& rows_out, std::string& outcome) {
    std::string overflow;
    std::vector<std::string> folded;
    std::vector<MergedRow> merged;
    if (q.spec.kind == MergeKind::fold && !merge_fold(q.spec, inputs, folded, overflow)) {
        Response r =
            Router::error(400, "the sum of `" + overflow + "` does not fit a 64-bit integer");
        add_member(r, "column", overflow);
        outcome = "refused";
        return r;
    }
    if (q.spec.kind == MergeKind::concat) merged = merge_concat(inputs);
    if (q.spec.kind == MergeKind::order) merged = f.take_order();
    Response r;
    std::string& b = r.body;
    b.reserve(f.bytes + merged.size() * 32 + 256);
    json::Writer w(b);
    w.begin_object();
    w.key("merge");
    w.string(merge_name(q.spec.kind));
    w.key("rows");
    w.begin_array();
    // Each row `{"tenant":<name>,"row":<the node's bytes>}`, the same bytes the writer would
    // give, with a tenant's `{"tenant":<name>,"row":` quoted once rather than per row: the
    // writer places the comma before it, and the row and `}` go straight after.
    std::vector<std::string> heads(f.names.size());
    for (const MergedRow& m : merged) {
        std::string& head = heads[m.tenant];
        if (head.empty()) {
            json::Writer h(head);
            h.begin_object();
            h.key("tenant");
            h.string(f.names[m.tenant]);
            h.key("row");
        }
        w.raw(head);
        b.append(f.inputs_[m.tenant].rows[m.row]);
        b.push_back('}');
    }
    for (const std::string& row : folded) w.raw(row);
    w.end_array();
    rows_out = merged.size() + folded.size();
    write_counts(w, f, answered);
    write_failures(w, f.failures);
    w.key("not_asked");
    w.int64(static_cast<int64_t>(f.names.size() - f.asked - f.kept_elsewhere));
    w.end_object();
    outcome = f.failures.empty() ? "ok" : "partial";
    return r;
}

// §16: a span per node beneath the query's (`root_span`), its calls and failures.
void write_spans(obs::LineLog& trace, const Fanout& f, const std::string& request_id,
                 const std::string& root_span) {
    for (const auto& [node, s] : f.spans) {
        obs::Span span;
        span.trace_id = f.trace_id;
        span.span_id = s.span_id;
        span.parent_id = root_span;
        span.name = "fanout.node";
        span.start_ms = s.start_wall_ms;
        span.us = static_cast<int64_t>((s.end_ms - s.start_ms) * 1000);
        span.request_id = request_id;
        span.attrs.push_back(obs::JsonField{"fenec.node", node});
        span.attrs.push_back(obs::JsonField{"fenec.calls", s.calls});
        span.attrs.push_back(obs::JsonField{"fenec.failures", s.failures});
        trace.write(obs::span_line(span));
    }
}

}  // namespace

void Router::serve_query(const server::Request& request, std::shared_ptr<server::Exchange> exchange,
                         const Answering& a) {
    if (auto r = method_refusal(request.head)) return answer(*exchange, a, std::move(*r));
    const int64_t start_wall = wall_ms();
    auto q = std::make_shared<QueryRequest>();
    if (auto refused = read_request(request.body, options_.upstream_timeout_ms, *q)) {
        metrics_.fanouts->with({merge_name(q->spec.kind), "refused"}).inc();
        return answer(*exchange, a, std::move(*refused));
    }
    auto f = std::make_shared<Fanout>(*this, q->spec);
    f->partial = q->partial;
    f->timeout_ms = q->timeout_ms;
    {
        json::Writer w(f->node_body);
        w.begin_object();
        w.key("query");
        w.string(q->statement);
        w.key("params");
        w.raw(q->params);
        w.end_object();
    }
    f->request_id = a.request_id;
    f->client = peer_host(request.peer);
    f->random = mix(XXH3_64bits(a.request_id.data(), a.request_id.size()) ^ now_ms());
    std::string root_span;
    std::string parent_span;
    if (trace_) {
        auto tp = request.head.header("traceparent");
        auto parent = tp ? obs::parse_traceparent(*tp) : std::nullopt;
        f->random = mix(f->random + 1);
        const uint64_t lo = f->random;
        f->random = mix(f->random + 1);
        f->trace_id = parent ? parent->trace_id : obs::trace_id(f->random, lo);
        if (parent) parent_span = parent->parent_id;
        f->random = mix(f->random + 1);
        root_span = obs::span_id(f->random);
    }
    f->maps = directory_->maps();
    f->first_maps = f->maps;
    const GlobalCopy* global = global_copy();
    std::shared_ptr<const DirectoryMaps> global_maps = global ? global->maps() : nullptr;
    call_order(*f->maps, global_maps.get(), f->maps->scope, *f);
    const std::string peer = request.peer;
    // Started here, on the client's loop, the calls run on it (Upstream::start), and the last
    // answer's callback merges and answers: no thread hand-off in the whole query.
    f->start([this, q, exchange, a, peer, start_wall, root_span, parent_span](Fanout& done) {
        answer(*exchange, a, finish_query(done, *q, a, peer, start_wall, root_span, parent_span));
    });
}

Response Router::finish_query(Fanout& fanout, const QueryRequest& q, const Answering& a,
                              const std::string& peer, int64_t start_wall,
                              const std::string& root_span, const std::string& parent_span) {
    Fanout* f = &fanout;
    // The merge, over the tenants in name order.
    std::vector<const TenantInput*> inputs(f->names.size(), nullptr);
    size_t answered = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (f->answered_[i]) {
            inputs[i] = &f->inputs_[i];
            ++answered;
        }
    }
    const std::string_view merge = merge_name(q.spec.kind);
    Response r;
    std::string outcome;
    uint64_t rows_out = 0;
    if (!f->limit.empty()) {
        r = limit_answer(*f, options_);
        outcome = "too_large";
    } else if (!f->failures.empty() && (!q.partial || answered == 0)) {
        r = failed_answer(*f, answered);
        outcome = "failed";
    } else {
        r = rows_answer(*f, q, inputs, answered, rows_out, outcome);
    }
    const uint64_t end_ms = now_ms();
    metrics_.fanouts->with({merge, outcome}).inc();
    metrics_.fanout_duration->with({merge}).observe_us((end_ms - a.start_ms) * 1000);

    // §15: one audit line; the statement as its hash, never its text or parameters.
    if (audit_) {
        obs::AuditLine line;
        line.event = obs::AuditEvent::query;
        const auto count = [](size_t n) { return static_cast<int64_t>(n); };
        line.fields = {{"status", r.status},
                       {"merge", merge},
                       {"partial", q.partial},
                       {"tenants", count(f->names.size())},
                       {"asked", count(f->asked)},
                       {"failed", count(f->failures.size())},
                       {"not_asked", count(f->names.size() - f->asked - f->kept_elsewhere)},
                       {"rows", count(rows_out)},
                       {"bytes", count(f->bytes)},
                       {"ms", static_cast<int64_t>(end_ms - a.start_ms)},
                       {"statement", engine::format::hex16(
                                         XXH3_64bits(q.statement.data(), q.statement.size()))}};
        audit(std::move(line), peer, a.request_id);
    }

    // §16: the query's span, and one a node beneath it.
    if (trace_) {
        write_spans(*trace_, *f, a.request_id, root_span);
        obs::Span span;
        span.trace_id = f->trace_id;
        span.span_id = root_span;
        span.parent_id = parent_span;
        span.name = "POST /_shard/query";
        span.start_ms = start_wall;
        span.us = static_cast<int64_t>((end_ms - a.start_ms) * 1000);
        span.request_id = a.request_id;
        span.attrs.push_back(obs::JsonField{"fenec.merge", merge});
        span.attrs.push_back(
            obs::JsonField{"fenec.tenants", static_cast<int64_t>(f->names.size())});
        span.attrs.push_back(
            obs::JsonField{"fenec.failed", static_cast<int64_t>(f->failures.size())});
        span.attrs.push_back(obs::JsonField{"http.response.status_code", r.status});
        trace_->write(obs::span_line(span));
    }
    return r;
}

}  // namespace fenec::shard
