// server/runtime/loop.h: the io_uring event loop (STYLE.md after TigerBeetle's src/io/linux.zig).
// One ring per loop thread; liburing is included by server/runtime/loop.cc alone
// (ci/check-boundaries).
//
// Each operation is a caller-owned Completion: the caller fills `callback` and `context`, hands
// the completion to an operation, and must keep it alive and untouched until its callback has run
// with `more == false`. At most one operation per completion is in flight. Completions reaped from
// the ring are queued and their callbacks run after the reap loop, never inside it, so a callback
// may submit, cancel or free anything. Everything but `post` and `stop` is loop-thread only.
//
// Bounds (the `server/limits.h` of the loop and the HTTP server; STYLE.md: no unbounded queue):
//   ring_entries          SQEs per ring; a full SQ is flushed to the kernel, never grown.
//   ready (2×ring)        completions dispatched per turn; the rest wait in the CQ for the next.
//   posted tasks          intrusive: a Task is queued at most once, so the queue is bounded by the
//                         tasks that exist: one per Exchange (server/runtime/exchange.cc), one per
//                         handed-off connection (at most connections_max), one per on_close after
//                         close.
//   read buffer           read_buffer_bytes_max per connection (a head, plus read-ahead of
//                         pipelined bytes; reading stops when it is full).
//   request body          HeadVerdict::body_bytes_max, judged before the first body byte;
//                         a streamed one (stream_body) body_chunk_bytes_max at a time.
//   answer                one at a time per connection (pipelined heads wait unparsed).
//   stream                ServerOptions::stream_buffer_max unsent (+ one write that began it).
//   connections           ServerOptions::connections_max, plus ServerOptions::refusals_max
//                         being answered 503; past both a connection is closed unanswered. A
//                         newcomer admitted by evicting an unproven connection may exceed it by at
//                         most evictions_in_flight_max until those evictions have run.
//                         ServerOptions::connections_per_peer_max from one address.
//   slow clients          a head whole within head_timeout_ms (at most head_timeout_ms_max) of
//                         its first byte; a body at body_bytes_per_s_min on average.
//   lingering close       linger_ms and linger_bytes_max per closing connection.
//   worker queue          WorkerPool::queue_max (server/runtime/workers.h).
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/runtime/http.h"

namespace fenec::server {

// Submission queue depth of one ring: enough for a turn's recv/send/close re-arms of a few
// hundred busy connections; more simply costs one extra io_uring_submit in that turn.
inline constexpr uint32_t ring_entries = 256;
// The kernel's accept queue (listen(2) backlog): bursts of connects beyond what a turn accepts.
inline constexpr int listen_backlog = 1024;
// A connection's read buffer: a whole head (http::head_bytes_max, so the codec can say 431) and
// one recv beyond it; pipelined requests read ahead wait here, and reading stops when it is full.
inline constexpr size_t recv_bytes_min = 4 * 1024;             // free space asked for before a recv
inline constexpr size_t read_buffer_bytes_initial = 8 * 1024;  // a typical head and its body
inline constexpr size_t read_buffer_bytes_max = http::head_bytes_max + 16 * 1024;
// One recv straight into a request body: large enough for throughput, small enough that a body
// announced big but sent slowly does not reserve its whole size up front.
inline constexpr size_t body_recv_bytes_max = 256 * 1024;
// One chunk of a streamed body (Exchange::read_body): one recv's worth, held by the handler
// while it writes it somewhere; the connection reads no more until it asks again.
inline constexpr size_t body_chunk_bytes_max = body_recv_bytes_max;
// After an answer that closes, the write side is shut and the peer's leftover bytes are read and
// dropped (so the close is a FIN, not an RST that would destroy the answer in flight) for at most
// this long and this many bytes.
inline constexpr uint32_t linger_ms = 2'000;
inline constexpr size_t linger_bytes_max = 1 << 20;
// Newcomers admitted while the evictions making room for them are still posted to their loops:
// each may overshoot connections_max by one for a turn; past this many a newcomer gets the 503.
inline constexpr uint32_t evictions_in_flight_max = 64;
// The longest head deadline a flag may set: a head is at most http::head_bytes_max, which any
// client sends in well under this; longer only lends a slot to a client that trickles.
inline constexpr uint32_t head_timeout_ms_max = 600'000;
// The reserved share of connections_max is at most this percent, so a new client always has
// some slots to be admitted into.
inline constexpr uint32_t connections_reserved_pct_max = 90;
// The body-rate floor a flag may set: above this an honest client on an ordinary link is refused.
inline constexpr uint32_t body_bytes_per_s_min_max = 64u << 20;
// Accept failing for lack of descriptors or memory is retried after this long, not spun on.
inline constexpr uint32_t accept_retry_ms = 100;
// A loop polls its CQ for at most this long after a turn before it sleeps (Loop::create): past
// a few hundred microseconds a spin only burns a core a sleeping thread would leave to others.
inline constexpr uint32_t busy_poll_us_max = 1'000;
// How long shutdown() waits for the loops to close their connections before it stops them.
inline constexpr uint32_t shutdown_wait_ms = 2'000;

// One operation's record, owned by the caller (see the file comment).
struct Completion {
    using Callback = void (*)(Completion& completion);
    Callback callback = nullptr;
    void* context = nullptr;  // the owner, for the callback
    int32_t result = 0;       // the operation's result: >= 0, or -errno (-ECANCELED, -ETIME)
    bool more = false;        // a multishot operation will complete again
    bool in_flight = false;   // set by Loop from submission until its last callback begins
    alignas(8) unsigned char timespec[16] = {};  // Loop's: a timeout's __kernel_timespec
};

// Work handed to a loop from any thread, intrusive so posting allocates nothing. A task is in at
// most one queue at a time; `run` is called once per post on the loop thread, or with
// `cancelled` when the loop stops first (the task then only releases what it holds).
struct Task {
    using Run = void (*)(Task& task, bool cancelled);
    Run run = nullptr;
    Task* next = nullptr;  // Loop's
};

class Loop {
  public:
    // Sets up a ring of ring_entries and the wake-up eventfd; nullptr and `error` if the kernel
    // refuses (io_uring disabled, out of locked memory). After each turn the loop polls its CQ
    // for up to `busy_poll_us` (at most busy_poll_us_max) before it sleeps; 0: it sleeps at once.
    static std::shared_ptr<Loop> create(std::string& error, uint32_t busy_poll_us = 0);
    ~Loop();
    Loop(const Loop&) = delete;
    Loop& operator=(const Loop&) = delete;

