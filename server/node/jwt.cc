// server/node/jwt.cc: JWT verification (HS256, RS256), JWKS parsing and reloads and the cache of
// server/node/jwt.h. OpenSSL does the cryptography, simdjson (DOM, error codes only) the JSON of
// JWT headers and payloads and of JWKS files. Nothing here throws; OpenSSL objects are owned by
// unique_ptr / shared_ptr with their free functions.
#include "server/node/jwt.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <vector>

#include "server/runtime/base64url.h"
#include "server/runtime/http.h"

namespace fenec::auth {

using server::base64url_decode;
using server::base64url_encode;

enum class Alg : uint8_t { hs256, rs256 };

struct Key {
    std::string kid;  // empty for the --jwt-secret key
    Alg alg;
    std::string secret;             // hs256
    std::shared_ptr<EVP_PKEY> rsa;  // rs256 public key
};

struct KeySet {
    std::vector<Key> keys;
    uint64_t generation = 0;  // moves with every change; the JWT cache belongs to one generation
};

namespace {

// Numeric dates are clamped here so adding the skew or multiplying by 1000 never overflows.
constexpr int64_t date_ms_limit = int64_t{1} << 62;

std::array<unsigned char, 32> hmac_sha256(std::string_view key, std::string_view data) {
    std::array<unsigned char, 32> out{};
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
         reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &len);
    return out;
}

void json_escape_into(std::string& out, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c < 0x20) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += ch;
        }
    }
}

std::string jwt_header(std::string_view alg, std::string_view kid) {
    std::string h = "{\"alg\":\"";
    h += alg;
    h += "\",\"typ\":\"JWT\"";
    if (!kid.empty()) {
        h += ",\"kid\":\"";
        json_escape_into(h, kid);
        h += '"';
    }
    h += '}';
    return h;
}

// A JSON number as Unix ms (RFC 7519 NumericDate: seconds, maybe fractional), clamped.
std::optional<int64_t> numeric_date_ms(simdjson::dom::element e) {
    constexpr int64_t seconds_limit = date_ms_limit / 1000;
    switch (e.type()) {
        case simdjson::dom::element_type::INT64: {
            int64_t s = 0;
            if (e.get_int64().get(s)) return std::nullopt;
            return std::clamp(s, -seconds_limit, seconds_limit) * 1000;
        }
        case simdjson::dom::element_type::UINT64: {
            return seconds_limit * 1000;  // only values past INT64_MAX land here
        }
        case simdjson::dom::element_type::DOUBLE: {
            double d = 0;
            if (e.get_double().get(d) || !std::isfinite(d)) return std::nullopt;
            d = std::clamp(d * 1000.0, -static_cast<double>(date_ms_limit),
                           static_cast<double>(date_ms_limit));
            return static_cast<int64_t>(d);
        }
        default:
            return std::nullopt;
    }
}

// Reads a whole file of at most `max` bytes.
bool read_file(const std::string& path, size_t max, std::string& out, std::string& error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        error = "cannot read " + path + ": " + std::strerror(errno);
        return false;
    }
    out.clear();
    char buf[4096];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        out.append(buf, static_cast<size_t>(in.gcount()));
        if (out.size() > max) {
            error = path + " is larger than " + std::to_string(max) + " bytes";
            return false;
        }
    }
    if (in.bad()) {
        error = "cannot read " + path;
        return false;
    }
    return true;
}

// ---- JWKS ----------------------------------------------------------------------------------

std::shared_ptr<EVP_PKEY> rsa_public_key(const std::string& n, const std::string& e) {
    auto bn_free = [](BIGNUM* b) { BN_free(b); };
    std::unique_ptr<BIGNUM, decltype(bn_free)> bn_n(
        BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()), static_cast<int>(n.size()),
                  nullptr),
        bn_free);
    std::unique_ptr<BIGNUM, decltype(bn_free)> bn_e(
        BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()), static_cast<int>(e.size()),
                  nullptr),
        bn_free);
    if (!bn_n || !bn_e) return nullptr;
    std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)> bld(OSSL_PARAM_BLD_new(),
                                                                        &OSSL_PARAM_BLD_free);
    if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
        OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
        return nullptr;
    }
    std::unique_ptr<OSSL_PARAM, decltype(&OSSL_PARAM_free)> params(
        OSSL_PARAM_BLD_to_param(bld.get()), &OSSL_PARAM_free);
    std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
        EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr), &EVP_PKEY_CTX_free);
    if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1) return nullptr;
    EVP_PKEY* pkey = nullptr;
    if (EVP_PKEY_fromdata(ctx.get(), &pkey, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) return nullptr;
    return std::shared_ptr<EVP_PKEY>(pkey, &EVP_PKEY_free);
}

