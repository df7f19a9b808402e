// server/runtime/http_server.cc: the HTTP/1.1 server over the io_uring loops
// (server/runtime/http_server.h, node-http.md §2.1): binding and listening, accepting, placing
// connections on the loops, the sweep that times them, and shutdown. It owns sockets and timing;
// one connection's framing is server/runtime/connection.cc's, the answer's hand-back
// server/runtime/exchange.cc's; the Handler owns meaning.
//
// One listener, accepted on loop 0 with a multishot accept; each connection is handed to the
// loops round-robin (a Handoff task) and lives on that loop alone, so a Connection is touched by
// one thread only. A LoopState owns its loop's connections (an intrusive list) and frees each
// once its close has completed. Bounds: server/runtime/loop.h.
//
// Admission (http_server.h): connections per client address are counted under a mutex (taken
// on accept and on free, which run on different loops). Connections that have not sent a whole
// request yet are *unproven*: counted in one atomic and listed, oldest first, by the loop that
// owns them, which publishes the accept time of its oldest evictable one (still in its head) on
// each sweep. A newcomer that finds no slot is handed to the loop with the oldest such
// connection past head_timeout_ms/2: that loop evicts it and serves the newcomer, or, if none is
// evictable by then, answers the newcomer 503. A newcomer from the address holding the most
// unproven connections (counted per address beside the others) evicts no one: a slow client
// that reconnects as fast as it is cut cannot take back the slots it lost (may_evict_for).
#include "server/runtime/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/runtime/connection.h"
#include "server/runtime/loop.h"

namespace fenec::server {

namespace {

thread_local std::shared_ptr<Loop> this_thread_loop;  // serving_loop()

using internal::Connection;
using internal::ConnectionOwner;

class ServerImpl;

// One loop, its thread and the connections it owns.
struct LoopState final : ConnectionOwner {
    LoopState(ServerImpl& s, uint32_t i, std::shared_ptr<Loop> l);
    void add(Connection* c);
    void release(Connection* c) override;
    void settled(Connection* c) override;
    void adopt(int fd, uint64_t id, std::string peer, bool evict);
    bool evict_oldest(uint64_t now);
    void publish_evictable(uint64_t now);
    void arm_sweep();
    static void on_sweep(Completion& c);
    void begin_shutdown();
    void maybe_stop();

    ServerImpl& server;
    const uint32_t index;
    std::thread thread;
    Connection* first = nullptr;
    Connection* unproven_first = nullptr;  // oldest first
    Connection* unproven_last = nullptr;
    // Accept time of the oldest unproven connection still in its head (max: none), for loop 0.
    std::atomic<uint64_t> oldest_evictable_ms{std::numeric_limits<uint64_t>::max()};
    Completion sweep_c;
    bool stopping = false;
};

// A new connection on its way from loop 0 to its loop.
struct Handoff final : Task {
    LoopState* target = nullptr;
    int fd = -1;
    uint64_t id = 0;
    std::string peer;
    bool evict = false;  // admitted in place of an unproven connection the target evicts
    static void run_it(Task& task, bool cancelled);
};

// The client address of "ip:port" or "[v6]:port".
std::string peer_address(const std::string& peer) {
    size_t colon = peer.rfind(':');
    return colon == std::string::npos ? peer : peer.substr(0, colon);
}

class ServerImpl final : public HttpServer {
  public:
    ServerImpl(const ServerOptions& o, Handler& h) : options(o), handler(h) {}
    ~ServerImpl() override { shutdown(); }
    bool listen_on(std::string& error);
    uint16_t port() const override { return port_; }
    void start() override;
    void stop_accepting() override;
    uint32_t connections() const override { return connections_.load(std::memory_order_acquire); }
    uint32_t connections_unproven() const override {
        return unproven_.load(std::memory_order_acquire);
    }
    uint32_t busy_connections() override;
    void shutdown() override;

