// server/runtime/ring_client.cc: calls on io_uring loops (server/runtime/ring_client.h). A call is
// a small state machine on one loop: connect (or a pooled connection looked at first), send, read
// the head, then the body by its length or the stream until it ends. One I/O completion at a time;
// deadlines are judged by each loop's tick, which cancels the operation of a call past its own.
// What a mishap comes to, and whether it is sent again, is server/runtime/call.h's to say.
#include "server/runtime/ring_client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "server/runtime/http_server.h"
#include "server/runtime/loop.h"
#include "server/runtime/pool.h"
#include "server/runtime/resolve.h"

namespace fenec::server {

namespace {

// Read buffers a loop keeps for its next calls: one per call in flight at once, a few.
constexpr size_t buffers_kept = 16;

class RingClientImpl;
class Call;
struct LoopSlot;
// The LoopSlot of the calling thread when it is one of a RingClient's own loops.
thread_local LoopSlot* own_slot = nullptr;

// One loop and the calls on it: one of the client's own (with a thread), or an HTTP server's loop
// a call was started from (server::serving_loop), whose thread is the server's.
struct LoopSlot {
    std::shared_ptr<Loop> loop;
    std::thread thread;  // own loops only
    Completion tick;
    Call* active = nullptr;  // loop thread only: the calls in progress, an intrusive list
    // Read buffers of calls that ended, handed to the next (loop thread only): a 64 KiB
    // allocation and its free per request cost more than the rest of a call's allocations.
    std::vector<std::unique_ptr<char[]>> buffers;
    RingClientImpl* owner = nullptr;
};

class Call final : public RingCall, public std::enable_shared_from_this<Call> {
  public:
    Call(RingClientImpl& client, LoopSlot& slot, CallRequest request,
         std::shared_ptr<CallSink> sink)
        : client_(client), slot_(slot), req_(std::move(request)), sink_(std::move(sink)) {
        op_.callback = &Call::on_op;
        op_.context = this;
    }

    void begin();  // loop thread
    Call* next_active() const { return next_active_; }
    void cancel() override;
    void cut(CutDecided decided) override;
    CallPhase state() const override { return state_.load(std::memory_order_acquire); }
    const CallRequest& request() const override { return req_; }
    // Loop thread, from the tick: cancel the operation of a call past its deadline. A call
    // still waiting for its name's lookup has none: it is failed in a turn of its own (the tick
    // walks the calls, and must not end one under its feet).
    void judge(uint64_t now_ms) {
        if (deadline_ms_ == 0 || now_ms < deadline_ms_ || timed_out_) return;
        if (op_.in_flight) {
            timed_out_ = true;
            slot_.loop->cancel(op_);
        } else if (phase_ == CallPhase::resolving) {
            timed_out_ = true;
            std::weak_ptr<Call> weak = weak_from_this();
            slot_.loop->post([weak] {
                auto call = weak.lock();
                if (call && call->phase_ == CallPhase::resolving) call->lookup_timed_out();
            });
        }
    }

  private:
    static void on_op(Completion& c) { static_cast<Call*>(c.context)->step(c.result); }
    void step(int32_t result);
    void connected(int32_t result);
    void sent(int32_t result);
    void head_read(int32_t result);
    void body_read(int32_t result);
    void streamed(int32_t result);
    void attempt(bool fresh);
    void looked_up(Resolved r);
    void lookup_timed_out();
    void connect_now();
    void send_more();
    void recv_more();
    bool take_head();  // false: wait for more bytes
    void body_of(const http::ResponseHead& head);
    void resend_or_fail(Mishap what, std::string_view detail = {}, uint64_t bound_ms = 0);
    void fail(Mishap what, std::string_view detail = {}, uint64_t bound_ms = 0);
    void answer_whole();
    void end_stream();
    void finish();
    void set_phase(CallPhase phase) {
        phase_ = phase;
        state_.store(phase, std::memory_order_release);
    }
    void close_fd() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    uint64_t now() const { return slot_.loop->now_ms(); }
    void arm_deadline() { deadline_ms_ = now() + req_.timeout_ms; }
    bool too_large(uint64_t bytes) const {
        return req_.body_bytes_max != 0 && bytes > req_.body_bytes_max;
    }

