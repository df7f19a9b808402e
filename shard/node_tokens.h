// shard/node_tokens.h: where the router finds each node's admin token, so the secret itself is
// never written into the directory file, which is replicated to every standby router (router.md
// §4.1, §6.3; issue 17 item 8). A `nodes` row names one of:
// - `token_env`: an environment variable of each router's own process;
// - `token_file`: an absolute path each router reads from its own disk (0600, one line);
// - neither: the token given as `token` to `PUT /_shard/nodes/<n>`, kept in the sidecar
//   `<directory>.tokens` beside the directory file (0600, replaced durably). It is not in the
//   directory's feed: a standby router fetches the primary's sidecar over the replication
//   token's route `GET /_replication/tokens` after each change it applies, and keeps it in a
//   sidecar of its own (shard/standby.h), so it reaches the nodes as the primary does and has
//   the tokens when it is promoted.
// A directory written before these fields may hold a `token` in the row itself: it is read, and a
// primary moves it into the sidecar as it opens.
//
// Sidecar format: one line per node, `<name> <token>\n`; a name is [a-z0-9_-]{1,64}, so the first
// space ends it, and a token holds no CR or LF (refused on write).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "engine/status.h"

namespace fenec::shard {

// A token file is one line: a larger one is not a token file, and is refused unread.
inline constexpr uint64_t token_file_bytes_max = 4096;
// The sidecar holds a line per node: this bounds it at about 16 000 nodes of 256-byte tokens.
inline constexpr uint64_t token_sidecar_bytes_max = 4ull << 20;
// The suffix of the sidecar beside the directory file.
inline constexpr std::string_view token_sidecar_suffix = ".tokens";

// The token `token_env` or `token_file` names, read now from this process's environment or
// disk (one trailing newline dropped). invalid_argument naming the variable or file when it is
// unset, empty, holds a CR or LF, or cannot be read. Exactly one of the two is non-empty.
engine::Result<std::string> read_node_token(std::string_view token_env,
                                            std::string_view token_file);

// Whether `name` can name an environment variable: [A-Za-z_][A-Za-z0-9_]*, at most 255.
bool valid_env_name(std::string_view name);

// The sidecar `<directory>.tokens`: node name → token. Not thread-safe: the Directory calls it
// under its write mutex.
class TokenSidecar {
  public:
    explicit TokenSidecar(std::string path) : path_(std::move(path)) {}
    const std::string& path() const { return path_; }
    // Reads the file; absent is empty. A malformed line is corruption naming the file and line.
    engine::Status load();
    std::optional<std::string> get(std::string_view node) const;
    // The file rewritten with `node`'s token set, or removed; durable before it returns.
    // Unchanged content is not written. A token with CR or LF is invalid_argument.
    engine::Status put(std::string_view node, std::string_view token);
    engine::Status remove(std::string_view node);
    using Tokens = std::map<std::string, std::string, std::less<>>;
    const Tokens& all() const { return tokens_; }
    // The whole content replaced (a standby taking its primary's); unchanged is not written.
    engine::Status replace(const Tokens& tokens);

  private:
    engine::Status write(const Tokens& tokens);

    std::string path_;
    Tokens tokens_;
};

}  // namespace fenec::shard