    // Loop 0.
    void arm_accept();
    static void on_accept(Completion& c);
    static void on_accept_retry(Completion& c);
    void accepted(int fd);
    void refuse(int fd, std::string peer, std::string_view reason);
    LoopState* eviction_target(uint64_t now) const;
    void stop_accepting_on_loop();
    void close_listener();
    bool listener_busy() const { return accept_c_.in_flight || accept_retry_c_.in_flight; }

    void loop_stopped();
    void connection_freed(const std::string& peer, bool counted);
    bool admit_peer(const std::string& address);
    void release_peer(const std::string& address);
    // An unproven connection from `peer` (ip:port) proved itself or left.
    void unproven_left(const std::string& peer);
    // Whether a newcomer from `address` may take an evictable slot: only while some other address
    // holds at least as many unproven connections as this one would with it. So the address that
    // holds the most connections yet to send a request (a slow client reconnecting as fast as it
    // is cut) cannot evict its way back in, and everyone else can.
    bool may_evict_for(const std::string& address);
    void eviction_ran() { evictions_.fetch_sub(1, std::memory_order_acq_rel); }

    const ServerOptions options;
    Handler& handler;
    std::vector<std::unique_ptr<LoopState>> loops;
    uint32_t sweep_ms = 1000;

  private:
    int listen_fd_ = -1;
    uint16_t port_ = 0;
    std::atomic<uint32_t> connections_{0};
    std::atomic<uint32_t> unproven_{0};
    std::atomic<uint32_t> evictions_{0};  // Handoffs with evict posted and not yet run
    std::mutex peers_mutex_;
    std::unordered_map<std::string, uint32_t> peers_;  // counted connections per client address
    std::unordered_map<std::string, uint32_t> unproven_peers_;  // of those, the unproven ones
    uint32_t refusals_ = 0;                                     // loop 0
    uint64_t next_id_ = 1;                                      // loop 0
    size_t next_loop_ = 0;                                      // loop 0
    bool accepting_ = true;                                     // loop 0 after start
    Completion accept_c_, accept_retry_c_;
    std::mutex control_;  // start / stop_accepting / shutdown
    bool started_ = false;
    bool stop_accepting_asked_ = false;
    bool shut_ = false;
    std::mutex stopped_mutex_;
    std::condition_variable stopped_cv_;
    uint32_t loops_running_ = 0;
};

// ---- LoopState ----

LoopState::LoopState(ServerImpl& s, uint32_t i, std::shared_ptr<Loop> l)
    : ConnectionOwner(s.handler, s.options, std::move(l)), server(s), index(i) {}

void LoopState::add(Connection* c) {
    c->next = first;
    if (first != nullptr) first->prev = c;
    first = c;
}

void LoopState::release(Connection* c) {
    if (c->prev != nullptr) c->prev->next = c->next;
    if (c->next != nullptr) c->next->prev = c->prev;
    if (first == c) first = c->next;
    if (c->unproven) settled(c);
    server.connection_freed(c->peer(), c->counted);
    delete c;
    maybe_stop();
}

void LoopState::settled(Connection* c) {
    assert(c->unproven);
    c->unproven = false;
    if (c->unproven_prev != nullptr) c->unproven_prev->unproven_next = c->unproven_next;
    if (c->unproven_next != nullptr) c->unproven_next->unproven_prev = c->unproven_prev;
    if (unproven_first == c) unproven_first = c->unproven_next;
    if (unproven_last == c) unproven_last = c->unproven_prev;
    c->unproven_prev = c->unproven_next = nullptr;
    server.unproven_left(c->peer());
}

// `evict`: the newcomer takes the slot of this loop's oldest evictable connection, or is
// answered 503 when there is none any more.
void LoopState::adopt(int fd, uint64_t id, std::string peer, bool evict) {
    if (stopping) {
        ::close(fd);
        server.unproven_left(peer);
        server.connection_freed(peer, true);
        return;
    }
    auto* c = new Connection(*this, fd, id, std::move(peer), true);
    add(c);
    c->unproven = true;  // counted in unproven_ by accepted()
    c->unproven_prev = unproven_last;
    if (unproven_last != nullptr) unproven_last->unproven_next = c;
    unproven_last = c;
    if (unproven_first == nullptr) unproven_first = c;
    if (evict && !evict_oldest(loop->now_ms())) {
        return c->start_refusal(handler.over_capacity("connections"));
    }
    c->start();
}

// The oldest unproven connection still in its head and older than head_timeout_ms/2 is evicted.
bool LoopState::evict_oldest(uint64_t now) {
    const uint64_t age_min = options.head_timeout_ms / 2;
    bool evicted = false;
    if (options.head_timeout_ms != 0) {
        for (Connection* c = unproven_first; c != nullptr; c = c->unproven_next) {
            if (now - c->accepted_ms() < age_min) break;  // the rest are younger
            if (!c->evictable()) continue;
            c->evict();
            evicted = true;
            break;
        }
    }
    publish_evictable(now);
    return evicted;
}

void LoopState::publish_evictable(uint64_t) {
    uint64_t oldest = std::numeric_limits<uint64_t>::max();
    for (Connection* c = unproven_first; c != nullptr; c = c->unproven_next) {
        if (c->evictable()) {
            oldest = c->accepted_ms();
            break;
        }
    }
    oldest_evictable_ms.store(oldest, std::memory_order_release);
}

void LoopState::arm_sweep() {
    sweep_c.callback = &LoopState::on_sweep;
    sweep_c.context = this;
    loop->timeout(sweep_c, server.sweep_ms);
}

void LoopState::on_sweep(Completion& c) {
    auto* self = static_cast<LoopState*>(c.context);
    if (self->stopping) return self->maybe_stop();
    uint64_t now = self->loop->now_ms();
    for (Connection* conn = self->first; conn != nullptr; conn = conn->next) conn->sweep(now);
    self->publish_evictable(now);
    self->arm_sweep();
}

void LoopState::begin_shutdown() {
    if (stopping) return;
    stopping = true;
    if (index == 0) server.stop_accepting_on_loop();
    loop->cancel(sweep_c);
    for (Connection* c = first; c != nullptr; c = c->next) c->cut();
    maybe_stop();
}

void LoopState::maybe_stop() {
    if (!stopping || first != nullptr || sweep_c.in_flight) return;
    if (index == 0 && server.listener_busy()) return;
    loop->stop();
}

void Handoff::run_it(Task& task, bool cancelled) {
    auto* self = static_cast<Handoff*>(&task);
    ServerImpl& server = self->target->server;
    if (cancelled) {
        ::close(self->fd);
        server.unproven_left(self->peer);
        server.connection_freed(self->peer, true);
    } else {
        self->target->adopt(self->fd, self->id, std::move(self->peer), self->evict);
    }
    if (self->evict) server.eviction_ran();
    delete self;
}

// ---- ServerImpl ----

std::string peer_name(int fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
    char host[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&addr);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
    }
    if (addr.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
    }
    return "";
}

// "host:port", "[v6]:port", ":port" (every address); port 0 lets the kernel pick.
bool split_listen(const std::string& listen, std::string& host, std::string& port,
                  std::string& error) {
    size_t colon = std::string::npos;
    if (!listen.empty() && listen[0] == '[') {
        size_t close = listen.find(']');
        if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
            error = "listen address '" + listen + "': expected [address]:port";
            return false;
        }
        host = listen.substr(1, close - 1);
        colon = close + 1;
    } else {
        colon = listen.rfind(':');
        if (colon == std::string::npos || listen.find(':') != colon) {
            error = "listen address '" + listen + "': expected host:port";
            return false;
        }
        host = listen.substr(0, colon);
    }
    port = listen.substr(colon + 1);
    bool digits =
        !port.empty() && port.size() <= 5 &&
        std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoul(port) > 65535) {
        error = "listen address '" + listen + "': bad port";
        return false;
    }
    return true;
}

