// server/runtime/connection.cc: one connection's state machine (server/runtime/connection.h): heads
// read and parsed, bodies read straight into the request, pipelined requests answered in order, the
// timeouts swept, answers and streams sent, the lingering close. Also the Handler's default
// answer to a request the server could not frame.
#include "server/runtime/connection.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "server/runtime/exchange.h"

namespace fenec::server {

http::Response Handler::framing_error(int status, std::string_view message) {
    http::Response r;
    r.status = status;
    r.close = true;
    r.body.reserve(message.size() + 16);
    r.body.append("{\"error\":\"");
    for (char ch : message) {  // JSON string escaping of a message the server wrote itself
        auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            r.body.push_back('\\');
            r.body.push_back(ch);
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            r.body.append("\\u00");
            r.body.push_back(hex[c >> 4]);
            r.body.push_back(hex[c & 15]);
        } else {
            r.body.push_back(ch);
        }
    }
    r.body.append("\"}");
    return r;
}

void Handler::on_refused(std::string_view) {}

void Handler::on_answered(const Answered&) {}

namespace internal {

Connection::Connection(ConnectionOwner& owner, int fd, uint64_t id, std::string peer,
                       bool is_counted)
    : counted(is_counted),
      owner_(owner),
      loop_(*owner.loop),
      fd_(fd),
      id_(id),
      peer_(std::move(peer)) {
    for (Completion* c : {&recv_c_, &send_c_, &shut_c_, &close_c_}) c->context = this;
    recv_c_.callback = &Connection::on_recv_done;
    send_c_.callback = &Connection::on_send_done;
    shut_c_.callback = &Connection::on_shut_done;
    close_c_.callback = &Connection::on_close_done;
    last_activity_ms_ = loop_.now_ms();
    accepted_ms_ = last_activity_ms_;
}

void Connection::start() { arm_recv(); }

void Connection::start_refusal(http::Response answer) { answer_and_close(std::move(answer)); }

void Connection::arm_recv() {
    if (recv_c_.in_flight || phase_ == Phase::dead || peer_closed_) return;
    char* buffer = nullptr;
    size_t bytes = 0;
    recv_into_body_ = phase_ == Phase::body && !body_streamed_;
    recv_into_chunk_ = phase_ == Phase::body && body_streamed_;
    recv_into_user_ = false;
    if (recv_into_chunk_) {
        if (!body_wanted_) return;  // backpressure: the handler still holds the last chunk
        if (!body_into_.empty()) {  // read_body_into: straight into the handler's buffer
            recv_into_user_ = true;
            buffer = body_into_.data() + body_into_got_;
            bytes = static_cast<size_t>(
                std::min<uint64_t>(body_length_ - body_got_, body_into_.size() - body_into_got_));
        } else {
            uint64_t want = std::min<uint64_t>(body_length_ - body_got_, body_chunk_bytes_max);
            body_chunk_.resize(want);
            buffer = body_chunk_.data();
            bytes = want;
        }
    } else if (recv_into_body_) {
        uint64_t want = std::min<uint64_t>(body_length_ - body_got_, body_recv_bytes_max);
        request_.body.resize(body_got_ + want);  // sized back to body_got_ when it lands
        buffer = request_.body.data() + body_got_;
        bytes = want;
    } else {
        if (phase_ >= Phase::streaming) in_.clear();  // nothing more is parsed: drop
        std::span<char> space = in_.space();
        if (space.empty()) return;  // full: read again once the answer before it is sent
        buffer = space.data();
        bytes = space.size();
    }
    // A request just read whole (or answered, its answer not yet sent) with nothing after it: its
    // client waits for the answer, so the next bytes are not there yet and a first recv attempt
    // would only fail.
    const bool poll_first =
        (phase_ == Phase::handling || phase_ == Phase::answering) && in_.size() == 0;
    loop_.recv(recv_c_, fd_, buffer, bytes, poll_first);
    ++ops_;
}

void Connection::on_recv(int32_t result) {
    --ops_;
    const bool into_user = recv_into_user_;
    recv_into_user_ = false;
    // A handler's buffer is let go once no recv can write into it; it is kept while filling.
    const bool still_filling = into_user && result > 0 && phase_ == Phase::body && body_streamed_ &&
                               body_wanted_ && !body_into_.empty();
    if (into_user && !still_filling) {
        body_into_ = {};
        body_into_got_ = 0;
        body_into_owner_.reset();
    }
    if (phase_ == Phase::dead) return finish_if_idle();
    if (result <= 0) return on_peer_closed();  // 0: the peer's FIN; < 0: reset and the like
    auto n = static_cast<size_t>(result);
    last_activity_ms_ = loop_.now_ms();
    // Where the bytes went was decided when the recv was armed: a read-ahead armed while an
    // answer was sent may land once the next head has begun a body.
    if (into_user) {
        recv_into_chunk_ = false;
        if (still_filling) {
            body_got_ += n;
            body_into_got_ += n;
            if (into_done()) return deliver_chunk({});
            return arm_recv();  // the next recv on this loop, no hop to the handler
        }
        // answered meanwhile: the rest of the body is not read
    } else if (recv_into_chunk_) {
        recv_into_chunk_ = false;
        body_chunk_.resize(n);
        if (phase_ == Phase::body && body_streamed_) {
            body_got_ += n;
            return deliver_chunk(std::move(body_chunk_));
        }
        body_chunk_.clear();  // answered meanwhile: the rest of the body is not read
    } else if (recv_into_body_) {
        body_got_ += n;
        request_.body.resize(body_got_);
    } else if (phase_ < Phase::streaming) {
        in_.commit(n);
    }
    switch (phase_) {
        case Phase::body:
            return body_streamed_ ? stream_body_step() : take_body();
        case Phase::head:
            return process_input();
        case Phase::handling:
        case Phase::answering:
            return arm_recv();
        case Phase::lingering:
            linger_bytes_ += n;
            if (linger_bytes_ > linger_bytes_max) return cut();
            return arm_recv();
        default:  // streaming, closing: the bytes are dropped
            return arm_recv();
    }
}

void Connection::on_peer_closed() {
    peer_closed_ = true;
    switch (phase_) {
        case Phase::handling:
        case Phase::answering:
            // The answer still goes (a client may half-close after its request); the handler is
            // told so a held request can end early. Pipelined requests already read are served.
            last_send_ms_ = loop_.now_ms();
            if (exchange_) exchange_->mark_closed();
            return;
        case Phase::head:
            return process_input();  // serves what is buffered, then cuts
        case Phase::closing:
            return;  // the last answer still goes
        default:
            return cut();
    }
}

// Parse only when the buffer may hold a whole head (a blank line) or is past the head bound:
// a head trickled in byte by byte is scanned once, not once per byte.
bool Connection::head_may_be_whole() const {
    std::string_view v = in_.view();
    if (v.size() > http::head_bytes_max) return true;
    size_t from = head_scanned_ > 3 ? head_scanned_ - 3 : 0;
    std::string_view tail = v.substr(std::min(from, v.size()));
    return tail.find("\n\r\n") != std::string_view::npos ||
           tail.find("\n\n") != std::string_view::npos;
}

// An answer sent at once from inside a handler (Exchange::reply on the loop thread) ends in
// on_drained while process_input is still on the stack: the next head is then parsed by the loop
// here, not by a deeper call, so pipelined requests answered synchronously never recurse.
void Connection::process_input() {
    if (in_input_) {
        input_again_ = true;
        return;
    }
    in_input_ = true;
    do {
        input_again_ = false;
        if (phase_ == Phase::head) process_head();
    } while (input_again_);
    in_input_ = false;
}

void Connection::process_head() {
    assert(phase_ == Phase::head);
    head_only_ = false;
    if (in_.size() == 0) {
        if (peer_closed_) return cut();
        return arm_recv();
    }
    // The head's deadline runs from its first byte in phase head: a pipelined request behind a
    // slow answer is not timed while it waits.
    if (head_started_ms_ == 0) head_started_ms_ = loop_.now_ms();
    http::RequestHead head;
    size_t consumed = 0;
    http::ParseError error;
    http::ParseStatus status = http::ParseStatus::need_more;
    if (head_may_be_whole()) status = http::parse_request_head(in_.view(), head, consumed, error);
    switch (status) {
        case http::ParseStatus::need_more:
            head_scanned_ = in_.size();
            if (peer_closed_) return cut();  // half a request, and nothing more will come
            return arm_recv();
        case http::ParseStatus::error:
            return framing_error(error.status, error.message);
        case http::ParseStatus::done:
            return on_head(std::move(head), consumed);
    }
}

void Connection::on_head(http::RequestHead head, size_t consumed) {
    in_.consume(consumed);
    head_scanned_ = 0;
    head_started_ms_ = 0;
    body_got_ = 0;  // the bytes in of this request (report_begin), body or none
    if (owner_.options.report_answers) {
        report_.method.assign(head.method_text);
        report_.target.assign(head.target);
        report_.began = std::chrono::steady_clock::now();
    }
    request_.head = std::move(head);
    request_.body.clear();
    request_.peer = peer_;
    request_.connection = id_;
    keep_alive_ = request_.head.keep_alive;
    head_only_ = request_.head.method == http::Method::head;
    version_minor_ = request_.head.version_minor;
    if (request_.head.transfer_encoding) {
        return framing_error(411, "Transfer-Encoding is not supported: send Content-Length");
    }
    HeadVerdict verdict = owner_.handler.check_head(request_);
    if (verdict.refuse) return answer_and_close(std::move(*verdict.refuse));
    uint64_t length = request_.head.content_length.value_or(0);
    if (length > verdict.body_bytes_max) {
        return framing_error(413, "a body of " + std::to_string(length) +
                                      " bytes is over the limit of " +
                                      std::to_string(verdict.body_bytes_max) + " bytes");
    }
    if (length == 0) return dispatch();
    body_length_ = length;
    body_got_ = 0;
    body_timed_ms_ = 0;
    body_waiting_since_ms_ = 0;
    phase_ = Phase::body;
    if (verdict.stream_body) {
        // The handler has the request now and pulls the body; nothing is read until it asks,
        // and `100 Continue` waits for that ask: a handler that answers first (a credential
        // refused from the head) never invites the body.
        body_streamed_ = true;
        body_wanted_ = false;
        continue_owed_ = request_.head.expect_continue;
        return hand_to_handler();
    }
    continue_owed_ = false;
    if (request_.head.expect_continue) invite_body();
    body_clock_start(loop_.now_ms());
    take_body();
}

bool Connection::on_body_wanted(std::span<char> into, std::shared_ptr<const void> owner) {
    if (phase_ != Phase::body || !body_streamed_ || !exchange_) return false;
    body_wanted_ = true;
    body_into_ = into;
    body_into_got_ = 0;
    body_into_owner_ = std::move(owner);
    last_activity_ms_ = loop_.now_ms();  // the peer's silence is timed from here
    body_clock_start(last_activity_ms_);
    if (continue_owed_) {  // request_ is the handler's by now: the flag says it asked
        continue_owed_ = false;
        invite_body();
    }
    stream_body_step();
    return true;
}

// `100 Continue` for a client that asked to be invited, unless it sent body bytes regardless.
void Connection::invite_body() {
    if (body_got_ != 0 || in_.size() != 0) return;
    queued_.append("HTTP/1.1 100 Continue\r\n\r\n");
    flush();
}

// Hands the handler what is buffered, or reads for it; only while it wants a chunk.
void Connection::stream_body_step() {
    if (!body_wanted_) return;
    if (in_.size() > 0 && !body_into_.empty()) {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(
            {body_length_ - body_got_, in_.size(), body_into_.size() - body_into_got_}));
        std::memcpy(body_into_.data() + body_into_got_, in_.view().data(), take);
        in_.consume(take);
        body_got_ += take;
        body_into_got_ += take;
        if (into_done()) return deliver_chunk({});
    } else if (in_.size() > 0) {
        size_t take = static_cast<size_t>(
            std::min<uint64_t>({body_length_ - body_got_, in_.size(), body_chunk_bytes_max}));
        std::string bytes(in_.view().substr(0, take));
        in_.consume(take);
        body_got_ += take;
        return deliver_chunk(std::move(bytes));
    }
    arm_recv();
}

