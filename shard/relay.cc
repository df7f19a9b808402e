// shard/relay.cc: a `/_shard/` request relayed to another level's router (shard/relay.h, router.md
// §11.4, §11.5), over the runtime's blocking client and the pool the router's other calls share.
#include "shard/relay.h"

#include <simdjson.h>

#include "json/writer.h"
#include "server/runtime/mark.h"
#include "shard/options.h"
#include "shard/router.h"

namespace fenec::shard {

Relays::Relays(std::optional<std::string> token, uint64_t timeout_ms)
    : client_(server::BlockingClient::Options{}),
      token_(std::move(token)),
      timeout_ms_(timeout_ms) {}

std::vector<std::string> Relays::ordered(const std::string& scope,
                                         const std::vector<std::string>& routers) const {
    std::string last;
    {
        std::lock_guard lock(mu_);
        if (auto it = last_.find(scope); it != last_.end()) last = it->second;
    }
    std::vector<std::string> out;
    out.reserve(routers.size());
    for (const std::string& url : routers) {
        if (url == last) out.push_back(url);
    }
    for (const std::string& url : routers) {
        if (url != last) out.push_back(url);
    }
    return out;
}

void Relays::answered(const std::string& scope, const std::string& url) {
    std::lock_guard lock(mu_);
    last_[scope] = url;
}

Relayed Relays::relay(const RelayTo& to, const RelayCall& call) {
    Relayed out;
    if (stop_.cancelled()) {  // stop_calls: sent nowhere, so it ran nowhere
        out.why = "this router is stopping, and relays nothing more";
        return out;
    }
    const std::string who = to.scope == "global" ? std::string("the global router")
                                                 : "region `" + to.scope + "`'s router";
    // The header's bytes outlive write_request below.
    std::string mark;
    if (token_) {
        mark = std::string(call.client) + " " +
               server::relay_mark(*token_, call.client, call.request_id, call.method, call.target);
    }
    const std::string bearer = token_ ? "Bearer " + *token_ : std::string();
    for (const std::string& url : ordered(to.scope, to.routers)) {
        server::CallRequest c;
        c.peer = url;
        c.peer_text = who + " " + url;
        c.addr = replica_addr(url);
        c.resend_after_sent = call.method == "GET";
        c.timeout_ms = timeout_ms_;
        c.body_bytes_max = relay_answer_bytes_max;
        http::OutRequest r{.method = call.method, .target = call.target, .host = c.addr};
        if (token_) r.headers.push_back({"Authorization", bearer});
        r.headers.push_back({"X-Request-Id", call.request_id});
        if (call.from_primary) r.headers.push_back({read_header, read_from_primary});
        if (token_) {
            r.headers.push_back({"Fenec-Relay", mark});
        } else {
            r.headers.push_back({"Via", std::string(relay_via)});
        }
        if (!call.body.empty()) r.headers.push_back({"Content-Type", "application/json"});
        r.body = call.body;
        http::write_request(r, c.bytes);
        const server::CallResult got = client_.call(c, server::Until{.cancel = &stop_});
        out.router = url;
        if (!got.answer) {
            out.why += (out.why.empty() ? "" : "; ") +
                       (got.error.failure == server::CallFailure::cancelled ? stopped_call(url)
                                                                            : got.error.message);
            if (got.error.failure == server::CallFailure::unreachable) continue;
            // Sent whole and unanswered: it may have run there, so it goes to no other router.
            out.may_have_run = got.error.sent_whole && call.method != "GET";
            return out;
        }
        // A standby refuses changes naming its primary (§6.1), and a router promoted over
        // refuses everything unrun: the next router is asked.
        if (got.answer->status == 409) {
            const RelayAnswer said = parse_relay_answer(got.answer->body);
            if (!said.primary.empty() || said.superseded) {
                out.why += (out.why.empty() ? "" : "; ") + url +
                           (said.superseded ? " was promoted over" : " is a standby");
                continue;
            }
        }
        answered(to.scope, url);
        out.answered = true;
        out.status = got.answer->status;
        out.body = got.answer->body;
        if (auto ra = got.answer->header("Retry-After")) out.retry_after = std::string(*ra);
        return out;
    }
    if (to.routers.empty()) out.why = "no router is recorded for it";
    return out;
}

std::string Relays::stopped_call(std::string_view to) {
    return "this router is stopping, and cut its call to " + std::string(to);
}

std::string Relays::said(const std::string& url, std::string_view message) const {
    if (stop_.cancelled()) return stopped_call(url);
    return url + ": " + std::string(message);
}

http::Response none_took(const RelayTo& to, const Relayed& r) {
    const std::string whose =
        to.scope == "global" ? std::string("the global router") : "region `" + to.scope + "`";
    http::Response resp = Router::error(
        503, r.may_have_run
                 ? whose + " did not answer, and may have taken the change: " + r.why
                 : whose + " is out of reach: none of its routers took the change (" + r.why + ")");
    resp.body.pop_back();
    json::Writer w(resp.body);
    resp.body += ",\"region\":";
    w.string(to.scope);
    if (r.may_have_run) resp.body += ",\"outcome\":\"unknown\"";
    resp.body += "}";
    resp.header("Retry-After", std::string(relay_retry_after_s));
    return resp;
}

http::Response passed_on(const Relayed& r) {
    http::Response resp;
    resp.status = r.status;
    resp.body = r.body;
    if (r.status == 204) resp.content_type = "";
    if (r.retry_after) resp.header("Retry-After", *r.retry_after);
    return resp;
}

RelayAnswer parse_relay_answer(std::string_view body) {
    RelayAnswer out;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    simdjson::dom::object o;
    if (parser.parse(body.data(), body.size()).get(doc) || doc.get_object().get(o)) return out;
    std::string_view primary;
    if (!o["primary"].get_string().get(primary)) out.primary = std::string(primary);
    bool exists = false;
    if (!o["exists"].get_bool().get(exists)) out.exists = exists;
    bool superseded = false;
    if (!o["superseded"].get_bool().get(superseded)) out.superseded = superseded;
    return out;
}

TenantWord ask_tenant(Relays& relays, const RelayTo& to, std::string_view tenant,
                      std::string_view client, std::string_view request_id) {
    TenantWord out;
    const std::string target = "/_shard/tenants/" + std::string(tenant);
    out.relayed = relays.relay(to, {.method = "GET",
                                    .target = target,
                                    .client = client,
                                    .request_id = request_id,
                                    .from_primary = true});
    if (!out.relayed.answered || out.relayed.status != 200) return out;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view node, state;
    if (parser.parse(out.relayed.body).get(doc) || doc["node"].get_string().get(node) ||
        doc["state"].get_string().get(state)) {
        return out;
    }
    out.said = true;
    out.node = std::string(node);
    out.state = std::string(state);
    std::string_view region;
    if (!doc["region"].get_string().get(region)) out.region = std::string(region);
    return out;
}

std::string relayed_for(const server::Request& request, std::string_view request_id,
                        const std::optional<std::string>& token) {
    const http::RequestHead& h = request.head;
    if (token) {
        const std::optional<std::string_view> mark = h.header("Fenec-Relay");
        std::string client;
        if (mark &&
            server::verify_relay_mark(*token, *mark, request_id, h.method_text, h.target, client)) {
            return client;
        }
        return "";
    }
    for (const http::Header& field : h.headers) {
        if (http::iequals(field.name, "Via") &&
            std::string_view(field.value).find("fenec-shard") != std::string_view::npos) {
            return peer_host(request.peer);
        }
    }
    return "";
}

}  // namespace fenec::shard
