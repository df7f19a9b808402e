// shard/merge.h: the merges of the query across tenants (router.md §12.5), with no I/O: the
// request's `merge` object read and checked (§12.2, §12.3), each tenant's answer turned into the
// merge's input on the thread that fetched it (parsed, its rows split out byte for byte, checked
// against the merge), and the final concat, order merge (OrderMerge) or fold over those inputs.
//
// Invariants:
// - Values compare by ql::compare_values (fenecql.md §6.2), the engine's own order: a text in the
//   form the engine writes a timestamp compares as its time unless its column was given as an
//   object (a key object's text is always text), and an object's collate/nocase is its TextRule.
// - order: the merge of the tenants' inputs (each in the merge's order, checked) equals a stable
//   sort of all their rows, the tenants taken in name order: ties go in tenant name order.
// - fold: equals folding the union of the rows; group columns compare by their rules, a nocase
//   group answered under the first tenant's (by name) first row's text; whole-number sums exact,
//   past int64 refused.
// - A row passed on is the node's own bytes (keys in its order, numbers as it wrote them).
//
// Thread safety: prepare_tenant may run on many threads at once (one simdjson parser a thread);
// a TenantInput is then read by the merge functions on one thread.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/value.h"
#include "index/collation.h"

namespace fenec::shard {

enum class MergeKind : uint8_t { concat, order, fold };

std::string_view merge_name(MergeKind kind);

// A key of an order, or a group, min or max column of a fold.
struct MergeColumn {
    std::string column;
    bool desc = false;
    bool told = false;     // given as an object: its text is text, never read as a timestamp
    index::TextRule rule;  // bytes unless told a collate or nocase
    std::string label;     // as messages say it: "at desc"
};

struct MergeSpec {
    MergeKind kind = MergeKind::concat;
    std::vector<MergeColumn> keys;   // order
    std::vector<MergeColumn> group;  // fold
    std::vector<std::string> sum;
    std::vector<MergeColumn> min;
    std::vector<MergeColumn> max;
};

// A refusal of the request (§12.3): 400, the message, and an extra member where it names one.
struct MergeRefusal {
    std::string message;
    std::string member;  // "collation", "column" or ""
    std::string value;
};

// Reads `merge` (absent: concat). nullopt when fine.
std::optional<MergeRefusal> parse_merge(const simdjson::dom::element* merge, MergeSpec& out);

// A text as a value of a column: a timestamp when it is in the form the engine writes one
// (`2024-05-01T10:00:00Z`, `…T10:00:00.500Z`) and the column is not `told`, else text.
// Arrays become lists; objects json objects (their texts stay text).
engine::Value to_value(const simdjson::dom::element& e, bool told);

// One fold column's running value.
struct FoldCell {
    enum class Role : uint8_t { sum, min, max };
    Role role = Role::sum;
    bool any = false;        // a value other than null was seen
    __int128 int_sum = 0;    // sum: the whole numbers, exactly
    double float_sum = 0;    // sum: the floats
    bool has_float = false;
    engine::Value best;      // min / max, in its comparison form (see key_value)
    engine::Value best_out;  // the same value as the node gave it
};

struct FoldGroup {
    std::vector<engine::Value> key;      // the group columns', request order, comparison form
    std::vector<engine::Value> key_out;  // the same as the first row holding it gave them
    std::vector<FoldCell> cells;         // the fold columns', in FoldLayout order
};

// The fold columns in one order (the spec's: sums, mins, maxes) with their roles.
struct FoldLayout {
    std::vector<std::string> columns;
    std::vector<FoldCell::Role> roles;
    std::vector<const MergeColumn*> rules;  // min/max: the column; sum: nullptr
};
FoldLayout fold_layout(const MergeSpec& spec);

// A column's value in its comparison form: to_value's, with every text (at the top and inside
// lists) under a rule other than plain bytes replaced by its index::sort_key, so that values
// compare by ql::compare_values under the bytes rule alone, exactly as the originals do under the
// column's rule, without a collator per comparison.
engine::Value key_value(const simdjson::dom::element& e, const MergeColumn& column);

// Writes `v` as the engine's JSON writer does (fenecql.md §12.2): a value read back from a node's
// answer is written again in the node's own bytes.
void write_value(std::string& out, const engine::Value& v);

// A tenant's answer turned into the merge's input.
struct TenantInput {
    std::string body;                         // the node's answer; `rows` points into it
    std::vector<std::string_view> rows;       // each row's JSON text
    std::vector<engine::Value> keys;          // order: row r's key i at r * keys' count + i
    std::vector<FoldGroup> groups;            // fold: this tenant's groups, folded
    std::vector<std::string> fold_order;      // fold: the fold columns in the order it gave them
};

// The bytes of the top JSON object's member `key` in `json` (which simdjson has validated), as
// they were sent: a request's `params` pass to every tenant as they came.
std::optional<std::string_view> member_bytes(std::string_view json, std::string_view key);

// Parses `body` (a node's 200), splits its rows, checks them against `spec`. On a misfit,
// `why` says how (§12.6: no rows array, a row not an object, out of order, a column neither
// grouped nor folded, a text in a sum) and false is returned.
bool prepare_tenant(const MergeSpec& spec, std::string body, TenantInput& out, std::string& why);

// The order's comparison of two rows' keys (spec.keys.size() values each, as TenantInput::keys
// holds them): <0, 0, >0. `decided` is the key that decided.
int compare_keys(const MergeSpec& spec, const engine::Value* a, const engine::Value* b,
                 size_t* decided = nullptr);

// A row of the merged answer: the tenant's index among the inputs, and the row's.
struct MergedRow {
    uint32_t tenant = 0;
    uint32_t row = 0;
    bool operator==(const MergedRow&) const = default;
};

// concat: tenants in the order given (name order), each's rows in its order. `inputs` may hold
// nullptr for a tenant without rows (failed).
std::vector<MergedRow> merge_concat(const std::vector<const TenantInput*>& inputs);
// order: OrderMerge over `inputs` added in index order; ties in the order of `inputs`.
std::vector<MergedRow> merge_order(const MergeSpec& spec,
                                   const std::vector<const TenantInput*>& inputs);

// The order merged as the answers arrive, so that little of it is left once the last one has:
// each tenant's input is added on its arrival, in any order of tenants, as a run of its own, and
// runs are merged in a binary counter (two runs of n tenants become one of 2n), so each row is
// moved about log2(tenants) times in all and finish() merges at most log2(tenants) + 1 runs.
// Rows compare by their keys (compare_keys), then tenant index, then row: a total order, so the
// result is the same whatever the order of adding, and equals merge_order over the same inputs.
//
// Not thread-safe: one thread at a time (the query's lock). An added input must stay in place,
// unchanged, until finish() (its keys are pointed into); `spec` must outlive the merge.
class OrderMerge {
  public:
    explicit OrderMerge(const MergeSpec& spec) : spec_(&spec) {}
    void add(uint32_t tenant, const TenantInput& input);
    // The merged rows of every input added; the merge is empty after.
    std::vector<MergedRow> finish();

  private:
    struct Entry {
        const engine::Value* key = nullptr;  // the row's first key in its input's `keys`
        uint32_t tenant = 0;
        uint32_t row = 0;
    };
    struct Run {
        std::vector<Entry> entries;  // in the merge's order
        size_t tenants = 0;          // inputs merged into it, rows or not
    };
    bool before(const Entry& a, const Entry& b) const;
    void merge_last_two();

    const MergeSpec* spec_;
    std::vector<Run> runs_;  // tenants' counts non-increasing from the first
};

// fold: the rows of the fold, each a JSON object text. A whole-number sum past int64 is an
// error naming the column (`overflow_column`), and false is returned.
bool merge_fold(const MergeSpec& spec, const std::vector<const TenantInput*>& inputs,
                std::vector<std::string>& rows, std::string& overflow_column);

}  // namespace fenec::shard
