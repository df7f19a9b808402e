// test/engine/gate_flusher_test.cc: proves the landing gate (the node's lease guard, engine.md
// §12) is asked at begin() and again as a block lands, a refusal putting the block back, and that
// the Flusher syncs `interval` databases and sweeps expired rows in the background.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/database.h"
#include "engine/flusher.h"
#include "engine/lease_guard.h"
#include "test/support/engine_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::gate_flusher_test {
namespace {

using namespace engine;

TEST(GateTest, NoLeaseRefusesBeforeTheWriteRuns) {
    EngineEnv env;
    FakeBootClock boot;
    LeaseGuard guard(boot);
    ASSERT_TRUE(Database::create("/d/t.fenec", env.options()).is_ok());
    OpenOptions o = env.options();
    o.gate = &guard;
    auto db = Database::open("/d/t.fenec", o);
    ASSERT_TRUE(db.is_ok());
    const uint64_t size = env.fs.contents("/d/t.fenec").size();
    auto b = (*db)->begin();
    ASSERT_FALSE(b.is_ok());
    EXPECT_EQ(b.status().code(), Code::not_leased);
    EXPECT_EQ(b.status().detail().lease, LeaseVerdict::no_lease);
    EXPECT_EQ(env.fs.contents("/d/t.fenec").size(), size);
}

TEST(GateTest, LeaseNamesTheTenant) {
    EngineEnv env;
    FakeBootClock boot;
    LeaseGuard guard(boot);
    guard.take({{"other"}, boot.now_ns(), 2000});
    ASSERT_TRUE(Database::create("/d/t.fenec", env.options()).is_ok());
    OpenOptions o = env.options();
    o.gate = &guard;
    auto db = Database::open("/d/t.fenec", o);
    ASSERT_TRUE(db.is_ok());
    auto refused = (*db)->begin();
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().detail().lease, LeaseVerdict::not_named);
    guard.take({{"t"}, boot.now_ns(), 2000});
    auto b = (*db)->begin();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    ASSERT_TRUE(b->create_collection("c", schema_of("x:int")).is_ok());
    auto landed = b->commit();
    ASSERT_TRUE(landed.is_ok()) << landed.status().to_string();
    EXPECT_EQ(landed->last.v, 1u);
}

TEST(GateTest, LeaseLapsingBetweenBeginAndCommitPutsTheBlockBack) {
    EngineEnv env;
    FakeBootClock boot;
    LeaseGuard guard(boot);
    guard.take({{"t"}, boot.now_ns(), 2000});
    ASSERT_TRUE(Database::create("/d/t.fenec", env.options()).is_ok());
    OpenOptions o = env.options();
    o.gate = &guard;
    auto db = Database::open("/d/t.fenec", o);
    ASSERT_TRUE(db.is_ok());
    const uint64_t size = env.fs.contents("/d/t.fenec").size();
    {
        auto b = (*db)->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->create_collection("c", schema_of("x:int")).is_ok());
        boot.advance_ms(2000);  // a suspend: the expiry instant itself is lapsed
        auto landed = b->commit();
        ASSERT_FALSE(landed.is_ok());
        EXPECT_EQ(landed.status().code(), Code::not_leased);
        EXPECT_EQ(landed.status().detail().lease, LeaseVerdict::lapsed);
    }
    EXPECT_EQ((*db)->seq().v, 0u);
    EXPECT_EQ(env.fs.contents("/d/t.fenec").size(), size);
    ReadView view = (*db)->read();
    EXPECT_FALSE(view.find("c").is_ok());  // put back: the collection never existed
}

TEST(FlusherTest, SyncsIntervalDatabasesInTheBackground) {
    EngineEnv env;
    Flusher flusher(5, 0);
    ASSERT_TRUE(Database::create("/d/t.fenec", env.options()).is_ok());
    OpenOptions o = env.options(SyncPolicy::interval(5));
    o.flusher = &flusher;
    auto db = Database::open("/d/t.fenec", o);
    ASSERT_TRUE(db.is_ok());
    auto b = (*db)->begin();
    ASSERT_TRUE(b->create_collection("c", schema_of("x:int")).is_ok());
    auto landed = b->commit();
    ASSERT_TRUE(landed.is_ok());
    EXPECT_FALSE(landed->durable);  // commit returned after the append
    EXPECT_TRUE(test::wait_until([&] { return (*db)->durable_seq().v >= 1; }));  // the flusher
    EXPECT_EQ((*db)->durable_seq().v, 1u);
    EXPECT_EQ(env.fs.synced_size("/d/t.fenec"), env.fs.contents("/d/t.fenec").size());
    ASSERT_TRUE((*db)->close().is_ok());
}

TEST(FlusherTest, SweepsExpiredRows) {
    EngineEnv env;
    ASSERT_TRUE(Database::create("/d/t.fenec", env.options()).is_ok());
    Flusher flusher(5, 1);
    OpenOptions o = env.options();
    o.flusher = &flusher;
    auto db = Database::open("/d/t.fenec", o);
    ASSERT_TRUE(db.is_ok());
    {
        auto b = (*db)->begin();
        auto c = b->create_collection("log", schema_of("at:timestamp@ttl(1000)"));
        ASSERT_TRUE(c.is_ok()) << c.status().to_string();
        for (int i = 0; i < 5; ++i) {
            ASSERT_TRUE(b->insert(*c, std::nullopt, Doc{{0, Timestamp{env.clock.wall_ms()}}}).is_ok());
        }
        ASSERT_TRUE(b->commit().is_ok());
    }
    env.clock.advance_ms(1000);
    EXPECT_TRUE(test::wait_until([&] { return (*db)->seq().v >= 11; }));  // the flusher's sweep
    EXPECT_EQ((*db)->seq().v, 11u);  // 1 create + 5 inserts + 5 deletes
    EXPECT_EQ((*db)->usage().rows, 0u);
    ASSERT_TRUE((*db)->close().is_ok());
}

}  // namespace
}  // namespace fenec::test::gate_flusher_test
