// server/node/replication.cc: the primary's side of a tenant's feed stream (node-http.md §10.2,
// §10.3), in the feed's frames (server/replication/frames.h): hello, an image when the follower's
// position is not on this copy's history or out of its feed, then every durable block, forks when
// they change, keep-alives, and an end.
#include "server/node/replication.h"

#include <simdjson.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <iostream>
#include <limits>
#include <system_error>

#include "engine/format.h"
#include "server/node/follower.h"
#include "server/node/handlers.h"
#include "server/node/routes.h"
#include "server/node/subscriptions.h"
#include "server/node/test_hooks.h"

namespace fenec::node {

namespace {

// Past its image, a stream's frame waits while this much is unsent: it keeps pace with its
// follower well inside the exchange's 1 MiB stream bound, which refuses past it.
constexpr size_t keep_unsent_below = 512 << 10;

}  // namespace

uint32_t feed_frame_bound() { return test_hooks::feed_frame_bytes(feed_frame_bytes_max); }

// One stream being served: what GET /_admin/tenants/<t> shows in `followers`.
struct Replication::Stream {
    std::string tenant;
    std::string peer;
    // The last seq handed to the kernel: its block's bytes sent to the follower's socket, so a
    // primary stopped or cut after it still delivers it (a write waits for it: wait_handed).
    std::atomic<uint64_t> sent{0};
    // Blocks written to the exchange and not yet sent: (the stream's byte count at the block's
    // end, its last seq). The stream thread appends; the loop's on_stream_sent takes them off.
    std::mutex wire_mu;
    std::deque<std::pair<uint64_t, uint64_t>> on_the_way;
    std::atomic<bool> live{false};  // past its image: a write's answer waits for it
    // A write's wait ran out on it (a follower gone without a reset, its socket full): no write
    // waits for it again until it has sent all it had been given then (`sent` reaching this seq),
    // so one dead follower does not cost each write of its primary the whole --replica-wait. A
    // seq, not a flag cleared as the stream catches up: a stream that caught up between the
    // wait's end and its mark would have kept a flag until its next block.
    std::atomic<uint64_t> lagging_until{0};
    bool lagging() const { return sent < lagging_until; }
    std::atomic<bool> done{false};
    std::atomic<const char*> ending{nullptr};  // end_streams: the `E` reason to end with
};

// How a stream's frames go out: each waits while more than `wait_below` bytes are unsent (the
// exchange's bound is the peer's pace), and a frame larger than `wait_below` until nothing is:
// the exchange refuses a write that would take what waits past its bound (twice
// keep_unsent_below), and takes one past it only alone. None goes once the node stops or the
// stream is told to end. end() and cut() finish the stream; both answer "nothing more" (false,
// nullopt) so a step can return either.
struct Replication::FeedSender {
    server::Exchange& ex;
    const std::atomic<bool>& stopping;
    const std::atomic<const char*>& ending;
    uint64_t written = 0;  // the stream's bytes written to the exchange (its head not counted)

