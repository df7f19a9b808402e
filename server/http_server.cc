// server/http_server.cc: the HTTP/1.1 server over the io_uring loops (server/http_server.h,
// node-http.md §2.1). It owns sockets, framing and timing; the Handler owns meaning.
//
// One listener, accepted on loop 0 with a multishot accept; each connection is handed to the
// loops round-robin (a Handoff task) and lives on that loop alone, so a Connection is touched by
// one thread only. An Exchange is the one object shared with other threads: its caller-side state
// sits under its own mutex, and it reaches the connection only by posting itself (a Task) to the
// connection's loop.
//
// Per connection, one request at a time (the phases below): a head is parsed only when the
// answer before it is sent, so answers go out strictly in order; bytes read ahead wait in the
// bounded read buffer. A connection is freed only once no operation of its is in flight and its
// close has completed (Loop's completion contract). Bounds: server/loop.h.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "server/loop.h"

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

namespace {

class Connection;
class ServerImpl;
struct LoopState;

// A connection's read buffer: bytes [begin_, end_) of one allocation that grows by doubling up to
// read_buffer_bytes_max and is compacted in place. Bytes move only in space(), which is called
// when no recv is in flight: a recv in flight writes at end_, and commit() takes its bytes there.
class ReadBuffer {
  public:
    std::string_view view() const { return {data_.get() + begin_, end_ - begin_}; }
    size_t size() const { return end_ - begin_; }
    void consume(size_t n) {
        assert(n <= size());
        begin_ += n;
    }
    void clear() { begin_ = end_; }
    void commit(size_t n) { end_ += n; }
    // Free space for one recv; empty when the buffer is full to its bound.
    std::span<char> space() {
        if (begin_ == end_) begin_ = end_ = 0;
        if (capacity_ - end_ < recv_bytes_min && begin_ > 0) {
            std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
            end_ -= begin_;
            begin_ = 0;
        }
        if (capacity_ - end_ < recv_bytes_min && capacity_ < read_buffer_bytes_max) {
            size_t grown = capacity_ == 0 ? read_buffer_bytes_initial
                                          : std::min(capacity_ * 2, read_buffer_bytes_max);
            auto bigger = std::make_unique<char[]>(grown);
            if (end_ > 0) std::memcpy(bigger.get(), data_.get(), end_);
            data_ = std::move(bigger);
            capacity_ = grown;
        }
        return {data_.get() + end_, capacity_ - end_};
    }

  private:
    std::unique_ptr<char[]> data_;
    size_t capacity_ = 0;
    size_t begin_ = 0;
    size_t end_ = 0;
};

// The far end of one request's answer (server/http_server.h). Caller side under mutex_; the
// connection side (connection_, and the calls into Connection) on the loop thread only.
class ExchangeImpl final : public Exchange,
                           public Task,
                           public std::enable_shared_from_this<ExchangeImpl> {
  public:
    ExchangeImpl(std::shared_ptr<Loop> loop, Connection* connection, size_t stream_buffer_max)
        : connection_(connection), loop_(std::move(loop)), stream_buffer_max_(stream_buffer_max) {
        run = &ExchangeImpl::run_task;
    }

    void reply(http::Response response) override;
    void start(http::Response head) override;
    bool write(std::string bytes) override;
    void end() override;
    bool closed() const override { return closed_.load(std::memory_order_acquire); }
    void on_close(std::function<void()> fn) override;
    size_t pending_bytes() const override { return pending_.load(std::memory_order_acquire); }

    // Loop thread: the peer closed or the connection was cut; runs on_close once.
    void mark_closed();

    Connection* connection_;          // loop thread; null once detached
    std::atomic<size_t> pending_{0};  // bytes written to the stream and not yet sent

  private:
    enum class Use : uint8_t { none, reply, stream };
    static void run_task(Task& task, bool cancelled);
    bool schedule_locked();  // true: the caller posts the task
    void post_scheduled();

    std::shared_ptr<Loop> loop_;
    const size_t stream_buffer_max_;
    std::atomic<bool> closed_{false};
    mutable std::mutex mutex_;
    Use use_ = Use::none;
    bool ended_ = false;
    std::optional<http::Response> answer_;  // a reply or stream head not yet on the loop
    std::string outbox_;                    // stream bytes not yet on the loop
    bool end_pending_ = false;
    bool queued_ = false;                 // the task is posted
    std::shared_ptr<ExchangeImpl> self_;  // held while the task is posted
    std::function<void()> on_close_;
};

// The phases of a connection, in the order a request goes through them.
enum class Phase : uint8_t {
    head,       // reading a head (idle when nothing is buffered)
    body,       // reading a body straight into the request
    handling,   // the handler has the request; bytes after it are read ahead, not parsed
    answering,  // sending an answer; the next head follows it
    streaming,  // a stream was started; it closes after end()
    closing,    // sending the last answer; then the write side is shut
    lingering,  // write side shut: reading and dropping until the peer closes
    dead,       // cut: waiting for its operations, then closed and freed
};

class Connection {
  public:
    Connection(LoopState& owner, int fd, uint64_t id, std::string peer, bool counted);
    void start();
    void start_refusal(http::Response answer);
    void cut();
    // After the loop's thread is gone and its ring drained: closes without the ring.
    void abandon();
    void sweep(uint64_t now_ms);
    // From the Exchange's task, on the loop thread.
    void on_answer(http::Response response);
    void on_stream_start(http::Response head);
    void on_stream_bytes(std::string bytes);
    void on_stream_end();

