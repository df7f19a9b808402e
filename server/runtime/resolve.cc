// server/runtime/resolve.cc: host:port into addresses (server/runtime/resolve.h). A name's lookup
// runs on a detached helper thread that shares a small record with the caller: the answer, and
// an eventfd it writes when done, which the caller polls beside its Cancel until its deadline.
// Whoever lets go of the record last closes the eventfd, so an abandoned helper writes into a
// record that is still there. resolve_or_look_up's helper calls its caller's `done` instead.
#include "server/runtime/resolve.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "server/runtime/cancel.h"

namespace fenec::server {

namespace {

using Clock = std::chrono::steady_clock;

// The record a lookup's helper shares with its caller.
struct Pending {
    int event_fd = -1;
    std::mutex mu;
    bool done = false;
    Resolved result;
    ~Pending() {
        if (event_fd >= 0) ::close(event_fd);
    }
};

// A numeric host and port as one address, without a lookup; false when `host` is a name.
bool numeric(const std::string& host, uint16_t port, Address& out) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
    if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        out.length = sizeof(sockaddr_in);
        return true;
    }
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        out.length = sizeof(sockaddr_in6);
        return true;
    }
    return false;
}

std::string ms_text(Clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace

Resolved system_lookup(const std::string& host, const std::string& port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    Resolved out;
    if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0 || !res) {
        out.error = std::string("cannot resolve `") + host + "`: " + ::gai_strerror(rc);
        return out;
    }
    for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
        if (a->ai_addrlen > sizeof(sockaddr_storage)) continue;
        Address address;
        std::memcpy(&address.storage, a->ai_addr, a->ai_addrlen);
        address.length = a->ai_addrlen;
        out.addresses.push_back(address);
    }
    ::freeaddrinfo(res);
    if (out.addresses.empty()) out.error = "`" + host + "` has no address";
    return out;
}

bool split_host_port(std::string_view addr, std::string& host, uint16_t& port, std::string& error) {
    const size_t colon = addr.rfind(':');
    bool ok = colon != std::string_view::npos && colon > 0 && colon + 1 < addr.size();
    if (ok) {
        const char* end = addr.data() + addr.size();
        auto [at, ec] = std::from_chars(addr.data() + colon + 1, end, port);
        ok = ec == std::errc() && at == end;
    }
    if (!ok) {
        error = "`" + std::string(addr) + "` is not host:port";
        return false;
    }
    std::string_view h = addr.substr(0, colon);
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    host = std::string(h);
    return true;
}

namespace {

// `addr`'s answer when it needs no lookup: a numeric host's address, or, when `addr` is not
// host:port, none and the error. nullopt for a name, with its host and port.
std::optional<Resolved> without_lookup(const std::string& addr, std::string& host,
                                       uint16_t& port) {
    Resolved out;
    if (!split_host_port(addr, host, port, out.error)) return out;
    Address address;
    if (!numeric(host, port, address)) return std::nullopt;
    out.addresses.push_back(address);
    return out;
}

// `lookup` of `host` on a helper thread of its own, handing its answer to `done` there (or on
// this thread, when no thread can be had).
void look_up(const std::string& host, uint16_t port, const Lookup& lookup,
             std::function<void(Resolved)> done) {
    try {
        std::thread([done, lookup, host, port = std::to_string(port)] {
            done(lookup(host, port));
        }).detach();
    } catch (const std::system_error& e) {
        done(Resolved{{}, std::string("cannot look `") + host + "` up: " + e.what()});
    }
}

}  // namespace

std::optional<Resolved> resolve_or_look_up(const std::string& addr, const Lookup& lookup,
                                           std::function<void(Resolved)> done) {
    std::string host;
    uint16_t port = 0;
    if (auto now = without_lookup(addr, host, port)) return now;
    look_up(host, port, lookup, std::move(done));
    return std::nullopt;
}

Resolved resolve_within(const std::string& addr, const Lookup& lookup, Clock::time_point deadline,
                        const Cancel* cancel) {
    std::string host;
    uint16_t port = 0;
    if (auto now = without_lookup(addr, host, port)) return std::move(*now);
    const Clock::time_point began = Clock::now();
    auto pending = std::make_shared<Pending>();
    pending->event_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (pending->event_fd < 0) {
        return Resolved{{}, std::string("cannot look `") + host + "` up: eventfd: " +
                                std::strerror(errno)};
    }
    look_up(host, port, lookup, [pending](Resolved r) {
        std::lock_guard lock(pending->mu);
        pending->result = std::move(r);
        pending->done = true;
        const uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(pending->event_fd, &one, sizeof one);
    });
    const Wait w = wait_for(pending->event_fd, POLLIN, deadline, cancel);
    std::lock_guard lock(pending->mu);
    if (pending->done) return std::move(pending->result);
    Resolved out;
    out.error = w == Wait::cancelled ? "the lookup of `" + host + "` was cancelled"
                                     : "the lookup of `" + host + "` took over " +
                                           ms_text(Clock::now() - began) + " ms";
    return out;
}

}  // namespace fenec::server
