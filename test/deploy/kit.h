// test/deploy/kit.h: what the deploy kit's tests share. The kit's files read as the tools that
// consume them read them: a systemd unit (sections, keys, a key given more than once), an
// environment file (KEY=VALUE lines), ExecStart= expanded as systemd expands it (`${V}` one word,
// `$V` split on whitespace); a command run with its output; a unit's command line started as a
// process with the unit's environment and its paths rewritten to a test folder; and a Prometheus
// text exposition read into its families, series names and label names.
//
// The unit's process is the release binary run with the arguments and environment systemd would
// give it, so a flag the binary does not take, a token it does not read from its environment or
// a stop that is not clean fails here; what systemd itself adds (the user, the sandbox) is
// checked by `systemd-analyze verify` and by tracing the process (systemd_test.cc).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "test/support/wait.h"

namespace fenec::test::deploy {

inline std::string kit_path(const std::string& rel) {
    return std::string(FENEC_DEPLOY_DIR) + "/" + rel;
}

inline std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

inline void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
}

// `command` run by /bin/sh, stdout and stderr together; the exit status (-1: not run).
struct Ran {
    int status = -1;
    std::string output;
};
inline Ran run(const std::string& command) {
    Ran r;
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

inline std::string quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// A unit file: each key of each section with every value it was given, in order. Comments and
// blank lines dropped; a trailing backslash continues a line, as systemd reads it.
struct Unit {
    std::map<std::string, std::map<std::string, std::vector<std::string>>> sections;

    const std::vector<std::string>& all(const std::string& section, const std::string& key) const {
        static const std::vector<std::string> none;
        auto s = sections.find(section);
        if (s == sections.end()) return none;
        auto k = s->second.find(key);
        return k == s->second.end() ? none : k->second;
    }
    // The last value given (systemd's rule for a key that takes one), or "".
    std::string get(const std::string& section, const std::string& key) const {
        const auto& v = all(section, key);
        return v.empty() ? "" : v.back();
    }
};

inline Unit read_unit(const std::string& path) {
    Unit u;
    std::istringstream in(slurp(path));
    std::string line, section, pending;
    while (std::getline(in, line)) {
        if (!pending.empty()) line = pending + line;
        pending.clear();
        if (!line.empty() && line.back() == '\\') {
            pending = line.substr(0, line.size() - 1) + " ";
            continue;
        }
        const size_t start = line.find_first_not_of(" \t");
        if (start == std::string::npos || line[start] == '#' || line[start] == ';') continue;
        if (line[start] == '[') {
            section = line.substr(start + 1, line.find(']') - start - 1);
            continue;
        }
        const size_t eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string key = line.substr(start, eq - start);
        while (!key.empty() && key.back() == ' ') key.pop_back();
        std::string value = line.substr(eq + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        u.sections[section][key].push_back(value);
    }
    return u;
}

// An EnvironmentFile=: KEY=VALUE lines, `#` comments; a value's surrounding quotes dropped.
inline std::map<std::string, std::string> read_env(const std::string& path) {
    std::map<std::string, std::string> env;
    std::istringstream in(slurp(path));
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const size_t eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string v = line.substr(eq + 1);
        if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
            v = v.substr(1, v.size() - 2);
        }
        env[line.substr(0, eq)] = v;
    }
    return env;
}

// ExecStart= as systemd splits and expands it (systemd.service(5), "Command lines"): words split
// on whitespace; a word `${V}` is replaced by V's value as one word (empty when unset), a word
// `$V` by V's value split on whitespace (no word when unset or empty). Any other `$` in a word
// is left for the test to see: the kit's units use none.
inline std::vector<std::string> expand_exec(const std::string& line,
                                            const std::map<std::string, std::string>& env) {
    std::vector<std::string> out;
    std::istringstream words(line);
    std::string w;
    const auto value = [&](const std::string& name) {
        auto it = env.find(name);
        return it == env.end() ? std::string() : it->second;
    };
    while (words >> w) {
        if (w.size() > 3 && w.starts_with("${") && w.back() == '}') {
            out.push_back(value(w.substr(2, w.size() - 3)));
        } else if (w.size() > 1 && w[0] == '$') {
            std::istringstream split(value(w.substr(1)));
            std::string part;
            while (split >> part) out.push_back(part);
        } else {
            out.push_back(w);
        }
    }
    return out;
}

// The value after `flag` in `args`, replaced by `to`; false when the flag is not there.
inline bool replace_flag(std::vector<std::string>& args, const std::string& flag,
                         const std::string& to) {
    for (size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == flag) {
            args[i + 1] = to;
            return true;
        }
    }
    return false;
}

