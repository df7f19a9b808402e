// server/obs/audit.h: the line logs of both binaries (node-http.md §13.3 to §13.5, router.md §15,
// §16) and the request context they carry (§4.1): the writer of JSON lines (LineLog), the lines
// it carries (audit, slow request, span), request ids and W3C trace context.
//
// Every line is one JSON object written by json::Writer (the one JSON writer), so it never holds
// a raw line feed. Times are ISO-8601 UTC that always show milliseconds. A line never holds a
// token or a literal of a statement: the builders take a credential kind, not a credential, and
// statements only as shapes (the node makes them: server/node/statement_shape.h). Nothing here
// reads FenecQL.
//
// LineLog keeps one invariant: `write` never blocks its caller on I/O and never waits for room: a
// line that finds the queue full is dropped and counted. Lines reach the file in the order they
// were accepted, `write_synced` lines included.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "engine/status.h"
#include "json/writer.h"

namespace fenec::obs {

// ---------------------------------------------------------------------------------------------
// Bounds, each with its reason.

// Lines an audit or slow log queues before dropping: a minute of a busy node's refusals, so a
// stalled disk loses lines rather than memory or request time.
inline constexpr size_t audit_queue_lines_max = 65536;
// Lines the span queue holds (§13.5: 4096, dropped and counted when full).
inline constexpr size_t trace_queue_lines_max = 4096;
// Bytes any line queue holds: lines carry statement shapes, so a line count alone does not bound
// memory.
inline constexpr size_t line_queue_bytes_max = 16u << 20;
// How long a queued line may wait before it is written: §13.3 asks for a second; a fifth keeps a
// busy log to a few writes a second.
inline constexpr uint32_t line_flush_interval_ms = 200;
// A client's X-Request-Id is kept up to this many bytes (§4.1).
inline constexpr size_t request_id_bytes_max = 128;
// A tracestate header passed on (§4.1); a longer one is dropped whole (W3C trace context §3.3.1.5
// lets a vendor drop it rather than cut a member).
inline constexpr size_t tracestate_bytes_max = 512;
// ---------------------------------------------------------------------------------------------
// LineLog: JSON lines appended to a file through a bounded queue and one writer thread.

struct LineLogOptions {
    size_t queue_lines_max = audit_queue_lines_max;
    size_t queue_bytes_max = line_queue_bytes_max;
    uint32_t flush_interval_ms = line_flush_interval_ms;  // 1 to 1000
};

class LineLog {
  public:
    // Opens `path` for appending (O_APPEND|O_CREAT, mode 0600) and starts the writer thread; "-"
    // is the process's stderr (left open at close, never fsynced). io_error when it cannot open.
    static engine::Result<std::unique_ptr<LineLog>> open(const std::string& path,
                                                         LineLogOptions options = {});
    ~LineLog();  // close()
    LineLog(const LineLog&) = delete;
    LineLog& operator=(const LineLog&) = delete;

    // Queues one line (without its line feed, which the log adds). Never blocks on I/O: false,
    // and counted as dropped, when the queue is full or the log closed. Written within
    // flush_interval_ms (plus the write itself); not fsynced.
    bool write(std::string line);
    // Writes every queued line, then `line`, then fsyncs the file before returning (a forced
    // promotion's line, §13.3). io_error when a write or the fsync fails (the line is counted as
    // failed), or when the log is closed.
    [[nodiscard]] engine::Status write_synced(std::string line);
    // Writes what is queued and stops the writer thread; later writes are dropped. Idempotent.
    // On stderr, lines it has not taken a second after (a pipe nobody reads) are given up and
    // counted as failed.
    void close();

    uint64_t lines_written() const { return written_.load(std::memory_order_relaxed); }
    // Refused by `write`: the queue was full, or the log closed.
    uint64_t lines_dropped() const { return dropped_.load(std::memory_order_relaxed); }
    // Accepted and then lost to a failed write(2); `last_errno()` says why.
    uint64_t lines_failed() const { return failed_.load(std::memory_order_relaxed); }
    int last_errno() const { return last_errno_.load(std::memory_order_relaxed); }

