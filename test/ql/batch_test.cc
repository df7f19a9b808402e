// test/ql/batch_test.cc: proves Executor::run_block (node-http.md §5.2, §5.7, §4.2): statements
// run in order as ONE engine block (one landing, seq moved by the writes, reads seeing the
// block's earlier writes, schema statements inside it), a refusal anywhere lands nothing and
// names the item, a batch of reads holds one ReadView and no writer lock, `compact` cannot join
// a block, and before_commit's `_idempotency` row lands in the same block, outside the rows quota.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::batch_test {
namespace {

using engine::Code;
using engine::Database;
using engine::Status;
using engine::Value;

// Counts the blocks that land, as subscribers would be woken.
struct Landings : engine::ChangeListener {
    std::vector<engine::BlockSummary> blocks;
    void on_block(const engine::BlockSummary& s) override { blocks.push_back(s); }
    void on_durable(engine::Seq) override {}
};

struct Batch {
    std::vector<ql::ParsedStatement> parsed;
    std::vector<std::vector<Value>> params;
    std::vector<ql::Item> items() const {
        std::vector<ql::Item> out;
        for (size_t i = 0; i < parsed.size(); ++i) out.push_back(ql::Item{&parsed[i], params[i]});
        return out;
    }
};

Batch batch(const std::vector<std::string>& texts) {
    Batch b;
    for (const std::string& t : texts) {
        auto p = ql::parse(t);
        EXPECT_TRUE(p) << t << ": " << p.error().to_string();
        if (p) b.parsed.push_back(std::move(p.value()));
        b.params.emplace_back();
    }
    return b;
}

struct Tenant {
    EngineEnv env;
    index::IndexSet indexes;
    Landings landings;
    std::unique_ptr<Database> db;

    Tenant() {
        engine::OpenOptions o = env.options();
        o.hook = &indexes;
        o.listener = &landings;
        auto created = Database::create("/t.fenec", o);
        EXPECT_TRUE(created.is_ok()) << created.status().to_string();
        db = std::move(*created);
        run("create collection r (n int @unique)");
    }
    ql::BlockOutcome block(const std::vector<std::string>& texts, const ql::RunOptions& o = {},
                           const ql::BeforeCommit& before_commit = {}) {
        const Batch b = batch(texts);
        const std::vector<ql::Item> items = b.items();
        return ql::Executor(*db, indexes).run_block(items, o, before_commit);
    }
    std::string run(const std::string& text) {
        ql::BlockOutcome out = block({text});
        if (out.error) return "error " + out.error->to_string();
        return ql::to_json(out.answers.at(0));
    }
    uint64_t rows() const { return db->usage().rows; }
};

// The server's hook, as fenec-node's Idempotency-Key will write it: the key's row, its
// collection created in the block where missing.
Status put_key(engine::Block& block, const std::string& key, size_t answers) {
    engine::Result<engine::CollectionId> c = block.find("_idempotency");
    if (!c.is_ok()) {
        c = block.create_internal_collection("_idempotency", schema_of("key:text, answers:int"));
        if (!c.is_ok()) return c.status();
    }
    engine::Doc row{{0, Value(key)}, {1, Value(int64_t(answers))}};
    return block.put_internal(*c, std::nullopt, row).status();
}

TEST(Batch, WritesThenAReadInOneLanding) {
    Tenant t;
    const uint64_t seq = t.db->seq().v;
    const size_t landed = t.landings.blocks.size();
    ql::BlockOutcome out =
        t.block({"insert r {n: 1}", "put r {_id: 7, n: 2}", "get r select n order n"});
    ASSERT_FALSE(out.error) << out.error->to_string();
    ASSERT_EQ(out.answers.size(), 3u);
    EXPECT_EQ(ql::to_json(out.answers[0]), R"({"affected":1,"ids":[1]})");
    EXPECT_EQ(ql::to_json(out.answers[1]), R"({"affected":1,"ids":[7]})");
    EXPECT_EQ(ql::to_json(out.answers[2]), R"({"rows":[{"n":1},{"n":2}]})");
    EXPECT_EQ(out.seq.v, seq + 2);
    EXPECT_EQ(t.db->seq().v, seq + 2);
    EXPECT_EQ(out.history, t.db->history().current());
    EXPECT_TRUE(out.landed);
    EXPECT_TRUE(out.durable);
    ASSERT_EQ(t.landings.blocks.size(), landed + 1);  // one block, subscribers woken once
    EXPECT_EQ(t.landings.blocks.back().first.v, seq + 1);
    EXPECT_EQ(t.landings.blocks.back().last.v, seq + 2);
}

TEST(Batch, AFailingStatementLandsNothing) {
    Tenant t;
    ASSERT_EQ(t.run("insert r {n: 1}"), R"({"affected":1,"ids":[1]})");
    const uint64_t seq = t.db->seq().v;
    const size_t landed = t.landings.blocks.size();
    ql::BlockOutcome out =
        t.block({"insert r {n: 2}", "set r {n: 3} where n = 2", "insert r {n: 1}"});
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->status(), 409);
    EXPECT_EQ(out.error->field, "n");
    EXPECT_EQ(out.failed_at, 2u);
    EXPECT_FALSE(out.landed);
    EXPECT_TRUE(out.answers.empty());
    EXPECT_EQ(t.db->seq().v, seq);
    EXPECT_EQ(t.rows(), 1u);
    EXPECT_EQ(t.landings.blocks.size(), landed);
    EXPECT_EQ(t.run("get r select n"), R"({"rows":[{"n":1}]})");
    // The ids the refused block took are given again (nothing of it stays).
    EXPECT_EQ(t.run("insert r {n: 5}"), R"({"affected":1,"ids":[2]})");
}

