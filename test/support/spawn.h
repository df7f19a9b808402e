// test/support/spawn.h: a server a test starts (a fenec-node, a fenec-shard) on a loopback port
// below the ephemeral range (ports.h), its first stdout line read for the port it listens on.
//
// A port drawn free can be taken by another suite's process before this one binds it (ports.h:
// a chance of a few in 20,000, seen in CI as a node's "Address already in use"). A start on a
// drawn port that failed with that port held by someone else is started again on a new draw, so
// a suite does not fail on another's luck. A port the test fixed (a later --listen in the flags,
// a restart where the others know it) is never changed: its start fails as the server says, and so
// does the last of three attempts, or a start whose flags change what it opens before it binds
// (`--promote`).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "test/support/ports.h"

namespace fenec::test {

struct Spawned {
    pid_t pid = -1;
    int out = -1;            // the read end of its stdout, kept open for its life
    std::string first_line;  // "" when it said nothing within 10 s
    uint16_t port = 0;       // 0 when the first line named none (the start failed)
};

// `binary --listen 127.0.0.1:<drawn> <args...>`, its stderr to `stderr_path` (truncated) when
// given; `child_setup` runs in the child just before execv (async-signal-safe calls only).
// `draw`: where each attempt's port comes from (a test of the retry gives its own).
inline Spawned spawn_listening(const std::string& binary, const std::vector<std::string>& args,
                               const std::string& stderr_path = {},
                               const std::function<void()>& child_setup = {},
                               const std::function<uint16_t()>& draw = listen_port) {
    bool fixed = false;  // a --listen of the caller's own: the last one is the one taken
    for (size_t i = 0; i + 1 < args.size(); ++i) fixed = fixed || args[i] == "--listen";
    // A router's --promote forks its directory into a new term before it binds: made again, it
    // would be a term further on than the test meant.
    bool retry = true;
    for (const std::string& a : args) retry = retry && a != "--promote";
    constexpr int attempts = 3;
    Spawned s;
    for (int attempt = 0; attempt < attempts; ++attempt) {
        const uint16_t drawn = draw();
        std::vector<std::string> full = {binary, "--listen", "127.0.0.1:" + std::to_string(drawn)};
        full.insert(full.end(), args.begin(), args.end());
        if (fixed) wait_port_free(full);  // a drawn port was free when drawn
        int out[2];
        // Close-on-exec: a process another test thread forks meanwhile keeps no write end, which
        // would hold off the end of file a failed start is told by (dup2 onto 1 clears it).
        if (::pipe2(out, O_CLOEXEC) != 0) return s;
        // Made before the fork: the child of a process with threads may not allocate (a lock
        // another thread held at the fork stays held in the child: seen under ASan).
        std::vector<char*> argv;
        for (auto& a : full) argv.push_back(a.data());
        argv.push_back(nullptr);
        s.pid = ::fork();
        if (s.pid == 0) {
            ::dup2(out[1], 1);
            if (!stderr_path.empty()) {
                const int err =
                    ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (err >= 0) ::dup2(err, 2);  // dup2 clears O_CLOEXEC on fd 2
            }
            ::close(out[0]);
            ::close(out[1]);
            if (child_setup) child_setup();
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        ::close(out[1]);
        s.out = out[0];
        // First line: "fenec-node 0.1.0 node=… listening=127.0.0.1:<port> …"
        s.first_line.clear();
        char c;
        ssize_t got = -1;  // 0: its stdout closed
        pollfd p{s.out, POLLIN, 0};
        while (::poll(&p, 1, 10'000) > 0 && (got = ::read(s.out, &c, 1)) == 1 && c != '\n') {
            s.first_line += c;
        }
        const size_t at = s.first_line.find("listening=127.0.0.1:");
        s.port = at == std::string::npos
                     ? 0
                     : static_cast<uint16_t>(std::stoi(s.first_line.substr(at + 20)));
        // Its stdout closed with no port said: it is exiting. Waited for without reaping it, so
        // a test of a start's refusal still reads its exit status.
        if (s.port != 0 || fixed || drawn == 0 || s.pid < 0 || got != 0 || !retry ||
            attempt + 1 == attempts) {
            return s;
        }
        siginfo_t info{};
        if (::waitid(P_PID, static_cast<id_t>(s.pid), &info, WEXITED | WNOWAIT) != 0) return s;
        // Gone, and the drawn port held now: held by another, so the start lost the race and is
        // made again on a new draw. Any other failure is the test's to see.
        if (port_free(drawn)) return s;
        int status = 0;
        ::waitpid(s.pid, &status, 0);
        ::close(s.out);
        s = Spawned{};
    }
    return s;
}

}  // namespace fenec::test
