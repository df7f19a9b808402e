// server/node/jwt.h: the node's JSON Web Tokens (node-http.md §1.1, §3.2, §12): HS256 with the
// --jwt-secret key or JWKS `oct` keys, RS256 with JWKS `RSA` keys, the JWKS file and its reloads,
// and the cache of verified tokens. What a verified token makes of a request (its Identity) is
// the vocabulary of server/node/auth.h, whose Authenticator asks this file about any bearer value
// that is not one of the node's three tokens.
//
// Invariants: a JWT is accepted only when its header's `alg` is the algorithm of the key that
// verifies it; a refusal's `why` never holds any byte of the presented value; no exception leaves
// this file; the cache and the files read are bounded (limits below). JwtVerifier is thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "server/node/auth.h"

namespace fenec::auth {

// Limits (node-http.md §3, §12), each with its reason.
// §12: a bound on memory; verified tokens past it are evicted oldest first.
inline constexpr size_t jwt_cache_entries_max = 4096;
// §3.2: clocks of issuer and node disagree by this much at most.
inline constexpr int64_t jwt_skew_ms = 30'000;

// §3.2: whether `who` has expired at `now_ms` (Unix ms): a JWT past its `exp` by more than the
// skew. The tokens never expire. The door's check, and the one a request that waited meets again.
inline bool expired(const Identity& who, int64_t now_ms) {
    return now_ms - jwt_skew_ms > who.exp_ms;
}
// §1.1: an HS256 key shorter than the hash output is guessable offline (RFC 7518 §3.2).
inline constexpr size_t hs256_key_bytes_min = 32;
// §1.1: NIST SP 800-57's floor for RSA.
inline constexpr int rsa_bits_min = 2048;
// Verifying with a larger key costs too much per request; no issuer uses one.
inline constexpr int rsa_bits_max = 16384;
// §1.1: the JWKS file is looked at no more often than this.
inline constexpr int64_t jwks_recheck_ms = 1000;
// A JWKS file past this is refused rather than read: a few keys take a few KiB.
inline constexpr size_t jwks_bytes_max = 1024 * 1024;
// A secret file past this is not a secret (--jwt-secret-file).
inline constexpr size_t secret_file_bytes_max = 64 * 1024;
// A JWT longer than this is refused before any decoding: it bounds the work a bad value costs.
// Real tokens are well under 2 KiB; the head limit (64 KiB) would allow far more.
inline constexpr size_t jwt_bytes_max = 8 * 1024;

struct KeySet;  // the JWT keys in force (jwt.cc)

// The JWT part of a node's configuration (AuthConfig's).
struct JwtConfig {
    std::optional<std::string> secret;       // --jwt-secret
    std::optional<std::string> secret_path;  // --jwt-secret-file (see AuthConfig)
    std::optional<std::string> jwks_path;    // --jwt-jwks
    // A line for people on each reload of the JWKS file that changed what is in force or was
    // refused (the node's stderr): the keys taken, or why the last good ones stay.
    std::function<void(const std::string&)> on_reload;
};

class JwtVerifier {
  public:
    // Reads the keys as start-up does (node-http.md §1.1): nullptr, and `error` one line naming
    // the flag, when the secret is under 32 bytes, both secret flags are given, the secret file
    // cannot be read, or the JWKS file cannot be read or holds no usable key. Keys of a JWKS that
    // cannot be used are skipped. With none of the three it holds no key (configured() false).
    static std::unique_ptr<JwtVerifier> create(const JwtConfig& config, std::string& error);
    ~JwtVerifier();
    JwtVerifier(const JwtVerifier&) = delete;
    JwtVerifier& operator=(const JwtVerifier&) = delete;

    bool configured() const { return configured_; }  // a key is held

    // Verifies `value` (a bearer value with exactly two dots) at Unix time `now_ms` against the
    // keys in force, through the cache; the identity of its claims when it verifies.
    Verdict verify(std::string_view value, int64_t now_ms);

    // Rereads the JWKS file if jwks_recheck_ms passed since the last look and its inode, size or
    // mtime changed. A file that no longer yields a usable key leaves the last good keys in force
    // (last_reload_error() says why, and on_reload): one half-written, or gone, is no revocation.
    // A JWKS whose "keys" array is empty is one: its keys are dropped (a --jwt-secret stays), and
    // every JWT they signed is refused. New keys drop the cache. Returns true when keys changed.
    bool maybe_reload(int64_t now_ms);
    std::string last_reload_error() const;  // "" after a good read
    size_t cached_tokens() const;           // entries in the cache (tests, metrics)

  private:
    JwtVerifier() = default;
    std::shared_ptr<const KeySet> keys() const;

    bool configured_ = false;
    std::optional<std::string> secret_;  // the kid-less HS256 key of --jwt-secret(-file)
    std::optional<std::string> jwks_path_;
    std::function<void(const std::string&)> on_reload_;

    mutable std::mutex keys_mu_;  // guards keys_ and last_reload_error_
    std::shared_ptr<const KeySet> keys_;
    std::string last_reload_error_;
    std::mutex reload_mu_;  // one reader of the file at a time; others skip (try_lock)
    std::atomic<int64_t> next_check_ms_{0};
    struct FileStamp {
        uint64_t ino = 0, size = 0;
        int64_t mtime_ns = 0;
        bool operator==(const FileStamp&) const = default;
    };
    FileStamp stamp_;  // of the last file read, good or bad (under reload_mu_)

    struct CacheEntry {
        Identity identity;
        int64_t nbf_ms;
    };
    mutable std::mutex cache_mu_;
    uint64_t cache_generation_ = 0;  // the KeySet generation the entries were verified under
    std::unordered_map<std::string, CacheEntry> cache_;  // by SHA-256 of the token's text
    std::deque<std::string> cache_order_;                // insertion order, for eviction
};

// Counts the usable keys of a JWKS document (the rules of --jwt-jwks); 0 with `error` naming the
// first problem when none is. Used by fuzz_jwt and by tools that check a file before deploying it.
size_t jwks_usable_keys(std::string_view json, std::string& error);

// For tests and tools that mint tokens. The header is {"alg":..,"typ":"JWT"} plus "kid" when
// given; `payload_json` is used as is. sign_rs256 takes a PEM private key (PKCS#8 or PKCS#1) and
// returns "" when it does not parse as an RSA key.
std::string sign_hs256(std::string_view secret, std::string_view payload_json,
                       std::string_view kid = "");
std::string sign_rs256(std::string_view private_key_pem, std::string_view payload_json,
                       std::string_view kid = "");

}  // namespace fenec::auth
