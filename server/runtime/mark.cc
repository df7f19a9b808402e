// server/runtime/mark.cc: the router's mark (server/runtime/mark.h) from prepared HMAC-SHA256
// states. HMAC per RFC 2104: H((K ^ opad) || H((K ^ ipad) || m)), K padded to SHA-256's 64-byte
// block (hashed first when longer); the two keyed states are hashed once per token and copied per
// mark.
#include "server/runtime/mark.h"

// SHA256_Init and the SHA256_CTX struct are deprecated in OpenSSL 3 in favour of EVP, whose
// context copy frees and allocates its provider state on every call (about half of this
// mark's cost, `perf` on the router). The struct is copied by value here: no allocation.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <array>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "server/runtime/base64url.h"

namespace fenec::server {

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

constexpr std::string_view mark_prefix = "fenec-router\n";
constexpr size_t mark_bytes = 16;  // of the 32 of the MAC

std::string encode(const unsigned char* mac) {
    return base64url_encode(std::string_view(reinterpret_cast<const char*>(mac), mark_bytes));
}

// The same mark through OpenSSL's one-shot HMAC: for a state that could not be prepared (the
// low-level SHA-256 calls report failure only when the library itself is broken).
std::string one_shot_mark(std::string_view token, std::string_view client_address,
                          std::string_view request_id) {
    std::string message(mark_prefix);
    message += client_address;
    message += '\n';
    message += request_id;
    std::array<unsigned char, 32> mac{};
    unsigned int len = 0;
    HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
         reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(), &len);
    return encode(mac.data());
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
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
        if (!prepare(token, k)) return one_shot_mark(token, client_address, request_id);
        it = keys.emplace(std::string(token), k).first;
    }
    std::array<unsigned char, 32> inner;
    std::array<unsigned char, 32> mac;
    SHA256_CTX w = it->second.inner;
    const bool ok = SHA256_Update(&w, mark_prefix.data(), mark_prefix.size()) == 1 &&
                    SHA256_Update(&w, client_address.data(), client_address.size()) == 1 &&
                    SHA256_Update(&w, "\n", 1) == 1 &&
                    SHA256_Update(&w, request_id.data(), request_id.size()) == 1 &&
                    SHA256_Final(inner.data(), &w) == 1;
    SHA256_CTX o = it->second.outer;
    if (!ok || SHA256_Update(&o, inner.data(), inner.size()) != 1 ||
        SHA256_Final(mac.data(), &o) != 1) {
        return one_shot_mark(token, client_address, request_id);
    }
    return encode(mac.data());
}

bool verify_router_mark(std::string_view admin_token, std::string_view header_value,
                        std::string_view request_id, std::string& client_out) {
    if (admin_token.empty()) return false;
    header_value = trim(header_value);
    size_t space = header_value.rfind(' ');
    if (space == std::string_view::npos) return false;
    std::string_view client = trim(header_value.substr(0, space));
    std::string_view mark = header_value.substr(space + 1);
    if (client.empty()) return false;
    for (char c : client) {
        if (c <= 0x20 || c >= 0x7f) return false;  // an address is printable ASCII, no spaces
    }
    std::string expected = router_mark(admin_token, client, request_id);
    if (mark.size() != expected.size() ||
        CRYPTO_memcmp(mark.data(), expected.data(), expected.size()) != 0) {
        return false;
    }
    client_out = std::string(client);
    return true;
}

}  // namespace fenec::server
