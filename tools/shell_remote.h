// tools/shell_remote.h: the shell's backend on a tenant of a running fenec-node or fenec-shard,
// named by a URL `http://HOST:PORT/t/<tenant>`: each statement is one `POST /t/<tenant>/query`
// (`{"query": …}`) through the project's blocking HTTP client, with the data token as
// `Authorization: Bearer`, and its answer's body is the outcome, whatever its status. A router
// forwards the request to the tenant's node as it is, so both answer alike.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tools/shell_backend.h"

namespace fenec::tools {

// An answer body the shell takes whole (it prints it whole): far past any answer a person reads
// in a shell, and what a node's default `--max-body` lets a client send it, four times over.
inline constexpr uint64_t remote_answer_bytes_max = 256ull << 20;

// The URL's parts.
struct RemoteTarget {
    std::string host;    // as the URL has it, for the Host field: `127.0.0.1:8081`, `[::1]:80`
    std::string addr;    // host:port to connect to (port 80 when the URL names none)
    std::string tenant;  // from the path `/t/<tenant>`
};

// Whether `arg` names a node (`http://…` or `https://…`) rather than a file.
bool is_remote(std::string_view arg);

// Reads `url`; false with `failure` said (https, no `/t/<tenant>` path, an empty host).
bool parse_remote(std::string_view url, RemoteTarget& out, std::string& failure);

// The tenant at `target` as a backend, once `GET /t/<tenant>/` has answered 200 (so a node not
// there, a wrong token or a missing tenant is said at once); else nullptr with `failure` said.
// `token` empty: no Authorization sent (a node whose data plane is open).
std::unique_ptr<Backend> open_remote_backend(const RemoteTarget& target, std::string token,
                                             std::string& failure);

}  // namespace fenec::tools
