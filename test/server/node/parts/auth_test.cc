// test/server/node/parts/auth_test.cc: server/node/auth.h and jwt.h against node-http.md §1.1, §3
// and §12. Proves: the three tokens identify their credential and nothing else; start-up refusals
// name their flag; HS256 and RS256 JWTs are accepted only with the configured key's algorithm, a
// verifying signature, an exp inside the skew and an nbf that has passed; claims come out as
// Identity; a JWKS file's keys are chosen by kid, reloaded at most once a second, and kept when the
// file turns bad; the JWT cache is bounded, dropped on new keys, and checks exp on every hit. RSA
// keys are generated here with OpenSSL and written as JWKS independently of the code under test.
#include "server/node/auth.h"

#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "server/node/jwt.h"
#include "server/runtime/base64url.h"

namespace fenec::auth::auth_test {
namespace {

constexpr int64_t now_ms = 1'700'000'000'000;  // a fixed Unix time
constexpr int64_t now_s = now_ms / 1000;
const std::string secret = "0123456789abcdef0123456789abcdef";  // 32 bytes

std::string payload(const std::string& tenant, int64_t exp_s, const std::string& extra = "") {
    std::string p =
        "{\"tenant\":\"" + tenant + "\",\"sub\":\"u1\",\"exp\":" + std::to_string(exp_s);
    if (!extra.empty()) p += "," + extra;
    return p + "}";
}

std::string bearer(const std::string& v) { return "Bearer " + v; }

std::string b64(std::string_view s) { return server::base64url_encode(s); }

// ---- RSA keys for the tests (OpenSSL directly) ----

struct RsaKey {
    std::string pem;   // private, PKCS#8
    std::string n, e;  // public, big-endian bytes
};

std::string bn_bytes(EVP_PKEY* pkey, const char* name) {
    BIGNUM* bn = nullptr;
    if (EVP_PKEY_get_bn_param(pkey, name, &bn) != 1) return "";
    std::string out(static_cast<size_t>(BN_num_bytes(bn)), '\0');
    BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
    BN_free(bn);
    return out;
}

RsaKey make_rsa(unsigned bits) {
    RsaKey key;
    EVP_PKEY* pkey = EVP_RSA_gen(bits);
    if (pkey == nullptr) return key;
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, pkey, nullptr, nullptr, 0, nullptr, nullptr);
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    key.pem.assign(data, static_cast<size_t>(len));
    BIO_free(bio);
    key.n = bn_bytes(pkey, OSSL_PKEY_PARAM_RSA_N);
    key.e = bn_bytes(pkey, OSSL_PKEY_PARAM_RSA_E);
    EVP_PKEY_free(pkey);
    return key;
}

std::string rsa_jwk(const RsaKey& k, const std::string& kid) {
    return "{\"kty\":\"RSA\",\"kid\":\"" + kid + "\",\"use\":\"sig\",\"alg\":\"RS256\",\"n\":\"" +
           b64(k.n) + "\",\"e\":\"" + b64(k.e) + "\"}";
}

std::string oct_jwk(const std::string& k, const std::string& kid) {
    return "{\"kty\":\"oct\",\"kid\":\"" + kid + "\",\"k\":\"" + b64(k) + "\"}";
}

std::string jwks(const std::vector<std::string>& keys) {
    std::string s = "{\"keys\":[";
    for (size_t i = 0; i < keys.size(); ++i) s += (i ? "," : "") + keys[i];
    return s + "]}";
}

class AuthTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        k1_ = new RsaKey(make_rsa(2048));
        k2_ = new RsaKey(make_rsa(2048));
        small_ = new RsaKey(make_rsa(1024));
    }
    static void TearDownTestSuite() {
        delete k1_;
        delete k2_;
        delete small_;
    }
    void SetUp() override {
        char tmpl[] = "/tmp/fenec-auth-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // Writes `text` to `name` in the temp dir by rename, as a deployment would.
    std::string write(const std::string& name, const std::string& text) {
        std::string path = dir_ + "/" + name, tmp = path + ".tmp";
        std::ofstream(tmp, std::ios::binary) << text;
        std::filesystem::rename(tmp, path);
        return path;
    }

    std::unique_ptr<Authenticator> make(const AuthConfig& c) {
        std::string error;
        auto a = Authenticator::create(c, error);
        EXPECT_TRUE(a) << error;
        return a;
    }
    std::unique_ptr<Authenticator> hs() {
        AuthConfig c;
        c.jwt_secret = secret;
        return make(c);
    }
    std::string refusal(const AuthConfig& c) {
        std::string error;
        auto a = Authenticator::create(c, error);
        EXPECT_FALSE(a);
        return error;
    }

    static RsaKey* k1_;
    static RsaKey* k2_;
    static RsaKey* small_;
    std::string dir_;
};

