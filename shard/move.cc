// shard/move.cc: a tenant's move between two nodes of one directory (shard/move.h; router.md §7).
//
// The image does not pass through the upstream loops (shard/upstream.h), which read an answer
// with a length whole: it is copied here, on the API worker, over two blocking connections of its
// own, the source's GET answer spliced (splice(2), through a pipe of move_buffer_bytes) on to the
// target's PUT as it comes, or where splice is not to be had read into a buffer of that size and
// written on, so the router holds a megabyte of it at a time whatever its size. The
// PUT goes with `Expect: 100-continue`, so a target that already has a file refuses (409) before
// a byte of the body is sent; that copy is stale by definition (the directory never pointed at
// it) and is deleted (DELETE …/file) and the install tried once more. Freeze, thaw and that
// delete go through Upstream::call; a tenant's delete and its quota through shard/node_calls.h.
// The tenant's copies keep in step through shard/copies.h: its replica on the target detached
// first (step 1), the quota sent to the target before the flip (step 5), the pair's and the
// replica's copies moved after it (steps 8 and 9).
//
// Test hook (FENEC_TEST_HOOKS builds only): FENEC_TEST_MOVE_STALL=<step>:<ms> makes every move
// wait `ms` after the step named (`marked`, `frozen`, `installed`, `flipped`), so a test can
// write during the freeze or stop the router mid-move.
#include "shard/move.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "json/writer.h"
#include "shard/copies.h"
#include "shard/node_calls.h"

namespace fenec::shard {

namespace {

using Response = http::Response;

// An answer of a node the move stops on: its status, and why, said for the client.
struct Failure {
    int status = 502;
    std::string step;     // "freeze", "image", "install", "flip", "mark"
    std::string message;
};

// The status a step's failure answers (§7.2 Rollback): a node's 4xx passes through; a node's 5xx
// or no answer is 502.
int node_status(int status) { return status >= 400 && status < 500 ? status : 502; }

std::string who(const NodeRow& n) { return "node `" + n.name + "` (" + n.addr + ")"; }

// The `error` of a node's JSON refusal, or the body's first bytes.
std::string node_error(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view e;
    if (!parser.parse(body.data(), body.size()).get(doc) && !doc["error"].get_string().get(e)) {
        return std::string(e);
    }
    return std::string(body.substr(0, 200));
}

#ifdef FENEC_TEST_HOOKS
void stall_after(std::string_view step) {
    const char* env = std::getenv("FENEC_TEST_MOVE_STALL");
    if (!env) return;
    std::string_view v(env);
    const size_t colon = v.find(':');
    if (colon == std::string_view::npos || v.substr(0, colon) != step) return;
    const long ms = std::strtol(std::string(v.substr(colon + 1)).c_str(), nullptr, 10);
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}
#else
void stall_after(std::string_view) {}
#endif

// One blocking connection to a node, for the image's two legs. Bounded by `timeout_ms` on the
// connect and on each send and recv (SO_SNDTIMEO, SO_RCVTIMEO), as --upstream-timeout bounds
// every call to a node.
class Conn {
  public:
    ~Conn() {
        if (fd_ >= 0) ::close(fd_);
    }
    bool dial(const NodeRow& node, uint64_t timeout_ms, std::string& error) {
        const size_t colon = node.addr.rfind(':');
        if (colon == std::string::npos) {
            error = who(node) + ": `" + node.addr + "` is not host:port";
            return false;
        }
        std::string host = node.addr.substr(0, colon);
        if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
        addrinfo hints{};
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        addrinfo* res = nullptr;
        const std::string port = node.addr.substr(colon + 1);
        if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0 || !res) {
            error = who(node) + " is unreachable: " + ::gai_strerror(rc);
            return false;
        }
        fd_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        timeval tv{};
        tv.tv_sec = static_cast<time_t>(timeout_ms / 1000);
        tv.tv_usec = static_cast<suseconds_t>((timeout_ms % 1000) * 1000);
        int one = 1;
        if (fd_ >= 0) {
            ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // connect's bound too
            ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        const bool ok = fd_ >= 0 && ::connect(fd_, res->ai_addr, res->ai_addrlen) == 0;
        const int err = errno;
        ::freeaddrinfo(res);
        if (!ok) {
            error = who(node) + " is unreachable: " + std::strerror(err);
            return false;
        }
        node_ = &node;
        return true;
    }
    bool send_all(std::string_view bytes, std::string& error) {
        while (!bytes.empty()) {
            const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n <= 0) {
                error = who(*node_) + (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
                                           ? " took nothing within the timeout"
                                           : " ended the connection: " +
                                                 std::string(std::strerror(errno)));
                return false;
            }
            bytes.remove_prefix(static_cast<size_t>(n));
        }
        return true;
    }
    // Some bytes into `in_`; false at the end or on an error (said in `error`).
    bool fill(std::string& error) {
        char buf[64 << 10];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n > 0) {
            in_.append(buf, static_cast<size_t>(n));
            return true;
        }
        error = who(*node_) + (n == 0 ? " ended the connection part-way"
                               : errno == EAGAIN || errno == EWOULDBLOCK
                                   ? " did not answer within the timeout"
                                   : " failed: " + std::string(std::strerror(errno)));
        return false;
    }
    // The next answer's head (1xx included); its bytes are taken from `in_`.
    bool read_head(http::ResponseHead& head, std::string& error) {
        for (;;) {
            size_t used = 0;
            http::ParseError err;
            const http::ParseStatus st = http::parse_response_head(in_, head, used, err);
            if (st == http::ParseStatus::done) {
                in_.erase(0, used);
                return true;
            }
            if (st == http::ParseStatus::error) {
                error = who(*node_) + " answered a malformed head: " + err.message;
                return false;
            }
            if (!fill(error)) return false;
        }
    }
    // A body of `n` bytes, whole (the small JSON answers only).
    bool read_body(uint64_t n, std::string& out, std::string& error) {
        while (in_.size() < n) {
            if (!fill(error)) return false;
        }
        out = in_.substr(0, n);
        in_.erase(0, n);
        return true;
    }
    int fd() const { return fd_; }
    std::string peer() const { return node_ ? who(*node_) : "a node"; }
    std::string& in() { return in_; }

