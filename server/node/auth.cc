// server/node/auth.cc: the credentials of server/node/auth.h: the tokens compared by digest,
// JWTs handed to server/node/jwt.h. Nothing here throws.
#include "server/node/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>

#include "server/node/jwt.h"
#include "server/runtime/http.h"

namespace fenec::auth {

namespace {

using Sha256 = std::array<unsigned char, 32>;

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// "Bearer <v>" → v (maybe empty); nullopt for another scheme.
std::optional<std::string_view> bearer_value(std::string_view authorization) {
    constexpr std::string_view scheme = "bearer";
    if (authorization.size() < scheme.size()) return std::nullopt;
    if (!http::iequals(authorization.substr(0, scheme.size()), scheme)) return std::nullopt;
    std::string_view rest = authorization.substr(scheme.size());
    if (!rest.empty() && !is_space(rest.front())) return std::nullopt;  // "Bearerx"
    return trim(rest);
}

}  // namespace

Sha256 sha256(std::string_view data) {
    Sha256 out{};
    unsigned int len = 0;
    if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1) {
        out.fill(0);  // cannot happen with the default provider; a zero digest matches no token
    }
    return out;
}

std::string_view credential_name(Credential c) {
    switch (c) {
        case Credential::none:
            return "none";
        case Credential::data:
            return "data token";
        case Credential::admin:
            return "admin token";
        case Credential::replication:
            return "replication token";
        case Credential::jwt:
            return "JWT";
    }
    return "none";
}

// ---- Authenticator -------------------------------------------------------------------------

Authenticator::~Authenticator() = default;

std::unique_ptr<Authenticator> Authenticator::create(const AuthConfig& config, std::string& error) {
    struct Named {
        const char* flag;
        const std::optional<std::string>* value;
    };
    const Named tokens[] = {{"--token", &config.data_token},
                            {"--admin-token", &config.admin_token},
                            {"--replication-token", &config.replication_token}};
    for (const Named& t : tokens) {
        if (*t.value && (*t.value)->empty()) {
            error = std::string(t.flag) + " is empty";
            return nullptr;
        }
    }
    for (size_t i = 0; i < 3; ++i) {
        for (size_t j = i + 1; j < 3; ++j) {
            if (*tokens[i].value && *tokens[j].value && **tokens[i].value == **tokens[j].value) {
                error = std::string(tokens[i].flag) + " and " + tokens[j].flag +
                        " are equal; each plane needs its own token";
                return nullptr;
            }
        }
    }
    std::unique_ptr<Authenticator> a(new Authenticator());
    auto digest_of = [](const std::optional<std::string>& token) -> std::optional<Digest> {
        if (!token) return std::nullopt;
        Digest d;
        Sha256 h = sha256(*token);
        std::memcpy(d.bytes, h.data(), h.size());
        return d;
    };
    a->data_digest_ = digest_of(config.data_token);
    a->admin_digest_ = digest_of(config.admin_token);
    a->replication_digest_ = digest_of(config.replication_token);

    a->jwt_ = JwtVerifier::create(
        {config.jwt_secret, config.jwt_secret_path, config.jwks_path, config.on_jwks_reload},
        error);
    if (!a->jwt_) return nullptr;
    return a;
}

bool Authenticator::plane_open(Credential plane) const {
    switch (plane) {
        case Credential::none:
            return true;
        case Credential::data:
        case Credential::jwt:
            return !data_digest_ && !jwt_->configured();
        case Credential::admin:
            return !admin_digest_;
        case Credential::replication:
            return !replication_digest_;
    }
    return false;
}

bool Authenticator::has_jwt_key() const { return jwt_->configured(); }

bool Authenticator::maybe_reload(int64_t now_ms) { return jwt_->maybe_reload(now_ms); }

std::string Authenticator::last_reload_error() const { return jwt_->last_reload_error(); }

size_t Authenticator::cached_tokens() const { return jwt_->cached_tokens(); }

Verdict Authenticator::identify(std::string_view authorization, int64_t now_ms) {
    maybe_reload(now_ms);
    authorization = trim(authorization);
    if (authorization.empty()) return Verdict::refused("no Authorization header");
    std::optional<std::string_view> value = bearer_value(authorization);
    if (!value) return Verdict::refused("Authorization is not a Bearer credential");
    if (value->empty()) return Verdict::refused("Authorization Bearer carries no value");

    // Every configured token is compared, whatever matched, so timing says nothing of which.
    Sha256 digest = sha256(*value);
    Credential matched = Credential::none;
    const std::pair<const std::optional<Digest>*, Credential> tokens[] = {
        {&data_digest_, Credential::data},
        {&admin_digest_, Credential::admin},
        {&replication_digest_, Credential::replication}};
    for (const auto& [d, c] : tokens) {
        if (*d && CRYPTO_memcmp((*d)->bytes, digest.data(), digest.size()) == 0) matched = c;
    }
    if (matched != Credential::none) {
        Verdict v;
        v.ok = true;
        v.identity.credential = matched;
        return v;
    }
    if (jwt_->configured() && std::count(value->begin(), value->end(), '.') == 2) {
        return jwt_->verify(*value, now_ms);
    }
    return Verdict::refused("the bearer value is not a credential of this node");
}

}  // namespace fenec::auth
