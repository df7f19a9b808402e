// server/runtime/http_server.h: an HTTP/1.1 server over the io_uring loops (server/runtime/loop.h),
// shared by fenec-node and fenec-shard. It owns connections and framing; what a request means is
// the Handler's. Requests run wherever the handler sends them (the node: its worker pool), so a
// long statement never stalls a loop; the answer comes back through an Exchange from any thread.
//
// Per connection (node-http.md §2.1): keep-alive; pipelined requests are read one at a time and
// answered strictly in order (the next head is parsed only once the answer before it is sent);
// a head over http::head_bytes_max or with too many fields → 431; a body judged from
// Content-Length against the Handler's check before any body byte is read (413 names both
// sizes); `Expect: 100-continue` answered after that check, or for a streamed body
// (HeadVerdict::stream_body) only when the handler first asks for it, so a handler that refuses
// from the head (a missing credential) answers with no 100 sent and no body byte read; silent
// between requests for `idle_timeout_ms` → closed with no answer; silent part-way through a request
// as long → 408; a head not whole `head_timeout_ms` after its first byte → 408 however many bytes
// came; a body slower than `body_bytes_per_s_min` (after a grace of head_timeout_ms) → 408; an
// answer the peer does not read within `send_timeout_ms` → cut. After an answer to a request it
// could not frame (400, 411, 413, 431, 501), or whose body it did not read, it closes.
//
// Admission (slow clients must not lock others out): over `connections_per_peer_max` from one
// client address a new connection gets 503 (reason per_address). A connection is *proven* once
// it has sent a whole request; `connections_reserved_pct` of connections_max is kept for proven
// ones (the router's pooled keep-alives, clients between requests), so connections that have not
// sent a whole request yet hold at most the rest. When a newcomer finds no slot, the oldest
// unproven connection older than head_timeout_ms/2 is evicted for it (408, or closed if it sent
// nothing); if none is, the newcomer gets 503 `Retry-After: 1` (reason connections) and is closed.
//
// Threads (server/runtime/http_server.cc): one listener, accepted on loop 0 (multishot) and handed
// to the loops round-robin, so `loops` connections spread evenly whatever their addresses; a
// connection then lives on its loop alone. Every bound (buffers, queues, lingering close) is listed
// in server/runtime/loop.h. An answer that closes shuts the write side first and drops what the
// peer still sends for a moment (linger_ms), so the answer is not destroyed by a reset.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "server/runtime/http.h"
#include "server/runtime/version.h"

