// bench/fanout_client.cc: the client of `make shard-bench ARGS=fanout` (bench/fanout_bench.sh).
// No dependencies: built by the script with the system compiler, outside CMake.
//
//   fanout_client <rounds> <warmup> <router port> <router token> <tenants file> <queries file>
//
// <tenants file>: one `tenant node_port admin_token` a line. <queries file>: one query a line,
// `name<TAB>router body<TAB>node body`. Each round, for each query in turn: (a) the router's
// POST /_shard/query with the router body, on one kept blocking connection; (b) the baseline: a
// client asking every tenant's node POST /_admin/tenants/<t>/query with the node body, 16 at once
// on one thread's event loop (non-blocking sockets and epoll; the router asks them from one
// io_uring loop), merging nothing. The baseline keeps 16 slots, each with a kept connection per
// node; a slot whose answer is whole takes the next tenant in the list. Both timed with
// CLOCK_MONOTONIC from the first byte sent to the last byte read; every request is built before the
// clock starts. The first <warmup> rounds are not counted. Prints one line per query and path:
// `<name> router|client p50_us=.. p95_us=.. min_us=.. n=..`. Exit 1 on a non-200 or a connection
// error, naming it.
//
// Why one event loop and not 16 threads: the router answers a query from one loop, so a baseline
// of 16 blocking threads pays a thread wake-up per answer that the router does not, and on a
// machine with fewer cores than threads it flatters the router.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr size_t client_concurrency = 16;  // the router's --fanout-concurrency default
// Events taken from one epoll_wait: one per slot is the most that can be ready at once.
constexpr int events_max = static_cast<int>(client_concurrency);

double now_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "fanout_client: %s\n", why.c_str());
    std::exit(1);
}

int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die(std::string("socket: ") + std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        die("connect to " + std::to_string(port) + ": " + std::strerror(errno));
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

// One HTTP/1.1 answer gathered from the bytes as they come, framed by its Content-Length (the
// node and the router answer these requests with one). Shared by the blocking and the
// event-loop paths so both read an answer the same way.
class Answer {
  public:
    void reset() {
        buf_.clear();
        head_end_ = std::string::npos;
        need_ = 0;
    }
    // Appends bytes read; true once the answer is whole. Bytes past it would be a protocol error
    // here (one request in flight per connection), so they are refused.
    bool feed(const char* p, size_t n) {
        buf_.append(p, n);
        if (head_end_ == std::string::npos) {
            head_end_ = buf_.find("\r\n\r\n");
            if (head_end_ == std::string::npos) return false;
            const size_t at = buf_.find("Content-Length: ");
            if (at == std::string::npos || at > head_end_) die("an answer without a length");
            need_ = head_end_ + 4 + std::strtoull(buf_.c_str() + at + 16, nullptr, 10);
        }
        if (buf_.size() > need_) die("bytes past the answer");
        return buf_.size() == need_;
    }
    // The body of a whole answer; exits naming it unless the status is 200.
    std::string_view ok_body() const {
        if (buf_.compare(0, 12, "HTTP/1.1 200") != 0) die("answered: " + buf_.substr(0, 300));
        return std::string_view(buf_).substr(head_end_ + 4);
    }

  private:
    std::string buf_;
    size_t head_end_ = std::string::npos;
    size_t need_ = 0;
};

// One request on a kept blocking connection; the answer read whole.
std::string_view exchange(int fd, const std::string& request, Answer& answer) {
    for (size_t sent = 0; sent < request.size();) {
        const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("send failed");
        sent += static_cast<size_t>(n);
    }
    answer.reset();
    char tmp[65536];
    for (;;) {
        const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("the connection ended");
        if (answer.feed(tmp, static_cast<size_t>(n))) return answer.ok_body();
    }
}

std::string post(const std::string& target, const std::string& token, const std::string& body) {
    return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
}

struct Tenant {
    std::string name;
    int port;
    std::string token;
};

struct Query {
    std::string name, router_body, node_body;
};

// The baseline: every tenant asked, client_concurrency at once, from one thread. Each slot owns a
// non-blocking connection per node port; a connection carries at most one request at a time
// (its slot's), so an answer's bytes always belong to the request the slot last sent.
class FanoutClient {
  public:
    explicit FanoutClient(const std::vector<Tenant>& tenants) : tenants_(tenants) {
        epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (epoll_fd_ < 0) die(std::string("epoll_create1: ") + std::strerror(errno));
        std::vector<int> ports;  // in port_index_ order
        for (const Tenant& t : tenants_) {
            if (port_index_.emplace(t.port, ports.size()).second) ports.push_back(t.port);
        }
        for (size_t s = 0; s < client_concurrency; ++s) {
            for (const int port : ports) {
                auto c = std::make_unique<Conn>();
                c->fd = connect_to(port);
                c->slot = s;
                set_nonblocking(c->fd);
                epoll_event ev{};
                ev.events = EPOLLIN;
                ev.data.ptr = c.get();
                if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
                    die(std::string("epoll_ctl: ") + std::strerror(errno));
                }
                conns_.push_back(std::move(c));
            }
        }
    }
    ~FanoutClient() {
        for (const auto& c : conns_) ::close(c->fd);
        ::close(epoll_fd_);
    }
    FanoutClient(const FanoutClient&) = delete;
    FanoutClient& operator=(const FanoutClient&) = delete;

    // Sends requests[k] to tenants[k]'s node for every k and returns once all are answered 200.
    void ask_all(const std::vector<std::string>& requests) {
        requests_ = &requests;
        next_ = 0;
        answered_ = 0;
        for (size_t s = 0; s < client_concurrency; ++s) start_next(s);
        epoll_event events[events_max];
        while (answered_ < tenants_.size()) {
            const int n = ::epoll_wait(epoll_fd_, events, events_max, -1);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) die(std::string("epoll_wait: ") + std::strerror(errno));
            for (int i = 0; i < n; ++i) {
                Conn& c = *static_cast<Conn*>(events[i].data.ptr);
                if (events[i].events & EPOLLOUT) send_some(c);
                if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_some(c);
            }
        }
    }

  private:
    struct Conn {
        int fd = -1;
        size_t slot = 0;
        const std::string* out = nullptr;  // the request in flight, or null
        size_t sent = 0;
        bool want_out = false;  // EPOLLOUT asked for: the last send stopped short
        Answer answer;
    };

    static void set_nonblocking(int fd) {
        const int flags = ::fcntl(fd, F_GETFL);
        if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) die("fcntl O_NONBLOCK");
    }

    Conn& conn_of(size_t slot, int port) {
        return *conns_[slot * port_index_.size() + port_index_.at(port)];
    }

    void start_next(size_t slot) {
        if (next_ >= tenants_.size()) return;
        const size_t k = next_++;
        Conn& c = conn_of(slot, tenants_[k].port);
        c.out = &(*requests_)[k];
        c.sent = 0;
        c.answer.reset();
        send_some(c);
    }

    void send_some(Conn& c) {
        while (c.out && c.sent < c.out->size()) {
            const ssize_t n =
                ::send(c.fd, c.out->data() + c.sent, c.out->size() - c.sent, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            if (n <= 0) die(std::string("send: ") + std::strerror(errno));
            c.sent += static_cast<size_t>(n);
        }
        const bool want_out = c.out && c.sent < c.out->size();
        if (want_out != c.want_out) {
            epoll_event ev{};
            ev.events = want_out ? EPOLLIN | EPOLLOUT : EPOLLIN;
            ev.data.ptr = &c;
            if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) != 0) die("epoll_ctl MOD");
            c.want_out = want_out;
        }
    }

    void read_some(Conn& c) {
        char tmp[65536];
        for (;;) {
            const ssize_t n = ::recv(c.fd, tmp, sizeof tmp, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (n <= 0) die("a node's connection ended");
            if (!c.out) die("bytes from a node with no request in flight");
            if (c.answer.feed(tmp, static_cast<size_t>(n))) {
                (void)c.answer.ok_body();  // exits unless 200
                c.out = nullptr;
                ++answered_;
                start_next(c.slot);
                return;
            }
        }
    }

    const std::vector<Tenant>& tenants_;
    std::map<int, size_t> port_index_;          // node port -> its connection's place within a slot
    std::vector<std::unique_ptr<Conn>> conns_;  // slot-major: slot * ports + port index
    int epoll_fd_ = -1;
    const std::vector<std::string>* requests_ = nullptr;
    size_t next_ = 0;
    size_t answered_ = 0;
};

