// server/node/lease_admin.h: the readers of `POST /_admin/lease`'s grant and `DELETE
// /_admin/lease`'s release bodies (node-http.md §9.2), the node's one parser of those bytes.
// lease_admin.cc serves the routes with them; fuzz/grant_fuzz.cc feeds them outside bytes.
//
// Contract: a body is refused with a message naming the field at fault (in backticks), or
// saying what the body must be when it is not a JSON object; an accepted grant's fields hold
// what Leases::take expects (authority 1..128 printable bytes, history 16 lowercase hex,
// lease_ms > 0, tenant names valid).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/node/lease.h"

namespace fenec::node {

// §9.2's request. nullopt with `error` naming the field at fault.
std::optional<Grant> read_grant(std::string_view body, std::string& error);

// The release body {"authority","term"}: nullopt when read (into `authority` and `term`), else
// the message naming the field at fault.
std::optional<std::string> read_release(std::string_view body, std::string& authority,
                                        uint64_t& term);

}  // namespace fenec::node
