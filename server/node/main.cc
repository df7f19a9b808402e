// server/node/main.cc: fenec-node's main(): its flags and the Node, run in the one shape both
// binaries share (server/runtime/service.h; node-http.md §1.3): refusals exit 2, the first SIGTERM
// or SIGINT drains and exits 0, a second exits at once.
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "engine/io.h"
#include "server/node/node.h"
#include "server/runtime/service.h"

namespace {

using namespace fenec;

// What fenec-node prints once it serves: its version, name, address (the port it bound), data
// folder, sync policy, lease mode and the planes left open.
std::string ready_line(const node::Node& n, const node::NodeOptions& o) {
    std::string open;
    if (!o.token && !o.jwt_secret && !o.jwt_jwks) open += "data";
    if (!o.admin_token) open += open.empty() ? "admin" : ",admin";
    if (!o.replication_token) open += open.empty() ? "replication" : ",replication";
    const std::string listen =
        o.listen.substr(0, o.listen.rfind(':')) + ":" + std::to_string(n.port());
    const std::string sync = o.sync == node::NodeOptions::Sync::always ? "always"
                             : o.sync == node::NodeOptions::Sync::off
                                 ? "off"
                                 : std::to_string(o.sync_ms) + "ms";
    return "fenec-node " + std::string(node::fenec_version) + " node=" + o.node_name +
           " listening=" + listen + " data-dir=" + o.data_dir + " sync=" + sync +
           " lease=" + (o.lease ? "on" : "off") + " open=" + (open.empty() ? "none" : open);
}

// Files are created 0600 in folders made 0700 (engine/posix_fs.cc), but a data folder the user
// made, or one an older version wrote, may let other local users in: said once at start, and
// left as it is (the folder is the user's to change).
void warn_if_open_to_others(const std::string& data_dir) {
    auto bits = engine::others_may_access(data_dir);
    if (!bits.is_ok() || *bits == 0) return;
    std::fprintf(stderr,
                 "fenec-node: warning: --data-dir %s is open to other local users (its mode "
                 "gives them %03o): its tenant files and side files should be the node's alone "
                 "(chmod 700 it)\n",
                 data_dir.c_str(), *bits);
}

// The soft RLIMIT_NOFILE raised to the hard one, so the node may hold as many descriptors as the
// system lets it; said on stderr when raised. What it may hold now: it bounds the open tenants.
uint64_t raise_descriptor_limit() {
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
    if (r.rlim_cur < r.rlim_max) {
        const rlim_t was = r.rlim_cur;
        r.rlim_cur = r.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &r) == 0) {
            std::fprintf(stderr, "fenec-node: descriptors: soft limit raised from %llu to %llu\n",
                         static_cast<unsigned long long>(was),
                         static_cast<unsigned long long>(r.rlim_cur));
        } else {
            r.rlim_cur = was;
        }
    }
    return r.rlim_cur == RLIM_INFINITY ? 0 : static_cast<uint64_t>(r.rlim_cur);
}

// The machine's boot id (§8.8), read once here: "" when it cannot be read.
std::string read_boot_id() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return id;
}

}  // namespace

int main(int argc, char** argv) {
    const node::ParsedFlags flags = node::parse_flags(server::arguments(argc, argv));
    const server::Start start{
        flags.help, node::flags_help(),
        flags.error.empty() ? node::check_options(flags.options) : flags.error, flags.version};
    engine::SystemClock clock;
    engine::PosixBootClock boot_clock;
    std::optional<node::Node> n;
    return server::run("fenec-node", start, [&] {
        n.emplace(flags.options, node::NodeEnv{engine::posix_fs(), clock, boot_clock,
                                               read_boot_id(), raise_descriptor_limit()});
        return server::Service{[&] {
                                   std::string why = n->prepare();
                                   if (why.empty()) warn_if_open_to_others(flags.options.data_dir);
                                   return why;
                               },
                               [&] { return n->serve(); },
                               [&] { return ready_line(*n, flags.options); }, [&] { n->drain(); }};
    });
}