bool Connection::into_done() const {
    return body_into_got_ == body_into_.size() || body_got_ == body_length_;
}

void Connection::deliver_chunk(std::string bytes) {
    body_wanted_ = false;
    body_clock_stop(loop_.now_ms());
    BodyChunk chunk;
    chunk.bytes = std::move(bytes);
    chunk.filled = body_into_got_;
    body_into_ = {};  // no recv is in flight into it: delivered from its completion or in_
    body_into_got_ = 0;
    body_into_owner_.reset();
    chunk.last = body_got_ == body_length_;
    if (chunk.last) {
        body_streamed_ = false;
        phase_ = Phase::handling;
        settle();
    }
    std::shared_ptr<ExchangeImpl> exchange = exchange_;  // the handler may reply in the call
    exchange->deliver_body(std::move(chunk));
    if (phase_ == Phase::handling) arm_recv();  // read ahead (bounded), and hear the peer close
}

// Moves body bytes already buffered into the request; dispatches once it is whole.
void Connection::take_body() {
    size_t take = static_cast<size_t>(std::min<uint64_t>(body_length_ - body_got_, in_.size()));
    if (take > 0) {
        request_.body.append(in_.view().substr(0, take));
        in_.consume(take);
        body_got_ += take;
    }
    if (body_got_ == body_length_) return dispatch();
    arm_recv();
}