namespace fenec::server {

class Loop;

struct Request {
    http::RequestHead head;
    std::string body;
    std::string peer;         // "127.0.0.1:51234"
    uint64_t connection = 0;  // id of the connection, unique per server run
};

// One piece of a streamed request body (HeadVerdict::stream_body), in order. `last`: the body is
// whole with these bytes. `failed`: the body will not be whole (the peer closed or was cut
// part-way, or timed out: `error` says which); no more chunks come and no answer can be sent.
struct BodyChunk {
    std::string bytes;
    // read_body_into: the bytes written into the caller's buffer (`bytes` is empty).
    size_t filled = 0;
    bool last = false;
    bool failed = false;
    std::string error;
};

// The far end of one request's answer. Thread-safe: any thread may call it; the connection's loop
// does the writing. A plain answer is `reply` (once). A stream is `start` (its head, sent with no
// Content-Length), then `write` any number of times, then `end`; the connection closes after it.
class Exchange {
  public:
    virtual ~Exchange() = default;
    virtual void reply(http::Response response) = 0;
    virtual void start(http::Response head) = 0;
    // Queues `bytes` on a started stream; false when the stream is gone (the peer closed, or
    // more than `stream_buffer_max` bytes wait unsent: the caller ends it as `slow`).
    // Precisely: refused when bytes already wait and these would take them past the bound, so
    // one event larger than the bound still goes when nothing waits; false too before start()
    // and after end(). A refused write queues nothing.
    virtual bool write(std::string bytes) = 0;
    virtual void end() = 0;
    // True once the peer has closed or the connection was cut; `on_close` runs (on the loop
    // thread) when that happens, at most once, and at once if it already has.
    // The exchange watches its connection until its reply is handed over, or for a stream until
    // the connection ends (end() included); after a reply it no longer changes. A peer that
    // half-closes after its request still gets the reply. If the loop is already gone (after
    // shutdown), a late on_close runs on the caller's thread.
    virtual bool closed() const = 0;
    virtual void on_close(std::function<void()> fn) = 0;
    // Bytes queued on a stream and not yet sent.
    virtual size_t pending_bytes() const = 0;
    // A stream's bytes handed to the kernel so far (its socket's send queue), a running total
    // from the first write: `fn` runs on the connection's loop thread after each send that
    // advanced it, with the new total. What a stream must know is on the wire (a replication
    // feed's block, before the write it carries is answered) is known by it. Set before start().
    virtual void on_stream_sent(std::function<void(uint64_t sent_total)> fn) = 0;
    // A streamed body (HeadVerdict::stream_body): asks for its next chunk (at most
    // body_chunk_bytes_max, server/runtime/loop.h). `fn` runs once, on the loop thread, with the
    // bytes that came next (those already read first), or with `failed`; at once on the caller's
    // thread if the connection is already gone. Any thread. Backpressure: the connection reads
    // no body byte while no read_body is outstanding, so the handler holds at most one chunk.
    // After `last` or `failed`, or for a body not streamed, `fn` gets `failed` at once. The
    // handler may reply before the body is whole; the connection then closes after the answer.
    virtual void read_body(std::function<void(BodyChunk)> fn) = 0;
    // As read_body, but the bytes land in `into`: the connection receives straight into it, recv
    // after recv on its loop with no hop to the handler between them, until it is full or the
    // body ends; then `fn` gets the count in `filled` (`bytes` empty). For a large body the
    // handler keeps whole (an image installed from memory): nothing is copied out of a chunk and
    // the network is read at the loop's pace. `owner` keeps `into` alive for as long as a recv
    // into it may be in flight, which can outlast a `failed` callback (the connection cut).
    virtual void read_body_into(std::span<char> into, std::shared_ptr<const void> owner,
                                std::function<void(BodyChunk)> fn) = 0;
};

// One request answered, as its connection saw it on the wire (ServerOptions::report_answers):
// what an access log writes. The views live for the call only.
struct Answered {
    std::string_view peer;
    std::string_view method;  // as sent; empty when no head was read (a framing error, admission)
    std::string_view target;  // as sent, query string included; empty with `method`
    int status = 0;
    uint64_t bytes_in = 0;   // request body bytes read
    uint64_t bytes_out = 0;  // answer bytes handed to the kernel, head included
    // From the head read (or, with no head, the answer written) to the answer's last byte
    // handed to the kernel: a stream's whole life.
    uint64_t us = 0;
    std::string_view request_id;  // the answer's X-Request-Id; empty when it has none
    bool stream = false;
    // False when the connection was cut with bytes of the answer still unsent. A stream the
    // peer closes after taking every byte sent to it is complete.
    bool complete = true;
};

// What the handler says of a head before any body byte is read.
struct HeadVerdict {
    std::optional<http::Response> refuse;   // answered at once; the body is not read, it closes
    uint64_t body_bytes_max = 64ull << 20;  // the body bound for this route (413 past it)
    // The body is not read into Request::body: handle() gets the request at once (body empty,
    // its length in head.content_length) and pulls the body through Exchange::read_body.
    // Ignored when the request has no body. `100 Continue`, if asked for, is sent only once the
    // handler asks for the body: a handler that answers without asking refuses before any body
    // byte is read (the connection then closes).
    bool stream_body = false;
};

class Handler {
  public:
    virtual ~Handler() = default;
    // On the loop thread, fast: route, credential, limits. No disk, no lock held long.
    virtual HeadVerdict check_head(const Request& request) = 0;
    // On the loop thread once the body is read; must hand slow work elsewhere and answer through
    // `exchange`, which stays valid as long as the shared_ptr is held.
    virtual void handle(Request request, std::shared_ptr<Exchange> exchange) = 0;
    // A connection refused at admission: the answer it gets (503). `reason` is "connections"
    // (connections_max, or the share not reserved for proven connections) or "per_address"
    // (connections_per_peer_max).
    virtual http::Response over_capacity(std::string_view reason) = 0;
    // Told of each connection the server cut for being slow or to make room, for a metric:
    // "slow_head", "slow_body" (each answered 408), "evicted". On a loop thread; the default
    // does nothing.
    virtual void on_refused(std::string_view reason);
    // An answer the server writes on its own, to a request it could not frame or a client too
    // slow: 400/505 (malformed), 408 (silent part-way), 411 (Transfer-Encoding), 413 (body over
    // HeadVerdict::body_bytes_max), 431 (head too large), 501 (unknown method). `message` names
    // the problem. The default is `{"error":"<message>"}`; the node may override it to add its
    // answer headers. The connection closes after it whatever `close` says. On the loop thread.
    virtual http::Response framing_error(int status, std::string_view message);
    // With ServerOptions::report_answers, once per answer the connection wrote, when its last
    // byte was handed to the kernel, or the connection was cut first (`complete` false), or, for
    // a stream, when it ended. On the loop thread, so it must not block: queue and return (an
    // access log's LineLog). The default does nothing.
    virtual void on_answered(const Answered& answered);
};

struct ServerOptions {
    std::string listen = "127.0.0.1:8081";  // host:port; port 0 picks one (see port())
    uint32_t loops = 1;                     // io_uring loops, each on its own thread
    uint32_t connections_max = 1024;        // 0: no limit
    uint32_t idle_timeout_ms = 60'000;      // 0: never
    uint32_t send_timeout_ms = 30'000;      // an answer or stream unread this long: cut
    // A head not whole this long after its first byte: 408 (0: off; at most head_timeout_ms_max).
    uint32_t head_timeout_ms = 5'000;
    // A body read slower than this on average, past a grace of head_timeout_ms: 408 (0: off).
    // A streamed body is timed only while its handler asks for bytes.
    uint32_t body_bytes_per_s_min = 4'096;
    uint32_t connections_per_peer_max = 64;  // from one client address (IP); 0: no limit
    // Share of connections_max (percent, at most connections_reserved_pct_max) that connections
    // which have not sent a whole request yet may not take.
    uint32_t connections_reserved_pct = 25;
    // Newcomers past connections_max answered 503 at once, each on a descriptor of its own until
    // its client has read the answer (at most linger_ms); more are closed unanswered at once. A
    // process with few descriptors sets it lower: a burst that ran it out of descriptors would
    // leave newcomers in the kernel's backlog, answered nothing until one frees.
    uint32_t refusals_max = 64;
    size_t stream_buffer_max = 1 << 20;  // bytes a stream may hold unsent (node-http.md §5.4)
    std::string server_header = "fenec-node/" + std::string(fenec_version);
    // Each loop polls for completions this long after a turn before it sleeps (Loop::create):
    // the next request of a kept-alive connection is then picked up without a thread wake-up.
    uint32_t busy_poll_us = 0;
    // Handler::on_answered is called for every answer (an access log): each request's method
    // and target are kept until its answer is out. Off: nothing is kept, nothing called.
    bool report_answers = false;
};

// The loop of the calling thread when it is one of an HttpServer's (so inside a Handler
// callback), else an empty pointer. A handler may start I/O of its own on it (the router's calls
// to nodes), and so answer without handing the request to another thread and back.
const std::shared_ptr<Loop>& serving_loop();

class HttpServer {
  public:
    // Binds and listens (so port() is known) but serves nothing until start().
    static std::unique_ptr<HttpServer> bind(const ServerOptions& options, Handler& handler,
                                            std::string& error);
    virtual ~HttpServer() = default;
    virtual uint16_t port() const = 0;
    virtual void start() = 0;  // the loops' threads begin
    // Stops accepting (the listener closes); connections already open go on being served.
    virtual void stop_accepting() = 0;
    // Open connections (streams and idle keep-alives included).
    virtual uint32_t connections() const = 0;
    // Of those, the ones that have not sent a whole request yet.
    virtual uint32_t connections_unproven() const = 0;
    // Of those, the ones with something under way: a request begun and not yet answered whole,
    // or a stream. Idle keep-alives are not counted, so a drain can wait on this alone. Asked of
    // every loop in turn: never from a loop thread (a Handler callback). connections() when a
    // loop does not answer within a second, or before start() and after shutdown().
    virtual uint32_t busy_connections() = 0;
    // Closes every connection and joins the loops' threads. Idempotent.
    // Not from a loop thread (a Handler callback). Connections still open after shutdown_wait_ms
    // (server/runtime/loop.h) are closed regardless.
    virtual void shutdown() = 0;
};

}  // namespace fenec::server
