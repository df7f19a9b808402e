// server/runtime/pool.h: idle keep-alive connections by address, shared by the threads and loops of
// both HTTP clients (server/runtime/client.h, ring_client.h) that are given the same pool.
//
// Invariant: a connection handed out by take() was looked at just before (router.md §5.4): idle
// no longer than `idle_ms`, and a non-blocking peek found nothing to read — neither end-of-file
// (the far end closed it for its silence) nor a byte nobody asked for. Any other is closed, never
// used. Except (ours): a request that may be sent twice takes one put back within `trusted_ms`
// without the peek. The peek is a system call on every forward and every call of a query across
// tenants (5–8% of the router's CPU there, docs/benchmarks.md), and what it guards against cannot
// have come that soon: a far end closes for silence after seconds (`--idle-timeout`, 1 s at
// least), and our servers send nothing unasked. A far end gone meanwhile (a crash, a restart)
// costs such a request its one resend on a fresh connection (call.h), not a failure; a request
// that must not run twice is always peeked for. A pooled descriptor is a blocking-mode stream socket (each client does its own waiting:
// the io_uring loop, or poll), owned by the pool until taken. At most `max` idle per address;
// putting one more closes the oldest. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

namespace fenec::server {

class ClientObserver;
class IdleCount;

class ConnectionPool {
  public:
    struct Options {
        uint64_t idle_ms = 30'000;           // idle longer is closed, not used
        uint32_t max = 32;                   // idle connections kept per address; 0: none kept
        ClientObserver* observer = nullptr;  // idle counts by peer, optional; outlives the pool
        uint64_t trusted_ms = 100;  // put back this recently: taken without the peek by a resendable
    };
    explicit ConnectionPool(const Options& options);
    ~ConnectionPool();  // closes what is idle
    ConnectionPool(const ConnectionPool&) = delete;
    ConnectionPool& operator=(const ConnectionPool&) = delete;

    // A connection to `addr` that is still good (see the file comment), or -1. `now_ms` is the
    // steady clock in ms; `peer` names the far end for the idle counts; `resendable`: the request
    // may be sent twice (CallRequest::resend_after_sent), so one put back within `trusted_ms` is
    // taken without the peek.
    int take(const std::string& addr, const std::string& peer, uint64_t now_ms,
             bool resendable = false);
    // Keeps `fd`, a connection to `addr` whose last answer left it reusable
    // (server/runtime/call.h).
    void put(const std::string& addr, const std::string& peer, int fd, uint64_t now_ms);

    // Whether `fd` has nothing to read yet: the peek of the file comment.
    static bool still_open(int fd);

  private:
    struct Idle {
        int fd;
        uint64_t since_ms;
    };
    struct Entry {
        std::deque<Idle> list;
        // The count of the peer last seen at this address, looked up once, not per request.
        std::string peer;
        IdleCount* count = nullptr;
        bool asked = false;
    };
    void counted(Entry& e, const std::string& peer, int delta);

    const Options options_;
    std::mutex mu_;
    std::map<std::string, Entry, std::less<>> idle_;
};

}  // namespace fenec::server
