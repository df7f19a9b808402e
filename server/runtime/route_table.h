// server/runtime/route_table.h: what a binary's route table is made of (server/node/routes.h and
// shard/routes.h hold the two tables): the set of methods a route takes, the one `Allow` text
// made from it, and the one path-pattern matcher. A route is served only if a table names it, so
// dispatch, the 405 answers' `Allow` and the test that checks the docs read the same rows.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "server/runtime/http.h"

namespace fenec::server {

// The methods one route takes. `any()` is a route that takes every method it is sent (the
// router's `/t/`, forwarded as it came).
class MethodSet {
  public:
    constexpr MethodSet() = default;
    constexpr MethodSet(std::initializer_list<http::Method> methods) {
        for (http::Method m : methods) bits_ |= bit(m);
    }
    static constexpr MethodSet any() {
        MethodSet s;
        s.any_ = true;
        return s;
    }
    constexpr bool is_any() const { return any_; }
    constexpr bool has(http::Method m) const {
        return any_ ? m != http::Method::other : (bits_ & bit(m)) != 0;
    }
    // The `Allow` value: the methods in http::Method's order, ", " between ("GET, HEAD, POST");
    // "*" for any().
    std::string allow() const;

  private:
    static constexpr uint8_t bit(http::Method m) { return uint8_t(1u << static_cast<unsigned>(m)); }
    uint8_t bits_ = 0;
    bool any_ = false;
};

// Whether `path` (a request's path, no query) is one `pattern` names. A pattern is segments
// between '/': a literal matches itself, `<name>` one non-empty segment, a last segment `…` any
// rest (none included). A pattern ending in '/' matches the path without it too
// (`/t/<tenant>/` names `/t/acme` and `/t/acme/`).
bool path_matches(std::string_view pattern, std::string_view path);

}  // namespace fenec::server
