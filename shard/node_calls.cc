// shard/node_calls.cc: the router's admin calls to a node (shard/node_calls.h; router.md §13),
// over Upstream::admin (the runtime's one blocking client), and the reading of their answers.
#include "shard/node_calls.h"

#include <simdjson.h>

#include <algorithm>
#include <utility>

#include "json/writer.h"
#include "shard/upstream.h"

namespace fenec::shard {

namespace {

// `out` set when the member is there and of its kind, left as it was otherwise.
template <class T, class Result>
void take(Result&& member, T& out) {
    T v{};
    if (!std::forward<Result>(member).get(v)) out = v;
}

std::string tenant_path(std::string_view tenant) {
    return "/_admin/tenants/" + std::string(tenant);
}

// `{"authority":…,"term":n}` from a 409's `holder` object: "authority `a` at term n".
std::string holder_text(simdjson::dom::element holder) {
    std::string_view authority;
    int64_t term = 0;
    if (holder["authority"].get_string().get(authority)) return "another router";
    take(holder["term"].get_int64(), term);
    return "authority `" + std::string(authority) + "` at term " + std::to_string(term);
}

}  // namespace

std::string NodeAnswer::said(const NodeRow& node) const {
    const std::string who = "node `" + node.name + "` (" + node.addr + ")";
    if (!answered) return error.empty() ? who + " did not answer" : error;
    std::string out = who + " answered " + std::to_string(status);
    if (!error.empty()) out += ": " + error;
    return out;
}

const CopyInfo* SurveyReply::find(std::string_view tenant) const {
    auto it = std::lower_bound(copies.begin(), copies.end(), tenant,
                               [](const CopyInfo& c, std::string_view t) { return c.name < t; });
    return it != copies.end() && it->name == tenant ? &*it : nullptr;
}

std::string quota_body(const std::optional<Quota>& quota) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    if (quota) {
        for (size_t f = 0; f < Quota::fields.size(); ++f) {
            if (!quota->limits[f]) continue;
            w.key(Quota::fields[f]);
            w.uint64(*quota->limits[f]);
        }
    }
    w.end_object();
    return out;
}

namespace node_answers {

std::string error_of(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view e;
    if (!parser.parse(body.data(), body.size()).get(doc) && !doc["error"].get_string().get(e)) {
        return std::string(e);
    }
    return std::string(body.substr(0, 200));
}

std::string reason_of(std::string_view body) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view reason;
    if (!parser.parse(body.data(), body.size()).get(doc) &&
        !doc["reason"].get_string().get(reason)) {
        return std::string(reason);
    }
    return "";
}

void read_hello(HelloReply& r) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(r.body).get(doc)) {
        r.answered = false;
        r.status = 0;
        r.error = "the node answered its hello with something that is not JSON";
        return;
    }
    if (doc.is_array()) {  // /_admin/tenants, from a node before hello: the bytes of each
        for (auto t : doc.get_array()) {
            uint64_t b = 0;
            if (!t["bytes"].get_uint64().get(b)) r.disk_bytes += b;
        }
        return;
    }
    uint64_t b = 0;
    if (!doc["disk_bytes"].get_uint64().get(b)) r.disk_bytes = b;
    bool takes = false;
    if (!doc["takes_leases"].get_bool().get(takes)) r.lease = takes ? "takes" : "none";
}