TEST(Batch, CreateThenWriteInOneBlock) {
    Tenant t;
    const uint64_t seq = t.db->seq().v;
    ql::BlockOutcome out = t.block({"create collection s (name text)", "insert s {name: \"a\"}",
                                    "alter collection s add field age int",
                                    "set s {age: 3} where name = \"a\"", "get s select name, age"});
    ASSERT_FALSE(out.error) << out.error->to_string();
    EXPECT_EQ(ql::to_json(out.answers[4]), R"({"rows":[{"name":"a","age":3}]})");
    EXPECT_EQ(out.seq.v, seq + 4);
    // A refusal after the create takes the collection back with it.
    out = t.block({"create collection u (x int)", "insert u {x: 1}", "insert u {y: 1}"});
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.failed_at, 2u);
    EXPECT_EQ(t.run("get u"), "error 404: no collection `u`");
}

TEST(Batch, ReadsOnlyHoldOneViewAndNoWriterLock) {
    Tenant t;
    ASSERT_EQ(t.run("insert r [{n: 1}, {n: 2}]"), R"({"affected":2,"ids":[1,2]})");
    const uint64_t seq = t.db->seq().v;
    // A frozen tenant refuses every block as it begins: reads that began one would fail here.
    ASSERT_OK(t.db->freeze());
    ql::BlockOutcome out = t.block({"get r select count(*)", "get r select n where n = 2"});
    ASSERT_FALSE(out.error) << out.error->to_string();
    EXPECT_EQ(ql::to_json(out.answers[0]), R"x({"rows":[{"count(*)":2}]})x");
    EXPECT_EQ(ql::to_json(out.answers[1]), R"({"rows":[{"n":2}]})");
    EXPECT_EQ(out.seq.v, seq);
    EXPECT_EQ(out.history, t.db->history().current());
    EXPECT_FALSE(out.landed);
    // A batch holding a write does begin a block, refused at its first writing item.
    out = t.block({"get r", "del r where n = 1", "get r"});
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->status(), 503);
    EXPECT_EQ(out.error->engine_code, Code::frozen);
    EXPECT_EQ(out.failed_at, 1u);
    t.db->thaw();
}