void Connection::dispatch() {
    phase_ = Phase::handling;
    settle();
    hand_to_handler();
    arm_recv();  // read ahead (bounded), and hear the peer close
}

void Connection::hand_to_handler() {
    exchange_ = std::make_shared<ExchangeImpl>(owner_.loop, this, owner_.options.stream_buffer_max);
    if (body_streamed_) exchange_->stream_body();
    std::shared_ptr<Exchange> exchange = exchange_;
    owner_.handler.handle(std::move(request_), std::move(exchange));
}

void Connection::answer_and_close(http::Response response) {
    if (exchange_) {  // a streamed body cut short (408): its handler learns it
        std::shared_ptr<ExchangeImpl> exchange = std::move(exchange_);
        exchange->connection_ = nullptr;
        exchange->mark_closed();
    }
    body_streamed_ = false;
    body_wanted_ = false;
    settle();
    response.close = true;
    report_begin(response);
    http::write_response(response, head_only_, owner_.options.server_header, queued_);
    phase_ = Phase::closing;
    in_.clear();
    flush();
    arm_recv();
}

void Connection::framing_error(int status, std::string_view message) {
    answer_and_close(owner_.handler.framing_error(status, message));
}

void Connection::detach_exchange() {
    if (!exchange_) return;
    exchange_->connection_ = nullptr;
    exchange_.reset();
}

