// server/runtime/client.cc: the blocking HTTP client of server/runtime/client.h. A call: a pooled
// connection looked at (or a fresh one dialled: the name looked up within the bound, each address
// tried in turn), the request written, the head read with the one codec, then the body by its
// framing; a failed attempt goes through resend_reason once (server/runtime/call.h). Every wait is
// wait_for (server/runtime/cancel.h): the descriptor and the Cancel, to the nearer of the
// operation's timeout and the call's deadline.
#include "server/runtime/client.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "server/runtime/cancel.h"
#include "server/runtime/pool.h"

namespace fenec::server {

namespace {

// One recv: an answer head fits (http::head_bytes_max) in one.
constexpr size_t recv_bytes = 64 * 1024;
// A body up to this length is given its whole room when its head comes; a longer one grows as
// its bytes arrive, so a length a far end claims and never sends reserves nothing big.
constexpr size_t body_reserve_max = 1024 * 1024;

uint64_t steady_ms(Clock::time_point t) {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
}

// Rounded up: a deadline 300 ms after a call's caller took the time is said as 0.3 s, though the
// call itself began a few microseconds later.
uint64_t ms_between(Clock::time_point from, Clock::time_point to) {
    return to <= from ? 0
                      : static_cast<uint64_t>(
                            std::chrono::ceil<std::chrono::milliseconds>(to - from).count());
}

std::string errno_text(int e) { return std::strerror(e); }

// The end of a wait that starts now: `timeout_ms` from now (0: none), or the call's deadline if
// sooner; `bound_ms` is what the bound that ends it amounts to, for messages.
Clock::time_point bound_of(uint64_t timeout_ms, const Until& until, Clock::time_point began,
                           uint64_t& bound_ms) {
    const Clock::time_point op = timeout_ms == 0
                                     ? Clock::time_point::max()
                                     : Clock::now() + std::chrono::milliseconds(timeout_ms);
    if (op <= until.deadline) {
        bound_ms = timeout_ms;
        return op;
    }
    bound_ms = ms_between(began, until.deadline);
    return until.deadline;
}

}  // namespace

// ---- Connection

Connection::Connection(int fd, const CallRequest& request, const Until& until,
                       Clock::time_point began)
    : fd_(fd), until_(until), began_(began) {
    request_ = request;
    request_.bytes.clear();
}

Connection::~Connection() {
    if (fd_ >= 0) ::close(fd_);
}

bool Connection::failed(Mishap what, std::string detail, uint64_t bound_ms) {
    trouble_ = Trouble{what, std::move(detail), bound_ms};
    return false;
}

CallError Connection::error() const {
    return call_error(request_, trouble_.what, trouble_.detail, trouble_.bound_ms);
}

Clock::time_point Connection::bound(uint64_t timeout_ms, uint64_t& bound_ms) const {
    return bound_of(timeout_ms, until_, began_, bound_ms);
}

bool Connection::send_all(std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            bytes.remove_prefix(static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            return failed(Mishap::send_failed, n < 0 ? errno_text(errno) : "");
        }
        uint64_t bound_ms = 0;
        const Wait w = wait_for(fd_, POLLOUT, bound(request_.timeout_ms, bound_ms), until_.cancel);
        if (w == Wait::cancelled) return failed(Mishap::cancelled);
        if (w == Wait::timed_out) return failed(Mishap::send_stalled, {}, bound_ms);
    }
    return true;
}

bool Connection::send(std::string_view bytes, CallError& error) {
    if (send_all(bytes)) return true;
    error = this->error();
    return false;
}

bool Connection::fill(bool head_began) {
    const bool awaiting = in_.empty() && !head_began;
    for (;;) {
        uint64_t bound_ms = 0;
        const Wait w = wait_for(fd_, POLLIN, bound(request_.timeout_ms, bound_ms), until_.cancel);
        // The request gone whole, the far end may run it, cancelled or not.
        if (w == Wait::cancelled) {
            return failed(sent_whole_ ? Mishap::cancelled_after_send : Mishap::cancelled);
        }
        if (w == Wait::timed_out) {
            return failed(awaiting ? Mishap::no_answer : Mishap::answer_stalled, {}, bound_ms);
        }
        char buf[recv_bytes];  // not into in_ itself: growing it would zero what recv fills
        const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            in_.append(buf, static_cast<size_t>(n));
            return true;
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        // The end, or a reset (said in the detail): before any answer byte the request may have
        // run.
        return failed(awaiting ? Mishap::closed_before_answer : Mishap::answer_cut,
                      n < 0 ? errno_text(errno) : "");
    }
}

