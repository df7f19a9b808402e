// server/runtime/service.cc: main()'s one shape (server/runtime/service.h).
#include "server/runtime/service.h"

#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "server/runtime/version.h"

namespace fenec::server {

std::vector<std::string> arguments(int argc, char** argv) {
    return std::vector<std::string>(argv + 1, argv + argc);
}

int run(std::string_view program, const Start& start, const std::function<Service()>& make) {
    const auto refuse = [&](const std::string& why) {
        std::cerr << program << ": " << why << "\n";
        return 2;
    };
    if (start.help) {
        std::cout << start.help_text;
        return 0;
    }
    if (start.version) {
        std::cout << program << " " << fenec_version << "\n";
        return 0;
    }
    if (!start.refusal.empty()) return refuse(start.refusal);
    // Signals are taken by sigwait on this thread; every other thread inherits the mask.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    const Service service = make();
    if (std::string why = service.prepare(); !why.empty()) return refuse(why);
    if (std::string why = service.serve(); !why.empty()) return refuse(why);
    std::printf("%s\n", service.ready_line().c_str());
    std::fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    // A second signal exits at once (a torn tail is cut on the next open).
    std::thread([set]() mutable {
        int again = 0;
        sigwait(&set, &again);
        std::_Exit(1);
    }).detach();
    service.drain();
    return 0;
}

}  // namespace fenec::server
