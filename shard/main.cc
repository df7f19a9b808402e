// shard/main.cc: fenec-shard's main(): its flags and the Router, run in the one shape both
// binaries share (server/runtime/service.h; router.md §2.3): refusals and a start-up failure exit
// 2, the first SIGTERM or SIGINT drains and exits 0, a second exits at once.
#include <cstdio>
#include <optional>
#include <string>

#include "engine/io.h"
#include "server/runtime/service.h"
#include "shard/node_tokens.h"
#include "shard/router.h"

namespace {

using namespace fenec;

// What fenec-shard prints once it serves: its version, address (the port it bound), directory
// file and whether a token guards /_shard/.
std::string ready_line(const shard::Router& r, const shard::RouterOptions& o) {
    const std::string listen =
        o.listen.substr(0, o.listen.rfind(':')) + ":" + std::to_string(r.port());
    return "fenec-shard " + std::string(shard::shard_version) + " listening=" + listen +
           " directory=" + o.directory + " token=" + (o.token ? "set" : "none");
}

// The directory and its token sidecar are created 0600 (engine/posix_fs.cc), but a file an older
// version wrote may let other local users read where every tenant is and the nodes' tokens: said
// once at start, and left as it is (the file is the user's to change).
void warn_if_open_to_others(const std::string& path, const char* what) {
    auto bits = engine::others_may_access(path);
    if (!bits.is_ok() || *bits == 0) return;
    std::fprintf(stderr,
                 "fenec-shard: warning: %s %s is open to other local users (mode %03o & 077): "
                 "it should be the router's alone (chmod 600 it)\n",
                 what, path.c_str(), *bits);
}

}  // namespace

int main(int argc, char** argv) {
    const shard::ParsedFlags flags = shard::parse_flags(server::arguments(argc, argv));
    const server::Start start{
        flags.help, shard::flags_help(),
        flags.error.empty() ? shard::check_options(flags.options) : flags.error, flags.version};
    engine::SystemClock clock;
    std::optional<shard::Router> r;
    return server::run("fenec-shard", start, [&] {
        r.emplace(flags.options, clock);
        return server::Service{
            [&] {
                std::string why = r->prepare();
                if (why.empty()) {
                    warn_if_open_to_others(flags.options.directory, "--directory");
                    warn_if_open_to_others(
                        flags.options.directory + std::string(shard::token_sidecar_suffix),
                        "the token sidecar");
                }
                return why;
            },
            [&] {
                r->serve();  // prepare() bound the listener: starting cannot fail
                return std::string();
            },
            [&] { return ready_line(*r, flags.options); }, [&] { r->drain(); }};
    });
}
