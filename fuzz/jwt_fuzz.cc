// fuzz/jwt_fuzz.cc: fuzz_jwt, arbitrary bytes as the bearer value of an Authorization header
// (server/node/auth.cc and jwt.cc: token comparison, base64url, JWT header and payload JSON, HS256
// and RS256 verification, the JWT cache), and the same bytes as a JWKS document, a Fenec-Router
// header, a Fenec-Relay header and base64url text. Seeds: fuzz/corpus/jwt/, HS256 tokens signed
// with `secret` below (valid until 2100, expired, not yet valid, alg none, kid o1, read scope, no
// tenant, tampered, crit) and an RS256 one for kid r1 whose signature cannot verify (the RSA key is
// drawn at start-up).
//
// Beyond "never crash, leak or read out of bounds", a broken contract traps:
//   - a refusal carries one of the fixed phrases below (so never any byte of the value) and no
//     identity; an acceptance carries a credential;
//   - a value is judged the same way twice (the second time through the cache when it verified);
//   - base64url decoding is canonical: whatever decodes encodes back to the same text;
//   - a JWKS that yields no key says why; a router or relay header never verifies
//     without its mark.
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "server/node/jwt.h"
#include "server/runtime/base64url.h"
#include "server/runtime/mark.h"

namespace {

using namespace fenec::auth;
using fenec::server::base64url_decode;
using fenec::server::base64url_encode;
using fenec::server::verify_relay_mark;
using fenec::server::verify_router_mark;

constexpr int64_t now_ms = 1'700'000'000'000;  // 2023-11-14; the seeds' times are set around it
constexpr std::string_view secret = "fuzz-secret-of-thirty-two-bytes!";

void check(bool ok) {
    if (!ok) __builtin_trap();
}

std::string bn_b64(EVP_PKEY* pkey, const char* name) {
    BIGNUM* bn = nullptr;
    if (EVP_PKEY_get_bn_param(pkey, name, &bn) != 1) return "";
    std::string bytes(static_cast<size_t>(BN_num_bytes(bn)), '\0');
    BN_bn2bin(bn, reinterpret_cast<unsigned char*>(bytes.data()));
    BN_free(bn);
    return base64url_encode(bytes);
}

// The secret, an oct key "o1" and a fresh RSA key "r1" in a JWKS file read once.
std::unique_ptr<Authenticator> make_authenticator() {
    std::string rsa;
    if (EVP_PKEY* pkey = EVP_RSA_gen(2048)) {
        rsa = ",{\"kty\":\"RSA\",\"kid\":\"r1\",\"n\":\"" + bn_b64(pkey, OSSL_PKEY_PARAM_RSA_N) +
              "\",\"e\":\"" + bn_b64(pkey, OSSL_PKEY_PARAM_RSA_E) + "\"}";
        EVP_PKEY_free(pkey);
    }
    std::string jwks = "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"o1\",\"k\":\"" +
                       base64url_encode("another-fuzz-secret-32-bytes-long") + "\"}" + rsa + "]}";
    char path[] = "/tmp/fuzz-jwt-jwks-XXXXXX";
    int fd = mkstemp(path);
    check(fd >= 0 && write(fd, jwks.data(), jwks.size()) == static_cast<ssize_t>(jwks.size()));
    close(fd);
    AuthConfig config;
    config.data_token = "fuzz-data-token";
    config.admin_token = "fuzz-admin-token";
    config.jwt_secret = std::string(secret);
    config.jwks_path = path;
    std::string error;
    auto a = Authenticator::create(config, error);
    unlink(path);  // read once; later reloads find it gone and keep the keys
    check(a != nullptr);
    return a;
}

const std::set<std::string, std::less<>>& phrases() {
    static const std::set<std::string, std::less<>> known = {
        "no Authorization header",
        "Authorization is not a Bearer credential",
        "Authorization Bearer carries no value",
        "the bearer value is not a credential of this node",
        "JWT longer than 8192 bytes",
        "JWT header is not base64url",
        "JWT header is not a JSON object",
        "JWT header alg or kid is not a string",
        "JWT header has no alg",
        "JWT header crit names extensions this node does not know",
        "JWT alg none is refused",
        "JWT alg is neither HS256 nor RS256",
        "JWT alg is not the algorithm of any configured key",
        "JWT kid names no configured key",
        "JWT signature is not base64url",
        "JWT signature does not verify",
        "JWT payload is not base64url",
        "JWT payload is not a JSON object",
        "JWT has no exp",
        "JWT exp is not a number",
        "JWT nbf is not a number",
        "JWT sub is not a string",
        "JWT scope is neither \"read\" nor \"write\"",
        "JWT expired",
        "JWT not valid yet (nbf)",
    };
    return known;
}

void check_verdict(const Verdict& v) {
    if (v.ok) {
        check(v.identity.credential != Credential::none && v.why.empty());
    } else {
        check(v.identity.credential == Credential::none && phrases().count(v.why) == 1);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static std::unique_ptr<Authenticator> auth = make_authenticator();
    std::string_view in(reinterpret_cast<const char*>(data), size);

    std::string header = "Bearer " + std::string(in);
    Verdict first = auth->identify(header, now_ms);
    check_verdict(first);
    Verdict second = auth->identify(header, now_ms);
    check(second.ok == first.ok && second.why == first.why);
    if (first.ok) {
        check(second.identity.tenant == first.identity.tenant &&
              second.identity.sub == first.identity.sub &&
              second.identity.exp_ms == first.identity.exp_ms);
    }
    check_verdict(auth->identify(in, now_ms));  // as the whole header value

    if (std::optional<std::string> bytes = base64url_decode(in)) {
        check(base64url_encode(*bytes) == in);
    }
    std::string error;
    if (jwks_usable_keys(in, error) == 0) check(!error.empty());
    std::string client;
    check(!verify_router_mark("fuzz-admin-token", in, "req-1", client) || !client.empty());
    client.clear();
    check(!verify_relay_mark("fuzz-root-token", in, "req-1", "GET", "/t/a", client) ||
          !client.empty());
    return 0;
}
