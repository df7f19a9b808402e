// server/runtime/host.h: what an open plane asks of a request's `Host` (node-http.md §3.1, open
// planes; router.md §3), one rule for fenec-node and fenec-shard. A plane with no credential set
// answers anyone who reaches it; a browser that a hostile page's DNS name has been re-pointed to
// 127.0.0.1 (DNS rebinding) reaches it too, and sends the hostile name as `Host`. A name the
// client typed that the attacker cannot re-point is `localhost` or a literal address, so an open
// plane takes only those.
#pragma once

#include <optional>
#include <string_view>

namespace fenec::server {

// True for `localhost` (any case), a dotted-quad IPv4 literal or a bracketed IPv6 literal, each
// with an optional `:<port>` of 1–5 digits; a missing Host only on HTTP/1.0 (`version_minor` 0),
// since HTTP/1.1 requires one (RFC 9112 §3.2). False for every name and anything malformed.
bool host_is_local_or_literal(std::optional<std::string_view> host, int version_minor);

}  // namespace fenec::server