    // Operations (loop thread). Results arrive in `completion.result` as the syscall's would.
    void accept_multishot(Completion& completion, int listen_fd);  // result: the new fd
    // `poll_first`: the caller expects no data yet (it just answered), so the kernel waits for
    // readiness without trying a recv that would only fail with EAGAIN.
    void recv(Completion& completion, int fd, void* buffer, size_t bytes, bool poll_first = false);
    void send(Completion& completion, int fd, const void* buffer, size_t bytes);  // may be partial
    // Connects `fd` (a fresh stream socket) to `address`, which must stay alive and untouched
    // until the callback: result 0 or -errno (-ECONNREFUSED, ...). For the router's upstreams.
    void connect(Completion& completion, int fd, const sockaddr* address, socklen_t length);
    void shutdown_write(Completion& completion, int fd);
    void close(Completion& completion, int fd);
    void timeout(Completion& completion, uint64_t ms);  // result -ETIME when it fires
    // Asks the kernel to cancel `target` (its callback then runs with -ECANCELED, or with its own
    // result if it had already finished). Nothing happens if it is not in flight.
    void cancel(const Completion& target);

    // Runs turns until stop(): submit what callbacks queued and wait for one completion, reap,
    // run the callbacks, run posted tasks. On return, posts are refused and queued tasks are run
    // with `cancelled`. Called once, on the loop's own thread.
    void run();
    // Any thread: run() returns after its current turn.
    void stop();
    // After run() returned (any thread): cancels what is still in flight and waits for the
    // kernel to let go of every completion and buffer, without running callbacks. Then the
    // completions' owners may be freed. run() does it on its own thread before it returns, the
    // only thread a single-issuer ring accepts; a later call from elsewhere finds nothing left
    // (the kernel would refuse it with -EEXIST).
    void cancel_all_and_drain();

    // Any thread. False, and nothing queued, once run() has returned. From another thread the
    // loop is woken by one eventfd write, and only if it sleeps and was not woken already.
    bool post(Task& task);
    // As post(Task&), allocating the task; `fn` is dropped when refused.
    bool post(std::function<void()> fn);

    // Loop thread: the next turn polls its CQ for up to `us` (at most busy_poll_us_max) before it
    // sleeps, whatever `busy_poll_us` says; for a caller that expects a completion within
    // microseconds (the router, having sent a request to a node), so that it comes while the
    // thread still runs rather than by waking it. A longer poll already set wins.
    void poll_next_turn(uint32_t us) {
        poll_once_us_ = std::max(poll_once_us_, std::min(us, busy_poll_us_max));
    }

    // Milliseconds on the steady clock, read once per turn (loop thread).
    uint64_t now_ms() const { return now_ms_; }
    bool in_loop_thread() const;
    uint32_t in_flight() const { return in_flight_; }

  private:
    static void cancel_tasks(Task* task);
    struct Ring;
    struct Ready {
        Completion* completion;
        int32_t result;
        bool more;
    };
    Loop();
    void* get_sqe();
    void prepared(void* sqe, Completion& completion);
    void turn();
    void busy_poll(uint32_t us);
    void reap();
    void run_tasks();
    void arm_wake();
    static void on_wake(Completion& completion);
    void push(Task& task);

    std::unique_ptr<Ring> ring_;
    int event_fd_ = -1;
    Completion wake_;
    uint64_t wake_value_ = 0;
    std::vector<Ready> ready_;  // capacity 2 × ring_entries, reused every turn
    uint64_t now_ms_ = 0;
    uint32_t in_flight_ = 0;
    uint32_t busy_poll_us_ = 0;
    uint32_t poll_once_us_ = 0;  // poll_next_turn's, for the next turn only
    bool disabled_ = false;      // created R_DISABLED: run() enables it on the loop thread
    std::atomic<bool> stop_requested_{false};
    std::atomic<std::thread::id> thread_{};

    // The posted queue: producers on any thread, consumer the loop.
    std::mutex mutex_;
    Task* head_ = nullptr;
    Task* tail_ = nullptr;
    bool refusing_ = false;  // run() returned
    std::atomic<bool> tasks_pending_{false};
    std::atomic<bool> sleeping_{false};   // the loop is (about to be) waiting in the kernel
    std::atomic<bool> signalled_{false};  // an eventfd write is on its way
};

}  // namespace fenec::server
