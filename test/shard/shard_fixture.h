// test/shard/shard_fixture.h: the real fenec-shard binary on a loopback port below the ephemeral
// range (test/support/ports.h), beside real fenec-node processes (test/server/node/
// node_fixture.h's NodeProcess, Client, TempDir), and a FaultNode: a node stand-in in the test
// process that answers the admin calls and cuts each data request after reading it whole, to
// provoke the resend rules of seed 001 without a test hook. Network traffic goes to 127.0.0.1 only.
#pragma once

#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "test/server/node/node_fixture.h"
#include "test/support/loopback_server.h"

namespace fenec::test {

// A test hook's variable (shard/test_hooks.h) set while routers are forked, and put back as it
// was when it goes out of scope. An empty value sets nothing: the hook as it was.
struct HookEnv {
    std::string name;
    std::optional<std::string> before;
    HookEnv(std::string n, const std::string& value) : name(std::move(n)) {
        if (const char* was = std::getenv(name.c_str())) before = was;
        if (!value.empty()) ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~HookEnv() {
        if (before) {
            ::setenv(name.c_str(), before->c_str(), 1);
        } else {
            ::unsetenv(name.c_str());
        }
    }
    HookEnv(const HookEnv&) = delete;
    HookEnv& operator=(const HookEnv&) = delete;
};

// A fenec-shard process. Its first stdout line names the port (`listening=127.0.0.1:<port>`).
class RouterProcess {
public:
    RouterProcess(std::vector<std::string> flags, std::string stderr_path = {}) {
        std::vector<std::string> args = {"--workers", "1"};
        args.insert(args.end(), flags.begin(), flags.end());
        Spawned s = spawn_listening(FENEC_SHARD_BIN, args, stderr_path);
        pid_ = s.pid;
        out_ = s.out;
        port_ = s.port;
    }
    ~RouterProcess() {
        kill(SIGKILL);
        if (out_ >= 0) ::close(out_);
    }
    RouterProcess(const RouterProcess&) = delete;
    RouterProcess& operator=(const RouterProcess&) = delete;

    uint16_t port() const { return port_; }
    pid_t pid() const { return pid_; }  // -1 once it was waited for
    // Sends `sig` (SIGSTOP: the router frozen, as a machine lost; SIGCONT: back); a SIGSTOP
    // returns once the router has stopped (child.h).
    void signal(int sig) { ASSERT_TRUE(signal_child(pid_, sig)) << "signal " << sig; }
    int kill(int sig) {
        if (pid_ <= 0) return -1;
        ::kill(pid_, sig);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    // Waits for an exit the process makes on its own (a start-up refusal).
    // The router's exit status, waiting at most `ms`: a router still running then (a flag it
    // should have refused, taken) is killed and answers -2, so the test fails rather than hangs.
    int wait_exit(int ms = 10000) {
        if (pid_ <= 0) return -1;
        int status = 0;
        pid_t got = 0;
        if (!wait_until([&] { return (got = ::waitpid(pid_, &status, WNOHANG)) != 0; },
                        std::chrono::milliseconds(ms))) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
            pid_ = -1;
            return -2;
        }
        pid_ = -1;
        if (got < 0) return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    uint16_t port_ = 0;
};

// The moves counted over every series of fenec_router_moves_total (each there at 0 from start).
inline double moves_counted(const std::string& metrics) {
    double n = 0;
    const std::string family = "\nfenec_router_moves_total{";
    for (size_t at = metrics.find(family); at != std::string::npos;
         at = metrics.find(family, at + 1)) {
        const size_t end = metrics.find('\n', at + 1);
        const size_t space = metrics.rfind(' ', end);
        n += std::stod(metrics.substr(space + 1, end - space - 1));
    }
    return n;
}

// Answers GET /_admin/… with 200 `[]` and PUT /_admin/tenants/… with 201; every other request is
// read whole (head and Content-Length body) and its connection closed with no answer byte (or
// held open, with `hang`).
class FaultNode {
public:
  // `hang`: hold each data request read whole, answering nothing and closing nothing, until
  // the router gives up on it (its --upstream-timeout) or the FaultNode is destroyed.
  // `half_answer`: begin each data request's answer (its head and a byte of a longer body),
  // then close: an answer begun and cut short.
  explicit FaultNode(bool hang = false, bool half_answer = false)
      : hang_(hang),
        half_answer_(half_answer),
        server_([this](int c) { serve(c); }, LoopbackServer::Threads::one) {}
  uint16_t port() const { return server_.port(); }
  int cut() const { return cut_.load(); }  // data requests read whole and cut

private:
  void serve(int c) {
      std::string in;
      for (;;) {
          http::RequestHead head;
          size_t used = 0;
          http::ParseError err;
          http::ParseStatus st = http::parse_request_head(in, head, used, err);
          if (st == http::ParseStatus::error) return;
          if (st == http::ParseStatus::done) {
              const size_t need = used + head.content_length.value_or(0);
              while (in.size() < need) {
                  if (!fill(c, in)) return;
              }
              in.erase(0, need);
              if (head.path.starts_with("/_admin/")) {
                  const bool put = head.method == http::Method::put;
                  const std::string body =
                      put ? R"({"created":true,"lineage":"00000000000000aa"})" : "[]";
                  std::string out = std::string("HTTP/1.1 ") + (put ? "201 Created" : "200 OK") +
                                    "\r\nContent-Type: application/json\r\nContent-Length: " +
                                    std::to_string(body.size()) + "\r\n\r\n" + body;
                  ::send(c, out.data(), out.size(), MSG_NOSIGNAL);
                  continue;
              }
              ++cut_;
              if (half_answer_) {
                  const std::string half =
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json"
                      "\r\nContent-Length: 50\r\n\r\n{";
                  ::send(c, half.data(), half.size(), MSG_NOSIGNAL);
                  return;
              }
              while (hang_ && !server_.stopping()) {
                  pollfd p{c, POLLIN, 0};
                  if (::poll(&p, 1, 50) > 0) {
                      char b;
                      if (::recv(c, &b, 1, 0) <= 0) return;  // the router let go of it
                  }
              }
              return;  // read whole, answered nothing: the caller closes
          }
          if (!fill(c, in)) return;
      }
  }
    static bool fill(int c, std::string& in) {
        pollfd p{c, POLLIN, 0};
        if (::poll(&p, 1, 5'000) <= 0) return false;
        char buf[16384];
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) return false;
        in.append(buf, static_cast<size_t>(n));
        return true;
    }

    const bool hang_;
    const bool half_answer_;
    std::atomic<int> cut_{0};
    LoopbackServer server_;  // last: stopped before the rest goes
};

}  // namespace fenec::test