void read_tenants(SurveyReply& r) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::array list;
    if (parser.parse(r.body).get(doc) || doc.get_array().get(list)) {
        r.answered = false;
        r.status = 0;
        r.error = "the node listed its tenants in something that is not a JSON array";
        return;
    }
    for (auto t : list) {
        CopyInfo c;
        std::string_view s;
        if (t["name"].get_string().get(s)) continue;
        c.name = std::string(s);
        take(t["bytes"].get_uint64(), c.bytes);
        if (!t["role"].get_string().get(s)) c.role = std::string(s);
        take(t["frozen"].get_bool(), c.frozen);
        if (!t["lineage"].get_string().get(s)) c.lineage = std::string(s);
        if (!t["history"].get_string().get(s)) c.history = std::string(s);
        simdjson::dom::array forks;
        if (!t["forks"].get_array().get(forks)) {
            for (auto f : forks) {
                if (!f["history"].get_string().get(s)) c.forks.emplace_back(s);
            }
        }
        simdjson::dom::object following;
        if (!t["following"].get_object().get(following)) {
            CopyInfo::Following f;
            if (!following["from"].get_string().get(s)) f.from = std::string(s);
            take(following["told"].get_uint64(), f.told);
            simdjson::dom::element heard;
            f.heard = !following["heard"].get(heard) && heard.is_object();
            c.following = std::move(f);
        }
        r.copies.push_back(std::move(c));
    }
    std::sort(r.copies.begin(), r.copies.end(),
              [](const CopyInfo& a, const CopyInfo& b) { return a.name < b.name; });
}

void read_create(CreateReply& r) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view lineage;
    if (!parser.parse(r.body).get(doc) && !doc["lineage"].get_string().get(lineage)) {
        r.lineage = std::string(lineage);
    }
}

void read_follow(FollowReply& r) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(r.body).get(doc)) return;
    take(doc["told"].get_uint64(), r.told);
    take(doc["heard"].get_bool(), r.heard);
}

void read_promote(PromoteReply& r) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(r.body).get(doc)) return;
    std::string_view s;
    if (r.ok()) {
        if (!doc["lineage"].get_string().get(s)) r.lineage = std::string(s);
        if (!doc["history"].get_string().get(s)) r.history = std::string(s);
        take(doc["seq"].get_uint64(), r.seq);
        take(doc["forked"].get_bool(), r.forked);
        return;
    }
    if (r.status != 409) return;
    if (!doc["lineage"].get_string().get(s)) r.other_lineage = std::string(s);
    simdjson::dom::element holder;
    if (!doc["holder"].get(holder) && holder.is_object()) r.holder = holder_text(holder);
}

// §9.5's table of answers.
GrantReply read_grant(int status, std::string_view body) {
    GrantReply g;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if ((status != 200 && status != 409) || parser.parse(body.data(), body.size()).get(doc)) {
        return g;  // silent: nothing the router counts
    }
    if (status == 200) {
        bool took = false;
        bool ran = false;
        if (doc["took"].get_bool().get(took) || doc["ran"].get_bool().get(ran)) {
            g.kind = GrantReply::Kind::takes_none;  // a node lacking them takes no lease [ours]
            return g;
        }
        g.kind = GrantReply::Kind::taken;
        g.took = took;
        g.ran = ran;
        uint64_t list = 0;
        if (!doc["list"].get_uint64().get(list)) g.list = list;
        return g;
    }
    simdjson::dom::element holder;
    if (!doc["holder"].get(holder) && holder.is_object()) {
        g.kind = GrantReply::Kind::fenced;
        g.holder = holder_text(holder);
        return g;
    }
    bool takes = true;
    if (!doc["takes_leases"].get_bool().get(takes) && !takes) {
        g.kind = GrantReply::Kind::takes_none;
    }
    return g;
}

void read_describe(DescribeReply& r) {
    if (r.answered && r.status == 404) {
        r.read = true;
        return;
    }
    if (r.status != 200) return;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view lineage, history;
    if (parser.parse(r.body).get(doc) || doc["lineage"].get_string().get(lineage) ||
        doc["history"].get_string().get(history) || doc["seq"].get_uint64().get(r.seq) ||
        doc["frozen"].get_bool().get(r.frozen)) {
        return;
    }
    r.read = r.found = true;
    r.lineage = std::string(lineage);
    r.history = std::string(history);
    if (doc["durable"].get_uint64().get(r.durable)) r.durable = r.seq;  // not said: its seq
    std::string_view from;
    if (!doc["following"]["from"].get_string().get(from)) r.following = std::string(from);
}