RsaKey* AuthTest::k1_ = nullptr;
RsaKey* AuthTest::k2_ = nullptr;
RsaKey* AuthTest::small_ = nullptr;

// ---- tokens and start-up ----

TEST_F(AuthTest, TokensIdentifyTheirCredential) {
    AuthConfig c;
    c.data_token = "D-token";
    c.admin_token = "A-token";
    c.replication_token = "R-token";
    auto a = make(c);
    EXPECT_EQ(a->identify("Bearer D-token", now_ms).identity.credential, Credential::data);
    EXPECT_EQ(a->identify("bEaReR   A-token ", now_ms).identity.credential, Credential::admin);
    EXPECT_EQ(a->identify("Bearer R-token", now_ms).identity.credential, Credential::replication);
    EXPECT_TRUE(a->identify("Bearer D-token", now_ms).ok);

    for (const char* bad : {"Bearer D-toke", "Bearer D-token2", "Bearer d-token", "Basic D-token",
                            "BearerD-token", "Bearer", "", "Bearer a.b.c"}) {
        Verdict v = a->identify(bad, now_ms);
        EXPECT_FALSE(v.ok) << bad;
        EXPECT_EQ(v.identity.credential, Credential::none) << bad;
        EXPECT_FALSE(v.why.empty()) << bad;
        EXPECT_EQ(v.why.find("D-to"), std::string::npos) << v.why;
    }
    EXPECT_EQ(a->identify("", now_ms).why, "no Authorization header");
    EXPECT_FALSE(a->plane_open(Credential::data));
    EXPECT_FALSE(a->plane_open(Credential::admin));
    EXPECT_FALSE(a->plane_open(Credential::replication));
    EXPECT_TRUE(a->plane_open(Credential::none));
}

TEST_F(AuthTest, PlanesOpenWithoutTheirCredential) {
    auto open = make(AuthConfig{});
    EXPECT_TRUE(open->plane_open(Credential::data));
    EXPECT_TRUE(open->plane_open(Credential::admin));
    EXPECT_TRUE(open->plane_open(Credential::replication));
    EXPECT_FALSE(open->identify("Bearer anything", now_ms).ok);

    auto jwt_only = hs();  // a JWT key guards the data plane alone
    EXPECT_FALSE(jwt_only->plane_open(Credential::data));
    EXPECT_TRUE(jwt_only->plane_open(Credential::admin));
    EXPECT_TRUE(jwt_only->has_jwt_key());
}

