// test/tools/run_tool.h: a command run as a process through /bin/sh, with its exit status, its
// stdout and its stderr kept apart, for the tests of the `fenec` command line.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fenec::test {

struct ToolRun {
    int status = -1;
    std::string out;
    std::string err;
};

// `command` run by the shell (environment assignments may lead it); stderr through a file.
inline ToolRun run_tool(const std::string& command) {
    static std::atomic<int> counter{0};
    const std::string err_path =
        (std::filesystem::temp_directory_path() /
         ("fenec-tool-err-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
            .string();
    ToolRun r;
    FILE* p = ::popen((command + " 2>'" + err_path + "'").c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::ifstream in(err_path);
    std::stringstream s;
    s << in.rdbuf();
    r.err = s.str();
    std::filesystem::remove(err_path);
    return r;
}

// `fenec <args>`, after the environment assignments in `env` ("FENEC_ADMIN_TOKEN=x").
inline ToolRun fenec(const std::string& args, const std::string& env = {}) {
    return run_tool((env.empty() ? "" : env + " ") + "'" + FENEC_CLI_BIN + "' " + args);
}

}  // namespace fenec::test
