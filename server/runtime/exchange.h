// server/runtime/exchange.h: ExchangeImpl, the far end of one request's answer (the Exchange of
// server/runtime/http_server.h), internal to fenec_runtime. It is the one object of the HTTP server
// shared with other threads: its caller-side state sits under its own mutex, and it reaches the
// connection by posting itself (a Task) to the connection's loop, or, for a reply made on that
// loop's thread, by handing it over at once; so the Connection (server/runtime/connection.h) is
// still touched by its loop's thread alone. A streamed body's chunks come back through read_body.
// At most one task per Exchange is queued at a time (loop.h's bound on posted tasks).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/runtime/http.h"
#include "server/runtime/http_server.h"
#include "server/runtime/loop.h"

namespace fenec::server::internal {

class Connection;

// The far end of one request's answer (server/runtime/http_server.h). Caller side under mutex_; the
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
    void on_stream_sent(std::function<void(uint64_t)> fn) override { on_stream_sent_ = std::move(fn); }
    void read_body(std::function<void(BodyChunk)> fn) override;
    void read_body_into(std::span<char> into, std::shared_ptr<const void> owner,
                        std::function<void(BodyChunk)> fn) override;

    // Loop thread, before the handler has it: the request's body comes through read_body.
    void stream_body() { body_streamed_ = true; }
    // Loop thread: hands `chunk` to the outstanding read_body, if any.
    void deliver_body(BodyChunk chunk);

    // Loop thread: the peer closed or the connection was cut; runs on_close once.
    void mark_closed();
    // Loop thread: `n` more of the stream's bytes were sent; runs on_stream_sent's function.
    void stream_sent(size_t n) {
        pending_.fetch_sub(n, std::memory_order_acq_rel);
        stream_sent_ += n;
        if (on_stream_sent_) on_stream_sent_(stream_sent_);
    }

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
    // Set before start() (so before the loop sees the stream), read on the loop thread after.
    std::function<void(uint64_t)> on_stream_sent_;
    uint64_t stream_sent_ = 0;  // loop thread
    bool body_streamed_ = false;              // set before the handler has the exchange
    bool body_over_ = false;                  // `last` or `failed` was delivered
    bool body_asked_ = false;                 // a read_body waits to be handed to the loop
    std::function<void(BodyChunk)> body_fn_;  // the outstanding read_body
    std::span<char> body_into_;               // ... and where it lands (empty: a chunk)
    std::shared_ptr<const void> body_into_owner_;
};

}  // namespace fenec::server::internal