TEST_F(AuthTest, StartUpRefusalsNameTheFlag) {
    AuthConfig c;
    c.data_token = "X";
    c.admin_token = "X";
    std::string e = refusal(c);
    EXPECT_NE(e.find("--token and --admin-token"), std::string::npos) << e;

    c = {};
    c.admin_token = "Y";
    c.replication_token = "Y";
    e = refusal(c);
    EXPECT_NE(e.find("--admin-token and --replication-token"), std::string::npos) << e;

    c = {};
    c.data_token = "";
    EXPECT_NE(refusal(c).find("--token"), std::string::npos);

    c = {};
    c.jwt_secret = std::string(16, 's');
    e = refusal(c);
    EXPECT_NE(e.find("--jwt-secret"), std::string::npos) << e;
    c.jwt_secret = std::string(31, 's');
    refusal(c);

    c = {};
    c.jwt_secret_path = write("short", std::string(20, 's') + "\n");
    EXPECT_NE(refusal(c).find("--jwt-secret-file"), std::string::npos);
    c.jwt_secret_path = dir_ + "/missing";
    EXPECT_NE(refusal(c).find("--jwt-secret-file"), std::string::npos);
    c.jwt_secret = secret;
    EXPECT_NE(refusal(c).find("exclusive"), std::string::npos);

    c = {};
    c.jwks_path = dir_ + "/missing.json";
    EXPECT_NE(refusal(c).find("--jwt-jwks"), std::string::npos);
    c.jwks_path = write("bad.json", "{\"keys\":[");
    EXPECT_NE(refusal(c).find("--jwt-jwks"), std::string::npos);
    c.jwks_path = write("none.json", "{\"keys\":[]}");
    refusal(c);
    c.jwks_path = write("weak.json", jwks({rsa_jwk(*small_, "s"), oct_jwk("short", "o")}));
    e = refusal(c);
    EXPECT_NE(e.find("under 2048 bits"), std::string::npos) << e;
    c.jwks_path =
        write("nokid.json", "{\"keys\":[{\"kty\":\"oct\",\"k\":\"" + b64(secret) + "\"}]}");
    EXPECT_NE(refusal(c).find("no kid"), std::string::npos);
}

TEST_F(AuthTest, SecretFileDropsOneTrailingNewline) {
    AuthConfig c;
    c.jwt_secret_path = write("secret", secret + "\n");
    auto a = make(c);
    EXPECT_TRUE(a->identify(bearer(sign_hs256(secret, payload("acme", now_s + 60))), now_ms).ok);
}

// ---- HS256 ----

TEST_F(AuthTest, Hs256GivesTheClaims) {
    auto a = hs();
    Verdict v = a->identify(bearer(sign_hs256(secret, payload("acme", now_s + 3600))), now_ms);
    ASSERT_TRUE(v.ok) << v.why;
    EXPECT_EQ(v.identity.credential, Credential::jwt);
    EXPECT_EQ(v.identity.tenant, "acme");
    EXPECT_EQ(v.identity.sub, "u1");
    EXPECT_FALSE(v.identity.read_only_scope);
    EXPECT_EQ(v.identity.exp_ms, (now_s + 3600) * 1000);

    v = a->identify(bearer(sign_hs256(secret, payload("acme", now_s + 60, "\"scope\":\"read\""))),
                    now_ms);
    ASSERT_TRUE(v.ok) << v.why;
    EXPECT_TRUE(v.identity.read_only_scope);
    v = a->identify(bearer(sign_hs256(secret, payload("acme", now_s + 60, "\"scope\":\"write\""))),
                    now_ms);
    EXPECT_TRUE(v.ok && !v.identity.read_only_scope);

    // A tenant that is not a string, or none: accepted with an empty tenant (the node's 403).
    v = a->identify(
        bearer(sign_hs256(secret, "{\"tenant\":7,\"exp\":" + std::to_string(now_s + 60) + "}")),
        now_ms);
    ASSERT_TRUE(v.ok) << v.why;
    EXPECT_EQ(v.identity.tenant, "");
    EXPECT_EQ(v.identity.sub, "");
    // A fractional exp is a NumericDate too; a kid the node cannot name still finds the secret.
    v = a->identify(bearer(sign_hs256(secret, "{\"exp\":" + std::to_string(now_s) + ".5}", "k")),
                    now_ms);
    ASSERT_TRUE(v.ok) << v.why;
    EXPECT_EQ(v.identity.exp_ms, now_ms + 500);
}

