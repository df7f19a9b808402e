// test/tools/shell_process.h: the `fenec` binary (FENEC_CLI_BIN) run as a test's child, two ways:
// with its standard input a pipe (a script) and its output read whole, or on a pseudo-terminal
// (forkpty) that a test types at as a person would, reading what the shell draws. Each runs in a
// folder and with a HOME the test gives, so no file lands anywhere else.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fenec::test::shell {

struct Ran {
    int status = -1;  // the exit status, or 128 + the signal
    std::string out, err;
};

// `fenec <args>` in `dir`, made whole before the fork: the child of a process with threads
// (a sanitizer's among them) must not allocate between fork and exec, since a lock held at the
// fork stays held in the child. The environment is this process's, with HOME set to `dir`,
// FENEC_TOKEN removed and `env` (then `extra`) set over it.
class Exec {
  public:
    Exec(const std::vector<std::string>& args, const std::string& dir,
         const std::vector<std::pair<std::string, std::string>>& env,
         const std::vector<std::pair<std::string, std::string>>& extra = {})
        : dir_(dir) {
        args_.push_back(FENEC_CLI_BIN);
        args_.insert(args_.end(), args.begin(), args.end());
        std::vector<std::pair<std::string, std::string>> set = {{"HOME", dir}};
        set.insert(set.end(), env.begin(), env.end());
        set.insert(set.end(), extra.begin(), extra.end());
        for (char** e = environ; *e != nullptr; ++e) {
            const std::string_view kv = *e;
            const std::string_view key = kv.substr(0, kv.find('='));
            bool replaced = key == "FENEC_TOKEN";
            for (const auto& [k, v] : set) replaced = replaced || key == k;
            if (!replaced) env_.emplace_back(kv);
        }
        for (const auto& [k, v] : set) env_.push_back(k + "=" + v);
        for (std::string& a : args_) argv_.push_back(a.data());
        argv_.push_back(nullptr);
        for (std::string& e : env_) envp_.push_back(e.data());
        envp_.push_back(nullptr);
    }
    // In the child: the folder, then the binary; nothing allocated.
    [[noreturn]] void run() const {
        if (::chdir(dir_.c_str()) != 0) ::_exit(126);
        ::execve(argv_[0], argv_.data(), envp_.data());
        ::_exit(127);
    }

  private:
    std::string dir_;
    std::vector<std::string> args_, env_;
    std::vector<char*> argv_, envp_;
};

inline int wait_status(pid_t pid) {
    int st = 0;
    if (::waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// `fenec <args>` in `dir`, `input` on its standard input (a pipe, closed after it).
inline Ran run_fenec(const std::vector<std::string>& args, const std::string& input,
                     const std::string& dir,
                     const std::vector<std::pair<std::string, std::string>>& env = {}) {
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC)) return {};
    const Exec exec(args, dir, env);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(in[0], 0);
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        exec.run();
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    ::signal(SIGPIPE, SIG_IGN);
    size_t written = 0;
    Ran r;
    pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
    int open = 3;
    if (input.empty()) {
        ::close(in[1]);
        fds[2].fd = -1;
        --open;
    }
    while (open > 0 && ::poll(fds, 3, 30'000) > 0) {
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !fds[i].revents) continue;
            char buf[4096];
            const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            } else {
                (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
            }
        }
        if (fds[2].fd >= 0 && fds[2].revents) {
            const ssize_t n = ::write(in[1], input.data() + written, input.size() - written);
            if (n > 0) written += static_cast<size_t>(n);
            if (n <= 0 || written == input.size()) {
                ::close(in[1]);
                fds[2].fd = -1;
                --open;
            }
        }
    }
    for (const pollfd& p : fds) {
        if (p.fd >= 0) ::close(p.fd);
    }
    r.status = wait_status(pid);
    return r;
}

// `fenec <args>` on a pseudo-terminal of 80 columns.
class PtyFenec {
  public:
    PtyFenec(const std::vector<std::string>& args, const std::string& dir,
             const std::vector<std::pair<std::string, std::string>>& env = {}) {
        winsize ws{};
        ws.ws_row = 24;
        ws.ws_col = 80;
        const Exec exec(args, dir, env, {{"TERM", "xterm"}});
        pid_ = ::forkpty(&master_, nullptr, nullptr, &ws);
        if (pid_ == 0) exec.run();
    }
    ~PtyFenec() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            wait_status(pid_);
        }
        if (master_ >= 0) ::close(master_);
    }
    PtyFenec(const PtyFenec&) = delete;
    PtyFenec& operator=(const PtyFenec&) = delete;

    bool started() const { return pid_ > 0 && master_ >= 0; }

    void type(const std::string& bytes) {
        size_t at = 0;
        while (at < bytes.size()) {
            const ssize_t n = ::write(master_, bytes.data() + at, bytes.size() - at);
            if (n <= 0) return;
            at += static_cast<size_t>(n);
        }
    }

    // Everything drawn so far, read until `needle` appears after `from` or 10 s pass.
    const std::string& read_until(const std::string& needle, size_t from = 0) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (drawn_.find(needle, from) == std::string::npos &&
               std::chrono::steady_clock::now() < end) {
            pollfd p{master_, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;
            char buf[4096];
            const ssize_t n = ::read(master_, buf, sizeof buf);
            if (n <= 0) break;  // the child is gone (EIO on Linux)
            drawn_.append(buf, static_cast<size_t>(n));
        }
        return drawn_;
    }
    const std::string& drawn() const { return drawn_; }

    // The exit status once the shell has ended (read to its end first, so it never blocks on a
    // full terminal).
    // A shell still running 10 s after its terminal went quiet is killed: -1. Its exit is
    // waited for on its pidfd, which turns readable as it exits, not in sleeps.
    int finish() {
        read_until("\x01never\x01");
        const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
        if (pidfd >= 0) {
            pollfd p{pidfd, POLLIN, 0};
            ::poll(&p, 1, 10'000);
            ::close(pidfd);
        }
        int st = 0;
        if (::waitpid(pid_, &st, WNOHANG) <= 0) return -1;  // still running: the destructor kills it
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }

  private:
    pid_t pid_ = -1;
    int master_ = -1;
    std::string drawn_;
};

// A fresh folder under the system's temp dir, removed afterwards.
class ShellDir {
  public:
    explicit ShellDir(const std::string& name) {
        std::string tmpl =
            (std::filesystem::temp_directory_path() / ("fenec-" + name + "-XXXXXX")).string();
        path_ = ::mkdtemp(tmpl.data());
    }
    ~ShellDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

}  // namespace fenec::test::shell
