// server/runtime/route_table.cc: the method set's Allow text and the path-pattern matcher
// (route_table.h).
#include "server/runtime/route_table.h"

namespace fenec::server {

std::string MethodSet::allow() const {
    if (any_) return "*";
    std::string out;
    for (http::Method m :
         {http::Method::get, http::Method::head, http::Method::post, http::Method::put,
          http::Method::patch, http::Method::del, http::Method::options}) {
        if (!has(m)) continue;
        if (!out.empty()) out += ", ";
        out += http::method_name(m);
    }
    return out;
}

namespace {

// The segment of `s` starting at `at` (after a '/'), and where the next one starts (npos past
// the last).
std::string_view next_segment(std::string_view s, size_t& at) {
    const size_t end = s.find('/', at);
    std::string_view seg = s.substr(at, end == std::string_view::npos ? s.npos : end - at);
    at = end == std::string_view::npos ? std::string_view::npos : end + 1;
    return seg;
}

}  // namespace

bool path_matches(std::string_view pattern, std::string_view path) {
    if (pattern.empty() || pattern[0] != '/' || path.empty() || path[0] != '/') return false;
    size_t p = 1, q = 1;
    while (p != std::string_view::npos) {
        const std::string_view want = next_segment(pattern, p);
        if (want == "…") return p == std::string_view::npos;
        if (q == std::string_view::npos) {
            // The path ran out: only a pattern's trailing '/' (an empty last segment) is left.
            return want.empty() && p == std::string_view::npos;
        }
        const std::string_view got = next_segment(path, q);
        const bool wildcard = want.size() > 2 && want.front() == '<' && want.back() == '>';
        if (wildcard ? got.empty() : got != want) return false;
    }
    return q == std::string_view::npos;
}

}  // namespace fenec::server