  private:
    int fd_ = -1;
    const NodeRow* node_ = nullptr;
    std::string in_;
};

std::string header_of(const http::ResponseHead& h, std::string_view name) {
    auto v = h.header(name);
    return v ? std::string(*v) : std::string();
}

// What the source's image said of itself, and what the target answered.
struct Copied {
    uint64_t bytes = 0;
    std::string seq, history, lineage, digest;
};

// Where a move's time went, in ms, answered under `steps` (the bench reads it): the image built
// on the source (the GET sent to its head: the image taken and its digest), its bytes passed on
// (`transfer`), and the target's verify (the last byte sent to its answer: written, fsynced,
// verified, renamed).
struct Steps {
    using Clock = std::chrono::steady_clock;
    Clock::time_point at = Clock::now();
    double mark = 0, freeze = 0, image = 0, transfer = 0, verify = 0, flip = 0, remove = 0;
    // The target's own account, from its answer: the body received and written, then installed.
    double receive = 0, install = 0;
    // The ms since the last lap.
    double lap() {
        const Clock::time_point now = Clock::now();
        const double ms = std::chrono::duration<double, std::milli>(now - at).count();
        at = now;
        return ms;
    }
};

double tenth(double ms) { return static_cast<double>(static_cast<int64_t>(ms * 10 + 0.5)) / 10; }

