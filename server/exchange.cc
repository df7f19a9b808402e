// server/exchange.cc: ExchangeImpl (server/exchange.h). The caller side (reply, start, write,
// end, on_close) runs on any thread under the exchange's mutex and posts the exchange to its
// connection's loop; run_task, on that loop, hands what was queued to the Connection, if it is
// still attached.
#include "server/exchange.h"

#include <utility>

#include "server/connection.h"

namespace fenec::server::internal {

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

}  // namespace fenec::server::internal
