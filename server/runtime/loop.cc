// server/runtime/loop.cc: the io_uring event loop, the one file that includes liburing (STYLE.md,
// ci/check-boundaries). A turn: submit everything callbacks queued, poll the CQ for at most
// busy_poll_us (running the kernel's pending task work when it flags some), and only then wait
// in io_uring_enter; reap up to the ready bound into `ready_`, then run callbacks, then posted
// tasks. The invariant kept: a completion's callback never runs inside the reap loop, and
// `in_flight_` counts the completions the kernel still holds (multishot ones until their last CQE).
//
// The ring, where the kernel allows it (6.1+), is single-issuer with deferred task work: the
// kernel finishes a recv or a polled send only when the loop asks for events (io_uring_enter with
// GETEVENTS), never by interrupting it, and flags IORING_SQ_TASKRUN when it has such work. The
// ring is created disabled and enabled by run() on the loop's own thread, its one issuer.
#include "server/runtime/loop.h"

#include <liburing.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>

namespace fenec::server {

namespace {

constexpr uint32_t ready_max = 2 * ring_entries;  // the CQ's size; more wait for the next turn
constexpr uint32_t drain_wait_ms = 100;           // one wait while cancelling at the end
constexpr uint32_t drain_waits_max = 50;          // 5 s: a kernel that never lets go is a bug

uint64_t steady_ms() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
}

// The ring set-ups tried in order: single issuer with task work deferred to GETEVENTS (6.1+),
// cooperative task work (5.19+), then a plain ring. TASKRUN_FLAG makes the kernel say, in the SQ
// flags, that task work waits, so the busy poll runs it without a blind syscall.
constexpr unsigned setup_deferred = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                                    IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED;
constexpr unsigned setup_coop = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// A posted std::function, owned by its own task.
struct FunctionTask final : Task {
    std::function<void()> fn;
    static void run_it(Task& task, bool cancelled) {
        auto* self = static_cast<FunctionTask*>(&task);
        if (!cancelled) self->fn();
        delete self;
    }
};

}  // namespace

struct Loop::Ring {
    io_uring ring;
};

Loop::Loop() : ring_(std::make_unique<Ring>()) {
    ready_.reserve(ready_max);
    wake_.callback = &Loop::on_wake;
    wake_.context = this;
}

std::shared_ptr<Loop> Loop::create(std::string& error, uint32_t busy_poll_us) {
    std::shared_ptr<Loop> loop(new Loop());
    loop->busy_poll_us_ = std::min(busy_poll_us, busy_poll_us_max);
    int rc = -EINVAL;
    for (unsigned flags : {setup_deferred, setup_coop, 0u}) {
        io_uring_params params{};
        params.flags = flags;
        rc = io_uring_queue_init_params(ring_entries, &loop->ring_->ring, &params);
        if (rc != -EINVAL) {
            loop->disabled_ = rc >= 0 && (flags & IORING_SETUP_R_DISABLED) != 0;
            break;
        }
    }
    if (rc < 0) {
        error = std::string("io_uring_queue_init: ") + std::strerror(-rc);
        loop->ring_.reset();
        return nullptr;
    }
    loop->event_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (loop->event_fd_ < 0) {
        error = std::string("eventfd: ") + std::strerror(errno);
        return nullptr;
    }
    loop->now_ms_ = steady_ms();
    return loop;
}

Loop::~Loop() {
    if (ring_) {
        cancel_all_and_drain();
        io_uring_queue_exit(&ring_->ring);
    }
    if (event_fd_ >= 0) ::close(event_fd_);
    // Tasks posted before run() ever ran (or after a stop that never ran) are released.
    Task* task = head_;
    head_ = tail_ = nullptr;
    cancel_tasks(task);
}

// Runs each task of the list `task` as cancelled (its owner releases what it holds).
void Loop::cancel_tasks(Task* task) {
    while (task != nullptr) {
        Task* next = task->next;
        task->next = nullptr;
        task->run(*task, true);
        task = next;
    }
}

void* Loop::get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
    if (sqe == nullptr) {
        // The SQ is full: hand this turn's SQEs to the kernel now rather than grow anything.
        io_uring_submit(&ring_->ring);
        sqe = io_uring_get_sqe(&ring_->ring);
    }
    assert(sqe != nullptr);
    return sqe;
}

void Loop::prepared(void* sqe, Completion& completion) {
    assert(!completion.in_flight);
    assert(completion.callback != nullptr);
    completion.in_flight = true;
    completion.more = false;
    ++in_flight_;
    io_uring_sqe_set_data(static_cast<io_uring_sqe*>(sqe), &completion);
}