    RingClientImpl& client_;
    LoopSlot& slot_;
    Call* prev_active_ = nullptr;  // LoopSlot::active, linked through the calls themselves (no
    Call* next_active_ = nullptr;  // node allocated per request, as a std::set would)
    const CallRequest req_;
    std::shared_ptr<CallSink> sink_;
    std::shared_ptr<Call> self_;  // held from begin() to finish()
    Completion op_;
    CallPhase phase_ = CallPhase::connecting;  // loop thread; state_ mirrors it for any thread
    std::atomic<CallPhase> state_{CallPhase::connecting};
    Framing framing_ = Framing::length;  // CallPhase::answer: how the body ends
    int fd_ = -1;
    bool resent_ = false;
    bool timed_out_ = false;
    bool cancelled_ = false;
    CutDecided cut_;  // set by cut(): runs once the cancelled operation completes
    uint64_t deadline_ms_ = 0;
    uint64_t sent_at_ms_ = 0;
    uint64_t lookup_began_ms_ = 0;
    Address addr_;
    size_t sent_ = 0;
    std::unique_ptr<char[]> buf_;  // not zeroed: a recv fills what it says
    std::string in_;               // answer bytes read and not yet handed over
    Answer answer_;
    uint64_t body_bytes_ = 0;  // Framing::length: the length expected in `in_`
};

class RingClientImpl final : public RingClient {
  public:
    explicit RingClientImpl(const RingClientOptions& o) : options_(o) {}
    ~RingClientImpl() override { stop(); }

    bool init(std::string& error) {
        const uint32_t n = options_.loops ? options_.loops : 1;
        for (uint32_t i = 0; i < n; ++i) {
            auto slot = std::make_unique<LoopSlot>();
            slot->loop = Loop::create(error);
            if (!slot->loop) return false;
            slot->owner = this;
            slot->tick.callback = &RingClientImpl::on_tick;
            slot->tick.context = slot.get();
            slots_.push_back(std::move(slot));
        }
        for (auto& s : slots_) {
            LoopSlot* slot = s.get();
            slot->thread = std::thread([slot] {
                own_slot = slot;
                slot->loop->timeout(slot->tick, ring_tick_ms);
                slot->loop->run();
            });
        }
        return true;
    }

    std::shared_ptr<RingCall> start(CallRequest request, std::shared_ptr<CallSink> sink) override {
        if (request.timeout_ms == 0) request.timeout_ms = options_.timeout_ms;
        // On a server loop the call runs right there: no hand-off to a loop of ours and back,
        // which costs two thread wake-ups per request (`make shard-bench`). Likewise on one of
        // our own loops: a call started from another call's callback (the query across tenants'
        // next tenant) begins on the same loop.
        LoopSlot* here = own_slot && own_slot->owner == this ? own_slot : serving_slot();
        if (here) {
            auto call = std::make_shared<Call>(*this, *here, std::move(request), std::move(sink));
            call->begin();
            return call;
        }
        LoopSlot& slot = *slots_[next_.fetch_add(1, std::memory_order_relaxed) % slots_.size()];
        auto call = std::make_shared<Call>(*this, slot, std::move(request), sink);
        if (!slot.loop->post([call] { call->begin(); })) {
            sink->on_failure(CallError{CallFailure::unreachable, CallPhase::connecting, false,
                                       "the client is stopping"});
        }
        return call;
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
        const std::shared_ptr<Loop>& loop = serving_loop();
        if (!loop) return nullptr;
        std::lock_guard lock(stop_mu_);
        if (stopped_) return nullptr;
        for (auto& s : serving_) {
            if (s->loop == loop) return s.get();
        }
        auto slot = std::make_unique<LoopSlot>();
        slot->loop = loop;
        slot->owner = this;
        slot->tick.callback = &RingClientImpl::on_tick;
        slot->tick.context = slot.get();
        loop->timeout(slot->tick, ring_tick_ms);  // this is the loop's thread
        serving_.push_back(std::move(slot));
        return serving_.back().get();
    }

    const RingClientOptions& options() const { return options_; }
    ConnectionPool* pool() const { return options_.pool.get(); }
    void resent(const char* reason) {
        if (options_.observer) options_.observer->resent(reason);
    }
    void answered(uint64_t ms) {
        if (options_.observer) options_.observer->answered(ms);
    }