// A string member, or nullopt when absent; `bad` when present and not a string.
std::optional<std::string_view> string_member(simdjson::dom::object obj, std::string_view name,
                                              bool& bad) {
    simdjson::dom::element v;
    if (obj.at_key(name).get(v) != simdjson::SUCCESS) return std::nullopt;
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) {
        bad = true;
        return std::nullopt;
    }
    return s;
}

std::optional<Key> unusable(std::string& why, const char* reason) {
    why = reason;
    return std::nullopt;
}

// One JWK → a key, or the reason it cannot be used.
std::optional<Key> parse_jwk(simdjson::dom::element jwk, std::string& why) {
    simdjson::dom::object obj;
    if (jwk.get_object().get(obj)) return unusable(why, "is not an object");
    bool bad = false;
    auto kid = string_member(obj, "kid", bad);
    auto kty = string_member(obj, "kty", bad);
    auto alg = string_member(obj, "alg", bad);
    auto use = string_member(obj, "use", bad);
    if (bad) return unusable(why, "has a member that should be a string and is not");
    if (!kid || kid->empty()) return unusable(why, "has no kid");
    if (use && *use != "sig") return unusable(why, "is not for signatures (use)");
    if (kty && *kty == "oct") {
        if (alg && *alg != "HS256") return unusable(why, "is oct but its alg is not HS256");
        auto k64 = string_member(obj, "k", bad);
        std::optional<std::string> k = k64 ? base64url_decode(*k64) : std::nullopt;
        if (!k || bad) return unusable(why, "has no base64url k");
        if (k->size() < hs256_key_bytes_min) {
            return unusable(why, "is an oct key under 32 bytes");
        }
        return Key{std::string(*kid), Alg::hs256, std::move(*k), nullptr};
    }
    if (kty && *kty == "RSA") {
        if (alg && *alg != "RS256") return unusable(why, "is RSA but its alg is not RS256");
        auto n64 = string_member(obj, "n", bad);
        auto e64 = string_member(obj, "e", bad);
        std::optional<std::string> n = n64 ? base64url_decode(*n64) : std::nullopt;
        std::optional<std::string> e = e64 ? base64url_decode(*e64) : std::nullopt;
        if (!n || !e || bad || n->empty() || e->empty()) {
            return unusable(why, "has no base64url n and e");
        }
        if (n->size() * 8 > static_cast<size_t>(rsa_bits_max) + 8 || e->size() > 8) {
            return unusable(why, "is an RSA key too large to verify with");
        }
        auto pkey = rsa_public_key(*n, *e);
        if (!pkey) return unusable(why, "is not a valid RSA public key");
        int bits = EVP_PKEY_get_bits(pkey.get());
        if (bits < rsa_bits_min) return unusable(why, "is an RSA key under 2048 bits");
        if (bits > rsa_bits_max) return unusable(why, "is an RSA key too large to verify with");
        return Key{std::string(*kid), Alg::rs256, {}, std::move(pkey)};
    }
    why = "has a kty other than oct and RSA";
    return std::nullopt;
}