// The tenant claimed for the move's life (§6.1).
struct Claim {
    Router& router;
    std::string tenant;
    bool held;
    Claim(Router& r, std::string t, std::string_view what)
        : router(r), tenant(std::move(t)), held(r.claim(tenant, what)) {}
    ~Claim() {
        if (held) router.release(tenant);
    }
};

Response busy_answer(Router& router, const std::string& tenant) {
    const std::string what = router.held_by(tenant);
    Response r = Router::error(409, "another operation on `" + tenant + "` is in progress: " + what);
    r.body.pop_back();
    std::string tail;
    json::Writer w(tail);
    w.begin_object();
    w.key("held_by");
    w.string(what);
    w.end_object();
    r.body += "," + tail.substr(1);
    return r;
}

class Move {
  public:
    Move(Router& router, const Router::Answering& a, std::string tenant)
        : router_(router), a_(a), tenant_(std::move(tenant)) {}

    Response run(const server::Request& request);

  private:
    Response refuse(int status, std::string message) { return Router::error(status, message); }
    Response fail(const Failure& f, bool counted = true);
    // A call of the admin plane through the upstream loops.
    Upstream::Whole admin(const NodeRow& node, std::string_view method, std::string_view target,
                          bool resendable) {
        UpstreamRequest up;
        up.node = node.name;
        up.addr = node.addr;
        up.resend_after_sent = resendable;
        up.bytes = admin_request(method, target, node.addr, node.token, "", a_.request_id);
        return router_.upstream().call(std::move(up));
    }
    std::optional<Failure> freeze(std::string& seq);
    std::optional<Failure> copy_image(const std::string& frozen_seq, Copied& out);
    std::optional<Failure> install(Conn& source, const http::ResponseHead& image, bool again,
                                   Copied& out);
    void roll_back(bool installed);
    void count(std::string_view outcome) {
        if (auto* m = router_.metrics().moves) m->with({outcome, "directory"}).inc();
    }

    Router& router_;
    const Router::Answering& a_;
    const std::string tenant_;
    TenantRow row_;     // as it was before the move
    NodeRow from_, to_;
    std::string path_;  // /_admin/tenants/<t>
    Steps steps_;
};

Response Move::fail(const Failure& f, bool counted) {
    if (counted) count("failed");
    Response r = Router::error(f.status, f.message);
    r.body.pop_back();
    std::string tail;
    json::Writer w(tail);
    w.begin_object();
    w.key("tenant");
    w.string(tenant_);
    w.key("step");
    w.string(f.step);
    w.key("from");
    w.string(from_.name);
    w.key("to");
    w.string(to_.name);
    w.end_object();
    r.body += "," + tail.substr(1);
    return r;
}

