// test/deploy/systemd_test.cc: proves the kit's systemd units (deploy/systemd/) are ones systemd
// takes and the binaries run under:
// - `systemd-analyze verify` says nothing about each unit (a copy naming the build's binary,
//   since verify checks that ExecStart's file exists; any line it prints about the unit fails,
//   since it exits 0 on an unknown key), and `systemd-analyze security` rates its sandbox at
//   the kit's exposure or better;
// - the users the units run as are the ones deploy/sysusers.d creates (systemd-sysusers run
//   into a folder of the test's);
// - each unit's command line, expanded with its example environment file as systemd expands
//   it, starts the release binary, which takes its tokens from that environment, answers
//   /_health, refuses a second start on the same files with the exit status the unit does not
//   restart on, and stops on the one SIGTERM systemd sends with exit 0 within TimeoutStopSec;
// - each binary, traced (strace) while it serves, makes no system call the unit's
//   SystemCallFilter= refuses, opens no socket family RestrictAddressFamilies= refuses, maps no
//   memory writable and executable (MemoryDenyWriteExecute=), and, where the unit has
//   ProcSubset=pid, opens no /proc file but its own.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "test/deploy/kit.h"
#include "test/server/node/node_fixture.h"

namespace fenec::test::deploy {
namespace {

struct UnitCase {
    const char* file;    // under deploy/systemd/
    const char* binary;  // the build's
};
const UnitCase kUnits[] = {
    {"fenec-node.service", FENEC_NODE_BIN},
    {"fenec-shard.service", FENEC_SHARD_BIN},
    {"fenec-shard-standby.service", FENEC_SHARD_BIN},
};
void PrintTo(const UnitCase& u, std::ostream* os) { *os << u.file; }

// The worst exposure `systemd-analyze security` (systemd 252) may rate a unit, in its tenths
// (12: "1.2"): the kit's units' rating, so any one directive dropped from the sandbox (each of
// PrivateDevices, ProtectClock, LockPersonality, UMask... raises it) fails.
constexpr int kExposureMax = 12;

// The unit with ExecStart's /usr/local/bin/<name> replaced by the build's binary, written under
// `dir` by its own name: the one change, so verify checks the rest as written.
std::string copy_with_binary(const UnitCase& u, const std::string& dir) {
    const std::string name = std::string(u.binary).substr(std::string(u.binary).rfind('/') + 1);
    std::string text = slurp(kit_path("systemd/") + u.file);
    const std::string from = "ExecStart=/usr/local/bin/" + name + " ";
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << u.file << " does not start /usr/local/bin/" << name;
    if (at != std::string::npos) {
        text.replace(at, from.size(), "ExecStart=" + std::string(u.binary) + " ");
    }
    const std::string path = dir + "/" + u.file;
    write_text(path, text);
    return path;
}

class Units : public ::testing::TestWithParam<UnitCase> {};

TEST_P(Units, VerifySaysNothing) {
    TempDir dir;
    const std::string path = copy_with_binary(GetParam(), dir.path());
    const Ran r = run("systemd-analyze verify " + quoted(path));
    ASSERT_NE(r.status, 127) << "systemd-analyze is missing (ci/setup installs systemd)";
    EXPECT_EQ(r.status, 0) << r.output;
    // Lines about other units on the machine are not the kit's; any about this one is.
    std::istringstream lines(r.output);
    std::string line;
    while (std::getline(lines, line)) {
        EXPECT_EQ(line.find(GetParam().file), std::string::npos) << line;
    }
}

TEST_P(Units, SandboxRatedAtTheKitsExposure) {
    TempDir dir;
    const std::string path = copy_with_binary(GetParam(), dir.path());
    const Ran r =
        run("systemd-analyze security --offline=yes --threshold=" + std::to_string(kExposureMax) +
            " " + quoted(path));
    EXPECT_EQ(r.status, 0) << "exposure above " << kExposureMax / 10 << "." << kExposureMax % 10
                           << ":\n"
                           << r.output;
    const Unit u = read_unit(path);
    // What the issue asks of every unit, whatever the rating weighs it at.
    EXPECT_NE(u.get("Service", "User"), "");
    EXPECT_NE(u.get("Service", "User"), "root");
    EXPECT_EQ(u.get("Service", "ProtectSystem"), "strict");
    EXPECT_EQ(u.get("Service", "ProtectHome"), "yes");
    EXPECT_EQ(u.get("Service", "PrivateTmp"), "yes");
    EXPECT_EQ(u.get("Service", "NoNewPrivileges"), "yes");
    EXPECT_EQ(u.get("Service", "CapabilityBoundingSet"), "");
    EXPECT_FALSE(u.all("Service", "CapabilityBoundingSet").empty());
    EXPECT_EQ(u.get("Service", "Restart"), "on-failure");
    EXPECT_NE(u.get("Service", "StateDirectory"), "");
    EXPECT_NE(u.get("Service", "EnvironmentFile"), "");
    EXPECT_GE(std::stol("0" + u.get("Service", "LimitNOFILE")), 16384);
}

TEST_P(Units, UserIsOneSysusersCreates) {
    TempDir dir;
    std::filesystem::create_directories(dir.path() + "/etc");
    const Ran r = run("systemd-sysusers --root=" + quoted(dir.path()) + " - < " +
                      quoted(kit_path("sysusers.d/fenec.conf")));
    ASSERT_EQ(r.status, 0) << r.output;
    const Unit u = read_unit(kit_path("systemd/") + GetParam().file);
    const std::string passwd = slurp(dir.path() + "/etc/passwd");
    const std::string group = slurp(dir.path() + "/etc/group");
    EXPECT_TRUE(("\n" + passwd).find("\n" + u.get("Service", "User") + ":x:") != std::string::npos)
        << passwd;
    EXPECT_TRUE(("\n" + group).find("\n" + u.get("Service", "Group") + ":x:") != std::string::npos)
        << group;
}

INSTANTIATE_TEST_SUITE_P(Deploy, Units, ::testing::ValuesIn(kUnits),
                         [](const ::testing::TestParamInfo<UnitCase>& i) {
                             std::string n = i.param.file;
                             for (char& c : n) {
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             }
                             return n;
                         });

Unit unit_of(const char* file) { return read_unit(kit_path("systemd/") + file); }
std::map<std::string, std::string> env_of(const char* file) {
    return read_env(kit_path("env/") + file);
}

// One request on a connection of its own, closed after the answer: a router stopping waits up to
// its 10 s drain for an idle client connection (a node closes one at once), and these tests
// stop routers.
std::optional<Reply> once(uint16_t port, std::string_view method, std::string_view target,
                          std::string_view body = {},
                          std::vector<std::pair<std::string, std::string>> headers = {}) {
    Client c(port);
    return c.request(method, target, body, std::move(headers));
}

// The node as fenec-node.service starts it, with its example environment file.
TEST(UnitCommand, NodeStartsTakesItsTokensAndStopsCleanly) {
    TempDir dir;
    const Unit unit = unit_of("fenec-node.service");
    const auto env = env_of("fenec-node.env");
    const ServiceCommand cmd = service_command(unit, env, FENEC_NODE_BIN, dir.path());
    ASSERT_EQ(cmd.error, "");
    Process node(cmd.argv, cmd.env, dir.path() + "/node.err");
    ASSERT_NE(node.port(), 0) << slurp(dir.path() + "/node.err");
    // The ready line names the tokens taken: every plane has a credential, none is open.
    EXPECT_NE(node.ready_line().find(" open=none"), std::string::npos) << node.ready_line();
    EXPECT_NE(node.ready_line().find(" lease=on"), std::string::npos) << node.ready_line();

    Client c(node.port());
    auto health = c.request("GET", "/_health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    auto metrics = c.request("GET", "/_metrics", {},
                             {{"Authorization", "Bearer " + env.at("FENEC_ADMIN_TOKEN")}});
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200) << "the admin token was not taken from the environment";
    auto data = c.request("GET", "/t/acme/c/notes", {},
                          {{"Authorization", "Bearer " + env.at("FENEC_TOKEN")}});
    ASSERT_TRUE(data);
    EXPECT_EQ(data->status, 404) << "the data token was not taken from the environment";

