// test/support/fault_proxy.h: P of router.md §18, a TCP relay on 127.0.0.1 put between a
// router and a node (the router records the node at P's port) so a test can do to that link
// what a network does. Every byte passes both ways as it comes unless the test says:
// - hold(): what the router sends is kept from then on, in order, as a segment held in a
//   switch's queue; nothing is lost and nothing is refused, the router sees only silence;
// - release(): what was kept goes on to the node, then everything after, as it comes. A
//   connection the router closed meanwhile still delivers what it sent before closing: a grant
//   read late, after its sender gave up on it.
// The node's answers always pass (it is the requests a test holds). A link cut outright (a route
// gone: every connection over it ended, every new one refused) is the proxy destroyed, and the
// link back a proxy made again on the same port. Connections are many and
// come and go (the router's pool, its grant threads, a follower's feed): each has a thread of its
// own, woken by the proxy's control. Network traffic goes to 127.0.0.1 only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace fenec::test {

class FaultProxy {
  public:
    // Relays to 127.0.0.1:`target`; listens on `listen_port`, or on a port of its own choosing
    // when 0 (port(); 0 when the port could not be bound).
    explicit FaultProxy(uint16_t target, uint16_t listen_port = 0);
    ~FaultProxy();
    FaultProxy(const FaultProxy&) = delete;
    FaultProxy& operator=(const FaultProxy&) = delete;

    uint16_t port() const { return port_; }
    void hold();
    void release();
    // Bytes the router sent that are being held now.
    uint64_t held_bytes() const { return held_bytes_.load(); }

  private:
    struct Link;
    void accept_loop();
    void relay(std::shared_ptr<Link> link);

    uint16_t target_;
    uint16_t port_ = 0;
    int listen_fd_ = -1;
    int wake_fd_ = -1;  // an eventfd: readable once the proxy stops
    std::atomic<bool> stopping_{false};
    std::atomic<bool> holding_{false};
    std::atomic<uint64_t> held_bytes_{0};
    std::mutex mu_;
    std::vector<std::shared_ptr<Link>> links_;
    std::vector<std::thread> threads_;
    std::thread acceptor_;
};

}  // namespace fenec::test
