// shard/forward.cc: `/t/<tenant>/…` passed to the tenant's node (router.md §5): the tenant looked
// up in the directory's snapshot, the request sent with its original target and body byte for
// byte, the answer passed back — whole when it has a length, as it arrives when it has none (a
// subscription). The node checks credentials: the client's Authorization passes untouched
// (seed 000: the router holds no keys).
#include <optional>

#include "server/runtime/mark.h"
#include "shard/router.h"

namespace fenec::shard {

namespace {

// True when `name` is one of `names`, case-insensitively; the lengths are compared first, so a
// header of a length none has costs one pass of size comparisons (headers are many per request).
template <size_t N>
bool one_of(std::string_view name, const std::string_view (&names)[N]) {
    for (std::string_view d : names) {
        if (d.size() == name.size() && http::iequals(name, d)) return true;
    }
    return false;
}

// Headers the router sets itself or that belong to one hop (§5.3).
bool dropped_request_header(std::string_view name) {
    static constexpr std::string_view dropped[] = {
        "Connection", "Keep-Alive", "TE", "Trailer", "Upgrade", "Transfer-Encoding",
        "Proxy-Authorization", "Proxy-Authenticate", "Host", "Content-Length", "Fenec-Router",
        "Fenec-Relay", "X-Request-Id", "Expect",
    };
    return one_of(name, dropped);
}

// Answer headers not passed back (§5.6): hop-by-hop, framing, and the router's own.
bool dropped_answer_header(std::string_view name) {
    static constexpr std::string_view dropped[] = {
        "Connection", "Keep-Alive", "TE", "Trailer", "Upgrade", "Transfer-Encoding",
        "Proxy-Authenticate", "Content-Length", "X-Request-Id", "Server",
    };
    return one_of(name, dropped);
}

// A HEAD answer keeps the node's length (§5.6), which write_response takes from the body; the
// padding is never sent. Past this a HEAD answers a length of 0 rather than allocate more.
constexpr uint64_t head_length_kept_max = 64ull << 20;

class ForwardSink final : public server::CallSink {
  public:
    ForwardSink(Router& router, std::shared_ptr<server::Exchange> exchange, Router::Answering a,
                std::string node, bool head_only, std::string peer)
        : router_(router), exchange_(std::move(exchange)), a_(std::move(a)),
          node_(std::move(node)), head_only_(head_only), peer_(std::move(peer)) {}

    void on_answer(server::Answer answer) override {
        http::Response r;
        r.status = answer.status;
        r.content_type = "";
        r.headers.reserve(answer.headers.size() + 1);
        for (auto& [name, value] : answer.headers) {
            if (!dropped_answer_header(name)) r.header(std::move(name), std::move(value));
        }
        r.header("X-Request-Id", a_.request_id);
        router_.count(a_, answer.status);
        if (answer.stream) {
            router_.accepted(peer_);
            r.stream = true;
            r.close = true;
            exchange_->start(std::move(r));
            return;
        }
        if (head_only_ && answer.content_length && *answer.content_length <= head_length_kept_max) {
            r.body.assign(*answer.content_length, ' ');
        } else {
            r.body = std::move(answer.body);
        }
        if (answer.status == 401) {  // the node refused the client's token: delayed here (§3)
            auto later = std::make_shared<http::Response>(std::move(r));
            return router_.after_refusal(peer_, [exchange = exchange_, later] {
                exchange->reply(std::move(*later));
            });
        }
        router_.accepted(peer_);
        exchange_->reply(std::move(r));
    }

    void on_failure(server::CallError failure) override {
        const int status = failure.failure == server::CallFailure::timeout ? 504 : 502;
        http::Response r = Router::error(status, failure.message);
        // The body gains the node (and the outcome where it may have run): §5.5.
        r.body.pop_back();
        r.body += ",\"node\":";
        std::string quoted;
        ql_quote(node_, quoted);
        r.body += quoted;
        if (failure.failure == server::CallFailure::may_have_run) {
            r.body += ",\"outcome\":\"unknown\"";
        }
        r.body += "}";
        router_.metrics().upstream_errors->with({node_}).inc();
        router_.answer(*exchange_, a_, std::move(r));
    }

    bool on_data(std::string bytes) override { return exchange_->write(std::move(bytes)); }
    void on_end() override { exchange_->end(); }

  private:
    static void ql_quote(std::string_view s, std::string& out) {
        out += '"';
        for (char c : s) {  // node names are [a-z0-9_-]: nothing to escape
            out += c;
        }
        out += '"';
    }

    Router& router_;
    std::shared_ptr<server::Exchange> exchange_;
    Router::Answering a_;
    std::string node_;
    bool head_only_;
    std::string peer_;  // the client's, host:port
};

}  // namespace

void Router::forward(server::Request request, std::shared_ptr<server::Exchange> exchange,
                     Answering a) {
    const http::RequestHead& h = request.head;
    // `/t/<tenant>/…`: the tenant is the second segment (§5.1).
    std::string_view rest = std::string_view(h.path).substr(3);
    const std::string tenant(rest.substr(0, rest.find('/')));
    if (h.path.size() <= 3 || tenant.empty()) {
        return answer(*exchange, a, error(404, "no tenant in " + h.path + ": use /t/<tenant>/…"));
    }
    if (!valid_name(tenant)) {
        return answer(*exchange, a,
                      error(400, "tenant name `" + tenant + "` is not [a-z0-9_-]{1,64}"));
    }
    auto maps = directory_->maps();
    auto t = maps->tenants.find(tenant);
    if (t == maps->tenants.end()) {
        return answer(*exchange, a, error(404, "tenant `" + tenant + "` is not in the directory"));
    }
    auto n = maps->nodes.find(t->second.node);
    if (n == maps->nodes.end()) {
        http::Response r = error(502, "tenant `" + tenant + "` is placed on node `" +
                                          t->second.node + "`, which is not in the directory");
        return answer(*exchange, a, std::move(r));
    }
    const NodeRow& node = n->second;

    server::CallRequest up = to_node(node);
    up.about = tenant;
    up.head_only = h.method == http::Method::head;
    up.allow_stream = true;
    up.resend_after_sent = h.method == http::Method::get || h.method == http::Method::head ||
                           h.method == http::Method::options ||
                           h.header("Idempotency-Key").has_value();
    // The original target bytes, the client's method, its headers in order but the hop's own
    // and the router's (§5.3), then the router's.
    http::OutRequest out{.method = h.method_text, .target = h.target, .host = node.addr};
    out.headers.reserve(h.headers.size() + 2);
    for (const http::Header& f : h.headers) {
        if (!dropped_request_header(f.name)) out.headers.push_back(f);
    }
    const std::string client = peer_host(request.peer);
    const std::string mark = client + " " + server::router_mark(node.token, client, a.request_id);
    out.headers.push_back({"X-Request-Id", a.request_id});
    out.headers.push_back({"Fenec-Router", mark});
    out.body = request.body;
    http::write_request(out, up.bytes);

    auto sink = std::make_shared<ForwardSink>(*this, exchange, a, node.name, up.head_only,
                                              request.peer);
    std::weak_ptr<server::RingCall> call = upstream_->start(std::move(up), std::move(sink));
    // A client gone ends what the router has out for it (a subscription above all).
    exchange->on_close([call] {
        if (auto c = call.lock()) c->cancel();
    });
}

}  // namespace fenec::shard