bool Connection::next_head(http::ResponseHead& head, bool informational) {
    bool began = false;  // a head passed over (a 100 Continue) means the answer began
    for (;;) {
        size_t used = 0;
        http::ParseError err;
        const http::ParseStatus st = http::parse_response_head(in_, head, used, err);
        if (st == http::ParseStatus::error) return failed(Mishap::malformed_head, err.message);
        if (st == http::ParseStatus::done) {
            in_.erase(0, used);
            if (head.status >= 200 || informational) return true;
            began = true;
            continue;
        }
        if (!fill(began)) return false;
    }
}

bool Connection::read_head(http::ResponseHead& head, CallError& error, bool informational) {
    if (next_head(head, informational)) return true;
    error = this->error();
    return false;
}

bool Connection::read_exactly(uint64_t n, std::string& out) {
    if (n <= body_reserve_max) in_.reserve(static_cast<size_t>(n));
    while (in_.size() < n) {
        if (!fill(true)) return false;
    }
    if (in_.size() == n) {
        out = std::move(in_);
        in_.clear();
    } else {
        out = in_.substr(0, static_cast<size_t>(n));
        in_.erase(0, static_cast<size_t>(n));
    }
    return true;
}

bool Connection::read_body(uint64_t n, std::string& out, CallError& error) {
    if (read_exactly(n, out)) return true;
    error = this->error();
    return false;
}

bool Connection::read_to_end(std::string& out) {
    for (;;) {
        const uint64_t max = request_.body_bytes_max;
        if (max != 0 && in_.size() > max) {
            return failed(Mishap::too_large, "past " + std::to_string(max) + " bytes");
        }
        if (!fill(true)) {
            // The far end closed (not a reset): that is this body's end.
            if (trouble_.what != Mishap::answer_cut || !trouble_.detail.empty()) return false;
            out = std::move(in_);
            in_.clear();
            return true;
        }
    }
}

Connection::Read Connection::read_some(std::string& out, uint64_t timeout_ms) {
    if (!in_.empty()) {
        out.append(in_);
        in_.clear();
        return Read::data;
    }
    for (;;) {
        uint64_t bound_ms = 0;
        const Wait w = wait_for(fd_, POLLIN, bound(timeout_ms, bound_ms), until_.cancel);
        if (w == Wait::cancelled) return Read::cancelled;
        if (w == Wait::timed_out) return Read::timed_out;
        char buf[recv_bytes];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            out.append(buf, static_cast<size_t>(n));
            return Read::data;
        }
        if (n == 0) return Read::end;
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return Read::failed;
    }
}

Connection::Read Connection::read_now(std::string& out, uint64_t wait_ms) {
    if (!in_.empty()) {
        out.append(in_);
        in_.clear();
        return Read::data;
    }
    const Clock::time_point until = Clock::now() + std::chrono::milliseconds(wait_ms);
    char buf[recv_bytes];
    for (;;) {
        const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            out.append(buf, static_cast<size_t>(n));
            return Read::data;
        }
        if (n == 0) return Read::end;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            // No Cancel here: the caller was cancelled, and reads on regardless.
            if (wait_ms == 0 || wait_for(fd_, POLLIN, until, nullptr) == Wait::timed_out) {
                return Read::timed_out;
            }
            continue;
        }
        if (errno != EINTR) return Read::failed;
    }
}

size_t Connection::received_unread() const {
    int queued = 0;
    if (::ioctl(fd_, FIONREAD, &queued) != 0 || queued < 0) queued = 0;
    return in_.size() + static_cast<size_t>(queued);
}

// ---- the relay

namespace {

// A descriptor in O_NONBLOCK for a relay's length, then as it was (blocking, as the pool keeps
// it). A splice into a socket follows the socket file's O_NONBLOCK (MSG_DONTWAIT), not
// SPLICE_F_NONBLOCK, which is the pipe's alone; so without it a splice into a target that reads
// nothing sleeps in the kernel, where no Cancel reaches it.
class NonBlocking {
  public:
    explicit NonBlocking(int fd) : fd_(fd), flags_(::fcntl(fd, F_GETFL)) {
        if (flags_ >= 0) ::fcntl(fd_, F_SETFL, flags_ | O_NONBLOCK);
    }
    ~NonBlocking() {
        if (flags_ >= 0) ::fcntl(fd_, F_SETFL, flags_);
    }
    NonBlocking(const NonBlocking&) = delete;
    NonBlocking& operator=(const NonBlocking&) = delete;