Response Move::run(const server::Request& request) {
    // §7.1: the body and the checks; a refusal here counts as no move.
    const std::string_view text = request.body;
    std::string to_name;
    if (text.find_first_not_of(" \t\r\n") != std::string_view::npos) {
        simdjson::dom::parser parser;
        simdjson::dom::element doc;
        simdjson::dom::object obj;
        if (parser.parse(text.data(), text.size()).get(doc)) {
            return refuse(400, "the body is not JSON");
        }
        if (doc.get_object().get(obj)) return refuse(400, "the body is not a JSON object");
        for (auto field : obj) {
            if (field.key == "region") {
                if (field.value.is_null()) continue;
                return refuse(501, "field `region`: moves across regions (router.md §11) are not "
                                   "built in this version; name the node with `to`");
            }
            if (field.key != "to") {
                return refuse(400, "unknown field `" + std::string(field.key) +
                                       "`: a move takes to (and region, not built yet)");
            }
            if (field.value.is_null()) continue;
            std::string_view s;
            if (field.value.get_string().get(s)) return refuse(400, "field `to` must be a string");
            to_name = std::string(s);
        }
    }
    if (to_name.empty()) return refuse(400, "a move needs `to`: the node to move the tenant to");
    if (!valid_name(to_name)) {
        return refuse(400, "field `to`: `" + to_name + "` is not [a-z0-9_-]{1,64}");
    }
    Claim claim(router_, tenant_, "move");
    if (!claim.held) return busy_answer(router_, tenant_);
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant_);
    if (t == maps->tenants.end()) {
        return refuse(404, "tenant `" + tenant_ + "` is not in the directory");
    }
    row_ = t->second;
    auto to = maps->nodes.find(to_name);
    if (to == maps->nodes.end()) return refuse(404, "no node `" + to_name + "`");
    auto from = maps->nodes.find(row_.node);
    if (from == maps->nodes.end()) {
        return refuse(409, "tenant `" + tenant_ + "` is on node `" + row_.node +
                               "`, which is not in the directory");
    }
    from_ = from->second;
    to_ = to->second;
    if (to_.name == from_.name) {
        return refuse(409, "tenant `" + tenant_ + "` is on node `" + to_.name + "` already");
    }
    if (maps->is_standby(to_.name)) {
        return refuse(409, "node `" + to_.name + "` is a standby in a pair: record its " +
                               "pair's node without a standby first");
    }
    if (to_.region != from_.region) {
        Response r = refuse(409, "node `" + to_.name + "` is in region `" + to_.region +
                                     "`: name it with \"region\": \"" + to_.region + "\"");
        r.body.pop_back();
        r.body += ",\"region\":\"" + to_.region + "\"}";
        return r;
    }
    path_ = "/_admin/tenants/" + tenant_;
    const uint64_t start = router_.now_ms();
    steps_.lap();

    // A copy a stopped move left on another node than this one's target is stale: it goes.
    if (row_.state == "moving" && !row_.moving_to.empty() && row_.moving_to != to_.name) {
        if (auto old = maps->nodes.find(row_.moving_to); old != maps->nodes.end()) {
            (void)router_.node_calls().remove(old->second, tenant_, a_.request_id);
        }
    }
    // Step 1: a node holds one copy of a tenant, so its own replica on the target goes first.
    router_.copies().before_move(tenant_, to_.name, a_.request_id);

    // Step 2: marked moving, synced; still routed to the source.
    TenantRow moving = row_;
    moving.state = "moving";
    moving.moving_to = to_.name;
    if (engine::Status st = router_.directory().put_tenant(moving); !st.is_ok()) {
        return fail({500, "mark", "the directory could not mark `" + tenant_ +
                                      "` moving: " + st.to_string()});
    }
    steps_.mark = steps_.lap();
    stall_after("marked");

    // Step 3: the source frozen; writes in flight finish, new ones get 503 Retry-After: 1.
    std::string seq;
    if (auto f = freeze(seq)) {
        roll_back(false);
        return fail(*f);
    }
    steps_.freeze = steps_.lap();
    stall_after("frozen");

    // Steps 4 and 5: the image from the source onto the target, then the recorded quota to the
    // target (an image carries none), so it bites from the flip on.
    Copied copied;
    if (auto f = copy_image(seq, copied)) {
        roll_back(false);
        return fail(*f);
    }
    QuotaSent quota = router_.copies().quotas().send_to(to_, row_, "move's target", a_.request_id);
    if (!quota.taken) {
        roll_back(true);
        return fail(
            {502, "quota", "the target did not take the quota of `" + tenant_ + "`: " + quota.why});
    }
    stall_after("installed");

    // Step 6: the flip, one statement, synced.
    if (engine::Status st = router_.directory().flip_tenant(tenant_, to_.name); !st.is_ok()) {
        roll_back(true);
        return fail({500, "flip", "the directory could not point `" + tenant_ + "` at node `" +
                                      to_.name + "`: " + st.to_string()});
    }
    steps_.flip = steps_.lap();
    stall_after("flipped");

    // Steps 8 and 9: the copies follow the tenant to its new node; a failure here is logged and
    // answered as `unreplicated`, never the move's.
    const CopyOutcome copy = router_.copies().moved(tenant_, from_.name, a_.request_id);

    // Step 11: the source copy deleted; its subscriptions end `gone` and reconnect to the target.
    NodeAnswer del = router_.node_calls().remove(from_, tenant_, a_.request_id);
    const bool removed = del.gone();
    steps_.remove = steps_.lap();
    if (!removed) {
        std::cerr << "fenec-shard: move of `" << tenant_ << "` to `" << to_.name
                  << "`: the source copy on `" << from_.name << "` was not deleted ("
                  << del.said(from_) << "); it stays frozen and unrouted\n";
    }
    const uint64_t ms = router_.now_ms() - start;
    count("done");
    if (auto* h = router_.metrics().move_duration) h->with({}).observe(static_cast<double>(ms) / 1000);

    Response r;
    json::Writer w(r.body);
    w.begin_object();
    w.key("tenant");
    w.string(tenant_);
    w.key("from");
    w.string(from_.name);
    w.key("to");
    w.string(to_.name);
    w.key("region");
    w.string(to_.region);
    w.key("bytes");
    w.uint64(copied.bytes);
    w.key("ms");
    w.uint64(ms);
    w.key("source_removed");
    w.boolean(removed);
    if (!copy.node.empty()) {
        w.key("replica_on");
        w.string(copy.node);
        if (copy.same_zone) {
            w.key("same_zone");
            w.boolean(true);
        }
    } else if (copy.asked) {
        w.key("unreplicated");
        w.string(copy.unreplicated);
    }
    w.key("seq");
    w.string(copied.seq);
    w.key("steps");
    w.begin_object();
    for (const auto& [name, took] : {std::pair{"mark", steps_.mark}, {"freeze", steps_.freeze},
                                   {"image", steps_.image}, {"transfer", steps_.transfer},
                                   {"verify", steps_.verify}, {"flip", steps_.flip},
                                   {"delete", steps_.remove}, {"target_receive", steps_.receive},
                                   {"target_install", steps_.install}}) {
        w.key(name);
        w.float64(tenth(took));
    }
    w.end_object();
    w.end_object();
    return r;
}