  private:
    LineLog(int fd, bool owns_fd, bool on_stderr, bool is_socket, LineLogOptions options);
    void run();
    // Writes `lines` (each followed by '\n') in as few write(2) calls as fit; counts them written
    // or failed. Caller holds io_mu_. False on a failed write.
    bool write_lines(std::deque<std::string>& lines);
    // stderr is shared and may stop taking bytes (a pipe or a socket nobody reads): `bytes` are
    // written without blocking where the log can (nonblocking_), waiting for room in slices of
    // kStderrPollMs, and given up once the log has been closing for kStderrCloseGraceMs, so
    // close() never waits on it for ever. 0, or the errno that failed them (EAGAIN: given up).
    int write_stderr(std::string_view bytes);
    // Whether the fd has room (a pipe that polls writable takes PIPE_BUF bytes), waiting for it;
    // false once past the close's grace.
    bool wait_writable();
    static constexpr int kStderrPollMs = 100;
    static constexpr int kStderrCloseGraceMs = 1000;

    const int fd_;
    const bool owns_fd_;      // false for the process's own fd 2
    const bool stderr_;       // fd 2, or a description of its own of the pipe fd 2 is
    const bool socket_;       // stderr is a socket: written with send(MSG_DONTWAIT)
    const bool nonblocking_;  // no write of fd_ blocks (its own O_NONBLOCK description, or send)
    const LineLogOptions options_;

    std::mutex io_mu_;  // held while writing; taken before mu_, never after it (keeps line order)
    std::mutex mu_;     // guards the queue and the flags below
    std::condition_variable wake_;
    std::deque<std::string> queue_;
    size_t queue_bytes_ = 0;
    bool closing_ = false;
    bool closed_ = false;
    std::chrono::steady_clock::time_point give_up_at_{};  // closing: stderr's grace ends
    std::thread writer_;

    std::atomic<uint64_t> written_{0};
    std::atomic<uint64_t> dropped_{0};
    std::atomic<uint64_t> failed_{0};
    std::atomic<int> last_errno_{0};
};

// ---------------------------------------------------------------------------------------------
// The lines.

// A JSON scalar for an extra field of a line: null, a boolean, an integer, a float or a text.
class JsonScalar {
  public:
    JsonScalar(std::nullptr_t) {}                           // NOLINT: implicit on purpose
    JsonScalar(bool v) : v_(v) {}                           // NOLINT
    JsonScalar(int v) : v_(int64_t{v}) {}                   // NOLINT
    JsonScalar(unsigned v) : v_(uint64_t{v}) {}             // NOLINT
    JsonScalar(int64_t v) : v_(v) {}                        // NOLINT
    JsonScalar(uint64_t v) : v_(v) {}                       // NOLINT
    JsonScalar(double v) : v_(v) {}                         // NOLINT: finite only
    JsonScalar(std::string_view v) : v_(std::string(v)) {}  // NOLINT
    JsonScalar(const char* v) : v_(std::string(v)) {}       // NOLINT
    JsonScalar(std::string v) : v_(std::move(v)) {}         // NOLINT

    using Rep = std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string>;
    const Rep& rep() const { return v_; }