// Appends the usable keys of a JWKS document to `out`; `error` names the first problem.
size_t parse_jwks(std::string_view json, std::vector<Key>& out, std::string& error,
                  bool* empty = nullptr) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array keys;
    if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) {
        error = "is not JSON";
        return 0;
    }
    if (doc["keys"].get_array().get(keys) != simdjson::SUCCESS) {
        error = "has no \"keys\" array";
        return 0;
    }
    if (empty) *empty = keys.size() == 0;
    size_t usable = 0, index = 0;
    for (simdjson::dom::element jwk : keys) {
        ++index;
        std::string why;
        std::optional<Key> key = parse_jwk(jwk, why);
        if (key) {
            bool duplicate = std::any_of(out.begin(), out.end(),
                                         [&](const Key& k) { return k.kid == key->kid; });
            if (!duplicate) {
                out.push_back(std::move(*key));
                ++usable;
                continue;
            }
            why = "repeats the kid of an earlier key";
        }
        if (error.empty()) error = "key " + std::to_string(index) + " " + why;
    }
    if (usable == 0 && error.empty()) error = "has no keys";
    return usable;
}

// ---- JWT -----------------------------------------------------------------------------------

bool verify_signature(const Key& key, std::string_view signed_part, std::string_view sig) {
    if (key.alg == Alg::hs256) {
        auto mac = hmac_sha256(key.secret, signed_part);
        return sig.size() == mac.size() && CRYPTO_memcmp(mac.data(), sig.data(), mac.size()) == 0;
    }
    if (static_cast<int>(sig.size()) != EVP_PKEY_get_size(key.rsa.get())) return false;
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    if (!ctx ||
        EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.rsa.get()) != 1) {
        return false;
    }
    return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()),
                            sig.size(), reinterpret_cast<const unsigned char*>(signed_part.data()),
                            signed_part.size()) == 1;
}

struct Claims {
    Identity identity;
    int64_t nbf_ms = std::numeric_limits<int64_t>::min();
};

// A member name an object holds twice (RFC 7515 §4, RFC 7519 §4), or none. A JWT is at most
// 8 KiB, so its members are few.
std::optional<std::string> named_twice(simdjson::dom::object obj) {
    std::vector<std::string_view> names;
    for (auto field : obj) {
        if (std::find(names.begin(), names.end(), field.key) != names.end()) {
            return std::string(field.key);
        }
        names.push_back(field.key);
    }
    return std::nullopt;
}

// The header's alg and kid, once it is known to be a JSON object. "" why = fine.
std::string read_header(simdjson::dom::parser& parser, std::string_view header_json,
                        std::string& alg, std::optional<std::string>& kid) {
    simdjson::dom::element doc;
    simdjson::dom::object obj;
    if (parser.parse(header_json.data(), header_json.size()).get(doc) != simdjson::SUCCESS ||
        doc.get_object().get(obj) != simdjson::SUCCESS) {
        return "JWT header is not a JSON object";
    }
    if (auto twice = named_twice(obj)) return "JWT header names `" + *twice + "` twice";
    bool bad = false;
    auto a = string_member(obj, "alg", bad);
    auto k = string_member(obj, "kid", bad);
    if (bad) return "JWT header alg or kid is not a string";
    if (!a) return "JWT header has no alg";
    simdjson::dom::element crit;
    if (obj.at_key("crit").get(crit) == simdjson::SUCCESS) {
        return "JWT header crit names extensions this node does not know";  // RFC 7515 §4.1.11
    }
    alg = std::string(*a);
    if (k) kid = std::string(*k);
    return "";
}

// The claims of a payload whose signature verified. "" why = fine.
std::string read_claims(simdjson::dom::parser& parser, std::string_view payload_json,
                        Claims& claims) {
    simdjson::dom::element doc;
    simdjson::dom::object obj;
    if (parser.parse(payload_json.data(), payload_json.size()).get(doc) != simdjson::SUCCESS ||
        doc.get_object().get(obj) != simdjson::SUCCESS) {
        return "JWT payload is not a JSON object";
    }
    // RFC 7519 §4: a claim named twice is refused. The parser reads the first; an issuer's
    // library most often writes the last, and the two would disagree on the tenant, the expiry
    // or the scope.
    if (auto twice = named_twice(obj)) return "JWT payload names the claim `" + *twice + "` twice";
    simdjson::dom::element v;
    if (obj.at_key("exp").get(v) != simdjson::SUCCESS) return "JWT has no exp";
    std::optional<int64_t> exp = numeric_date_ms(v);
    if (!exp) return "JWT exp is not a number";
    claims.identity.exp_ms = *exp;
    if (obj.at_key("nbf").get(v) == simdjson::SUCCESS) {
        std::optional<int64_t> nbf = numeric_date_ms(v);
        if (!nbf) return "JWT nbf is not a number";
        claims.nbf_ms = *nbf;
    }
    bool bad = false;
    // A tenant claim that is not a string leaves tenant empty: the node answers 403 (§3.2).
    auto tenant = string_member(obj, "tenant", bad);
    if (tenant) claims.identity.tenant = std::string(*tenant);
    bad = false;
    auto sub = string_member(obj, "sub", bad);
    if (bad) return "JWT sub is not a string";
    if (sub) claims.identity.sub = std::string(*sub);
    auto scope = string_member(obj, "scope", bad);
    if (bad || (scope && *scope != "read" && *scope != "write")) {
        return "JWT scope is neither \"read\" nor \"write\"";
    }
    claims.identity.read_only_scope = scope && *scope == "read";
    claims.identity.credential = Credential::jwt;
    return "";
}