void Connection::on_answer(http::Response response) {
    const bool body_unread = phase_ == Phase::body && body_streamed_;
    if (phase_ != Phase::handling && !body_unread) return;
    if (body_unread) {  // answered before its streamed body was whole: the rest is not read
        body_streamed_ = false;
        body_wanted_ = false;
        in_.clear();
        settle();
    }
    // A reply framed as a stream has no length: only the close can end it.
    response.close = response.close || response.stream || !keep_alive_ || body_unread;
    if (!response.close && version_minor_ == 0) response.header("Connection", "keep-alive");
    report_begin(response);
    http::write_response(response, head_only_, owner_.options.server_header, queued_);
    detach_exchange();
    phase_ = response.close ? Phase::closing : Phase::answering;
    flush();
}

void Connection::on_stream_start(http::Response head) {
    if (phase_ != Phase::handling) return;
    head.stream = true;
    head.close = true;  // a stream has no length: its end is the connection's
    report_begin(head);
    size_t before = queued_.size();
    http::write_response(head, head_only_, owner_.options.server_header, queued_);
    stream_head_unsent_ = queued_.size() - before;
    phase_ = Phase::streaming;
    stream_ended_ = head_only_;  // HEAD of a stream: the head alone
    if (peer_closed_) return cut();
    flush();
}

