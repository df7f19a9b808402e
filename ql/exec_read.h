// ql/exec_read.h: the read path of the executor (fenecql.md §7, §10): candidates from indexes
// or a scan, the filter, ordering, grouping and aggregates, paging, projection and lookups.
#pragma once

#include "engine/database.h"
#include "index/index_set.h"
#include "ql/answer.h"
#include "ql/ast.h"
#include "ql/convert.h"
#include "ql/error.h"
#include "ql/eval.h"

namespace fenec::ql {

struct Rows {
    std::vector<std::pair<engine::DocId, engine::DocView>> rows;  // in answer order
};

// The rows of `collection` the filter keeps, narrowed by an index where one applies, in
// ascending id order. `where` may be null (every row).
Rows select_rows(const engine::ReadView& view, const index::IndexSet& indexes,
                 engine::CollectionId collection, const CNode* where, const Context& ctx);

// Orders `rows` by `order` (fenecql.md §7.3); ties by ascending id.
Failure order_rows(Rows& rows, const OrderBy& order, const engine::Schema& schema,
                   const std::string& collection, const std::vector<SelectItem>* aliases);

// Resolves a limit/offset/require argument.
QlResult<uint64_t> int_arg(const IntArg& arg, const Context& ctx);

// Projects rows to the columns of `select` (all fields with `_id` first when none or `*`).
// `scores`, one per row, are a ranked read's (§8, §9): a select item naming `_score` shows the
// row's score there, and a select list naming none has the table add `_score` last (scored);
// without them, `_score` is a 400.
QlResult<Table> project(const Rows& rows, const std::optional<SelectList>& select,
                        const engine::Schema& schema, const std::string& collection,
                        const std::vector<double>* scores = nullptr);

QlResult<Answer> run_get(const Get& get, const engine::ReadView& view,
                         const index::IndexSet& indexes, const Context& ctx);

// `get <collection> where _id = <id>` without its compilation: the row (none where `id` names no
// live document) with every field, `_id` first, as that statement answers it; the same 404 where
// the collection does not exist. For the REST read of one document (node-http.md §5.3), whose
// statement is always this one.
QlResult<Answer> read_by_id(const engine::ReadView& view, const std::string& collection,
                            uint64_t id);

Error not_found_collection(const Name& name);

}  // namespace fenec::ql
