// test/support/slow_loris.h: the slow-client attack of issue 17 item 1, for tests of the node and
// the router: `n` sockets from another loopback address (127.0.0.2: another client address on
// Linux's loopback /8) each trickle a request head one byte per tick and never finish it; one the
// server closes or answers (408, 503) is connected again at once, as an attacker would.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fenec::test {

class SlowLoris {
  public:
    SlowLoris(uint16_t port, int n, const char* source = "127.0.0.2")
        : port_(port), source_(source) {
        for (int i = 0; i < n; ++i) fds_.push_back(connect_one());
    }
    ~SlowLoris() {
        for (int fd : fds_) {
            if (fd >= 0) ::close(fd);
        }
    }
    SlowLoris(const SlowLoris&) = delete;
    SlowLoris& operator=(const SlowLoris&) = delete;

    // One more byte on every socket; a socket the server answered or closed is replaced.
    void tick() {
        for (int& fd : fds_) {
            if (fd >= 0 && heard_back(fd)) {
                ::close(fd);
                fd = -1;
                ++replaced_;
            }
            if (fd < 0) fd = connect_one();
            if (fd < 0) continue;
            const char c = head_[sent_ % head_.size()];
            if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
                ::close(fd);
                fd = -1;
            }
        }
        ++sent_;
    }
    // Sockets the server answered or closed so far.
    int replaced() const { return replaced_; }

  private:
    static bool heard_back(int fd) {
        pollfd p{fd, POLLIN, 0};
        return ::poll(&p, 1, 0) > 0;
    }
    int connect_one() {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in from{};
        from.sin_family = AF_INET;
        ::inet_pton(AF_INET, source_, &from.sin_addr);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(port_);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
            ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
            ::close(fd);
            return -1;
        }
        return fd;
    }

    const uint16_t port_;
    const char* const source_;
    const std::string head_ =
        "GET /_health HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(4000, 'a');
    std::vector<int> fds_;
    size_t sent_ = 0;
    int replaced_ = 0;
};

}  // namespace fenec::test
