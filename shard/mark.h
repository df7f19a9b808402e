// shard/mark.h: the router's mark on a forwarded request (`Fenec-Router`, server/auth.h
// router_mark), made from HMAC-SHA256 states prepared once per node token and kept per thread:
// OpenSSL's one-shot HMAC() fetches its algorithm on every call (about 1.7 us), an EVP context
// copied per mark allocates and frees its provider state (about 0.2 us); the plain SHA256_CTX
// copied by value here allocates nothing. The mark is made on every forwarded request.
#pragma once

#include <string>
#include <string_view>

namespace fenec::shard {

// Tokens whose prepared states a thread keeps; past it the table starts again (a router has a
// few nodes, so this is never reached in practice).
inline constexpr size_t mark_keys_per_thread_max = 256;

// The same value as auth::router_mark(token, client_address, request_id). Thread-safe.
std::string router_mark(std::string_view token, std::string_view client_address,
                        std::string_view request_id);

}  // namespace fenec::shard
