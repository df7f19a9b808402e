// test/server/node/node_fixture.h: the real fenec-node binary started on a loopback port below
// the ephemeral range (test/support/ports.h, the port read from its first line), a blocking HTTP
// client speaking to it through the project's own codec, and the fixture of node-http.md §14
// (tenant acme with `notes`). Network traffic goes to 127.0.0.1 only.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/runtime/http.h"
#include "test/support/child.h"
#include "test/support/ports.h"
#include "test/support/spawn.h"
#include "test/support/temp_dir.h"
#include "test/support/wait.h"

namespace fenec::test {

// A file's bytes, "" when it cannot be read (a log, a process's stderr).
inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Reply {
    int status = 0;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    bool closed = false;  // the node closed the connection after it

    std::optional<std::string> header(std::string_view name) const {
        for (const auto& [k, v] : headers) {
            if (http::iequals(k, name)) return v;
        }
        return std::nullopt;
    }
};

// One keep-alive connection to 127.0.0.1:port.
class Client {
public:
    explicit Client(uint16_t port, int timeout_ms = 10'000) : timeout_ms_(timeout_ms) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            ::close(fd_);
            fd_ = -1;
        }
        int one = 1;
        if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    ~Client() {
        if (fd_ >= 0) ::close(fd_);
    }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;
    bool ok() const { return fd_ >= 0; }

    bool send_raw(std::string_view bytes) {
        while (!bytes.empty()) {
            ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n <= 0) return false;
            bytes.remove_prefix(static_cast<size_t>(n));
        }
        return true;
    }

    // Reads one answer (Content-Length framed, or up to the close for one without a length).
    std::optional<Reply> read_reply() {
        for (;;) {
            http::ResponseHead head;
            size_t used = 0;
            http::ParseError err;
            http::ParseStatus st = http::parse_response_head(buf_, head, used, err);
            if (st == http::ParseStatus::error) return std::nullopt;
            if (st == http::ParseStatus::done) {
                Reply r;
                r.status = head.status;
                for (const auto& h : head.headers) r.headers.emplace_back(h.name, h.value);
                buf_.erase(0, used);
                if (r.status == 100) continue;
                if (r.status == 204 || r.status == 304) {
                    // No content by definition (RFC 9110 §6.4.1): nothing to read.
                } else if (head.content_length) {
                    while (buf_.size() < *head.content_length) {
                        if (!fill()) return std::nullopt;
                    }
                    r.body = buf_.substr(0, *head.content_length);
                    buf_.erase(0, *head.content_length);
                } else {
                    while (fill()) {
                    }
                    r.body = std::move(buf_);
                    buf_.clear();
                    r.closed = true;
                }
                if (!head.keep_alive) r.closed = true;
                return r;
            }
            if (!fill()) return std::nullopt;
        }
    }

    std::optional<Reply> request(std::string_view method, std::string_view target,
                                 std::string_view body = {},
                                 std::vector<std::pair<std::string, std::string>> headers = {}) {
        std::string req = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
        for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
        if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
            req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
        }
        req += "\r\n";
        req += body;
        if (!send_raw(req)) return std::nullopt;
        return read_reply();
    }

    // Bytes as they arrive, until `until` is in what was read or the timeout passes.
    std::string read_until(std::string_view until, int timeout_ms) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (buf_.find(until) == std::string::npos && std::chrono::steady_clock::now() < end) {
            const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  end - std::chrono::steady_clock::now())
                                                  .count());
            if (!fill(std::max(1, left))) break;
        }
        return buf_;
    }
    void drop(size_t n) { buf_.erase(0, n); }
    std::string& buffer() { return buf_; }

    // True once the node has closed its end (no byte arrives, EOF) within `timeout_ms`.
    bool closed_within(int timeout_ms) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) <= 0) return false;
        char c;
        return ::recv(fd_, &c, 1, MSG_PEEK) == 0;
    }

private:
    bool fill(int timeout_ms = -1) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, timeout_ms < 0 ? timeout_ms_ : timeout_ms) <= 0) return false;
        char tmp[65536];
        ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
        if (n <= 0) return false;
        buf_.append(tmp, static_cast<size_t>(n));
        return true;
    }

    int fd_ = -1;
    int timeout_ms_;
    std::string buf_;
};

// A fenec-node process on a loopback port below the ephemeral range (ports.h); killed (SIGKILL)
// or stopped (SIGTERM) by the test, or SIGKILLed at destruction.
class NodeProcess {
public:
    // `stderr_path`, when given, receives the node's stderr (truncated first); otherwise it goes
    // to the test's own stderr. `binary`: fenec-node-hooks unless a test asks for another.
    // `child_setup`, when given, runs in the child just before execv (e.g. `::umask(0)`): only
    // async-signal-safe calls, as the test process may have threads.
    NodeProcess(std::string data_dir, std::vector<std::string> flags, std::string stderr_path = {},
                std::string binary = FENEC_NODE_BIN, std::function<void()> child_setup = {})
        : data_dir_(std::move(data_dir)) {
        std::vector<std::string> args = {"--data-dir", data_dir_, "--workers", "1"};
        args.insert(args.end(), flags.begin(), flags.end());
        Spawned s = spawn_listening(binary, args, stderr_path, child_setup);
        pid_ = s.pid;
        out_ = s.out;
        port_ = s.port;
        first_line_ = std::move(s.first_line);
    }
    ~NodeProcess() { kill(SIGKILL); if (out_ >= 0) ::close(out_); }
    NodeProcess(const NodeProcess&) = delete;
    NodeProcess& operator=(const NodeProcess&) = delete;

    uint16_t port() const { return port_; }
    pid_t pid() const { return pid_; }
    const std::string& first_line() const { return first_line_; }

    // Sends `sig` (SIGSTOP, SIGCONT: a node that answers nothing and closes nothing, as a
    // machine cut off would); a SIGSTOP returns once the node has stopped (child.h).
    void signal(int sig) { ASSERT_TRUE(signal_child(pid_, sig)) << "signal " << sig; }
    // Sends `sig` and waits for the exit; the exit status (or -1 when it was already gone).
    int kill(int sig) {
        if (pid_ <= 0) return -1;
        ::kill(pid_, sig);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

private:
    std::string data_dir_;
    pid_t pid_ = -1;
    int out_ = -1;
    uint16_t port_ = 0;
    std::string first_line_;
};

// A sample's value in a Prometheus text body (its line, not its HELP or TYPE); 0 when absent.
inline uint64_t metric_value(const std::string& body, const std::string& sample) {
    const size_t at = body.find("\n" + sample + " ");
    return at == std::string::npos ? 0 : std::stoull(body.substr(at + sample.size() + 2));
}

inline std::vector<std::pair<std::string, std::string>> bearer(const std::string& token) {
    return {{"Authorization", "Bearer " + token}};
}

}  // namespace fenec::test
