// server/runtime/connection.h: one HTTP/1.1 connection of the server (server/runtime/http_server.h,
// node-http.md §2.1), internal to fenec_runtime: its state machine (reading heads and bodies,
// pipelining, timeouts, sending answers and streams, the lingering close) and its read buffer.
// What a request means is the Handler's; accepting and placing connections is
// server/runtime/http_server.cc's.
//
// A connection lives on one loop and is touched by that loop's thread only; the Exchange
// (server/runtime/exchange.h) reaches it by posting to that loop, or directly when it is already on
// it. One request at a time (the phases below): a head is parsed only when the answer before it is
// sent, so answers go out strictly in order; bytes read ahead wait in the bounded read buffer. A
// connection is freed only once no operation of its is in flight and its close has completed
// (Loop's completion contract).
// Bounds: server/runtime/loop.h.
#pragma once

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "server/runtime/http.h"
#include "server/runtime/http_server.h"
#include "server/runtime/loop.h"

namespace fenec::server::internal {

class Connection;
class ExchangeImpl;

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

// The phases of a connection, in the order a request goes through them.
enum class Phase : uint8_t {
    head,       // reading a head (idle when nothing is buffered)
    body,       // reading a body straight into the request, or for the handler (stream_body)
    handling,   // the handler has the request; bytes after it are read ahead, not parsed
    answering,  // sending an answer; the next head follows it
    streaming,  // a stream was started; it closes after end()
    closing,    // sending the last answer; then the write side is shut
    lingering,  // write side shut: reading and dropping until the peer closes
    dead,       // cut: waiting for its operations, then closed and freed
};

// What a connection needs from the loop that owns it (LoopState, server/runtime/http_server.cc).
// The owner outlives every connection it holds; a connection uses it on the owner's loop thread.
class ConnectionOwner {
  public:
    ConnectionOwner(Handler& h, const ServerOptions& o, std::shared_ptr<Loop> l)
        : handler(h), options(o), loop(std::move(l)) {}
    ConnectionOwner(const ConnectionOwner&) = delete;
    ConnectionOwner& operator=(const ConnectionOwner&) = delete;

    // The connection's close has completed and none of its operations is in flight: unlink it
    // and free it.
    virtual void release(Connection* c) = 0;
    // The connection is no longer waiting for its first whole request (it sent one, or it is
    // closing): it leaves the unproven set. Called once, only for a connection in that set.
    virtual void settled(Connection* c) = 0;

    Handler& handler;
    const ServerOptions& options;
    const std::shared_ptr<Loop> loop;

  protected:
    ~ConnectionOwner() = default;
};

// One connection (see the file comment): start() serves it, start_refusal() answers it once and
// closes; cut() closes at once with no answer. It is freed by its owner's release().
class Connection {
  public:
    Connection(ConnectionOwner& owner, int fd, uint64_t id, std::string peer, bool counted);
    void start();
    void start_refusal(http::Response answer);
    void cut();
    // After the loop's thread is gone and its ring drained: closes without the ring.
    void abandon();
    void sweep(uint64_t now_ms);
    // Cut to make room for a newcomer (http_server.h, admission): 408 when part of a request
    // came, closed silently when nothing did. Only while unproven.
    void evict();
    const std::string& peer() const { return peer_; }
    uint64_t accepted_ms() const { return accepted_ms_; }
    bool evictable() const { return unproven && phase_ == Phase::head; }
    // Nothing under way: between requests (an idle keep-alive), answered and lingering, or cut.
    bool idle() const {
        return (phase_ == Phase::head && in_.size() == 0) || phase_ == Phase::lingering ||
               phase_ == Phase::dead;
    }
    // From the Exchange's task, or its reply() on the loop thread.
    void on_answer(http::Response response);
    void on_stream_start(http::Response head);
    void on_stream_bytes(std::string bytes);
    void on_stream_end();
    // A streamed body's next chunk is asked for (Exchange::read_body), or `into` filled
    // (read_body_into, `owner` keeping it alive); false when no body is being streamed (the
    // exchange then fails the ask).
    bool on_body_wanted(std::span<char> into = {}, std::shared_ptr<const void> owner = nullptr);

