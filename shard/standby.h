// shard/standby.h: the directory's replication between routers (router.md §10): a primary serves
// its directory file's feed at `GET /_replication?since=<seq>&history=<id>` (DirectoryFeed), a
// standby started with `--replica-of` follows it into a directory file of its own
// (DirectoryFollower), and `Standby` ties them to the router: the `/_replication` routes (the
// feed, `status`, `promote`), promotion, and what a primary waits for (§7.2 step 10, §9.7).
//
// The feed is the engine's (the file's landed blocks and forks) in the frames a node's tenant feed
// uses (server/replication/frames.h): a hello, an image when the follower's position is not on
// this file's history or out of its feed, then every durable block, forks when they change,
// keep-alives when idle, and an end. A standby applies each change as it arrives and rebuilds its
// maps from the file (Directory::apply), or puts a whole image in its file's place
// (Directory::adopt_image).
//
// Invariants: a standby writes its directory only with what its primary's feed sent; it grants
// nothing, fails nothing over, repairs nothing and thaws nothing (the router refuses every change
// 409 while `following()`). A standby "keeping up" is connected to the feed and was caught up
// within the last second; a primary waiting for standbys waits only for those, and at most its
// bound.
//
// Threads: a thread per stream served (it waits on the file's feed, never on a loop) and one
// follower thread holding a blocking connection; promotion runs on an API worker. All are joined
// by stop(), which the router calls before it closes the directory.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/clock.h"
#include "json/writer.h"
#include "server/replication/frames.h"
#include "server/runtime/cancel.h"
#include "server/runtime/client.h"
#include "server/runtime/http_server.h"
#include "shard/directory.h"
#include "shard/router.h"

namespace fenec::shard {

// The longest a primary waits for its standbys to be sent a change: a move's flip before its
// source is deleted (§7.2 step 10), the longest-lease record before a longer grant (§9.7).
inline constexpr int64_t standby_wait_ms_max = 1000;
// Within this much of being caught up, a standby counts as keeping up (§7.2 step 10).
inline constexpr int64_t standby_keeping_up_ms = 1000;
// A follower's reconnects back off from the first to the most (as a node's copy does).
inline constexpr int64_t standby_backoff_first_ms = 100;
inline constexpr int64_t standby_backoff_max_ms = 5000;
// A standby asks its primary for the nodes' tokens again no sooner than this after a failure.
inline constexpr int64_t standby_tokens_retry_ms = 1000;
// An image bigger than this is refused by a standby (the directory is a few rows a tenant; a
// million tenants is far below it).
inline constexpr uint64_t standby_image_bytes_max = 1ull << 30;

// The primary's side: the directory's feed served to standbys, each stream on its own thread.
class DirectoryFeed {
  public:
    DirectoryFeed(Directory& directory, const engine::Clock& clock, std::string self);
    ~DirectoryFeed();

    // Serves one stream from `since` on `history` (both or neither): `head` and the frames go
    // out from a thread of its own until the follower goes or stop().
    void serve(std::shared_ptr<server::Exchange> exchange, http::Response head,
               std::optional<uint64_t> since, std::optional<uint64_t> history, std::string peer);
    // Ends every stream (`E closing`) and joins their threads. Idempotent.
    void stop();

    // Waits until every stream keeping up has been handed the file's changes up to `seq` (its
    // seq now when none), at most `bound_ms`. True when none was left behind.
    bool wait_sent(std::optional<uint64_t> seq, int64_t bound_ms);
    // The followers, for GET /_replication/status: [{"peer","sent","behind","keeping_up"}].
    void write_followers(json::Writer& w) const;

  private:
    struct Stream;
    struct Sender;
    void run(std::shared_ptr<server::Exchange> exchange, http::Response head,
             std::shared_ptr<Stream> stream, std::optional<uint64_t> since,
             std::optional<uint64_t> history);
    engine::Result<engine::FeedCursor> send_image(Sender& out, engine::Database& db);
    void send_changes(Sender& out, Stream& stream, engine::Database& db,
                      engine::FeedCursor& cursor);
    void reap_locked();
    bool keeping_up(const Stream& s, int64_t now_ns) const;

    Directory& directory_;
    const engine::Clock& clock_;
    const std::string self_;
    std::atomic<bool> stopping_{false};
    mutable std::mutex mu_;
    std::condition_variable sent_cv_;  // a stream handed a change on (under mu_)
    struct Thread {
        std::shared_ptr<Stream> stream;
        std::thread thread;
    };
    std::vector<Thread> streams_;
};

// A tenant whose row the primary's feed changed to name the node its failover took it off
// (§9.12): what a standby cuts requests by.
struct FailedOver {
    std::string tenant;
    std::string node;         // its new primary
    std::string failed_from;  // the node it was taken off
};

// The standby's side: the primary's feed followed into the directory file.
class DirectoryFollower {
  public:
    struct Options {
        // http://host:port each, tried in order: one that cannot be reached or serves no feed
        // (a standby's 409) passes to the next (a region's router following the global
        // router, then its standbys: §11.3); a standby names its one primary.
        std::vector<std::string> primaries;
        std::string token;             // --replication-token, presented as a bearer
        uint64_t timeout_ms = 60'000;  // each connect and read (--upstream-timeout)
        std::string what = "following";  // how its log lines begin
    };
    DirectoryFollower(Directory& directory, Options options, const engine::Clock& clock);
    ~DirectoryFollower();

