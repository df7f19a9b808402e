// server/runtime/resolve.h: an address's `host:port` turned into socket addresses, with a bound.
//
// A numeric host (127.0.0.1, [::1]) is read at once, on the caller's thread. A name goes to a
// Lookup (getaddrinfo by default) on a helper thread of its own. resolve_within waits for it only
// until its deadline or its Cancel: getaddrinfo cannot be cancelled, so past the bound the helper
// is left to finish alone and its answer is dropped. A resolver that never answers then holds up
// that one call (for its bound) and one thread, never the caller beyond it. resolve_or_look_up
// does not wait at all: a loop, which must never block, is handed the answer when it comes.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fenec::server {

class Cancel;

struct Address {
    sockaddr_storage storage{};
    socklen_t length = 0;
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

struct Resolved {
    std::vector<Address> addresses;  // in the resolver's order; empty on failure
    std::string error;               // why there are none
};

// The name lookup itself: every address of `host` and `port` (a number) for a stream socket.
// May block as long as the resolver does. Replaceable, so a test can stand in a slow resolver.
using Lookup = std::function<Resolved(const std::string& host, const std::string& port)>;

// getaddrinfo(3).
Resolved system_lookup(const std::string& host, const std::string& port);

// "127.0.0.1:7001" → "127.0.0.1", 7001; "[::1]:7001" → "::1", 7001. False, with `error` said,
// when `addr` is not host:port with a decimal port.
bool split_host_port(std::string_view addr, std::string& host, uint16_t& port, std::string& error);

// The addresses of `addr` without waiting: a numeric host's at once, as is an `addr` that is not
// host:port (no addresses, the error said). For a name, nullopt: its lookup runs on a helper
// thread of its own, which calls `done` with the answer (or, when no thread can be had, `done`
// runs on the caller's before this returns). `done` must not block.
std::optional<Resolved> resolve_or_look_up(const std::string& addr, const Lookup& lookup,
                                           std::function<void(Resolved)> done);

// The addresses of `addr` (host:port): see the file comment. `deadline` bounds the wait for a
// name; `cancel` (optional) ends it early.
Resolved resolve_within(const std::string& addr, const Lookup& lookup,
                        std::chrono::steady_clock::time_point deadline, const Cancel* cancel);

}  // namespace fenec::server
