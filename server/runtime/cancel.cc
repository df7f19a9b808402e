// server/runtime/cancel.cc: Cancel (server/runtime/cancel.h), an eventfd written once, and the
// one wait of a blocking call: poll(2) on its descriptor and the Cancels', bounded.
#include "server/runtime/cancel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace fenec::server {

Cancel::Cancel() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

Cancel::~Cancel() {
    if (fd_ >= 0) ::close(fd_);
}

void Cancel::cancel() {
    if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
    if (fd_ >= 0) {
        const uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof one);
    }
}

Wait wait_for(int fd, short events, std::chrono::steady_clock::time_point until,
              const Cancel* cancel, const Cancel* also) {
    using Clock = std::chrono::steady_clock;
    const auto is_cancelled = [](const Cancel* c) { return c && c->cancelled(); };
    const auto fd_of = [](const Cancel* c) { return c ? c->fd() : -1; };
    // A Cancel without a descriptor is looked at each cancel_poll_ms instead.
    const bool unpolled = (cancel && cancel->fd() < 0) || (also && also->fd() < 0);
    for (;;) {
        if (is_cancelled(cancel) || is_cancelled(also)) return Wait::cancelled;
        const Clock::time_point now = Clock::now();
        if (now >= until) return Wait::timed_out;
        // Rounded up, so a wait never ends a little before its bound and spins.
        auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
        if (unpolled) left = std::min<int64_t>(left, cancel_poll_ms);
        const int ms = static_cast<int>(std::min<int64_t>(left, 1 << 30));
        pollfd p[3] = {{fd, events, 0}, {fd_of(cancel), POLLIN, 0}, {fd_of(also), POLLIN, 0}};
        const int n = ::poll(p, 3, ms);
        if (n < 0 && errno != EINTR) return Wait::ready;  // the next call on `fd` says why
        if (n <= 0) continue;
        if (p[1].revents != 0 || p[2].revents != 0) return Wait::cancelled;
        if (p[0].revents != 0) return Wait::ready;
    }
}

}  // namespace fenec::server
