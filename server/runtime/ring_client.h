// server/runtime/ring_client.h: the io_uring HTTP client, for loops that must never block (the
// router's forwards and its query across tenants). Its blocking twin for worker threads is
// server/runtime/client.h; both keep the rules of server/runtime/call.h (the peek before reuse,
// one resend on a fresh connection, the deadlines, when a connection goes back to the pool), and
// may share one ConnectionPool.
//
// A call is a small state machine on one loop (server/runtime/loop.h), one I/O completion at a
// time: connect (or a pooled connection looked at first), send, read the head, then the body by
// its length or the stream until it ends. An answer with a length is read whole and handed over
// at once; one without is a stream when the request allows it, its bytes handed over as they
// arrive until either side ends it. `timeout_ms` bounds the connect and each read or write, not a
// stream once its head came: each loop's tick (ring_tick_ms) cancels the operation of a call past
// its deadline. A name is looked up on a helper thread (server/runtime/resolve.h), the loop going
// on meanwhile; the call is handed the answer on its loop, and fails resolving at its deadline
// when none came. Only the first address is tried.
//
// Where a call runs: on the calling thread's loop when it is one of a server's
// (server::serving_loop: a forward crosses no thread) or one of this client's own (a call started
// from another call's callback); else on one of the client's own loops, each on a thread of its
// own. Every CallSink callback runs on that loop thread and must not block. Thread-safe API.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/runtime/call.h"
#include "server/runtime/resolve.h"

namespace fenec::server {

class ConnectionPool;

// The read buffer of one call's recv: an answer head fits (http::head_bytes_max) in a few.
inline constexpr size_t ring_recv_bytes = 64 * 1024;
// Spare room kept past an answer body of known length: a JSON parser reading in 64-byte blocks
// (simdjson's SIMDJSON_PADDING) then takes Answer::body as it is, without a copy.
inline constexpr size_t answer_body_spare_bytes = 64;
// A body up to this length is given its whole room when its head comes; a longer one grows as
// its bytes arrive, so a length a far end claims and never sends reserves nothing big.
inline constexpr size_t answer_body_reserve_max = 1024 * 1024;
// How often each loop looks for calls past their deadline: the timeout's resolution.
inline constexpr uint32_t ring_tick_ms = 50;

// The far end of one call; its callbacks run on the call's loop thread.
class CallSink {
  public:
    virtual ~CallSink() = default;
    // Exactly one of on_answer and on_failure. After an on_answer with `stream`: on_data any
    // number of times, then on_end once (the far end ended it, or the call was cancelled).
    virtual void on_answer(Answer answer) = 0;
    virtual void on_failure(CallError error) = 0;
    virtual bool on_data(std::string bytes) = 0;  // false: the client is gone, stop the stream
    virtual void on_end() = 0;
};

// A call in flight, held by whoever may want to end it early or know how far it got.
class RingCall {
  public:
    virtual ~RingCall() = default;
    // Any thread: ends the call (a stream's on_end follows; an answer not yet given is dropped).
    virtual void cancel() = 0;
    // Any thread: how far the call got (connecting, sending, awaiting the head, answer begun,
    // streaming, done), the one record of its state.
    virtual CallPhase state() const = 0;
    // The request as started (peer, about, addr; its bytes too, kept for a resend).
    virtual const CallRequest& request() const = 0;
    // Any thread: the call taken from its sink where it stands (the router's cut of what is out
    // to a node failed over). On the call's loop, so no answer can slip in between: a call whose
    // answer has begun (not a stream) is left alone and `decided(CallPhase::answer, true)` runs;
    // any other is ended (a stream's on_end follows, its sink hears nothing else) and
    // `decided(phase, sent_whole)` runs once it is, naming where it stopped and whether the
    // request had gone out whole (a send under way when the cut came counted as far as it got).
    // Nothing runs for a call already done or cancelled.
    using CutDecided = std::function<void(CallPhase phase, bool sent_whole)>;
    virtual void cut(CutDecided decided) = 0;
};

struct RingClientOptions {
    uint32_t loops = 1;            // loops of its own, each on a thread
    uint64_t timeout_ms = 60'000;  // a request's timeout_ms when it gives none
    // A loop that sent a request polls this long for its answer before it sleeps
    // (Loop::poll_next_turn).
    uint32_t poll_us = 0;
    std::shared_ptr<ConnectionPool> pool;  // shared with other clients; nullptr: none
    ClientObserver* observer = nullptr;    // optional; outlives the client
    Lookup lookup = system_lookup;         // for names; a test stands in its own
};

class RingClient {
  public:
    // Starts the loops; nullptr and `error` when the kernel refuses a ring.
    static std::unique_ptr<RingClient> create(const RingClientOptions& options, std::string& error);
    virtual ~RingClient() = default;

    // Any thread: the call begins on a loop (see the file comment).
    virtual std::shared_ptr<RingCall> start(CallRequest request,
                                            std::shared_ptr<CallSink> sink) = 0;

    // Stops the loops. Idempotent.
    virtual void stop() = 0;
};

}  // namespace fenec::server
