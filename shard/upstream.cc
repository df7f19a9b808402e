// shard/upstream.cc: calls to nodes on the upstream loops (shard/upstream.h). A call is a small
// state machine on one loop: connect (or a pooled connection looked at first), send, read the
// head, then the body by its length or the stream until it ends. One I/O completion at a time;
// deadlines are judged by each loop's tick, which cancels the operation of a call past its own.
#include "shard/upstream.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "server/obs/metrics.h"
#include "server/runtime/http_server.h"
#include "server/runtime/loop.h"

namespace fenec::shard {

namespace {

using server::Completion;
using server::Loop;

// Idle connections to nodes, by address; shared by the loops (a connection is not tied to one).
class Pool {
  public:
    Pool(uint64_t idle_ms, uint32_t max, obs::GaugeFamily* gauge)
        : idle_ms_(idle_ms), max_(max), gauge_(gauge) {}
    ~Pool() {
        for (auto& [addr, entry] : idle_) {
            for (const Idle& i : entry.list) ::close(i.fd);
        }
    }

    // A connection that is still good, or -1. Looked at before it is handed out (§5.4).
    int take(const std::string& addr, const std::string& node, uint64_t now_ms) {
        std::lock_guard lock(mu_);
        auto it = idle_.find(addr);
        if (it == idle_.end()) return -1;
        Entry& e = it->second;
        while (!e.list.empty()) {
            Idle i = e.list.back();
            e.list.pop_back();
            count(e, node, -1);
            if (now_ms - i.since_ms <= idle_ms_ && still_open(i.fd)) return i.fd;
            ::close(i.fd);
        }
        return -1;
    }

    void put(const std::string& addr, const std::string& node, int fd, uint64_t now_ms) {
        std::lock_guard lock(mu_);
        if (max_ == 0) {
            ::close(fd);
            return;
        }
        Entry& e = idle_[addr];
        if (e.list.size() >= max_) {
            ::close(e.list.front().fd);
            e.list.pop_front();
            count(e, node, -1);
        }
        e.list.push_back({fd, now_ms});
        count(e, node, +1);
    }

  private:
    struct Idle {
        int fd;
        uint64_t since_ms;
    };
    struct Entry {
        std::deque<Idle> list;
        // The gauge child of the node last seen at this address, looked up once, not per
        // request (a family's `with` takes its mutex and builds its key).
        std::string node;
        obs::Gauge* gauge = nullptr;
    };
    // A peek that finds end-of-file (the node closed it for its silence) or bytes nobody asked
    // for makes the connection unusable; only "nothing to read yet" keeps it.
    static bool still_open(int fd) {
        char c;
        const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    void count(Entry& e, const std::string& node, double delta) {
        if (!gauge_) return;
        if (!e.gauge || e.node != node) {
            e.node = node;
            e.gauge = &gauge_->with({node});
        }
        e.gauge->add(delta);
    }

    const uint64_t idle_ms_;
    const uint32_t max_;
    obs::GaugeFamily* const gauge_;
    std::mutex mu_;
    std::map<std::string, Entry, std::less<>> idle_;
};

// Read buffers a loop keeps for its next calls: one per call in flight at once, a few.
constexpr size_t upstream_buffers_kept = 16;

class UpstreamImpl;
class Call;
struct LoopSlot;
// The LoopSlot of the calling thread when it is one of an Upstream's own loops.
thread_local LoopSlot* own_slot = nullptr;

// One loop and the calls on it: one of the upstream's own (with a thread), or an HTTP server's
// loop a call was started from (server::serving_loop), whose thread is the server's.
struct LoopSlot {
    std::shared_ptr<Loop> loop;
    std::thread thread;  // own loops only
    Completion tick;
    Call* active = nullptr;  // loop thread only: the calls in progress, an intrusive list
    // Read buffers of calls that ended, handed to the next (loop thread only): a 64 KiB
    // allocation and its free per request cost more than the rest of a call's allocations.
    std::vector<std::unique_ptr<char[]>> buffers;
    UpstreamImpl* owner = nullptr;
};

// "60", "0.5": a timeout as the flag took it, for messages.
std::string seconds_text(uint64_t ms) {
    std::string s = std::to_string(ms / 1000);
    if (ms % 1000) {
        std::string frac = std::to_string(1000 + ms % 1000).substr(1);
        while (frac.back() == '0') frac.pop_back();
        s += "." + frac;
    }
    return s;
}

bool resolve(const std::string& addr, sockaddr_storage& out, socklen_t& len, std::string& error) {
    const size_t colon = addr.rfind(':');
    if (colon == std::string::npos) {
        error = "`" + addr + "` is not host:port";
        return false;
    }
    std::string host = addr.substr(0, colon);
    const std::string port = addr.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0 || !res) {
        error = std::string("cannot resolve `") + addr + "`: " + ::gai_strerror(rc);
        return false;
    }
    std::memcpy(&out, res->ai_addr, res->ai_addrlen);
    len = res->ai_addrlen;
    ::freeaddrinfo(res);
    return true;
}

class Call final : public UpstreamCall, public std::enable_shared_from_this<Call> {
  public:
    Call(UpstreamImpl& up, LoopSlot& slot, UpstreamRequest request,
         std::shared_ptr<UpstreamSink> sink)
        : up_(up), slot_(slot), req_(std::move(request)), sink_(std::move(sink)) {
        op_.callback = &Call::on_op;
        op_.context = this;
    }

