// server/runtime/cancel.h: a way to end blocking calls from another thread (a follower stopped, a
// standby router's directory stream ended). Every wait of a blocking call given a Cancel — the
// name lookup, the connect, each write and read — also watches its descriptor, so cancel() ends
// the wait at once, wherever the call is.
//
// Invariant: once cancelled, it stays cancelled (its eventfd stays readable); a call that sees it
// ends with CallFailure::cancelled and lets its connection go. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace fenec::server {

class Cancel {
  public:
    Cancel();  // an eventfd; without one (descriptors exhausted) waits look at the flag each
               // cancel_poll_ms instead
    ~Cancel();
    Cancel(const Cancel&) = delete;
    Cancel& operator=(const Cancel&) = delete;

    void cancel();  // any thread; idempotent
    bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
    int fd() const { return fd_; }  // readable once cancelled; -1 when none could be made

  private:
    int fd_ = -1;
    std::atomic<bool> cancelled_{false};
};

// How long one wait may last when a Cancel has no descriptor: the delay a cancel() then takes.
inline constexpr uint64_t cancel_poll_ms = 50;

enum class Wait : uint8_t { ready, timed_out, cancelled };

// Waits until `fd` shows `events` (POLLIN, POLLOUT; an error or hang-up counts as ready, for the
// next call on it to say), `until` passes, or `cancel` or `also` (each optional) is cancelled: a
// wait that serves two calls at once (a move's relay, its source's and its target's) ends on
// either's. Which one it was, the caller asks each Cancel.
Wait wait_for(int fd, short events, std::chrono::steady_clock::time_point until,
              const Cancel* cancel, const Cancel* also = nullptr);

}  // namespace fenec::server
