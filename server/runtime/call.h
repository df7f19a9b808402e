// server/runtime/call.h: what Fenec's one HTTP client shares between its two ways of running (the
// blocking one of server/runtime/client.h, for worker threads; the io_uring one of
// server/runtime/ring_client.h, for loops): a call's request and answer, how far it got, how it
// failed, and the rules both apply, kept here once.
//
// The rules (router.md §5.4–§5.5 in our words):
// - A pooled connection is looked at before a request goes out on it (ConnectionPool::take):
//   idle past a bound, or a non-blocking peek that reads end-of-file or any byte, and it is let go.
//   A `resend_after_sent` request skips the peek on one put back within the pool's trusted_ms.
// - At most one resend per request, always on a fresh connection (resend_reason): a request not
//   wholly sent (or whose connect was refused) goes again whatever it is; one sent whole whose
//   connection ended before any answer byte goes again only when `resend_after_sent` (GET, HEAD,
//   OPTIONS, or a write with an Idempotency-Key), and is otherwise a `may_have_run` failure.
//   A call that timed out is not sent again: its bound is spent.
// - `timeout_ms` bounds the connect and each read or write, but not a stream once its head came.
// - A connection goes back to the pool only after an answer framed by Content-Length (or with no
//   body), without `Connection: close`, and with nothing read past its end (reusable).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/runtime/http.h"

namespace fenec::server {

// One call: a request written whole (http::write_request) to one address.
struct CallRequest {
    std::string peer;       // the far end's name (the router: the node's), for counts and finding
    std::string peer_text;  // how messages name it ("node `n1`"); empty: "`<addr>`"
    std::string about;      // what the call is for (the router: the tenant), to find calls by
    std::string addr;       // host:port, or [v6]:port
    std::string bytes;      // head and body, sent as they are
    bool resend_after_sent = false;  // running it twice is harmless (see the file comment)
    bool head_only = false;          // a HEAD: the answer has no body whatever its length says
    bool allow_stream = false;       // an answer without a length is a stream (else read to end)
    uint64_t timeout_ms = 0;         // each connect, read or write; 0: the client's own bound
    uint64_t body_bytes_max = 0;     // an answer body past it fails `too_large`; 0: none
    // The io_uring client only: sent with the loop's next submission instead of by a send(2) at
    // once. For many calls started together (the query across tenants): an inline send wakes the
    // node, and the kernel may switch to it at the syscall's return, so the loop stalls between
    // one call and the next; queued, a turn's requests all go out in the one io_uring_enter that
    // then waits. A lone call is faster inline (one loop turn less), hence the default.
    bool queue_send = false;
    // The io_uring client only: its loop polls for the answer (RingClientOptions::poll_us) before
    // it sleeps. False for a far end whose answer cannot come within a poll (another region's
    // router, behind the link between regions): the loop sleeps at once, leaving the CPU to what
    // the answer waits on (issue 20, docs/benchmarks.md).
    bool poll_for_answer = true;
};

// An answer's head and, unless `stream`, its whole body.
struct Answer {
    int status = 0;
    std::vector<std::pair<std::string, std::string>> headers;  // as sent, in order
    std::optional<uint64_t> content_length;                    // as the far end said it
    std::string body;                                          // whole, unless `stream`
    bool stream = false;
    bool close = false;  // the far end said Connection: close (or ended the body by closing)