  private:
    const int fd_;
    const int flags_;
};

bool would_block(ssize_t n) { return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK); }

}  // namespace

std::optional<Connection::RelayFailure> Connection::relay_cancelled(const Connection& target,
                                                                    bool on_target) const {
    const bool source = until_.cancel && until_.cancel->cancelled();
    const bool target_too = target.until_.cancel && target.until_.cancel->cancelled();
    if (!source && !target_too) return std::nullopt;
    const bool source_first = source && (!on_target || !target_too);
    return RelayFailure{
        source_first,
        call_error(source_first ? request_ : target.request_, Mishap::cancelled).message};
}

std::optional<Connection::RelayFailure> Connection::relay_wait(Connection& target, bool on_target,
                                                               short events) {
    const Connection& on = on_target ? target : *this;
    uint64_t bound_ms = 0;
    const Wait w = wait_for(on.fd_, events, on.bound(on.request_.timeout_ms, bound_ms),
                            until_.cancel, target.until_.cancel);
    if (w == Wait::ready) return std::nullopt;
    if (w == Wait::cancelled) return relay_cancelled(target, on_target);
    if (on_target) {
        return RelayFailure{
            false, call_error(target.request_, Mishap::send_stalled, {}, bound_ms).message};
    }
    return RelayFailure{true, call_error(request_, Mishap::answer_stalled, {}, bound_ms).message};
}

Connection::RelayFailure Connection::relay_cut(uint64_t left, uint64_t total, int error) const {
    return RelayFailure{true, who(request_) + " ended the body after " +
                                  std::to_string(total - left) + " of " + std::to_string(total) +
                                  " bytes" + (error != 0 ? ": " + errno_text(error) : "")};
}

Connection::RelayFailure Connection::relay_refused(const Connection& target, int error) {
    return RelayFailure{false, who(target.request_) + " ended the connection" +
                                   (error != 0 ? ": " + errno_text(error) : "")};
}

std::optional<Connection::RelayFailure> Connection::relay_send(Connection& target,
                                                               std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n =
            ::send(target.fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            bytes.remove_prefix(static_cast<size_t>(n));
        } else if (would_block(n)) {
            if (auto failed = relay_wait(target, true, POLLOUT)) return failed;
        } else if (n == 0 || errno != EINTR) {
            return relay_refused(target, n < 0 ? errno : 0);
        }
    }
    return std::nullopt;
}

std::optional<Connection::RelayFailure> Connection::relay_to(Connection& target, uint64_t bytes) {
    // Both ends non-blocking for the relay: each splice, recv or send takes what is ready and
    // says EAGAIN for the rest, and the wait is relay_wait's, which either Cancel ends.
    const NonBlocking source_nonblocking(fd_);
    const NonBlocking target_nonblocking(target.fd_);
    uint64_t left = bytes;
    if (!in_.empty()) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, in_.size()));
        if (auto failed = relay_send(target, std::string_view(in_).substr(0, n))) return failed;
        in_.erase(0, n);
        left -= n;
    }
    if (auto failed = splice_to(target, left, bytes)) return failed;
    return copy_to(target, left, bytes);
}

