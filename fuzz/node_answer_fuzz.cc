// fuzz/node_answer_fuzz.cc: fuzz_node_answer, bytes as a node's answer to the router's fan-out
// query (`POST /_admin/tenants/<t>/query`, router.md §12) as the router reads it: shard/merge.h's
// prepare_tenant under one of a few MergeSpecs (the input's first byte picks it, '0' the first
// of kSpecs: concat; order by a number, by a text under a collation, by a timestamp, on two
// keys; fold by group with sums, min and max), then the merges over two tenants' inputs.
// Seeds: fuzz/corpus/node_answer/, answers of the shape test/shard/query_test.cc's nodes give.
//
// Input: the spec byte, then tenant A's answer, a newline, tenant B's answer (a node writes no
// raw newline in its JSON); without a newline the rest is cut in halves.
//
// Invariants (a broken one traps, so libFuzzer keeps the input):
//   - a refused answer says why;
//   - every row passed on is the node's own bytes: a piece of its body that parses as an object;
//   - order: each input's keys are in the merge's order (prepare_tenant checked it), and
//     merge_order's output is a stable sort of A's rows then B's by compare_keys, exactly;
//   - concat: A's rows then B's, each in its order;
//   - fold: a refusal (a whole-number sum past int64) names its column, and folding the two
//     inputs equals folding one input holding A's rows then B's (compared where no float sum
//     makes the order of additions show).
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "shard/merge.h"

