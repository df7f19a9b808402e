// server/node/quota.cc: a tenant's quotas (quota.h; node-http.md §7, §8.5): the side file read
// and written, the quota applied to the engine and to the tenant's counts, `GET`/`PUT
// /_admin/tenants/<t>/quota`, and the node's own two checks, `streams` and `requests`.
#include "server/node/quota.h"

#include <simdjson.h>

#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "engine/io.h"
#include "json/writer.h"
#include "server/node/admin.h"
#include "server/node/handlers.h"
#include "server/node/routes.h"
#include "server/obs/audit.h"

namespace fenec::node {

namespace {

// A side file is a few fields; anything larger was not written by this node.
constexpr uint64_t quota_file_bytes_max = 4096;

using Field = std::optional<uint64_t> Quota::*;
struct FieldName {
    std::string_view name;
    Field field;
};
constexpr std::array<FieldName, 6> fields = {{{"bytes", &Quota::bytes},
                                              {"rows", &Quota::rows},
                                              {"streams", &Quota::streams},
                                              {"requests", &Quota::requests},
                                              {"rows_per_s", &Quota::rows_per_s},
                                              {"bytes_per_s", &Quota::bytes_per_s}}};

bool is_rate(std::string_view name) { return name == "rows_per_s" || name == "bytes_per_s"; }

std::string side_path(const Node& node, std::string_view tenant) {
    return node.options().data_dir + "/" + std::string(tenant) + ".quota";
}

// The side file's text; nullopt when there is none.
engine::Result<std::optional<std::string>> read_side_file(Node& node, const std::string& path) {
    auto text = engine::read_small(node.fs(), path, quota_file_bytes_max);
    if (!text.is_ok()) {
        if (text.status().code() == engine::Code::not_found) return std::optional<std::string>();
        return text.status();
    }
    return std::optional<std::string>(std::move(*text));
}

// Applies `q` to an open tenant, under its quota_mu, once its side file holds it (a PUT) or as
// read from there (an open). A tenant that had no quota and gets none is left untouched (no
// set_limit).
void apply(Tenant& t, const Quota& q) {
    t.quota_applied = quota_json(q);
    engine::Limits l;
    l.bytes = q.bytes;
    l.rows = q.rows;
    if (q.rows_per_s) l.rows_per_s = static_cast<double>(*q.rows_per_s);
    if (q.bytes_per_s) l.bytes_per_s = static_cast<double>(*q.bytes_per_s);
    if (l.any() || t.db().limits().any()) t.db().set_limit(l);
    t.streams_max.store(q.streams.value_or(Tenant::quota_none));
    t.requests_max.store(q.requests.value_or(Tenant::quota_none));
}

http::Response quota_refusal(Node& node, std::string_view tenant, std::string_view quota) {
    node.counters().quota_refusals->with({quota}).inc();
    return node.refusal(429, quota_refusal_message(tenant, quota), {}, [&](json::Writer& w) {
        w.key("quota");
        w.string(quota);
    });
}

void write_quota_members(json::Writer& w, const std::string& tenant, std::string_view quota) {
    w.key("tenant");
    w.string(tenant);
    w.key("quota");
    w.raw(quota);
}

void put_quota(Node& node, Call& call, Tenant& t) {
    Quota q;
    std::string field;
    if (std::string why = parse_quota(call.request.body, q, &field); !why.empty()) {
        http::Response r = node.refusal(400, why, {}, [&](json::Writer& w) {
            if (field.empty()) return;
            w.key("field");
            w.string(field);
        });
        audit_admin(node, call, r.status);
        return node.answer(call, std::move(r));
    }
    http::Response r;
    {
        // The file first, then the tenant: what is applied is never newer than what is kept.
        std::lock_guard lock(t.quota_mu);
        const std::string path = side_path(node, t.name());
        engine::Status st = q.any() ? engine::replace_durably(node.fs(), path, quota_json(q))
                                    : engine::remove_durably(node.fs(), path);
        if (!st.is_ok()) {
            r = node.refusal(
                500, "the quota of tenant `" + t.name() + "` could not be kept: " + st.to_string());
        } else {
            apply(t, q);
            json::Writer w(r.body);
            w.begin_object();
            write_quota_members(w, t.name(), t.quota_applied);
            w.end_object();
        }
    }
    audit_admin(node, call, r.status);
    node.answer(call, std::move(r));
}

void write_level(json::Writer& w, const std::optional<double>& level) {
    if (level) {
        w.float64(*level);
    } else {
        w.null();
    }
}

void get_quota(Node& node, Call& call, Tenant& t) {
    std::string q;
    {
        std::lock_guard lock(t.quota_mu);
        q = t.quota_applied;
    }
    const engine::Usage u = t.db().usage();
    http::Response r;
    json::Writer w(r.body);
    w.begin_object();
    write_quota_members(w, t.name(), q);
    w.key("usage");
    w.begin_object();
    w.key("bytes");
    w.uint64(u.file_bytes);
    w.key("rows");
    w.uint64(u.rows);
    w.key("streams");
    w.uint64(t.streams.load());
    w.key("requests");
    w.uint64(t.requests.load());
    w.key("rows_per_s");
    write_level(w, u.rows_per_s_level);
    w.key("bytes_per_s");
    write_level(w, u.bytes_per_s_level);
    w.end_object();
    w.end_object();
    node.answer(call, std::move(r));
}

// Held by a call admitted on the data plane (Call::admitted): the tenant's in-flight count,
// given back as the call is answered or dropped.
struct RequestSlot {
    explicit RequestSlot(std::shared_ptr<Tenant> tenant) : t(std::move(tenant)) {}
    ~RequestSlot() { t->requests.fetch_sub(1); }
    RequestSlot(const RequestSlot&) = delete;
    RequestSlot& operator=(const RequestSlot&) = delete;
    std::shared_ptr<Tenant> t;
};

}  // namespace

std::string parse_quota(std::string_view json, Quota& out, std::string* field) {
    out = Quota{};
    simdjson::dom::parser parser;
    simdjson::padded_string padded(json);
    simdjson::dom::element doc;
    if (parser.parse(padded).get(doc)) return "the quota is not JSON";
    simdjson::dom::object obj;
    if (doc.get(obj)) {
        return "the quota must be an object {\"bytes\":n,\"rows\":n,\"streams\":n,\"requests\":n,"
               "\"rows_per_s\":n,\"bytes_per_s\":n}";
    }
    for (auto [key, value] : obj) {
        const FieldName* f = nullptr;
        for (const FieldName& c : fields) {
            if (c.name == key) f = &c;
        }
        if (field) *field = std::string(key);
        if (!f) {
            return "unknown quota field `" + std::string(key) +
                   "`: a quota takes bytes, rows, streams, requests, rows_per_s, bytes_per_s";
        }
        uint64_t n = 0;
        switch (value.type()) {
            case simdjson::dom::element_type::NULL_VALUE:
                out.*(f->field) = std::nullopt;
                continue;
            case simdjson::dom::element_type::UINT64:
                n = value.get_uint64().value_unsafe();
                break;
            case simdjson::dom::element_type::INT64: {
                const int64_t v = value.get_int64().value_unsafe();
                if (v < 0) return "quota field `" + std::string(key) + "` must not be negative";
                n = static_cast<uint64_t>(v);
                break;
            }
            default:
                return "quota field `" + std::string(key) +
                       "` must be a non-negative integer or null (no limit)";
        }
        if (n == 0 && is_rate(key)) {
            // A bucket of no capacity never holds a row's worth: every write would wait forever.
            return "quota field `" + std::string(key) +
                   "` must be at least 1 or null (no limit); freeze the tenant to stop its writes";
        }
        out.*(f->field) = n;
    }
    if (field) field->clear();
    return "";
}

std::string quota_json(const Quota& q) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    for (const FieldName& f : fields) {
        if (!(q.*(f.field))) continue;
        w.key(f.name);
        w.uint64(*(q.*(f.field)));
    }
    w.end_object();
    return out;
}