std::optional<Failure> Move::freeze(std::string& seq) {
    Upstream::Whole w = admin(from_, "POST", path_ + "/freeze", true);
    if (!w.answer) return Failure{502, "freeze", w.message};
    if (w.answer->status != 200) {
        return Failure{node_status(w.answer->status), "freeze",
                       who(from_) + " answered " + std::to_string(w.answer->status) +
                           " to the freeze: " + node_error(w.answer->body)};
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    uint64_t s = 0;
    if (parser.parse(w.answer->body).get(doc) || doc["seq"].get_uint64().get(s)) {
        return Failure{502, "freeze", who(from_) + " answered the freeze without its seq"};
    }
    seq = std::to_string(s);
    return std::nullopt;
}

std::optional<Failure> Move::copy_image(const std::string& frozen_seq, Copied& out) {
    const uint64_t timeout = router_.options().upstream_timeout_ms;
    Conn source;
    std::string error;
    if (!source.dial(from_, timeout, error)) return Failure{502, "image", error};
    if (!source.send_all(admin_request("GET", path_ + "/file", from_.addr, from_.token, "",
                                       a_.request_id),
                         error)) {
        return Failure{502, "image", error};
    }
    http::ResponseHead head;
    if (!source.read_head(head, error)) return Failure{502, "image", error};
    steps_.image = steps_.lap();
    if (head.status != 200) {
        std::string body;
        (void)source.read_body(head.content_length.value_or(0), body, error);
        return Failure{node_status(head.status), "image",
                       who(from_) + " answered " + std::to_string(head.status) +
                           " to the image: " + node_error(body)};
    }
    if (!head.content_length || head.transfer_encoding) {
        return Failure{502, "image", who(from_) + " sent the image without a Content-Length"};
    }
    out.bytes = *head.content_length;
    out.seq = header_of(head, "Fenec-Seq");
    out.history = header_of(head, "Fenec-History");
    out.lineage = header_of(head, "Fenec-Lineage");
    out.digest = header_of(head, "Fenec-Image-Digest");
    if (out.seq.empty() || out.lineage.empty() || out.digest.empty()) {
        return Failure{502, "image", who(from_) + " sent the image without its Fenec-Seq, "
                                                  "Fenec-Lineage and Fenec-Image-Digest"};
    }
    // The source is frozen: its image is at the seq the freeze answered, or something wrote.
    if (out.seq != frozen_seq) {
        return Failure{502, "image", who(from_) + " froze at seq " + frozen_seq +
                                         " but its image is at seq " + out.seq};
    }
    return install(source, head, false, out);
}

// Passes up to `left` body bytes from `source` to `target` through a pipe with splice(2), so they
// never enter the router's memory (two copies of 69 MB fewer than recv and send; the kernel moves
// page references). Counts `left` down as bytes reach the target. Where splice is not to be had
// (EINVAL before any byte: not a socket the kernel splices), it returns with `left` as it was and
// the caller's recv/send loop goes on. A failure is said for the client, and whose it is.
struct SpliceFailure {
    bool source = false;  // the source ended or stalled; else the target refused the bytes
    std::string message;
};
std::optional<SpliceFailure> splice_body(Conn& source, Conn& target, uint64_t& left,
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
    // move_buffer_bytes on what is in flight here.
    (void)::fcntl(pipe.fds[1], F_SETPIPE_SZ, static_cast<int>(move_buffer_bytes));
    bool moved_any = false;
    while (left > 0) {
        const ssize_t in =
            ::splice(source.fd(), nullptr, pipe.fds[1], nullptr,
                     static_cast<size_t>(std::min<uint64_t>(left, move_buffer_bytes)),
                     SPLICE_F_MOVE | SPLICE_F_MORE);
        if (in < 0 && errno == EINTR) continue;
        if (in < 0 && errno == EINVAL && !moved_any) return std::nullopt;
        if (in <= 0) {
            return SpliceFailure{
                true, source.peer() + " ended the image after " + std::to_string(total - left) +
                          " of " + std::to_string(total) + " bytes" +
                          (in < 0 ? ": " + std::string(std::strerror(errno)) : "")};
        }
        moved_any = true;
        size_t pending = static_cast<size_t>(in);
        while (pending > 0) {
            // SPLICE_F_MORE corks the socket (MSG_MORE): right while more bytes follow, but on
            // the last of them it held the body's final partial segment back until the kernel's
            // 200 ms cork timer let it go, and the target waited that long for its last bytes.
            const unsigned more = left > pending ? SPLICE_F_MORE : 0;
            const ssize_t outn = ::splice(pipe.fds[0], nullptr, target.fd(), nullptr, pending,
                                          SPLICE_F_MOVE | more);
            if (outn < 0 && errno == EINTR) continue;
            if (outn <= 0) {
                return SpliceFailure{
                    false, target.peer() + (outn < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
                                                ? " took nothing within the timeout"
                                                : " ended the connection: " +
                                                      std::string(std::strerror(errno)))};
            }
            pending -= static_cast<size_t>(outn);
            left -= static_cast<uint64_t>(outn);
        }
    }
    return std::nullopt;
}

// Step 5: PUT …/file on the target with `Expect: 100-continue`, then the body passed on from the
// source as it arrives. A 409 before the body (a copy is there) deletes that copy and goes once
// more (`again`).
std::optional<Failure> Move::install(Conn& source, const http::ResponseHead& image, bool again,
                                     Copied& out) {
    const uint64_t timeout = router_.options().upstream_timeout_ms;
    Conn target;
    std::string error;
    if (!target.dial(to_, timeout, error)) return Failure{502, "install", error};
    std::string put;
    put.append("PUT ").append(path_).append("/file HTTP/1.1\r\nHost: ").append(to_.addr);
    put.append("\r\nAuthorization: Bearer ").append(to_.token);
    put.append("\r\nContent-Type: application/octet-stream\r\nContent-Length: ");
    put.append(std::to_string(out.bytes));
    put.append("\r\nFenec-Image-Digest: ").append(out.digest);
    put.append("\r\nFenec-Seq: ").append(out.seq);
    put.append("\r\nFenec-Lineage: ").append(out.lineage);
    put.append("\r\nExpect: 100-continue\r\nConnection: close\r\nX-Request-Id: ");
    put.append(a_.request_id).append("\r\n\r\n");
    if (!target.send_all(put, error)) return Failure{502, "install", error};
    http::ResponseHead head;
    if (!target.read_head(head, error)) return Failure{502, "install", error};
    if (head.status == 409 && !again) {
        // A copy an interrupted attempt left, stale since the directory never pointed at it.
        std::string body;
        (void)target.read_body(head.content_length.value_or(0), body, error);
        Upstream::Whole del = admin(to_, "DELETE", path_ + "/file", true);
        if (!del.answer || (del.answer->status != 204 && del.answer->status != 404)) {
            return Failure{del.answer ? node_status(del.answer->status) : 502, "install",
                           who(to_) + " holds a stale copy of `" + tenant_ +
                               "` that it did not delete: " +
                               (del.answer ? node_error(del.answer->body) : del.message)};
        }
        return install(source, image, true, out);
    }
    if (head.status != 100) {
        std::string body;
        (void)target.read_body(head.content_length.value_or(0), body, error);
        return Failure{node_status(head.status), "install",
                       who(to_) + " answered " + std::to_string(head.status) +
                           " to the install: " + node_error(body)};
    }
    // The body, from one connection to the other through a bounded buffer: the bytes read past
    // the source's head first, then each recv sent on from the buffer it landed in.
    auto refused = [&](const std::string& why) -> Failure {
        // The target may have answered why it stopped taking the body.
        http::ResponseHead h;
        std::string ignored;
        if (target.read_head(h, ignored) && h.status >= 400) {
            std::string body;
            (void)target.read_body(h.content_length.value_or(0), body, ignored);
            return Failure{node_status(h.status), "install",
                           who(to_) + " answered " + std::to_string(h.status) +
                               " to the install: " + node_error(body)};
        }
        return Failure{502, "install", why};
    };
    uint64_t left = out.bytes;
    std::string& early = source.in();
    if (!early.empty()) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, early.size()));
        if (!target.send_all(std::string_view(early).substr(0, n), error)) return refused(error);
        left -= n;
        early.clear();
    }
    if (std::optional<SpliceFailure> failed = splice_body(source, target, left, out.bytes)) {
        return failed->source ? Failure{502, "image", failed->message} : refused(failed->message);
    }
    auto buf = std::make_unique_for_overwrite<char[]>(move_buffer_bytes);
    while (left > 0) {
        const ssize_t n = ::recv(source.fd(), buf.get(),
                                 static_cast<size_t>(std::min<uint64_t>(left, move_buffer_bytes)),
                                 0);
        if (n <= 0) {
            return Failure{502, "image",
                           who(from_) + " ended the image after " +
                               std::to_string(out.bytes - left) + " of " +
                               std::to_string(out.bytes) + " bytes"};
        }
        if (!target.send_all(std::string_view(buf.get(), static_cast<size_t>(n)), error)) {
            return refused(error);
        }
        left -= static_cast<uint64_t>(n);
    }
    steps_.transfer = steps_.lap();
    if (!target.read_head(head, error)) return Failure{502, "install", error};
    steps_.verify = steps_.lap();
    std::string body;
    if (!target.read_body(head.content_length.value_or(0), body, error)) {
        return Failure{502, "install", error};
    }
    if (head.status != 201 && head.status != 200) {
        return Failure{node_status(head.status), "install",
                       who(to_) + " answered " + std::to_string(head.status) +
                           " to the install: " + node_error(body)};
    }
    // The target installed what the source sent: its seq and lineage are the image's.
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    uint64_t seq = 0;
    std::string_view lineage;
    if (parser.parse(body).get(doc) || doc["seq"].get_uint64().get(seq) ||
        doc["lineage"].get_string().get(lineage)) {
        return Failure{502, "install", who(to_) + " answered the install without seq and lineage"};
    }
    // The target's own account, where it gives one: Server-Timing's receive and install.
    const std::string timing = header_of(head, "Server-Timing");
    for (auto [name, into] : {std::pair{"receive;dur=", &steps_.receive},
                              std::pair{"install;dur=", &steps_.install}}) {
        const size_t at = timing.find(name);
        if (at != std::string::npos) {
            *into = std::strtod(timing.c_str() + at + std::strlen(name), nullptr);
        }
    }
    if (std::to_string(seq) != out.seq || lineage != out.lineage) {
        // Installed, but not the image sent: it goes, since nothing routes to it.
        (void)router_.node_calls().remove(to_, tenant_, a_.request_id);
        return Failure{502, "install", who(to_) + " installed seq " + std::to_string(seq) +
                                           " of lineage " + std::string(lineage) + ", not seq " +
                                           out.seq + " of " + out.lineage};
    }
    return std::nullopt;
}

