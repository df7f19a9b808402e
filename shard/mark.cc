// shard/mark.cc: the router's mark from prepared HMAC-SHA256 states (shard/mark.h). HMAC per
// RFC 2104: H((K ^ opad) || H((K ^ ipad) || m)), K padded to SHA-256's 64-byte block (hashed
// first when longer); the two keyed states are hashed once per token and copied per mark.
#include "shard/mark.h"

#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "server/auth.h"

namespace fenec::shard {

namespace {

constexpr size_t block_bytes = 64;  // SHA-256's block

struct CtxFree {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_MD_CTX, CtxFree>;

struct Keyed {
    Ctx inner;
    Ctx outer;
};

bool prepare(std::string_view token, Keyed& k) {
    std::array<unsigned char, block_bytes> key{};
    if (token.size() > block_bytes) {
        unsigned int len = 0;
        if (EVP_Digest(token.data(), token.size(), key.data(), &len, EVP_sha256(), nullptr) != 1) {
            return false;
        }
    } else {
        std::memcpy(key.data(), token.data(), token.size());
    }
    std::array<unsigned char, block_bytes> ipad;
    std::array<unsigned char, block_bytes> opad;
    for (size_t i = 0; i < block_bytes; ++i) {
        ipad[i] = key[i] ^ 0x36;
        opad[i] = key[i] ^ 0x5c;
    }
    k.inner.reset(EVP_MD_CTX_new());
    k.outer.reset(EVP_MD_CTX_new());
    return k.inner && k.outer && EVP_DigestInit_ex(k.inner.get(), EVP_sha256(), nullptr) == 1 &&
           EVP_DigestUpdate(k.inner.get(), ipad.data(), ipad.size()) == 1 &&
           EVP_DigestInit_ex(k.outer.get(), EVP_sha256(), nullptr) == 1 &&
           EVP_DigestUpdate(k.outer.get(), opad.data(), opad.size()) == 1;
}

struct ThreadKeys {
    std::unordered_map<std::string, Keyed> keys;
    Ctx work{EVP_MD_CTX_new()};
};

}  // namespace

std::string router_mark(std::string_view token, std::string_view client_address,
                        std::string_view request_id) {
    thread_local ThreadKeys t;
    auto it = t.keys.find(std::string(token));
    if (it == t.keys.end()) {
        if (t.keys.size() >= mark_keys_per_thread_max) t.keys.clear();
        Keyed k;
        if (!t.work || !prepare(token, k)) {
            return auth::router_mark(token, client_address, request_id);
        }
        it = t.keys.emplace(std::string(token), std::move(k)).first;
    }
    EVP_MD_CTX* w = t.work.get();
    std::array<unsigned char, 32> inner;
    std::array<unsigned char, 32> mac;
    unsigned int len = 0;
    static constexpr std::string_view prefix = "fenec-router\n";
    const bool ok = EVP_MD_CTX_copy_ex(w, it->second.inner.get()) == 1 &&
                    EVP_DigestUpdate(w, prefix.data(), prefix.size()) == 1 &&
                    EVP_DigestUpdate(w, client_address.data(), client_address.size()) == 1 &&
                    EVP_DigestUpdate(w, "\n", 1) == 1 &&
                    EVP_DigestUpdate(w, request_id.data(), request_id.size()) == 1 &&
                    EVP_DigestFinal_ex(w, inner.data(), &len) == 1 &&
                    EVP_MD_CTX_copy_ex(w, it->second.outer.get()) == 1 &&
                    EVP_DigestUpdate(w, inner.data(), inner.size()) == 1 &&
                    EVP_DigestFinal_ex(w, mac.data(), &len) == 1;
    if (!ok) return auth::router_mark(token, client_address, request_id);
    return auth::base64url_encode(std::string_view(reinterpret_cast<const char*>(mac.data()), 16));
}

}  // namespace fenec::shard
