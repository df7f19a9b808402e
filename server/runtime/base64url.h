// server/runtime/base64url.h: base64url (RFC 4648 §5) without padding, the text of the router's
// mark (server/runtime/mark.h) and of every part of a JSON Web Token (the node's JWTs,
// server/node/jwt.h). One codec for both binaries.
//
// Decoding is strict: no padding ('=' is refused like any character outside the alphabet), no
// whitespace, a length of 1 mod 4 refused, and the unused low bits of the last character must be
// zero, so each byte string has exactly one accepted spelling.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fenec::server {

std::string base64url_encode(std::string_view bytes);
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace fenec::server
