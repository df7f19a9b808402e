// server/node/parked.h: a request parked on its tenant's changes rather than on a thread
// (node-http.md §2.1, §5.5, §5.6): a read waiting for Fenec-After, a held write. `attempt` runs on
// the worker pool when a block lands in the tenant (and every `poll_ms`, for time that passes
// with nothing written); it answers and returns true once it is done. At the deadline `expire`
// answers instead. Exactly one of them answers: both run under the same mutex and the first
// to finish marks it done.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "server/node/node.h"
#include "server/node/tenant.h"

namespace fenec::node {

class Parked final : public ChangeWatcher, public std::enable_shared_from_this<Parked> {
public:
    static constexpr int64_t poll_ms = 50;  // how often time is looked at with nothing written

    Parked(Node& node, std::shared_ptr<Tenant> tenant, std::function<bool()> attempt,
           std::function<void()> expire)
        : node_(node), tenant_(std::move(tenant)), attempt_(std::move(attempt)),
          expire_(std::move(expire)) {}

    // Watches the tenant, arms the deadline and the poll; registers with the node so a drain
    // answers it at once. Past the timers' bound it answers now, as its deadline had come.
    void park(int64_t wait_ms) {
        // Latched by a failed write: nothing lands until the node has reopened it, which a
        // request held on it would keep off (Registry::close_latched_held): answered now.
        if (tenant_->db().failure()) return finish();
        auto self = shared_from_this();
        tenant_->watch(self);
        node_.track(self);
        const bool armed = node_.timers().after(wait_ms, [self] {
            if (!self->node_.submit_task([self] { self->finish(); })) self->finish();
        });
        if (!armed) return finish();
        arm_poll();
    }

    // Answers with `expire` now, unless it is done (the deadline; a drain).
    void finish() {
        std::lock_guard lock(mu_);
        if (done_) return;
        expire_();
        close();
    }

    void wake() override {
        if (done_.load() || scheduled_.exchange(true)) return;
        auto self = shared_from_this();
        const bool queued = node_.submit_task([self] {
            self->scheduled_ = false;
            self->try_once();
        });
        if (!queued) scheduled_ = false;  // the poll asks again
    }

    bool done() const { return done_.load(); }
    // Whether it still waits on the tenant named `tenant`.
    bool waits_on(std::string_view tenant) {
        std::lock_guard lock(mu_);
        return !done_ && tenant_ && tenant_->name() == tenant;
    }

    // Runs once when the request leaves, however it leaves (answered, expired or cancelled).
    void on_done(std::function<void()> fn) { on_done_ = std::move(fn); }
    // Leaves without answering (the client went away, or it was answered already); true when
    // this call is what ended it.
    bool cancel() {
        std::lock_guard lock(mu_);
        if (done_) return false;
        close();
        return true;
    }

private:
    void arm_poll() {
        std::weak_ptr<Parked> weak = weak_from_this();
        // Refused once the timers stop: the deadline or the drain answers it then.
        (void)node_.timers().after(poll_ms, [weak] {
            if (auto self = weak.lock(); self && !self->done_) {
                self->wake();
                self->arm_poll();
            }
        });
    }

    void try_once() {
        std::lock_guard lock(mu_);
        if (done_) return;
        if (node_.stopping()) return;  // the drain answers it
        if (attempt_()) close();
    }

    void close() {
        done_ = true;
        tenant_->unwatch(this);
        tenant_.reset();  // an answered request no longer holds its tenant open
        attempt_ = nullptr;
        expire_ = nullptr;
        if (auto fn = std::move(on_done_)) fn();
    }

    Node& node_;
    std::shared_ptr<Tenant> tenant_;
    std::function<bool()> attempt_;
    std::function<void()> expire_;
    std::function<void()> on_done_;
    std::mutex mu_;
    std::atomic<bool> done_{false};
    std::atomic<bool> scheduled_{false};
};

}  // namespace fenec::node
