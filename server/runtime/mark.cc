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
#include <initializer_list>
#include <unordered_map>
#include <utility>

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

constexpr size_t mark_bytes = 16;  // of the 32 of the MAC

std::string encode(const unsigned char* mac) {
    return base64url_encode(std::string_view(reinterpret_cast<const char*>(mac), mark_bytes));
}

// A mark's message: its pieces joined by newlines, the first naming which mark it is.
using Pieces = std::initializer_list<std::string_view>;

// The same mark through OpenSSL's one-shot HMAC: for a state that could not be prepared (the
// low-level SHA-256 calls report failure only when the library itself is broken).
std::string one_shot_mark(std::string_view token, Pieces pieces) {
    std::string message;
    bool first = true;
    for (std::string_view piece : pieces) {
        if (!first) message += '\n';
        first = false;
        message += piece;
    }
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

// HMAC-SHA256 under `token` of the pieces joined by newlines, cut to 16 bytes, base64url.
std::string keyed_mark(std::string_view token, Pieces pieces) {
    thread_local std::unordered_map<std::string, Keyed, TokenHash, std::equal_to<>> keys;
    auto it = keys.find(token);
    if (it == keys.end()) {
        if (keys.size() >= mark_keys_per_thread_max) keys.clear();
        Keyed k;
        if (!prepare(token, k)) return one_shot_mark(token, pieces);
        it = keys.emplace(std::string(token), k).first;
    }
    std::array<unsigned char, 32> inner;
    std::array<unsigned char, 32> mac;
    SHA256_CTX w = it->second.inner;
    bool ok = true;
    bool first = true;
    for (std::string_view piece : pieces) {
        if (!first) ok = ok && SHA256_Update(&w, "\n", 1) == 1;
        first = false;
        ok = ok && SHA256_Update(&w, piece.data(), piece.size()) == 1;
    }
    ok = ok && SHA256_Final(inner.data(), &w) == 1;
    SHA256_CTX o = it->second.outer;
    if (!ok || SHA256_Update(&o, inner.data(), inner.size()) != 1 ||
        SHA256_Final(mac.data(), &o) != 1) {
        return one_shot_mark(token, pieces);
    }
    return encode(mac.data());
}

// `<client address> <mark>` split at the last space: the client, or empty for a malformed value.
std::pair<std::string_view, std::string_view> split_marked(std::string_view header_value) {
    header_value = trim(header_value);
    size_t space = header_value.rfind(' ');
    if (space == std::string_view::npos) return {};
    std::string_view client = trim(header_value.substr(0, space));
    for (char c : client) {
        if (c <= 0x20 || c >= 0x7f) return {};  // an address is printable ASCII, no spaces
    }
    return {client, header_value.substr(space + 1)};
}

bool same_mark(std::string_view given, const std::string& expected) {
    return given.size() == expected.size() &&
           CRYPTO_memcmp(given.data(), expected.data(), expected.size()) == 0;
}

}  // namespace

std::string router_mark(std::string_view token, std::string_view client_address,
                        std::string_view request_id) {
    return keyed_mark(token, {"fenec-router", client_address, request_id});
}

bool verify_router_mark(std::string_view admin_token, std::string_view header_value,
                        std::string_view request_id, std::string& client_out) {
    if (admin_token.empty()) return false;
    auto [client, mark] = split_marked(header_value);
    if (client.empty() || !same_mark(mark, router_mark(admin_token, client, request_id))) {
        return false;
    }
    client_out = std::string(client);
    return true;
}

std::string relay_mark(std::string_view token, std::string_view client_address,
                       std::string_view request_id, std::string_view method,
                       std::string_view target) {
    std::string line;
    line.reserve(method.size() + 1 + target.size());
    line.append(method).append(" ").append(target);
    return keyed_mark(token, {"fenec-relay", client_address, request_id, line});
}

bool verify_relay_mark(std::string_view token, std::string_view header_value,
                       std::string_view request_id, std::string_view method,
                       std::string_view target, std::string& client_out) {
    if (token.empty()) return false;
    auto [client, mark] = split_marked(header_value);
    if (client.empty() || !same_mark(mark, relay_mark(token, client, request_id, method, target))) {
        return false;
    }
    client_out = std::string(client);
    return true;
}

}  // namespace fenec::server