std::string check_times(const Identity& id, int64_t nbf_ms, int64_t now_ms) {
    if (expired(id, now_ms)) return "JWT expired";
    if (now_ms + jwt_skew_ms < nbf_ms) return "JWT not valid yet (nbf)";
    return "";
}

// Verifies `token` (exactly two dots) against `keys`; claims on success, why otherwise.
std::string verify_jwt(std::string_view token, const KeySet& keys, Claims& claims) {
    size_t dot1 = token.find('.');
    size_t dot2 = token.find('.', dot1 + 1);
    std::optional<std::string> header = base64url_decode(token.substr(0, dot1));
    if (!header) return "JWT header is not base64url";
    simdjson::dom::parser parser;
    std::string alg;
    std::optional<std::string> kid;
    if (std::string why = read_header(parser, *header, alg, kid); !why.empty()) return why;
    Alg want;
    if (alg == "HS256") {
        want = Alg::hs256;
    } else if (alg == "RS256") {
        want = Alg::rs256;
    } else if (http::iequals(alg, "none")) {
        return "JWT alg none is refused";
    } else {
        return "JWT alg is neither HS256 nor RS256";
    }
    // A kid selects the keys of that kid; a kid naming no JWKS key may still be the kid-less
    // --jwt-secret key's (issuers add kids the node's flag cannot name). No kid: every key.
    std::vector<const Key*> candidates;
    bool alg_configured = false;
    for (const Key& k : keys.keys) {
        if (k.alg != want) continue;
        alg_configured = true;
        if (!kid || k.kid == *kid) candidates.push_back(&k);
    }
    if (!alg_configured) return "JWT alg is not the algorithm of any configured key";
    if (candidates.empty()) {
        for (const Key& k : keys.keys) {
            if (k.alg == want && k.kid.empty()) candidates.push_back(&k);
        }
        if (candidates.empty()) return "JWT kid names no configured key";
    }
    std::optional<std::string> sig = base64url_decode(token.substr(dot2 + 1));
    if (!sig) return "JWT signature is not base64url";
    std::string_view signed_part = token.substr(0, dot2);
    bool verified = std::any_of(candidates.begin(), candidates.end(), [&](const Key* k) {
        return verify_signature(*k, signed_part, *sig);
    });
    if (!verified) return "JWT signature does not verify";
    std::optional<std::string> payload = base64url_decode(token.substr(dot1 + 1, dot2 - dot1 - 1));
    if (!payload) return "JWT payload is not base64url";
    return read_claims(parser, *payload, claims);
}

bool stamp_file(const std::string& path, uint64_t& ino, uint64_t& size, int64_t& mtime_ns) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    ino = static_cast<uint64_t>(st.st_ino);
    size = static_cast<uint64_t>(st.st_size);
    mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    return true;
}

}  // namespace

// ---- JwtVerifier ---------------------------------------------------------------------------

JwtVerifier::~JwtVerifier() = default;

