// ql/plan.h: reads an index answers in order. `order k [desc] limit n` over a field with an
// ordered index (@sorted, @ttl) walks the index from the right end and stops once n rows pass
// the filter, instead of sorting every match (fenecql.md §4.1: the same rows a sort gives, ties
// by ascending _id in both directions).
#pragma once

#include <optional>

#include "engine/database.h"
#include "index/index_set.h"
#include "ql/ast.h"
#include "ql/eval.h"
#include "ql/exec_read.h"

namespace fenec::ql {

// The first `want` rows of the read in `order`, or nullopt when no ordered index serves it.
std::optional<Rows> ordered_by_index(const engine::ReadView& view, const index::IndexSet& indexes,
                                     engine::CollectionId c, const engine::Schema& schema,
                                     const CNode* where, const OrderBy& order,
                                     const std::vector<SelectItem>* aliases, uint64_t want,
                                     const Context& ctx);

}  // namespace fenec::ql