    Connection* prev = nullptr;  // the owner's list
    Connection* next = nullptr;
    const bool counted;  // in connections(); a 503 refusal is not
    // In the owner's unproven list (oldest first): counted, and no whole request sent yet.
    bool unproven = false;
    Connection* unproven_prev = nullptr;
    Connection* unproven_next = nullptr;

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
    void process_head();
    bool head_may_be_whole() const;
    void on_head(http::RequestHead head, size_t consumed);
    void take_body();
    void stream_body_step();
    void invite_body();
    void deliver_chunk(std::string bytes);
    bool into_done() const;
    void dispatch();
    void hand_to_handler();
    void answer_and_close(http::Response response);
    void framing_error(int status, std::string_view message);
    void flush();
    void on_sent(size_t n);
    void on_drained();
    void begin_linger();
    void detach_exchange();
    void finish_if_idle();
    void settle();
    void slow(std::string_view reason, std::string_view message);
    void body_clock_start(uint64_t now);
    void body_clock_stop(uint64_t now);
    bool body_too_slow(uint64_t now) const;
    // ServerOptions::report_answers: the answer about to be written is noted, and reported once
    // its bytes are out (or the connection is cut). No-ops when the option is off.
    void report_begin(const http::Response& response);
    void report_end(bool complete);
    size_t unsent() const { return sending_.size() - sent_ + queued_.size(); }

    ConnectionOwner& owner_;
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
    bool recv_into_body_ = false;   // where the recv in flight writes
    bool recv_into_chunk_ = false;  // ... or into body_chunk_ (a streamed body)
    bool recv_into_user_ = false;   // ... that is, into body_into_
    bool body_streamed_ = false;    // phase body: the handler pulls it (HeadVerdict::stream_body)
    bool body_wanted_ = false;      // ... and has asked for its next chunk
    bool continue_owed_ = false;    // ... and `100 Continue` waits for its first ask
    std::string body_chunk_;        // a streamed body's recv lands here
    std::span<char> body_into_;     // ... or here (read_body_into), body_into_got_ of it filled
    size_t body_into_got_ = 0;
    std::shared_ptr<const void> body_into_owner_;  // kept while a recv into body_into_ may run
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
    bool in_input_ = false;     // process_input is on the stack
    bool input_again_ = false;  // an answer drained meanwhile: parse the next head
    bool close_submitted_ = false;
    uint32_t ops_ = 0;  // operations whose callback has not run yet
    Completion recv_c_, send_c_, shut_c_, close_c_;
    uint64_t last_activity_ms_ = 0;
    uint64_t accepted_ms_ = 0;
    uint64_t head_started_ms_ = 0;  // the current head's first byte was buffered (0: none yet)
    // A body's rate is judged over the time it was awaited: all of it for a body read into the
    // request, only while the handler asks for bytes for a streamed one.
    uint64_t body_timed_ms_ = 0;          // awaited time before body_waiting_since_ms_
    uint64_t body_waiting_since_ms_ = 0;  // 0: not awaited now
    uint64_t last_send_ms_ = 0;
    uint64_t linger_deadline_ms_ = 0;
    size_t linger_bytes_ = 0;
    // The answer being reported (report_begin to report_end), one at a time as answers are.
    struct Report {
        bool owed = false;   // an answer was written; its report is not made yet
        std::string method;  // the request's, kept from its head (empty: none was read)
        std::string target;
        std::string request_id;
        int status = 0;
        uint64_t bytes_in = 0;
        uint64_t out_from = 0;  // where in the connection's output the answer begins
        bool stream = false;
        std::chrono::steady_clock::time_point began{};
    };
    Report report_;
    uint64_t sent_total_ = 0;  // bytes handed to the kernel on this connection
};

}  // namespace fenec::server::internal
