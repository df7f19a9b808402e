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

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace fenec::auth {

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
    // A line for people on each reload of --jwt-jwks that took keys or was refused.
    std::function<void(const std::string&)> on_jwks_reload;
};

struct Verdict {
    bool ok = false;
    Identity identity;  // credential none when !ok
    std::string why;    // when !ok: the problem, for logs and the 401 body; never the value

    static Verdict refused(std::string why) {
        Verdict v;
        v.why = std::move(why);
        return v;
    }
};

class JwtVerifier;  // server/node/jwt.h

class Authenticator {
  public:
    // Validates the configuration as start-up does (node-http.md §1.1): nullptr, and `error` one
    // line naming the flag, when a token is empty, two tokens are equal, or the JWT keys cannot
    // be read (JwtVerifier::create's refusals).
    static std::unique_ptr<Authenticator> create(const AuthConfig& config, std::string& error);
    ~Authenticator();
    Authenticator(const Authenticator&) = delete;
    Authenticator& operator=(const Authenticator&) = delete;

    // True when nothing guards `plane`: its token is not set (the data plane: neither the data
    // token nor a JWT key). Whether an open plane is served or absent (404) is the node's rule.
    // Credential::jwt asks about the data plane too; none is always open.
    bool plane_open(Credential plane) const;
    bool has_jwt_key() const;

    // Identifies the value of an Authorization header ("" when there is none) at Unix time
    // `now_ms`. "Bearer <v>" (scheme ASCII case-insensitive, one or more spaces) is compared with
    // the three tokens; failing that, a value with exactly two dots is verified as a JWT when a
    // key is configured (node-http.md §3.2). Rereads the JWKS file first when due (maybe_reload).
    Verdict identify(std::string_view authorization, int64_t now_ms);

    // The JWT keys' file and cache (JwtVerifier's).
    bool maybe_reload(int64_t now_ms);
    std::string last_reload_error() const;  // "" after a good read
    size_t cached_tokens() const;           // entries in the JWT cache (tests, metrics)

  private:
    Authenticator() = default;

    struct Digest {
        unsigned char bytes[32];
    };
    std::optional<Digest> data_digest_, admin_digest_, replication_digest_;
    std::unique_ptr<JwtVerifier> jwt_;
};

// SHA-256 of `data`: tokens are compared, and JWTs cached, by their digests.
std::array<unsigned char, 32> sha256(std::string_view data);

}  // namespace fenec::auth
