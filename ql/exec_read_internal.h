// ql/exec_read_internal.h: what the files of the read path share, and nothing outside them
// includes (ql/exec_read.h is the read path's surface). exec_read.cc runs `get` from the top and
// pages and projects; the steps it calls each live in a file of their own:
//
//   exec_candidates.cc  the rows an index narrows to, or a scan, filtered (select_rows)
//   exec_order.cc       `order` by one sort of encoded keys (order_rows, append_sort_key)
//   plan.cc             `order … limit` by walking an ordered index instead (ql/plan.h)
//   exec_groups.cc      `group` and aggregates (run_grouped)
//   exec_lookups.cc     `lookup` levels, planned then attached per parent row (Lookups)
//   exec_ranked.cc      `match` and `near` (run_ranked)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ql/exec_read.h"

namespace fenec::ql {

// ---- paging and projection (exec_read.cc)

// The rows [from, to) of `size` that `offset` and `limit` keep (§7.1 step 3).
struct Page {
    size_t from = 0;
    size_t to = 0;
};

QlResult<Page> page_of(const std::optional<IntArg>& offset, const std::optional<IntArg>& limit,
                       size_t size, const Context& ctx);

// A failure naming the first column name given twice (the answer's columns are unique, §7.2).
Failure unique_names(const std::vector<std::string>& names, uint32_t pos);

// ---- order keys (exec_order.cc)

// Appends `id` big-endian: the last part of a sort string, so equal keys order by it.
void append_id(std::string& out, uint64_t id);
// Appends the memcmp-ordered key of `v` under `rule`, every byte inverted for `desc`.
void append_sort_key(std::string& out, const engine::Value& v, const index::TextRule& rule,
                     bool desc);

// ---- groups and aggregates (exec_groups.cc)

// Whether the select list holds an aggregate: the read is then grouped, `group` or not.
bool has_aggregate(const std::optional<SelectList>& select);

// A grouped read over `rows` (ascending id): its groups' rows, ordered and paged (§7.2, §7.4).
QlResult<Answer> run_grouped(const Get& g, const Rows& rows, const engine::Schema& schema,
                             const std::string& collection, const Context& ctx);

// ---- lookups (exec_lookups.cc)

// One lookup level resolved against its collection and the level it attaches to.
struct LookupLevel {
    const Lookup* lookup;
    engine::CollectionId collection;
    const engine::Schema* schema;
    FieldRef child_key;
    FieldRef parent_key;
    const index::FieldIndex* index = nullptr;  // on child_key, unless it is `_id`
    std::optional<CNode> where;
};

// Every lookup of `g` planned, in order, before any row is read: a missing collection, a key
// without @hash or @unique, keys of different types or a lookup named like a column fail here.
QlResult<std::vector<LookupLevel>> plan_lookups(const Get& g, const engine::ReadView& view,
                                                const index::IndexSet& indexes,
                                                const engine::Schema& top, const Context& ctx);

// Puts the children tables under the lookup's name in each row of `t`; `tables` holds one per
// row of the level before paging, `from` being the first row kept.
void attach_tables(Table& t, const std::string& name, std::vector<Table>& tables, size_t from);

// The children of one parent row, and whether any passed the lookup's `where` (and kept their
// own required children) before its offset and limit: what `required` judges (§10).
struct Children {
    Table table;
    bool any = false;
};

struct Lookups {
    const engine::ReadView& view;
    const Context& ctx;
    std::vector<LookupLevel>& levels;

    // The rows of `level` whose key matches the parent's and that pass the lookup's `where`,
    // in ascending id order.
    Rows matching(size_t level, engine::DocId parent_id, const engine::DocView& parent_doc) const;
    // The children at `level` of a parent row, each with its own children attached.
    QlResult<Children> children(size_t level, engine::DocId parent_id,
                                const engine::DocView& parent_doc);
    // Attaches level `level` to `rows` (of the level above), dropping parents a `required`
    // lookup leaves childless. Children are computed before the caller pages `rows`.
    QlResult<std::vector<Table>> attach(size_t level, Rows& rows);
};

// ---- ranked reads (exec_ranked.cc)

// `match` and `near`: the ranked rows, `_score` last in each (fenecql.md §8, §9).
QlResult<Answer> run_ranked(const Get& g, const engine::ReadView& view,
                            const index::IndexSet& indexes, engine::CollectionId c,
                            const engine::Schema& schema, const CNode* where, const Context& ctx);

}  // namespace fenec::ql
