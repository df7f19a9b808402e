// bench/latency_client.cc: the precise client of `make shard-bench` (bench/shard_bench.sh), and
// the trivial loopback server it is compared with. No dependencies: built by the script with the
// system compiler, outside CMake (bench/CMakeLists.txt globs *_bench.cc for Google Benchmark).
//
//   latency_client echo <port-file> <body bytes>
//       listens on 127.0.0.1:0, writes the port to <port-file>, and on each connection answers
//       every request head (bytes up to a blank line) at once with a fixed
//       `HTTP/1.1 200 OK` of <body bytes>: a loopback round trip with no work behind it.
//   latency_client hop <port-file> <upstream port>
//       listens on 127.0.0.1:0 and passes each request head, byte for byte, to 127.0.0.1:<upstream
//       port> over a kept connection of its own (one per client connection, a blocking thread
//       each), and the answer back whole by its Content-Length: one more loopback hop with no
//       work behind it, the floor of what any proxy that sleeps between requests adds.
//   latency_client measure [--rotate] <requests> <warmup> <path with %d> <ids> <name=port>...
//       one kept TCP connection per target, each with TCP_NODELAY. Requests go round-robin over
//       the targets (one to each in turn), so a change in the machine's load touches all alike;
//       the first <warmup> rounds are not counted. In the order given unless --rotate: then round
//       r starts at target r mod n, so each target is asked in each place of a round equally
//       often (a target asked right after another is not timed alike on a loaded machine).
//       Each request is `GET <path> HTTP/1.1` with %d replaced by 1 + (round % ids), timed with
//       clock_gettime(CLOCK_MONOTONIC) around one blocking send and the blocking recvs that read
//       its answer whole (by Content-Length).
//       Prints one line per target: `<name> p50_us=.. p95_us=.. p99_us=.. min_us=.. n=..`.
//       Exit 1 on any non-200 answer or connection error, naming it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

// An answer head larger than this is an error here (the node's are a few hundred bytes).
constexpr size_t head_bytes_max = 16 * 1024;

double now_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool send_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

// ---- echo ----

void serve_echo_connection(int fd, std::string answer) {
    set_nodelay(fd);
    std::string in;
    char buf[16384];
    for (;;) {
        const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        in.append(buf, static_cast<size_t>(r));
        size_t end;
        while ((end = in.find("\r\n\r\n")) != std::string::npos) {
            in.erase(0, end + 4);
            if (!send_all(fd, answer.data(), answer.size())) {
                ::close(fd);
                return;
            }
        }
    }
    ::close(fd);
}

// ---- hop ----

size_t content_length(const std::string& head);

// Reads from `fd` into `in` until it holds `\r\n\r\n`; its end (past the blank line), or 0.
size_t read_head(int fd, std::string& in, char* buf, size_t buf_bytes) {
    for (;;) {
        const size_t end = in.find("\r\n\r\n");
        if (end != std::string::npos) return end + 4;
        if (in.size() > head_bytes_max) return 0;
        const ssize_t r = ::recv(fd, buf, buf_bytes, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        in.append(buf, static_cast<size_t>(r));
    }
}

void serve_hop_connection(int fd, int upstream_port) {
    set_nodelay(fd);
    const int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(upstream_port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (up < 0 || ::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        if (up >= 0) ::close(up);
        return;
    }
    set_nodelay(up);
    std::string in;
    std::string answer;
    std::vector<char> buf(64 * 1024);
    for (;;) {
        const size_t request_end = read_head(fd, in, buf.data(), buf.size());
        if (request_end == 0 || !send_all(up, in.data(), request_end)) break;  // GETs: no body
        in.erase(0, request_end);
        const size_t head_end = read_head(up, answer, buf.data(), buf.size());
        if (head_end == 0) break;
        const size_t need = head_end + content_length(answer.substr(0, head_end - 2));
        while (answer.size() < need) {
            const ssize_t r = ::recv(up, buf.data(), buf.size(), 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            answer.append(buf.data(), static_cast<size_t>(r));
        }
        if (answer.size() < need || !send_all(fd, answer.data(), need)) break;
        answer.erase(0, need);
    }
    ::close(up);
    ::close(fd);
}

// ---- listening (echo, hop) ----

// Listens on 127.0.0.1:0, writes the port to `port_file`, and serves each connection on a
// thread of its own with `serve(fd)`.
template <class Serve>
int listen_and_serve(const char* port_file, const char* what, Serve serve) {
    const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 16) != 0) {
        std::fprintf(stderr, "%s: bind: %s\n", what, std::strerror(errno));
        return 1;
    }
    socklen_t len = sizeof a;
    getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
    const std::string tmp = std::string(port_file) + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "%u\n", ntohs(a.sin_port));
    std::fclose(f);
    std::rename(tmp.c_str(), port_file);
    for (;;) {
        const int fd = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        std::thread(serve, fd).detach();
    }
}

int echo(const char* port_file, size_t body_bytes) {
    const std::string answer =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(body_bytes) + "\r\n\r\n" + std::string(body_bytes, 'x');
    return listen_and_serve(port_file, "echo",
                            [answer](int fd) { serve_echo_connection(fd, answer); });
}

int hop(const char* port_file, int upstream_port) {
    return listen_and_serve(port_file, "hop",
                            [upstream_port](int fd) { serve_hop_connection(fd, upstream_port); });
}

