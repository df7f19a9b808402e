// shard/main.cc: fenec-shard's main(): flags, the Router, signals (router.md §2.3). The first
// SIGTERM or SIGINT drains and exits 0; a second exits at once. A start-up failure exits 2.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "shard/router.h"

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    fenec::shard::ParsedFlags flags = fenec::shard::parse_flags(args);
    if (flags.help) {
        std::cout << fenec::shard::flags_help();
        return 0;
    }
    if (!flags.error.empty()) {
        std::cerr << "fenec-shard: " << flags.error << "\n";
        return 2;
    }
    if (std::string why = fenec::shard::check_options(flags.options); !why.empty()) {
        std::cerr << "fenec-shard: " << why << "\n";
        return 2;
    }
    // Signals are taken by sigwait on this thread; every other thread inherits the mask.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    const fenec::shard::RouterOptions& o = flags.options;
    fenec::engine::SystemClock clock;
    fenec::shard::Router router(o, clock);
    if (std::string why = router.prepare(); !why.empty()) {
        std::cerr << "fenec-shard: " << why << "\n";
        return 2;
    }
    router.serve();
    const std::string listen = o.listen.substr(0, o.listen.rfind(':')) + ":" +
                               std::to_string(router.port());
    std::printf("fenec-shard %s listening=%s directory=%s token=%s\n",
                std::string(fenec::shard::shard_version).c_str(), listen.c_str(),
                o.directory.c_str(), o.token ? "set" : "none");
    std::fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    std::thread([set]() mutable {
        int again = 0;
        sigwait(&set, &again);
        std::_Exit(1);
    }).detach();
    router.drain();
    return 0;
}
