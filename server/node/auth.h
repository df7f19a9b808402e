// server/node/auth.h: fenec-node's credentials (node-http.md §1.1, §3, §12). It owns the three
// bearer tokens (data, admin, replication), JSON Web Tokens (HS256 with a secret or JWKS `oct`
// keys, RS256 with JWKS `RSA` keys), the JWKS file and its reloads, the cache of verified JWTs. It
// decides who a request is; which plane that credential reaches, and the 401/403 answers, are the
// node's. The delay before a 401 and the router's mark are the runtime's, shared with the router
// (server/runtime/refusal_delay.h, server/runtime/mark.h).
//
// Invariants: a bearer value is compared with the tokens in constant time, its length included
// (both sides are hashed with SHA-256 and the digests compared with CRYPTO_memcmp); a JWT is
// accepted only when its header's `alg` is the algorithm of the key that verifies it; a refusal's
// `why` never holds any byte of the presented value; no exception leaves this file; every table is
// bounded (limits below). Authenticator is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace fenec::auth {

// Limits (node-http.md §3, §12), each with its reason.
// §12: a bound on memory; verified tokens past it are evicted oldest first.
inline constexpr size_t jwt_cache_entries_max = 4096;
// §3.2: clocks of issuer and node disagree by this much at most.
inline constexpr int64_t jwt_skew_ms = 30'000;
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

enum class Credential : uint8_t { none, data, admin, replication, jwt };

std::string_view credential_name(Credential);  // "none", "data token", "admin token", ...

// Who a request is. For the three tokens only `credential` is meaningful and exp_ms is "never".
struct Identity {
    Credential credential = Credential::none;
    std::string sub;               // JWT `sub`; empty when absent
    std::string tenant;            // JWT `tenant`; empty when the JWT has no string claim (→ 403)
    bool read_only_scope = false;  // JWT `scope: "read"`
    int64_t exp_ms = std::numeric_limits<int64_t>::max();  // JWT `exp` in Unix ms
};

// What the node was started with. Unset = not configured; an empty string is refused by create().
struct AuthConfig {
    std::optional<std::string> data_token;         // --token / FENEC_TOKEN
    std::optional<std::string> admin_token;        // --admin-token / FENEC_ADMIN_TOKEN
    std::optional<std::string> replication_token;  // --replication-token / FENEC_REPLICATION_TOKEN
    std::optional<std::string> jwt_secret;         // --jwt-secret
    // --jwt-secret-file: read once by create(); one trailing "\n" or "\r\n" is dropped, so a file
    // written by `echo` holds the secret typed. Exclusive with jwt_secret.
    std::optional<std::string> jwt_secret_path;
    std::optional<std::string> jwks_path;  // --jwt-jwks
};

struct Verdict {
    bool ok = false;
    Identity identity;  // credential none when !ok
    std::string why;    // when !ok: the problem, for logs and the 401 body; never the value
};

struct KeySet;  // the JWT keys in force (auth.cc)

class Authenticator {
  public:
    // Validates the configuration as start-up does (node-http.md §1.1): nullptr, and `error` one
    // line naming the flag, when a token is empty, two tokens are equal, the secret is under 32
    // bytes, both secret flags are given, the secret file cannot be read, or the JWKS file cannot
    // be read or holds no usable key. Keys of a JWKS that cannot be used are skipped.
    static std::unique_ptr<Authenticator> create(const AuthConfig& config, std::string& error);
    ~Authenticator();
    Authenticator(const Authenticator&) = delete;
    Authenticator& operator=(const Authenticator&) = delete;

    // True when nothing guards `plane`: its token is not set (the data plane: neither the data
    // token nor a JWT key). Whether an open plane is served or absent (404) is the node's rule.
    // Credential::jwt asks about the data plane too; none is always open.
    bool plane_open(Credential plane) const;
    bool has_jwt_key() const { return jwt_configured_; }

    // Identifies the value of an Authorization header ("" when there is none) at Unix time
    // `now_ms`. "Bearer <v>" (scheme ASCII case-insensitive, one or more spaces) is compared with
    // the three tokens; failing that, a value with exactly two dots is verified as a JWT when a
    // key is configured (node-http.md §3.2). Rereads the JWKS file first when due (maybe_reload).
    Verdict identify(std::string_view authorization, int64_t now_ms);

    // Rereads the JWKS file if jwks_recheck_ms passed since the last look and its inode, size or
    // mtime changed. A file that no longer yields a usable key leaves the last good keys in force
    // (last_reload_error() says why). New keys drop the JWT cache. Returns true when keys changed.
    bool maybe_reload(int64_t now_ms);
    std::string last_reload_error() const;  // "" after a good read
    size_t cached_tokens() const;           // entries in the JWT cache (tests, metrics)

  private:
    Authenticator() = default;
    Verdict identify_jwt(std::string_view value, int64_t now_ms);
    std::shared_ptr<const KeySet> keys() const;

    struct Digest {
        unsigned char bytes[32];
    };
    std::optional<Digest> data_digest_, admin_digest_, replication_digest_;
    bool jwt_configured_ = false;
    std::optional<std::string> secret_;  // the kid-less HS256 key of --jwt-secret(-file)
    std::optional<std::string> jwks_path_;

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