void report(const std::string& name, const char* path, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) {
        return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
    };
    std::printf("%s %s p50_us=%.0f p95_us=%.0f min_us=%.0f n=%zu\n", name.c_str(), path, pct(0.5),
                pct(0.95), v.front(), v.size());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 7) {
        die("usage: fanout_client <rounds> <warmup> <router port> <token> <tenants> <queries>");
    }
    const int rounds = std::atoi(argv[1]);
    const int warmup = std::atoi(argv[2]);
    const int router_port = std::atoi(argv[3]);
    const std::string router_token = argv[4];
    std::vector<Tenant> tenants;
    {
        std::ifstream in(argv[5]);
        Tenant t;
        while (in >> t.name >> t.port >> t.token) tenants.push_back(t);
    }
    std::vector<Query> queries;
    {
        std::ifstream in(argv[6]);
        std::string line;
        while (std::getline(in, line)) {
            const size_t a = line.find('\t');
            const size_t b = line.find('\t', a + 1);
            if (a == std::string::npos || b == std::string::npos) continue;
            queries.push_back(
                {line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1)});
        }
    }
    if (tenants.empty() || queries.empty()) die("no tenants or no queries");
    if (rounds < 1 || warmup < 0) die("rounds must be at least 1, warmup at least 0");

    // Every request of both paths, built once: building them is not what is timed.
    std::vector<std::string> router_requests;
    std::vector<std::vector<std::string>> node_requests(queries.size());
    for (size_t q = 0; q < queries.size(); ++q) {
        router_requests.push_back(post("/_shard/query", router_token, queries[q].router_body));
        for (const Tenant& t : tenants) {
            node_requests[q].push_back(
                post("/_admin/tenants/" + t.name + "/query", t.token, queries[q].node_body));
        }
    }

    FanoutClient client(tenants);
    const int router_fd = connect_to(router_port);
    Answer answer;
    std::vector<std::vector<double>> router_us(queries.size()), client_us(queries.size());
    for (int round = 0; round < warmup + rounds; ++round) {
        for (size_t q = 0; q < queries.size(); ++q) {
            double t0 = now_us();
            const std::string_view body = exchange(router_fd, router_requests[q], answer);
            const double router = now_us() - t0;
            if (round == 0 && body.find("\"failures\":[]") == std::string_view::npos) {
                die(queries[q].name + ": " + std::string(body.substr(0, 400)));
            }
            t0 = now_us();
            client.ask_all(node_requests[q]);
            const double direct = now_us() - t0;
            if (round >= warmup) {
                router_us[q].push_back(router);
                client_us[q].push_back(direct);
            }
        }
    }
    ::close(router_fd);
    for (size_t q = 0; q < queries.size(); ++q) {
        report(queries[q].name, "router", router_us[q]);
        report(queries[q].name, "client", client_us[q]);
    }
    return 0;
}