    Connection* prev = nullptr;  // LoopState's list
    Connection* next = nullptr;
    const bool counted;  // in connections(); a 503 refusal is not

  private:
    static void on_recv_done(Completion& c) {
        static_cast<Connection*>(c.context)->on_recv(c.result);
    }
    static void on_send_done(Completion& c) {
        static_cast<Connection*>(c.context)->on_send(c.result);
    }
    static void on_shut_done(Completion& c) { static_cast<Connection*>(c.context)->on_op_end(); }
    static void on_close_done(Completion& c);
    void on_recv(int32_t result);
    void on_send(int32_t result);
    void on_op_end();
    void on_peer_closed();
    void arm_recv();
    void process_input();
    bool head_may_be_whole() const;
    void on_head(http::RequestHead head, size_t consumed);
    void take_body();
    void dispatch();
    void answer_and_close(http::Response response);
    void framing_error(int status, std::string_view message);
    void flush();
    void on_drained();
    void begin_linger();
    void detach_exchange();
    void finish_if_idle();

    LoopState& owner_;
    Loop& loop_;
    const int fd_;
    const uint64_t id_;
    const std::string peer_;
    Phase phase_ = Phase::head;
    ReadBuffer in_;
    size_t head_scanned_ = 0;  // bytes of in_ known to hold no blank line (less 3)
    Request request_;
    uint64_t body_length_ = 0;
    uint64_t body_got_ = 0;
    bool recv_into_body_ = false;  // where the recv in flight writes
    bool keep_alive_ = true;
    bool head_only_ = false;
    int version_minor_ = 1;
    std::string sending_;  // in the kernel's hands from sent_ on
    size_t sent_ = 0;
    std::string queued_;  // appended while sending_ is in flight
    std::shared_ptr<ExchangeImpl> exchange_;
    bool stream_ended_ = false;
    size_t stream_head_unsent_ = 0;  // bytes of a stream's head not sent yet (not in pending_)
    bool peer_closed_ = false;
    bool close_submitted_ = false;
    uint32_t ops_ = 0;  // operations whose callback has not run yet
    Completion recv_c_, send_c_, shut_c_, close_c_;
    uint64_t last_activity_ms_ = 0;
    uint64_t last_send_ms_ = 0;
    uint64_t linger_deadline_ms_ = 0;
    size_t linger_bytes_ = 0;
};

// One loop, its thread and the connections it owns.
struct LoopState {
    LoopState(ServerImpl& s, uint32_t i, std::shared_ptr<Loop> l)
        : server(s), index(i), loop(std::move(l)) {}
    void add(Connection* c);
    void release(Connection* c);
    void adopt(int fd, uint64_t id, std::string peer);
    void arm_sweep();
    static void on_sweep(Completion& c);
    void begin_shutdown();
    void maybe_stop();

