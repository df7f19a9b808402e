// bench/fanout_client.cc: the client of `make shard-bench ARGS=fanout` (bench/fanout_bench.sh).
// No dependencies: built by the script with the system compiler, outside CMake.
//
//   fanout_client <rounds> <warmup> <router port> <router token> <tenants file> <queries file>
//
// <tenants file>: one `tenant node_port admin_token` a line. <queries file>: one query a line,
// `name<TAB>router body<TAB>node body`. Each round, for each query in turn: (a) the router's
// POST /_shard/query with the router body, on one kept connection; (b) a client asking every
// tenant's node POST /_admin/tenants/<t>/query with the node body, 16 at once (16 threads, each
// with a kept connection per node, taking the next tenant as it finishes one), merging nothing.
// Both timed with CLOCK_MONOTONIC from the first byte sent to the last byte read. The first
// <warmup> rounds are not counted. Prints one line per query and path:
// `<name> router|client p50_us=.. p95_us=.. min_us=.. n=..`. Exit 1 on a non-200, naming it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int client_concurrency = 16;  // the router's --fanout-concurrency default

double now_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "fanout_client: %s\n", why.c_str());
    std::exit(1);
}

int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
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

// One request on a kept connection; the answer read whole by its Content-Length.
std::string exchange(int fd, const std::string& request, std::string& buf) {
    for (size_t sent = 0; sent < request.size();) {
        const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) die("send failed");
        sent += static_cast<size_t>(n);
    }
    buf.clear();
    size_t head_end = std::string::npos;
    size_t need = 0;
    char tmp[65536];
    for (;;) {
        if (head_end == std::string::npos) {
            head_end = buf.find("\r\n\r\n");
            if (head_end != std::string::npos) {
                const size_t at = buf.find("Content-Length: ");
                if (at == std::string::npos || at > head_end) die("an answer without a length");
                need = head_end + 4 + std::strtoull(buf.c_str() + at + 16, nullptr, 10);
            }
        }
        if (head_end != std::string::npos && buf.size() >= need) break;
        const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) die("the connection ended");
        buf.append(tmp, static_cast<size_t>(n));
    }
    if (buf.compare(0, 12, "HTTP/1.1 200") != 0) die("answered: " + buf.substr(0, 300));
    return buf.substr(head_end + 4, need - head_end - 4);
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

void report(const std::string& name, const char* path, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))]; };
    std::printf("%s %s p50_us=%.0f p95_us=%.0f min_us=%.0f n=%zu\n", name.c_str(), path,
                pct(0.5), pct(0.95), v.front(), v.size());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 7) die("usage: fanout_client <rounds> <warmup> <router port> <token> <tenants> <queries>");
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
            queries.push_back({line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1)});
        }
    }
    if (tenants.empty() || queries.empty()) die("no tenants or no queries");

    // The client: 16 threads, a kept connection per node each.
    std::atomic<size_t> next{0};
    const std::string* node_body = nullptr;
    std::barrier start(client_concurrency + 1), done(client_concurrency + 1);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < client_concurrency; ++i) {
        threads.emplace_back([&] {
            std::map<int, int> fds;
            for (const Tenant& t : tenants) {
                if (!fds.contains(t.port)) fds[t.port] = connect_to(t.port);
            }
            std::string buf;
            for (;;) {
                start.arrive_and_wait();
                if (stop) return;
                for (size_t k; (k = next.fetch_add(1)) < tenants.size();) {
                    const Tenant& t = tenants[k];
                    exchange(fds[t.port], post("/_admin/tenants/" + t.name + "/query", t.token, *node_body), buf);
                }
                done.arrive_and_wait();
            }
        });
    }
    const int router_fd = connect_to(router_port);
    std::string buf;
    std::vector<std::vector<double>> router_us(queries.size()), client_us(queries.size());
    for (int round = 0; round < warmup + rounds; ++round) {
        for (size_t q = 0; q < queries.size(); ++q) {
            const std::string req = post("/_shard/query", router_token, queries[q].router_body);
            double t0 = now_us();
            const std::string answer = exchange(router_fd, req, buf);
            const double router = now_us() - t0;
            if (round == 0 && answer.find("\"failures\":[]") == std::string::npos) {
                die(queries[q].name + ": " + answer.substr(0, 400));
            }
            node_body = &queries[q].node_body;
            next = 0;
            t0 = now_us();
            start.arrive_and_wait();
            done.arrive_and_wait();
            const double client = now_us() - t0;
            if (round >= warmup) {
                router_us[q].push_back(router);
                client_us[q].push_back(client);
            }
        }
    }
    stop = true;
    start.arrive_and_wait();
    for (auto& t : threads) t.join();
    for (size_t q = 0; q < queries.size(); ++q) {
        report(queries[q].name, "router", router_us[q]);
        report(queries[q].name, "client", client_us[q]);
    }
    return 0;
}