TEST(Batch, ReadOnlyRefusesAnyWriteBeforeRunning) {
    Tenant t;
    ql::BlockOutcome out = t.block({"get r", "insert r {n: 1}"}, ql::RunOptions{.read_only = true});
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->status(), 403);
    EXPECT_EQ(out.error->statement, "insert");
    EXPECT_EQ(out.failed_at, 1u);
    EXPECT_EQ(t.rows(), 0u);
}

TEST(Batch, IdempotencyRowLandsInTheSameBlockOutsideTheRowsQuota) {
    Tenant t;
    engine::Limits limits;
    limits.rows = 2;
    t.db->set_limit(limits);
    const uint64_t seq = t.db->seq().v;
    const size_t landed = t.landings.blocks.size();
    size_t seen = 0;
    ql::BlockOutcome out = t.block({"insert r [{n: 1}, {n: 2}]", "get r select count(*)"}, {},
                                   [&](engine::Block& b, std::span<const ql::Answer> answers) {
                                       seen = answers.size();
                                       return put_key(b, "k1", answers.size());
                                   });
    ASSERT_FALSE(out.error) << out.error->to_string();
    EXPECT_EQ(seen, 2u);
    // Two rows, the `_idempotency` collection and its row: one block of four writes.
    EXPECT_EQ(out.seq.v, seq + 4);
    ASSERT_EQ(t.landings.blocks.size(), landed + 1);
    engine::Usage u = t.db->usage();
    EXPECT_EQ(u.rows, 2u);  // the rows quota is full, and the key row was not counted
    EXPECT_EQ(u.internal_rows, 1u);
    {
        const engine::ReadView v = t.db->read();
        auto keys = v.find("_idempotency");
        ASSERT_OK(keys);
        EXPECT_EQ(v.count(*keys), 1u);
    }
    // A block adding no client row still takes its key row, the collection there already.
    out = t.block({"set r {n: 3} where n = 2"}, {},
                  [&](engine::Block& b, std::span<const ql::Answer> answers) {
                      return put_key(b, "k2", answers.size());
                  });
    ASSERT_FALSE(out.error) << out.error->to_string();
    EXPECT_EQ(t.db->usage().internal_rows, 2u);
    // A client row past the quota is refused at landing, its key row with it.
    out = t.block({"insert r {n: 9}"}, {},
                  [&](engine::Block& b, std::span<const ql::Answer> answers) {
                      return put_key(b, "k3", answers.size());
                  });
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->status(), 507);
    EXPECT_EQ(out.error->collection, "r");
    ASSERT_TRUE(out.error->engine_detail);
    EXPECT_EQ(out.error->engine_detail->quota, engine::QuotaKind::rows);
    EXPECT_EQ(out.failed_at, 0u);
    EXPECT_EQ(t.db->usage().internal_rows, 2u);
}

TEST(Batch, BeforeCommitRefusalRollsBackEverything) {
    Tenant t;
    const uint64_t seq = t.db->seq().v;
    ql::BlockOutcome out = t.block({"insert r {n: 1}", "create collection s (x int)"}, {},
                                   [&](engine::Block& b, std::span<const ql::Answer>) {
                                       Status st = put_key(b, "k", 0);
                                       if (!st.is_ok()) return st;
                                       return Status::error(Code::busy, "the key is in flight");
                                   });
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->status(), 409);
    EXPECT_EQ(out.error->engine_code, Code::busy);
    EXPECT_EQ(out.failed_at, 1u);
    EXPECT_FALSE(out.landed);
    EXPECT_EQ(t.db->seq().v, seq);
    EXPECT_EQ(t.db->usage().rows, 0u);
    EXPECT_EQ(t.db->usage().internal_rows, 0u);
    EXPECT_EQ(t.run("get s"), "error 404: no collection `s`");
}

