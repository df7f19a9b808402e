// test/support/child.h: signals to a process a test started and waits on (a node, a router).
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "test/support/wait.h"

namespace fenec::test {

// True when the process `pid` is stopped (its state in /proc is `T`).
inline bool child_stopped(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    std::getline(in, stat);
    const size_t paren = stat.rfind(')');  // the name may hold spaces and parentheses
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
}

// Sends `sig` to the child `pid`. A SIGSTOP returns only once every thread of it has stopped
// (the group stop that waitpid reports): kill(2) returns while the process may still run for a
// while, reading and answering what a test then sends it as if to a machine already lost. False
// when the stop was not seen within the default wait. Other signals return at once.
inline bool signal_child(pid_t pid, int sig) {
    if (pid <= 0) return false;
    if (sig == SIGSTOP && child_stopped(pid)) return true;  // no second report comes
    if (::kill(pid, sig) != 0) return false;
    if (sig != SIGSTOP) return true;
    return wait_until([pid] {
        int status = 0;
        const pid_t got = ::waitpid(pid, &status, WUNTRACED | WNOHANG);
        return got == pid && WIFSTOPPED(status);
    });
}

// Stops the child `pid` with `stop` (its holder's kill(sig), which waits for the exit and returns
// its status) and SIGKILLs it should it not have exited within `bound`, so a stop that hangs
// fails the test rather than holding it: `stop`'s status, 128 + SIGKILL when it had to be killed.
template <class Stop>
int stop_within(pid_t pid, std::chrono::milliseconds bound, Stop&& stop) {
    std::mutex mu;
    std::condition_variable cv;
    bool exited = false;
    std::thread watchdog([&] {
        std::unique_lock lock(mu);
        if (!cv.wait_for(lock, bound, [&] { return exited; })) ::kill(pid, SIGKILL);
    });
    const int status = stop();
    {
        const std::lock_guard lock(mu);
        exited = true;
    }
    cv.notify_one();
    watchdog.join();
    return status;
}

}  // namespace fenec::test
