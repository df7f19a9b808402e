// shard/upstream.h: the router's connections to nodes (router.md §5.4, §5.5): requests sent byte
// for byte over pooled keep-alive connections on io_uring loops of their own
// (server/runtime/loop.h), the answer read with the one HTTP codec (http::parse_response_head), and
// the resend rules of seed 001 applied where a connection fails.
//
// Rules kept here:
// - A pooled connection is looked at before a request goes out on it: idle past `idle_ms`, or a
//   non-blocking peek that reads end-of-file or any byte, and it is closed, not used.
// - At most one resend per request, always on a fresh connection: a request not wholly sent (or
//   whose connect failed) goes again whatever it is; one sent whole whose connection ended before
//   any answer byte goes again only when `resend_after_sent` (GET, HEAD, OPTIONS, or a write with
//   an Idempotency-Key), and is otherwise a `may_have_run` failure.
// - `timeout_ms` bounds the connect and each read or write, but not a stream once its head came.
// - A connection goes back to the pool only after an answer framed by Content-Length (or with no
//   body), without `Connection: close`, and with nothing read past its end.
// - An answer with a length is read whole and handed over at once; one without is a stream when
//   `allow_stream`, its bytes handed over as they arrive until either side ends it.
//
// Threads: `loops` loops each on a thread of its own; a call lives on one loop from start to end.
// Every UpstreamSink callback runs on that loop thread and must not block. Thread-safe API.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/runtime/http.h"

namespace fenec::obs {
class CounterFamily;
class GaugeFamily;
class HistogramFamily;
}  // namespace fenec::obs

namespace fenec::shard {

// The read buffer of one call's recv: an answer head fits (http::head_bytes_max) in a few.
inline constexpr size_t upstream_recv_bytes = 64 * 1024;
// Spare room kept past an answer body of known length: a JSON parser reading in 64-byte blocks
// (simdjson's SIMDJSON_PADDING) then takes UpstreamAnswer::body as it is, without a copy.
inline constexpr size_t upstream_body_spare_bytes = 64;
// A body up to this length is given its whole room when its head comes; a longer one grows as
// its bytes arrive, so a length a node claims and never sends reserves nothing big.
inline constexpr size_t upstream_body_reserve_max = 1024 * 1024;
// How often each upstream loop looks for calls past their deadline: the timeout's resolution.
inline constexpr uint32_t upstream_tick_ms = 50;

struct UpstreamRequest {
    std::string node;          // the node's name, for messages and metric labels
    std::string addr;          // host:port
    std::string bytes;         // the whole request: head and body, sent as they are
    bool resend_after_sent = false;  // running it twice is harmless (see the file comment)
    bool head_only = false;    // a HEAD: the answer has no body whatever its length says
    bool allow_stream = false; // an answer without a length is a stream (else read to its end)
    uint64_t timeout_ms = 0;   // this call's bound in place of UpstreamOptions::timeout_ms; 0: it
    uint64_t body_bytes_max = 0;  // an answer body past it fails `too_large` as it is read; 0: none
    // Sent with the loop's next submission instead of by a send(2) at once. For many calls
    // started together (the query across tenants): an inline send wakes the node, and the
    // kernel may switch to it at the syscall's return, so the loop stalls between one call and
    // the next; queued, a turn's requests all go out in the one io_uring_enter that then waits.
    // A lone call is faster inline (one loop turn less), hence the default.
    bool queue_send = false;
};

struct UpstreamAnswer {
    int status = 0;
    std::vector<std::pair<std::string, std::string>> headers;  // as the node sent them, in order
    std::optional<uint64_t> content_length;                    // as the node said it
    std::string body;     // whole, unless `stream`; a stream's first bytes come through on_data
    bool stream = false;
    bool close = false;   // the node said Connection: close
};

enum class UpstreamFailure : uint8_t {
    unreachable,   // not connected, or not sent, even after the resend
    may_have_run,  // sent whole, the connection ended before an answer, not resendable
    timeout,       // no answer within the timeout
    cut,           // the answer began and ended short
    too_large,     // the answer's body passed the request's body_bytes_max
};

// The far end of one call; its callbacks run on the call's loop thread.
class UpstreamSink {
  public:
    virtual ~UpstreamSink() = default;
    // Exactly one of on_answer and on_failure. After an on_answer with `stream`: on_data any
    // number of times, then on_end once (the node ended it, or the call was cancelled).
    virtual void on_answer(UpstreamAnswer answer) = 0;
    virtual void on_failure(UpstreamFailure failure, std::string message) = 0;
    virtual bool on_data(std::string bytes) = 0;  // false: the client is gone, stop the stream
    virtual void on_end() = 0;
};

// A call in flight, held by whoever may want to end it early.
class UpstreamCall {
  public:
    virtual ~UpstreamCall() = default;
    // Any thread: ends the call (a stream's on_end follows; an answer not yet given is dropped).
    virtual void cancel() = 0;
};

struct UpstreamOptions {
    uint32_t loops = 1;
    uint64_t timeout_ms = 60'000;
    uint64_t idle_ms = 30'000;
    uint32_t pool_max = 32;
    // A loop that sent a request polls this long for its answer before it sleeps (RouterOptions).
    uint32_t poll_us = 0;
    // Metrics, optional: retries_total{reason}, upstream_idle_connections{node},
    // upstream_duration_seconds.
    obs::CounterFamily* retries = nullptr;
    obs::GaugeFamily* idle_connections = nullptr;
    obs::HistogramFamily* duration = nullptr;
};

class Upstream {
  public:
    // Starts the loops; nullptr and `error` when the kernel refuses a ring.
    static std::unique_ptr<Upstream> create(const UpstreamOptions& options, std::string& error);
    virtual ~Upstream() = default;

    // Any thread: the call begins on one of the loops.
    virtual std::shared_ptr<UpstreamCall> start(UpstreamRequest request,
                                                std::shared_ptr<UpstreamSink> sink) = 0;

    // Blocking, from any thread but an upstream loop's: the whole answer, or a failure.
    struct Whole {
        std::optional<UpstreamAnswer> answer;
        UpstreamFailure failure = UpstreamFailure::unreachable;
        std::string message;  // the failure's
    };
    virtual Whole call(UpstreamRequest request) = 0;

    // Stops the loops and closes the pooled connections. Idempotent.
    virtual void stop() = 0;
};

// `METHOD target HTTP/1.1` and headers for a call of the router's own to a node (the admin
// plane): Host, Authorization: Bearer <token>, Content-Length, keep-alive, X-Request-Id.
std::string admin_request(std::string_view method, std::string_view target, std::string_view addr,
                          std::string_view token, std::string_view body,
                          std::string_view request_id);

}  // namespace fenec::shard
