// server/runtime/client.h: the blocking HTTP client, for threads that may wait (the router's API
// workers and its admin calls, a move's image, a node's follower; lease grants and a standby's
// directory stream later). Its io_uring twin for loops is server/runtime/ring_client.h; both keep
// the rules of server/runtime/call.h, and may share one ConnectionPool.
//
// A call is bounded three ways, whichever comes first: CallRequest::timeout_ms bounds the connect
// and each read or write (not the wait for a stream's next bytes, which read_some bounds itself);
// Until::deadline bounds the whole call — name lookup, connect, send, answer — as a lease grant
// needs (a third of the lease, lookup included); Until::cancel ends it from another thread. A name
// is looked up on a helper thread and waited for only until the deadline (server/runtime/
// resolve.h), and each of its addresses is tried in turn. A failure says its phase (resolving,
// connecting, sending, awaiting the head, answer) and whether the request was sent whole.
//
// Every descriptor stays in blocking mode (so the pool can hand it to either client); each wait is
// a poll(2) on it and on the Cancel, and each read or write is MSG_DONTWAIT after it. (A relay's
// two are in O_NONBLOCK for its length alone: a splice has no MSG_DONTWAIT of its own.) The client
// itself holds no thread and no state but its pool: thread-safe. A Connection is one thread's at a
// time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/runtime/call.h"
#include "server/runtime/resolve.h"

namespace fenec::server {

class Cancel;
class ConnectionPool;

using Clock = std::chrono::steady_clock;

// What ends a blocking call besides its per-operation timeout.
struct Until {
    Clock::time_point deadline = Clock::time_point::max();  // the whole call
    const Cancel* cancel = nullptr;                         // optional; outlives the call
};

struct CallResult {
    std::optional<Answer> answer;  // the whole answer, or
    CallError error;               // why there is none
};

// One connection to one address, for the caller that reads and writes it itself (a stream, a
// body relayed from another connection). Made by BlockingClient::connect or ::open; its reads and
// writes keep the bounds of the call that made it.
class Connection {
  public:
    ~Connection();  // closes it
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Writes `bytes` whole; a failure is Mishap::send_failed (unsent, as far as we know).
    bool send(std::string_view bytes, CallError& error);
    // The next answer head, its bytes taken from what was read; a 1xx is returned only when
    // `informational` (an `Expect: 100-continue`'s 100), else passed over.
    bool read_head(http::ResponseHead& head, CallError& error, bool informational = false);
    // The next `n` body bytes, whole, into `out`.
    bool read_body(uint64_t n, std::string& out, CallError& error);

    enum class Read : uint8_t { data, end, timed_out, cancelled, failed };
    // A stream's next bytes, appended to `out` (what was read past the head comes first): data,
    // or the far end ended it, or nothing came within `timeout_ms` (0: no bound but the call's
    // deadline), or the call was cancelled, or the connection failed.
    Read read_some(std::string& out, uint64_t timeout_ms);
    // What has already arrived, appended to `out` whatever the call's Cancel says: data, or
    // timed_out when nothing came, or end, or failed. Waits up to `wait_ms` for bytes when none
    // have arrived (0: not at all). A follower being promoted keeps what its primary put on the
    // wire before it stopped (node-http.md §8.6), and the rest of a frame part-way in.
    Read read_now(std::string& out, uint64_t wait_ms = 0);
    // Bytes this end has received and not yet handed out: what read_now would give without the
    // far end sending more (FIONREAD on the socket, and what was read past the last answer).
    size_t received_unread() const;

    // Passes `bytes` body bytes from this connection on to `target` (a move: the image of its
    // source's GET into its target's PUT): what was read past the head first, then through a pipe
    // with splice(2), so they never enter this process's memory, or — where the kernel will not
    // splice these sockets — through one buffer of relay_buffer_bytes. Both sockets are in
    // O_NONBLOCK for the relay (blocking again after it), so each wait is a poll(2) on the one
    // being waited for and on both connections' Cancels: either Cancel ends the relay at once,
    // wherever it is. Each wait is bounded by its own connection's bound (its timeout_ms, its
    // call's deadline). On failure, whose it was.
    struct RelayFailure {
        // This connection ended, stalled or was cancelled; else `target` refused the bytes,
        // stalled or was cancelled.
        bool source = false;
        std::string message;
    };
    std::optional<RelayFailure> relay_to(Connection& target, uint64_t bytes);

    const CallRequest& request() const { return request_; }
    int fd() const { return fd_; }