  private:
    Rep v_;
};

// One extra member of a line, written after the common ones in the order given.
struct JsonField {
    std::string key;
    JsonScalar value;
};

// Millisecond UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`: json::format_timestamp's text, with `.000`
// added when it leaves the milliseconds out. `ms` within ql's timestamp range.
std::string iso_time_ms(int64_t ms);

// A text member, or null when the text is empty: the audit line's and the access line's.
void string_or_null(json::Writer& w, std::string_view key, std::string_view value);

// Who asked (§13.3), by the credential's kind: never the credential itself.
enum class Credential : uint8_t { none, data, admin, replication, jwt };
std::string_view credential_name(Credential c);  // "none", "data", ...

struct AuditWho {
    Credential credential = Credential::none;
    std::string_view sub = {};     // a JWT's subject; omitted when empty
    std::string_view tenant = {};  // a JWT's tenant; omitted when empty
};

// The node's events (node-http.md §13.3) and the router's (router.md §15; `refused` and `admin`
// are both's).
// The router's own besides: failover, force (a forced promotion), lease_record, fenced (§15).
// The node's own, asked by no one: compact (a background compaction, §11.4).
enum class AuditEvent : uint8_t {
    refused,
    admin,
    lease,
    promote,
    schema,
    query,
    failover,
    force,
    lease_record,
    fenced,
    compact,
};
std::string_view audit_event_name(AuditEvent e);  // "refused", ...

// The members every audit line has (node-http.md §13.3, router.md §15), then the event's own.
// One builder for both binaries' lines.
struct AuditLine {
    int64_t at_ms = 0;  // wall clock, UTC ms
    AuditEvent event = AuditEvent::refused;
    // Who asked: every node line has it. The router's lines have none (router.md §15): the router
    // holds no keys, and its own token is the only credential it takes.
    std::optional<AuditWho> who;
    std::string_view peer;  // "127.0.0.1:51234"
    std::string_view via;   // the router it came through; null when empty (direct)
    std::string_view request_id;
    // The event's fields. The node's (§13.3's table): refused `method`, `path` (no query
    // string), `status`, `why`; admin `method`, `path`, `tenant`, `status`; lease `authority`,
    // `term`, `status`; promote `tenant`, `history`, `seq`, `forced`; schema `tenant`,
    // `statement` (a node::statement_shape), `status`. The router's (router.md §15): refused
    // `method`, `path`; admin `method`, `path`, `status`; query `status`, `merge`, `partial`,
    // `tenants`, `asked`, `failed`, `not_asked`, `rows`, `bytes`, `ms`, `statement` (the hex16 of
    // the text's XXH3-64, never the text).
    std::vector<JsonField> fields;
};

// `{"at":…,"event":…[,"who":{"credential":…[,"sub","tenant"]}],"peer":…,"via":…,
// "request_id":…,<fields>}`, without a line feed.
std::string audit_line(const AuditLine& line);

// One request at or over `--slow-ms` (§13.4).
struct SlowRequest {
    int64_t at_ms = 0;
    std::string_view request_id;
    std::string_view peer;
    std::string_view route;   // the metrics' route label: "query", "rest", ...
    std::string_view tenant;  // null when empty (not a tenant's request)
    int status = 0;
    int64_t ms = 0;
    std::string_view statement;  // a node::statement_shape; null when empty (no statement)
};

// `{"at":…,"event":"slow","request_id":…,"peer":…,"route":…,"tenant":…,"status":…,"ms":…,
// "statement":…}`, without a line feed.
std::string slow_line(const SlowRequest& r);

// ---------------------------------------------------------------------------------------------
// Request ids and trace context (§4.1, §13.5).

// The request's id: `sent` (a client's X-Request-Id) when it is 1 to request_id_bytes_max bytes
// of 0x20 to 0x7E, else `random` as 16 lower-case hex digits.
std::string request_id(std::optional<std::string_view> sent, uint64_t random);

// A W3C traceparent, version 00 (https://www.w3.org/TR/trace-context/ §3.2).
struct TraceParent {
    std::string trace_id;   // 32 lower-case hex digits, not all zero
    std::string parent_id;  // 16 lower-case hex digits, not all zero
    bool sampled = false;   // flags bit 0
};

// `00-<32 hex>-<16 hex>-<2 hex>`, exactly, lower-case hex, neither id all zeros; nullopt for
// anything else (another version included: §4.1 takes version 00 only, a malformed one ignored).
std::optional<TraceParent> parse_traceparent(std::string_view header);
// `00-<trace_id>-<parent_id>-01` (or `-00` when not sampled): what a hop sends on.
std::string format_traceparent(const TraceParent& t);
// The tracestate header to pass on: `header` when at most tracestate_bytes_max bytes, else none.
std::optional<std::string_view> pass_tracestate(std::string_view header);

// A fresh id: 16 hex digits from `random` (a span id), 32 from `hi` and `lo` (a trace id). An
// all-zero id is invalid in W3C trace context; zero input gives ...01 instead.
std::string span_id(uint64_t random);
std::string trace_id(uint64_t hi, uint64_t lo);

// Whether a request is traced (§13.5): always when its traceparent is sampled, otherwise with
// probability `sample` (0 to 1), decided by `random`.
bool should_trace(const std::optional<TraceParent>& parent, double sample, uint64_t random);

// One finished span (§13.5).
struct Span {
    std::string_view trace_id;   // 32 hex
    std::string_view span_id;    // 16 hex
    std::string_view parent_id;  // 16 hex; omitted when empty (a root span)
    std::string_view name;       // "POST /t/{tenant}/query", "open", "execute", ...
    int64_t start_ms = 0;        // wall clock, UTC ms
    int64_t us = 0;              // duration in microseconds
    std::string_view request_id;
    std::vector<JsonField> attrs;  // written under "attrs" in the order given
};

// `{"trace":…,"span":…,"parent":…,"name":…,"start":…,"us":…,"request_id":…,"attrs":{…}}`,
// without a line feed.
std::string span_line(const Span& s);

}  // namespace fenec::obs