    ServerImpl& server;
    const uint32_t index;
    std::shared_ptr<Loop> loop;
    std::thread thread;
    Connection* first = nullptr;
    Completion sweep_c;
    bool stopping = false;
};

// A new connection on its way from loop 0 to its loop.
struct Handoff final : Task {
    LoopState* target = nullptr;
    int fd = -1;
    uint64_t id = 0;
    std::string peer;
    static void run_it(Task& task, bool cancelled);
};

class ServerImpl final : public HttpServer {
  public:
    ServerImpl(const ServerOptions& o, Handler& h) : options(o), handler(h) {}
    ~ServerImpl() override { shutdown(); }
    bool listen_on(std::string& error);
    uint16_t port() const override { return port_; }
    void start() override;
    void stop_accepting() override;
    uint32_t connections() const override { return connections_.load(std::memory_order_acquire); }
    void shutdown() override;

    // Loop 0.
    void arm_accept();
    static void on_accept(Completion& c);
    static void on_accept_retry(Completion& c);
    void accepted(int fd);
    void stop_accepting_on_loop();
    void close_listener();
    bool listener_busy() const { return accept_c_.in_flight || accept_retry_c_.in_flight; }

    void loop_stopped();
    void connection_freed(bool counted);

    const ServerOptions options;
    Handler& handler;
    std::vector<std::unique_ptr<LoopState>> loops;
    uint32_t sweep_ms = 1000;

  private:
    int listen_fd_ = -1;
    uint16_t port_ = 0;
    std::atomic<uint32_t> connections_{0};
    uint32_t refusals_ = 0;  // loop 0
    uint64_t next_id_ = 1;   // loop 0
    size_t next_loop_ = 0;   // loop 0
    bool accepting_ = true;  // loop 0 after start
    Completion accept_c_, accept_retry_c_;
    std::mutex control_;  // start / stop_accepting / shutdown
    bool started_ = false;
    bool stop_accepting_asked_ = false;
    bool shut_ = false;
    std::mutex stopped_mutex_;
    std::condition_variable stopped_cv_;
    uint32_t loops_running_ = 0;
};

// ---- Exchange ----

bool ExchangeImpl::schedule_locked() {
    if (queued_) return false;
    queued_ = true;
    self_ = shared_from_this();
    return true;
}

void ExchangeImpl::post_scheduled() {
    if (loop_->post(static_cast<Task&>(*this))) return;
    std::shared_ptr<ExchangeImpl> drop;  // the loop has stopped: nothing will send it
    std::lock_guard lock(mutex_);
    queued_ = false;
    drop = std::move(self_);
}

void ExchangeImpl::reply(http::Response response) {
    std::unique_lock lock(mutex_);
    if (use_ != Use::none) return;  // a second answer to one request is dropped
    use_ = Use::reply;
    answer_ = std::move(response);
    bool post = schedule_locked();
    lock.unlock();
    if (post) post_scheduled();
}

void ExchangeImpl::start(http::Response head) {
    std::unique_lock lock(mutex_);
    if (use_ != Use::none) return;
    use_ = Use::stream;
    answer_ = std::move(head);
    bool post = schedule_locked();
    lock.unlock();
    if (post) post_scheduled();
}

bool ExchangeImpl::write(std::string bytes) {
    if (closed()) return false;
    std::unique_lock lock(mutex_);
    if (use_ != Use::stream || ended_) return false;
    if (bytes.empty()) return true;
    // Over the bound unless it is empty: one event larger than the bound may still go alone.
    size_t pending = pending_.load(std::memory_order_acquire);
    if (pending != 0 && pending + bytes.size() > stream_buffer_max_) return false;
    pending_.fetch_add(bytes.size(), std::memory_order_acq_rel);
    if (outbox_.empty()) {
        outbox_ = std::move(bytes);
    } else {
        outbox_.append(bytes);
    }
    bool post = schedule_locked();
    lock.unlock();
    if (post) post_scheduled();
    return true;
}

void ExchangeImpl::end() {
    std::unique_lock lock(mutex_);
    if (use_ != Use::stream || ended_) return;
    ended_ = true;
    end_pending_ = true;
    bool post = schedule_locked();
    lock.unlock();
    if (post) post_scheduled();
}

void ExchangeImpl::on_close(std::function<void()> fn) {
    std::unique_lock lock(mutex_);
    if (!closed()) {
        on_close_ = std::move(fn);
        return;
    }
    lock.unlock();
    if (!fn) return;
    if (loop_->in_loop_thread()) {
        fn();
        return;
    }
    auto shared = std::make_shared<std::function<void()>>(std::move(fn));
    if (!loop_->post([shared] { (*shared)(); })) (*shared)();  // loop gone: run it here
}

void ExchangeImpl::mark_closed() {
    std::function<void()> fn;
    {
        std::lock_guard lock(mutex_);
        if (closed()) return;
        closed_.store(true, std::memory_order_release);
        fn = std::move(on_close_);
    }
    if (fn) fn();
}

void ExchangeImpl::run_task(Task& task, bool cancelled) {
    auto& self = static_cast<ExchangeImpl&>(task);
    std::shared_ptr<ExchangeImpl> keep;  // released last: this may be the last reference
    std::optional<http::Response> answer;
    std::string bytes;
    bool end = false;
    Use use = Use::none;
    {
        std::lock_guard lock(self.mutex_);
        keep = std::move(self.self_);
        self.queued_ = false;
        answer.swap(self.answer_);
        bytes.swap(self.outbox_);
        end = self.end_pending_;
        self.end_pending_ = false;
        use = self.use_;
    }
    if (cancelled) return;
    if (answer && self.connection_ != nullptr) {
        if (use == Use::stream) {
            self.connection_->on_stream_start(std::move(*answer));
        } else {
            self.connection_->on_answer(std::move(*answer));
        }
    }
    if (!bytes.empty() && self.connection_ != nullptr) {
        self.connection_->on_stream_bytes(std::move(bytes));
    }
    if (end && self.connection_ != nullptr) self.connection_->on_stream_end();
}

// ---- Connection ----

Connection::Connection(LoopState& owner, int fd, uint64_t id, std::string peer, bool is_counted)
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
}