TEST_F(AuthTest, Hs256TimesWithSkew) {
    auto a = hs();
    auto at = [&](const std::string& p) {
        return a->identify(bearer(sign_hs256(secret, p)), now_ms);
    };
    EXPECT_TRUE(at(payload("acme", now_s - 29)).ok);  // inside the 30 s skew
    EXPECT_EQ(at(payload("acme", now_s - 31)).why, "JWT expired");
    EXPECT_EQ(at(payload("acme", now_s + 60, "\"nbf\":" + std::to_string(now_s + 31))).why,
              "JWT not valid yet (nbf)");
    EXPECT_TRUE(at(payload("acme", now_s + 60, "\"nbf\":" + std::to_string(now_s + 29))).ok);
    EXPECT_EQ(at("{\"tenant\":\"acme\",\"sub\":\"u1\"}").why, "JWT has no exp");
    EXPECT_EQ(at("{\"exp\":\"tomorrow\"}").why, "JWT exp is not a number");
    EXPECT_EQ(at(payload("acme", now_s + 60, "\"nbf\":null")).why, "JWT nbf is not a number");
}

TEST_F(AuthTest, Hs256Refusals) {
    auto a = hs();
    const std::string good_payload = payload("acme", now_s + 3600);
    auto why = [&](const std::string& token) {
        Verdict v = a->identify(bearer(token), now_ms);
        EXPECT_FALSE(v.ok);
        EXPECT_EQ(v.identity.credential, Credential::none);
        EXPECT_EQ(v.why.find(token.substr(0, 10)), std::string::npos);
        return v.why;
    };
    // alg none, with or without a signature.
    std::string none = b64("{\"alg\":\"none\",\"typ\":\"JWT\"}") + "." + b64(good_payload) + ".";
    EXPECT_EQ(why(none), "JWT alg none is refused");
    EXPECT_EQ(why(b64("{\"alg\":\"NONE\"}") + "." + b64(good_payload) + "."),
              "JWT alg none is refused");
    // Another alg: HS512, or RS256 when only a secret is set.
    std::string hs = sign_hs256(secret, good_payload);
    std::string body = hs.substr(hs.find('.'));
    EXPECT_EQ(why(b64("{\"alg\":\"HS512\"}") + body), "JWT alg is neither HS256 nor RS256");
    EXPECT_EQ(why(b64("{\"alg\":\"RS256\"}") + body),
              "JWT alg is not the algorithm of any configured key");
    EXPECT_EQ(why(b64("{\"typ\":\"JWT\"}") + body), "JWT header has no alg");
    EXPECT_EQ(why(b64("[1]") + body), "JWT header is not a JSON object");
    EXPECT_EQ(why(b64("{\"alg\":\"HS256\",\"crit\":[\"b64\"]}") + body),
              "JWT header crit names extensions this node does not know");
    // Another secret, a tampered payload, a padded or truncated signature.
    EXPECT_EQ(why(sign_hs256(std::string(32, 'x'), good_payload)), "JWT signature does not verify");
    size_t dot1 = hs.find('.'), dot2 = hs.rfind('.');
    std::string tampered =
        hs.substr(0, dot1 + 1) + b64(payload("globex", now_s + 3600)) + hs.substr(dot2);
    EXPECT_EQ(why(tampered), "JWT signature does not verify");
    EXPECT_EQ(why(hs + "="), "JWT signature is not base64url");
    EXPECT_EQ(why(hs.substr(0, hs.size() - 3)), "JWT signature does not verify");
    EXPECT_EQ(why("!!." + hs.substr(dot1 + 1)), "JWT header is not base64url");
    // Claims of a verifying token that are malformed.
    EXPECT_EQ(why(sign_hs256(secret, "[]")), "JWT payload is not a JSON object");
    EXPECT_EQ(why(sign_hs256(secret, payload("acme", now_s + 60, "\"scope\":\"admin\""))),
              "JWT scope is neither \"read\" nor \"write\"");
    EXPECT_EQ(why(sign_hs256(secret, "{\"sub\":5,\"exp\":" + std::to_string(now_s + 60) + "}")),
              "JWT sub is not a string");
    EXPECT_EQ(why(std::string(9000, 'a') + ".b.c"), "JWT longer than 8192 bytes");
    // A claim or header member named twice (RFC 7519 §4): the parser would read the first, an
    // issuer's library most often means the last.
    const std::string exp = std::to_string(now_s + 60);
    EXPECT_EQ(
        why(sign_hs256(secret, "{\"tenant\":\"beta\",\"tenant\":\"acme\",\"exp\":" + exp + "}")),
        "JWT payload names the claim `tenant` twice");
    EXPECT_EQ(why(sign_hs256(secret, "{\"tenant\":\"acme\",\"exp\":" + exp + ",\"exp\":1}")),
              "JWT payload names the claim `exp` twice");
    EXPECT_EQ(why(b64("{\"alg\":\"HS256\",\"alg\":\"none\"}") + body),
              "JWT header names `alg` twice");
    // Not two dots: never a JWT.
    EXPECT_EQ(why(hs + ".x"), "the bearer value is not a credential of this node");
    EXPECT_EQ(a->cached_tokens(), 0u);  // refusals are never cached
}

