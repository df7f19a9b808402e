// server/obs/access.h: the access log's line (`--access-log <path>`, both binaries): one JSON
// object per request answered, written through a LineLog (server/obs/audit.h) off the event
// loop, so a line never blocks a request (a full queue drops and counts it).
//
// A line never holds a credential or a value a client sent as data: the target is written with
// every query value replaced by `…` except those of the keys that only shape an answer
// (access_kept_query_keys); headers, bodies and tokens are not seen here at all.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fenec::obs {

// Query keys whose values an access line keeps: they say how an answer is shaped (the node's
// REST reserved keys, a subscription's cursor) and carry no client data. Every other key is a
// filter on a field (`?email=eq.…`), whose value is data, or unknown.
inline constexpr std::array<std::string_view, 7> access_kept_query_keys = {
    "select", "order", "limit", "offset", "count", "since", "history",
};

// `target` as an access line writes it: the path as sent, then each query pair with its value
// replaced by `…` unless its key is one of access_kept_query_keys (compared as sent, not
// decoded). A key without a value stays as it was.
std::string access_target(std::string_view target);

// The tenant a path names, as both binaries route: `/t/<t>/…`, or `/_admin/tenants/<t>…`,
// `/_replication/tenants/<t>…`, `/_shard/tenants/<t>…`; empty for any other path. The name is
// taken as sent: a request whose name is not a tenant's was refused, and the line says which
// name it gave.
std::string_view access_tenant(std::string_view target);

// One request answered, as the server saw it on the wire.
struct AccessLine {
    int64_t at_ms = 0;        // wall clock, UTC ms, when the answer's last byte went out
    std::string_view peer;    // "127.0.0.1:51234"
    std::string_view method;  // as sent; null when no head could be read (400, 431)
    std::string_view target;  // as sent, query included (access_target is applied)
    int status = 0;
    uint64_t bytes_in = 0;        // the request body's bytes read
    uint64_t bytes_out = 0;       // the answer's bytes sent, head included
    uint64_t us = 0;              // from the head read to the answer's last byte sent
    std::string_view request_id;  // the answer's X-Request-Id; null when it has none
    bool stream = false;          // a stream (a subscription): its line comes at its end
    bool complete = true;         // false: the connection was cut before the answer was sent
};

// `{"at":…,"peer":…,"method":…,"target":…,"status":…,"bytes_in":…,"bytes_out":…,"us":…,
// "request_id":…,"tenant":…[,"stream":true][,"complete":false]}`, without a line feed; `tenant`
// is access_tenant's, null when empty.
std::string access_line(const AccessLine& line);

}  // namespace fenec::obs