bool ServerImpl::listen_on(std::string& error) {
    std::string host;
    std::string port;
    if (!split_listen(options.listen, host, port, error)) return false;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
    if (rc != 0) {
        error = "listen address '" + options.listen + "': " + ::gai_strerror(rc);
        return false;
    }
    error = "listen address '" + options.listen + "': no address";
    for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
        int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, listen_backlog) == 0) {
            listen_fd_ = fd;
            break;
        }
        error = "listen " + options.listen + ": " + std::strerror(errno);
        ::close(fd);
    }
    ::freeaddrinfo(found);
    if (listen_fd_ < 0) return false;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    error.clear();
    return true;
}

void ServerImpl::start() {
    std::lock_guard lock(control_);
    if (started_ || shut_) return;
    started_ = true;
    loops_running_ = static_cast<uint32_t>(loops.size());
    for (auto& state : loops) {
        LoopState* ls = state.get();
        ls->loop->post([this, ls] {
            ls->arm_sweep();
            if (ls->index == 0 && accepting_ && listen_fd_ >= 0) arm_accept();
        });
        ls->thread = std::thread([this, ls] {
            this_thread_loop = ls->loop;
            ls->loop->run();
            this_thread_loop.reset();
            loop_stopped();
        });
    }
}

void ServerImpl::arm_accept() {
    accept_c_.callback = &ServerImpl::on_accept;
    accept_c_.context = this;
    loops[0]->loop->accept_multishot(accept_c_, listen_fd_);
}

