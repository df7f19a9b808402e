// server/node/follower.h: one followed copy (node-http.md §10.4): a thread streaming the primary's
// feed through the blocking HTTP client (server/runtime/client.h: a streamed GET, each read bounded
// by --upstream-timeout, cancelled by stop()), reconnecting with backoff (100 ms to 5 s), applying
// what it is sent and taking an image when told. A blocking connection on a thread per followed
// copy is a choice made here for simplicity: the copies a node follows are few, and the engine's
// apply and the image install block on disk anyway; the io_uring loops never see them.
#pragma once

#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/io.h"
#include "server/node/replication.h"
#include "server/runtime/cancel.h"
#include "server/runtime/client.h"

namespace fenec::node {

class Tenant;

class Follower {
public:
    Follower(Replication& replication, std::string tenant, Follows follows);
    ~Follower();

    void begin();
    // Stops at once: a pending connect or read is cut (the socket shut down); joins the thread.
    // With `keep_received` (a promotion, node-http.md §8.6), what the primary's stream already
    // delivered to this node's socket is applied first: a block the primary sent before it
    // answered the write is kept even if it stopped or was cut off right after. All that had
    // reached the socket when the drain began is applied, however slow the apply; what arrives
    // after it only within keep_received_ms_max (1 s), so a primary still sending cannot hold
    // the promotion. It waits for more only where a block is part-way in (the rest of a large
    // block behind this node's full receive window); between blocks an empty socket ends it.
    void stop(bool keep_received = false);
    // Waits up to `ms` for a hello: true when heard; false with `error` when the primary refused
    // or was not reached (or the wait ran out: error empty).
    bool wait_heard(int64_t ms, std::string& error);
    void write_json(json::Writer& w) const;
    uint64_t images() const { return images_; }

private:
    void run();
    bool session(std::string& error);
    std::unique_ptr<server::Connection> open_feed(std::string& error);
    bool follow_feed(server::Connection& feed, std::string& error);
    bool handle(const Frame& f, std::string& error);
    bool on_hello(const Frame& f, std::string& error);
    bool on_image_end(const Frame& f, std::string& error);
    void drop_image();  // the image being received given up, its side file removed
    bool on_entry(const Frame& f, std::string& error);  // a block or forks, applied
    bool sleep_ms(int64_t ms);  // false when stopped meanwhile

    Replication& repl_;
    const std::string tenant_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    Follows follows_;
    bool stop_ = false;
    std::atomic<bool> keep_received_{false};  // stop(true): the socket's bytes applied first
    // Under mu_: when draining them gives up (the OS's clock, as every socket wait).
    std::chrono::steady_clock::time_point keep_until_{};
    server::Cancel cancel_;          // ends the feed's connect or read at once (stop)
    server::BlockingClient client_;  // no pool: the feed is one connection, its own
    bool connected_ = false;
    std::string error_;
    uint64_t attempts_failed_ = 0;  // answers other than a hello since the last hello
    int64_t last_contact_ms_ = 0;
    uint64_t primary_seq_ = 0;
    std::atomic<uint64_t> images_{0};
    std::atomic<uint64_t> reconnects_{0};
    std::shared_ptr<Tenant> held_;         // a following copy holds its tenant open (§10.4)
    std::unique_ptr<engine::File> image_;  // the image being received, <t>.fenec.incoming
    // Of the image being received: its bytes so far (bounded by --max-image) and their XXH3-64,
    // held against what its end frame says.
    uint64_t image_bytes_ = 0;
    std::shared_ptr<XXH3_state_t> image_hash_;
    std::thread thread_;
};

}  // namespace fenec::node
