// server/runtime/mark.h: the routers' marks, one codec for the side that makes and the side that
// verifies each:
// - `Fenec-Router: <client address> <mark>` (node-http.md §3.3, router.md §5.3), made by
//   fenec-shard on every forwarded request and verified by fenec-node: the first 16 bytes,
//   base64url without padding, of HMAC-SHA256 keyed with the node's admin token over
//   "fenec-router\n<client address>\n<request id>".
// - `Fenec-Relay: <client address> <mark>` (router.md §11.5), made by a router relaying a request
//   to another region's router and verified by that router: the same cut of HMAC-SHA256 keyed
//   with the routers' shared `--token` over
//   "fenec-relay\n<client address>\n<request id>\n<method> <target>", so a mark lifted onto another
//   request (another id, method or target) does not verify.
//
// It is made from HMAC-SHA256 states prepared once per token and kept per thread: OpenSSL's
// one-shot HMAC() fetches its algorithm on every call (about 1.7 us), an EVP context copied per
// mark allocates and frees its provider state (about 0.2 us); the plain SHA256_CTX copied by value
// here allocates nothing. Both functions are thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fenec::server {

// Tokens whose prepared states a thread keeps; past it the table starts again (a router has a
// few nodes, so this is never reached in practice).
inline constexpr size_t mark_keys_per_thread_max = 256;

// The mark of `client_address` and `request_id` under `token` (a node's admin token).
std::string router_mark(std::string_view token, std::string_view client_address,
                        std::string_view request_id);

// Verifies `Fenec-Router: <client address> <mark>` (split at the last space) for `request_id`;
// on success sets client_out. False for an empty admin token, a malformed value or a wrong mark;
// the comparison takes the same time wherever the marks differ.
bool verify_router_mark(std::string_view admin_token, std::string_view header_value,
                        std::string_view request_id, std::string& client_out);

// The relay mark of a request (`method`, `target` as on its request line) under `token`, the
// routers' shared --token.
std::string relay_mark(std::string_view token, std::string_view client_address,
                       std::string_view request_id, std::string_view method,
                       std::string_view target);

// Verifies `Fenec-Relay: <client address> <mark>` for the request it arrived on; on success sets
// client_out. False for an empty token, a malformed value or a wrong mark, in constant time.
bool verify_relay_mark(std::string_view token, std::string_view header_value,
                       std::string_view request_id, std::string_view method,
                       std::string_view target, std::string& client_out);

}  // namespace fenec::server
