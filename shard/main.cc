// shard/main.cc: fenec-shard's main(): its flags and the Router, run in the one shape both
// binaries share (server/runtime/service.h; router.md §2.3): refusals and a start-up failure exit
// 2, the first SIGTERM or SIGINT drains and exits 0, a second exits at once.
#include <optional>
#include <string>

#include "server/runtime/service.h"
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

}  // namespace

int main(int argc, char** argv) {
    const shard::ParsedFlags flags = shard::parse_flags(server::arguments(argc, argv));
    const server::Start start{
        flags.help, shard::flags_help(),
        flags.error.empty() ? shard::check_options(flags.options) : flags.error};
    engine::SystemClock clock;
    std::optional<shard::Router> r;
    return server::run("fenec-shard", start, [&] {
        r.emplace(flags.options, clock);
        return server::Service{
            [&] { return r->prepare(); },
            [&] {
                r->serve();  // prepare() bound the listener: starting cannot fail
                return std::string();
            },
            [&] { return ready_line(*r, flags.options); }, [&] { r->drain(); }};
    });
}
