// shard/directory_feed.cc: the primary's side of the directory's feed (router.md §10,
// shard/standby.h): for each standby a thread sending the file's hello, an image when the
// standby's position is not on this file's history or out of its feed, then every durable change
// and keep-alives, in the frames a node's tenant feed uses (server/replication/frames.h). Each
// stream says how far it was sent and when it last was caught up, which is what a move's step 10
// and the lease record's raise wait on.
#include <algorithm>
#include <chrono>
#include <system_error>

#include "engine/database.h"
#include "engine/format.h"
#include "shard/standby.h"
#include "shard/test_hooks.h"

namespace fenec::shard {

namespace {

// Past the image, a frame waits while this much is unsent: the stream keeps pace with its
// standby well inside the exchange's stream bound, which refuses past it.
constexpr size_t keep_unsent_below = 512 << 10;
// How long one wait on the feed lasts before the stream looks at its state again.
constexpr std::chrono::milliseconds feed_wait{100};

}  // namespace

struct DirectoryFeed::Stream {
    std::string peer;
    std::atomic<uint64_t> sent{0};         // the last seq handed to the connection
    std::atomic<int64_t> caught_up_ns{0};  // when it last had handed every durable change
    std::atomic<bool> live{false};         // past its image
    std::atomic<bool> done{false};
};

// How a stream's frames go out: each waits while more than `wait_below` bytes are unsent, and
// none goes once the feed stops. end() finishes the stream with `E`; both answer "nothing more".
struct DirectoryFeed::Sender {
    server::Exchange& ex;
    const std::atomic<bool>& stopping;

