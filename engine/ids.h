// engine/ids.h: strong types for the numbers the engine hands out, so a collection id is never
// passed where a document id is meant.
#pragma once

#include <compare>
#include <cstdint>

namespace fenec::engine {

struct CollectionId {
    uint32_t v = 0;
    auto operator<=>(const CollectionId&) const = default;
};
struct DocId {
    uint64_t v = 0;
    auto operator<=>(const DocId&) const = default;
};
struct Seq {
    uint64_t v = 0;
    auto operator<=>(const Seq&) const = default;
};
struct HistoryId {
    uint64_t v = 0;
    auto operator<=>(const HistoryId&) const = default;
};
struct LineageId {
    uint64_t v = 0;
    auto operator<=>(const LineageId&) const = default;
};

}  // namespace fenec::engine