std::unique_ptr<JwtVerifier> JwtVerifier::create(const JwtConfig& config, std::string& error) {
    std::unique_ptr<JwtVerifier> v(new JwtVerifier());
    auto keys = std::make_shared<KeySet>();
    keys->generation = 1;
    if (config.secret && config.secret_path) {
        error = "--jwt-secret and --jwt-secret-file are exclusive";
        return nullptr;
    }
    const char* secret_flag = config.secret_path ? "--jwt-secret-file" : "--jwt-secret";
    std::optional<std::string> secret = config.secret;
    if (config.secret_path) {
        std::string text, why;
        if (!read_file(*config.secret_path, secret_file_bytes_max, text, why)) {
            error = std::string(secret_flag) + ": " + why;
            return nullptr;
        }
        if (text.ends_with('\n')) text.pop_back();
        if (text.ends_with('\r')) text.pop_back();
        secret = std::move(text);
    }
    if (secret) {
        if (secret->size() < hs256_key_bytes_min) {
            error = std::string(secret_flag) + " is " + std::to_string(secret->size()) +
                    " bytes; an HS256 key needs at least 32";
            return nullptr;
        }
        keys->keys.push_back(Key{"", Alg::hs256, *secret, nullptr});
        v->secret_ = std::move(secret);
    }
    if (config.jwks_path) {
        // Stamped before reading: a change racing the read is seen by the next maybe_reload.
        FileStamp& s = v->stamp_;
        stamp_file(*config.jwks_path, s.ino, s.size, s.mtime_ns);
        std::string text, why;
        if (!read_file(*config.jwks_path, jwks_bytes_max, text, why)) {
            error = "--jwt-jwks: " + why;
            return nullptr;
        }
        std::vector<Key> jwks;
        if (parse_jwks(text, jwks, why) == 0) {
            error = "--jwt-jwks: " + *config.jwks_path + " holds no usable key: " + why;
            return nullptr;
        }
        for (Key& k : jwks) keys->keys.push_back(std::move(k));
        v->jwks_path_ = config.jwks_path;
        v->on_reload_ = config.on_reload;
    }
    v->configured_ = !keys->keys.empty();
    v->cache_generation_ = keys->generation;
    v->keys_ = std::move(keys);
    return v;
}

std::shared_ptr<const KeySet> JwtVerifier::keys() const {
    std::lock_guard lock(keys_mu_);
    return keys_;
}

std::string JwtVerifier::last_reload_error() const {
    std::lock_guard lock(keys_mu_);
    return last_reload_error_;
}

size_t JwtVerifier::cached_tokens() const {
    std::lock_guard lock(cache_mu_);
    return cache_.size();
}

bool JwtVerifier::maybe_reload(int64_t now_ms) {
    if (!jwks_path_ || now_ms < next_check_ms_.load(std::memory_order_relaxed)) return false;
    std::unique_lock reload(reload_mu_, std::try_to_lock);
    if (!reload.owns_lock() || now_ms < next_check_ms_.load(std::memory_order_relaxed)) {
        return false;
    }
    next_check_ms_.store(now_ms + jwks_recheck_ms, std::memory_order_relaxed);
    FileStamp now_stamp;
    std::string text, why;
    // Said once a change: a file gone stays gone until its stamp changes.
    auto refused = [&](std::string line) {
        {
            std::lock_guard lock(keys_mu_);
            if (line == last_reload_error_) return false;
            last_reload_error_ = line;
        }
        if (on_reload_) on_reload_(line);
        return false;
    };
    if (!stamp_file(*jwks_path_, now_stamp.ino, now_stamp.size, now_stamp.mtime_ns)) {
        int err = errno;
        stamp_ = FileStamp{};  // read it again once it is back, whatever its stamp
        return refused("--jwt-jwks: cannot stat " + *jwks_path_ + ": " + std::strerror(err) +
                       "; the last good keys stay in force");
    }
    if (now_stamp == stamp_) return false;
    stamp_ = now_stamp;
    std::vector<Key> jwks;
    bool empty = false;
    if (!read_file(*jwks_path_, jwks_bytes_max, text, why) ||
        (parse_jwks(text, jwks, why, &empty) == 0 && !empty)) {
        return refused("--jwt-jwks: " + *jwks_path_ + " kept its last good keys: " + why);
    }
    auto fresh = std::make_shared<KeySet>();
    if (secret_) fresh->keys.push_back(Key{"", Alg::hs256, *secret_, nullptr});
    for (Key& k : jwks) fresh->keys.push_back(std::move(k));
    {
        std::lock_guard lock(keys_mu_);
        fresh->generation = keys_->generation + 1;
        keys_ = fresh;
        last_reload_error_.clear();
    }
    if (on_reload_) {
        on_reload_("--jwt-jwks: " + *jwks_path_ + " read again: " + std::to_string(jwks.size()) +
                   (jwks.size() == 1 ? " key" : " keys") + " in force" +
                   (jwks.empty() ? ", every JWT its old keys signed refused" : ""));
    }
    std::lock_guard lock(cache_mu_);
    cache_.clear();
    cache_order_.clear();
    cache_generation_ = fresh->generation;
    return true;
}