    void begin();  // loop thread
    Call* next_active() const { return next_active_; }
    void cancel() override;
    // Loop thread, from the tick: cancel the operation of a call past its deadline.
    void judge(uint64_t now_ms) {
        if (deadline_ms_ != 0 && now_ms >= deadline_ms_ && op_.in_flight && !timed_out_) {
            timed_out_ = true;
            slot_.loop->cancel(op_);
        }
    }

  private:
    enum class Phase : uint8_t { connecting, sending, head, body, to_end, stream, done };
    static void on_op(Completion& c) { static_cast<Call*>(c.context)->step(c.result); }
    void step(int32_t result);
    void attempt(bool fresh);
    void send_more();
    void recv_more();
    bool take_head();  // false: wait for more bytes
    void resend_or(UpstreamFailure failure, const std::string& message, const char* reason,
                   bool resendable);
    void fail(UpstreamFailure failure, std::string message);
    void answer_whole();
    void finish();
    void close_fd() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    uint64_t now() const { return slot_.loop->now_ms(); }
    void arm_deadline();
    uint64_t timeout_ms() const;  // the request's own bound, else the options'
    bool too_large(uint64_t bytes) const {
        return req_.body_bytes_max != 0 && bytes > req_.body_bytes_max;
    }
    std::string who() const { return "node `" + req_.node + "` (" + req_.addr + ")"; }

    UpstreamImpl& up_;
    LoopSlot& slot_;
    Call* prev_active_ = nullptr;  // LoopSlot::active, linked through the calls themselves (no
    Call* next_active_ = nullptr;  // node allocated per request, as a std::set would)
    UpstreamRequest req_;
    std::shared_ptr<UpstreamSink> sink_;
    std::shared_ptr<Call> self_;  // held from begin() to finish()
    Completion op_;
    Phase phase_ = Phase::connecting;
    int fd_ = -1;
    bool pooled_ = false;
    bool resent_ = false;
    bool timed_out_ = false;
    bool cancelled_ = false;
    uint64_t deadline_ms_ = 0;
    uint64_t sent_at_ms_ = 0;
    sockaddr_storage addr_{};
    socklen_t addr_len_ = 0;
    size_t sent_ = 0;
    std::unique_ptr<char[]> buf_;  // not zeroed: a recv fills what it says
    std::string in_;  // answer bytes read and not yet handed over
    UpstreamAnswer answer_;
    uint64_t body_bytes_ = 0;  // Phase::body: the length still expected in `in_`
};

class UpstreamImpl final : public Upstream {
  public:
    explicit UpstreamImpl(const UpstreamOptions& o)
        : options_(o), pool_(o.idle_ms, o.pool_max, o.idle_connections),
          duration_(o.duration ? &o.duration->with({}) : nullptr) {}
    ~UpstreamImpl() override { stop(); }