  private:
    friend class BlockingClient;
    // What went wrong last, said as call_error says it.
    struct Trouble {
        Mishap what = Mishap::answer_cut;
        std::string detail;
        uint64_t bound_ms = 0;
    };
    Connection(int fd, const CallRequest& request, const Until& until, Clock::time_point began);
    bool failed(Mishap what, std::string detail = {}, uint64_t bound_ms = 0);  // false
    CallError error() const;
    // The end of the next wait (see bound_of in client.cc).
    Clock::time_point bound(uint64_t timeout_ms, uint64_t& bound_ms) const;
    bool send_all(std::string_view bytes);
    // Some bytes into in_: false at the end, a failure or the bound, with trouble_ said for the
    // answer as far as `head_began` says it got.
    bool fill(bool head_began);
    bool next_head(http::ResponseHead& head, bool informational);
    bool read_exactly(uint64_t n, std::string& out);
    bool read_to_end(std::string& out);
    std::optional<RelayFailure> splice_to(Connection& target, uint64_t& left, uint64_t total);
    std::optional<RelayFailure> copy_to(Connection& target, uint64_t& left, uint64_t total);
    // The relay's one wait: for `events` on `target` (`on_target`) or on this connection, within
    // that connection's bound, ended by either connection's Cancel. Nothing when ready.
    std::optional<RelayFailure> relay_wait(Connection& target, bool on_target, short events);
    // The relay's failure when either Cancel was cancelled: that one's side (both: the side
    // `on_target` says was waited for).
    std::optional<RelayFailure> relay_cancelled(const Connection& target, bool on_target) const;
    // `bytes` written whole to `target`, each wait relay_wait's.
    std::optional<RelayFailure> relay_send(Connection& target, std::string_view bytes);
    RelayFailure relay_cut(uint64_t left, uint64_t total, int error) const;  // errno or 0
    static RelayFailure relay_refused(const Connection& target, int error);  // errno or 0
    int release() {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }

    int fd_ = -1;
    CallRequest request_;  // `bytes` left empty: the call's identity and bounds
    const Until until_;
    const Clock::time_point began_;  // the call's start, for what its deadline amounts to
    std::string in_;                 // read and not yet taken
    Trouble trouble_;
    // The whole request went (BlockingClient's call and open): a cancel while its answer is read
    // says it may have run. A caller sending a request in parts itself (a head, then its body
    // once the 100 came) leaves it false.
    bool sent_whole_ = false;
};

// Bytes of a relayed body in this process's hands at once: the pipe's size (or the buffer's
// where splice is not to be had), so a relay of any size holds this much.
inline constexpr size_t relay_buffer_bytes = 1 << 20;

class BlockingClient {
  public:
    struct Options {
        std::shared_ptr<ConnectionPool> pool;  // shared with other clients; nullptr: none
        Lookup lookup = system_lookup;         // for names; a test stands in its own
        uint64_t timeout_ms = 60'000;          // a request's timeout_ms when it gives none
        ClientObserver* observer = nullptr;    // resends counted; optional; outlives the client
    };
    explicit BlockingClient(Options options);

    // The whole answer (one without a length read to its end), or why there is none, with the
    // resend rules applied (at most one resend, on a fresh connection). The connection goes back
    // to the pool when the answer leaves it reusable.
    CallResult call(const CallRequest& request, const Until& until = {});

    // The answer's head, the connection left to read its body as it comes (read_some): a stream
    // (a follower's feed). The resend rules apply until the head came.
    struct Opened {
        std::optional<Answer> head;  // body empty: what came with the head stays in `connection`
        std::unique_ptr<Connection> connection;
        CallError error;  // when no head
    };
    Opened open(const CallRequest& request, const Until& until = {});

    // A fresh connection of its own to the request's address (never from the pool, never put
    // back), nothing sent: for a caller that writes its own request and relays a body.
    std::unique_ptr<Connection> connect(const CallRequest& request, const Until& until,
                                        CallError& error);

  private:
    // A connection whose answer head came, or the trouble of the last attempt.
    bool head_of(const CallRequest& request, const Until& until, Clock::time_point began,
                 std::unique_ptr<Connection>& conn, http::ResponseHead& head, CallError& error);
    std::unique_ptr<Connection> attempt(const CallRequest& request, const Until& until,
                                        Clock::time_point began, bool fresh,
                                        http::ResponseHead& head, Connection::Trouble& trouble);
    std::unique_ptr<Connection> dial(const CallRequest& request, const Until& until,
                                     Clock::time_point began, Connection::Trouble& trouble);
    CallRequest bounded(const CallRequest& request) const;  // timeout_ms filled in

    Options options_;
};

}  // namespace fenec::server