    // A second node on the same files refuses (the data directory is locked) with the status
    // the unit does not restart on.
    Process second(cmd.argv, cmd.env, dir.path() + "/second.err");
    EXPECT_EQ(second.port(), 0);
    EXPECT_EQ(std::to_string(second.stop(0, 10'000)),
              unit.get("Service", "RestartPreventExitStatus"))
        << slurp(dir.path() + "/second.err");

    // systemd's stop: KillSignal= once, SIGKILL only after TimeoutStopSec.
    ASSERT_EQ(unit.get("Service", "KillSignal"), "SIGTERM");
    ASSERT_GT(stop_timeout_ms(unit), 10'000) << "under the node's 10 s drain";
    EXPECT_EQ(node.stop(SIGTERM, stop_timeout_ms(unit)), 0) << slurp(dir.path() + "/node.err");
    // Its files are in the state and logs folders the unit names, and the node's alone.
    EXPECT_TRUE(std::filesystem::exists(cmd.dirs.at("/var/lib/fenec-node") + "/fenec-node.lock"));
    EXPECT_TRUE(std::filesystem::exists(cmd.dirs.at("/var/log/fenec-node") + "/audit.log"));
    EXPECT_EQ(slurp(dir.path() + "/node.err").find("warning"), std::string::npos)
        << slurp(dir.path() + "/node.err");
}

// The router and its standby as their units start them, with the one example environment file;
// then the standby promoted and its unit swapped for the primary's, as the runbook does it.
TEST(UnitCommand, RouterAndStandbyStartAndStopCleanly) {
    TempDir primary_dir, standby_dir;
    const Unit unit = unit_of("fenec-shard.service");
    const auto env = env_of("fenec-shard.env");
    const ServiceCommand cmd = service_command(unit, env, FENEC_SHARD_BIN, primary_dir.path());
    ASSERT_EQ(cmd.error, "");
    Process router(cmd.argv, cmd.env, primary_dir.path() + "/router.err");
    ASSERT_NE(router.port(), 0) << slurp(primary_dir.path() + "/router.err");
    EXPECT_NE(router.ready_line().find("token=set"), std::string::npos) << router.ready_line();

    const Unit standby_unit = unit_of("fenec-shard-standby.service");
    auto standby_env = env;
    standby_env["FENEC_SHARD_PRIMARY"] = "http://127.0.0.1:" + std::to_string(router.port());
    const ServiceCommand scmd =
        service_command(standby_unit, standby_env, FENEC_SHARD_BIN, standby_dir.path());
    ASSERT_EQ(scmd.error, "");
    Process standby(scmd.argv, scmd.env, standby_dir.path() + "/standby.err");
    ASSERT_NE(standby.port(), 0) << slurp(standby_dir.path() + "/standby.err");

    const std::string bearer = "Bearer " + env.at("FENEC_SHARD_TOKEN");
    auto nodes = once(router.port(), "GET", "/_shard/nodes", {}, {{"Authorization", bearer}});
    ASSERT_TRUE(nodes);
    EXPECT_EQ(nodes->status, 200) << "--token was not taken from FENEC_SHARD_TOKEN";
    // The standby follows with the replication token both units pass.
    EXPECT_TRUE(wait_until([&] {
        auto h = once(standby.port(), "GET", "/_health");
        return h && h->status == 200 && h->body.find("\"role\":\"standby\"") != std::string::npos &&
               h->body.find("\"directory\":\"ready\"") != std::string::npos;
    })) << slurp(standby_dir.path() + "/standby.err");

    // The runbook's promotion: the standby promoted over HTTP, then its unit swapped for the
    // primary's on the same files, which opens the promoted directory as a primary.
    auto promoted = once(standby.port(), "POST", "/_replication/promote", {},
                         {{"Authorization", "Bearer " + env.at("FENEC_SHARD_REPLICATION_TOKEN")}});
    ASSERT_TRUE(promoted);
    EXPECT_EQ(promoted->status, 200) << promoted->body;
    EXPECT_EQ(standby.stop(SIGTERM, stop_timeout_ms(standby_unit)), 0)
        << slurp(standby_dir.path() + "/standby.err");
    EXPECT_EQ(router.stop(SIGTERM, stop_timeout_ms(unit)), 0)
        << slurp(primary_dir.path() + "/router.err");
    EXPECT_TRUE(std::filesystem::exists(cmd.dirs.at("/var/lib/fenec-shard") + "/shard.fenec"));

    const ServiceCommand swapped = service_command(unit, env, FENEC_SHARD_BIN, standby_dir.path());
    ASSERT_EQ(swapped.error, "");
    EXPECT_EQ(swapped.dirs.at("/var/lib/fenec-shard"), scmd.dirs.at("/var/lib/fenec-shard"));
    Process now_primary(swapped.argv, swapped.env, standby_dir.path() + "/swapped.err");
    ASSERT_NE(now_primary.port(), 0) << slurp(standby_dir.path() + "/swapped.err");
    auto h = once(now_primary.port(), "GET", "/_health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_NE(h->body.find("\"role\":\"primary\""), std::string::npos) << h->body;
    EXPECT_NE(h->body.find("\"term\":1"), std::string::npos)
        << "not the promoted directory: " << h->body;
    EXPECT_EQ(now_primary.stop(SIGTERM, stop_timeout_ms(unit)), 0)
        << slurp(standby_dir.path() + "/swapped.err");
}

// ---- the sandbox against what the binaries do, traced ----

// The system calls a filter names: `@group`s expanded by systemd-analyze, recursively.
std::set<std::string> expand_syscalls(const std::string& list) {
    std::set<std::string> out;
    std::istringstream words(list);
    std::string w;
    while (words >> w) {
        if (w[0] != '@') {
            out.insert(w);
            continue;
        }
        const Ran r = run("systemd-analyze syscall-filter " + w);
        std::istringstream lines(r.output);
        std::string line;
        std::getline(lines, line);  // the group's own name
        while (std::getline(lines, line)) {
            const size_t s = line.find_first_not_of(' ');
            if (s == std::string::npos || line[s] == '#') continue;
            const std::string name = line.substr(s);
            if (name[0] == '@') {
                for (const auto& n : expand_syscalls(name)) out.insert(n);
            } else {
                out.insert(name);
            }
        }
    }
    return out;
}

// What SystemCallFilter= lets through: the union of its allow lists less its `~` deny lists
// (systemd.exec(5): with an allow list first, later `~` lines remove from it).
std::set<std::string> allowed_syscalls(const Unit& u) {
    std::set<std::string> allowed, denied;
    for (const std::string& v : u.all("Service", "SystemCallFilter")) {
        if (v.starts_with("~")) {
            for (const auto& n : expand_syscalls(v.substr(1))) denied.insert(n);
        } else {
            for (const auto& n : expand_syscalls(v)) allowed.insert(n);
        }
    }
    for (const auto& n : denied) allowed.erase(n);
    return allowed;
}

// What a strace log (`strace -f -o`) shows: each system call's name, the families of the sockets
// made, the /proc files opened, and calls mapping memory writable and executable.
struct Traced {
    std::set<std::string> calls;
    std::set<std::string> families;
    std::set<std::string> proc_files;
    std::vector<std::string> write_exec;
};

Traced read_trace(const std::string& path) {
    Traced t;
    std::istringstream in(slurp(path));
    std::string line;
    const std::regex call(R"(^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ])");
    const std::regex family(R"(socket\((AF_[A-Z0-9]+))");
    const std::regex proc(R"re("(/proc/[^"]*)")re");
    std::smatch m;
    while (std::getline(in, line)) {
        if (line.find("+++ exited") != std::string::npos ||
            line.find("--- SIG") != std::string::npos) {
            continue;
        }
        if (std::regex_search(line, m, call)) t.calls.insert(m[1]);
        if (std::regex_search(line, m, family)) t.families.insert(m[1]);
        if (line.find("open") != std::string::npos && std::regex_search(line, m, proc)) {
            t.proc_files.insert(m[1]);
        }
        if ((line.find("mmap(") != std::string::npos ||
             line.find("mprotect(") != std::string::npos) &&
            line.find("PROT_WRITE") != std::string::npos &&
            line.find("PROT_EXEC") != std::string::npos) {
            t.write_exec.push_back(line);
        }
    }
    return t;
}

void expect_sandbox_holds(const Unit& unit, const Traced& t, const std::string& what) {
    ASSERT_FALSE(t.calls.empty()) << what << ": nothing traced";
    ASSERT_TRUE(t.calls.contains("io_uring_setup")) << what << ": the trace missed the loops";
    const std::set<std::string> allowed = allowed_syscalls(unit);
    ASSERT_GT(allowed.size(), 100u) << "SystemCallFilter= did not expand";
    for (const std::string& c : t.calls) {
        if (c == "execve") continue;  // strace's own exec of the binary, before the filter
        EXPECT_TRUE(allowed.contains(c))
            << what << " calls " << c << ", which the unit's SystemCallFilter= refuses";
    }
    std::set<std::string> families;
    std::istringstream fam(unit.get("Service", "RestrictAddressFamilies"));
    std::string f;
    while (fam >> f) families.insert(f);
    for (const std::string& family : t.families) {
        EXPECT_TRUE(families.contains(family))
            << what << " opens an " << family << " socket, which RestrictAddressFamilies= refuses";
    }
    if (unit.get("Service", "MemoryDenyWriteExecute") == "yes") {
        for (const std::string& l : t.write_exec) ADD_FAILURE() << what << ": W+X mapping: " << l;
    }
    if (unit.get("Service", "ProcSubset") == "pid") {
        const std::regex own(R"(^/proc/(self|thread-self|\d+)(/.*)?$)");
        for (const std::string& p : t.proc_files) {
            EXPECT_TRUE(std::regex_match(p, own))
                << what << " opens " << p << ", which ProcSubset=pid hides";
        }
    }
}

std::vector<std::string> traced_argv(const std::vector<std::string>& argv, const std::string& log) {
    std::vector<std::string> out = {"/usr/bin/strace", "-f", "-qq", "-o", log, "--"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}

// The trace is of what a release binary calls, which is what a unit runs. A sanitizer build's
// binaries make calls of their runtime's own, and its leak check stops the world with ptrace,
// which fails under a tracer.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

bool strace_can_trace(std::string& why) {
    const Ran r = run("/usr/bin/strace -qq -o /dev/null -- /bin/true");
    why = r.output;
    return r.status == 0;
}

std::string json_put(uint16_t port, const std::string& target, const std::string& body,
                     const std::string& bearer, int* status) {
    auto r = once(port, "PUT", target, body,
                  {{"Authorization", bearer}, {"Content-Type", "application/json"}});
    *status = r ? r->status : 0;
    return r ? r->body : "";
}

// The node traced from its start to its exit while it creates a tenant, writes and reads it,
// answers its metrics and its image, and drains.
TEST(UnitSandbox, NodeCallsOnlyWhatItsUnitAllows) {
    std::string why;
    ASSERT_EQ(::access("/usr/bin/strace", X_OK), 0) << "strace is missing (ci/setup installs it)";
    if (kSanitizerBuild)
        GTEST_SKIP() << "the binaries are a sanitizer build's: the release build traces";
    if (!strace_can_trace(why)) GTEST_SKIP() << "this machine refuses ptrace: " << why;
    TempDir dir;
    const Unit unit = unit_of("fenec-node.service");
    auto env = env_of("fenec-node.env");
    std::string flags = env.at("FENEC_NODE_FLAGS");
    flags.replace(flags.find(" --lease"), 8, "");  // no router here to grant a lease
    env["FENEC_NODE_FLAGS"] = flags;
    const ServiceCommand cmd = service_command(unit, env, FENEC_NODE_BIN, dir.path());
    ASSERT_EQ(cmd.error, "");
    const std::string log = dir.path() + "/trace.txt";
    Process node(traced_argv(cmd.argv, log), cmd.env, dir.path() + "/node.err");
    ASSERT_NE(node.port(), 0) << slurp(dir.path() + "/node.err");
    const std::string admin = "Bearer " + env.at("FENEC_ADMIN_TOKEN");
    const std::string data = "Bearer " + env.at("FENEC_TOKEN");
    int status = 0;
    json_put(node.port(), "/_admin/tenants/acme",
             R"j({"schema": ["create collection notes (title text)"]})j", admin, &status);
    EXPECT_EQ(status, 201);
    auto w = once(node.port(), "POST", "/t/acme/c/notes", R"({"title": "hello"})",
                  {{"Authorization", data}, {"Content-Type", "application/json"}});
    ASSERT_TRUE(w);
    EXPECT_EQ(w->status, 201) << w->body;
    auto q = once(node.port(), "POST", "/t/acme/query", R"({"query": "get notes"})",
                  {{"Authorization", data}, {"Content-Type", "application/json"}});
    ASSERT_TRUE(q);
    EXPECT_EQ(q->status, 200) << q->body;
    auto img =
        once(node.port(), "GET", "/_admin/tenants/acme/file", {}, {{"Authorization", admin}});
    ASSERT_TRUE(img);
    EXPECT_EQ(img->status, 200);
    auto m = once(node.port(), "GET", "/_metrics", {}, {{"Authorization", admin}});
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 200);
    EXPECT_EQ(node.stop(SIGTERM, stop_timeout_ms(unit), first_child(node.pid())), 0)
        << slurp(dir.path() + "/node.err");
    expect_sandbox_holds(unit, read_trace(log), "fenec-node");
}

// The router traced while it registers a node, places a tenant, forwards a write and a read,
// leases the node and drains.
TEST(UnitSandbox, RouterCallsOnlyWhatItsUnitAllows) {
    std::string why;
    ASSERT_EQ(::access("/usr/bin/strace", X_OK), 0) << "strace is missing (ci/setup installs it)";
    if (kSanitizerBuild)
        GTEST_SKIP() << "the binaries are a sanitizer build's: the release build traces";
    if (!strace_can_trace(why)) GTEST_SKIP() << "this machine refuses ptrace: " << why;
    TempDir node_dir, dir;
    const auto node_env = env_of("fenec-node.env");
    const ServiceCommand ncmd =
        service_command(unit_of("fenec-node.service"), node_env, FENEC_NODE_BIN, node_dir.path());
    ASSERT_EQ(ncmd.error, "");
    Process node(ncmd.argv, ncmd.env, node_dir.path() + "/node.err");
    ASSERT_NE(node.port(), 0) << slurp(node_dir.path() + "/node.err");

    const Unit unit = unit_of("fenec-shard.service");
    const auto env = env_of("fenec-shard.env");
    const ServiceCommand cmd = service_command(unit, env, FENEC_SHARD_BIN, dir.path());
    ASSERT_EQ(cmd.error, "");
    const std::string log = dir.path() + "/trace.txt";
    Process router(traced_argv(cmd.argv, log), cmd.env, dir.path() + "/router.err");
    ASSERT_NE(router.port(), 0) << slurp(dir.path() + "/router.err");
    const std::string token = "Bearer " + env.at("FENEC_SHARD_TOKEN");
    int status = 0;
    const std::string body = json_put(router.port(), "/_shard/nodes/n1",
                                      R"({"addr": "127.0.0.1:)" + std::to_string(node.port()) +
                                          R"(", "token_env": "FENEC_N1_ADMIN_TOKEN"})",
                                      token, &status);
    ASSERT_EQ(status, 201) << body;
    json_put(router.port(), "/_shard/tenants/acme",
             R"j({"node": "n1", "schema": ["create collection notes (title text)"]})j", token,
             &status);
    ASSERT_EQ(status, 201);
    const std::string data = "Bearer " + node_env.at("FENEC_TOKEN");
    EXPECT_TRUE(wait_until([&] {  // the first write waits for the node's first grant
        auto w = once(router.port(), "POST", "/t/acme/c/notes", R"({"title": "hello"})",
                      {{"Authorization", data}, {"Content-Type", "application/json"}});
        return w && w->status == 201;
    }));
    auto r = once(router.port(), "GET", "/t/acme/c/notes/1", {}, {{"Authorization", data}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    auto m = once(router.port(), "GET", "/_metrics", {}, {{"Authorization", token}});
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 200);
    EXPECT_EQ(router.stop(SIGTERM, stop_timeout_ms(unit), first_child(router.pid())), 0)
        << slurp(dir.path() + "/router.err");
    expect_sandbox_holds(unit, read_trace(log), "fenec-shard");
}

}  // namespace
}  // namespace fenec::test::deploy