// ---- measure ----

struct Target {
    std::string name;
    int port = 0;
    int fd = -1;
    std::string in;  // bytes read past the last answer (none expected)
    std::vector<double> us;
};

bool connect_to(Target& t) {
    t.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(t.port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(t.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        std::fprintf(stderr, "latency_client: %s: connect to port %d: %s\n", t.name.c_str(),
                     t.port, std::strerror(errno));
        return false;
    }
    set_nodelay(t.fd);
    return true;
}

size_t content_length(const std::string& head) {
    // Case-insensitive search for the Content-Length field.
    std::string lower(head);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t at = lower.find("\r\ncontent-length:");
    if (at == std::string::npos) return 0;
    return std::strtoul(head.c_str() + at + 17, nullptr, 10);
}

// One request on `t`, answered whole; "" or why not.
std::string exchange(Target& t, const std::string& request, char* buf, size_t buf_bytes) {
    if (!send_all(t.fd, request.data(), request.size())) return "send failed";
    std::string& in = t.in;
    size_t head_end = std::string::npos;
    size_t need = 0;
    for (;;) {
        if (head_end == std::string::npos) {
            head_end = in.find("\r\n\r\n");
            if (head_end != std::string::npos) {
                if (in.compare(0, 12, "HTTP/1.1 200") != 0) {
                    return "answered " + in.substr(0, std::min(in.size(), size_t{300}));
                }
                need = head_end + 4 + content_length(in.substr(0, head_end + 2));
            } else if (in.size() > head_bytes_max) {
                return "an answer head over 16 KiB";
            }
        }
        if (head_end != std::string::npos && in.size() >= need) break;
        const ssize_t r = ::recv(t.fd, buf, buf_bytes, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return "the connection ended";
        in.append(buf, static_cast<size_t>(r));
    }
    in.erase(0, need);
    return "";
}

double percentile(std::vector<double>& v, double p) {
    std::sort(v.begin(), v.end());
    size_t rank = static_cast<size_t>(p * static_cast<double>(v.size()));
    if (static_cast<double>(rank) < p * static_cast<double>(v.size())) ++rank;
    rank = std::max<size_t>(rank, 1);
    return v[std::min(rank, v.size()) - 1];
}

int measure(int requests, int warmup, const std::string& path, int ids, bool rotate, int argc,
            char** argv) {
    std::vector<Target> targets;
    for (int i = 0; i < argc; ++i) {
        const char* eq = std::strchr(argv[i], '=');
        if (!eq) {
            std::fprintf(stderr, "latency_client: `%s` is not name=port\n", argv[i]);
            return 2;
        }
        Target t;
        t.name.assign(argv[i], static_cast<size_t>(eq - argv[i]));
        t.port = std::atoi(eq + 1);
        if (!connect_to(t)) return 1;
        t.us.reserve(static_cast<size_t>(requests));
        targets.push_back(std::move(t));
    }
    std::vector<char> buf(64 * 1024);
    char target[512];
    for (int round = 0; round < warmup + requests; ++round) {
        std::snprintf(target, sizeof target, path.c_str(), 1 + round % ids);
        const std::string request = std::string("GET ") + target +
                                    " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n";
        for (size_t k = 0; k < targets.size(); ++k) {
            const size_t first = rotate ? static_cast<size_t>(round) % targets.size() : 0;
            Target& t = targets[(first + k) % targets.size()];
            const double start = now_us();
            const std::string why = exchange(t, request, buf.data(), buf.size());
            const double took = now_us() - start;
            if (!why.empty()) {
                std::fprintf(stderr, "latency_client: %s: GET %s: %s\n", t.name.c_str(), target,
                             why.c_str());
                return 1;
            }
            if (round >= warmup) t.us.push_back(took);
        }
    }
    for (Target& t : targets) {
        const double p50 = percentile(t.us, 0.50);
        const double p95 = percentile(t.us, 0.95);
        const double p99 = percentile(t.us, 0.99);
        std::printf("%s p50_us=%.1f p95_us=%.1f p99_us=%.1f min_us=%.1f n=%zu\n", t.name.c_str(),
                    p50, p95, p99, t.us.front(), t.us.size());
        ::close(t.fd);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 4 && std::strcmp(argv[1], "echo") == 0) {
        return echo(argv[2], std::strtoul(argv[3], nullptr, 10));
    }
    if (argc >= 4 && std::strcmp(argv[1], "hop") == 0) {
        return hop(argv[2], std::atoi(argv[3]));
    }
    if (argc >= 2 && std::strcmp(argv[1], "measure") == 0) {
        const bool rotate = argc >= 3 && std::strcmp(argv[2], "--rotate") == 0;
        const int at = rotate ? 3 : 2;  // <requests>
        if (argc >= at + 5) {
            return measure(std::atoi(argv[at]), std::atoi(argv[at + 1]), argv[at + 2],
                           std::atoi(argv[at + 3]), rotate, argc - at - 4, argv + at + 4);
        }
    }
    std::fprintf(stderr,
                 "usage: latency_client echo <port-file> <body bytes>\n"
                 "       latency_client hop <port-file> <upstream port>\n"
                 "       latency_client measure [--rotate] <requests> <warmup> <path with %%d> "
                 "<ids> <name=port>...\n");
    return 2;
}