// Before the flip (§7.2 Rollback): the source thawed (its answer ignored), the target's copy
// deleted if installed (best effort), the row back to what it was, synced. A rollback write that
// fails leaves the tenant `moving`, handled as after a stop (settle_moves).
void Move::roll_back(bool installed) {
    (void)admin(from_, "POST", path_ + "/thaw", true);
    if (installed) (void)router_.node_calls().remove(to_, tenant_, a_.request_id);
    TenantRow back = row_;
    back.state = "active";
    back.moving_to.clear();
    if (engine::Status st = router_.directory().put_tenant(back); !st.is_ok()) {
        std::cerr << "fenec-shard: move of `" << tenant_ << "` rolled back but the directory "
                  << "could not put it back to active: " << st.to_string() << "\n";
    }
}

}  // namespace

Response serve_move(Router& router, const server::Request& request, const Router::Answering& a,
                    const std::string& tenant) {
    if (request.head.method != http::Method::post) {
        Response r = Router::error(405, request.head.path + " takes POST");
        r.header("Allow", "POST");
        return r;
    }
    return Move(router, a, tenant).run(request);
}

void settle_moves(Router& router) {
    auto maps = router.directory().maps();
    for (const auto& [name, t] : maps->tenants) {
        if (t.state != "moving") continue;
        auto n = maps->nodes.find(t.node);
        std::string outcome = "its node is not in the directory";
        if (n != maps->nodes.end()) {
            UpstreamRequest up;
            up.node = n->second.name;
            up.addr = n->second.addr;
            up.resend_after_sent = true;
            up.bytes = admin_request("POST", "/_admin/tenants/" + name + "/thaw", n->second.addr,
                                     n->second.token, "", router.new_request_id(std::nullopt));
            Upstream::Whole w = router.upstream().call(std::move(up));
            outcome = !w.answer                  ? "its source did not answer the thaw: " + w.message
                      : w.answer->status == 200 ? "its source thawed"
                                                : "its source answered the thaw " +
                                                      std::to_string(w.answer->status);
        }
        std::cerr << "fenec-shard: tenant `" << name << "` was left moving from `" << t.node
                  << "` to `" << t.moving_to << "` by a stopped move: still routed to `" << t.node
                  << "`, " << outcome << "; move it again to finish\n";
    }
}

}  // namespace fenec::shard
