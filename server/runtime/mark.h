// server/runtime/mark.h: the router's mark (`Fenec-Router`, node-http.md §3.3, router.md §5.3),
// made by fenec-shard on every forwarded request and verified by fenec-node: one codec for both
// sides. The mark is the first 16 bytes, base64url without padding, of HMAC-SHA256 keyed with the
// node's admin token over "fenec-router\n<client address>\n<request id>".
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

}  // namespace fenec::server
