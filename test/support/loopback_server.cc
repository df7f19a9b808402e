// test/support/loopback_server.cc: see loopback_server.h.
#include "test/support/loopback_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test/support/ports.h"

namespace fenec::test {

namespace {
constexpr int accept_poll_ms = 20;  // how soon a stop is seen by the accepting thread
}  // namespace

LoopbackServer::LoopbackServer(Serve serve, Threads threads, int backlog,
                               std::function<void()> closed)
    : serve_(std::move(serve)), threads_(threads), closed_(std::move(closed)) {
    fd_ = listen_loopback(port_, backlog);
    if (fd_ >= 0 && serve_) accepting_ = std::thread([this] { accept_loop(); });
}

LoopbackServer::~LoopbackServer() { stop(); }

void LoopbackServer::stop() {
    std::lock_guard lock(mu_);
    if (fd_ < 0) return;
    {
        std::lock_guard wake(wake_mu_);
        stopping_ = true;
    }
    woken_.notify_all();
    ::shutdown(fd_, SHUT_RDWR);
    if (accepting_.joinable()) accepting_.join();
    for (std::thread& t : serving_) t.join();
    serving_.clear();
    ::close(fd_);
    fd_ = -1;
}

bool LoopbackServer::wait_stopping(std::chrono::milliseconds most) {
    std::unique_lock lock(wake_mu_);
    return woken_.wait_for(lock, most, [this] { return stopping_.load(); });
}

void LoopbackServer::accept_loop() {
    auto serve = [this](int c) {
        serve_(c);
        ::close(c);
        if (closed_) closed_();
    };
    while (!stopping_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, accept_poll_ms) <= 0) continue;
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        if (threads_ == Threads::one) {
            serve(c);
        } else {
            serving_.emplace_back(serve, c);
        }
    }
}

}  // namespace fenec::test