void ServerImpl::on_accept(Completion& c) {
    auto* self = static_cast<ServerImpl*>(c.context);
    if (c.result >= 0) self->accepted(c.result);
    if (c.more) return;
    // The multishot ended: stopped on purpose, or an error the kernel ends it with.
    if (!self->accepting_) {
        self->close_listener();
        return self->loops[0]->maybe_stop();
    }
    int err = -c.result;
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        self->accept_retry_c_.callback = &ServerImpl::on_accept_retry;
        self->accept_retry_c_.context = self;
        self->loops[0]->loop->timeout(self->accept_retry_c_, accept_retry_ms);
        return;
    }
    self->arm_accept();
}

void ServerImpl::on_accept_retry(Completion& c) {
    auto* self = static_cast<ServerImpl*>(c.context);
    if (!self->accepting_) {
        self->close_listener();
        return self->loops[0]->maybe_stop();
    }
    self->arm_accept();
}

void ServerImpl::accepted(int fd) {
    LoopState& first = *loops[0];
    if (first.stopping) {
        ::close(fd);
        return;
    }
    int one = 1;  // answers are written whole: Nagle would only delay them
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::string peer = peer_name(fd);
    if (!admit_peer(peer_address(peer))) return refuse(fd, std::move(peer), "per_address");
    // A newcomer is unproven: it may take a slot only outside the reserved share.
    const uint32_t max = options.connections_max;
    const uint32_t reserved = static_cast<uint32_t>(
        uint64_t{max} * std::min(options.connections_reserved_pct, connections_reserved_pct_max) /
        100);
    const bool full = max != 0 && (connections_.load(std::memory_order_acquire) >= max ||
                                   unproven_.load(std::memory_order_acquire) >= max - reserved);
    LoopState* target = loops[next_loop_++ % loops.size()].get();
    if (full) {
        target =
            may_evict_for(peer_address(peer)) ? eviction_target(first.loop->now_ms()) : nullptr;
        if (target == nullptr ||
            evictions_.load(std::memory_order_acquire) >= evictions_in_flight_max) {
            release_peer(peer_address(peer));
            return refuse(fd, std::move(peer), "connections");
        }
        evictions_.fetch_add(1, std::memory_order_acq_rel);
    }
    connections_.fetch_add(1, std::memory_order_acq_rel);
    unproven_.fetch_add(1, std::memory_order_acq_rel);
    {
        std::lock_guard lock(peers_mutex_);
        ++unproven_peers_[peer_address(peer)];
    }
    if (target == &first && !full) return target->adopt(fd, next_id_++, std::move(peer), false);
    auto* handoff = new Handoff();
    handoff->run = &Handoff::run_it;
    handoff->target = target;
    handoff->fd = fd;
    handoff->id = next_id_++;
    handoff->peer = std::move(peer);
    handoff->evict = full;
    if (!target->loop->post(*handoff)) Handoff::run_it(*handoff, true);
}

