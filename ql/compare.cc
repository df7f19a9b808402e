// ql/compare.cc: the order and equality of FenecQL values (ql/compare.h, fenecql.md §6.2).
// equal_values mirrors compare_values case by case, only skipping the collator (equal texts are
// equal bytes, or equal folds under nocase: index/collation.h), so the two never disagree.
#include "ql/compare.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace fenec::ql {
namespace {

using engine::Value;
using index::TextRule;

enum class Rank : uint8_t { null, boolean, number, timestamp, text, bytes, list, object };

Rank rank(const Value& v) {
    struct Visit {
        Rank operator()(const engine::Null&) const { return Rank::null; }
        Rank operator()(bool) const { return Rank::boolean; }
        Rank operator()(int64_t) const { return Rank::number; }
        Rank operator()(double) const { return Rank::number; }
        Rank operator()(const std::string&) const { return Rank::text; }
        Rank operator()(const engine::Bytes&) const { return Rank::bytes; }
        Rank operator()(const engine::Timestamp&) const { return Rank::timestamp; }
        Rank operator()(const engine::VectorF32&) const { return Rank::list; }
        Rank operator()(const engine::VectorF16&) const { return Rank::list; }
        Rank operator()(const engine::List&) const { return Rank::list; }
        Rank operator()(const engine::Object&) const { return Rank::object; }
    };
    return std::visit(Visit{}, v.rep);
}

// Text inside json objects compares by bytes.
const TextRule kBytesRule{};

template <class T>
int three_way(const T& a, const T& b) {
    return a < b ? -1 : (b < a ? 1 : 0);
}

int sign(int v) { return (v > 0) - (v < 0); }

// Doubles by value (0.0 = -0.0); a NaN, which never enters Fenec, above every number.
int compare_doubles(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) {
        assert(false && "a NaN never enters Fenec (fenecql.md §5.1)");
        return three_way(std::isnan(a), std::isnan(b));
    }
    return three_way(a, b);
}

int compare_numbers(const Value& a, const Value& b) {
    const auto* ai = std::get_if<int64_t>(&a.rep);
    const auto* bi = std::get_if<int64_t>(&b.rep);
    if (ai && bi) return three_way(*ai, *bi);
    if (ai) return compare_int_float(*ai, std::get<double>(b.rep));
    if (bi) return -compare_int_float(*bi, std::get<double>(a.rep));
    return compare_doubles(std::get<double>(a.rep), std::get<double>(b.rep));
}

// One element of a list or of a vector (a component, as a number): `value` or, when it is null,
// `number`.
struct Element {
    const Value* value = nullptr;
    double number = 0;
};

size_t sequence_size(const Value& v) {
    if (const auto* l = std::get_if<engine::List>(&v.rep)) return l->items.size();
    if (const auto* f = std::get_if<engine::VectorF32>(&v.rep)) return f->v.size();
    return std::get<engine::VectorF16>(v.rep).v.size();
}

Element sequence_at(const Value& v, size_t i) {
    if (const auto* l = std::get_if<engine::List>(&v.rep)) return {&l->items[i], 0};
    if (const auto* f = std::get_if<engine::VectorF32>(&v.rep)) return {nullptr, f->v[i]};
    return {nullptr, engine::f16_to_f32(std::get<engine::VectorF16>(v.rep).v[i])};
}

int compare_elements(const Element& a, const Element& b, const TextRule& rule) {
    if (a.value && b.value) return compare_values(*a.value, *b.value, rule);
    if (!a.value && !b.value) return compare_doubles(a.number, b.number);
    return a.value ? compare_values(*a.value, Value(b.number), rule)
                   : compare_values(Value(a.number), *b.value, rule);
}

// Element by element, then the shorter first.
int compare_sequences(const Value& a, const Value& b, const TextRule& rule) {
    const size_t na = sequence_size(a);
    const size_t nb = sequence_size(b);
    for (size_t i = 0; i < std::min(na, nb); ++i) {
        if (const int c = compare_elements(sequence_at(a, i), sequence_at(b, i), rule); c != 0) {
            return c;
        }
    }
    return three_way(na, nb);
}