// ---- RS256 and JWKS ----

TEST_F(AuthTest, Rs256ThroughJwksWithKid) {
    AuthConfig c;
    c.jwks_path = write("jwks.json", jwks({rsa_jwk(*k1_, "k1")}));
    auto a = make(c);
    const std::string p = payload("acme", now_s + 3600);
    Verdict v = a->identify(bearer(sign_rs256(k1_->pem, p, "k1")), now_ms);
    ASSERT_TRUE(v.ok) << v.why;
    EXPECT_EQ(v.identity.tenant, "acme");
    EXPECT_TRUE(a->identify(bearer(sign_rs256(k1_->pem, p)), now_ms).ok);  // no kid: every key

    EXPECT_EQ(a->identify(bearer(sign_rs256(k2_->pem, p, "k1")), now_ms).why,
              "JWT signature does not verify");
    EXPECT_EQ(a->identify(bearer(sign_rs256(k2_->pem, p)), now_ms).why,
              "JWT signature does not verify");
    EXPECT_EQ(a->identify(bearer(sign_rs256(k1_->pem, p, "k9")), now_ms).why,
              "JWT kid names no configured key");
    // Algorithm confusion: HS256 keyed with the public modulus finds no HS256 key.
    EXPECT_EQ(a->identify(bearer(sign_hs256(k1_->n, p, "k1")), now_ms).why,
              "JWT alg is not the algorithm of any configured key");
    EXPECT_EQ(sign_rs256("not a pem", p), "");
}

TEST_F(AuthTest, JwksKidSelectsItsKeyOnly) {
    const std::string other = "another secret of 32 bytes......";
    AuthConfig c;
    c.jwks_path = write("jwks.json", jwks({oct_jwk(secret, "a"), oct_jwk(other, "b"),
                                           rsa_jwk(*k1_, "r"), rsa_jwk(*small_, "weak")}));
    auto a = make(c);
    const std::string p = payload("acme", now_s + 60);
    EXPECT_TRUE(a->identify(bearer(sign_hs256(secret, p, "a")), now_ms).ok);
    EXPECT_TRUE(a->identify(bearer(sign_hs256(other, p, "b")), now_ms).ok);
    EXPECT_TRUE(a->identify(bearer(sign_hs256(other, p)), now_ms).ok);
    EXPECT_EQ(a->identify(bearer(sign_hs256(other, p, "a")), now_ms).why,
              "JWT signature does not verify");
    EXPECT_EQ(a->identify(bearer(sign_hs256(secret, p, "r")), now_ms).why,
              "JWT kid names no configured key");  // r is RS256, not HS256
    EXPECT_EQ(a->identify(bearer(sign_rs256(small_->pem, p, "weak")), now_ms).why,
              "JWT kid names no configured key");  // the 1024-bit key was skipped
    std::string error;
    EXPECT_EQ(jwks_usable_keys("{\"keys\":[" + oct_jwk(secret, "a") + "]}", error), 1u);
    EXPECT_EQ(jwks_usable_keys("nope", error), 0u);
    EXPECT_FALSE(error.empty());
}

