// shard/console.cc: the operator console's files served (shard/console.h).
#include "shard/console.h"

#include "shard/router.h"
#include "shard/routes.h"

namespace fenec::shard {

namespace {

std::string_view content_type_of(std::string_view name) {
    if (name.ends_with(".html")) return "text/html; charset=utf-8";
    if (name.ends_with(".css")) return "text/css; charset=utf-8";
    if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
    if (name.ends_with(".svg")) return "image/svg+xml";
    return "application/octet-stream";
}

}  // namespace

http::Response serve_console(const http::RequestHead& head) {
    if (auto r = method_refusal(head)) return std::move(*r);
    constexpr std::string_view prefix = "/_console/";
    const std::string_view name = head.path == "/_console"
                                      ? std::string_view("index.html")
                                      : std::string_view(head.path).substr(prefix.size());
    for (const ConsoleAsset& asset : console_assets()) {
        if (asset.name != name) continue;
        http::Response r;
        r.body = std::string(asset.bytes);
        r.content_type = std::string(content_type_of(name));
        r.header("Content-Security-Policy", std::string(console_csp));
        r.header("X-Content-Type-Options", "nosniff");
        r.header("Referrer-Policy", "no-referrer");
        r.header("X-Frame-Options", "DENY");
        // A router upgraded serves its own page at once, never a cached one of another version.
        r.header("Cache-Control", "no-cache");
        return r;
    }
    http::Response r = Router::error(
        404, "no console file `" + std::string(name) + "`: the console is at /_console");
    r.header("X-Content-Type-Options", "nosniff");
    return r;
}

}  // namespace fenec::shard
