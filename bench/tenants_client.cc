// bench/tenants_client.cc: the client of `make node-bench ARGS=tenants` (bench/node_bench_tenants.sh).
// No dependencies: built by the script with the system compiler, outside CMake (bench/CMakeLists.txt
// globs *_bench.cc for Google Benchmark).
//
//   tenants_client create <port> <tenants> <connections> <schema file> <write file>
//       creates tenants t0 .. t<tenants-1> on 127.0.0.1:<port> and writes each once:
//       `PUT /_admin/tenants/t<i>` with the schema file as its body, then `POST /t/t<i>/query`
//       with the write file as its body. <connections> kept connections (TCP_NODELAY), a blocking
//       thread each, tenant i on connection i mod <connections>.
//       Prints `create <status>=<count>...` and `write <status>=<count>...` (status 0: the
//       connection failed or closed; it is opened again) and `seconds=<s>`.
//   tenants_client read <port> <tenants> <seed> <path with %s> [<left out>]
//       every tenant read once in a random order (a permutation from <seed>), on one kept
//       connection: `GET <path>` with %s the tenant's name, timed with CLOCK_MONOTONIC from the
//       send to the last byte of the answer (by Content-Length), and at once again: the first
//       read of a tenant closed before (the script's) is `cold`, the second finds it open,
//       `warm`, the baseline in the same run. With <left out> k: the order of <seed> without its
//       last k tenants (those a read in that order may have left open), shuffled again with
//       <seed> + 1: read after a run with <seed>, each still a cold read, in the same process.
//       Prints `<cold|warm> p50_us=.. p99_us=.. max_us=.. n=..`, `status <status>=<count>...`
//       over both, and `seconds=<s>`.
// Exit 1 on bad arguments or if no connection could be made at all; answers other than 2xx are
// counted, not fatal (the bench reports them).
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
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

// An answer head larger than this is an error here (the node's are a few hundred bytes).
constexpr size_t head_bytes_max = 16 * 1024;
// Connection attempts in a row before a thread gives up (the node is gone).
constexpr int connect_tries_max = 50;

double now_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
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

size_t content_length(const std::string& head) {
    std::string lower(head);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const size_t at = lower.find("\r\ncontent-length:");
    if (at == std::string::npos) return 0;
    return std::strtoull(lower.c_str() + at + 17, nullptr, 10);
}

// One kept connection; reopened after a failure.
struct Connection {
    int port = 0;
    int fd = -1;
    std::string in;
    char buf[16384];

    ~Connection() {
        if (fd >= 0) ::close(fd);
    }
    void drop() {
        if (fd >= 0) ::close(fd);
        fd = -1;
        in.clear();
    }
    // One request and its whole answer: the status, or 0 when the connection failed (dropped).
    int exchange(const std::string& request) {
        for (int tries = 0; fd < 0; tries++) {
            if (tries == connect_tries_max) return -1;
            fd = connect_to(port);
        }
        if (!send_all(fd, request.data(), request.size())) {
            drop();
            return 0;
        }
        size_t end;
        while ((end = in.find("\r\n\r\n")) == std::string::npos) {
            if (in.size() > head_bytes_max || !receive()) {
                drop();
                return 0;
            }
        }
        const std::string head = in.substr(0, end + 2);
        const size_t need = end + 4 + content_length(head);
        while (in.size() < need) {
            if (!receive()) {
                drop();
                return 0;
            }
        }
        in.erase(0, need);
        const int status = head.size() > 12 ? std::atoi(head.c_str() + 9) : 0;
        if (head.find("\r\nConnection: close") != std::string::npos) drop();
        return status;
    }
    bool receive() {
        for (;;) {
            const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return false;
            in.append(buf, static_cast<size_t>(r));
            return true;
        }
    }
};

std::string request(const char* method, const std::string& path, const std::string& body) {
    std::string r = std::string(method) + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!body.empty()) {
        r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\n";
    }
    return r + "\r\n" + body;
}