void read_lease_holder(LeaseHolderReply& r) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view authority;
    int64_t term = 0;
    if (parser.parse(r.body).get(doc) || doc["holder"]["authority"].get_string().get(authority) ||
        doc["holder"]["term"].get_int64().get(term)) {
        return;  // held by nobody, or not said
    }
    r.authority = std::string(authority);
    r.term = term;
}

}  // namespace node_answers

NodeAnswer NodeCalls::exchange(const NodeRow& node, std::string_view method,
                               std::string_view target, std::string_view body, bool resendable,
                               std::string_view request_id,
                               std::chrono::steady_clock::time_point deadline, bool cut_on_lapse) {
    AdminCall call{.method = method,
                   .target = std::string(target),
                   .request_id = request_id,
                   .body = body,
                   .resendable = resendable,
                   .cut_on_lapse = cut_on_lapse};
    call.until.deadline = deadline;
    server::CallResult got = upstream_.admin(node, call);
    NodeAnswer a;
    if (!got.answer) {
        a.error = got.error.message.empty() ? "node `" + node.name + "` did not answer"
                                            : got.error.message;
        return a;
    }
    a.answered = true;
    a.status = got.answer->status;
    a.body = std::move(got.answer->body);
    if (!a.ok()) a.error = node_answers::error_of(a.body);
    if (a.status == 409 && on_holder_) {
        simdjson::dom::parser parser;
        simdjson::dom::element doc;
        std::string_view authority;
        int64_t term = 0;
        if (!parser.parse(a.body).get(doc) &&
            !doc["holder"]["authority"].get_string().get(authority) &&
            !doc["holder"]["term"].get_int64().get(term)) {
            on_holder_(node, authority, term);
        }
    }
    return a;
}

HelloReply NodeCalls::hello(const NodeRow& node, std::string_view request_id) {
    HelloReply r;
    // Never cut (Upstream::cut_calls): a node added back is heard by its hello.
    constexpr auto no_deadline = std::chrono::steady_clock::time_point::max();
    static_cast<NodeAnswer&>(r) =
        exchange(node, "GET", "/_admin/hello", "", true, request_id, no_deadline, false);
    if (r.answered && r.status == 404) {
        static_cast<NodeAnswer&>(r) =
            exchange(node, "GET", "/_admin/tenants", "", true, request_id, no_deadline, false);
    }
    if (r.answered && (r.status == 401 || r.status == 403)) r.error = "it refused the token";
    if (r.status == 200) node_answers::read_hello(r);
    return r;
}

SurveyReply NodeCalls::tenants(const NodeRow& node, bool detail, std::string_view request_id) {
    SurveyReply r;
    static_cast<NodeAnswer&>(r) = exchange(
        node, "GET", detail ? "/_admin/tenants?detail" : "/_admin/tenants", "", true, request_id);
    if (r.status == 200) node_answers::read_tenants(r);
    return r;
}

CreateReply NodeCalls::create(const NodeRow& node, std::string_view tenant,
                              const std::optional<std::string>& schema,
                              std::string_view request_id) {
    CreateReply r;
    const std::string body = schema ? "{\"schema\":" + *schema + "}" : "";
    static_cast<NodeAnswer&>(r) =
        exchange(node, "PUT", tenant_path(tenant), body, false, request_id);
    if (r.ok()) node_answers::read_create(r);
    return r;
}

NodeAnswer NodeCalls::remove(const NodeRow& node, std::string_view tenant,
                             std::string_view request_id) {
    // Twice is harmless: the second finds nothing, 404.
    return exchange(node, "DELETE", tenant_path(tenant), "", true, request_id);
}

