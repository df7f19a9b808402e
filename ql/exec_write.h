// ql/exec_write.h: the writing statements (fenecql.md §4), each run inside a block its caller
// began: the writes go to `block` and land when the caller commits it, with whatever else the
// block holds. A refusal leaves what the statement wrote in the block; the caller rolls back.
// The executor (ql/executor.cc) is the only caller.
#pragma once

#include "engine/database.h"
#include "index/index_set.h"
#include "ql/answer.h"
#include "ql/ast.h"
#include "ql/convert.h"
#include "ql/error.h"

namespace fenec::ql {

// Rows: exec_write.cc. `indexes` must be the hook the block's database was opened with.
QlResult<Answer> run_insert(engine::Block& block, const index::IndexSet& indexes, const Insert& ins,
                            const Context& ctx);
QlResult<Answer> run_set(engine::Block& block, const index::IndexSet& indexes, const Set& s,
                         const Context& ctx);
QlResult<Answer> run_del(engine::Block& block, const index::IndexSet& indexes, const Del& d,
                         const Context& ctx);

// Schema (§4.1): exec_schema.cc.
QlResult<Answer> run_create(engine::Block& block, const Create& c);
QlResult<Answer> run_alter(engine::Block& block, const Alter& a);
QlResult<Answer> run_drop(engine::Block& block, const Drop& d);

}  // namespace fenec::ql
