// server/node/idempotency.cc: `Idempotency-Key` (node-http.md §5.7). A key's answer is a row of
// the tenant's `_idempotency` collection landing in the same block as the write it answers, so
// no crash separates them and it travels in images and to replicas; rows expire through the
// collection's @ttl. The table key → row is rebuilt from the collection as the tenant opens.
#include <openssl/evp.h>

#include "json/writer.h"
#include "server/node/handlers.h"

namespace fenec::node {

namespace {

constexpr std::string_view key_collection = "_idempotency";
constexpr size_t key_bytes_max = 255;            // §4.1
constexpr size_t stored_body_bytes_max = 64 << 10;  // §5.7: a larger answer is stored as a note

enum Slot : uint16_t { k_key = 0, k_user, k_fingerprint, k_status, k_body, k_at };

// `at @ttl(--idempotency-ttl)`: the row expires that long after its write. The collection keeps
// the ttl it was created with.
engine::Schema key_schema(int64_t ttl_ms) {
    auto field = [](std::string name, engine::BaseType base) {
        engine::FieldDesc f;
        f.name = std::move(name);
        f.type.base = base;
        return f;
    };
    engine::Schema s;
    s.fields = {field("key", engine::BaseType::Text), field("user", engine::BaseType::Text),
                field("fingerprint", engine::BaseType::Text), field("status", engine::BaseType::Int),
                field("body", engine::BaseType::Text), field("at", engine::BaseType::Timestamp)};
    s.fields[k_at].index.kind = engine::IndexKind::ttl;
    s.fields[k_at].index.ttl_ms = ttl_ms;
    return s;
}

std::string sha256_hex(std::initializer_list<std::string_view> parts) {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    for (std::string_view p : parts) {
        EVP_DigestUpdate(ctx, p.data(), p.size());
        EVP_DigestUpdate(ctx, "\n", 1);
    }
    unsigned char md[32];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx, md, &n);
    EVP_MD_CTX_free(ctx);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; ++i) {
        out += digits[md[i] >> 4];
        out += digits[md[i] & 0xf];
    }
    return out;
}

std::string text_of(const engine::DocView& doc, uint16_t slot) {
    engine::Value v = doc.get(slot);
    if (const auto* s = std::get_if<std::string>(&v.rep)) return *s;
    return "";
}

}  // namespace

void load_idempotency_keys(Tenant& t) {
    engine::ReadView view = t.db().read();
    engine::Result<engine::CollectionId> c = view.find(key_collection);
    if (!c.is_ok()) return;
    view.scan(*c, [&](engine::DocId id, engine::DocView doc) {
        t.remember_key(text_of(doc, k_user) + "\n" + text_of(doc, k_key), id);
        return true;
    });
}

std::optional<KeyedWrite> begin_key(Node& node, Call& call, Tenant& t,
                                    std::optional<http::Response>& refusal) {
    const http::RequestHead& h = call.request.head;
    const std::optional<std::string_view> sent = h.header("Idempotency-Key");
    if (!sent) return std::nullopt;
    const std::string_view key = *sent;
    bool ok = !key.empty() && key.size() <= key_bytes_max;
    for (char ch : key) ok &= ch >= 0x21 && ch <= 0x7e;
    if (!ok) {
        refusal = node.refusal(400, "Idempotency-Key must be 1 to 255 bytes of visible ASCII");
        return std::nullopt;
    }
    std::string user = "data";
    if (call.who.credential == auth::Credential::jwt) {
        if (call.who.sub.empty()) {
            refusal = node.refusal(400, "a JWT without `sub` cannot send an Idempotency-Key: keys are "
                                        "kept per user");
            return std::nullopt;
        }
        user = "jwt:" + call.who.sub;
    }
    KeyedWrite w;
    w.key = std::string(key);
    w.user_key = user + "\n" + w.key;
    w.fingerprint = sha256_hex({http::method_name(h.method), h.target, call.request.body});
    w.at_ms = node.now_ms();
    w.ttl_ms = std::max<int64_t>(1, int64_t{node.options().idempotency_ttl_s} * 1000);
    t.claim_key(w.user_key);  // the same key in flight: wait for it (§5.7)
    w.claimed = true;
    if (std::optional<engine::DocId> row = t.key_row(w.user_key)) {
        engine::ReadView view = t.db().read();
        engine::Result<engine::CollectionId> c = view.find(key_collection);
        std::optional<engine::DocView> doc = c.is_ok() ? view.get(*c, *row) : std::nullopt;
        if (doc) {  // an expired row is as never seen
            if (text_of(*doc, k_fingerprint) != w.fingerprint) {
                node.counters().conflicts->inc();
                refusal = node.refusal(
                    422, "Idempotency-Key `" + w.key + "` was used for another request", {},
                    [&](json::Writer& jw) {
                        jw.key("key");
                        jw.string(w.key);
                    });
            } else {
                node.counters().replays->inc();
                http::Response r;
                engine::Value st = doc->get(k_status);
                r.status = static_cast<int>(std::get_if<int64_t>(&st.rep) ? *std::get_if<int64_t>(&st.rep) : 200);
                r.body = text_of(*doc, k_body);
                r.header("Idempotent-Replayed", "true");
                r.header("Fenec-Seq", std::to_string(view.seq().v));
                r.header("Fenec-History", engine::format::hex16(t.db().history().current().v));
                refusal = std::move(r);
            }
            t.release_key(w.user_key);
            return std::nullopt;
        }
    }
    return w;
}

engine::Status store_key(engine::Block& block, KeyedWrite& key, int status, const std::string& body) {
    engine::Result<engine::CollectionId> c = block.find(key_collection);
    if (!c.is_ok()) c = block.create_internal_collection(key_collection, key_schema(key.ttl_ms));
    if (!c.is_ok()) return c.status();
    std::string stored = body;
    if (stored.size() > stored_body_bytes_max) {
        stored.clear();
        json::Writer w(stored);
        w.begin_object();
        w.key("idempotent");
        w.string("the first answer was " + std::to_string(body.size()) + " bytes");
        w.end_object();
    }
    const size_t nl = key.user_key.find('\n');
    engine::Doc doc = {{k_key, engine::Value(key.key)},
                       {k_user, engine::Value(key.user_key.substr(0, nl))},
                       {k_fingerprint, engine::Value(key.fingerprint)},
                       {k_status, engine::Value(int64_t{status})},
                       {k_body, engine::Value(std::move(stored))},
                       {k_at, engine::Value(engine::Timestamp{key.at_ms})}};
    // A fresh row each time: a key whose row expired gets a new one and the table points there.
    engine::Result<engine::DocId> row = block.put_internal(*c, std::nullopt, doc);
    if (!row.is_ok()) return row.status();
    key.row = *row;
    return engine::Status::ok();
}

void finish_key(Tenant& t, KeyedWrite& key, bool landed) {
    if (landed && key.row) t.remember_key(key.user_key, *key.row);
    if (key.claimed) t.release_key(key.user_key);
    key.claimed = false;
}

}  // namespace fenec::node