void Connection::on_stream_bytes(std::string bytes) {
    if (phase_ != Phase::streaming || stream_ended_) return;
    if (queued_.empty()) {
        queued_.swap(bytes);
    } else {
        queued_.append(bytes);
    }
    flush();
}

void Connection::on_stream_end() {
    if (phase_ != Phase::streaming) return;
    stream_ended_ = true;
    flush();
}

// Hands what is queued to the ring: the send goes to the kernel with the turn's other SQEs (the
// next head's recv among them) in one io_uring_enter. A send(2) per answer, tried at once, cost
// a syscall each and, when it woke a client on this core, a context switch mid-turn: at 8
// connections on 2 cores the ring's batch took a fifth less CPU per request (make node-bench).
void Connection::flush() {
    if (phase_ == Phase::dead || send_c_.in_flight) return;
    if (sent_ == sending_.size()) {
        sending_.clear();
        sent_ = 0;
        sending_.swap(queued_);  // both keep their capacity for the next answers
    }
    if (sending_.empty()) return on_drained();
    last_send_ms_ = loop_.now_ms();
    loop_.send(send_c_, fd_, sending_.data() + sent_, sending_.size() - sent_);
    ++ops_;
}

void Connection::on_sent(size_t n) {
    sent_ += n;
    sent_total_ += n;
    if (exchange_ && phase_ == Phase::streaming) {
        size_t head = std::min(n, stream_head_unsent_);  // the head is not the stream's bytes
        stream_head_unsent_ -= head;
        if (n > head) exchange_->stream_sent(n - head);
    }
}

void Connection::on_send(int32_t result) {
    --ops_;
    if (phase_ == Phase::dead) return finish_if_idle();
    if (result <= 0) return cut();  // EPIPE, ECONNRESET: the peer is gone
    on_sent(static_cast<size_t>(result));
    flush();
}

void Connection::on_drained() {
    if (report_.owed && (phase_ != Phase::streaming || stream_ended_)) report_end(true);
    switch (phase_) {
        case Phase::answering:
            phase_ = Phase::head;
            last_activity_ms_ = loop_.now_ms();
            return process_input();
        case Phase::closing:
            return begin_linger();
        case Phase::streaming:
            if (stream_ended_) begin_linger();
            return;
        default:
            return;  // a 100 Continue sent while a body is awaited
    }
}

void Connection::begin_linger() {
    if (peer_closed_) return cut();
    phase_ = Phase::lingering;
    linger_deadline_ms_ = loop_.now_ms() + linger_ms;
    linger_bytes_ = 0;
    loop_.shutdown_write(shut_c_, fd_);
    ++ops_;
    arm_recv();
}

void Connection::on_op_end() {
    --ops_;
    if (phase_ == Phase::dead) finish_if_idle();
}

void Connection::cut() {
    if (phase_ == Phase::dead) return;
    if (report_.owed) report_end(unsent() == 0);
    phase_ = Phase::dead;
    settle();
    if (exchange_) {
        std::shared_ptr<ExchangeImpl> exchange = std::move(exchange_);
        exchange->connection_ = nullptr;
        exchange->mark_closed();  // the handler's on_close, on this thread
    }
    loop_.cancel(recv_c_);
    loop_.cancel(send_c_);
    finish_if_idle();
}

void Connection::abandon() {
    if (exchange_) {
        std::shared_ptr<ExchangeImpl> exchange = std::move(exchange_);
        exchange->connection_ = nullptr;
        exchange->mark_closed();
    }
    phase_ = Phase::dead;
    if (!close_submitted_) ::close(fd_);
    close_submitted_ = true;
}

void Connection::finish_if_idle() {
    if (phase_ != Phase::dead || ops_ != 0 || close_submitted_) return;
    close_submitted_ = true;
    loop_.close(close_c_, fd_);
}

void Connection::on_close_done(Completion& c) {
    auto* self = static_cast<Connection*>(c.context);
    self->owner_.release(self);
}

void Connection::settle() {
    if (unproven) owner_.settled(this);
}

void Connection::evict() {
    if (!unproven || phase_ != Phase::head) return;
    owner_.handler.on_refused("evicted");
    if (in_.size() == 0) return cut();  // nothing sent: nothing to answer
    framing_error(408, "the request head was not completed in time for a newer client");
}