// Answered 503 on loop 0 and closed; past ServerOptions::refusals_max closed unanswered.
void ServerImpl::refuse(int fd, std::string peer, std::string_view reason) {
    LoopState& first = *loops[0];
    if (refusals_ >= options.refusals_max) {
        ::close(fd);
        return;
    }
    ++refusals_;
    auto* c = new Connection(first, fd, next_id_++, std::move(peer), false);
    first.add(c);
    c->start_refusal(handler.over_capacity(reason));
}

// The loop whose oldest evictable connection is oldest, if that one is past head_timeout_ms/2.
LoopState* ServerImpl::eviction_target(uint64_t now) const {
    if (options.head_timeout_ms == 0) return nullptr;
    LoopState* target = nullptr;
    uint64_t oldest = std::numeric_limits<uint64_t>::max();
    for (const auto& state : loops) {
        uint64_t t = state->oldest_evictable_ms.load(std::memory_order_acquire);
        if (t < oldest) {
            oldest = t;
            target = state.get();
        }
    }
    if (target == nullptr || now < oldest || now - oldest < options.head_timeout_ms / 2) {
        return nullptr;
    }
    return target;
}

bool ServerImpl::admit_peer(const std::string& address) {
    std::lock_guard lock(peers_mutex_);
    uint32_t& n = peers_[address];
    if (options.connections_per_peer_max != 0 && n >= options.connections_per_peer_max) {
        if (n == 0) peers_.erase(address);
        return false;
    }
    ++n;
    return true;
}

void ServerImpl::unproven_left(const std::string& peer) {
    unproven_.fetch_sub(1, std::memory_order_acq_rel);
    std::lock_guard lock(peers_mutex_);
    auto it = unproven_peers_.find(peer_address(peer));
    if (it != unproven_peers_.end() && --it->second == 0) unproven_peers_.erase(it);
}

bool ServerImpl::may_evict_for(const std::string& address) {
    std::lock_guard lock(peers_mutex_);
    auto self = unproven_peers_.find(address);
    const uint32_t with_newcomer = (self == unproven_peers_.end() ? 0 : self->second) + 1;
    for (const auto& [other, n] : unproven_peers_) {
        if (other != address && n >= with_newcomer) return true;
    }
    return false;
}

void ServerImpl::release_peer(const std::string& address) {
    std::lock_guard lock(peers_mutex_);
    auto it = peers_.find(address);
    if (it != peers_.end() && --it->second == 0) peers_.erase(it);
}

void ServerImpl::connection_freed(const std::string& peer, bool counted) {
    if (!counted) {
        --refusals_;  // refusals live on loop 0, as this call does then
        return;
    }
    connections_.fetch_sub(1, std::memory_order_acq_rel);
    release_peer(peer_address(peer));
}

void ServerImpl::stop_accepting() {
    std::lock_guard lock(control_);
    if (stop_accepting_asked_ || shut_) return;
    stop_accepting_asked_ = true;
    if (!started_) {
        close_listener();
        accepting_ = false;
        return;
    }
    loops[0]->loop->post([this] { stop_accepting_on_loop(); });
}

