// server/runtime/exchange.cc: ExchangeImpl (server/runtime/exchange.h). The caller side (reply,
// start, write, end, on_close) runs on any thread under the exchange's mutex and posts the exchange
// to its connection's loop; run_task, on that loop, hands what was queued to the Connection, if it
// is still attached.
#include "server/runtime/exchange.h"

#include <utility>

#include "server/runtime/connection.h"

namespace fenec::server::internal {

namespace {

BodyChunk body_failed(std::string error) {
    BodyChunk chunk;
    chunk.failed = true;
    chunk.error = std::move(error);
    return chunk;
}

constexpr const char* body_gone = "the connection closed before the body was whole";

}  // namespace

bool ExchangeImpl::schedule_locked() {
    if (queued_) return false;
    queued_ = true;
    self_ = shared_from_this();
    return true;
}

void ExchangeImpl::post_scheduled() {
    if (loop_->post(static_cast<Task&>(*this))) return;
    std::shared_ptr<ExchangeImpl> drop;  // the loop has stopped: nothing will send it
    std::function<void(BodyChunk)> body_fn;
    {
        std::lock_guard lock(mutex_);
        queued_ = false;
        drop = std::move(self_);
        if (body_asked_) {  // a read_body waiting on it must not wait forever
            body_asked_ = false;
            body_over_ = true;
            body_fn = std::move(body_fn_);
            body_fn_ = nullptr;
        }
    }
    if (body_fn) body_fn(body_failed(body_gone));
}

void ExchangeImpl::reply(http::Response response) {
    std::unique_lock lock(mutex_);
    if (use_ != Use::none) return;  // a second answer to one request is dropped
    use_ = Use::reply;
    if (!queued_ && loop_->in_loop_thread()) {
        // On the connection's own loop (a handler answering in handle(), or the router on its
        // upstream's completion): handed over now, so it is sent in this turn, not after it.
        lock.unlock();
        if (connection_ != nullptr) connection_->on_answer(std::move(response));
        return;
    }
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

void ExchangeImpl::read_body(std::function<void(BodyChunk)> fn) {
    read_body_into({}, nullptr, std::move(fn));
}

void ExchangeImpl::read_body_into(std::span<char> into, std::shared_ptr<const void> owner,
                                  std::function<void(BodyChunk)> fn) {
    std::unique_lock lock(mutex_);
    const char* refusal = nullptr;
    if (!body_streamed_) {
        refusal = "the request's body is not streamed";
    } else if (body_over_) {
        refusal = "the body was already read to its end";
    } else if (closed()) {
        refusal = body_gone;
    } else if (body_fn_) {
        refusal = "a read_body is already outstanding";
    }
    if (refusal != nullptr) {
        lock.unlock();
        if (fn) fn(body_failed(refusal));
        return;
    }
    body_fn_ = std::move(fn);
    body_into_ = into;
    body_into_owner_ = std::move(owner);
    body_asked_ = true;
    bool post = schedule_locked();
    lock.unlock();
    if (post) post_scheduled();
}

void ExchangeImpl::deliver_body(BodyChunk chunk) {
    std::function<void(BodyChunk)> fn;
    {
        std::lock_guard lock(mutex_);
        if (chunk.last || chunk.failed) body_over_ = true;
        fn = std::move(body_fn_);
        body_fn_ = nullptr;
    }
    if (fn) fn(std::move(chunk));
}

void ExchangeImpl::mark_closed() {
    std::function<void()> fn;
    std::function<void(BodyChunk)> body_fn;
    {
        std::lock_guard lock(mutex_);
        if (closed()) return;
        closed_.store(true, std::memory_order_release);
        fn = std::move(on_close_);
        if (body_streamed_ && !body_over_) {
            body_over_ = true;
            body_fn = std::move(body_fn_);
            body_fn_ = nullptr;
        }
    }
    if (body_fn) body_fn(body_failed(body_gone));
    if (fn) fn();
}

void ExchangeImpl::run_task(Task& task, bool cancelled) {
    auto& self = static_cast<ExchangeImpl&>(task);
    std::shared_ptr<ExchangeImpl> keep;  // released last: this may be the last reference
    std::optional<http::Response> answer;
    std::string bytes;
    bool end = false;
    bool body_asked = false;
    std::span<char> into;
    std::shared_ptr<const void> into_owner;
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
        body_asked = self.body_asked_;
        self.body_asked_ = false;
        if (body_asked) {
            into = self.body_into_;
            into_owner = std::move(self.body_into_owner_);
            self.body_into_ = {};
        }
    }
    if (cancelled) {
        if (body_asked) self.deliver_body(body_failed(body_gone));
        return;
    }
    if (body_asked && (self.connection_ == nullptr ||
                       !self.connection_->on_body_wanted(into, std::move(into_owner)))) {
        self.deliver_body(body_failed(body_gone));
    }
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

}  // namespace fenec::server::internal
