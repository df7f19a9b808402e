// server/runtime/service.h: the one shape of a Fenec binary's main() (node-http.md §1.3, router.md
// §2.3), shared by fenec-node and fenec-shard: --help and start-up refusals answered (each binary
// reads its own flags, server/runtime/flags.h), signals taken, the server prepared, served, and
// drained on the first SIGTERM or SIGINT.
//
// Exit codes: 0 after --help, --version or a drain; 2 for a refused flag, a refused set of flags or
// a start-up that fails; 1 at once on a second signal (a torn tail is cut on the next open).
// SIGTERM and SIGINT are blocked before the server is made, so every thread it starts inherits
// the mask and only main's sigwait takes them; SIGPIPE is ignored (a peer gone is a failed send).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace fenec::server {

// What main() read from its command line.
struct Start {
    bool help = false;      // --help: help_text on stdout, exit 0
    std::string help_text;  // the binary's flags_help()
    std::string refusal;    // a flag's or the whole set's refusal: on stderr, exit 2
    bool version = false;   // --version: "<program> <version>" on stdout, exit 0
};

// One server as main() drives it. Every step but drain answers "" when fine, else why it failed.
struct Service {
    std::function<std::string()> prepare;     // files opened, the listener bound
    std::function<std::string()> serve;       // the loops started
    std::function<std::string()> ready_line;  // printed on stdout once serving
    std::function<void()> drain;              // the first signal: finish what is in flight, stop
};

// argv without argv[0].
std::vector<std::string> arguments(int argc, char** argv);

// Runs `program`: `start` answered first; then signals blocked, `make` called (it builds the
// server and returns its steps, which may refer to it), prepare, serve, the ready line, a wait for
// a signal, drain. Messages are "<program>: <why>" on stderr. Returns main()'s exit code.
int run(std::string_view program, const Start& start, const std::function<Service()>& make);

}  // namespace fenec::server
