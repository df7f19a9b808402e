// ql/executor.h: runs a parsed statement against one tenant's database and its indexes, and
// answers in the result model of ql/answer.h. A writing statement is one engine block: it lands
// whole or not at all (fenecql.md §1). Errors carry their HTTP status and members (§12.3); the
// server writes them as they are.
#pragma once

#include <cstdint>
#include <span>

#include "engine/database.h"
#include "engine/value.h"
#include "index/index_set.h"
#include "ql/answer.h"
#include "ql/ast.h"
#include "ql/error.h"

namespace fenec::ql {

struct RunOptions {
    bool read_only = false;  // the admin endpoint: writing statements are refused, 403
    int64_t now_ms = 0;      // the statement's one `now`: now(), TTL expiry, the block's time;
                             // 0: the database clock's wall time
};

class Executor {
public:
    // `indexes` must be the hook `db` was opened with.
    Executor(engine::Database& db, const index::IndexSet& indexes) : db_(db), indexes_(indexes) {}

    QlResult<Answer> run(const ParsedStatement& parsed, std::span<const engine::Value> params,
                         const RunOptions& options = {});

private:
    engine::Database& db_;
    const index::IndexSet& indexes_;
};

// An engine refusal as FenecQL answers it (409 duplicate, 507 quota...), naming `collection`.
Error engine_error(const engine::Status& st, const std::string& collection);

}  // namespace fenec::ql