  private:
    static void on_tick(Completion& c) {
        auto* slot = static_cast<LoopSlot*>(c.context);
        const uint64_t now = slot->loop->now_ms();
        // judge() may cancel but never ends a call, so the set is not changed while walked.
        for (Call* call = slot->active; call != nullptr; call = call->next_active()) {
            call->judge(now);
        }
        slot->loop->timeout(slot->tick, ring_tick_ms);
    }

    const RingClientOptions options_;
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
        buf_ = std::make_unique_for_overwrite<char[]>(ring_recv_bytes);
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
        if (!call || call->phase_ == CallPhase::done) return;
        call->cancelled_ = true;
        if (call->op_.in_flight) {
            call->slot_.loop->cancel(call->op_);
        } else {
            call->step(-ECANCELED);  // waiting for its lookup: nothing to cancel but itself
        }
    });
}

void Call::cut(CutDecided decided) {
    std::weak_ptr<Call> weak = weak_from_this();
    slot_.loop->post([weak, decided = std::move(decided)]() mutable {
        auto call = weak.lock();
        if (!call || call->phase_ == CallPhase::done || call->cancelled_) return;
        if (call->phase_ == CallPhase::answer) return decided(CallPhase::answer, true);
        call->cut_ = std::move(decided);
        call->cancelled_ = true;
        if (call->op_.in_flight) {
            call->slot_.loop->cancel(call->op_);
        } else {
            call->step(-ECANCELED);
        }
    });
}

void Call::attempt(bool fresh) {
    close_fd();
    in_.clear();
    sent_ = 0;
    timed_out_ = false;
    if (!fresh && client_.pool()) {
        fd_ = client_.pool()->take(req_.addr, req_.peer, now(), req_.resend_after_sent);
        if (fd_ >= 0) {
            sent_at_ms_ = now();
            return send_more();
        }
    }
    set_phase(CallPhase::connecting);
    if (addr_.length != 0) return connect_now();
    // Resolved once per call, and only when a pooled connection will not do; a name on a helper
    // thread, whose answer comes back to this loop (the loop is kept as long as that takes).
    set_phase(CallPhase::resolving);
    arm_deadline();
    lookup_began_ms_ = now();
    std::weak_ptr<Call> weak = weak_from_this();
    std::shared_ptr<Loop> loop = slot_.loop;
    std::optional<Resolved> at_once =
        resolve_or_look_up(req_.addr, client_.options().lookup, [weak, loop](Resolved r) {
            loop->post([weak, r = std::move(r)]() mutable {
                if (auto call = weak.lock()) call->looked_up(std::move(r));
            });
        });
    if (at_once) looked_up(std::move(*at_once));
}

void Call::looked_up(Resolved r) {
    // Ended meanwhile (cancelled, cut), or past its deadline: lookup_timed_out, posted by the
    // tick, fails it.
    if (phase_ != CallPhase::resolving || timed_out_) return;
    if (r.addresses.empty()) return fail(Mishap::lookup_failed, r.error, req_.timeout_ms);
    addr_ = r.addresses.front();
    set_phase(CallPhase::connecting);
    connect_now();
}

void Call::lookup_timed_out() {
    std::string host = req_.addr.substr(0, req_.addr.rfind(':'));
    fail(Mishap::lookup_failed,
         "the lookup of `" + host + "` took over " + std::to_string(now() - lookup_began_ms_) +
             " ms",
         req_.timeout_ms);
}