std::string quota_refusal_message(std::string_view tenant, std::string_view quota) {
    const std::string who = tenant.empty() ? "the tenant" : "tenant `" + std::string(tenant) + "`";
    return who + " is at its " + std::string(quota) + " quota";
}

engine::Status load_quota(Node& node, Tenant& t) {
    const std::string path = side_path(node, t.name());
    auto text = read_side_file(node, path);
    if (!text.is_ok()) {
        // Out of descriptors, an I/O error: the open fails rather than lift the quota. A file
        // over its bound is no quota this node wrote: as one that does not parse.
        const bool transient = text.status().code() == engine::Code::io_error;
        return engine::Status::error(transient ? engine::Code::io_error : engine::Code::corruption,
                                     "the quota of tenant `" + t.name() + "` cannot be read (" +
                                         path + "): " + text.status().to_string());
    }
    if (!text->has_value()) return engine::Status::ok();  // no quota: nothing touched
    Quota q;
    if (std::string why = parse_quota(**text, q); !why.empty()) {
        // The node writes this file whole (engine::replace_durably): one that does not parse was
        // put there by hand, or is over its bound. No guessed quota, and none lifted.
        return engine::Status::error(
            engine::Code::corruption,
            "the quota of tenant `" + t.name() + "` does not parse (" + path + "): " + why);
    }
    std::lock_guard lock(t.quota_mu);
    apply(t, q);
    return engine::Status::ok();
}

void serve_quota(Node& node, const std::shared_ptr<Call>& call) {
    const http::Method m = call->request.head.method;
    if (!route_takes(*call)) return node.answer(*call, method_refusal(node, *call));
    // A closed tenant is opened, to count it and to apply a new quota at once (§8.5).
    Acquired a = node.registry().acquire(call->tenant);
    if (!a.tenant) return node.answer(*call, acquire_refusal(node, a));
    Tenant& t = *a.tenant;
    if (m == http::Method::put) return put_quota(node, *call, t);
    get_quota(node, *call, t);
}

std::optional<http::Response> streams_refusal(Node& node, Tenant& t) {
    const uint64_t max = t.streams_max.load(std::memory_order_relaxed);
    if (max == Tenant::quota_none || t.streams.load() < max) return std::nullopt;
    return quota_refusal(node, t.name(), "streams");
}

std::optional<http::Response> admit_request(Node& node, Call& call,
                                            const std::shared_ptr<Tenant>& t) {
    // Counted first and given back if past: two arrivals racing may both be refused, never both
    // let past the quota.
    const uint64_t before = t->requests.fetch_add(1);
    auto slot = std::make_shared<RequestSlot>(t);
    const uint64_t max = t->requests_max.load(std::memory_order_relaxed);
    if (max != Tenant::quota_none && before >= max) {
        return quota_refusal(node, t->name(), "requests");
    }
    call.admitted = std::move(slot);
    return std::nullopt;
}

}  // namespace fenec::node
