// test/support/loopback_server.h: the listener under a test's stand-in peers (a fake node, a
// fake primary, a proxy that holds bytes back): a socket on 127.0.0.1, a port of the kernel's
// choosing, and a thread accepting on it until the server stops; each connection accepted is
// handed to the owner's `serve`, then closed. A peer's own behaviour (what it answers, what it
// holds) is all its owner writes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fenec::test {

class LoopbackServer {
  public:
    // How connections are served: one at a time on the accepting thread, in the order they
    // came, or each on a thread of its own, so calls overlap as a router sends them.
    enum class Threads { one, per_connection };
    using Serve = std::function<void(int fd)>;

    // A null `serve` listens and accepts nothing (connections wait in the backlog). `closed`,
    // where given, is called after each connection is closed.
    LoopbackServer(Serve serve, Threads threads, int backlog = 16,
                   std::function<void()> closed = {});
    // stop().
    ~LoopbackServer();
    LoopbackServer(const LoopbackServer&) = delete;
    LoopbackServer& operator=(const LoopbackServer&) = delete;

    // No connection is accepted from now on; returns once every `serve` has returned (a serve
    // loop ends by watching stopping(), or by its peer going) and the socket is closed. An
    // owner whose serve waits on something of its own wakes it before. Idempotent.
    void stop();
    bool stopping() const { return stopping_.load(); }
    // Waits until the server stops or `most` has passed; whether it stops. A serve that holds its
    // connection, or answers slowly, waits here, and is let go the moment the test stops it.
    bool wait_stopping(std::chrono::milliseconds most = std::chrono::hours(1));

    uint16_t port() const { return port_; }
    std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }
    std::string url() const { return "http://" + addr(); }

  private:
    void accept_loop();

    Serve serve_;
    const Threads threads_;
    std::function<void()> closed_;
    int fd_ = -1;
    uint16_t port_ = 0;
    std::atomic<bool> stopping_{false};
    std::mutex mu_;                     // stop()'s, once
    std::mutex wake_mu_;                // wait_stopping()'s
    std::condition_variable woken_;
    std::vector<std::thread> serving_;  // per_connection: the accepting thread's own
    std::thread accepting_;
};

}  // namespace fenec::test
