// ql/executor.cc: statements run as one block (node-http.md §5.2): the checks made before any
// runs, the dispatch of each statement, and the block's begin, commit or rollback. A write block
// holds the writer lock from its first statement to its commit, so no other writer interleaves
// and its reads see its own earlier writes; a batch of reads holds one ReadView.
#include "ql/executor.h"

#include <algorithm>

#include "ql/exec_read.h"
#include "ql/exec_write.h"

namespace fenec::ql {

namespace {

const Statement& statement_of(const Item& item) { return item.parsed->statement; }

bool is_compact(const Item& item) {
    return std::holds_alternative<Compact>(statement_of(item).node);
}

// The collection a statement names, for errors met outside it (begin, landing); "" for compact.
std::string collection_of(const Statement& st) {
    return std::visit(
        [](const auto& node) -> std::string {
            if constexpr (requires { node.collection.text; }) {
                return node.collection.text;
            } else {
                return "";
            }
        },
        st.node);
}

// What is refused before any statement runs, for one item.
Failure check_item(const Item& item, size_t count, const RunOptions& options, bool before_commit) {
    const Statement& st = statement_of(item);
    if (options.read_only && st.writes()) {
        Error e;
        e.message = "`" + std::string(st.first_word()) + "` writes, and this endpoint only reads";
        e.status_code = 403;
        e.statement = std::string(st.first_word());
        return e;
    }
    if (is_compact(item) && (count > 1 || before_commit)) {
        Error e;
        e.message = "`compact` rewrites the file and lands no block: it runs alone";
        e.status_code = 400;
        return e;
    }
    if (item.params.size() > item.parsed->params_max) {
        Error e;
        e.message = std::to_string(item.params.size()) + " parameters given, the statement uses " +
                    std::to_string(item.parsed->params_max);
        return e;
    }
    return std::nullopt;
}

BlockOutcome failed(Error error, size_t at) {
    BlockOutcome out;
    out.error = std::move(error);
    out.failed_at = at;
    return out;
}

// One statement inside `block`; a read reads the block's state, its earlier writes included.
QlResult<Answer> run_statement(engine::Block& block, const index::IndexSet& indexes,
                               const Statement& st, const Context& ctx) {
    if (const auto* g = std::get_if<Get>(&st.node)) {
        const engine::ReadView view = block.view();
        return run_get(*g, view, indexes, ctx);
    }
    if (const auto* i = std::get_if<Insert>(&st.node)) return run_insert(block, indexes, *i, ctx);
    if (const auto* s = std::get_if<Set>(&st.node)) return run_set(block, indexes, *s, ctx);
    if (const auto* d = std::get_if<Del>(&st.node)) return run_del(block, indexes, *d, ctx);
    if (const auto* c = std::get_if<Create>(&st.node)) return run_create(block, *c);
    if (const auto* a = std::get_if<Alter>(&st.node)) return run_alter(block, *a);
    if (const auto* d = std::get_if<Drop>(&st.node)) return run_drop(block, *d);
    // check_item keeps compact out of blocks.
    Error e;
    e.message = "`compact` cannot run in a block";
    return e;
}

// The budget's refusal when `budget` was passed, whatever the statement came to: a loop it
// stopped may have left the statement short (fewer rows, a `require` unmet).
Failure over_budget(const Budget& budget) {
    if (budget.passed() == BudgetKind::none) return std::nullopt;
    return budget.error();
}

std::optional<int64_t> now_of(const RunOptions& options) {
    if (options.now_ms == 0) return std::nullopt;
    return options.now_ms;
}

}  // namespace

QlResult<Answer> Executor::run(const ParsedStatement& parsed, std::span<const engine::Value> params,
                               const RunOptions& options) {
    const Item item{&parsed, params};
    BlockOutcome out = run_block(std::span<const Item>(&item, 1), options);
    if (out.error) return std::move(*out.error);
    return std::move(out.answers.front());
}

BlockOutcome Executor::run_block(std::span<const Item> items, const RunOptions& options,
                                 const BeforeCommit& before_commit) {
    for (size_t i = 0; i < items.size(); ++i) {
        if (Failure f = check_item(items[i], items.size(), options, bool(before_commit))) {
            return failed(std::move(*f), i);
        }
    }
    if (items.size() == 1 && is_compact(items[0])) return run_compact();
    const bool writes = std::any_of(items.begin(), items.end(),
                                    [](const Item& it) { return statement_of(it).writes(); });
    if (!writes) return run_reads(items, options);
    return run_writes(items, options, before_commit);
}

BlockOutcome Executor::run_read(const engine::ReadView& view, const Item& item,
                                const BudgetLimits& limits) {
    BlockOutcome out;
    if (Failure f = check_item(item, 1, RunOptions{}, false)) return failed(std::move(*f), 0);
    if (statement_of(item).writes()) {
        Error e;
        e.message = "run_read runs reads only";
        return failed(std::move(e), 0);
    }
    Budget budget(limits);
    Context ctx{item.params, view.now_ms(), &budget};
    QlResult<Answer> a = run_get(std::get<Get>(statement_of(item).node), view, indexes_, ctx);
    if (Failure f = over_budget(budget)) return failed(std::move(*f), 0);
    if (!a) return failed(a.take_error(), 0);
    out.answers.push_back(std::move(a.value()));
    out.seq = view.seq();
    out.history = view.history();
    out.durable = db_.durable_seq() >= out.seq;
    return out;
}

BlockOutcome Executor::read_by_id(const engine::ReadView& view, const std::string& collection,
                                  uint64_t id) {
    QlResult<Answer> a = ql::read_by_id(view, collection, id);
    if (!a) return failed(a.take_error(), 0);
    BlockOutcome out;
    out.answers.push_back(std::move(a.value()));
    out.seq = view.seq();
    out.history = view.history();
    out.durable = db_.durable_seq() >= out.seq;
    return out;
}

bool is_point_read(const Statement& statement, const engine::ReadView& view) {
    const Get* g = std::get_if<Get>(&statement.node);
    if (!g || g->near || g->match || g->group || g->order || g->offset || !g->lookups.empty() ||
        !g->where) {
        return false;
    }
    if (g->select) {
        for (const SelectItem& item : g->select->items) {
            if (is_aggregate(item.what)) return false;  // count(*) is a scan
        }
    }
    const Expr& w = g->where->expr;
    if (!w.is<Compare>() || w.as<Compare>().op != CompareOp::eq) return false;
    const Compare& c = w.as<Compare>();
    const Expr* column = c.lhs->is<Column>() ? c.lhs.get() : c.rhs.get();
    const Expr* value = column == c.lhs.get() ? c.rhs.get() : c.lhs.get();
    if (!column->is<Column>() || column->as<Column>().is_path()) return false;
    if (!value->is<Param>() && !value->is<Literal>()) return false;
    const std::string& field = column->as<Column>().field;
    if (field == "_id") return true;
    engine::Result<engine::CollectionId> coll = view.find(g->collection.text);
    if (!coll.is_ok()) return true;  // answered at once: 404
    const engine::Schema* schema = view.schema(*coll);
    const std::optional<uint16_t> slot = schema->slot_of(field);
    if (!slot) return true;  // answered at once: unknown field
    const engine::IndexKind k = schema->fields[*slot].index.kind;
    return k == engine::IndexKind::hash || k == engine::IndexKind::unique;
}

BlockOutcome Executor::run_reads(std::span<const Item> items, const RunOptions& options) {
    BlockOutcome out;
    const engine::ReadView view = db_.read(now_of(options));
    Budget budget(options.budget);
    Context ctx{{}, view.now_ms(), &budget};
    for (size_t i = 0; i < items.size(); ++i) {
        ctx.params = items[i].params;
        QlResult<Answer> a =
            run_get(std::get<Get>(statement_of(items[i]).node), view, indexes_, ctx);
        if (Failure f = over_budget(budget)) return failed(std::move(*f), i);
        if (!a) return failed(a.take_error(), i);
        out.answers.push_back(std::move(a.value()));
    }
    out.seq = view.seq();
    out.history = view.history();
    out.durable = db_.durable_seq() >= out.seq;
    return out;
}

BlockOutcome Executor::run_writes(std::span<const Item> items, const RunOptions& options,
                                  const BeforeCommit& before_commit) {
    // Refusals outside any one statement (begin, landing) name the writes' first or last item.
    size_t first_write = items.size();
    size_t last_write = 0;
    for (size_t i = 0; i < items.size(); ++i) {
        if (!statement_of(items[i]).writes()) continue;
        first_write = std::min(first_write, i);
        last_write = i;
    }
    engine::Result<engine::Block> begun =
        db_.begin(engine::BlockOptions{.internal = false,
                                       .now_ms = now_of(options),
                                       .defer_durable = options.defer_durable,
                                       .no_wait = options.no_wait});
    if (!begun.is_ok()) {
        if (options.no_wait && begun.status().code() == engine::Code::busy) {
            BlockOutcome out;
            out.busy = true;
            return out;
        }
        return failed(engine_error(begun.status(), collection_of(statement_of(items[first_write]))),
                      first_write);
    }
    engine::Block& block = *begun;
    BlockOutcome out;
    Budget budget(options.budget);
    Context ctx{{}, block.now_ms(), &budget};
    for (size_t i = 0; i < items.size(); ++i) {
        ctx.params = items[i].params;
        QlResult<Answer> a = run_statement(block, indexes_, statement_of(items[i]), ctx);
        if (Failure f = over_budget(budget)) {  // what it wrote so far lands with nothing else
            block.rollback();
            return failed(std::move(*f), i);
        }
        if (!a) {
            block.rollback();
            return failed(a.take_error(), i);
        }
        out.answers.push_back(std::move(a.value()));
    }
    const std::string collection = collection_of(statement_of(items[last_write]));
    if (before_commit) {
        engine::Status st = before_commit(block, out.answers);
        if (!st.is_ok()) {
            block.rollback();
            return failed(engine_error(st, ""), items.size() - 1);
        }
    }
    const uint64_t writes = block.writes();
    const engine::Seq last{db_.seq().v + writes};  // where the block lands, if it does
    const engine::HistoryId history = block.view().history();
    engine::Result<engine::Landed> landed = block.commit();
    if (!landed.is_ok()) {
        BlockOutcome refused = failed(engine_error(landed.status(), collection), items.size() - 1);
        // Appended, then its fsync failed: in the file, its outcome unknown (engine.md §5.4). Only
        // an io_error comes after the append, and any io_error leaves the database latched, no
        // later block landing: seq reaches `last` only if this block landed.
        if (writes > 0 && landed.status().code() == engine::Code::io_error && db_.seq() >= last) {
            refused.landed = true;
            refused.seq = last;
            refused.history = history;
        }
        return refused;
    }
    out.seq = landed->last;
    out.history = landed->history;
    out.landed = writes > 0;
    out.durable = landed->durable || db_.durable_seq() >= out.seq;
    return out;
}

BlockOutcome Executor::run_compact() {
    engine::Status st = db_.compact();
    if (!st.is_ok()) return failed(engine_error(st, ""), 0);
    BlockOutcome out;
    out.answers.push_back(Answer{});
    const engine::ReadView view = db_.read();
    out.seq = view.seq();
    out.history = view.history();
    out.durable = db_.durable_seq() >= out.seq;
    return out;
}

}  // namespace fenec::ql
