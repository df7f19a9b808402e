// shard/mark.cc: the router's mark from prepared HMAC-SHA256 states (shard/mark.h). HMAC per
// RFC 2104: H((K ^ opad) || H((K ^ ipad) || m)), K padded to SHA-256's 64-byte block (hashed
// first when longer); the two keyed states are hashed once per token and copied per mark.
#include "shard/mark.h"

// SHA256_Init and the SHA256_CTX struct are deprecated in OpenSSL 3 in favour of EVP, whose
// context copy frees and allocates its provider state on every call (about half of this
// mark's cost, `perf` on the router). The struct is copied by value here: no allocation.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <array>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "server/auth.h"

namespace fenec::shard {

namespace {

constexpr size_t block_bytes = 64;  // SHA-256's block

struct Keyed {
    SHA256_CTX inner;  // the key ^ ipad block hashed
    SHA256_CTX outer;  // the key ^ opad block hashed
};

bool prepare(std::string_view token, Keyed& k) {
    std::array<unsigned char, block_bytes> key{};
    if (token.size() > block_bytes) {
        SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), key.data());
    } else {
        std::memcpy(key.data(), token.data(), token.size());
    }
    std::array<unsigned char, block_bytes> ipad;
    std::array<unsigned char, block_bytes> opad;
    for (size_t i = 0; i < block_bytes; ++i) {
        ipad[i] = key[i] ^ 0x36;
        opad[i] = key[i] ^ 0x5c;
    }
    return SHA256_Init(&k.inner) == 1 && SHA256_Update(&k.inner, ipad.data(), ipad.size()) == 1 &&
           SHA256_Init(&k.outer) == 1 && SHA256_Update(&k.outer, opad.data(), opad.size()) == 1;
}

// Looked up by the token's view: no string made per mark.
struct TokenHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

std::string router_mark(std::string_view token, std::string_view client_address,
                        std::string_view request_id) {
    thread_local std::unordered_map<std::string, Keyed, TokenHash, std::equal_to<>> keys;
    auto it = keys.find(token);
    if (it == keys.end()) {
        if (keys.size() >= mark_keys_per_thread_max) keys.clear();
        Keyed k;
        if (!prepare(token, k)) return auth::router_mark(token, client_address, request_id);
        it = keys.emplace(std::string(token), k).first;
    }
    std::array<unsigned char, 32> inner;
    std::array<unsigned char, 32> mac;
    static constexpr std::string_view prefix = "fenec-router\n";
    SHA256_CTX w = it->second.inner;
    const bool ok = SHA256_Update(&w, prefix.data(), prefix.size()) == 1 &&
                    SHA256_Update(&w, client_address.data(), client_address.size()) == 1 &&
                    SHA256_Update(&w, "\n", 1) == 1 &&
                    SHA256_Update(&w, request_id.data(), request_id.size()) == 1 &&
                    SHA256_Final(inner.data(), &w) == 1;
    SHA256_CTX o = it->second.outer;
    if (!ok || SHA256_Update(&o, inner.data(), inner.size()) != 1 ||
        SHA256_Final(mac.data(), &o) != 1) {
        return auth::router_mark(token, client_address, request_id);
    }
    return auth::base64url_encode(std::string_view(reinterpret_cast<const char*>(mac.data()), 16));
}

}  // namespace fenec::shard
