// shard/console.h: the operator console, a page fenec-shard serves at `/_console`. Its files
// (shard/console/: index.html, console.css, console.js, favicon.svg; no build step, no framework)
// are embedded into the binary at build time (shard/console/embed.cmake writes them into the
// generated console_assets.cc).
//
// The page is served without a credential and carries no data: every figure it shows it fetches
// from the router's own API (`/_shard/…`, `/_metrics`) with the router's `--token`, which the
// operator types into its sign-in form and the page keeps in the tab's sessionStorage, never in a
// URL. Every answer is sent with a Content-Security-Policy that lets the page run only its own
// script and style and talk only to this router (no inline script, no other origin, no framing),
// `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.
#pragma once

#include <span>
#include <string_view>

#include "server/runtime/http.h"

namespace fenec::shard {

// One embedded file: its name under shard/console/ and its bytes.
struct ConsoleAsset {
    std::string_view name;
    std::string_view bytes;
};

// Every embedded file; defined in the generated console_assets.cc.
std::span<const ConsoleAsset> console_assets();

// The Content-Security-Policy of every console answer.
inline constexpr std::string_view console_csp =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// `GET`/`HEAD /_console` (index.html) and `/_console/<asset>`: the file with its type and the
// headers above; 404 for a name not embedded, 405 for another method.
http::Response serve_console(const http::RequestHead& head);

}  // namespace fenec::shard