// Up to `left` bytes through a pipe with splice(2): the kernel moves page references, so a large
// body never enters this process (two copies of each byte fewer than recv and send). Where the
// kernel will not splice (EINVAL before any byte) it returns with `left` as it was.
std::optional<Connection::RelayFailure> Connection::splice_to(Connection& target, uint64_t& left,
                                                              uint64_t total) {
    int pipe_fds[2];
    if (left == 0 || ::pipe2(pipe_fds, O_CLOEXEC) != 0) return std::nullopt;
    struct Pipe {
        int fds[2];
        ~Pipe() {
            ::close(fds[0]);
            ::close(fds[1]);
        }
    } pipe{{pipe_fds[0], pipe_fds[1]}};
    // As large as the system lets a pipe be (1 MiB by default): fewer trips, the same bound as
    // relay_buffer_bytes on what is in flight here.
    (void)::fcntl(pipe.fds[1], F_SETPIPE_SZ, static_cast<int>(relay_buffer_bytes));
    bool moved_any = false;
    while (left > 0) {
        // Looked at between pieces too: a relay that never has to wait still ends on a Cancel.
        if (auto failed = relay_cancelled(target, false)) return failed;
        // The pipe is empty here (each piece goes out whole before the next comes in), so an
        // EAGAIN is the source's alone, never a full pipe's that polling the source would spin
        // on; from a socket it takes what has arrived, up to the length, and waits for no more.
        const ssize_t in =
            ::splice(fd_, nullptr, pipe.fds[1], nullptr,
                     static_cast<size_t>(std::min<uint64_t>(left, relay_buffer_bytes)),
                     SPLICE_F_MOVE | SPLICE_F_MORE);
        if (would_block(in)) {
            if (auto failed = relay_wait(target, false, POLLIN)) return failed;
            continue;
        }
        if (in < 0 && errno == EINTR) continue;
        if (in < 0 && errno == EINVAL && !moved_any) return std::nullopt;
        if (in <= 0) return relay_cut(left, total, in < 0 ? errno : 0);
        moved_any = true;
        size_t pending = static_cast<size_t>(in);
        while (pending > 0) {
            // SPLICE_F_MORE corks the socket (MSG_MORE): right while more bytes follow, but on
            // the last of them it held the body's final partial segment back until the kernel's
            // 200 ms cork timer let it go, and the target waited that long for its last bytes.
            const unsigned more = left > pending ? SPLICE_F_MORE : 0;
            const ssize_t out =
                ::splice(pipe.fds[0], nullptr, target.fd_, nullptr, pending, SPLICE_F_MOVE | more);
            if (out > 0) {
                pending -= static_cast<size_t>(out);
                left -= static_cast<uint64_t>(out);
            } else if (would_block(out)) {
                if (auto failed = relay_wait(target, true, POLLOUT)) return failed;
            } else if (out == 0 || errno != EINTR) {
                return relay_refused(target, out < 0 ? errno : 0);
            }
        }
    }
    return std::nullopt;
}