void Connection::start() { arm_recv(); }

void Connection::start_refusal(http::Response answer) { answer_and_close(std::move(answer)); }

void Connection::arm_recv() {
    if (recv_c_.in_flight || phase_ == Phase::dead || peer_closed_) return;
    char* buffer = nullptr;
    size_t bytes = 0;
    recv_into_body_ = phase_ == Phase::body;
    if (recv_into_body_) {
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
    loop_.recv(recv_c_, fd_, buffer, bytes);
    ++ops_;
}

void Connection::on_recv(int32_t result) {
    --ops_;
    if (phase_ == Phase::dead) return finish_if_idle();
    if (result <= 0) return on_peer_closed();  // 0: the peer's FIN; < 0: reset and the like
    auto n = static_cast<size_t>(result);
    last_activity_ms_ = loop_.now_ms();
    // Where the bytes went was decided when the recv was armed: a read-ahead armed while an
    // answer was sent may land once the next head has begun a body.
    if (recv_into_body_) {
        body_got_ += n;
        request_.body.resize(body_got_);
    } else if (phase_ < Phase::streaming) {
        in_.commit(n);
    }
    switch (phase_) {
        case Phase::body:
            return take_body();
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

void Connection::process_input() {
    assert(phase_ == Phase::head);
    head_only_ = false;
    if (in_.size() == 0) {
        if (peer_closed_) return cut();
        return arm_recv();
    }
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
    HeadVerdict verdict = owner_.server.handler.check_head(request_);
    if (verdict.refuse) return answer_and_close(std::move(*verdict.refuse));
    uint64_t length = request_.head.content_length.value_or(0);
    if (length > verdict.body_bytes_max) {
        return framing_error(413, "a body of " + std::to_string(length) +
                                      " bytes is over the limit of " +
                                      std::to_string(verdict.body_bytes_max) + " bytes");
    }
    if (length == 0) return dispatch();
    if (request_.head.expect_continue && in_.size() == 0) {
        queued_.append("HTTP/1.1 100 Continue\r\n\r\n");
        flush();
    }
    body_length_ = length;
    body_got_ = 0;
    phase_ = Phase::body;
    take_body();
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
    exchange_ =
        std::make_shared<ExchangeImpl>(owner_.loop, this, owner_.server.options.stream_buffer_max);
    std::shared_ptr<Exchange> exchange = exchange_;
    owner_.server.handler.handle(std::move(request_), std::move(exchange));
    arm_recv();  // read ahead (bounded), and hear the peer close
}

void Connection::answer_and_close(http::Response response) {
    response.close = true;
    http::write_response(response, head_only_, owner_.server.options.server_header, queued_);
    phase_ = Phase::closing;
    in_.clear();
    flush();
    arm_recv();
}

void Connection::framing_error(int status, std::string_view message) {
    answer_and_close(owner_.server.handler.framing_error(status, message));
}

void Connection::detach_exchange() {
    if (!exchange_) return;
    exchange_->connection_ = nullptr;
    exchange_.reset();
}

void Connection::on_answer(http::Response response) {
    if (phase_ != Phase::handling) return;
    // A reply framed as a stream has no length: only the close can end it.
    response.close = response.close || response.stream || !keep_alive_;
    if (!response.close && version_minor_ == 0) response.header("Connection", "keep-alive");
    http::write_response(response, head_only_, owner_.server.options.server_header, queued_);
    detach_exchange();
    phase_ = response.close ? Phase::closing : Phase::answering;
    flush();
}

void Connection::on_stream_start(http::Response head) {
    if (phase_ != Phase::handling) return;
    head.stream = true;
    head.close = true;  // a stream has no length: its end is the connection's
    size_t before = queued_.size();
    http::write_response(head, head_only_, owner_.server.options.server_header, queued_);
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

void Connection::on_send(int32_t result) {
    --ops_;
    if (phase_ == Phase::dead) return finish_if_idle();
    if (result <= 0) return cut();  // EPIPE, ECONNRESET: the peer is gone
    auto n = static_cast<size_t>(result);
    sent_ += n;
    if (exchange_ && phase_ == Phase::streaming) {
        size_t head = std::min(n, stream_head_unsent_);  // the head is not the stream's bytes
        stream_head_unsent_ -= head;
        exchange_->pending_.fetch_sub(n - head, std::memory_order_acq_rel);
    }
    flush();
}

void Connection::on_drained() {
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
    phase_ = Phase::dead;
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

void Connection::sweep(uint64_t now) {
    const ServerOptions& o = owner_.server.options;
    bool idle = o.idle_timeout_ms != 0 && now - last_activity_ms_ >= o.idle_timeout_ms;
    bool send_stalled = o.send_timeout_ms != 0 && now - last_send_ms_ >= o.send_timeout_ms;
    switch (phase_) {
        case Phase::head:
            if (!idle) return;
            if (in_.size() == 0) return cut();  // between requests: closed, no answer
            return framing_error(408, "the request was not completed in time");
        case Phase::body:
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

// ---- LoopState ----

void LoopState::add(Connection* c) {
    c->next = first;
    if (first != nullptr) first->prev = c;
    first = c;
}

void LoopState::release(Connection* c) {
    if (c->prev != nullptr) c->prev->next = c->next;
    if (c->next != nullptr) c->next->prev = c->prev;
    if (first == c) first = c->next;
    server.connection_freed(c->counted);
    delete c;
    maybe_stop();
}

void LoopState::adopt(int fd, uint64_t id, std::string peer) {
    if (stopping) {
        ::close(fd);
        server.connection_freed(true);
        return;
    }
    auto* c = new Connection(*this, fd, id, std::move(peer), true);
    add(c);
    c->start();
}

void LoopState::arm_sweep() {
    sweep_c.callback = &LoopState::on_sweep;
    sweep_c.context = this;
    loop->timeout(sweep_c, server.sweep_ms);
}

void LoopState::on_sweep(Completion& c) {
    auto* self = static_cast<LoopState*>(c.context);
    if (self->stopping) return self->maybe_stop();
    uint64_t now = self->loop->now_ms();
    for (Connection* conn = self->first; conn != nullptr; conn = conn->next) conn->sweep(now);
    self->arm_sweep();
}

void LoopState::begin_shutdown() {
    if (stopping) return;
    stopping = true;
    if (index == 0) server.stop_accepting_on_loop();
    loop->cancel(sweep_c);
    for (Connection* c = first; c != nullptr; c = c->next) c->cut();
    maybe_stop();
}

void LoopState::maybe_stop() {
    if (!stopping || first != nullptr || sweep_c.in_flight) return;
    if (index == 0 && server.listener_busy()) return;
    loop->stop();
}

void Handoff::run_it(Task& task, bool cancelled) {
    auto* self = static_cast<Handoff*>(&task);
    if (cancelled) {
        ::close(self->fd);
        self->target->server.connection_freed(true);
    } else {
        self->target->adopt(self->fd, self->id, std::move(self->peer));
    }
    delete self;
}

// ---- ServerImpl ----

std::string peer_name(int fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
    char host[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&addr);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
    }
    if (addr.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
    }
    return "";
}

// "host:port", "[v6]:port", ":port" (every address); port 0 lets the kernel pick.
bool split_listen(const std::string& listen, std::string& host, std::string& port,
                  std::string& error) {
    size_t colon = std::string::npos;
    if (!listen.empty() && listen[0] == '[') {
        size_t close = listen.find(']');
        if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
            error = "listen address '" + listen + "': expected [address]:port";
            return false;
        }
        host = listen.substr(1, close - 1);
        colon = close + 1;
    } else {
        colon = listen.rfind(':');
        if (colon == std::string::npos || listen.find(':') != colon) {
            error = "listen address '" + listen + "': expected host:port";
            return false;
        }
        host = listen.substr(0, colon);
    }
    port = listen.substr(colon + 1);
    bool digits =
        !port.empty() && port.size() <= 5 &&
        std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoul(port) > 65535) {
        error = "listen address '" + listen + "': bad port";
        return false;
    }
    return true;
}

bool ServerImpl::listen_on(std::string& error) {
    std::string host;
    std::string port;
    if (!split_listen(options.listen, host, port, error)) return false;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
    if (rc != 0) {
        error = "listen address '" + options.listen + "': " + ::gai_strerror(rc);
        return false;
    }
    error = "listen address '" + options.listen + "': no address";
    for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, listen_backlog) == 0) {
            listen_fd_ = fd;
            break;
        }
        error = "listen " + options.listen + ": " + std::strerror(errno);
        ::close(fd);
    }
    ::freeaddrinfo(found);
    if (listen_fd_ < 0) return false;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    error.clear();
    return true;
}

void ServerImpl::start() {
    std::lock_guard lock(control_);
    if (started_ || shut_) return;
    started_ = true;
    loops_running_ = static_cast<uint32_t>(loops.size());
    for (auto& state : loops) {
        LoopState* ls = state.get();
        ls->loop->post([this, ls] {
            ls->arm_sweep();
            if (ls->index == 0 && accepting_ && listen_fd_ >= 0) arm_accept();
        });
        ls->thread = std::thread([this, ls] {
            ls->loop->run();
            loop_stopped();
        });
    }
}

void ServerImpl::arm_accept() {
    accept_c_.callback = &ServerImpl::on_accept;
    accept_c_.context = this;
    loops[0]->loop->accept_multishot(accept_c_, listen_fd_);
}

void ServerImpl::on_accept(Completion& c) {
    auto* self = static_cast<ServerImpl*>(c.context);
    if (c.result >= 0) self->accepted(c.result);
    if (c.more) return;
    // The multishot ended: stopped on purpose, or an error the kernel ends it with.
    if (!self->accepting_) {
        self->close_listener();
        return self->loops[0]->maybe_stop();
    }
    int err = -c.result;
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        self->accept_retry_c_.callback = &ServerImpl::on_accept_retry;
        self->accept_retry_c_.context = self;
        self->loops[0]->loop->timeout(self->accept_retry_c_, accept_retry_ms);
        return;
    }
    self->arm_accept();
}

