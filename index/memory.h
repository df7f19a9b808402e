// index/memory.h: what an index's containers hold on the heap, from their shapes under libstdc++
// on 64-bit. A node's memory figure (node-http.md §11) adds these up: honest to within malloc's
// rounding, and counted as the containers change, so reading it costs nothing per row.
#pragma once

#include <cstdint>
#include <string>

namespace fenec::index::memory {

// A string's own heap: none while it fits the 15 bytes kept inline. Judged by size, not
// capacity, so an add and its remove count the same.
inline uint64_t string_heap(const std::string& s) { return s.size() > 15 ? s.size() + 1 : 0; }

// An unordered_map node holding `Value` beside its key: the next link, the cached hash, the
// pair, and its share of the bucket array (load factor about one).
template <class Value>
constexpr uint64_t hash_node_bytes = 8 + 8 + sizeof(std::string) + sizeof(Value) + 8;

// A std::set or std::map node: three links and a colour word, then the element.
template <class Element>
constexpr uint64_t tree_node_bytes = 32 + sizeof(Element);

}  // namespace fenec::index::memory