inline std::optional<std::string> flag_value(const std::vector<std::string>& args,
                                             const std::string& flag) {
    for (size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == flag) return args[i + 1];
    }
    return std::nullopt;
}

// A process started with exactly `argv` and `env` (systemd gives a service its environment
// files' variables and a few of its own, not the caller's), and the sanitizer options of a
// sanitizer build. Its first stdout line is its ready
// line; `port()` is read from `listening=127.0.0.1:<port>` in it.
class Process {
  public:
    Process(std::vector<std::string> argv, const std::map<std::string, std::string>& env,
            const std::string& stderr_path) {
        int out[2];
        if (::pipe(out) != 0) return;
        std::vector<std::string> envs;
        for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
        // A sanitizer build's options reach its binaries too: they steer the runtime only.
        for (char** e = environ; *e; ++e) {
            const std::string_view v(*e);
            if (v.starts_with("ASAN_OPTIONS=") || v.starts_with("UBSAN_OPTIONS=") ||
                v.starts_with("LSAN_OPTIONS=")) {
                envs.emplace_back(v);
            }
        }
        // Made before the fork: the child of a process with threads may not allocate.
        std::vector<char*> a, e;
        for (auto& s : argv) a.push_back(s.data());
        a.push_back(nullptr);
        for (auto& s : envs) e.push_back(s.data());
        e.push_back(nullptr);
        pid_ = ::fork();
        if (pid_ == 0) {
            ::dup2(out[1], 1);
            const int err =
                ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (err >= 0) ::dup2(err, 2);
            ::close(out[0]);
            ::close(out[1]);
            ::execve(a[0], a.data(), e.data());
            ::_exit(127);
        }
        ::close(out[1]);
        out_ = out[0];
        char c;
        pollfd p{out_, POLLIN, 0};
        while (::poll(&p, 1, 10'000) > 0 && ::read(out_, &c, 1) == 1 && c != '\n') line_ += c;
        const size_t at = line_.find("listening=127.0.0.1:");
        if (at != std::string::npos)
            port_ = static_cast<uint16_t>(std::stoi(line_.substr(at + 20)));
    }
    ~Process() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (out_ >= 0) ::close(out_);
    }
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    pid_t pid() const { return pid_; }
    uint16_t port() const { return port_; }
    const std::string& ready_line() const { return line_; }

    // Sends `sig` (to `target`, else to the process) and waits up to `ms` for the process's exit:
    // its status, 128 + a signal's number, or -2 when it had not exited by then (it is then
    // killed, so the test fails rather than hangs). `target`: the program a tracer started.
    int stop(int sig, int ms, pid_t target = 0) {
        if (pid_ <= 0) return -1;
        ::kill(target > 0 ? target : pid_, sig);
        int status = 0;
        pid_t got = 0;
        const bool exited =
            wait_until([&] { return (got = ::waitpid(pid_, &status, WNOHANG)) != 0; },
                       std::chrono::milliseconds(ms));
        if (!exited) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
        }
        pid_ = -1;
        if (!exited) return -2;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

  private:
    pid_t pid_ = -1;
    int out_ = -1;
    std::string line_;
    uint16_t port_ = 0;
};

// The first child of `pid` (the program strace started), or 0.
inline pid_t first_child(pid_t pid) {
    const std::string list =
        slurp("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    return list.empty() ? 0 : static_cast<pid_t>(std::stol(list));
}

// A unit's service as systemd would start it on this machine: ExecStart= expanded with `env`
// (its environment file's variables, as the test sets them), its binary the build's `binary`
// (the unit must name /usr/local/bin/<the same name>), its StateDirectory= and LogsDirectory=
// under `root` (made 0700 as the units ask), and --listen on a loopback port the kernel picks.
// `error` says what does not fit: another binary, or an absolute path in the arguments outside
// the folders the unit makes writable (ProtectSystem=strict leaves no other writable).
struct ServiceCommand {
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;
    std::map<std::string, std::string> dirs;  // /var/lib/<d> and /var/log/<d>: where here
    std::string error;
};

inline ServiceCommand service_command(const Unit& unit, std::map<std::string, std::string> env,
                                      const std::string& binary, const std::string& root) {
    ServiceCommand c;
    c.env = std::move(env);
    c.argv = expand_exec(unit.get("Service", "ExecStart"), c.env);
    const std::string name = binary.substr(binary.rfind('/') + 1);
    if (c.argv.empty() || c.argv[0] != "/usr/local/bin/" + name) {
        c.error = "ExecStart does not start /usr/local/bin/" + name;
        return c;
    }
    c.argv[0] = binary;
    for (const auto& [key, base, here] : {std::tuple{"StateDirectory", "/var/lib/", "/state/"},
                                          std::tuple{"LogsDirectory", "/var/log/", "/logs/"}}) {
        std::istringstream names(unit.get("Service", key));
        std::string d;
        while (names >> d) {
            c.dirs[std::string(base) + d] = root + here + d;
            run("mkdir -p -m 700 " + quoted(root + here + d));
        }
    }
    for (size_t i = 1; i < c.argv.size(); ++i) {
        std::string& a = c.argv[i];
        if (a.empty() || a[0] != '/') continue;
        bool mapped = false;
        for (const auto& [from, to] : c.dirs) {
            if (a == from || a.starts_with(from + "/")) {
                a = to + a.substr(from.size());
                mapped = true;
                break;
            }
        }
        if (!mapped) c.error += "argument " + a + " is outside the unit's writable folders; ";
    }
    if (!replace_flag(c.argv, "--listen", "127.0.0.1:0")) c.error += "no --listen; ";
    return c;
}

// TimeoutStopSec= in milliseconds ("60s", "2min", "90"), or 0 when unset or not understood.
inline int stop_timeout_ms(const Unit& unit) {
    const std::string v = unit.get("Service", "TimeoutStopSec");
    if (v.empty()) return 0;
    size_t used = 0;
    const long n = std::stol(v, &used);
    const std::string unit_name = v.substr(used);
    if (unit_name.empty() || unit_name == "s") return static_cast<int>(n * 1000);
    if (unit_name == "min") return static_cast<int>(n * 60'000);
    return 0;
}

// A Prometheus text exposition: each family's type (from `# TYPE`), and each series name that
// has a sample with the label names its samples carry.
struct Exposition {
    std::map<std::string, std::string> types;
    std::map<std::string, std::set<std::string>> series_labels;

    // The family a series name belongs to: itself, or a histogram's with its suffix dropped.
    std::optional<std::string> family_of(const std::string& name) const {
        if (types.contains(name)) {
            return types.at(name) == "histogram" ? std::nullopt : std::optional(name);
        }
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
            const std::string s(suffix);
            if (!name.ends_with(s)) continue;
            const std::string base = name.substr(0, name.size() - s.size());
            auto it = types.find(base);
            if (it != types.end() && it->second == "histogram") return base;
        }
        return std::nullopt;
    }
};

inline Exposition read_exposition(const std::string& text) {
    Exposition e;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("# TYPE ")) {
            std::istringstream f(line.substr(7));
            std::string name, type;
            f >> name >> type;
            e.types[name] = type;
            continue;
        }
        if (line.empty() || line[0] == '#') continue;
        const size_t end = line.find_first_of("{ ");
        const std::string name = line.substr(0, end);
        auto& labels = e.series_labels[name];
        if (end == std::string::npos || line[end] != '{') continue;
        // name="value",...: a value's quotes may hold escaped quotes and commas.
        size_t i = end + 1;
        while (i < line.size() && line[i] != '}') {
            const size_t eq = line.find('=', i);
            if (eq == std::string::npos) break;
            labels.insert(line.substr(i, eq - i));
            i = eq + 2;  // past ="
            while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
            i += 1;  // the closing quote
            if (i < line.size() && line[i] == ',') ++i;
        }
    }
    return e;
}