    bool init(std::string& error) {
        const uint32_t n = options_.loops ? options_.loops : 1;
        for (uint32_t i = 0; i < n; ++i) {
            auto slot = std::make_unique<LoopSlot>();
            slot->loop = Loop::create(error);
            if (!slot->loop) return false;
            slot->owner = this;
            slot->tick.callback = &UpstreamImpl::on_tick;
            slot->tick.context = slot.get();
            slots_.push_back(std::move(slot));
        }
        for (auto& s : slots_) {
            LoopSlot* slot = s.get();
            slot->thread = std::thread([slot] {
                own_slot = slot;
                slot->loop->timeout(slot->tick, upstream_tick_ms);
                slot->loop->run();
            });
        }
        return true;
    }

    std::shared_ptr<UpstreamCall> start(UpstreamRequest request,
                                        std::shared_ptr<UpstreamSink> sink) override {
        // On a server loop the call runs right there: no hand-off to an upstream loop and back,
        // which costs two thread wake-ups per request (`make shard-bench`).
        // Likewise on one of this Upstream's own loops: a call started from another call's
        // callback (the query across tenants' next tenant) begins on the same loop.
        LoopSlot* here = own_slot && own_slot->owner == this ? own_slot : serving_slot();
        if (here) {
            auto call = std::make_shared<Call>(*this, *here, std::move(request), std::move(sink));
            call->begin();
            return call;
        }
        LoopSlot& slot = *slots_[next_.fetch_add(1, std::memory_order_relaxed) % slots_.size()];
        auto call = std::make_shared<Call>(*this, slot, std::move(request), sink);
        if (!slot.loop->post([call] { call->begin(); })) {
            sink->on_failure(UpstreamFailure::unreachable, "the router is stopping");
        }
        return call;
    }

    Whole call(UpstreamRequest request) override {
        struct Collect final : UpstreamSink {
            std::mutex mu;
            std::condition_variable cv;
            bool done = false;
            Whole whole;
            void on_answer(UpstreamAnswer a) override { set([&] { whole.answer = std::move(a); }); }
            void on_failure(UpstreamFailure f, std::string m) override {
                set([&] {
                    whole.failure = f;
                    whole.message = std::move(m);
                });
            }
            bool on_data(std::string) override { return true; }
            void on_end() override {}
            void set(const std::function<void()>& fn) {
                std::lock_guard lock(mu);
                if (done) return;
                fn();
                done = true;
                cv.notify_all();
            }
        };
        auto sink = std::make_shared<Collect>();
        request.allow_stream = false;
        start(std::move(request), sink);
        std::unique_lock lock(sink->mu);
        sink->cv.wait(lock, [&] { return sink->done; });
        return std::move(sink->whole);
    }

    void stop() override {
        std::lock_guard lock(stop_mu_);
        if (stopped_) return;
        stopped_ = true;
        for (auto& s : slots_) s->loop->stop();
        for (auto& s : slots_) {
            if (s->thread.joinable()) s->thread.join();
        }
    }

    // The slot of the calling thread's server loop, made (and its tick armed) on first use;
    // nullptr off a server loop, or once stopped.
    LoopSlot* serving_slot() {
        const std::shared_ptr<Loop>& loop = server::serving_loop();
        if (!loop) return nullptr;
        std::lock_guard lock(stop_mu_);
        if (stopped_) return nullptr;
        for (auto& s : serving_) {
            if (s->loop == loop) return s.get();
        }
        auto slot = std::make_unique<LoopSlot>();
        slot->loop = loop;
        slot->owner = this;
        slot->tick.callback = &UpstreamImpl::on_tick;
        slot->tick.context = slot.get();
        loop->timeout(slot->tick, upstream_tick_ms);  // this is the loop's thread
        serving_.push_back(std::move(slot));
        return serving_.back().get();
    }

    const UpstreamOptions& options() const { return options_; }
    Pool& pool() { return pool_; }
    obs::Histogram* duration() const { return duration_; }
    void retried(const char* reason) {
        if (options_.retries) options_.retries->with({reason}).inc();
    }