Verdict JwtVerifier::verify(std::string_view value, int64_t now_ms) {
    if (value.size() > jwt_bytes_max) return Verdict::refused("JWT longer than 8192 bytes");
    const std::array<unsigned char, 32> digest = sha256(value);
    std::string cache_key(reinterpret_cast<const char*>(digest.data()), digest.size());
    {
        std::lock_guard lock(cache_mu_);
        auto it = cache_.find(cache_key);
        if (it != cache_.end()) {
            // The signature held when cached; the clock still decides on every use (§3.2).
            std::string why = check_times(it->second.identity, it->second.nbf_ms, now_ms);
            if (!why.empty()) return Verdict::refused(std::move(why));
            return Verdict{true, it->second.identity, ""};
        }
    }
    std::shared_ptr<const KeySet> snapshot = keys();
    Claims claims;
    if (std::string why = verify_jwt(value, *snapshot, claims); !why.empty()) {
        return Verdict::refused(std::move(why));
    }
    if (std::string why = check_times(claims.identity, claims.nbf_ms, now_ms); !why.empty()) {
        return Verdict::refused(std::move(why));
    }
    {
        std::lock_guard lock(cache_mu_);
        // Keys changed while verifying: the entry would outlive them, so it is not kept.
        if (cache_generation_ == snapshot->generation && !cache_.contains(cache_key)) {
            while (cache_.size() >= jwt_cache_entries_max && !cache_order_.empty()) {
                cache_.erase(cache_order_.front());
                cache_order_.pop_front();
            }
            cache_.emplace(cache_key, CacheEntry{claims.identity, claims.nbf_ms});
            cache_order_.push_back(std::move(cache_key));
        }
    }
    return Verdict{true, std::move(claims.identity), ""};
}

// ---- JWKS check and token minting ----------------------------------------------------------

size_t jwks_usable_keys(std::string_view json, std::string& error) {
    std::vector<Key> keys;
    return parse_jwks(json, keys, error);
}

std::string sign_hs256(std::string_view secret, std::string_view payload_json,
                       std::string_view kid) {
    std::string token = base64url_encode(jwt_header("HS256", kid));
    token += '.';
    token += base64url_encode(payload_json);
    auto mac = hmac_sha256(secret, token);
    token += '.';
    token += base64url_encode(std::string_view(reinterpret_cast<const char*>(mac.data()), 32));
    return token;
}

std::string sign_rs256(std::string_view private_key_pem, std::string_view payload_json,
                       std::string_view kid) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(
        BIO_new_mem_buf(private_key_pem.data(), static_cast<int>(private_key_pem.size())),
        &BIO_free);
    if (!bio) return "";
    // No passphrase callback may prompt on a terminal: an encrypted key simply does not parse.
    auto no_passphrase = [](char*, int, int, void*) -> int { return 0; };
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
        PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr), &EVP_PKEY_free);
    if (!pkey || EVP_PKEY_get_base_id(pkey.get()) != EVP_PKEY_RSA) return "";
    std::string token = base64url_encode(jwt_header("RS256", kid));
    token += '.';
    token += base64url_encode(payload_json);
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    size_t len = 0;
    const auto* data = reinterpret_cast<const unsigned char*>(token.data());
    if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey.get()) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &len, data, token.size()) != 1) {
        return "";
    }
    std::string sig(len, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, data,
                       token.size()) != 1) {
        return "";
    }
    sig.resize(len);
    token += '.';
    token += base64url_encode(sig);
    return token;
}

}  // namespace fenec::auth