std::string slurp(const char* path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

void print_statuses(const char* what, const std::map<int, long>& counts) {
    std::printf("%s", what);
    for (const auto& [status, n] : counts) std::printf(" %d=%ld", status, n);
    std::printf("\n");
}

int create(int port, long tenants, int connections, const char* schema_file,
           const char* write_file) {
    const std::string schema = slurp(schema_file);
    const std::string write = slurp(write_file);
    std::vector<std::map<int, long>> created(static_cast<size_t>(connections));
    std::vector<std::map<int, long>> written(static_cast<size_t>(connections));
    std::vector<std::thread> threads;
    const double start = now_us();
    for (int c = 0; c < connections; c++) {
        threads.emplace_back([&, c] {
            Connection conn;
            conn.port = port;
            for (long i = c; i < tenants; i += connections) {
                const std::string name = "t" + std::to_string(i);
                const int s1 = conn.exchange(request("PUT", "/_admin/tenants/" + name, schema));
                if (s1 < 0) return;
                created[static_cast<size_t>(c)][s1]++;
                const int s2 = conn.exchange(request("POST", "/t/" + name + "/query", write));
                if (s2 < 0) return;
                written[static_cast<size_t>(c)][s2]++;
            }
        });
    }
    for (auto& t : threads) t.join();
    std::map<int, long> all_created, all_written;
    for (int c = 0; c < connections; c++) {
        for (const auto& [s, n] : created[static_cast<size_t>(c)]) all_created[s] += n;
        for (const auto& [s, n] : written[static_cast<size_t>(c)]) all_written[s] += n;
    }
    print_statuses("create", all_created);
    print_statuses("write", all_written);
    std::printf("seconds=%.1f\n", (now_us() - start) / 1e6);
    long answered = 0;
    for (const auto& [s, n] : all_created) answered += n;
    return answered == 0 ? 1 : 0;
}

void print_latencies(const char* what, std::vector<double>& us) {
    if (us.empty()) {
        std::printf("%s n=0\n", what);
        return;
    }
    std::sort(us.begin(), us.end());
    const auto at = [&](double q) {
        return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))];
    };
    std::printf("%s p50_us=%.0f p99_us=%.0f max_us=%.0f n=%zu\n", what, at(0.50), at(0.99),
                us.back(), us.size());
}

int read(int port, long tenants, unsigned seed, const std::string& path, long left_out) {
    std::vector<long> order(static_cast<size_t>(tenants));
    for (long i = 0; i < tenants; i++) order[static_cast<size_t>(i)] = i;
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    if (left_out > 0) {
        order.resize(static_cast<size_t>(std::max(0L, tenants - left_out)));
        std::mt19937_64 again(seed + 1);
        std::shuffle(order.begin(), order.end(), again);
    }
    const size_t at = path.find("%s");
    if (at == std::string::npos) {
        std::fprintf(stderr, "tenants_client: the path has no %%s\n");
        return 2;
    }
    Connection conn;
    conn.port = port;
    std::vector<double> cold, warm;
    cold.reserve(order.size());
    warm.reserve(order.size());
    std::map<int, long> statuses;
    const double start = now_us();
    for (const long i : order) {
        std::string p = path;
        p.replace(at, 2, "t" + std::to_string(i));
        const std::string r = request("GET", p, "");
        for (std::vector<double>* into : {&cold, &warm}) {
            const double t0 = now_us();
            const int s = conn.exchange(r);
            const double t1 = now_us();
            if (s < 0) return 1;
            statuses[s]++;
            if (s == 200) into->push_back(t1 - t0);
        }
    }
    const double seconds = (now_us() - start) / 1e6;
    print_latencies("cold", cold);
    print_latencies("warm", warm);
    print_statuses("status", statuses);
    std::printf("seconds=%.1f\n", seconds);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "create" && argc == 7) {
        return create(std::atoi(argv[2]), std::atol(argv[3]), std::max(1, std::atoi(argv[4])),
                      argv[5], argv[6]);
    }
    if (mode == "read" && (argc == 6 || argc == 7)) {
        return read(std::atoi(argv[2]), std::atol(argv[3]),
                    static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10)), argv[5],
                    argc == 7 ? std::atol(argv[6]) : 0);
    }
    std::fprintf(stderr,
                 "usage: tenants_client create <port> <tenants> <connections> <schema file> "
                 "<write file>\n"
                 "       tenants_client read <port> <tenants> <seed> <path with %%s> [<left out>]\n");
    return 2;
}
