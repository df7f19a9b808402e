// tools/remote.cc: calls to a node or router for the `fenec` commands (tools/remote.h).
#include "tools/remote.h"

#include <simdjson.h>

#include <algorithm>

#include "server/runtime/flags.h"
#include "server/runtime/http.h"

namespace fenec::tools {

namespace {

// An admin call's bound on connecting and on each read or write: an image of many GiB streams
// for longer, but no single wait on a live node should.
constexpr uint64_t call_timeout_ms = 60'000;

std::string text_member(const simdjson::dom::element& e, const char* key) {
    std::string_view s;
    return e[key].get_string().get(s) ? std::string() : std::string(s);
}

std::string header_text(const http::ResponseHead& h, std::string_view name) {
    auto v = h.header(name);
    return v ? std::string(*v) : std::string();
}

}  // namespace

std::optional<Url> parse_url(std::string_view text, std::string& why) {
    std::string_view rest = text;
    if (rest.starts_with("https://")) {
        why = "`" + std::string(text) + "`: fenec speaks plain HTTP (put TLS in front of it)";
        return std::nullopt;
    }
    if (rest.starts_with("http://")) rest.remove_prefix(7);
    const size_t slash = rest.find('/');
    Url out;
    out.addr = std::string(rest.substr(0, slash));
    const size_t colon = out.addr.rfind(':');
    if (out.addr.empty() || colon == std::string::npos || colon + 1 == out.addr.size() ||
        out.addr.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
        why = "`" + std::string(text) + "` is not http://host:port[/t/<tenant>]";
        return std::nullopt;
    }
    if (slash == std::string_view::npos) return out;
    std::string_view path = rest.substr(slash);
    while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
    if (path == "/") return out;
    if (!path.starts_with("/t/") || !tenant_name_ok(path.substr(3))) {
        why = "`" + std::string(text) + "`: the path must be /t/<tenant> ([a-z0-9_-]{1,64})";
        return std::nullopt;
    }
    out.tenant = std::string(path.substr(3));
    return out;
}

std::optional<std::string> Tokens::for_node(std::string_view name) const {
    for (const auto& [n, t] : per_node) {
        if (n == name) return t;
    }
    return admin;
}

std::vector<Option> token_options() {
    return {
        {"--admin-token", "TOKEN", "the node's admin token (every node's, unless --node-token)",
         "FENEC_ADMIN_TOKEN"},
        {"--node-token",
         "NAME=TOKEN",
         "the admin token of the node the router names NAME (repeat for each node)",
         {},
         {},
         true},
        {"--router-token", "TOKEN", "the router's --token, for its /_shard/ API",
         "FENEC_SHARD_TOKEN"},
    };
}

std::optional<Tokens> read_tokens(const Args& args, std::string& why) {
    Tokens t;
    t.admin = args.value("--admin-token");
    t.router = args.value("--router-token");
    for (const std::string& v : args.values("--node-token")) {
        const size_t eq = v.find('=');
        if (eq == 0 || eq == std::string::npos || eq + 1 == v.size()) {
            why = "--node-token takes NAME=TOKEN";
            return std::nullopt;
        }
        t.per_node.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    }
    return t;
}

std::string Reply::said() const {
    if (!answered()) return error;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view e;
    std::string out = std::to_string(status);
    if (!parser.parse(body).get(doc) && !doc["error"].get_string().get(e)) {
        return out + " " + std::string(e);
    }
    return body.empty() ? out : out + " " + body.substr(0, 200);
}

Remote::Remote()
    : client_(server::BlockingClient::Options{.pool = nullptr,
                                              .lookup = server::system_lookup,
                                              .timeout_ms = call_timeout_ms,
                                              .observer = nullptr}) {}

server::CallRequest Remote::request(const std::string& addr, const std::string& peer_text) const {
    server::CallRequest r;
    r.peer = addr;
    r.peer_text = peer_text;
    r.addr = addr;
    r.timeout_ms = call_timeout_ms;
    return r;
}

Reply Remote::call(const std::string& addr, std::string_view method, std::string_view target,
                   const std::optional<std::string>& token, std::string_view json_body) {
    server::CallRequest r = request(addr, {});
    const std::string bearer = token ? "Bearer " + *token : std::string();
    http::OutRequest out{.method = method, .target = target, .host = addr};
    if (token) out.headers.push_back({"Authorization", bearer});
    if (!json_body.empty()) out.headers.push_back({"Content-Type", "application/json"});
    out.body = json_body;
    http::write_request(out, r.bytes);
    r.resend_after_sent = method == "GET";
    server::CallResult got = client_.call(r);
    Reply reply;
    if (!got.answer) {
        reply.error = got.error.message;
        return reply;
    }
    reply.status = got.answer->status;
    reply.body = std::move(got.answer->body);
    return reply;
}

std::optional<bool> Remote::is_router(const std::string& addr, std::string& why) {
    Reply r = call(addr, "GET", "/_health", std::nullopt);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (!r.answered() || parser.parse(r.body).get(doc) || !doc.is_object()) {
        why = "`" + addr + "` did not answer /_health as a node or router: " + r.said();
        return std::nullopt;
    }
    return !doc["scope"].error();
}

std::optional<NodeRef> Remote::node_named(const std::string& router, const std::string& name,
                                          const Tokens& tokens, std::string& why) {
    Reply r = call(router, "GET", "/_shard/nodes/" + name, tokens.router);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (!r.answered() || r.status != 200 || parser.parse(r.body).get(doc)) {
        why = "the router did not say where node `" + name + "` is: " + r.said();
        return std::nullopt;
    }
    NodeRef n{name, text_member(doc, "addr"), tokens.for_node(name)};
    if (n.addr.empty()) {
        why = "the router named no address for node `" + name + "`";
        return std::nullopt;
    }
    return n;
}

std::optional<NodeRef> Remote::locate(const std::string& router, const std::string& tenant,
                                      const Tokens& tokens, std::string& why, bool& missing) {
    missing = false;
    Reply r = call(router, "GET", "/_shard/tenants/" + tenant, tokens.router);
    if (r.answered() && r.status == 404) {
        missing = true;
        why = "the router has no tenant `" + tenant + "`";
        return std::nullopt;
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (!r.answered() || r.status != 200 || parser.parse(r.body).get(doc)) {
        why = "the router did not say where `" + tenant + "` is: " + r.said();
        return std::nullopt;
    }
    const std::string node = text_member(doc, "node");
    if (node.empty()) {
        why = "the router named no node for `" + tenant + "`";
        return std::nullopt;
    }
    return node_named(router, node, tokens, why);
}

std::string Remote::fetch_image(const NodeRef& node, const std::string& tenant, ImageWriter& out,
                                ImageHeaders& headers) {
    server::CallRequest r = request(node.addr, "node `" + node.name + "`");
    const std::string bearer = node.token ? "Bearer " + *node.token : std::string();
    const std::string target = "/_admin/tenants/" + tenant + "/file";
    http::OutRequest get{.method = "GET", .target = target, .host = node.addr};
    if (node.token) get.headers.push_back({"Authorization", bearer});
    get.close = true;
    http::write_request(get, r.bytes);
    server::CallError error;
    std::unique_ptr<server::Connection> conn = client_.connect(r, {}, error);
    http::ResponseHead head;
    if (!conn || !conn->send(r.bytes, error) || !conn->read_head(head, error)) {
        return error.message;
    }
    if (head.status != 200) {
        Reply refused{head.status, {}, {}};
        (void)conn->read_body(head.content_length.value_or(0), refused.body, error);
        return server::who(r) + " answered " + refused.said();
    }
    if (!head.content_length) return server::who(r) + " sent the image without a length";
    headers.bytes = *head.content_length;
    headers.history = header_text(head, "Fenec-History");
    headers.lineage = header_text(head, "Fenec-Lineage");
    headers.digest = header_text(head, "Fenec-Image-Digest");
    const std::string seq = header_text(head, "Fenec-Seq");
    if (seq.empty() || headers.lineage.empty() || headers.digest.empty() ||
        !server::flags::read_u64(seq, headers.seq)) {
        return server::who(r) +
               " sent the image without Fenec-Seq, Fenec-Lineage and "
               "Fenec-Image-Digest";
    }
    Progress progress("fetch " + tenant, headers.bytes);
    Digest digest;
    std::string chunk;
    for (uint64_t left = headers.bytes; left > 0;) {
        const uint64_t n = std::min<uint64_t>(left, image_chunk_bytes);
        if (!conn->read_body(n, chunk, error)) return error.message;
        const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(chunk.data()),
                                               chunk.size());
        digest.update(bytes);
        if (engine::Status st = out.append(bytes); !st.is_ok()) {
            return "writing " + out.part_path() + ": " + st.to_string();
        }
        progress.add(n);
        left -= n;
    }
    if (digest.hex() != headers.digest) {
        return "the image of `" + tenant + "` came with digest " + headers.digest +
               " but its bytes hash to " + digest.hex();
    }
    return {};
}

Reply Remote::send_image(const NodeRef& node, const std::string& tenant, const std::string& path,
                         const ImageHeaders& headers) {
    Reply reply;
    server::CallRequest r = request(node.addr, "node `" + node.name + "`");
    const std::string bearer = node.token ? "Bearer " + *node.token : std::string();
    const std::string target = "/_admin/tenants/" + tenant + "/file";
    const std::string seq = std::to_string(headers.seq);
    http::OutRequest put{.method = "PUT", .target = target, .host = node.addr};
    if (node.token) put.headers.push_back({"Authorization", bearer});
    put.headers.push_back({"Content-Type", "application/octet-stream"});
    put.headers.push_back({"Fenec-Image-Digest", headers.digest});
    put.headers.push_back({"Fenec-Seq", seq});
    put.headers.push_back({"Fenec-Lineage", headers.lineage});
    put.body_bytes = headers.bytes;
    put.expect_continue = true;
    put.close = true;
    http::write_request(put, r.bytes);
    server::CallError error;
    std::unique_ptr<server::Connection> conn = client_.connect(r, {}, error);
    http::ResponseHead head;
    if (!conn || !conn->send(r.bytes, error) || !conn->read_head(head, error, true)) {
        reply.error = error.message;
        return reply;
    }
    if (head.status == 100) {
        auto file = engine::posix_fs().open(path, engine::OpenMode::read_only);
        if (!file.is_ok()) {
            reply.error = file.status().to_string();
            return reply;
        }
        Progress progress("send " + tenant, headers.bytes);
        std::string buf;
        for (uint64_t at = 0; at < headers.bytes;) {
            const uint64_t n = std::min<uint64_t>(headers.bytes - at, image_chunk_bytes);
            buf.resize(n);
            if (engine::Status st =
                    (*file)->read_at(at, {reinterpret_cast<std::byte*>(buf.data()), n});
                !st.is_ok()) {
                reply.error = "reading " + path + ": " + st.to_string();
                return reply;
            }
            // A node that refuses part-way answers and closes: its answer says why.
            if (!conn->send(buf, error)) break;
            at += n;
            progress.add(n);
        }
        if (!conn->read_head(head, error)) {
            reply.error = error.message;
            return reply;
        }
    }
    reply.status = head.status;
    if (!conn->read_body(head.content_length.value_or(0), reply.body, error)) {
        reply.error = error.message;
    }
    return reply;
}

}  // namespace fenec::tools
