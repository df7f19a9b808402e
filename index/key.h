// index/key.h: the order-preserving key of a value. For any two values a and b under one text
// rule, memcmp(key(a), key(b)) orders them exactly as FenecQL compares them (fenecql.md §6.2),
// and the keys are equal exactly when the values are equal: kinds apart (null < bool < number <
// timestamp < text < bytes < list < object), an int and a float by exact value, text by its
// collation or fold (index/collation.h) with bytes breaking ties. Hash, unique and sorted
// indexes are all maps over these keys, so an index can never disagree with a scan.
#pragma once

#include <string>

#include "engine/value.h"
#include "index/collation.h"

namespace fenec::index {

// Appends the key of `v` to `out`. `rule` applies to top-level text and to the text items of a
// list (a `[text]` field); text inside json compares by bytes.
void append_key(const engine::Value& v, const TextRule& rule, std::string& out);

inline std::string key_of(const engine::Value& v, const TextRule& rule) {
    std::string out;
    append_key(v, rule, out);
    return out;
}

// The key of a null: the least key of all.
std::string null_key();

}  // namespace fenec::index
