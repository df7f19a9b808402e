// server/obs/access.cc: the access log's line (server/obs/access.h).
#include "server/obs/access.h"

#include <algorithm>

#include "json/writer.h"
#include "server/obs/audit.h"

namespace fenec::obs {
namespace {

// What a query value not kept is written as.
constexpr std::string_view elided = "\u2026";

bool kept(std::string_view key) {
    return std::find(access_kept_query_keys.begin(), access_kept_query_keys.end(), key) !=
           access_kept_query_keys.end();
}

// The first segment of `path` (after its leading '/') and the rest after it.
std::pair<std::string_view, std::string_view> first_segment(std::string_view path) {
    if (!path.starts_with('/')) return {};
    path.remove_prefix(1);
    const size_t slash = path.find('/');
    if (slash == std::string_view::npos) return {path, {}};
    return {path.substr(0, slash), path.substr(slash)};
}

}  // namespace

std::string access_target(std::string_view target) {
    const size_t q = target.find('?');
    if (q == std::string_view::npos) return std::string(target);
    std::string out(target.substr(0, q + 1));
    std::string_view query = target.substr(q + 1);
    bool first = true;
    while (true) {
        const size_t amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        if (!first) out.push_back('&');
        first = false;
        const size_t eq = pair.find('=');
        if (eq == std::string_view::npos || kept(pair.substr(0, eq))) {
            out.append(pair);
        } else {
            out.append(pair.substr(0, eq + 1));
            out.append(elided);
        }
        if (amp == std::string_view::npos) break;
        query.remove_prefix(amp + 1);
    }
    return out;
}

std::string_view access_tenant(std::string_view target) {
    const std::string_view path = target.substr(0, target.find('?'));
    auto [first, rest] = first_segment(path);
    if (first != "t") {
        if (first != "_admin" && first != "_replication" && first != "_shard") return {};
        auto [second, after] = first_segment(rest);
        if (second != "tenants") return {};
        rest = after;
    }
    return first_segment(rest).first;
}

std::string access_line(const AccessLine& line) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("at");
    w.string(iso_time_ms(line.at_ms));
    w.key("peer");
    w.string(line.peer);
    string_or_null(w, "method", line.method);
    w.key("target");
    if (line.method.empty()) {
        w.null();
    } else {
        w.string(access_target(line.target));
    }
    w.key("status");
    w.int64(line.status);
    w.key("bytes_in");
    w.uint64(line.bytes_in);
    w.key("bytes_out");
    w.uint64(line.bytes_out);
    w.key("us");
    w.uint64(line.us);
    string_or_null(w, "request_id", line.request_id);
    string_or_null(w, "tenant",
                   line.method.empty() ? std::string_view() : access_tenant(line.target));
    if (line.stream) {
        w.key("stream");
        w.boolean(true);
    }
    if (!line.complete) {
        w.key("complete");
        w.boolean(false);
    }
    w.end_object();
    return out;
}

}  // namespace fenec::obs