void Call::connect_now() {
    fd_ = ::socket(addr_.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return fail(Mishap::no_socket, std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    arm_deadline();
    slot_.loop->connect(op_, fd_, addr_.get(), addr_.length);
}

void Call::send_more() {
    set_phase(CallPhase::sending);
    if (sent_ == 0) sent_at_ms_ = now();
    arm_deadline();
    // Tried at once without waiting: a request usually fits the socket's buffer whole, and then
    // the answer's recv is queued in this turn rather than after a send completion's (one loop
    // turn and one syscall less per request, `make shard-bench`). Anything else (a part, an
    // error) goes through the loop, whose completion takes the rules above.
    // (Unless the request asks to be queued: see CallRequest::queue_send.)
    const ssize_t n = req_.queue_send
                          ? -1
                          : ::send(fd_, req_.bytes.data() + sent_, req_.bytes.size() - sent_,
                                   MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
        sent_ += static_cast<size_t>(n);
        if (sent_ == req_.bytes.size()) {
            set_phase(CallPhase::awaiting_head);
            return recv_more();
        }
    }
    slot_.loop->send(op_, fd_, req_.bytes.data() + sent_, req_.bytes.size() - sent_);
}

void Call::recv_more() {
    if (phase_ != CallPhase::streaming) arm_deadline();
    // Waiting for the head of an answer to a request just sent: nothing can be there yet, so
    // the kernel is asked to wait for readiness rather than try a recv first that would only
    // fail with EAGAIN. And with a poll_us the loop polls for it before it sleeps: from a peer
    // nearby it comes within microseconds, and is then taken without a thread woken.
    const bool awaited = phase_ == CallPhase::awaiting_head && in_.empty();
    if (awaited && req_.poll_for_answer) slot_.loop->poll_next_turn(client_.options().poll_us);
    slot_.loop->recv(op_, fd_, buf_.get(), ring_recv_bytes, awaited);
}

void Call::step(int32_t result) {
    auto keep = self_;  // finish() may drop the last other reference
    if (phase_ == CallPhase::done) return;
    if (cancelled_) {
        // A send under way when the cut came counts as far as it got.
        if (phase_ == CallPhase::sending && result > 0) sent_ += static_cast<size_t>(result);
        const CallPhase at = phase_;
        const bool sent_whole = at == CallPhase::awaiting_head || at == CallPhase::answer ||
                                at == CallPhase::streaming ||
                                (at == CallPhase::sending && sent_ == req_.bytes.size());
        if (at == CallPhase::streaming) sink_->on_end();
        close_fd();
        CutDecided cut = std::move(cut_);
        finish();
        if (cut) cut(at, sent_whole);
        return;
    }
    switch (phase_) {
        case CallPhase::resolving:
        case CallPhase::connecting:
            return connected(result);
        case CallPhase::sending:
            return sent(result);
        case CallPhase::awaiting_head:
            return head_read(result);
        case CallPhase::answer:
            return body_read(result);
        case CallPhase::streaming:
            return streamed(result);
        case CallPhase::done:
            return;
    }
}

void Call::connected(int32_t result) {
    if (timed_out_) return fail(Mishap::connect_timed_out, {}, req_.timeout_ms);
    if (result < 0) return resend_or_fail(Mishap::connect_refused, std::strerror(-result));
    sent_ = 0;
    send_more();
}

void Call::sent(int32_t result) {
    // Not wholly sent: the far end cannot have run it.
    if (timed_out_) return resend_or_fail(Mishap::send_stalled, {}, req_.timeout_ms);
    if (result <= 0) return resend_or_fail(Mishap::send_failed);
    sent_ += static_cast<size_t>(result);
    if (sent_ < req_.bytes.size()) return send_more();
    set_phase(CallPhase::awaiting_head);
    recv_more();
}

void Call::head_read(int32_t result) {
    if (timed_out_) return fail(Mishap::no_answer, {}, req_.timeout_ms);
    if (result <= 0) {
        if (!in_.empty()) return fail(Mishap::answer_cut);
        return resend_or_fail(Mishap::closed_before_answer);
    }
    in_.append(buf_.get(), static_cast<size_t>(result));
    if (!take_head()) recv_more();
}

void Call::body_read(int32_t result) {
    if (timed_out_) return fail(Mishap::answer_stalled, {}, req_.timeout_ms);
    if (framing_ == Framing::to_end && result == 0) {
        body_bytes_ = in_.size();
        answer_.close = true;
        return answer_whole();
    }
    if (result <= 0) return fail(Mishap::answer_cut);
    in_.append(buf_.get(), static_cast<size_t>(result));
    if (framing_ == Framing::length) {
        if (in_.size() >= body_bytes_) return answer_whole();
    } else if (too_large(in_.size())) {
        return fail(Mishap::too_large, "past " + std::to_string(req_.body_bytes_max) + " bytes");
    }
    recv_more();
}

void Call::streamed(int32_t result) {
    if (result <= 0 || !sink_->on_data(std::string(buf_.get(), static_cast<size_t>(result)))) {
        return end_stream();
    }
    recv_more();
}

bool Call::take_head() {
    for (;;) {
        http::ResponseHead head;
        size_t used = 0;
        http::ParseError err;
        const http::ParseStatus st = http::parse_response_head(in_, head, used, err);
        if (st == http::ParseStatus::need_more) return false;
        if (st == http::ParseStatus::error) {
            fail(Mishap::malformed_head, err.message);
            return true;
        }
        in_.erase(0, used);
        if (head.status >= 100 && head.status < 200) continue;  // 100 Continue and the like
        client_.answered(now() - sent_at_ms_);
        answer_ = answer_of(head);
        body_of(head);
        return true;
    }
}

// The body after `head`, by its framing.
void Call::body_of(const http::ResponseHead& head) {
    framing_ = framing_of(head, req_);
    switch (framing_) {
        case Framing::none:
            body_bytes_ = 0;
            return answer_whole();
        case Framing::length:
            body_bytes_ = *head.content_length;
            if (too_large(body_bytes_)) {
                return fail(Mishap::too_large, std::to_string(body_bytes_) + " bytes");
            }
            set_phase(CallPhase::answer);
            if (body_bytes_ <= answer_body_reserve_max) {
                in_.reserve(body_bytes_ + answer_body_spare_bytes);  // it grows in place
            }
            if (in_.size() >= body_bytes_) return answer_whole();
            return recv_more();
        case Framing::stream:
            set_phase(CallPhase::streaming);
            deadline_ms_ = 0;  // a subscription waits as long as it likes once its head came
            answer_.stream = true;
            sink_->on_answer(std::move(answer_));
            if (!in_.empty() && !sink_->on_data(std::move(in_))) return end_stream();
            in_.clear();
            return recv_more();
        case Framing::to_end:
            set_phase(CallPhase::answer);
            return recv_more();
    }
}

void Call::answer_whole() {
    const bool can_pool = reusable(framing_, answer_.close, in_.size() != body_bytes_);
    // The body is moved out whole, not copied, when nothing was read past it.
    if (in_.size() == body_bytes_) {
        answer_.body = std::move(in_);
    } else {
        answer_.body = in_.substr(0, body_bytes_);
    }
    if (can_pool && client_.pool()) {
        client_.pool()->put(req_.addr, req_.peer, fd_, now());
        fd_ = -1;
    } else {
        close_fd();
    }
    in_.clear();
    sink_->on_answer(std::move(answer_));
    finish();
}

void Call::end_stream() {
    sink_->on_end();
    close_fd();
    finish();
}

void Call::resend_or_fail(Mishap what, std::string_view detail, uint64_t bound_ms) {
    close_fd();
    if (const char* reason = resend_reason(what, req_, resent_)) {
        resent_ = true;
        client_.resent(reason);
        return attempt(true);
    }
    fail(what, detail, bound_ms);
}

void Call::fail(Mishap what, std::string_view detail, uint64_t bound_ms) {
    close_fd();
    sink_->on_failure(call_error(req_, what, detail, bound_ms));
    finish();
}

void Call::finish() {
    set_phase(CallPhase::done);
    deadline_ms_ = 0;
    if (prev_active_) {
        prev_active_->next_active_ = next_active_;
    } else if (slot_.active == this) {
        slot_.active = next_active_;
    }
    if (next_active_) next_active_->prev_active_ = prev_active_;
    prev_active_ = next_active_ = nullptr;
    // No operation is in flight once a call is done (finish runs from a completion's callback, or
    // before anything was submitted), so its buffer may serve the next call.
    if (buf_ && slot_.buffers.size() < buffers_kept) slot_.buffers.push_back(std::move(buf_));
    sink_.reset();
    self_.reset();
}

}  // namespace

std::unique_ptr<RingClient> RingClient::create(const RingClientOptions& options,
                                               std::string& error) {
    auto client = std::make_unique<RingClientImpl>(options);
    if (!client->init(error)) return nullptr;
    return client;
}

}  // namespace fenec::server
