// server/node/replication.h: replication between nodes (node-http.md §10): the feed stream a
// primary serves on GET /_replication/tenants/<t>, the follower that reads one, the `<t>.follows`
// side file, and the admin routes that start and end following (§8.6 promote, §8.7 follow).
//
// The frames are the feed's one codec (server/replication/frames.h), shared with the router's
// directory feed; their names are used here as the node's own.
//
// Threads: each stream runs on a thread of its own (it waits on the tenant's feed, never on a
// loop); each followed copy has one thread holding a plain blocking socket. Both are bounded by
// the copies a node holds, and are joined by stop().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/feed.h"
#include "engine/status.h"
#include "json/writer.h"
#include "server/node/registry.h"
#include "server/replication/frames.h"
#include "server/runtime/http.h"

namespace fenec::node {

class Node;
struct Call;

using replication::decode_block;
using replication::decode_forks;
using replication::decode_frame;
using replication::encode_block_frames;
using replication::encode_frame;
using replication::feed_block_bytes_max;
using replication::feed_block_head_bytes;
using replication::feed_frame_bytes_max;
using replication::feed_frame_head_bytes;
using replication::feed_frame_tail_bytes;
using replication::feed_image_chunk_bytes_max;
using replication::feed_keepalive_ms;
using replication::Frame;
using replication::FrameJoiner;
using replication::FrameRead;

// The frame bound both ends use: feed_frame_bytes_max, or lower under the test hooks (so a test
// can pass it with a small block; server/node/test_hooks.h).
uint32_t feed_frame_bound();

// `<t>.follows` (§8.7, §10.4): what a copy was told to follow and the last hello it heard.
struct Follows {
    std::string from;          // http://host:port
    uint64_t told = 0;         // times told to follow (n+1 at each follow)
    struct Heard {
        std::string history;   // 16 hex
        uint64_t seq = 0;
        int64_t at_ms = 0;
    };
    std::optional<Heard> heard;  // heard since it was last told
    int64_t apply_stall_ms = 0;  // Fenec-Test-Stall: apply=<ms> (server/node/test_hooks.h)
    int64_t install_stall_ms = 0;   // Fenec-Test-Stall: install=<ms>
    int64_t received_stall_ms = 0;  // Fenec-Test-Stall: received=<ms>
};

class Follower;

class Replication {
public:
    explicit Replication(Node& node);
    ~Replication();

    // Resumes every copy with a `<t>.follows` (§10.4), the data directory listed through the
    // node's file system; the listing's error where it could not be read.
    engine::Status start();
    // Ends the streams (`E closing`) and the followers; joins their threads.
    void stop();

    // GET /_replication/tenants/<t> (§10.2), past its credential check.
    void serve_stream(const std::shared_ptr<Call>& call);
    // POST /_admin/tenants/<t>/follow (§8.7) and …/promote (§8.6), on a worker.
    void serve_follow(const std::shared_ptr<Call>& call);
    void serve_promote(const std::shared_ptr<Call>& call);

    // For GET /_admin/tenants/<t> (§8.8): writes the `followers` and `following` members' values.
    void write_followers(std::string_view tenant, json::Writer& w) const;
    void write_following(std::string_view tenant, json::Writer& w) const;
    bool following(std::string_view tenant) const;
    // §5.8 step 9: under --sync always, waits up to --replica-wait ms until every stream of
    // `tenant` past its image has sent block `seq` into its socket — in the kernel's hands, so
    // a node stopped or cut off right after its answer has still sent it. A stream a wait ran
    // out on is lagging: not waited for again until it has sent all it had been given when the
    // wait ran out, `seq` included. Not on a loop;
    // on a Syncer thread only when the pool refuses the answer's job (outcome.cc).
    void wait_handed(std::string_view tenant, uint64_t seq);
    // Whether wait_handed(tenant, seq) would return at once: no stream of `tenant` it waits for
    // is short of `seq` (none live, or every one has sent it). Never blocks: a Syncer thread
    // answers a durable write itself, without wait_handed, when this holds (outcome.cc).
    bool handed(std::string_view tenant, uint64_t seq) const;
    // What wait_handed does when its wait runs out: every stream of `tenant` still short of `seq`
    // marked lagging up to it, so later writes do not wait for it either. For a thread that may
    // not wait at all (the event loop, outcome.cc): a wait of none.
    void lag_short(std::string_view tenant, uint64_t seq);