TEST_F(AuthTest, JwksReloadsAndKeepsLastGoodKeys) {
    AuthConfig c;
    c.jwks_path = write("jwks.json", jwks({rsa_jwk(*k1_, "k1")}));
    auto a = make(c);
    const std::string p = payload("acme", now_s + 3600);
    const std::string t1 = bearer(sign_rs256(k1_->pem, p, "k1"));
    const std::string t2 = bearer(sign_rs256(k2_->pem, p, "k2"));
    EXPECT_TRUE(a->identify(t1, now_ms).ok);
    EXPECT_EQ(a->cached_tokens(), 1u);
    EXPECT_FALSE(a->identify(t2, now_ms).ok);

    write("jwks.json", jwks({rsa_jwk(*k2_, "k2")}));
    EXPECT_FALSE(a->identify(t2, now_ms + 500).ok);  // looked at no more than once a second
    EXPECT_TRUE(a->identify(t2, now_ms + 1000).ok);
    EXPECT_FALSE(a->identify(t1, now_ms + 1000).ok);  // the cache went with the old keys
    EXPECT_EQ(a->last_reload_error(), "");

    write("jwks.json", "{\"keys\":[{\"kty\":\"RSA\"");  // half written
    EXPECT_FALSE(a->maybe_reload(now_ms + 2000));
    EXPECT_NE(a->last_reload_error().find("kept its last good keys"), std::string::npos);
    EXPECT_TRUE(a->identify(t2, now_ms + 2000).ok);
    std::filesystem::remove(dir_ + "/jwks.json");
    EXPECT_TRUE(a->identify(t2, now_ms + 3000).ok);
    EXPECT_NE(a->last_reload_error().find("cannot stat"), std::string::npos);

    write("jwks.json", jwks({rsa_jwk(*k1_, "k1"), rsa_jwk(*k2_, "k2")}));
    EXPECT_TRUE(a->maybe_reload(now_ms + 4000));
    EXPECT_TRUE(a->identify(t1, now_ms + 4000).ok);
    EXPECT_TRUE(a->identify(t2, now_ms + 4000).ok);
}

// A JWKS emptied on purpose (`{"keys":[]}`) is a revocation: every JWT its keys signed is
// refused, a --jwt-secret's stay good. A broken or missing file keeps the last good keys. Each
// reload that changed what is in force, or was refused, is said once (the node's stderr).
// Before, an emptied file was taken for a broken one: its keys stayed in force, and nothing said
// so.
TEST_F(AuthTest, AnEmptiedJwksRevokesItsKeysAndEveryReloadIsSaid) {
    std::vector<std::string> said;
    AuthConfig c;
    c.jwt_secret = secret;
    c.jwks_path = write("jwks.json", jwks({rsa_jwk(*k1_, "k1")}));
    c.on_jwks_reload = [&](const std::string& line) { said.push_back(line); };
    auto a = make(c);
    const std::string rs = bearer(sign_rs256(k1_->pem, payload("acme", now_s + 3600), "k1"));
    const std::string hs = bearer(sign_hs256(secret, payload("acme", now_s + 3600)));
    EXPECT_TRUE(a->identify(rs, now_ms).ok);

    write("jwks.json", "garbage");
    EXPECT_TRUE(a->identify(rs, now_ms + 1000).ok) << "a broken file keeps the last good keys";
    EXPECT_TRUE(a->identify(rs, now_ms + 2000).ok);
    ASSERT_EQ(said.size(), 1u) << "said once, not on every look";
    EXPECT_NE(said[0].find("kept its last good keys"), std::string::npos) << said[0];

    write("jwks.json", R"({"keys":[]})");
    EXPECT_FALSE(a->identify(rs, now_ms + 3000).ok) << "emptied: its keys are revoked";
    EXPECT_TRUE(a->identify(hs, now_ms + 3000).ok) << "the secret is not the file's";
    ASSERT_EQ(said.size(), 2u);
    EXPECT_NE(said[1].find("0 keys in force"), std::string::npos) << said[1];
    EXPECT_TRUE(a->has_jwt_key()) << "the plane stays guarded";

    write("jwks.json", jwks({rsa_jwk(*k1_, "k1")}));
    EXPECT_TRUE(a->identify(rs, now_ms + 4000).ok);
    ASSERT_EQ(said.size(), 3u);
    EXPECT_NE(said[2].find("1 key in force"), std::string::npos) << said[2];
}