  private:
    static void on_tick(Completion& c) {
        auto* slot = static_cast<LoopSlot*>(c.context);
        const uint64_t now = slot->loop->now_ms();
        // judge() may cancel but never ends a call, so the set is not changed while walked.
        for (Call* call = slot->active; call != nullptr; call = call->next_active()) {
            call->judge(now);
        }
        slot->loop->timeout(slot->tick, upstream_tick_ms);
    }

    const UpstreamOptions options_;
    Pool pool_;
    obs::Histogram* const duration_;  // options_.duration's one child, looked up once
    std::vector<std::unique_ptr<LoopSlot>> slots_;
    // Server loops calls were started on; their loops stop with the server (before stop()), and
    // a slot lives as long as this, so a tick still armed never points at freed memory.
    std::vector<std::unique_ptr<LoopSlot>> serving_;
    std::atomic<uint32_t> next_{0};
    std::mutex stop_mu_;
    bool stopped_ = false;
};

void Call::begin() {
    if (!slot_.buffers.empty()) {
        buf_ = std::move(slot_.buffers.back());
        slot_.buffers.pop_back();
    } else {
        buf_ = std::make_unique_for_overwrite<char[]>(upstream_recv_bytes);
    }
    self_ = shared_from_this();
    next_active_ = slot_.active;
    if (next_active_) next_active_->prev_active_ = this;
    slot_.active = this;
    attempt(false);
}

void Call::cancel() {
    std::weak_ptr<Call> weak = weak_from_this();
    slot_.loop->post([weak] {
        auto call = weak.lock();
        if (!call || call->phase_ == Phase::done) return;
        call->cancelled_ = true;
        if (call->op_.in_flight) call->slot_.loop->cancel(call->op_);
    });
}

uint64_t Call::timeout_ms() const {
    return req_.timeout_ms != 0 ? req_.timeout_ms : up_.options().timeout_ms;
}

void Call::arm_deadline() { deadline_ms_ = now() + timeout_ms(); }

void Call::attempt(bool fresh) {
    close_fd();
    in_.clear();
    sent_ = 0;
    timed_out_ = false;
    pooled_ = false;
    if (!fresh) {
        fd_ = up_.pool().take(req_.addr, req_.node, now());
        if (fd_ >= 0) {
            pooled_ = true;
            sent_at_ms_ = now();
            return send_more();
        }
    }
    if (addr_len_ == 0) {  // resolved once per call, and only when a pooled one will not do
        std::string error;
        if (!resolve(req_.addr, addr_, addr_len_, error)) {
            return fail(UpstreamFailure::unreachable, who() + " is unreachable: " + error);
        }
    }
    fd_ = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        return fail(UpstreamFailure::unreachable,
                    who() + " is unreachable: socket: " + std::strerror(errno));
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    phase_ = Phase::connecting;
    arm_deadline();
    slot_.loop->connect(op_, fd_, reinterpret_cast<const sockaddr*>(&addr_), addr_len_);
}

void Call::send_more() {
    phase_ = Phase::sending;
    if (sent_ == 0) sent_at_ms_ = now();
    arm_deadline();
    // Tried at once without waiting: a request usually fits the socket's buffer whole, and then
    // the answer's recv is queued in this turn rather than after a send completion's (one loop
    // turn and one syscall less per request, `make shard-bench`). Anything else (a part, an
    // error) goes through the loop, whose completion takes the rules above.
    // (Unless the request asks to be queued: see UpstreamRequest::queue_send.)
    const ssize_t n = req_.queue_send ? -1
                                      : ::send(fd_, req_.bytes.data() + sent_,
                                               req_.bytes.size() - sent_,
                                               MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
        sent_ += static_cast<size_t>(n);
        if (sent_ == req_.bytes.size()) {
            phase_ = Phase::head;
            return recv_more();
        }
    }
    slot_.loop->send(op_, fd_, req_.bytes.data() + sent_, req_.bytes.size() - sent_);
}

void Call::recv_more() {
    if (phase_ != Phase::stream) arm_deadline();
    // Waiting for the head of an answer to a request just sent: nothing can be there yet, so
    // the kernel is asked to wait for readiness rather than try a recv first that would only
    // fail with EAGAIN. And with --upstream-poll-us the loop polls for it before it sleeps: from
    // a node nearby it comes within microseconds, and is then taken without a thread woken.
    const bool awaited = phase_ == Phase::head && in_.empty();
    if (awaited) slot_.loop->poll_next_turn(up_.options().poll_us);
    slot_.loop->recv(op_, fd_, buf_.get(), upstream_recv_bytes, awaited);
}

void Call::step(int32_t result) {
    auto keep = self_;  // finish() may drop the last other reference
    if (phase_ == Phase::done) return;
    if (cancelled_) {
        if (phase_ == Phase::stream) sink_->on_end();
        close_fd();
        return finish();
    }
    const bool timed_out = timed_out_;
    switch (phase_) {
        case Phase::connecting:
            if (timed_out) {
                return fail(UpstreamFailure::unreachable,
                            who() + " did not accept a connection within " +
                                seconds_text(timeout_ms()) + " s");
            }
            if (result < 0) {
                return resend_or(UpstreamFailure::unreachable,
                                 who() + " is unreachable: " + std::strerror(-result), "unsent",
                                 true);
            }
            sent_ = 0;
            return send_more();
        case Phase::sending:
            if (timed_out || result <= 0) {
                // Not wholly sent: the node cannot have run it.
                return resend_or(UpstreamFailure::unreachable,
                                 who() + " ended the connection before the request was sent",
                                 "unsent", true);
            }
            sent_ += static_cast<size_t>(result);
            if (sent_ < req_.bytes.size()) return send_more();
            phase_ = Phase::head;
            return recv_more();
        case Phase::head:
            if (timed_out) {
                return fail(UpstreamFailure::timeout,
                            "node `" + req_.node + "` did not answer within " +
                                seconds_text(timeout_ms()) + " s");
            }
            if (result <= 0) {
                if (!in_.empty()) {
                    return fail(UpstreamFailure::cut, who() + " ended its answer part-way");
                }
                return resend_or(UpstreamFailure::may_have_run,
                                 "node `" + req_.node +
                                     "` ended the connection after the request was sent: it may "
                                     "have run; send it again with an Idempotency-Key",
                                 "idempotent", req_.resend_after_sent);
            }
            in_.append(buf_.get(), static_cast<size_t>(result));
            if (!take_head()) return recv_more();
            return;
        case Phase::body:
            if (timed_out) {
                return fail(UpstreamFailure::timeout, "node `" + req_.node + "` did not answer within " +
                                                          seconds_text(timeout_ms()) +
                                                          " s");
            }
            if (result <= 0) return fail(UpstreamFailure::cut, who() + " ended its answer part-way");
            in_.append(buf_.get(), static_cast<size_t>(result));
            if (in_.size() >= body_bytes_) return answer_whole();
            return recv_more();
        case Phase::to_end:
            if (timed_out) return fail(UpstreamFailure::timeout, who() + " stopped mid-answer");
            if (result < 0) return fail(UpstreamFailure::cut, who() + " ended its answer part-way");
            if (result == 0) {
                body_bytes_ = in_.size();
                answer_.close = true;
                return answer_whole();
            }
            in_.append(buf_.get(), static_cast<size_t>(result));
            if (too_large(in_.size())) {
                return fail(UpstreamFailure::too_large, who() + " answered past " +
                                                            std::to_string(req_.body_bytes_max) +
                                                            " bytes");
            }
            return recv_more();
        case Phase::stream:
            if (result <= 0) {
                sink_->on_end();
                close_fd();
                return finish();
            }
            if (!sink_->on_data(std::string(buf_.get(), static_cast<size_t>(result)))) {
                sink_->on_end();
                close_fd();
                return finish();
            }
            return recv_more();
        case Phase::done:
            return;
    }
}

bool Call::take_head() {
    for (;;) {
        http::ResponseHead head;
        size_t used = 0;
        http::ParseError err;
        const http::ParseStatus st = http::parse_response_head(in_, head, used, err);
        if (st == http::ParseStatus::need_more) return false;
        if (st == http::ParseStatus::error) {
            fail(UpstreamFailure::cut, who() + " answered a malformed head: " + err.message);
            return true;
        }
        in_.erase(0, used);
        if (head.status >= 100 && head.status < 200) continue;  // 100 Continue and the like
        if (obs::Histogram* d = up_.duration()) {
            d->observe(static_cast<double>(now() - sent_at_ms_) / 1000);
        }
        answer_.status = head.status;
        answer_.content_length = head.content_length;
        answer_.close = !head.keep_alive;
        answer_.headers.reserve(head.headers.size());
        for (const http::Header& h : head.headers) answer_.headers.emplace_back(h.name, h.value);
        const bool no_body = req_.head_only || head.status == 204 || head.status == 304;
        if (no_body) {
            body_bytes_ = 0;
            answer_whole();
        } else if (head.content_length && !head.transfer_encoding) {
            body_bytes_ = *head.content_length;
            if (too_large(body_bytes_)) {
                fail(UpstreamFailure::too_large, who() + " answered " +
                                                     std::to_string(body_bytes_) + " bytes");
                return true;
            }
            phase_ = Phase::body;
            if (body_bytes_ <= upstream_body_reserve_max) {
                in_.reserve(body_bytes_ + upstream_body_spare_bytes);  // it grows in place
            }
            if (in_.size() >= body_bytes_) answer_whole();
            else recv_more();
        } else if (req_.allow_stream) {
            phase_ = Phase::stream;
            deadline_ms_ = 0;  // a subscription waits as long as it likes once its head came
            answer_.stream = true;
            sink_->on_answer(std::move(answer_));
            if (!in_.empty() && !sink_->on_data(std::move(in_))) {
                sink_->on_end();
                close_fd();
                finish();
                return true;
            }
            in_.clear();
            recv_more();
        } else {
            phase_ = Phase::to_end;
            recv_more();
        }
        return true;
    }
}

void Call::answer_whole() {
    const bool reusable = phase_ != Phase::to_end && !answer_.close && in_.size() == body_bytes_;
    // The body is moved out whole, not copied, when nothing was read past it.
    if (in_.size() == body_bytes_) answer_.body = std::move(in_);
    else answer_.body = in_.substr(0, body_bytes_);
    if (reusable) {
        up_.pool().put(req_.addr, req_.node, fd_, now());
        fd_ = -1;
    } else {
        close_fd();
    }
    in_.clear();
    sink_->on_answer(std::move(answer_));
    finish();
}

void Call::resend_or(UpstreamFailure failure, const std::string& message, const char* reason,
                     bool resendable) {
    close_fd();
    if (resendable && !resent_) {
        resent_ = true;
        up_.retried(reason);
        return attempt(true);
    }
    fail(failure, message);
}

void Call::fail(UpstreamFailure failure, std::string message) {
    close_fd();
    sink_->on_failure(failure, std::move(message));
    finish();
}

void Call::finish() {
    phase_ = Phase::done;
    deadline_ms_ = 0;
    if (prev_active_) prev_active_->next_active_ = next_active_;
    else if (slot_.active == this) slot_.active = next_active_;
    if (next_active_) next_active_->prev_active_ = prev_active_;
    prev_active_ = next_active_ = nullptr;
    // No operation is in flight once a call is done (finish runs from a completion's callback, or
    // before anything was submitted), so its buffer may serve the next call.
    if (buf_ && slot_.buffers.size() < upstream_buffers_kept) {
        slot_.buffers.push_back(std::move(buf_));
    }
    sink_.reset();
    self_.reset();
}

}  // namespace

std::unique_ptr<Upstream> Upstream::create(const UpstreamOptions& options, std::string& error) {
    auto up = std::make_unique<UpstreamImpl>(options);
    if (!up->init(error)) return nullptr;
    return up;
}

std::string admin_request(std::string_view method, std::string_view target, std::string_view addr,
                          std::string_view token, std::string_view body,
                          std::string_view request_id) {
    std::string out;
    out.reserve(256 + body.size());
    out.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ").append(addr);
    out.append("\r\nAuthorization: Bearer ").append(token);
    out.append("\r\nContent-Length: ").append(std::to_string(body.size()));
    if (!body.empty()) out.append("\r\nContent-Type: application/json");
    out.append("\r\nConnection: keep-alive\r\nX-Request-Id: ").append(request_id);
    out.append("\r\n\r\n").append(body);
    return out;
}

}  // namespace fenec::shard
