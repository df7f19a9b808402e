// test/support/ports.h: the loopback port a test gives each process it starts, and the wait
// before one is started again on its port.
//
// Two things can hold a port a test means to start a process on again (a node or a router back
// where the others know it), and either fails the start "Address already in use", seen in CI:
// - The process just killed. Its io_uring ring is torn down by the kernel after the exit, and the
//   listening socket a pending accept holds closes with it: 8-12 ms after waitpid here, every
//   time (a fenec-node or fenec-shard SIGKILLed and bound again in a loop).
//   wait_port_free() waits that out.
// - Another suite's connection. A port the kernel picks for `127.0.0.1:0` comes from its
//   ephemeral range (net.ipv4.ip_local_port_range), the range it draws the local port of every
//   outgoing connection from, so one could take the port while the process is down and keep it.
//   listen_port() draws below that range, which the kernel never hands out so: at random there,
//   and free when drawn (another suite could draw the same port before the process binds it, a
//   chance of a few in 20,000 for a window of milliseconds: spawn.h starts such a loser again).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace fenec::test {

// Whether a server could listen on 127.0.0.1:port now (bound as the servers bind).
inline bool port_free(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return free;
}

// A free port below the ephemeral range, or 0 (the kernel picks) when that range starts too low
// to leave room below it.
inline uint16_t listen_port() {
    constexpr unsigned kFloor = 10000;  // above the ports services are commonly given
    unsigned lo = 32768;
    std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> lo;
    if (lo < kFloor + 1000) return 0;
    thread_local std::mt19937 draw{std::random_device{}()};
    std::uniform_int_distribution<unsigned> pick(kFloor, lo - 1);
    for (int tries = 0; tries < 64; ++tries) {
        const auto port = static_cast<uint16_t>(pick(draw));
        if (port_free(port)) return port;
    }
    return 0;
}

// A listening socket on 127.0.0.1:`port`, or on a port of the kernel's choosing when `port` is 0
// (and sets it), for a test's own stand-in server; -1 when it cannot be had. SO_REUSEADDR: one made
// again on the port of one destroyed binds it whatever the old one's connections left in TIME_WAIT
// (the accepted sockets inherit the option).
inline int listen_loopback(uint16_t& port, int backlog = 128) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, backlog) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(fd);
        return -1;
    }
    port = ntohs(a.sin_port);
    return fd;
}

// Before a process starts with `args`: when its last --listen names a loopback port of its own
// (a restart where the others know it), waits up to `ms` for that port to be free. A start that
// still finds it held fails as it would have, with the server's own message.
inline void wait_port_free(const std::vector<std::string>& args, int ms = 5000) {
    const std::string prefix = "127.0.0.1:";
    std::string listen;
    for (size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == "--listen") listen = args[i + 1];
    }
    if (listen.rfind(prefix, 0) != 0) return;
    const unsigned long port = std::strtoul(listen.c_str() + prefix.size(), nullptr, 10);
    if (port == 0 || port > 65535) return;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!port_free(static_cast<uint16_t>(port)) && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

}  // namespace fenec::test
