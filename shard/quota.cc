// shard/quota.cc: quotas through the router (shard/quota.h; router.md §6.4 "Quota", seed 001):
// the quota kept in the tenant's row and sent to each copy's node, the nodes that did not take it
// remembered and sent it again, and `PUT`, `GET`, `DELETE /_shard/tenants/<t>/quota`.
#include "shard/quota.h"

#include <simdjson.h>

#include <cstdint>
#include <iostream>
#include <limits>

#include "json/writer.h"
#include "shard/copies.h"
#include "shard/log_line.h"
#include "shard/node_calls.h"
#include "shard/routes.h"

namespace fenec::shard {

namespace {

// The quota's one encoding (the node's object), for the router's answers as for the node.
void write_quota(json::Writer& w, const std::optional<Quota>& quota) { w.raw(quota_body(quota)); }

http::Response busy(Router& router, const std::string& tenant) {
    const std::string holder = router.held_by(tenant);
    http::Response r;
    r.status = 409;
    json::Writer w(r.body);
    w.begin_object();
    w.key("error");
    w.string("another operation on `" + tenant + "` is in progress: " + holder);
    w.key("held_by");
    w.string(holder);
    w.end_object();
    return r;
}

http::Response no_tenant(const std::string& tenant) {
    return Router::error(404, "tenant `" + tenant + "` is not in the directory");
}

}  // namespace

std::optional<Quota> parse_quota(std::string_view body, std::string& error) {
    Quota q;
    if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return q;  // {}: no limit
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::object obj;
    if (parser.parse(body.data(), body.size()).get(doc)) {
        error = "the body is not JSON";
        return std::nullopt;
    }
    if (doc.get_object().get(obj)) {
        error = "the body is not a JSON object";
        return std::nullopt;
    }
    for (auto field : obj) {
        size_t f = 0;
        while (f < Quota::fields.size() && Quota::fields[f] != field.key) ++f;
        if (f == Quota::fields.size()) {
            error = "unknown field `" + std::string(field.key) +
                    "`: a quota takes bytes, rows, streams, requests, rows_per_s and bytes_per_s";
            return std::nullopt;
        }
        if (field.value.is_null()) continue;
        uint64_t n = 0;
        // The directory keeps each limit as a FenecQL int: at most the largest int64.
        if (field.value.get_uint64().get(n) ||
            n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            error = "field `" + std::string(field.key) +
                    "` must be a non-negative integer (or null for no limit)";
            return std::nullopt;
        }
        q.limits[f] = n;
    }
    return q;
}

void QuotaSync::owe(const std::string& node, const std::string& tenant) {
    std::lock_guard lock(mu_);
    owed_[node].insert(tenant);
}

void QuotaSync::paid(const std::string& node, const std::string& tenant) {
    std::lock_guard lock(mu_);
    auto it = owed_.find(node);
    if (it == owed_.end()) return;
    it->second.erase(tenant);
    if (it->second.empty()) owed_.erase(it);
}

bool QuotaSync::owes(const std::string& node, const std::string& tenant) const {
    std::lock_guard lock(mu_);
    auto it = owed_.find(node);
    return it != owed_.end() && it->second.contains(tenant);
}

bool QuotaSync::owed_by(const std::string& node) const {
    std::lock_guard lock(mu_);
    return owed_.contains(node);
}

void QuotaSync::forget(const std::string& tenant) {
    std::lock_guard lock(mu_);
    for (auto it = owed_.begin(); it != owed_.end();) {
        it->second.erase(tenant);
        it = it->second.empty() ? owed_.erase(it) : std::next(it);
    }
}

QuotaSent QuotaSync::send_to(const NodeRow& node, const TenantRow& tenant, std::string_view role,
                             std::string_view request_id) {
    // A tenant with no quota has nothing to send, unless this node still holds one removed.
    if (!tenant.quota && !owes(node.name, tenant.name)) return {true, ""};
    NodeAnswer a = router_.node_calls().put_quota(node, tenant.name, tenant.quota, request_id);
    if (a.ok()) {
        paid(node.name, tenant.name);
        return {true, ""};
    }
    owe(node.name, tenant.name);
    const std::string why = a.said(node);
    log_line("the quota of `" + tenant.name + "` was not taken by its " + std::string(role) + " on `" +
             node.name + "` (" + why + "): sent again when the node answers");
    return {false, why};
}

QuotaSent QuotaSync::send_to(const std::string& node, const std::string& tenant,
                             std::string_view request_id) {
    auto maps = router_.directory().maps();
    auto n = maps->nodes.find(node);
    auto t = maps->tenants.find(tenant);
    if (n == maps->nodes.end()) return {false, "no node `" + node + "`"};
    if (t == maps->tenants.end()) return {false, "tenant `" + tenant + "` is not in the directory"};
    return send_to(n->second, t->second, "copy", request_id);
}

QuotaSent QuotaSync::send_everywhere(const std::string& tenant, std::string_view request_id) {
    auto maps = router_.directory().maps();
    auto t = maps->tenants.find(tenant);
    if (t == maps->tenants.end()) return {false, "tenant `" + tenant + "` is not in the directory"};
    auto primary = maps->nodes.find(t->second.node);
    QuotaSent sent{false, "its node `" + t->second.node + "` is not in the directory"};
    if (primary != maps->nodes.end()) {
        owe(primary->second.name, tenant);  // sent even when it is none: the old one goes
        sent = send_to(primary->second, t->second, "primary", request_id);
    }
    const std::string copy = maps->copy_of(t->second);
    if (auto c = maps->nodes.find(copy); c != maps->nodes.end()) {
        owe(copy, tenant);
        (void)send_to(c->second, t->second, "copy", request_id);
    }
    return sent;
}

void QuotaSync::resend(const std::string& node, std::string_view request_id) {
    std::set<std::string> tenants;
    {
        std::lock_guard lock(mu_);
        auto it = owed_.find(node);
        if (it == owed_.end()) return;
        tenants = it->second;
    }
    for (const std::string& tenant : tenants) {
        // Claimed, so a quota set meanwhile is not overtaken by this older send; a tenant held
        // by another operation is left owed, for the node's next answer.
        TenantClaim claim(router_, tenant, "quota");
        if (!claim.held) continue;
        auto maps = router_.directory().maps();
        auto t = maps->tenants.find(tenant);
        auto n = maps->nodes.find(node);
        const bool keeps = t != maps->tenants.end() && n != maps->nodes.end() &&
                           (t->second.node == node || maps->copy_of(t->second) == node);
        if (!keeps) {
            paid(node, tenant);  // it holds no copy of the tenant now: nothing is owed
            continue;
        }
        const bool primary = t->second.node == node;
        QuotaSent s = send_to(n->second, t->second, primary ? "primary" : "copy", request_id);
        if (s.taken) log_line("the quota of `" + tenant + "` is taken by `" + node + "` now");
    }
}

http::Response serve_quota(Router& router, const server::Request& request,
                           const Router::Answering& a, const std::string& tenant) {
    const http::Method m = request.head.method;
    if (m == http::Method::get) {
        auto maps = router.directory().maps();
        auto t = maps->tenants.find(tenant);
        if (t == maps->tenants.end()) return no_tenant(tenant);
        auto n = maps->nodes.find(t->second.node);
        if (n == maps->nodes.end()) {
            return Router::error(502, "its node `" + t->second.node + "` is not in the directory");
        }
        NodeAnswer got = router.node_calls().get_quota(n->second, tenant, a.request_id);
        if (!got.answered || got.status >= 500) return Router::error(502, got.said(n->second));
        http::Response r;
        r.status = got.status;
        r.body = std::move(got.body);
        return r;
    }
    if (auto r = method_refusal(request.head)) return std::move(*r);
    std::optional<Quota> quota;
    if (m == http::Method::put) {
        std::string error;
        quota = parse_quota(request.body, error);
        if (!quota) return Router::error(400, error);
    }
    AskedClaim claim(router, tenant, "quota");
    if (!claim.held) return busy(router, tenant);
    if (!router.directory().maps()->tenants.contains(tenant)) return no_tenant(tenant);
    // The row first, synced: a quota sent is one a restart still knows (§6.4).
    if (engine::Status st = router.directory().set_quota(tenant, quota); !st.is_ok()) {
        return Router::error(
            500, "the directory could not record the quota of `" + tenant + "`: " + st.to_string());
    }
    QuotaSent sent = router.copies().quotas().send_everywhere(tenant, a.request_id);
    http::Response r;
    if (m == http::Method::del && sent.taken) {
        r.status = 204;
        r.content_type = "";
        return r;
    }
    // Not taken by the primary (a PUT or a DELETE alike): 202, and why; sent again when it answers.
    r.status = sent.taken ? 200 : 202;
    json::Writer w(r.body);
    w.begin_object();
    w.key("tenant");
    w.string(tenant);
    w.key("quota");
    write_quota(w, quota);
    w.key("taken");
    w.boolean(sent.taken);
    if (!sent.taken) {
        w.key("why");
        w.string(sent.why);
    }
    w.end_object();
    return r;
}

}  // namespace fenec::shard