// The relay without splice: each recv sent on from the one buffer it landed in.
std::optional<Connection::RelayFailure> Connection::copy_to(Connection& target, uint64_t& left,
                                                            uint64_t total) {
    if (left == 0) return std::nullopt;
    auto buf = std::make_unique_for_overwrite<char[]>(relay_buffer_bytes);
    while (left > 0) {
        if (auto failed = relay_cancelled(target, false)) return failed;
        const ssize_t n = ::recv(
            fd_, buf.get(), static_cast<size_t>(std::min<uint64_t>(left, relay_buffer_bytes)), 0);
        if (would_block(n)) {
            if (auto failed = relay_wait(target, false, POLLIN)) return failed;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return relay_cut(left, total, n < 0 ? errno : 0);
        if (auto failed = relay_send(target, std::string_view(buf.get(), static_cast<size_t>(n)))) {
            return failed;
        }
        left -= static_cast<uint64_t>(n);
    }
    return std::nullopt;
}

// ---- BlockingClient

BlockingClient::BlockingClient(Options options) : options_(std::move(options)) {}

CallRequest BlockingClient::bounded(const CallRequest& request) const {
    CallRequest r = request;
    if (r.timeout_ms == 0) r.timeout_ms = options_.timeout_ms;
    return r;
}

std::unique_ptr<Connection> BlockingClient::dial(const CallRequest& request, const Until& until,
                                                 Clock::time_point began,
                                                 Connection::Trouble& trouble) {
    // One bound for the lookup and every address's connect together, as for one connect.
    uint64_t bound_ms = 0;
    const Clock::time_point by = bound_of(request.timeout_ms, until, began, bound_ms);
    const Resolved resolved = resolve_within(request.addr, options_.lookup, by, until.cancel);
    if (until.cancel && until.cancel->cancelled()) {
        trouble = {Mishap::cancelled, {}, 0};
        return nullptr;
    }
    if (resolved.addresses.empty()) {
        trouble = {Mishap::lookup_failed, resolved.error, bound_ms};
        return nullptr;
    }
    for (const Address& a : resolved.addresses) {
        const int fd = ::socket(a.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            trouble = {Mishap::no_socket, errno_text(errno), 0};
            return nullptr;
        }
        auto conn = std::unique_ptr<Connection>(new Connection(fd, request, until, began));
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int rc = ::connect(fd, a.get(), a.length);
        int err = rc == 0 ? 0 : errno;
        if (rc != 0 && err == EINPROGRESS) {
            const Wait w = wait_for(fd, POLLOUT, by, until.cancel);
            if (w == Wait::cancelled) {
                trouble = {Mishap::cancelled, {}, 0};
                return nullptr;
            }
            if (w == Wait::timed_out) {
                trouble = {Mishap::connect_timed_out, {}, bound_ms};
                return nullptr;
            }
            socklen_t len = sizeof err;
            if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
        if (err == 0) {
            // Blocking mode, as the pool keeps connections: each client waits its own way.
            ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            return conn;
        }
        trouble = {Mishap::connect_refused, errno_text(err), 0};  // the next address, if any
    }
    return nullptr;
}

std::unique_ptr<Connection> BlockingClient::attempt(const CallRequest& request, const Until& until,
                                                    Clock::time_point began, bool fresh,
                                                    http::ResponseHead& head,
                                                    Connection::Trouble& trouble) {
    // Cancelled already: nothing is sent, not even on a connection the pool has open.
    if (until.cancel && until.cancel->cancelled()) {
        trouble = {Mishap::cancelled, {}, 0};
        return nullptr;
    }
    std::unique_ptr<Connection> conn;
    if (!fresh && options_.pool) {
        const int fd = options_.pool->take(request.addr, request.peer, steady_ms(Clock::now()),
                                           request.resend_after_sent);
        if (fd >= 0) conn.reset(new Connection(fd, request, until, began));
    }
    if (!conn) conn = dial(request, until, began, trouble);
    if (!conn) return nullptr;
    if (!conn->send_all(request.bytes)) {
        trouble = conn->trouble_;
        return nullptr;
    }
    conn->sent_whole_ = true;
    if (!conn->next_head(head, false)) {
        trouble = conn->trouble_;
        return nullptr;
    }
    return conn;
}

bool BlockingClient::head_of(const CallRequest& request, const Until& until,
                             Clock::time_point began, std::unique_ptr<Connection>& conn,
                             http::ResponseHead& head, CallError& error) {
    bool resent = false;
    for (;;) {
        Connection::Trouble trouble;
        conn = attempt(request, until, began, resent, head, trouble);
        if (conn) return true;
        const char* reason = resend_reason(trouble.what, request, resent);
        if (!reason) {
            error = call_error(request, trouble.what, trouble.detail, trouble.bound_ms);
            return false;
        }
        if (options_.observer) options_.observer->resent(reason);
        resent = true;
    }
}

CallResult BlockingClient::call(const CallRequest& request_in, const Until& until) {
    CallRequest request = bounded(request_in);
    request.allow_stream = false;  // read whole: an answer without a length, to its end
    const Clock::time_point began = Clock::now();
    std::unique_ptr<Connection> conn;
    http::ResponseHead head;
    CallResult result;
    if (!head_of(request, until, began, conn, head, result.error)) return result;
    Answer answer = answer_of(head);
    const Framing framing = framing_of(head, request);
    bool whole = true;
    if (framing == Framing::length) {
        const uint64_t n = *head.content_length;
        whole = request.body_bytes_max != 0 && n > request.body_bytes_max
                    ? conn->failed(Mishap::too_large, std::to_string(n) + " bytes")
                    : conn->read_exactly(n, answer.body);
    } else if (framing == Framing::to_end) {
        whole = conn->read_to_end(answer.body);
        answer.close = true;
    }
    if (!whole) {
        result.error = conn->error();
        return result;
    }
    if (options_.pool && reusable(framing, answer.close, !conn->in_.empty())) {
        options_.pool->put(request.addr, request.peer, conn->release(), steady_ms(Clock::now()));
    }
    result.answer = std::move(answer);
    return result;
}

BlockingClient::Opened BlockingClient::open(const CallRequest& request_in, const Until& until) {
    const CallRequest request = bounded(request_in);
    Opened opened;
    http::ResponseHead head;
    if (!head_of(request, until, Clock::now(), opened.connection, head, opened.error)) {
        return opened;
    }
    opened.head = answer_of(head);
    opened.head->stream = framing_of(head, request) == Framing::stream;
    return opened;
}

std::unique_ptr<Connection> BlockingClient::connect(const CallRequest& request_in,
                                                    const Until& until, CallError& error) {
    const CallRequest request = bounded(request_in);
    Connection::Trouble trouble;
    auto conn = dial(request, until, Clock::now(), trouble);
    if (!conn) error = call_error(request, trouble.what, trouble.detail, trouble.bound_ms);
    return conn;
}

}  // namespace fenec::server
