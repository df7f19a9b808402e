// server/runtime/pool.cc: the idle connections of server/runtime/pool.h, looked at before reuse.
#include "server/runtime/pool.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "server/runtime/call.h"

namespace fenec::server {

ConnectionPool::ConnectionPool(const Options& options) : options_(options) {}

ConnectionPool::~ConnectionPool() {
    for (auto& [addr, entry] : idle_) {
        for (const Idle& i : entry.list) ::close(i.fd);
    }
}

bool ConnectionPool::still_open(int fd) {
    // End-of-file (the far end closed it for its silence) or bytes nobody asked for make the
    // connection unusable; only "nothing to read yet" keeps it.
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

int ConnectionPool::take(const std::string& addr, const std::string& peer, uint64_t now_ms,
                         bool resendable) {
    std::lock_guard lock(mu_);
    auto it = idle_.find(addr);
    if (it == idle_.end()) return -1;
    Entry& e = it->second;
    while (!e.list.empty()) {
        Idle i = e.list.back();
        e.list.pop_back();
        counted(e, peer, -1);
        const uint64_t idle_ms = now_ms - i.since_ms;
        if (idle_ms <= options_.idle_ms &&
            ((resendable && idle_ms < options_.trusted_ms) || still_open(i.fd))) {
            return i.fd;
        }
        ::close(i.fd);
    }
    return -1;
}

void ConnectionPool::put(const std::string& addr, const std::string& peer, int fd,
                         uint64_t now_ms) {
    std::lock_guard lock(mu_);
    if (options_.max == 0) {
        ::close(fd);
        return;
    }
    Entry& e = idle_[addr];
    if (e.list.size() >= options_.max) {
        ::close(e.list.front().fd);
        e.list.pop_front();
        counted(e, peer, -1);
    }
    e.list.push_back({fd, now_ms});
    counted(e, peer, +1);
}

void ConnectionPool::counted(Entry& e, const std::string& peer, int delta) {
    if (!options_.observer) return;
    if (!e.asked || e.peer != peer) {
        e.peer = peer;
        e.count = options_.observer->idle_count(peer);
        e.asked = true;
    }
    if (e.count) e.count->add(delta);
}

}  // namespace fenec::server
