// ql/executor.h: runs parsed statements against one tenant's database and its indexes, and
// answers in the result model of ql/answer.h. Statements run as ONE engine block: every write of
// every statement lands as one record or none does (fenecql.md §1, node-http.md §5.2), and reads
// among them see the block's earlier writes. Errors carry their HTTP status and members (§12.3);
// the server writes them as they are.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "engine/database.h"
#include "engine/value.h"
#include "index/index_set.h"
#include "ql/answer.h"
#include "ql/ast.h"
#include "ql/budget.h"
#include "ql/error.h"

namespace fenec::ql {

struct RunOptions {
    bool read_only = false;  // the admin endpoint: writing statements are refused, 403
    int64_t now_ms = 0;      // the statements' one `now`: now(), TTL expiry, the block's time;
                             // 0: the database clock's wall time
    // What the run may spend (ql/budget.h), one fresh budget per run_block: passed, the item
    // that passed it is refused with Error::budget and a write block rolls back whole.
    BudgetLimits budget{};
    // A write block's commit returns once it landed, not after its fsync (engine::BlockOptions::
    // defer_durable): BlockOutcome::durable may be false, and the caller waits for it
    // (Database::when_durable) before answering.
    bool defer_durable = false;
    // The block begins only if the writer lock is free now (engine::BlockOptions::no_wait);
    // otherwise nothing runs and BlockOutcome::busy says so.
    bool no_wait = false;
};

// One statement of a block and its parameters; both must outlive the run_block call.
struct Item {
    const ParsedStatement* parsed;  // never null
    std::span<const engine::Value> params;
};

// What a block of statements came to.
struct BlockOutcome {
    std::vector<Answer> answers;  // one per item, in order; empty with `error`
    // Set: the block is refused and, unless `landed`, nothing of it landed and seq is unchanged.
    std::optional<Error> error;
    // With `error`: the 0-based item refused; for a refusal as the block begins (frozen, lease,
    // rate) its first writing item, at landing (quota, lease, storage) or by before_commit its
    // last item.
    size_t failed_at = 0;
    // A write block's last seq (Landed::last), or the seq its reads saw where it wrote nothing
    // (a batch of reads only: the one ReadView's). Zero with an error that landed nothing.
    engine::Seq seq;
    engine::HistoryId history;  // the history `seq` was written on
    // A write block landed (it held at least one write). With `error` too: it is in the file
    // but its fsync failed, the outcome unknown to the client (node-http.md §5.8).
    bool landed = false;
    bool durable = false;  // an fsync covers `seq`
    // RunOptions::no_wait and the writer lock was held: nothing ran, no error, nothing landed.
    bool busy = false;
};

// Called once every statement of a write block ran, before its commit, with their answers: the
// server adds its own rows (an Idempotency-Key's, through Block::put_internal) to land in the
// same block. A non-ok Status rolls the whole block back and is the block's error. It runs
// under the block's writer lock: it must reach the tenant only through `block` (find, the
// put_internal family, view(): view().seq() is the seq the block stands at so far), never
// through the Database, whose locking calls would deadlock.
using BeforeCommit = std::function<engine::Status(engine::Block&, std::span<const Answer>)>;

class Executor {
  public:
    // `indexes` must be the hook `db` was opened with.
    Executor(engine::Database& db, const index::IndexSet& indexes) : db_(db), indexes_(indexes) {}

    // One statement: run_block with one item.
    QlResult<Answer> run(const ParsedStatement& parsed, std::span<const engine::Value> params,
                         const RunOptions& options = {});

    // Runs `items` in order as one block (node-http.md §5.2):
    // - every item is checked before any runs: a writing statement under `read_only` is 403, more
    //   params than the statement uses 400, and `compact` beside other items or with
    //   `before_commit` 400 (it rewrites the file and lands no block), each at its index;
    // - items holding a write run in one engine::Block (begun once, one `now`, the writer lock
    //   held throughout; schema statements too); reads among them read the block's state;
    //   `before_commit` runs last; the block commits once;
    // - reads only run on one ReadView (no block, no writer lock) and report its seq;
    //   `before_commit` is not called;
    // - a lone `compact` compacts the file and reports the seq after it.
    // On any refusal the block rolls back whole; `error` and `failed_at` say which item.
    BlockOutcome run_block(std::span<const Item> items, const RunOptions& options,
                           const BeforeCommit& before_commit = {});
    // One read statement (a get or select) at `view`, which must be of this executor's
    // database: for a caller that took the view itself (Database::try_read).
    BlockOutcome run_read(const engine::ReadView& view, const Item& item,
                          const BudgetLimits& budget = {});
    // `get <collection> where _id = <id>` at `view` without parsing or compiling it: the REST
    // read of one document (node-http.md §5.3). Answers as run_read of that statement would.
    BlockOutcome read_by_id(const engine::ReadView& view, const std::string& collection,
                            uint64_t id);

  private:
    BlockOutcome run_reads(std::span<const Item> items, const RunOptions& options);
    BlockOutcome run_writes(std::span<const Item> items, const RunOptions& options,
                            const BeforeCommit& before_commit);
    BlockOutcome run_compact();

    engine::Database& db_;
    const index::IndexSet& indexes_;
};

// A read whose cost does not grow with the collection: a `get` (or select) of columns, no order,
// group, aggregate, offset, ranking or lookup, whose `where` is one equality of `_id` or of a
// hash- or unique-indexed field to a parameter or literal. The node answers such reads on its
// event loop rather than handing them to a worker. `view` gives the schema.
bool is_point_read(const Statement& statement, const engine::ReadView& view);

// An engine refusal as FenecQL answers it (409 duplicate, 507 quota...), naming `collection`.
Error engine_error(const engine::Status& st, const std::string& collection);

}  // namespace fenec::ql
