// server/runtime/cancel.cc: Cancel (server/runtime/cancel.h), an eventfd written once, and the
// one wait of a blocking call: poll(2) on its descriptor and the Cancel's, bounded.
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
              const Cancel* cancel) {
    using Clock = std::chrono::steady_clock;
    for (;;) {
        if (cancel && cancel->cancelled()) return Wait::cancelled;
        const Clock::time_point now = Clock::now();
        if (now >= until) return Wait::timed_out;
        // Rounded up, so a wait never ends a little before its bound and spins.
        auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
        if (cancel && cancel->fd() < 0) left = std::min<int64_t>(left, cancel_poll_ms);
        const int ms = static_cast<int>(std::min<int64_t>(left, 1 << 30));
        pollfd p[2] = {{fd, events, 0}, {cancel ? cancel->fd() : -1, POLLIN, 0}};
        const int n = ::poll(p, 2, ms);
        if (n < 0 && errno != EINTR) return Wait::ready;  // the next call on `fd` says why
        if (n <= 0) continue;
        if (p[1].revents != 0) return Wait::cancelled;
        if (p[0].revents != 0) return Wait::ready;
    }
}

}  // namespace fenec::server