    bool frame(std::string bytes, size_t wait_below) {
        while (!ex.closed() && ex.pending_bytes() > wait_below && !stopping) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return !stopping && ex.write(std::move(bytes));
    }
    bool send(char kind, std::string_view payload, size_t wait_below) {
        return frame(replication::encode_frame(kind, payload), wait_below);
    }
    void end(std::string_view reason) {
        std::string body;
        json::Writer w(body);
        w.begin_object();
        w.key("reason");
        w.string(reason);
        w.end_object();
        ex.write(replication::encode_frame('E', body));
        ex.end();
    }
};

DirectoryFeed::DirectoryFeed(Directory& directory, const engine::Clock& clock, std::string self)
    : directory_(directory), clock_(clock), self_(std::move(self)) {}

DirectoryFeed::~DirectoryFeed() { stop(); }

void DirectoryFeed::stop() {
    stopping_ = true;
    std::vector<Thread> streams;
    {
        std::lock_guard lock(mu_);
        streams.swap(streams_);
    }
    for (auto& s : streams) {
        if (s.thread.joinable()) s.thread.join();
    }
    sent_cv_.notify_all();
}

void DirectoryFeed::reap_locked() {
    for (auto it = streams_.begin(); it != streams_.end();) {
        if (it->stream->done) {
            it->thread.join();
            it = streams_.erase(it);
        } else {
            ++it;
        }
    }
}

void DirectoryFeed::serve(std::shared_ptr<server::Exchange> exchange, http::Response head,
                          std::optional<uint64_t> since, std::optional<uint64_t> history,
                          std::string peer) {
    auto stream = std::make_shared<Stream>();
    stream->peer = std::move(peer);
    std::lock_guard lock(mu_);
    reap_locked();
    if (stopping_) {
        http::Response r = Router::error(503, "the router is stopping");
        r.headers = head.headers;
        exchange->reply(std::move(r));
        return;
    }
    std::thread thread;
    try {
        thread = std::thread([this, exchange, head, stream, since, history]() mutable {
            run(exchange, std::move(head), stream, since, history);
            stream->done = true;
            { std::lock_guard l(mu_); }
            sent_cv_.notify_all();
        });
    } catch (const std::system_error& e) {
        // The process at its thread limit: the standby asks again.
        http::Response r = Router::error(503, std::string("no thread for the feed: ") + e.what());
        r.headers = head.headers;
        r.header("Retry-After", "1");
        exchange->reply(std::move(r));
        return;
    }
    streams_.push_back(Thread{stream, std::move(thread)});
}

// The stream's body, on its own thread: where the standby continues, or why it takes an image;
// the hello; the image when it does; then the changes.
void DirectoryFeed::run(std::shared_ptr<server::Exchange> exchange, http::Response head,
                        std::shared_ptr<Stream> stream, std::optional<uint64_t> since,
                        std::optional<uint64_t> history) {
    engine::Database* db = directory_.database();
    exchange->start(std::move(head));
    Sender out{*exchange, stopping_};
    if (!db) return out.end("closing");
    std::optional<engine::FeedCursor> cursor;
    if (since && history) {
        auto s =
            db->feed().since(engine::Position{engine::Seq{*since}, engine::HistoryId{*history}});
        if (auto* c = std::get_if<engine::FeedCursor>(&s)) cursor.emplace(std::move(*c));
    }
    auto maps = directory_.maps();
    const engine::History hist = db->history();
    std::vector<std::pair<engine::HistoryId, engine::Seq>> forks;
    for (const auto& f : hist.forks) forks.emplace_back(f.history, f.seq);
    std::string hello;
    json::Writer w(hello);
    w.begin_object();
    w.key("router");
    w.string(self_);
    w.key("id");
    w.string(maps->id);
    w.key("term");
    w.int64(maps->term);
    w.key("history");
    w.string(engine::format::hex16(hist.current().v));
    w.key("forks");
    w.raw(replication::forks_json(forks));
    w.key("seq");
    w.uint64(db->seq().v);
    w.key("durable");
    w.uint64(db->durable_seq().v);
    w.key("image");
    w.boolean(!cursor);
    w.end_object();
    if (!out.send('H', hello, 0)) return exchange->end();
    if (!cursor) {
        engine::Result<engine::FeedCursor> after = send_image(out, *db);
        if (!after.is_ok()) return;
        cursor.emplace(std::move(after.value()));
    }
    send_changes(out, *stream, *db, *cursor);
}

// The whole file as it stands: `I` chunks, then `i` naming its seq, history, size and digest;
// the cursor just past it, or nothing when the stream ended (said with `E`).
engine::Result<engine::FeedCursor> DirectoryFeed::send_image(Sender& out, engine::Database& db) {
    auto ended = [&](std::string_view reason) {
        out.end(reason);
        return engine::Status::error(engine::Code::busy, std::string(reason));
    };
    auto img = db.image();
    if (!img.is_ok()) return ended("closing");
    const std::string_view bytes(reinterpret_cast<const char*>(img->bytes->data()),
                                 img->bytes->size());
    for (size_t at = 0; at < bytes.size(); at += replication::feed_image_chunk_bytes_max) {
        const size_t n = std::min(replication::feed_image_chunk_bytes_max, bytes.size() - at);
        if (!out.send('I', bytes.substr(at, n), keep_unsent_below)) return ended("closing");
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
    w.string(engine::format::hex16(replication::image_digest(bytes)));
    w.end_object();
    if (!out.send('i', done, keep_unsent_below)) return ended("closing");
    auto s = db.feed().since(engine::Position{img->info.seq, img->info.history.current()});
    if (!std::holds_alternative<engine::FeedCursor>(s)) return ended("behind");
    return std::get<engine::FeedCursor>(std::move(s));
}

// Every durable change from `cursor` on, keep-alives when idle, until the standby goes, the feed
// stops, or the cursor falls out of the feed (`E behind`: the standby asks again and takes an
// image).
void DirectoryFeed::send_changes(Sender& out, Stream& stream, engine::Database& db,
                                 engine::FeedCursor& cursor) {
    auto caught_up = [&] {
        if (stream.sent.load() >= db.durable_seq().v) stream.caught_up_ns = clock_.steady_ns();
    };
    stream.sent = cursor.position().v;
    stream.live = true;
    caught_up();
    int64_t idle_since_ns = clock_.steady_ns();
    while (!out.ex.closed()) {
        if (stopping_) return out.end("closing");
        engine::FeedNext n = cursor.next(feed_wait);
        if (n.kind == engine::FeedNext::Kind::closed) return out.end("closing");
        if (n.kind == engine::FeedNext::Kind::behind) return out.end("behind");
        if (n.kind == engine::FeedNext::Kind::idle) {
            caught_up();
            if (clock_.steady_ns() - idle_since_ns < replication::feed_keepalive_ms * 1'000'000) {
                continue;
            }
            std::string k;
            json::Writer w(k);
            w.begin_object();
            w.key("seq");
            w.uint64(db.seq().v);
            w.key("durable");
            w.uint64(db.durable_seq().v);
            w.end_object();
            if (!out.send('K', k, keep_unsent_below)) return out.ex.end();
        } else if (n.entry.type == engine::FeedEntry::Type::forks) {
            if (!out.send('F', replication::encode_forks(n.entry.forks), keep_unsent_below)) {
                return out.ex.end();
            }
        } else {
            test_hooks::stall_feed_change();
            for (std::string& frame : replication::encode_block_frames(
                     replication::encode_block(n.entry), replication::feed_frame_bytes_max)) {
                if (!out.frame(std::move(frame), keep_unsent_below)) return out.ex.end();
            }
            stream.sent = n.entry.last.v;
            caught_up();
            { std::lock_guard lock(mu_); }  // a waiter between its check and its wait
            sent_cv_.notify_all();
        }
        idle_since_ns = clock_.steady_ns();
    }
}

bool DirectoryFeed::keeping_up(const Stream& s, int64_t now_ns) const {
    return s.live && !s.done && now_ns - s.caught_up_ns.load() <= standby_keeping_up_ms * 1'000'000;
}

bool DirectoryFeed::wait_sent(std::optional<uint64_t> seq, int64_t bound_ms) {
    engine::Database* db = directory_.database();
    if (!db) return true;
    const uint64_t target = seq.value_or(db->seq().v);
    std::unique_lock lock(mu_);
    // Who counts is judged once, as the wait begins: a standby that falls behind meanwhile is
    // still waited for (up to the bound), one that arrives later is not.
    const int64_t now_ns = clock_.steady_ns();
    std::vector<std::shared_ptr<Stream>> waited;
    for (const auto& t : streams_) {
        if (keeping_up(*t.stream, now_ns)) waited.push_back(t.stream);
    }
    return sent_cv_.wait_for(lock, std::chrono::milliseconds(bound_ms), [&] {
        return stopping_ || std::all_of(waited.begin(), waited.end(), [&](const auto& s) {
                   return s->done || s->sent.load() >= target;
               });
    });
}

void DirectoryFeed::write_followers(json::Writer& w) const {
    engine::Database* db = directory_.database();
    const uint64_t seq = db ? db->seq().v : 0;
    const int64_t now_ns = clock_.steady_ns();
    std::lock_guard lock(mu_);
    w.begin_array();
    for (const auto& t : streams_) {
        const Stream& s = *t.stream;
        if (s.done) continue;
        const uint64_t sent = s.sent.load();
        w.begin_object();
        w.key("peer");
        w.string(s.peer);
        w.key("sent");
        w.uint64(sent);
        w.key("behind");
        w.uint64(seq > sent ? seq - sent : 0);
        w.key("keeping_up");
        w.boolean(keeping_up(s, now_ns));
        w.end_object();
    }
    w.end_array();
}

}  // namespace fenec::shard