void Loop::accept_multishot(Completion& completion, int listen_fd) {
    auto* sqe = static_cast<io_uring_sqe*>(get_sqe());
    io_uring_prep_multishot_accept(sqe, listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    prepared(sqe, completion);
}

void Loop::recv(Completion& completion, int fd, void* buffer, size_t bytes, bool poll_first) {
    auto* sqe = static_cast<io_uring_sqe*>(get_sqe());
    io_uring_prep_recv(sqe, fd, buffer, bytes, 0);
    if (poll_first) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    prepared(sqe, completion);
}

void Loop::send(Completion& completion, int fd, const void* buffer, size_t bytes) {
    auto* sqe = static_cast<io_uring_sqe*>(get_sqe());
    io_uring_prep_send(sqe, fd, buffer, bytes, MSG_NOSIGNAL);
    prepared(sqe, completion);
}

void Loop::connect(Completion& completion, int fd, const sockaddr* address, socklen_t length) {
    auto* sqe = static_cast<io_uring_sqe*>(get_sqe());
    io_uring_prep_connect(sqe, fd, address, length);
    prepared(sqe, completion);
}

void Loop::shutdown_write(Completion& completion, int fd) {
    auto* sqe = static_cast<io_uring_sqe*>(get_sqe());
    io_uring_prep_shutdown(sqe, fd, SHUT_WR);
    prepared(sqe, completion);
}

void Loop::close(Completion& completion, int fd) {
    auto* sqe = static_cast<io_uring_sqe*>(get_sqe());
    io_uring_prep_close(sqe, fd);
    prepared(sqe, completion);
}

void Loop::timeout(Completion& completion, uint64_t ms) {
    static_assert(sizeof(__kernel_timespec) <= sizeof(completion.timespec));
    auto* ts = new (completion.timespec) __kernel_timespec{};
    ts->tv_sec = static_cast<int64_t>(ms / 1000);
    ts->tv_nsec = static_cast<long long>((ms % 1000) * 1'000'000);
    auto* sqe = static_cast<io_uring_sqe*>(get_sqe());
    io_uring_prep_timeout(sqe, ts, 0, 0);
    prepared(sqe, completion);
}

void Loop::cancel(const Completion& target) {
    if (!target.in_flight) return;
    auto* sqe = static_cast<io_uring_sqe*>(get_sqe());
    io_uring_prep_cancel(sqe, const_cast<Completion*>(&target), 0);
    io_uring_sqe_set_data(sqe, nullptr);  // the cancel's own CQE is dropped at reap
}

void Loop::arm_wake() {
    auto* sqe = static_cast<io_uring_sqe*>(get_sqe());
    io_uring_prep_read(sqe, event_fd_, &wake_value_, sizeof wake_value_, 0);
    prepared(sqe, wake_);
}

void Loop::on_wake(Completion& completion) {
    auto* self = static_cast<Loop*>(completion.context);
    // Cleared before the tasks run (this turn, after the callbacks): a post after this writes
    // again, so none is missed.
    self->signalled_.store(false, std::memory_order_seq_cst);
    if (!self->stop_requested_.load(std::memory_order_acquire)) self->arm_wake();
}

bool Loop::in_loop_thread() const {
    return thread_.load(std::memory_order_acquire) == std::this_thread::get_id();
}

void Loop::run() {
    thread_.store(std::this_thread::get_id(), std::memory_order_release);
    if (disabled_) {
        // This thread becomes the ring's single issuer; nothing was submitted before. (Debian's
        // liburing 2.3 declares io_uring_enable_rings but does not export it.)
        [[maybe_unused]] long rc = ::syscall(__NR_io_uring_register, ring_->ring.ring_fd,
                                             IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
        assert(rc == 0);
        disabled_ = false;
    }
    // Registered for this thread, io_uring_enter skips the descriptor lookup; let go below, as
    // another thread could not use the registration.
    const bool registered = io_uring_register_ring_fd(&ring_->ring) == 1;
    now_ms_ = steady_ms();
    arm_wake();
    while (!stop_requested_.load(std::memory_order_acquire)) turn();
    Task* task = nullptr;
    {
        std::lock_guard lock(mutex_);
        refusing_ = true;
        task = head_;
        head_ = tail_ = nullptr;
    }
    cancel_tasks(task);
    thread_.store(std::thread::id{}, std::memory_order_release);
    // The ring's owner lets go of it: whatever is still in flight (the wake-up read, operations of
    // connections a forced shutdown leaves) is cancelled here, so no other thread submits.
    cancel_all_and_drain();
    if (registered) io_uring_unregister_ring_fd(&ring_->ring);
}

void Loop::turn() {
    const uint32_t poll_us = std::max(busy_poll_us_, poll_once_us_);
    poll_once_us_ = 0;
    if (poll_us != 0) busy_poll(poll_us);
    // Dekker with post(): either we see tasks_pending_ or the poster sees sleeping_ and wakes us.
    sleeping_.store(true, std::memory_order_seq_cst);
    if (tasks_pending_.load(std::memory_order_seq_cst) || io_uring_cq_ready(&ring_->ring) > 0 ||
        stop_requested_.load(std::memory_order_acquire)) {
        io_uring_submit(&ring_->ring);  // no syscall when nothing is queued and no work flagged
    } else {
        io_uring_submit_and_wait(&ring_->ring, 1);  // -EINTR and the like: just turn again
    }
    sleeping_.store(false, std::memory_order_relaxed);
    now_ms_ = steady_ms();
    reap();
    for (const Ready& ready : ready_) {
        // in_flight clears only now: a completion reaped but not yet dispatched is still owed
        // its callback, so it must not be re-armed (or its buffer moved) before then.
        if (!ready.more) ready.completion->in_flight = false;
        ready.completion->result = ready.result;
        ready.completion->more = ready.more;
        ready.completion->callback(*ready.completion);
    }
    ready_.clear();
    run_tasks();
}

// Submits what the callbacks queued (an answer goes out now), then watches the CQ without
// sleeping for up to `us` (busy_poll_us_, or poll_next_turn's): on a kept-alive connection the
// next request then lands without the wake-up of a sleeping thread (the kernel's scheduler, not
// the loop, was most of a small request's latency). Work the kernel flags (IORING_SQ_TASKRUN: a
// recv's data came) is run by asking for events. Returns as soon as a completion, a posted task
// or stop() is there.
void Loop::busy_poll(uint32_t us) {
    io_uring& ring = ring_->ring;
    io_uring_submit(&ring);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    for (uint32_t spins = 1;; ++spins) {
        if (IO_URING_READ_ONCE(*ring.sq.kflags) & IORING_SQ_TASKRUN) io_uring_get_events(&ring);
        if (io_uring_cq_ready(&ring) > 0) return;
        if (tasks_pending_.load(std::memory_order_acquire)) return;
        if (stop_requested_.load(std::memory_order_relaxed)) return;
        // Every 64 turns of the spin (a pause is tens of ns, so every few microseconds): the
        // clock, and the CPU offered to any thread that waits for it here (a client on the same
        // core, a worker), so polling never starves what it waits for.
        if (spins % 64 == 0) {
            if (std::chrono::steady_clock::now() >= deadline) return;
            ::sched_yield();
        }
        cpu_relax();
    }
}

void Loop::reap() {
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_->ring, head, cqe) {
        if (ready_.size() == ready_max) break;
        ++seen;
        auto* completion = static_cast<Completion*>(io_uring_cqe_get_data(cqe));
        if (completion == nullptr) continue;  // a cancel's own answer
        bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
        if (!more) --in_flight_;  // the kernel let go; the owner learns it at dispatch
        ready_.push_back(Ready{completion, cqe->res, more});
    }
    io_uring_cq_advance(&ring_->ring, seen);
}

void Loop::run_tasks() {
    if (!tasks_pending_.load(std::memory_order_acquire)) return;
    Task* task = nullptr;
    {
        std::lock_guard lock(mutex_);
        task = head_;
        head_ = tail_ = nullptr;
        tasks_pending_.store(false, std::memory_order_relaxed);
    }
    // Tasks posted while these run wait for the next turn (which then does not sleep).
    while (task != nullptr) {
        Task* next = task->next;
        task->next = nullptr;
        task->run(*task, false);  // may free or re-post `task`
        task = next;
    }
}

void Loop::stop() {
    stop_requested_.store(true, std::memory_order_release);
    if (!in_loop_thread() && !signalled_.exchange(true)) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof one);
    }
}