void ServerImpl::on_accept_retry(Completion& c) {
    auto* self = static_cast<ServerImpl*>(c.context);
    if (!self->accepting_) {
        self->close_listener();
        return self->loops[0]->maybe_stop();
    }
    self->arm_accept();
}

void ServerImpl::accepted(int fd) {
    LoopState& first = *loops[0];
    if (first.stopping) {
        ::close(fd);
        return;
    }
    int one = 1;  // answers are written whole: Nagle would only delay them
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::string peer = peer_name(fd);
    uint32_t max = options.connections_max;
    if (max != 0 && connections_.load(std::memory_order_acquire) >= max) {
        if (refusals_ >= refusals_in_flight_max) {
            ::close(fd);
            return;
        }
        ++refusals_;
        auto* c = new Connection(first, fd, next_id_++, std::move(peer), false);
        first.add(c);
        c->start_refusal(handler.over_capacity());
        return;
    }
    connections_.fetch_add(1, std::memory_order_acq_rel);
    LoopState& target = *loops[next_loop_++ % loops.size()];
    if (&target == &first) return target.adopt(fd, next_id_++, std::move(peer));
    auto* handoff = new Handoff();
    handoff->run = &Handoff::run_it;
    handoff->target = &target;
    handoff->fd = fd;
    handoff->id = next_id_++;
    handoff->peer = std::move(peer);
    if (!target.loop->post(*handoff)) Handoff::run_it(*handoff, true);
}