TEST(Batch, BeforeCommitIsNotCalledForReadsOnly) {
    Tenant t;
    bool called = false;
    ql::BlockOutcome out = t.block({"get r"}, {}, [&](engine::Block&, std::span<const ql::Answer>) {
        called = true;
        return Status::ok();
    });
    ASSERT_FALSE(out.error) << out.error->to_string();
    EXPECT_FALSE(called);
}

TEST(Batch, CompactRunsAlone) {
    Tenant t;
    ASSERT_EQ(t.run("insert r {n: 1}"), R"({"affected":1,"ids":[1]})");
    ql::BlockOutcome out = t.block({"insert r {n: 2}", "compact", "get r"});
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->status(), 400);
    EXPECT_EQ(out.failed_at, 1u);
    EXPECT_EQ(t.rows(), 1u);  // nothing ran
    // Alone it compacts, as run() always did; with a before_commit it has no block to join.
    out = t.block({"compact"}, {},
                  [](engine::Block&, std::span<const ql::Answer>) { return Status::ok(); });
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.failed_at, 0u);
    out = t.block({"compact"});
    ASSERT_FALSE(out.error) << out.error->to_string();
    EXPECT_EQ(ql::to_json(out.answers.at(0)), R"({"ok":true})");
    EXPECT_EQ(out.seq, t.db->seq());
}

TEST(Batch, SetReturningInsideABlock) {
    Tenant t;
    ql::BlockOutcome out =
        t.block({"insert r [{n: 1}, {n: 2}]", "set r {n: 10} where n = 1 returning n",
                 "del r where n = 2 returning _id, n", "get r select n"});
    ASSERT_FALSE(out.error) << out.error->to_string();
    EXPECT_EQ(ql::to_json(out.answers[1]), R"({"affected":1,"rows":[{"n":10}]})");
    EXPECT_EQ(ql::to_json(out.answers[2]), R"({"affected":1,"rows":[{"_id":2,"n":2}]})");
    EXPECT_EQ(ql::to_json(out.answers[3]), R"({"rows":[{"n":10}]})");
}

// The outcome the server answers 500 "outcome unknown" (node-http.md §5.8): appended, then the
// fsync failed; and a failed append, which landed nothing.
TEST(Batch, AFailedSyncAfterLandingSaysItLanded) {
    Tenant t;
    const uint64_t seq = t.db->seq().v;
    t.env.fs.fail_sync(1);
    ql::BlockOutcome out = t.block({"insert r {n: 1}", "insert r {n: 2}"});
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->status(), 500);
    EXPECT_TRUE(out.landed);
    EXPECT_FALSE(out.durable);
    EXPECT_EQ(out.seq.v, seq + 2);
    EXPECT_EQ(out.history, t.db->history().current());

    Tenant u;
    const uint64_t useq = u.db->seq().v;
    u.env.fs.fail_append(1);
    out = u.block({"insert r {n: 1}"});
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.error->status(), 500);
    EXPECT_FALSE(out.landed);
    EXPECT_EQ(u.db->seq().v, useq);
}

TEST(Batch, ParamsAreEachItemsOwn) {
    Tenant t;
    Batch b = batch({"insert r {n: $1}", "get r select n where n = $1"});
    b.params[0] = {Value(int64_t{4})};
    b.params[1] = {Value(int64_t{4})};
    const std::vector<ql::Item> items = b.items();
    ql::BlockOutcome out = ql::Executor(*t.db, t.indexes).run_block(items, {});
    ASSERT_FALSE(out.error) << out.error->to_string();
    EXPECT_EQ(ql::to_json(out.answers[1]), R"({"rows":[{"n":4}]})");
    b.params[1] = {Value(int64_t{4}), Value(int64_t{5})};  // more than the statement uses
    const std::vector<ql::Item> too_many = b.items();
    out = ql::Executor(*t.db, t.indexes).run_block(too_many, {});
    ASSERT_TRUE(out.error);
    EXPECT_EQ(out.failed_at, 1u);
    EXPECT_EQ(t.rows(), 1u);
}

}  // namespace
}  // namespace fenec::test::batch_test