FollowReply NodeCalls::follow(const NodeRow& node, std::string_view tenant, const FollowWire& wire,
                              std::string_view request_id) {
    std::string body;
    json::Writer w(body);
    w.begin_object();
    w.key("from");
    w.string(wire.from);
    if (!wire.lineage.empty()) {
        w.key("lineage");
        w.string(wire.lineage);
    }
    w.key("authority");
    w.string(wire.authority);
    w.key("term");
    w.int64(wire.term);
    if (wire.wait_ms > 0) {
        w.key("wait_ms");
        w.uint64(wire.wait_ms);
    }
    w.end_object();
    FollowReply r;
    static_cast<NodeAnswer&>(r) =
        exchange(node, "POST", tenant_path(tenant) + "/follow", body, false, request_id);
    if (r.ok()) node_answers::read_follow(r);
    return r;
}

PromoteReply NodeCalls::promote(const NodeRow& node, std::string_view tenant,
                                const PromoteWire& wire, std::string_view request_id) {
    std::string body;
    json::Writer w(body);
    w.begin_object();
    if (!wire.lineage.empty()) {
        w.key("lineage");
        w.string(wire.lineage);
    }
    w.key("forked");
    if (wire.forked.empty()) {
        w.null();
    } else {
        w.string(wire.forked);
    }
    w.key("authority");
    w.string(wire.authority);
    w.key("term");
    w.int64(wire.term);
    w.key("force");
    w.boolean(wire.force);
    w.end_object();
    PromoteReply r;
    static_cast<NodeAnswer&>(r) =
        exchange(node, "POST", tenant_path(tenant) + "/promote", body, false, request_id);
    if (r.answered) node_answers::read_promote(r);
    return r;
}

NodeAnswer NodeCalls::put_quota(const NodeRow& node, std::string_view tenant,
                                const std::optional<Quota>& quota, std::string_view request_id) {
    // The whole quota replaces the one held: sent twice, it is the same quota.
    return exchange(node, "PUT", tenant_path(tenant) + "/quota", quota_body(quota), true,
                    request_id);
}

NodeAnswer NodeCalls::get_quota(const NodeRow& node, std::string_view tenant,
                                std::string_view request_id) {
    return exchange(node, "GET", tenant_path(tenant) + "/quota", "", true, request_id);
}

DescribeReply NodeCalls::describe(const NodeRow& node, std::string_view tenant,
                                  std::string_view request_id,
                                  std::chrono::steady_clock::time_point deadline) {
    DescribeReply r;
    static_cast<NodeAnswer&>(r) =
        exchange(node, "GET", tenant_path(tenant), "", true, request_id, deadline);
    node_answers::read_describe(r);
    return r;
}

LeaseHolderReply NodeCalls::lease_holder(const NodeRow& node, std::string_view request_id,
                                         std::chrono::steady_clock::time_point deadline) {
    LeaseHolderReply r;
    static_cast<NodeAnswer&>(r) =
        exchange(node, "GET", "/_admin/lease", "", true, request_id, deadline);
    if (r.status == 200) node_answers::read_lease_holder(r);
    return r;
}

NodeAnswer NodeCalls::release_lease(const NodeRow& node, std::string_view authority, int64_t term,
                                    std::string_view request_id) {
    std::string body;
    json::Writer w(body);
    w.begin_object();
    w.key("authority");
    w.string(authority);
    w.key("term");
    w.int64(term);
    w.end_object();
    // Released twice, nothing more is released.
    return exchange(node, "DELETE", "/_admin/lease", body, true, request_id);
}

GrantReply NodeCalls::grant(const NodeRow& node, const GrantWire& wire,
                            std::chrono::steady_clock::time_point deadline,
                            std::string_view request_id) {
    if (deadline <= std::chrono::steady_clock::now()) return GrantReply{};  // silent: no time
    // The client's deadline bounds the whole call, name lookup included (server/runtime/client.h).
    NodeAnswer a = exchange(node, "POST", "/_admin/lease", grant_body(wire), false, request_id,
                            deadline);
    // An answer that came back past the deadline is not counted (§9.5: within the call's bound).
    if (!a.answered || std::chrono::steady_clock::now() > deadline) return GrantReply{};
    return node_answers::read_grant(a.status, a.body);
}

}  // namespace fenec::shard