void Connection::slow(std::string_view reason, std::string_view message) {
    owner_.handler.on_refused(reason);
    framing_error(408, message);
}

void Connection::report_begin(const http::Response& response) {
    if (!owner_.options.report_answers) return;
    if (report_.owed) report_end(false);  // not reached: one answer at a time
    report_.owed = true;
    report_.status = response.status;
    report_.request_id.clear();
    for (const auto& [name, value] : response.headers) {
        if (http::iequals(name, "X-Request-Id")) {
            report_.request_id = value;
            break;
        }
    }
    report_.bytes_in = body_got_;
    report_.out_from = sent_total_ + unsent();
    report_.stream = response.stream;
    if (report_.method.empty()) report_.began = std::chrono::steady_clock::now();
}

void Connection::report_end(bool complete) {
    Report r = std::move(report_);
    report_ = Report{};  // the next head fills it again
    Answered a;
    a.peer = peer_;
    a.method = r.method;
    a.target = r.target;
    a.status = r.status;
    a.bytes_in = r.bytes_in;
    a.bytes_out = sent_total_ - std::min(sent_total_, r.out_from);
    a.us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                     std::chrono::steady_clock::now() - r.began)
                                     .count());
    a.request_id = r.request_id;
    a.stream = r.stream;
    a.complete = complete;
    owner_.handler.on_answered(a);
}

void Connection::body_clock_start(uint64_t now) {
    if (body_waiting_since_ms_ == 0) body_waiting_since_ms_ = now;
}

void Connection::body_clock_stop(uint64_t now) {
    if (body_waiting_since_ms_ == 0) return;
    body_timed_ms_ += now - body_waiting_since_ms_;
    body_waiting_since_ms_ = 0;
}

// Below body_bytes_per_s_min on average over the time the body was awaited, past a grace of the
// head's deadline (a client's first bytes and a slow start are not judged).
bool Connection::body_too_slow(uint64_t now) const {
    const ServerOptions& o = owner_.options;
    if (o.body_bytes_per_s_min == 0) return false;
    uint64_t timed = body_timed_ms_;
    if (body_waiting_since_ms_ != 0) timed += now - body_waiting_since_ms_;
    const uint64_t grace =
        o.head_timeout_ms != 0 ? o.head_timeout_ms : ServerOptions{}.head_timeout_ms;
    if (timed <= grace) return false;
    return body_got_ < (timed - grace) * o.body_bytes_per_s_min / 1000;
}

void Connection::sweep(uint64_t now) {
    const ServerOptions& o = owner_.options;
    bool idle = o.idle_timeout_ms != 0 && now - last_activity_ms_ >= o.idle_timeout_ms;
    bool send_stalled = o.send_timeout_ms != 0 && now - last_send_ms_ >= o.send_timeout_ms;
    switch (phase_) {
        case Phase::head:
            if (in_.size() != 0 && head_started_ms_ != 0 && o.head_timeout_ms != 0 &&
                now - head_started_ms_ >= o.head_timeout_ms) {
                return slow("slow_head", "the request head was not whole within " +
                                             std::to_string(o.head_timeout_ms) + " ms");
            }
            if (!idle) return;
            if (in_.size() == 0) return cut();  // between requests: closed, no answer
            return framing_error(408, "the request was not completed in time");
        case Phase::body:
            if (body_too_slow(now)) {
                return slow("slow_body", "the request body came slower than " +
                                             std::to_string(o.body_bytes_per_s_min) + " bytes/s");
            }
            if (body_streamed_ && !body_wanted_) return;  // the handler holds a chunk
            if (idle) framing_error(408, "the request body was not completed in time");
            return;
        case Phase::handling:
            if (peer_closed_ && send_stalled) cut();  // the peer left and no answer came
            return;
        case Phase::answering:
        case Phase::streaming:
        case Phase::closing:
            if (sent_ < sending_.size() && send_stalled) cut();  // the peer does not read
            return;
        case Phase::lingering:
            if (now >= linger_deadline_ms_) cut();
            return;
        case Phase::dead:
            return;
    }
}

}  // namespace internal
}  // namespace fenec::server