void ServerImpl::connection_freed(bool counted) {
    if (counted) {
        connections_.fetch_sub(1, std::memory_order_acq_rel);
    } else {
        --refusals_;  // refusals live on loop 0, as this call does then
    }
}

void ServerImpl::stop_accepting() {
    std::lock_guard lock(control_);
    if (stop_accepting_asked_ || shut_) return;
    stop_accepting_asked_ = true;
    if (!started_) {
        close_listener();
        accepting_ = false;
        return;
    }
    loops[0]->loop->post([this] { stop_accepting_on_loop(); });
}

void ServerImpl::stop_accepting_on_loop() {
    accepting_ = false;
    if (accept_c_.in_flight) {
        loops[0]->loop->cancel(accept_c_);  // on_accept closes the listener
    } else if (accept_retry_c_.in_flight) {
        loops[0]->loop->cancel(accept_retry_c_);
    } else {
        close_listener();
    }
}

void ServerImpl::close_listener() {
    if (listen_fd_ < 0) return;
    ::close(listen_fd_);
    listen_fd_ = -1;
}

void ServerImpl::loop_stopped() {
    std::lock_guard lock(stopped_mutex_);
    --loops_running_;
    stopped_cv_.notify_all();
}

void ServerImpl::shutdown() {
    std::lock_guard lock(control_);
    if (shut_) return;
    shut_ = true;
    if (!started_) {
        close_listener();
        return;
    }
    for (auto& state : loops) {
        LoopState* ls = state.get();
        ls->loop->post([ls] { ls->begin_shutdown(); });
    }
    {
        std::unique_lock wait(stopped_mutex_);
        stopped_cv_.wait_for(wait, std::chrono::milliseconds(shutdown_wait_ms),
                             [this] { return loops_running_ == 0; });
    }
    for (auto& state : loops) state->loop->stop();  // those that did not finish in time
    for (auto& state : loops) {
        if (state->thread.joinable()) state->thread.join();
    }
    // The threads are gone: let the kernel release every buffer, then free what is left.
    for (auto& state : loops) {
        state->loop->cancel_all_and_drain();
        while (Connection* c = state->first) {
            state->first = c->next;
            c->abandon();
            connection_freed(c->counted);
            delete c;
        }
    }
    close_listener();
}

}  // namespace

std::unique_ptr<HttpServer> HttpServer::bind(const ServerOptions& options, Handler& handler,
                                             std::string& error) {
    auto server = std::make_unique<ServerImpl>(options, handler);
    if (!server->listen_on(error)) return nullptr;
    uint32_t loops = std::max<uint32_t>(1, options.loops);
    for (uint32_t i = 0; i < loops; ++i) {
        std::shared_ptr<Loop> loop = Loop::create(error);
        if (!loop) return nullptr;
        server->loops.push_back(std::make_unique<LoopState>(*server, i, std::move(loop)));
    }
    // The sweep finds idle, stalled and lingering connections; a tick of an eighth of the
    // shortest timeout keeps each within 1/8 of its bound.
    uint32_t shortest = linger_ms;
    for (uint32_t t : {options.idle_timeout_ms, options.send_timeout_ms}) {
        if (t != 0) shortest = std::min(shortest, t);
    }
    server->sweep_ms = std::clamp<uint32_t>(shortest / 8, 5, 1000);
    return server;
}

}  // namespace fenec::server