void ServerImpl::stop_accepting_on_loop() {
    accepting_ = false;
    if (accept_c_.in_flight) {
        loops[0]->loop->cancel(accept_c_);  // on_accept closes the listener
    } else if (accept_retry_c_.in_flight) {
        loops[0]->loop->cancel(accept_retry_c_);
    } else {
        close_listener();
    }
}

uint32_t ServerImpl::busy_connections() {
    {
        std::lock_guard lock(control_);
        if (!started_ || shut_) return connections();
    }
    struct Count {
        std::mutex mu;
        std::condition_variable cv;
        uint32_t busy = 0;
        size_t left = 0;
    };
    auto count = std::make_shared<Count>();  // outlives a wait given up
    count->left = loops.size();
    for (auto& state : loops) {
        LoopState* ls = state.get();
        const bool posted = ls->loop->post([ls, count] {
            uint32_t busy = 0;
            for (Connection* c = ls->first; c != nullptr; c = c->next) {
                if (c->counted && !c->idle()) ++busy;
            }
            std::lock_guard lock(count->mu);
            count->busy += busy;
            if (--count->left == 0) count->cv.notify_all();
        });
        if (!posted) return connections();
    }
    std::unique_lock lock(count->mu);
    if (!count->cv.wait_for(lock, std::chrono::seconds(1), [&] { return count->left == 0; })) {
        return connections();
    }
    return count->busy;
}

void ServerImpl::close_listener() {
    if (listen_fd_ < 0) return;
    ::close(listen_fd_);
    listen_fd_ = -1;
}

void ServerImpl::loop_stopped() {
    std::lock_guard lock(stopped_mutex_);
    --loops_running_;
    stopped_cv_.notify_all();
}

void ServerImpl::shutdown() {
    std::lock_guard lock(control_);
    if (shut_) return;
    shut_ = true;
    if (!started_) {
        close_listener();
        return;
    }
    for (auto& state : loops) {
        LoopState* ls = state.get();
        ls->loop->post([ls] { ls->begin_shutdown(); });
    }
    {
        std::unique_lock wait(stopped_mutex_);
        stopped_cv_.wait_for(wait, std::chrono::milliseconds(shutdown_wait_ms),
                             [this] { return loops_running_ == 0; });
    }
    for (auto& state : loops) state->loop->stop();  // those that did not finish in time
    for (auto& state : loops) {
        if (state->thread.joinable()) state->thread.join();
    }
    // The threads are gone: let the kernel release every buffer, then free what is left.
    for (auto& state : loops) {
        state->loop->cancel_all_and_drain();
        while (Connection* c = state->first) {
            state->first = c->next;
            c->abandon();
            if (c->unproven) unproven_left(c->peer());
            connection_freed(c->peer(), c->counted);
            delete c;
        }
    }
    close_listener();
}

}  // namespace

const std::shared_ptr<Loop>& serving_loop() { return this_thread_loop; }

std::unique_ptr<HttpServer> HttpServer::bind(const ServerOptions& options, Handler& handler,
                                             std::string& error) {
    auto server = std::make_unique<ServerImpl>(options, handler);
    if (!server->listen_on(error)) return nullptr;
    uint32_t loops = std::max<uint32_t>(1, options.loops);
    for (uint32_t i = 0; i < loops; ++i) {
        std::shared_ptr<Loop> loop = Loop::create(error, options.busy_poll_us);
        if (!loop) return nullptr;
        server->loops.push_back(std::make_unique<LoopState>(*server, i, std::move(loop)));
    }
    // The sweep finds idle, stalled and lingering connections; a tick of an eighth of the
    // shortest timeout keeps each within 1/8 of its bound.
    uint32_t shortest = linger_ms;
    for (uint32_t t : {options.idle_timeout_ms, options.send_timeout_ms, options.head_timeout_ms}) {
        if (t != 0) shortest = std::min(shortest, t);
    }
    server->sweep_ms = std::clamp<uint32_t>(shortest / 8, 5, 1000);
    return server;
}

}  // namespace fenec::server