    bool send_frame(std::string frame, size_t wait_below) {
        const size_t waits_below = frame.size() > wait_below ? 0 : wait_below;
        while (!ex.closed() && ex.pending_bytes() > waits_below && !stopping && !ending) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const size_t n = frame.size();
        if (stopping || ending || !ex.write(std::move(frame))) return false;
        written += n;
        return true;
    }
    bool send(char kind, std::string_view payload, size_t wait_below) {
        return send_frame(encode_frame(kind, payload), wait_below);
    }
    // `E` with its reason, then the end of the body.
    std::nullopt_t end(std::string_view reason) {
        std::string body;
        json::Writer w(body);
        w.begin_object();
        w.key("reason");
        w.string(reason);
        w.end_object();
        ex.write(encode_frame('E', body));
        ex.end();
        return std::nullopt;
    }
    // A send refused: ended by end_streams (say why), or the peer gone.
    std::nullopt_t cut() {
        if (const char* reason = ending) return end(reason);
        ex.end();
        return std::nullopt;
    }
};

Replication::Replication(Node& node) : node_(node) {}

Replication::~Replication() { stop(); }

void Replication::stop() {
    stopping_ = true;
    std::vector<std::shared_ptr<Follower>> followers;
    std::vector<StreamThread> streams;
    {
        std::lock_guard lock(mu_);
        for (auto& [name, f] : followers_) followers.push_back(f);
        followers_.clear();
        streams.swap(streams_);
    }
    for (auto& f : followers) f->stop();
    for (auto& s : streams) {
        if (s.thread.joinable()) s.thread.join();
    }
}

void Replication::reap_locked() {
    for (auto it = streams_.begin(); it != streams_.end();) {
        if (it->stream->done) {
            it->thread.join();
            it = streams_.erase(it);
        } else {
            ++it;
        }
    }
}

void Replication::end_streams(std::string_view tenant, const char* reason) {
    std::lock_guard lock(mu_);
    for (auto& s : streams_) {
        if (s.stream->tenant != tenant || s.stream->done) continue;
        const char* none = nullptr;
        s.stream->ending.compare_exchange_strong(none, reason);
    }
}

Registry::TakenOut Replication::take_copy_out(std::string_view tenant, const char* stream_reason,
                                              int64_t wait_ms) {
    return node_.registry().take_out(tenant, wait_ms, [this, stream_reason](Tenant& t) {
        node_.subscriptions().end_tenant(t.name(), "closing");
        end_streams(t.name(), stream_reason);
        t.wake_all();
    });
}

void Replication::serve_stream(const std::shared_ptr<Call>& call) {
    const http::RequestHead& h = call->request.head;
    const std::vector<std::string> seg = [&] {
        std::vector<std::string> out;
        size_t at = 1;
        while (at <= h.path.size()) {
            size_t end = h.path.find('/', at);
            if (end == std::string::npos) end = h.path.size();
            out.push_back(h.path.substr(at, end - at));
            at = end + 1;
        }
        return out;
    }();
    if (!route_of(*call)) {
        return node_.answer(*call, node_.refusal(404, "no route " + h.path +
                                                          ": the feed is /_replication/tenants/<t>"));
    }
    if (!route_takes(*call)) return node_.answer(*call, method_refusal(node_, *call));
    call->tenant = seg[2];
    if (!valid_tenant_name(call->tenant)) {
        return node_.answer(*call, node_.refusal(400, "tenant name `" + call->tenant +
                                                          "` is not [a-z0-9_-]{1,64}"));
    }
    if (stopping_ || node_.stopping()) {
        return node_.answer(*call, node_.refusal(503, "the node is stopping", "stopping"));
    }
    auto stream = std::make_shared<Stream>();
    stream->tenant = call->tenant;
    stream->peer = std::string(call->request.peer);
    std::lock_guard lock(mu_);
    reap_locked();
    std::thread thread;
    try {
        thread = std::thread([this, call, stream] {
            run_stream(call, stream);
            stream->done = true;
        });
    } catch (const std::system_error& e) {
        // The process at its thread limit: the follower asks again at its backoff's pace.
        http::Response r =
            node_.refusal(503, std::string("no thread for the stream: ") + e.what(), "streams");
        r.header("Retry-After", "1");
        return node_.answer(*call, std::move(r));
    }
    streams_.push_back(StreamThread{stream, std::move(thread)});
}

// The stream's body, on its own thread (§10.2): the request checked, the follower's position
// found on this copy's feed or not, then the hello, an image when it is not, and the blocks.
void Replication::run_stream(std::shared_ptr<Call> call, std::shared_ptr<Stream> stream) {
    Acquired a = node_.registry().acquire(call->tenant);
    if (!a.tenant) {
        if (a.error == AcquireError::not_found) {
            return node_.answer(*call,
                                node_.refusal(404, "no copy of `" + call->tenant + "` here"));
        }
        return node_.answer(*call, acquire_refusal(node_, a));
    }
    std::shared_ptr<Tenant> tenant = std::move(a.tenant);
    engine::Database& db = tenant->db();
    // Latched by a failed write: about to be closed and opened again (Node::tick), which a stream
    // would hold off for good. The follower asks again at its backoff's pace.
    if (db.failure()) return node_.answer(*call, latched_refusal(node_, call->tenant));
    const http::RequestHead& h = call->request.head;
    std::optional<uint64_t> since, history, lineage;
    if (auto v = h.query_value("since")) {
        uint64_t n = 0;
        auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
        if (ec != std::errc() || p != v->data() + v->size()) {
            return node_.answer(*call, node_.refusal(400, "`since` must be a seq"));
        }
        since = n;
    }
    if (auto v = h.query_value("history"); v && !v->empty()) {
        history = engine::format::parse_hex16(*v);
        if (!history) return node_.answer(*call, node_.refusal(400, "`history` must be 16 hex"));
    }
    if (auto v = h.query_value("lineage"); v && !v->empty()) {
        lineage = engine::format::parse_hex16(*v);
        if (!lineage) return node_.answer(*call, node_.refusal(400, "`lineage` must be 16 hex"));
    }
    // Where the follower continues, or why it takes an image (§10.3).
    std::optional<engine::FeedCursor> cursor;
    if (since && history && lineage && *lineage == db.lineage().v) {
        auto s = db.feed().since(engine::Position{engine::Seq{*since}, engine::HistoryId{*history}});
        if (auto* c = std::get_if<engine::FeedCursor>(&s)) cursor.emplace(std::move(*c));
    }
    std::shared_ptr<server::Exchange> ex = call->exchange;
    // A block counts as sent once its last byte is in the socket (Stream::sent).
    ex->on_stream_sent([this, stream](uint64_t total) { stream_on_the_wire(*stream, total); });
    http::Response head;
    head.stream = true;
    head.content_type = "application/x-fenec-feed";
    head.close = true;
    node_.answer(*call, std::move(head));
    FeedSender out{*ex, stopping_, stream->ending};
    if (!send_hello(out, db, !cursor)) return;
    if (!cursor) {
        std::optional<engine::FeedCursor> after_image = send_image(out, db);
        if (!after_image) return;
        cursor.emplace(std::move(*after_image));
    }
    send_blocks(out, *stream, db, *cursor);
}

bool Replication::send_hello(FeedSender& out, engine::Database& db, bool image) {
    const engine::History hist = db.history();
    std::string hello;
    json::Writer w(hello);
    w.begin_object();
    w.key("node");
    w.string(node_.options().node_name);
    w.key("lineage");
    w.string(engine::format::hex16(db.lineage().v));
    w.key("history");
    w.string(engine::format::hex16(hist.current().v));
    w.key("forks");
    std::vector<std::pair<engine::HistoryId, engine::Seq>> fk;
    for (const auto& f : hist.forks) fk.emplace_back(f.history, f.seq);
    w.raw(replication::forks_json(fk));
    w.key("seq");
    w.uint64(db.seq().v);
    w.key("durable");
    w.uint64(db.durable_seq().v);
    w.key("image");
    w.boolean(image);
    w.end_object();
    if (out.send('H', hello, 0)) return true;
    out.cut();
    return false;
}

std::optional<engine::FeedCursor> Replication::send_image(FeedSender& out, engine::Database& db) {
    // Built on a thread of its own while this one keeps the stream alive (§10.2: `K` after 2 s
    // without a frame). Without them a follower gave up on a build longer than its
    // --upstream-timeout (a tenant past a gigabyte or so), asked again, and had another built
    // beside the first: it never got an image.
    auto build = [&db] {
        test_hooks::stall_image_build();
        return db.image();
    };
    std::future<decltype(build())> building;
    try {
        if (test_hooks::refuse_image_thread()) {
            throw std::system_error(
                std::make_error_code(std::errc::resource_unavailable_try_again));
        }
        building = std::async(std::launch::async, build);
    } catch (const std::system_error& e) {
        // No thread to be had (the process at its thread limit): built on this one, without the
        // keep-alives, rather than the uncaught throw ending the node.
        std::cerr << "fenec-node: the image of a follower's stream is built without keep-alives: "
                  << e.what() << "\n";
        std::promise<decltype(build())> made;
        made.set_value(build());
        building = made.get_future();
    }
    while (building.wait_for(std::chrono::milliseconds(feed_keepalive_ms)) !=
           std::future_status::ready) {
        if (stopping_ || node_.stopping() || out.ex.closed() || !send_keepalive(out, db)) {
            building.wait();  // the build reads `db`, which this stream's caller holds
            return out.cut();
        }
    }
    auto img = building.get();
    if (!img.is_ok()) return out.end("closing");
    const std::vector<std::byte>& bytes = *img->bytes;
    for (size_t at = 0; at < bytes.size(); at += feed_image_chunk_bytes_max) {
        const size_t n = std::min(feed_image_chunk_bytes_max, bytes.size() - at);
        if (!out.send('I', {reinterpret_cast<const char*>(bytes.data()) + at, n}, 0)) {
            return out.cut();
        }
    }
    std::string done;
    json::Writer w(done);
    w.begin_object();
    w.key("seq");
    w.uint64(img->info.seq.v);
    w.key("history");
    w.string(engine::format::hex16(img->info.history.current().v));
    w.key("bytes");
    w.uint64(bytes.size());
    w.key("digest");
    w.string(engine::format::hex16(
        replication::image_digest({reinterpret_cast<const char*>(bytes.data()), bytes.size()})));
    w.end_object();
    if (!out.send('i', done, 0)) return out.cut();
    auto s = db.feed().since(engine::Position{img->info.seq, img->info.history.current()});
    if (!std::holds_alternative<engine::FeedCursor>(s)) return out.end("behind");
    return std::get<engine::FeedCursor>(std::move(s));
}

void Replication::on_the_way(FeedSender& out, Stream& stream, uint64_t seq) {
    {
        std::lock_guard lock(stream.wire_mu);
        stream.on_the_way.emplace_back(out.written, seq);
    }
    // Already sent (the loop was quicker than this line): nothing will call again for it.
    if (out.ex.pending_bytes() == 0) stream_on_the_wire(stream, UINT64_MAX);
}

void Replication::stream_on_the_wire(Stream& stream, uint64_t sent_total) {
    bool moved = false;
    {
        std::lock_guard lock(stream.wire_mu);
        while (!stream.on_the_way.empty() && stream.on_the_way.front().first <= sent_total) {
            stream.sent = stream.on_the_way.front().second;
            stream.on_the_way.pop_front();
            moved = true;
        }
    }
    if (!moved) return;
    { std::lock_guard lock(handed_mu_); }  // a waiter between its check and its wait
    handed_cv_.notify_all();
}

void Replication::send_blocks(FeedSender& out, Stream& stream, engine::Database& db,
                              engine::FeedCursor& cursor) {
    on_the_way(out, stream, cursor.position().v);  // the image's last frame
    stream.live = true;
    ++live_streams_;
    struct Unlive {
        Replication* r;
        ~Unlive() {
            --r->live_streams_;
            { std::lock_guard lock(r->handed_mu_); }
            r->handed_cv_.notify_all();
        }
    } unlive{this};
    // When a `K` is due: the node's clock, as every instant it decides on (NodeEnv).
    const engine::Clock& clock = node_.clock();
    int64_t idle_since_ns = clock.steady_ns();
    while (!out.ex.closed()) {
        if (stopping_ || node_.stopping()) return (void)out.end("closing");
        if (const char* reason = stream.ending) return (void)out.end(reason);
        engine::FeedNext n = cursor.next(std::chrono::milliseconds(200));
        if (n.kind == engine::FeedNext::Kind::closed) {
            // The copy closed under the stream: told to follow another (demoted), or the node
            // or the tenant closing.
            if (const char* reason = stream.ending) return (void)out.end(reason);
            return (void)out.end(following(stream.tenant) ? "demoted" : "closing");
        }
        if (n.kind == engine::FeedNext::Kind::behind) return (void)out.end("behind");
        if (n.kind == engine::FeedNext::Kind::idle) {
            if (clock.steady_ns() - idle_since_ns < feed_keepalive_ms * 1'000'000) {
                continue;
            }
            if (!send_keepalive(out, db)) return (void)out.cut();
        } else if (!send_entry(out, stream, n.entry)) {
            return (void)out.cut();
        }
        idle_since_ns = clock.steady_ns();
    }
}

bool Replication::send_keepalive(FeedSender& out, engine::Database& db) {
    std::string k;
    json::Writer w(k);
    w.begin_object();
    w.key("seq");
    w.uint64(db.seq().v);
    w.key("durable");
    w.uint64(db.durable_seq().v);
    w.end_object();
    return out.send('K', k, keep_unsent_below);
}

bool Replication::send_entry(FeedSender& out, Stream& stream, const engine::FeedEntry& e) {
    if (e.type == engine::FeedEntry::Type::forks) {
        return out.send('F', replication::encode_forks(e.forks), keep_unsent_below);
    }
    const std::string payload = replication::encode_block(e);
    // Over the frame bound (a spilled block): `C` pieces, then `B` with the last.
    for (std::string& frame : encode_block_frames(payload, feed_frame_bound())) {
        if (!out.send_frame(std::move(frame), keep_unsent_below)) return false;
    }
    on_the_way(out, stream, e.last.v);
    return true;
}

bool Replication::short_of(const Stream& st, std::string_view tenant, uint64_t seq) {
    return st.live && !st.done && st.tenant == tenant && st.sent < seq;
}

bool Replication::waits_for_streams() const {
    const NodeOptions& o = node_.options();
    return o.sync == NodeOptions::Sync::always && o.replica_wait_ms != 0 && live_streams_ != 0;
}

bool Replication::all_handed_locked(std::string_view tenant, uint64_t seq) const {
    for (const auto& s : streams_) {
        if (!s.stream->lagging() && short_of(*s.stream, tenant, seq)) return false;
    }
    return true;
}

bool Replication::handed(std::string_view tenant, uint64_t seq) const {
    if (!waits_for_streams()) return true;
    std::lock_guard lock(mu_);
    return all_handed_locked(tenant, seq);
}

void Replication::wait_handed(std::string_view tenant, uint64_t seq) {
    if (!waits_for_streams()) return;
    const NodeOptions& o = node_.options();
    std::unique_lock handed(handed_mu_);
    const bool sent = handed_cv_.wait_for(handed, std::chrono::milliseconds(o.replica_wait_ms), [&] {
        std::lock_guard lock(mu_);
        return all_handed_locked(tenant, seq);
    });
    if (!sent) lag_short(tenant, seq);
}

void Replication::lag_short(std::string_view tenant, uint64_t seq) {
    std::lock_guard lock(mu_);
    for (const auto& s : streams_) {
        Stream& st = *s.stream;
        if (!short_of(st, tenant, seq)) continue;
        uint64_t until = seq;
        {
            std::lock_guard wire(st.wire_mu);
            if (!st.on_the_way.empty()) until = std::max(until, st.on_the_way.back().second);
        }
        uint64_t was = st.lagging_until;
        while (was < until && !st.lagging_until.compare_exchange_weak(was, until)) {
        }
    }
}

void Replication::write_followers(std::string_view tenant, json::Writer& w) const {
    std::lock_guard lock(mu_);
    w.begin_array();
    for (const auto& s : streams_) {
        if (s.stream->done || s.stream->tenant != tenant) continue;
        w.begin_object();
        w.key("peer");
        w.string(s.stream->peer);
        w.key("sent");
        w.uint64(s.stream->sent.load());
        w.key("lagging");
        w.boolean(s.stream->lagging());
        w.end_object();
    }
    w.end_array();
}

}  // namespace fenec::node