namespace {

using namespace fenec::shard;

constexpr size_t kInputBytesMax = 64 << 10;

[[noreturn]] void broken(const char* what, const std::string& detail = "") {
    std::fprintf(stderr, "fuzz_node_answer: invariant broken: %s %s\n", what, detail.c_str());
    __builtin_trap();
}

// The merges the first byte picks from, as a request's `merge` spells them (§12.2).
constexpr const char* kSpecs[] = {
    R"J({"kind":"concat"})J",
    R"J({"kind":"order","keys":["n"]})J",
    R"J({"kind":"order","keys":["n desc"]})J",
    R"J({"kind":"order","keys":[{"column":"name","collate":"tr","nocase":true}]})J",
    R"J({"kind":"order","keys":[{"column":"name","collate":"und","desc":true},"at"]})J",
    R"J({"kind":"order","keys":["at desc"]})J",
    R"J({"kind":"fold","group":["status"],"sum":["count(*)","sum(total)"]})J",
    R"J({"kind":"fold","min":["min(at)"],"max":["max(at)"]})J",
    (R"J({"kind":"fold","group":[{"column":"name","collate":"tr","nocase":true}],"sum":["n"],)J"
     R"J("min":["x"],"max":[{"column":"at","collate":"und"}]})J"),
};
constexpr size_t kSpecCount = sizeof(kSpecs) / sizeof(kSpecs[0]);

const std::vector<MergeSpec>& specs() {
    static const std::vector<MergeSpec> all = [] {
        std::vector<MergeSpec> out;
        for (const char* json : kSpecs) {
            simdjson::dom::parser parser;
            simdjson::dom::element e;
            MergeSpec spec;
            if (parser.parse(json, std::strlen(json)).get(e) || parse_merge(&e, spec)) {
                broken("a fixed merge does not parse", json);
            }
            out.push_back(std::move(spec));
        }
        return out;
    }();
    return all;
}

// Each row lies within the body and parses, alone, as an object.
void check_rows(const TenantInput& in) {
    const char* begin = in.body.data();
    const char* end = begin + in.body.size();
    simdjson::dom::parser parser;
    for (std::string_view row : in.rows) {
        if (row.data() < begin || row.data() + row.size() > end) broken("a row outside its body");
        simdjson::dom::element e;
        simdjson::dom::object o;
        if (parser.parse(std::string(row)).get(e) || e.get_object().get(o)) {
            broken("a row that is not an object alone", std::string(row));
        }
    }
}

void check_order(const MergeSpec& spec, const TenantInput* a, const TenantInput* b) {
    const size_t width = spec.keys.size();
    const std::vector<const TenantInput*> inputs{a, b};
    for (const TenantInput* in : inputs) {
        if (in->keys.size() != in->rows.size() * width) broken("keys not one set a row");
        for (size_t r = 1; r < in->rows.size(); ++r) {
            if (compare_keys(spec, &in->keys[(r - 1) * width], &in->keys[r * width]) > 0) {
                broken("an input taken out of the merge's order");
            }
        }
    }
    std::vector<MergedRow> expect;
    for (uint32_t t = 0; t < 2; ++t) {
        for (uint32_t r = 0; r < inputs[t]->rows.size(); ++r) expect.push_back({t, r});
    }
    auto key = [&](const MergedRow& m) { return &inputs[m.tenant]->keys[size_t{m.row} * width]; };
    std::stable_sort(expect.begin(), expect.end(), [&](const MergedRow& x, const MergedRow& y) {
        return compare_keys(spec, key(x), key(y)) < 0;
    });
    const std::vector<MergedRow> got = merge_order(spec, inputs);
    if (got.size() != expect.size()) broken("merge_order lost or made rows");
    for (size_t i = 1; i < got.size(); ++i) {
        if (compare_keys(spec, key(got[i - 1]), key(got[i])) > 0) {
            broken("merge_order's output is not sorted by compare_keys");
        }
    }
    if (got != expect) broken("merge_order is not the stable sort of its inputs");
}

void check_concat(const TenantInput* a, const TenantInput* b) {
    const std::vector<MergedRow> got = merge_concat({a, nullptr, b});
    if (got.size() != a->rows.size() + b->rows.size()) broken("merge_concat lost or made rows");
    for (size_t i = 0; i < got.size(); ++i) {
        const bool in_a = i < a->rows.size();
        const MergedRow want{in_a ? 0u : 2u, static_cast<uint32_t>(in_a ? i : i - a->rows.size())};
        if (!(got[i] == want)) broken("merge_concat out of order");
    }
}

bool holds_float(const std::vector<std::string>& rows) {
    for (const std::string& r : rows) {
        if (r.find_first_of(".eE") != std::string::npos) return true;
    }
    return false;
}

void check_fold(const MergeSpec& spec, const TenantInput* a, const TenantInput* b) {
    std::vector<std::string> two, one;
    std::string column_two, column_one;
    const bool ok_two = merge_fold(spec, {a, b}, two, column_two);
    if (!ok_two && column_two.empty()) broken("a fold refused without naming its column");
    // One tenant holding both's rows, as the node's own bytes.
    std::string body = "{\"rows\":[";
    bool first = true;
    for (const TenantInput* in : {a, b}) {
        for (std::string_view row : in->rows) {
            if (!first) body += ',';
            body.append(row);
            first = false;
        }
    }
    body += "]}";
    TenantInput both;
    std::string why;
    if (!prepare_tenant(spec, body, both, why)) broken("the union of two fold inputs refused", why);
    const bool ok_one = merge_fold(spec, {&both}, one, column_one);
    if (ok_one != ok_two) broken("a fold overflows over two tenants and not over their union");
    if (!ok_two || holds_float(two) || holds_float(one)) return;
    if (two != one) broken("a fold over two tenants differs from the fold of their union");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0 || size > kInputBytesMax) return -1;
    // '0' picks kSpecs[0], '1' kSpecs[1], … (any byte picks one).
    const MergeSpec& spec = specs()[static_cast<uint8_t>(data[0] - '0') % kSpecCount];
    std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    size_t cut = rest.find('\n');
    const size_t skip = cut == std::string_view::npos ? 0 : 1;
    if (cut == std::string_view::npos) cut = rest.size() / 2;
    TenantInput inputs[2];
    bool ok[2];
    const std::string_view bodies[2] = {rest.substr(0, cut), rest.substr(cut + skip)};
    for (int t = 0; t < 2; ++t) {
        std::string why;
        ok[t] = prepare_tenant(spec, std::string(bodies[t]), inputs[t], why);
        if (!ok[t] && why.empty()) broken("an answer refused without a reason");
        if (ok[t]) check_rows(inputs[t]);
    }
    // A tenant refused is left out of the merge, as the router leaves out a failed one.
    TenantInput none;
    const TenantInput* a = ok[0] ? &inputs[0] : &none;
    const TenantInput* b = ok[1] ? &inputs[1] : &none;
    switch (spec.kind) {
        case MergeKind::concat:
            check_concat(a, b);
            break;
        case MergeKind::order:
            check_order(spec, a, b);
            break;
        case MergeKind::fold:
            check_fold(spec, a, b);
            break;
    }
    return 0;
}