    // The first field named `name` (ASCII case-insensitive).
    std::optional<std::string_view> header(std::string_view name) const;
};

enum class CallFailure : uint8_t {
    unreachable,   // not connected, or not sent, even after the resend
    may_have_run,  // sent whole, the connection ended before an answer, not resendable
    timeout,       // no answer within the bound
    cut,           // the answer began and ended short, or was malformed
    too_large,     // the answer's body passed the request's body_bytes_max
    cancelled,     // ended by its caller (a blocking call's Cancel)
};

// How far a call got: its state while it runs (RingCall::state), where it stopped when it failed.
enum class CallPhase : uint8_t {
    resolving,      // the name looked up
    connecting,     // a connection being made
    sending,        // the request going out
    awaiting_head,  // sent whole, no answer byte yet
    answer,         // the answer's head (or a byte of it) came; its body being read
    streaming,      // an answer without a length, passed on as it comes
    done,
};

std::string_view phase_name(CallPhase phase);  // "resolving", ... for messages and logs

struct CallError {
    CallFailure failure = CallFailure::unreachable;
    CallPhase phase = CallPhase::connecting;
    bool sent_whole = false;  // the request was written whole before it failed (§5.5 hangs on it)
    std::string message;      // said for a client: who, and what happened
};

// What went wrong with one attempt, as either client saw it; call_error says it as a CallError.
enum class Mishap : uint8_t {
    lookup_failed,         // the name did not resolve, or not within the bound
    no_socket,             // socket(2) refused
    connect_refused,       // refused, reset, unreachable
    connect_timed_out,     // no connection within the bound
    send_failed,           // the connection ended mid-request
    send_stalled,          // the far end took nothing of the request within the bound
    no_answer,             // sent whole, no head within the bound
    closed_before_answer,  // sent whole, the connection ended before any answer byte
    answer_cut,            // the answer began and ended short
    malformed_head,        // the answer's head is not HTTP
    answer_stalled,        // the answer began, then nothing came within the bound
    too_large,             // the body passes body_bytes_max
    cancelled,             // the caller ended it before the request was sent whole
    cancelled_after_send,  // the caller ended it once the request was sent whole (awaiting its
                           // answer, or reading it): it may have run
};

// The error `what` comes to for `request`: its failure, phase, whether the request was sent
// whole, and the message. `detail` completes the message (strerror, the resolver's words, the
// codec's refusal, a length); `bound_ms` is the bound that ran out, for the timeouts.
CallError call_error(const CallRequest& request, Mishap what, std::string_view detail = {},
                     uint64_t bound_ms = 0);

// The resend rule: the reason counted when `what` sends the request once more on a fresh
// connection ("unsent" or "idempotent"), or nullptr when the attempt's error stands.
const char* resend_reason(Mishap what, const CallRequest& request, bool resent_already);

// How an answer's body is framed.
enum class Framing : uint8_t {
    none,    // a HEAD's answer, 204, 304: no body whatever the head says
    length,  // Content-Length
    to_end,  // neither length nor stream: read until the far end closes
    stream,  // no length, and the request allows a stream: passed on as it comes
};

Framing framing_of(const http::ResponseHead& head, const CallRequest& request);

// §5.4: a connection may go back to the pool after an answer framed by length (or with none),
// without Connection: close, with nothing read past its end.
bool reusable(Framing framing, bool close, bool read_past_end);

// The answer's head fields (status, headers, length, close) from a parsed head.
Answer answer_of(const http::ResponseHead& head);

// "node `n1` (127.0.0.1:7001)": the far end and its address, for messages.
std::string who(const CallRequest& request);
// "node `n1`", or "`127.0.0.1:7001`" when the request names no peer.
std::string peer_name(const CallRequest& request);
// "60", "0.5": a bound in seconds as a flag takes it, for messages.
std::string seconds_text(uint64_t ms);

// Counts a client's events for whoever keeps metrics (the router: router.md §14). Every member
// may be called from any thread, and from a loop: none may block.
class IdleCount {
  public:
    virtual ~IdleCount() = default;
    virtual void add(int delta) = 0;
};
class ClientObserver {
  public:
    virtual ~ClientObserver() = default;
    // A request sent again, with resend_reason's reason.
    virtual void resent(std::string_view reason) = 0;
    // The io_uring client: an answer's head came `ms` after its request began to go out.
    virtual void answered(uint64_t ms) = 0;
    // The count of idle pooled connections to `peer` (nullptr: not counted). Asked once per
    // address, and again only when another peer name is seen there, never per request.
    virtual IdleCount* idle_count(std::string_view peer) = 0;
};

}  // namespace fenec::server