    // Ends every feed stream of `tenant` with `E {"reason"}` (§10.2: `deleted`, `demoted`,
    // `closing`) within one feed wait (200 ms); a stream's thread lets its tenant go as it ends.
    // `reason` is a literal: it outlives the streams.
    void end_streams(std::string_view tenant, const char* reason);
    // Takes `tenant`'s copy out of service (Registry::take_out) to put another file in its
    // place or reopen it in another role: its subscribers end `closing` (§5.4), its feed streams
    // end with `stream_reason`, its held requests wake; past `wait_ms` with holders left:
    // in_use.
    Registry::TakenOut take_copy_out(std::string_view tenant, const char* stream_reason,
                                     int64_t wait_ms);

    // A delete's (§8.1): stops following `tenant` (the follower lets its copy go, so the delete
    // does not wait on it); true if it was followed. resume_following starts it again from
    // `<t>.follows` if that is still there (the delete refused, or the file removed alone).
    bool stop_following(std::string_view tenant);
    void resume_following(std::string_view tenant);

    // The follows side file's path; reading and writing it (fsync, rename).
    std::string follows_path(std::string_view tenant) const;
    std::optional<Follows> read_follows(std::string_view tenant) const;
    bool write_follows(std::string_view tenant, const Follows& f) const;

    Node& node() { return node_; }

private:
    struct Stream;
    // What wait_handed and handed share: whether any wait applies (--sync always, a
    // --replica-wait, a live stream); a stream short of block `seq` of `tenant` (past its image,
    // not yet sent it); and whether none that is not lagging is (mu_ held).
    bool waits_for_streams() const;
    static bool short_of(const Stream& st, std::string_view tenant, uint64_t seq);
    bool all_handed_locked(std::string_view tenant, uint64_t seq) const;
    struct FeedSender;
    void run_stream(std::shared_ptr<Call> call, std::shared_ptr<Stream> stream);
    // run_stream's steps. Each that fails has ended the stream (`E` with its reason, or cut)
    // and answers false or nullopt. send_image answers the cursor just past the image.
    bool send_hello(FeedSender& out, engine::Database& db, bool image);
    std::optional<engine::FeedCursor> send_image(FeedSender& out, engine::Database& db);
    // Every durable block and fork from `cursor` on, and keep-alives when idle, until the stream
    // ends; meanwhile it counts among the streams a write's answer waits for (wait_handed).
    void send_blocks(FeedSender& out, Stream& stream, engine::Database& db,
                     engine::FeedCursor& cursor);
    bool send_keepalive(FeedSender& out, engine::Database& db);
    bool send_entry(FeedSender& out, Stream& stream, const engine::FeedEntry& e);
    // `seq` is the last of what the stream has written so far: sent once those bytes are.
    void on_the_way(FeedSender& out, Stream& stream, uint64_t seq);
    // On the stream's loop thread as its bytes go out (Exchange::on_stream_sent), or on the
    // stream's own when they went before it looked: moves Stream::sent on, wakes wait_handed.
    void stream_on_the_wire(Stream& stream, uint64_t sent_total);
    void reap_locked();
    std::shared_ptr<Follower> start_follower(const std::string& tenant, const Follows& f);
    std::shared_ptr<Follower> find_follower(std::string_view tenant) const;
    // Stops following `tenant` at once (a pending connect included) and joins its thread;
    // with `keep_received` (a promotion), after applying what its socket already holds.
    void end_follower(std::string_view tenant, bool keep_received = false);
    // A follow's `<t>.follows` written: the copy's follower stopped first, and an open primary
    // copy taken out of service meanwhile, so it reopens a replica. A refusal (409 still held,
    // 500 not written) or nullopt.
    std::optional<http::Response> keep_follows(const std::string& tenant, const Follows& f);

    Node& node_;
    std::atomic<bool> stopping_{false};
    mutable std::mutex mu_;
    struct StreamThread {
        std::shared_ptr<Stream> stream;
        std::thread thread;
    };
    std::vector<StreamThread> streams_;
    // A stream sent a block on, or ended: wait_handed looks again. Its own mutex, taken before
    // mu_ and never while mu_ is held, so the loops that signal it never wait on mu_.
    std::mutex handed_mu_;
    std::condition_variable handed_cv_;
    std::atomic<uint32_t> live_streams_{0};  // streams past their image: writes wait for these
    std::map<std::string, std::shared_ptr<Follower>, std::less<>> followers_;
};

}  // namespace fenec::node
