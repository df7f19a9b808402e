// tools/shell_remote.cc: the HTTP backend of tools/shell_remote.h. One BlockingClient with a
// pool of one idle connection, so a session's statements go over one keep-alive connection.
#include "tools/shell_remote.h"

#include "json/writer.h"
#include "ql/describe.h"
#include "server/runtime/client.h"
#include "server/runtime/http.h"
#include "server/runtime/pool.h"
#include "tools/shell_json.h"

namespace fenec::tools {

namespace {

// Each connect, read or write; a statement runs within the node's own `--statement-ms` (10 s by
// default), so a minute is a node gone quiet, not a slow statement.
constexpr uint64_t remote_timeout_ms = 60'000;

std::string error_body(std::string_view message) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("error");
    w.string(message);
    w.end_object();
    return out;
}

class RemoteBackend final : public Backend {
  public:
    RemoteBackend(RemoteTarget target, std::string token)
        : target_(std::move(target)),
          token_(std::move(token)),
          client_(server::BlockingClient::Options{
              std::make_shared<server::ConnectionPool>(server::ConnectionPool::Options{.max = 1}),
              server::system_lookup, remote_timeout_ms, nullptr}) {}

    server::CallResult call(std::string_view method, const std::string& path,
                            std::string_view body) {
        http::OutRequest out;
        out.method = method;
        out.target = path;
        out.host = target_.host;
        const std::string auth = "Bearer " + token_;
        if (!token_.empty()) out.headers.push_back({"Authorization", auth});
        if (method == "POST") out.headers.push_back({"Content-Type", "application/json"});
        out.body = body;
        server::CallRequest request;
        request.addr = target_.addr;
        request.about = target_.tenant;
        request.resend_after_sent = method == "GET";  // a statement may write: never sent twice
        request.body_bytes_max = remote_answer_bytes_max;
        http::write_request(out, request.bytes);
        return client_.call(request);
    }

    // `GET /t/<tenant>/`: the body, or false with `failure` said.
    bool describe(std::string& body, std::string& failure) {
        server::CallResult r = call("GET", "/t/" + target_.tenant + "/", {});
        if (!r.answer) {
            failure = r.error.message;
            return false;
        }
        if (r.answer->status != 200) {
            std::optional<ErrorView> e = read_error(r.answer->body);
            failure = "HTTP " + std::to_string(r.answer->status) + ": " +
                      (e ? e->message : r.answer->body);
            return false;
        }
        body = std::move(r.answer->body);
        return true;
    }

    Outcome run(const std::string& statement) override {
        std::string body;
        json::Writer w(body);
        w.begin_object();
        w.key("query");
        w.string(statement);
        w.end_object();
        server::CallResult r = call("POST", "/t/" + target_.tenant + "/query", body);
        if (!r.answer) return {false, {}, r.error.message};
        const bool ok = r.answer->status >= 200 && r.answer->status < 300;
        // A refusal from the node is already `{"error": …}`; one from something else between
        // (a proxy's page) is said as one, so every outcome's body is JSON.
        if (!ok && !read_error(r.answer->body)) {
            return {false,
                    error_body("HTTP " + std::to_string(r.answer->status) + " from " +
                               target_.addr + ": " + r.answer->body.substr(0, 200)),
                    {}};
        }
        return {ok, std::move(r.answer->body), {}};
    }

    bool collections(std::vector<CollectionText>& out, std::string& failure) override {
        std::string body;
        if (!describe(body, failure)) return false;
        if (!read_tenant(body, out)) {
            failure = "the tenant's description is not the JSON expected";
            return false;
        }
        for (CollectionText& c : out) {
            const Outcome count = run("get " + ql::name_text(c.name) + " select count(*)");
            if (count.ok) c.rows = read_single_int(count.body);
        }
        return true;
    }

  private:
    RemoteTarget target_;
    std::string token_;
    server::BlockingClient client_;
};

}  // namespace

bool is_remote(std::string_view arg) {
    return arg.starts_with("http://") || arg.starts_with("https://");
}

bool parse_remote(std::string_view url, RemoteTarget& out, std::string& failure) {
    if (url.starts_with("https://")) {
        failure = "https is not spoken here: fenec-node and fenec-shard serve plain HTTP";
        return false;
    }
    url.remove_prefix(std::string_view("http://").size());
    const size_t slash = url.find('/');
    out.host = std::string(url.substr(0, slash));
    std::string_view path = slash == std::string_view::npos ? "" : url.substr(slash);
    if (out.host.empty()) {
        failure = "the URL names no host";
        return false;
    }
    const size_t bracket = out.host.rfind(']');
    const size_t colon = out.host.rfind(':');
    const bool has_port =
        colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
    out.addr = has_port ? out.host : out.host + ":80";
    if (!path.starts_with("/t/")) {
        failure = "the URL's path must be /t/<tenant>";
        return false;
    }
    path.remove_prefix(3);
    if (path.ends_with('/')) path.remove_suffix(1);
    if (path.empty() || path.find_first_of("/?#") != std::string_view::npos) {
        failure = "the URL's path must be /t/<tenant>";
        return false;
    }
    out.tenant = std::string(path);
    return true;
}

std::unique_ptr<Backend> open_remote_backend(const RemoteTarget& target, std::string token,
                                             std::string& failure) {
    auto backend = std::make_unique<RemoteBackend>(target, std::move(token));
    std::string body;
    if (!backend->describe(body, failure)) {
        failure = "http://" + target.host + "/t/" + target.tenant + ": " + failure;
        return nullptr;
    }
    return backend;
}

}  // namespace fenec::tools