void Loop::push(Task& task) {
    assert(task.next == nullptr);
    if (tail_ == nullptr) {
        head_ = tail_ = &task;
    } else {
        tail_->next = &task;
        tail_ = &task;
    }
}

bool Loop::post(Task& task) {
    {
        std::lock_guard lock(mutex_);
        if (refusing_) return false;
        push(task);
        tasks_pending_.store(true, std::memory_order_seq_cst);
    }
    if (in_loop_thread()) return true;  // run at the end of this turn
    if (sleeping_.load(std::memory_order_seq_cst) && !signalled_.exchange(true)) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof one);
    }
    return true;
}

bool Loop::post(std::function<void()> fn) {
    auto* task = new FunctionTask();
    task->run = &FunctionTask::run_it;
    task->fn = std::move(fn);
    if (post(*task)) return true;
    delete task;
    return false;
}

void Loop::cancel_all_and_drain() {
    assert(!in_loop_thread());
    if (in_flight_ == 0) return;
    io_uring& ring = ring_->ring;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) {
        io_uring_submit(&ring);
        sqe = io_uring_get_sqe(&ring);
    }
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data(sqe, nullptr);
    io_uring_submit(&ring);
    for (uint32_t waits = 0; in_flight_ > 0 && waits < drain_waits_max; ++waits) {
        __kernel_timespec ts{};
        ts.tv_nsec = static_cast<long long>(drain_wait_ms) * 1'000'000;
        io_uring_cqe* cqe = nullptr;
        io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
        unsigned head = 0;
        unsigned seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            ++seen;
            auto* completion = static_cast<Completion*>(io_uring_cqe_get_data(cqe));
            if (completion != nullptr && (cqe->flags & IORING_CQE_F_MORE) == 0) {
                completion->in_flight = false;
                --in_flight_;
            }
        }
        io_uring_cq_advance(&ring, seen);
    }
}

}  // namespace fenec::server
