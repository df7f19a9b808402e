// ql/compare.h: the one order of FenecQL values (fenecql.md §6.2), serving equality, ranges,
// `order`, min/max, groups and unique checks; the router merges rows by it too.
//
// Invariants:
// - compare_values is a total order: antisymmetric and transitive for every pair of values.
// - equal_values(a, b) == (compare_values(a, b) == 0) for every pair and every text rule.
// - Kinds rank null < bool < number < timestamp < text < bytes < list < object. A vector ranks,
//   compares and equals as the list of its components (numbers). Values of different ranks are
//   never equal; int and float are one kind, "number", compared by exact mathematical value
//   (3 = 3.0, 0.0 = -0.0, 2^53 + 1 > 2^53 as a float) with no lossy conversion.
// - The text rule applies to text at the top and inside lists, at any depth (a `[text]` field);
//   inside a json object, keys and values compare by bytes (a json field has no rule). This is
//   the order of index/key.h's keys.
// - Objects compare member by member in key byte order: the key's bytes, then the value; then
//   the object with fewer members first.
//
// Floats are finite (§5.1). A NaN is a programmer error: asserted in debug, and ordered above
// every number otherwise so the order stays total.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/value.h"
#include "index/collation.h"

namespace fenec::ql {

// -1, 0 or 1 as `a` sorts before, with or after `b`.
int compare_values(const engine::Value& a, const engine::Value& b, const index::TextRule& rule);

// `=`: compare_values(a, b, rule) == 0, computed without collating texts.
bool equal_values(const engine::Value& a, const engine::Value& b, const index::TextRule& rule);

// Whether `<`, `<=`, `>`, `>=` between `a` and `b` can be true: both of one kind rank, neither
// null. Across kinds such a filter is false (§6.1).
bool comparable_for_range(const engine::Value& a, const engine::Value& b);

// An int and a float by exact value: -1, 0 or 1.
int compare_int_float(int64_t i, double d);

// The members of a json object in ascending key byte order, without copying them: the identity
// when the keys are already sorted (as every object decoded from the engine is), else a sorted
// permutation. The object must outlive the view.
class SortedMembers {
  public:
    explicit SortedMembers(const engine::Object& o);
    size_t size() const { return object_.keys.size(); }
    const std::string& key(size_t i) const { return object_.keys[at(i)]; }
    const engine::Value& value(size_t i) const { return object_.values[at(i)]; }

  private:
    size_t at(size_t i) const { return order_.empty() ? i : order_[i]; }

    const engine::Object& object_;
    std::vector<uint32_t> order_;  // empty: already sorted
};

}  // namespace fenec::ql