bool equal_sequences(const Value& a, const Value& b, const TextRule& rule) {
    const size_t n = sequence_size(a);
    if (n != sequence_size(b)) return false;
    for (size_t i = 0; i < n; ++i) {
        const Element ea = sequence_at(a, i);
        const Element eb = sequence_at(b, i);
        const bool equal = ea.value && eb.value ? equal_values(*ea.value, *eb.value, rule)
                                                : compare_elements(ea, eb, rule) == 0;
        if (!equal) return false;
    }
    return true;
}

// Member by member in key byte order (key bytes, then value), then fewer members first.
int compare_objects(const engine::Object& a, const engine::Object& b) {
    const SortedMembers ma(a);
    const SortedMembers mb(b);
    for (size_t i = 0; i < std::min(ma.size(), mb.size()); ++i) {
        if (const int c = sign(ma.key(i).compare(mb.key(i))); c != 0) return c;
        if (const int c = compare_values(ma.value(i), mb.value(i), kBytesRule); c != 0) return c;
    }
    return three_way(ma.size(), mb.size());
}

bool equal_objects(const engine::Object& a, const engine::Object& b) {
    const SortedMembers ma(a);
    const SortedMembers mb(b);
    if (ma.size() != mb.size()) return false;
    for (size_t i = 0; i < ma.size(); ++i) {
        if (ma.key(i) != mb.key(i) || !equal_values(ma.value(i), mb.value(i), kBytesRule)) {
            return false;
        }
    }
    return true;
}

}  // namespace

int compare_int_float(int64_t i, double d) {
    constexpr double kTwo63 = 9223372036854775808.0;  // 2^63, exact
    if (std::isnan(d)) {
        assert(false && "a NaN never enters Fenec (fenecql.md §5.1)");
        return -1;
    }
    if (d >= kTwo63) return -1;  // past every int64
    if (d < -kTwo63) return 1;
    // d in [-2^63, 2^63): its integral part is an exact int64 and its fraction an exact double.
    const double whole = std::trunc(d);
    const auto whole_int = static_cast<int64_t>(whole);
    if (i != whole_int) return i < whole_int ? -1 : 1;
    const double fraction = d - whole;
    return fraction > 0 ? -1 : (fraction < 0 ? 1 : 0);
}

int compare_values(const Value& a, const Value& b, const TextRule& rule) {
    const Rank ra = rank(a);
    const Rank rb = rank(b);
    if (ra != rb) return three_way(ra, rb);
    switch (ra) {
        case Rank::null:
            return 0;
        case Rank::boolean:
            return three_way(std::get<bool>(a.rep), std::get<bool>(b.rep));
        case Rank::number:
            return compare_numbers(a, b);
        case Rank::timestamp:
            return three_way(std::get<engine::Timestamp>(a.rep).ms,
                             std::get<engine::Timestamp>(b.rep).ms);
        case Rank::text:
            return index::compare_text(std::get<std::string>(a.rep), std::get<std::string>(b.rep),
                                       rule);
        case Rank::bytes:
            return sign(
                std::get<engine::Bytes>(a.rep).data.compare(std::get<engine::Bytes>(b.rep).data));
        case Rank::list:
            return compare_sequences(a, b, rule);
        case Rank::object:
            return compare_objects(std::get<engine::Object>(a.rep),
                                   std::get<engine::Object>(b.rep));
    }
    return 0;
}

bool equal_values(const Value& a, const Value& b, const TextRule& rule) {
    const Rank ra = rank(a);
    if (ra != rank(b)) return false;
    switch (ra) {
        case Rank::text:
            return index::equal_text(std::get<std::string>(a.rep), std::get<std::string>(b.rep),
                                     rule);
        case Rank::list:
            return equal_sequences(a, b, rule);
        case Rank::object:
            return equal_objects(std::get<engine::Object>(a.rep), std::get<engine::Object>(b.rep));
        default:
            return compare_values(a, b, rule) == 0;  // no text inside: no collator called
    }
}

bool comparable_for_range(const Value& a, const Value& b) {
    const Rank ra = rank(a);
    return ra == rank(b) && ra != Rank::null;
}

SortedMembers::SortedMembers(const engine::Object& o) : object_(o) {
    assert(o.keys.size() == o.values.size());
    if (std::is_sorted(o.keys.begin(), o.keys.end())) return;
    order_.resize(o.keys.size());
    std::iota(order_.begin(), order_.end(), 0u);
    std::sort(order_.begin(), order_.end(),
              [&](uint32_t x, uint32_t y) { return o.keys[x] < o.keys[y]; });
}

}  // namespace fenec::ql
