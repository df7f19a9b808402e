// test/ql/budget_test.cc: proves the run budget (ql/budget.h) in the executor: rows are counted
// as visited, not returned (a filter keeping none, a count(*)); a write block passing it rolls
// back whole; a read of a batch passing it names its item; the time bound reads the injected
// clock once per Budget::clock_visits visits; no bound (0) is no budget.
#include "ql/budget.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "index/index_set.h"
#include "ql/executor.h"
#include "ql/parser.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::budget_test {
namespace {

using engine::Database;
using engine::Value;

// A steady clock that moves 1 ms each time it is read.
struct TickingClock final : engine::Clock {
    mutable int64_t ns = 0;
    mutable int reads = 0;
    int64_t wall_ms() const override { return 1'700'000'000'000; }
    int64_t steady_ns() const override {
        ++reads;
        return ns += 1'000'000;
    }
};

struct Tenant {
    EngineEnv env;
    index::IndexSet indexes;
    std::unique_ptr<Database> db;
    std::vector<ql::ParsedStatement> parsed;

    explicit Tenant(int rows) {
        engine::OpenOptions o = env.options(engine::SyncPolicy::at_close());
        o.hook = &indexes;
        auto created = Database::create("/t.fenec", o);
        EXPECT_TRUE(created.is_ok()) << created.status().to_string();
        db = std::move(*created);
        EXPECT_FALSE(block({"create collection r (n int, k int @hash)"}).error);
        engine::List docs;
        for (int i = 0; i < rows; ++i) {
            docs.items.push_back(
                Value(engine::Object{{"n", "k"}, {Value(int64_t(i)), Value(int64_t(0))}}));
        }
        const std::vector<Value> params{Value(std::move(docs))};
        auto p = ql::parse("insert r $1");
        EXPECT_TRUE(p);
        const ql::Item item{&p.value(), params};
        EXPECT_FALSE(ql::Executor(*db, indexes).run_block({&item, 1}, {}).error);
    }
    ql::BlockOutcome block(const std::vector<std::string>& texts, ql::BudgetLimits budget = {}) {
        parsed.clear();
        for (const std::string& t : texts) {
            auto p = ql::parse(t);
            EXPECT_TRUE(p) << t;
            parsed.push_back(std::move(p.value()));
        }
        std::vector<ql::Item> items;
        for (const auto& p : parsed) items.push_back(ql::Item{&p, {}});
        ql::RunOptions o;
        o.budget = budget;
        return ql::Executor(*db, indexes).run_block(items, o);
    }
};

TEST(Budget, CountsRowsVisitedNotReturned) {
    Tenant t(2000);
    const ql::BudgetLimits rows{.rows_max = 1000};
    for (const char* q : {"get r where n < 0", "get r select count(*)"}) {
        ql::BlockOutcome o = t.block({q}, rows);
        ASSERT_TRUE(o.error) << q;
        EXPECT_EQ(o.error->budget, ql::BudgetKind::rows) << q;
        EXPECT_EQ(o.error->status(), 400);
        EXPECT_EQ(o.error->max, 1000u);
        EXPECT_NE(o.error->message.find("--statement-rows (1000)"), std::string::npos);
    }
    // At the bound exactly, and through an index that narrows to one row: within it.
    EXPECT_FALSE(t.block({"get r where n < 0"}, {.rows_max = 2000}).error);
    EXPECT_FALSE(t.block({"get r where _id = 3"}, {.rows_max = 1}).error);
    // Off.
    EXPECT_FALSE(t.block({"get r where n < 0"}, {}).error);
}

TEST(Budget, AWriteNarrowedByIdOrIndexVisitsOnlyItsRows) {
    Tenant t(2000);
    // The rows a set or del writes are picked as a read picks them: by id, through an index, or
    // through the union of an `or` whose every term narrows.
    for (const char* q : {"set r {n: -1} where _id = 3", "set r {k: 1} where _id in [4, 5]",
                          "del r where k = 1 or _id = 3"}) {
        ql::BlockOutcome o = t.block({q}, {.rows_max = 3});
        EXPECT_FALSE(o.error) << q << ": " << (o.error ? o.error->to_string() : "");
    }
    ql::BlockOutcome left = t.block({"get r select count(*) where n < 0 or k = 1"});
    ASSERT_FALSE(left.error);
    EXPECT_EQ(ql::to_json(left.answers[0]), R"J({"rows":[{"count(*)":0}]})J");
    EXPECT_EQ(ql::to_json(t.block({"get r select count(*)"}).answers[0]),
              R"J({"rows":[{"count(*)":1997}]})J");
    // Narrowed to more rows than the bound: refused, nothing written.
    ql::BlockOutcome over =
        t.block({"set r {k: 2} where _id in [10, 11, 12, 13]"}, {.rows_max = 3});
    ASSERT_TRUE(over.error);
    EXPECT_EQ(over.error->budget, ql::BudgetKind::rows);
    EXPECT_EQ(ql::to_json(t.block({"get r select count(*) where k = 2"}).answers[0]),
              R"J({"rows":[{"count(*)":0}]})J");
    // A term no index narrows leaves the write to a scan, which the bound stops.
    ql::BlockOutcome scan = t.block({"del r where _id = 6 or n = 7"}, {.rows_max = 3});
    ASSERT_TRUE(scan.error);
    EXPECT_EQ(scan.error->budget, ql::BudgetKind::rows);
}

TEST(Budget, AWriteBlockPassingItLandsNothing) {
    Tenant t(2000);
    const engine::Seq before = t.db->seq();
    ql::BlockOutcome o =
        t.block({"insert r {n: -5}", "set r {n: -1} where n >= 0", "get r where n = -5"},
                {.rows_max = 1500});
    ASSERT_TRUE(o.error);
    EXPECT_EQ(o.error->budget, ql::BudgetKind::rows);
    EXPECT_EQ(o.failed_at, 1u);
    EXPECT_FALSE(o.landed);
    EXPECT_EQ(t.db->seq(), before);
    ql::BlockOutcome after = t.block({"get r select count(*) where n < 0"});
    ASSERT_FALSE(after.error);
    EXPECT_EQ(ql::to_json(after.answers[0]), R"J({"rows":[{"count(*)":0}]})J");
}

TEST(Budget, TimeIsReadOncePerClockVisits) {
    Tenant t(4 * ql::Budget::clock_visits);
    TickingClock clock;
    // The bound is 1 ms, and the clock moves 1 ms per reading: the first reading after the start
    // is past it, and it comes at the clock_visits-th visit.
    ql::BlockOutcome o = t.block({"get r where n < 0"}, {.time_ms_max = 1, .clock = &clock});
    ASSERT_TRUE(o.error);
    EXPECT_EQ(o.error->budget, ql::BudgetKind::time);
    EXPECT_EQ(o.error->status(), 503);
    EXPECT_EQ(clock.reads, 2);  // the start, then visit 1 024
    // A bound the clock never reaches: 4 readings past the start, none over.
    clock.reads = 0;
    EXPECT_FALSE(t.block({"get r where n < 0"}, {.time_ms_max = 1000, .clock = &clock}).error);
    EXPECT_EQ(clock.reads, 5);
}

TEST(Budget, LookupsAndIndexWalksAreVisits) {
    Tenant t(100);
    // 100 parents, each looking up the 100 rows sharing its k: 10 100 visits.
    EXPECT_FALSE(
        t.block({"get r select _id lookup r as same on k = k where n < 0"}, {.rows_max = 10'100})
            .error);
    ql::BlockOutcome o =
        t.block({"get r select _id lookup r as same on k = k where n < 0"}, {.rows_max = 10'099});
    ASSERT_TRUE(o.error);
    EXPECT_EQ(o.error->budget, ql::BudgetKind::rows);
}

}  // namespace
}  // namespace fenec::test::budget_test