// Each metric name a PromQL expression names (every `fenec_…` word, Fenec's prefix) with the
// label names its selector matches on, if it has a selector.
struct Selector {
    std::string name;
    std::set<std::string> labels;
};
inline std::vector<Selector> fenec_selectors(const std::string& expr) {
    std::vector<Selector> out;
    const auto word = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
    };
    size_t i = 0;
    while ((i = expr.find("fenec_", i)) != std::string::npos) {
        if (i > 0 && word(expr[i - 1])) {
            ++i;
            continue;
        }
        size_t end = i;
        while (end < expr.size() && word(expr[end])) ++end;
        Selector s{expr.substr(i, end - i), {}};
        if (end < expr.size() && expr[end] == '{') {
            size_t j = end + 1;
            while (j < expr.size() && expr[j] != '}') {
                while (j < expr.size() && (expr[j] == ' ' || expr[j] == ',')) ++j;
                size_t k = j;
                while (k < expr.size() && word(expr[k])) ++k;
                if (k > j) s.labels.insert(expr.substr(j, k - j));
                j = expr.find('"', k);
                if (j == std::string::npos) break;
                ++j;
                while (j < expr.size() && expr[j] != '"') j += expr[j] == '\\' ? 2 : 1;
                ++j;
                while (j < expr.size() && expr[j] == ' ') ++j;
            }
            end = j;
        }
        out.push_back(std::move(s));
        i = end;
    }
    return out;
}

}  // namespace fenec::test::deploy
