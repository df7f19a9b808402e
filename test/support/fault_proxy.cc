// test/support/fault_proxy.cc: FaultProxy (test/support/fault_proxy.h).
#include "test/support/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "test/support/ports.h"

namespace fenec::test {

namespace {

int connect_loopback(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

void kick(int fd) {
    const uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
}

}  // namespace

// One connection through the proxy: the router's side, the node's, and its wake-up.
struct FaultProxy::Link {
    int client = -1;
    int server = -1;
    int wake = -1;  // an eventfd: hold, release or stop
    ~Link() {
        for (int fd : {client, server, wake}) {
            if (fd >= 0) ::close(fd);
        }
    }
};

FaultProxy::FaultProxy(uint16_t target, uint16_t listen_port)
    : target_(target), port_(listen_port) {
    listen_fd_ = listen_loopback(port_);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (listen_fd_ < 0 || wake_fd_ < 0) {
        port_ = 0;
        return;
    }
    acceptor_ = std::thread([this] { accept_loop(); });
}

FaultProxy::~FaultProxy() {
    stopping_ = true;
    if (wake_fd_ >= 0) kick(wake_fd_);
    {
        std::lock_guard lock(mu_);
        for (const auto& l : links_) kick(l->wake);
    }
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<std::thread> threads;
    {
        std::lock_guard lock(mu_);
        threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
}

void FaultProxy::hold() {
    holding_ = true;
    std::lock_guard lock(mu_);
    for (const auto& l : links_) kick(l->wake);
}

void FaultProxy::release() {
    holding_ = false;
    held_bytes_ = 0;
    std::lock_guard lock(mu_);
    for (const auto& l : links_) kick(l->wake);
}

void FaultProxy::accept_loop() {
    while (!stopping_) {
        pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
        if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
        if (stopping_) return;
        if (!(p[0].revents & POLLIN)) continue;
        const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) continue;
        auto link = std::make_shared<Link>();
        link->client = client;
        link->server = connect_loopback(target_);
        link->wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (link->server < 0 || link->wake < 0) continue;  // the link closes: the node is gone
        std::lock_guard lock(mu_);
        links_.push_back(link);
        threads_.emplace_back([this, link] { relay(link); });
    }
}

// The link's bytes, both ways, until both ends are done: the router's kept while holding.
void FaultProxy::relay(std::shared_ptr<Link> link) {
    std::string to_server;  // read from the router, not yet written to the node
    bool client_open = true;
    char buf[64 * 1024];
    for (;;) {
        const bool holding = holding_;
        if (!client_open && to_server.empty() && !holding) break;  // all delivered
        pollfd p[3] = {{link->client, static_cast<short>(client_open ? POLLIN : 0), 0},
                       {link->server,
                        static_cast<short>(POLLIN | (!holding && !to_server.empty() ? POLLOUT : 0)),
                        0},
                       {link->wake, POLLIN, 0}};
        if (::poll(p, 3, -1) < 0 && errno != EINTR) break;
        if (stopping_) break;
        if (p[2].revents & POLLIN) {
            uint64_t n = 0;
            (void)!::read(link->wake, &n, sizeof n);
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            const ssize_t n = ::recv(link->client, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0) {
                to_server.append(buf, static_cast<size_t>(n));
                if (holding_) held_bytes_ += static_cast<uint64_t>(n);
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                client_open = false;  // what it sent before still goes on
            }
        }
        if (p[1].revents & POLLOUT && !holding_ && !to_server.empty()) {
            const ssize_t n = ::send(link->server, to_server.data(), to_server.size(),
                                     MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0) {
                to_server.erase(0, static_cast<size_t>(n));
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                break;
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            const ssize_t n = ::recv(link->server, buf, sizeof buf, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;  // the node closed
            if (n > 0 && client_open) {
                (void)::send(link->client, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
            }
        }
    }
    // The router's side closed and everything delivered: the node is told no more comes, and
    // its answer (to nobody) is read until it closes, so a late request is run as any other.
    if (!client_open && !stopping_) {
        ::shutdown(link->server, SHUT_WR);
        for (;;) {
            pollfd p[2] = {{link->server, POLLIN, 0}, {link->wake, POLLIN, 0}};
            if (::poll(p, 2, 5000) <= 0 || stopping_) break;
            if (p[1].revents & POLLIN) {
                uint64_t n = 0;
                (void)!::read(link->wake, &n, sizeof n);
            }
            if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                const ssize_t n = ::recv(link->server, buf, sizeof buf, MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
            }
        }
    }
    std::lock_guard lock(mu_);
    std::erase(links_, link);
}

}  // namespace fenec::test