TEST_F(AuthTest, JwksWithSecretKeepsTheSecretAcrossReloads) {
    AuthConfig c;
    c.jwt_secret = secret;
    c.jwks_path = write("jwks.json", jwks({rsa_jwk(*k1_, "k1")}));
    auto a = make(c);
    const std::string hs_token = bearer(sign_hs256(secret, payload("acme", now_s + 60)));
    EXPECT_TRUE(a->identify(hs_token, now_ms).ok);
    write("jwks.json", jwks({rsa_jwk(*k2_, "k2")}));
    EXPECT_TRUE(a->maybe_reload(now_ms + 1000));
    EXPECT_TRUE(a->identify(hs_token, now_ms + 1000).ok);
}

// ---- the cache ----

TEST_F(AuthTest, CacheReturnsTheSameAndStillChecksExp) {
    auto a = hs();
    const std::string t =
        bearer(sign_hs256(secret, payload("acme", now_s + 100, "\"scope\":\"read\"")));
    Verdict first = a->identify(t, now_ms);
    ASSERT_TRUE(first.ok);
    EXPECT_EQ(a->cached_tokens(), 1u);
    Verdict again = a->identify(t, now_ms + 1);
    ASSERT_TRUE(again.ok);
    EXPECT_EQ(a->cached_tokens(), 1u);
    EXPECT_EQ(again.identity.tenant, first.identity.tenant);
    EXPECT_EQ(again.identity.sub, first.identity.sub);
    EXPECT_EQ(again.identity.exp_ms, first.identity.exp_ms);
    EXPECT_TRUE(again.identity.read_only_scope);
    EXPECT_TRUE(a->identify(t, now_ms + 129'000).ok);
    EXPECT_EQ(a->identify(t, now_ms + 131'000).why, "JWT expired");
}

TEST_F(AuthTest, CacheIsBounded) {
    auto a = hs();
    for (size_t i = 0; i < jwt_cache_entries_max + 10; ++i) {
        std::string p = payload("t" + std::to_string(i), now_s + 60);
        ASSERT_TRUE(a->identify(bearer(sign_hs256(secret, p)), now_ms).ok);
    }
    EXPECT_EQ(a->cached_tokens(), jwt_cache_entries_max);
}

TEST_F(AuthTest, IdentifyFromManyThreadsWhileKeysReload) {
    AuthConfig c;
    c.jwt_secret = secret;
    c.data_token = "D";
    c.jwks_path = write("jwks.json", jwks({rsa_jwk(*k1_, "k1")}));
    auto a = make(c);
    const std::string rs = bearer(sign_rs256(k1_->pem, payload("acme", now_s + 3600), "k1"));
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 300; ++i) {
                int64_t at = now_ms + i * 20;
                std::string hs =
                    bearer(sign_hs256(secret, payload("t" + std::to_string(i % 50), now_s + 3600)));
                if (!a->identify(hs, at).ok || !a->identify(rs, at).ok ||
                    !a->identify("Bearer D", at).ok || a->identify("Bearer E", at).ok) {
                    ++failures;
                }
                if (t == 0 && i % 60 == 0) {
                    write("jwks.json",
                          jwks({rsa_jwk(*k1_, "k1"), oct_jwk(secret, std::to_string(i))}));
                }
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace fenec::auth::auth_test
