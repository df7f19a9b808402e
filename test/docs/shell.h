// test/docs/shell.h: the one bash a page's ```sh blocks run in, one block at a time, so that
// variables and background jobs carry over from block to block as they do for a reader typing
// them. bash runs with `set -e` in its own process group: a failing command ends it (what the
// runner reports), and whatever the blocks left running is ended with it.
#pragma once

#include <sys/types.h>

#include <string>

namespace fenec::test::docs {

class Shell {
  public:
    // bash in `cwd`, its stderr (and its jobs') into `stderr_path`.
    Shell(const std::string& cwd, const std::string& stderr_path);
    // Ends bash (end of input, then SIGKILL to its process group for the jobs it left).
    ~Shell();
    Shell(const Shell&) = delete;
    Shell& operator=(const Shell&) = delete;

    struct Result {
        bool ok = false;  // the block ran to its end
        std::string out;  // its stdout
        std::string why;  // when not ok: how it ended
    };
    // Sources the script at `path` (stdin from /dev/null), waiting at most `timeout_ms`.
    Result run(const std::string& path, int timeout_ms);

    bool alive() const { return pid_ > 0; }

  private:
    bool write_commands(const std::string& cmd);

    pid_t pid_ = -1;
    int pidfd_ = -1;  // readable once bash has exited: waits poll it rather than sleep
    int in_ = -1;     // bash's stdin: the commands
    int out_ = -1;    // bash's stdout
    std::string stderr_path_;
    std::string pending_;  // stdout read past the last block's end mark
    int blocks_ = 0;
    bool out_eof_ = false;  // a block closed bash's stdout
};

}  // namespace fenec::test::docs
