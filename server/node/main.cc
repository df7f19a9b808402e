// server/node/main.cc: fenec-node's main(): flags, the Node, signals (node-http.md §1.3). The
// first SIGTERM or SIGINT drains and exits 0; a second exits at once.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <pthread.h>

#include "server/node/node.h"

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    fenec::node::ParsedFlags flags = fenec::node::parse_flags(args);
    if (flags.help) {
        std::cout << fenec::node::flags_help();
        return 0;
    }
    if (!flags.error.empty()) {
        std::cerr << "fenec-node: " << flags.error << "\n";
        return 2;
    }
    if (std::string why = fenec::node::check_options(flags.options); !why.empty()) {
        std::cerr << "fenec-node: " << why << "\n";
        return 2;
    }
    // Signals are taken by sigwait on this thread; every other thread inherits the mask.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    const fenec::node::NodeOptions& o = flags.options;
    fenec::engine::SystemClock clock;
    fenec::engine::PosixBootClock boot_clock;
    fenec::node::Node node(o, {fenec::engine::posix_fs(), clock, boot_clock});
    if (std::string why = node.prepare(); !why.empty()) {
        std::cerr << "fenec-node: " << why << "\n";
        return 2;
    }
    if (std::string why = node.serve(); !why.empty()) {
        std::cerr << "fenec-node: " << why << "\n";
        return 2;
    }
    std::string open;
    if (!o.token && !o.jwt_secret && !o.jwt_jwks) open += "data";
    if (!o.admin_token) open += open.empty() ? "admin" : ",admin";
    if (!o.replication_token) open += open.empty() ? "replication" : ",replication";
    std::string listen = o.listen.substr(0, o.listen.rfind(':')) + ":" + std::to_string(node.port());
    std::printf("fenec-node %s node=%s listening=%s data-dir=%s sync=%s lease=%s open=%s\n",
                std::string(fenec::node::fenec_version).c_str(), o.node_name.c_str(), listen.c_str(),
                o.data_dir.c_str(),
                o.sync == fenec::node::NodeOptions::Sync::always ? "always"
                : o.sync == fenec::node::NodeOptions::Sync::off  ? "off"
                                                                 : (std::to_string(o.sync_ms) + "ms").c_str(),
                o.lease ? "on" : "off", open.empty() ? "none" : open.c_str());
    std::fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    // A second signal exits at once (a torn tail is cut on the next open).
    std::thread([set]() mutable {
        int again = 0;
        sigwait(&set, &again);
        std::_Exit(1);
    }).detach();
    node.drain();
    return 0;
}
