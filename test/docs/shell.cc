// test/docs/shell.cc: bash as a co-process. Each block is sourced from a file, then bash prints
// an end mark naming the block, so a block's stdout is exactly what came before its mark.
#include "test/docs/shell.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <vector>

namespace fenec::test::docs {

namespace {

std::string tail_of(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    const std::string all = s.str();
    return all.size() > 1500 ? "…" + all.substr(all.size() - 1500) : all;
}

}  // namespace

// A bash gone since it was last looked at would raise SIGPIPE, which ends the test process: the
// signal is held for this thread while writing, and one it raised is taken back before release.
bool Shell::write_commands(const std::string& cmd) {
    sigset_t pipe_only, before;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
    const bool ok = ::write(in_, cmd.data(), cmd.size()) == static_cast<ssize_t>(cmd.size());
    if (!ok) {
        const timespec zero{0, 0};
        ::sigtimedwait(&pipe_only, nullptr, &zero);
    }
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    return ok;
}

Shell::Shell(const std::string& cwd, const std::string& stderr_path) : stderr_path_(stderr_path) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return;
    if (::pipe2(out, O_CLOEXEC) != 0) {
        ::close(in[0]);
        ::close(in[1]);
        return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
        ::setpgid(0, 0);
        const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (err >= 0) ::dup2(err, 2);
        ::dup2(in[0], 0);
        ::dup2(out[1], 1);
        if (::chdir(cwd.c_str()) != 0) ::_exit(126);
        const char* argv[] = {"/bin/bash", "--noprofile", "--norc", "-e", nullptr};
        ::execv(argv[0], const_cast<char* const*>(argv));
        ::_exit(127);
    }
    if (pid_ > 0) ::setpgid(pid_, pid_);  // either side may run first
    if (pid_ > 0) pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    ::close(in[0]);
    ::close(out[1]);
    in_ = in[1];
    out_ = out[0];
}

Shell::~Shell() {
    if (in_ >= 0) ::close(in_);
    if (pid_ > 0) {
        // bash exits at the end of its input; a block left waiting (a job in the foreground)
        // is cut short with the rest of the group.
        pollfd p{pidfd_, POLLIN, 0};
        if (pidfd_ >= 0) ::poll(&p, 1, 2000);
        ::kill(-pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, WNOHANG);
    }
    if (pidfd_ >= 0) ::close(pidfd_);
    if (out_ >= 0) ::close(out_);
}

Shell::Result Shell::run(const std::string& path, int timeout_ms) {
    Result r;
    if (pid_ <= 0) {
        r.why = "the shell is gone (an earlier block failed)";
        return r;
    }
    const int n = ++blocks_;
    const std::string mark = "\n@@@fenec-doc-end " + std::to_string(n) + "\n";
    const std::string cmd = ". '" + path + "' < /dev/null\nprintf '\\n@@@fenec-doc-end %d\\n' " +
                            std::to_string(n) + "\n";
    if (!write_commands(cmd)) {
        r.why = "the shell took no input";
        return r;
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const size_t at = pending_.find(mark);
        if (at != std::string::npos) {
            r.ok = true;
            r.out = pending_.substr(0, at);
            pending_.erase(0, at + mark.size());
            return r;
        }
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            r.out = pending_;
            r.why = (WIFEXITED(status)
                         ? "the shell exited with status " + std::to_string(WEXITSTATUS(status))
                         : "the shell was killed by signal " + std::to_string(WTERMSIG(status))) +
                    "; its stderr: " + tail_of(stderr_path_);
            return r;
        }
        if (std::chrono::steady_clock::now() >= end) {
            r.out = pending_;
            r.why = "still running after " + std::to_string(timeout_ms / 1000) +
                    " s; its stderr: " + tail_of(stderr_path_);
            ::kill(-pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
            pid_ = -1;
            return r;
        }
        // Wakes on output, on bash's exit (its pidfd), or at the deadline. Once a block has
        // closed bash's stdout (EOF), only the exit or the deadline is waited for.
        const int left = static_cast<int>(
            std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(
                                     end - std::chrono::steady_clock::now())
                                     .count()));
        pollfd p[2] = {{pidfd_, POLLIN, 0}, {out_eof_ ? -1 : out_, POLLIN, 0}};
        if (::poll(p, 2, left) > 0 && (p[1].revents & (POLLIN | POLLHUP))) {
            char buf[16384];
            const ssize_t got = ::read(out_, buf, sizeof buf);
            if (got > 0) pending_.append(buf, static_cast<size_t>(got));
            if (got == 0) out_eof_ = true;
        }
    }
}

}  // namespace fenec::test::docs
