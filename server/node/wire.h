// server/node/wire.h: how numbers and ids travel in the node's headers, paths and query strings:
// seqs and waits as decimals (Fenec-After, Fenec-Wait, since, Last-Event-ID), document ids as
// positive decimals (REST paths), lineage and history ids as 16 lowercase hex digits
// (node-http.md §4, README "ids": the engine's one codec, engine::format::hex16 and parse_hex16).
// One reader and one writer for each, used by every route.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/format.h"

namespace fenec::node {

// A whole decimal of digits only ("", signs, spaces and overflow refused).
inline std::optional<uint64_t> parse_decimal(std::string_view s) {
    uint64_t v = 0;
    if (s.empty()) return std::nullopt;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

// A document id in a path: a positive decimal without leading zeros, at most 2^63-1.
inline std::optional<uint64_t> parse_doc_id(std::string_view s) {
    if (s.empty() || s[0] == '0') return std::nullopt;
    std::optional<uint64_t> v = parse_decimal(s);
    if (!v || *v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return v;
}

// A collection name that can stand in a statement's text: FenecQL's name characters. REST never
// names a `_` collection (the server's), so those are refused by the caller.
inline bool plain_name(std::string_view s) {
    if (s.empty() || s.size() > 128) return false;
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (!alpha(s[0])) return false;
    for (char c : s) {
        if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
    }
    return true;
}

}  // namespace fenec::node
