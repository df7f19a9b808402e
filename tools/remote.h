// tools/remote.h: what the `fenec` commands ask of a running node or router, over the project's
// one blocking HTTP client (server/runtime/client.h): a URL read, the credentials chosen, small
// JSON calls, and a tenant's image streamed from a node into a file (GET …/file) or from a file
// into a node (PUT …/file), each with a progress bar.
//
// Credentials (docs/tools.md says why): the node's admin token (`--admin-token`, env
// FENEC_ADMIN_TOKEN, as fenec-node reads its own), one per node where they differ
// (`--node-token NAME=TOKEN`), and the router's token (`--router-token`, env FENEC_SHARD_TOKEN, as
// fenec-shard reads its own). The router never hands out a node's token, so a command that goes
// through a router asks it where a tenant lives and then speaks to that node with the node's own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/runtime/client.h"
#include "tools/cli.h"
#include "tools/image_files.h"

namespace fenec::tools {

// A node's or router's URL: `http://host:port`, optionally `/t/<tenant>`.
struct Url {
    std::string addr;    // host:port
    std::string tenant;  // empty: none named
};
// nullopt with `why` set when `text` is not such a URL.
std::optional<Url> parse_url(std::string_view text, std::string& why);

struct Tokens {
    std::optional<std::string> router;
    std::optional<std::string> admin;
    std::vector<std::pair<std::string, std::string>> per_node;  // node name, token

    // The admin token for the node `name` (its own when given, else --admin-token).
    std::optional<std::string> for_node(std::string_view name) const;
};

// The options every remote command takes for its credentials.
std::vector<Option> token_options();
// Reads them; a --node-token that is not NAME=TOKEN is `why`.
std::optional<Tokens> read_tokens(const Args& args, std::string& why);

// A node as a command speaks to it.
struct NodeRef {
    std::string name;  // its name behind a router; its address otherwise
    std::string addr;
    std::optional<std::string> token;  // its admin token
};

// An image's Fenec-* headers (docs/http-node.md), as a node sends them and takes them back.
struct ImageHeaders {
    uint64_t bytes = 0;
    uint64_t seq = 0;
    std::string history;
    std::string lineage;
    std::string digest;
};

// An answer, or why there is none (`error` non-empty).
struct Reply {
    int status = 0;
    std::string body;
    std::string error;

    bool answered() const { return error.empty(); }
    // What the far end said went wrong: its JSON `error`, else the start of its body.
    std::string said() const;
};

class Remote {
  public:
    Remote();

    Reply call(const std::string& addr, std::string_view method, std::string_view target,
               const std::optional<std::string>& token, std::string_view json_body = {});

    // Whether `addr` is a router (its /_health names a `scope`) rather than a node; nullopt
    // with `why` when it does not answer as either.
    std::optional<bool> is_router(const std::string& addr, std::string& why);

    // The node holding `tenant` behind the router at `router`, with its admin token from
    // `tokens`; nullopt with `why` (`missing` set when the router has no such tenant).
    std::optional<NodeRef> locate(const std::string& router, const std::string& tenant,
                                  const Tokens& tokens, std::string& why, bool& missing);
    // The node `name` as the router lists it.
    std::optional<NodeRef> node_named(const std::string& router, const std::string& name,
                                      const Tokens& tokens, std::string& why);

    // GET /_admin/tenants/<t>/file into `out` (not finished: the caller checks and finishes it).
    // Empty on success with `headers` filled and the bytes' digest checked against them; else
    // why not.
    std::string fetch_image(const NodeRef& node, const std::string& tenant, ImageWriter& out,
                            ImageHeaders& headers);
    // PUT /_admin/tenants/<t>/file from the file at `path`, its headers sent for the node to
    // check. 409 comes back before the body is sent (Expect: 100-continue).
    Reply send_image(const NodeRef& node, const std::string& tenant, const std::string& path,
                     const ImageHeaders& headers);

  private:
    server::CallRequest request(const std::string& addr, const std::string& peer_text) const;
    server::BlockingClient client_;
};

}  // namespace fenec::tools