    // `fn` is called on the follower's thread after each change that made a tenant's row name a
    // failover (§9.12); set before start().
    void on_failover(std::function<void(const std::vector<FailedOver>&)> fn);
    void start();
    // Stops at once (a pending connect or read cut); joins the thread. Idempotent.
    void stop();
    // For GET /_replication/status: {"primary","connected","seq","primary_seq","behind",
    // "last_contact_ms","images","reconnects","error"}.
    void write_json(json::Writer& w) const;
    // Images adopted so far.
    uint64_t images() const { return images_; }
    // Why the last image the primary sent was refused (a directory of another scope, §2.3 step
    // 2), "" when none was or one installed since. A refused primary is not heard: the next URL
    // is tried, and the rounds back off as when none answers, logged each time.
    std::string refused() const;

  private:
    void run();
    bool session(std::string& error);
    std::unique_ptr<server::Connection> open_feed(std::string& error);
    bool follow_feed(server::Connection& feed, std::string& error);
    bool handle(replication::Frame& f, std::string& error);
    bool on_image_end(const replication::Frame& f, std::string& error);
    bool on_entry(const replication::Frame& f, std::string& error);
    bool sleep_ms(int64_t ms);
    void changed(const DirectoryMaps& before);
    void fetch_tokens();
    // The URL followed now (primaries[at_]).
    std::string current() const;

    Directory& directory_;
    const Options options_;
    const engine::Clock& clock_;  // the wall time of the last contact
    std::function<void(const std::vector<FailedOver>&)> on_failover_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    size_t at_ = 0;  // the primary followed now, an index into options_.primaries (under mu_)
    server::Cancel cancel_;
    server::BlockingClient client_;
    bool connected_ = false;
    std::string error_;
    std::string refused_;  // under mu_: see refused()
    uint64_t primary_seq_ = 0;
    int64_t last_contact_ms_ = 0;
    std::string image_;  // the image being received
    bool in_image_ = false;
    // The follower thread's alone: a change was applied whose tokens were not fetched since.
    bool tokens_due_ = false;
    int64_t tokens_tried_ms_ = 0;  // wall ms of the last fetch
    std::atomic<uint64_t> images_{0};
    std::atomic<uint64_t> reconnects_{0};
    std::thread thread_;
};

// The router's part in it: the routes, the role, promotion, and the waits a primary makes.
class Standby {
  public:
    explicit Standby(Router& router);
    ~Standby();

    // After the directory is open: a standby's follower starts (§2.3 step 3).
    void start();
    // Ends the streams served and the follower; before the directory closes. Idempotent.
    void stop();
    // This router was promoted over (Router::superseded): the streams served end, so its
    // followers move to the next router they know, and none is served again.
    void superseded();

    // A standby not promoted: every change is refused 409 naming `primary()` (§6.1).
    bool following() const;
    // From a promotion's fork until it leads (moves left behind settled, leasing started): its
    // changes are refused 503 meanwhile, since a failover or a move in that gap would not wait
    // for the leases the old primary granted (§9.4) nor for the settling of its moves (§7.3).
    bool promoting() const { return promoting_.load(std::memory_order_acquire); }
    const std::string& primary() const { return primary_; }

    // `/_replication`, `/_replication/status`, `/_replication/tokens` (shard/node_tokens.h),
    // `/_replication/promote` (§3, §10), past nothing:
    // 404 without --replication-token, 401 without it presented. On the loop; a promotion is
    // handed to an API worker by `submit`.
    void serve(server::Request request, std::shared_ptr<server::Exchange> exchange,
               const Router::Answering& a,
               const std::function<bool(std::function<void()>)>& submit);

    // §10's promotion, on an API worker: the follower stopped, the file forked with a `terms`
    // row of the term plus one, tenants left `moving` thawed (§7.3), `on_leading` run.
    http::Response promote(const server::Request& request, const Router::Answering& a);

    // §10: a primary comes back only as a follower of the router promoted over it. At a
    // primary's start, before it settles or grants anything: "" when no node says otherwise,
    // else why this router may not lead. A node held by this directory's authority at a higher
    // term than this file's (the lease of a standby promoted since) says so; a node that does
    // not answer within a second says nothing.
    std::string superseded_at_nodes() const;

    // §7.2 step 10 and §9.7: waits until every standby keeping up was sent everything written so
    // far, at most `bound_ms`; at once where there is none or this router is a standby.
    void wait_for_standbys(int64_t bound_ms);

    // Set before start(). `on_leading` runs once this router leads after a promotion (a start
    // with --promote leads as a primary's start does): leasing starts there, as if every node
    // had just answered (§9.4). `on_failover` is DirectoryFollower's (§9.12).
    void on_leading(std::function<void()> fn) { on_leading_ = std::move(fn); }
    void on_failover(std::function<void(const std::vector<FailedOver>&)> fn);

  private:
    http::Response status() const;
    http::Response tokens() const;
    // The follower of --replica-of (a stopped one cannot start again: a promotion that failed
    // makes another).
    void make_follower();
    std::optional<http::Response> check_token(const server::Request& request) const;

    Router& router_;
    const std::string primary_;  // --replica-of, "" on a primary
    std::unique_ptr<DirectoryFeed> feed_;
    std::unique_ptr<DirectoryFollower> follower_;
    std::mutex promote_mu_;  // one promotion at a time
    std::atomic<bool> promoting_{false};
    std::function<void()> on_leading_;
    std::function<void(const std::vector<FailedOver>&)> on_failover_;
};

}  // namespace fenec::shard
