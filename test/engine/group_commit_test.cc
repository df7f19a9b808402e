// test/engine/group_commit_test.cc: proves the group commit of writers that do not wait
// (engine.md §5.4; engine/syncer.h, Database::when_durable), on FaultFs:
// - many concurrent writers whose blocks land with defer_durable are each told once, only after
//   an fsync covers their block, share fsyncs, and every block told ok is in the file a crash
//   leaves (only synced bytes kept);
// - a block that lands while an fsync runs is not covered by it: it is told after the next one;
// - a failed fsync tells every waiter io_error (the latch), and none of their blocks survives;
// - close() tells every waiter left, once;
// - fsyncs of different databases on one Syncer are in flight at once, and a database queued
//   during another's round runs before that one's next;
// - with a flush of the whole file system (a group round, --sync-scope fs), databases queued
//   together are covered by one flush and no fsync of their own; a failed flush latches every one
//   it covered, and a file's own write-back error only its database;
// - without a Syncer, when_durable waits in its caller;
// - a writer that must not wait is refused `busy` while the writer lock is held, and whether the
//   database is frozen is told without it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/database.h"
#include "engine/syncer.h"
#include "test/support/engine_fixture.h"
#include "test/support/wait.h"

namespace fenec::test::group_commit_test {
namespace {

using namespace engine;

constexpr char kPath[] = "/d/t.fenec";

Doc row(int64_t n) {
    return Doc{{0, Value("w" + std::to_string(n))}, {1, Value(n)}};
}

// A new database at `path` with collection 1 `a` (name:text, n:int), under every_block.
std::unique_ptr<Database> create(EngineEnv& env, const std::string& path, Syncer* syncer) {
    OpenOptions o = env.options();
    o.syncer = syncer;
    auto db = Database::create(path, o);
    EXPECT_TRUE(db.is_ok()) << why(db);
    if (!db.is_ok()) return nullptr;
    auto b = (*db)->begin();
    EXPECT_TRUE(b.is_ok()) << why(b);
    EXPECT_TRUE(b->create_collection("a", schema_of("name:text, n:int")).is_ok());
    EXPECT_TRUE(b->commit().is_ok());
    return std::move(*db);
}

// One insert of row(n), landed without waiting for its fsync.
Result<Landed> land(Database& db, int64_t n, DocId& id) {
    FENEC_ASSIGN_OR_RETURN(Block b, db.begin(BlockOptions{.defer_durable = true}));
    FENEC_ASSIGN_OR_RETURN(id, b.insert(CollectionId{1}, std::nullopt, row(n)));
    return b.commit();
}

// What one waiter was told.
struct Told {
    std::atomic<int> calls{0};
    Status status;
    bool covered = false;    // durable_seq() covered its seq when told
    uint64_t syncs = 0;      // FaultFs syncs begun when told
    uint64_t synced = 0;     // the file's synced bytes when told
    uint64_t file = 0;       // the file's bytes when told
};

// The callback that fills `t` as it is told.
Database::DurableCallback tell(Told& t, Database& db, EngineEnv& env, Seq seq,
                               const std::string& path) {
    return [&t, &db, &env, seq, path](const Status& st) {
        t.status = st;
        t.covered = db.durable_seq() >= seq;
        t.syncs = env.fs.syncs();
        t.synced = env.fs.synced_size(path);
        t.file = env.fs.contents(path).size();
        t.calls.fetch_add(1);
    };
}

// Lands row(n) in `db` (at `path`) without waiting, and asks to be told in `t` once it is durable.
Status land_told(Database& db, int64_t n, Told& t, EngineEnv& env, const std::string& path) {
    DocId id;
    FENEC_ASSIGN_OR_RETURN(Landed l, land(db, n, id));
    db.when_durable(l.last, tell(t, db, env, l.last, path));
    return Status::ok();
}

TEST(GroupCommit, ManyWritersAreToldOnceCoveredShareFsyncsAndSurviveACrash) {
    constexpr int kThreads = 16;
    constexpr int kPerThread = 8;
    constexpr int kBlocks = kThreads * kPerThread;
    EngineEnv env;
    std::vector<Told> told(kBlocks);  // outlives the database, whose close may still tell them
    Syncer syncer(4);
    std::unique_ptr<Database> db = create(env, kPath, &syncer);
    ASSERT_TRUE(db);
    env.fs.set_sync_delay(std::chrono::milliseconds(2));
    std::vector<DocId> ids(kBlocks);
    std::vector<std::string> errors(kThreads);
    const uint64_t syncs0 = env.fs.syncs();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kPerThread; ++i) {
                const int n = t * kPerThread + i;
                Result<Landed> landed = land(*db, n, ids[n]);
                if (!landed.is_ok()) {
                    errors[t] = why(landed);
                    return;
                }
                if (landed->durable) errors[t] = "commit waited for its fsync";
                // The writer goes on at once: it is told later, on a Syncer thread.
                db->when_durable(landed->last, tell(told[n], *db, env, landed->last, kPath));
            }
        });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
    ASSERT_TRUE(wait_until([&] {
        for (const Told& t : told) {
            if (t.calls.load() == 0) return false;
        }
        return true;
    })) << "a waiter was never told";
    env.fs.set_sync_delay(std::chrono::microseconds(0));
    for (int n = 0; n < kBlocks; ++n) {
        EXPECT_EQ(told[n].calls.load(), 1) << "block " << n;
        EXPECT_TRUE(told[n].status.is_ok()) << "block " << n << ": " << why(told[n].status);
        EXPECT_TRUE(told[n].covered) << "block " << n << " told before durable_seq covered it";
    }
    const uint64_t syncs = env.fs.syncs() - syncs0;
    EXPECT_LT(syncs, uint64_t(kBlocks)) << "no fsync was shared";
    EXPECT_GE(syncs, 1u);
    // A power cut now keeps only synced bytes: every block told ok is there.
    env.fs.crash(FaultFs::CrashMode::synced_only);
    db.reset();
    auto re = Database::open(kPath, env.options());
    ASSERT_TRUE(re.is_ok()) << why(re);
    ReadView view = (*re)->read();
    EXPECT_EQ(view.count(CollectionId{1}), uint64_t(kBlocks));
    for (int n = 0; n < kBlocks; ++n) {
        auto doc = view.get(CollectionId{1}, ids[n]);
        ASSERT_TRUE(doc.has_value()) << "block " << n << " was told durable and is gone";
        EXPECT_EQ(doc->get(1), Value(int64_t{n}));
    }
}

TEST(GroupCommit, ABlockLandingWhileAnFsyncRunsIsToldAfterTheNext) {
    EngineEnv env;
    Told a, b;
    Syncer syncer(1);
    std::unique_ptr<Database> db = create(env, kPath, &syncer);
    ASSERT_TRUE(db);
    const uint64_t syncs0 = env.fs.syncs();
    env.fs.stall_syncs(true);
    Status st = land_told(*db, 1, a, env, kPath);
    ASSERT_TRUE(st.is_ok()) << why(st);
    ASSERT_TRUE(env.fs.wait_for_stalled_syncs(1, wait_default));
    EXPECT_EQ(a.calls.load(), 0) << "told before its fsync ended";
    st = land_told(*db, 2, b, env, kPath);
    ASSERT_TRUE(st.is_ok()) << why(st);
    env.fs.release_syncs();
    ASSERT_TRUE(wait_until([&] { return a.calls.load() == 1 && b.calls.load() == 1; }));
    ASSERT_TRUE(a.status.is_ok()) << why(a.status);
    ASSERT_TRUE(b.status.is_ok()) << why(b.status);
    // A was told as the first fsync ended, B's bytes not yet synced; B only after a second.
    EXPECT_EQ(a.syncs, syncs0 + 1);
    EXPECT_LT(a.synced, a.file);
    EXPECT_EQ(b.syncs, syncs0 + 2);
    EXPECT_EQ(b.synced, b.file);
}

// The fsync running is a writer's own (a commit that waits, as a keyed write's does): the
// Syncer's round finds it running and leaves the block to it, and as it ends without covering
// the block, the block's database is queued again, not forgotten.
TEST(GroupCommit, ABlockLandingWhileAWritersFsyncRunsIsToldAfterTheNext) {
    EngineEnv env;
    Told b;
    Syncer syncer(1);
    std::unique_ptr<Database> db = create(env, kPath, &syncer);
    ASSERT_TRUE(db);
    env.fs.stall_syncs(true);
    Status waited;
    std::thread writer([&] {
        Result<Block> blk = db->begin();
        if (!blk.is_ok()) {
            waited = blk.status();
            return;
        }
        if (auto id = blk->insert(CollectionId{1}, std::nullopt, row(1)); !id.is_ok()) {
            waited = id.status();
            return;
        }
        waited = blk->commit().status();  // waits through its own fsync
    });
    ASSERT_TRUE(env.fs.wait_for_stalled_syncs(1, wait_default));
    DocId id;
    Result<Landed> lb = land(*db, 2, id);
    ASSERT_TRUE(lb.is_ok()) << why(lb);
    db->when_durable(lb->last, tell(b, *db, env, lb->last, kPath));
    // The Syncer's round for B has run (or will) and found the writer's fsync running.
    ASSERT_TRUE(wait_until([&] { return syncer.rounds() >= 1; }));
    env.fs.release_syncs();
    writer.join();
    ASSERT_TRUE(waited.is_ok()) << why(waited);
    ASSERT_TRUE(wait_until([&] { return b.calls.load() == 1; })) << "B was never told";
    EXPECT_TRUE(b.status.is_ok()) << why(b.status);
    EXPECT_EQ(b.synced, b.file);
}

// A busy database's next round runs on the thread that ran its last one, but not ahead of
// another database queued before it came back: on one thread, B (queued during A's fsync, ahead
// of A's next waiter) has its fsync before A's second.
TEST(GroupCommit, ADatabaseQueuedDuringAnothersRoundIsNotPassedByItsNext) {
    EngineEnv env;
    Told a1, b1, a2;
    Syncer syncer(1);
    const std::string path_b = "/d/b.fenec";
    std::unique_ptr<Database> a = create(env, kPath, &syncer);
    std::unique_ptr<Database> b = create(env, path_b, &syncer);
    ASSERT_TRUE(a && b);
    const uint64_t syncs0 = env.fs.syncs();
    env.fs.stall_syncs(true);
    Status st = land_told(*a, 1, a1, env, kPath);
    ASSERT_TRUE(st.is_ok()) << why(st);
    ASSERT_TRUE(env.fs.wait_for_stalled_syncs(1, wait_default));
    st = land_told(*b, 1, b1, env, path_b);
    ASSERT_TRUE(st.is_ok()) << why(st);
    st = land_told(*a, 2, a2, env, kPath);
    ASSERT_TRUE(st.is_ok()) << why(st);
    env.fs.release_syncs();
    ASSERT_TRUE(wait_until(
        [&] { return a1.calls.load() == 1 && b1.calls.load() == 1 && a2.calls.load() == 1; }));
    EXPECT_EQ(a1.syncs, syncs0 + 1);
    EXPECT_EQ(b1.syncs, syncs0 + 2) << "B waited behind A's next round";
    EXPECT_EQ(a2.syncs, syncs0 + 3);
    EXPECT_EQ(a2.synced, a2.file);
}

TEST(GroupCommit, AFailedFsyncTellsEveryWaiterTheLatch) {
    EngineEnv env;
    std::vector<Told> told(3);
    Syncer syncer(2);
    std::unique_ptr<Database> db = create(env, kPath, &syncer);
    ASSERT_TRUE(db);
    const std::string acked = dump(*db);
    env.fs.stall_syncs(true);
    env.fs.fail_sync(1, ENOSPC);
    DocId id;
    for (int n = 0; n < 3; ++n) {
        Result<Landed> l = land(*db, n, id);
        ASSERT_TRUE(l.is_ok()) << why(l);
        db->when_durable(l->last, tell(told[n], *db, env, l->last, kPath));
        if (n == 0) {
            ASSERT_TRUE(env.fs.wait_for_stalled_syncs(1, wait_default));
        }
    }
    env.fs.release_syncs();
    ASSERT_TRUE(wait_until([&] {
        return told[0].calls.load() && told[1].calls.load() && told[2].calls.load();
    }));
    for (int n = 0; n < 3; ++n) {
        EXPECT_EQ(told[n].calls.load(), 1) << n;
        EXPECT_EQ(told[n].status.code(), Code::io_error) << n << ": " << why(told[n].status);
        EXPECT_EQ(told[n].status.detail().err_no, ENOSPC) << n;
        EXPECT_FALSE(told[n].covered) << n;
    }
    // Latched: the next waiter is told at once, on the caller's thread, with the first failure.
    Told late;
    db->when_durable(db->seq(), tell(late, *db, env, db->seq(), kPath));
    EXPECT_EQ(late.calls.load(), 1);
    EXPECT_EQ(late.status.detail().err_no, ENOSPC);
    EXPECT_FALSE(db->begin().is_ok());
    env.fs.crash(FaultFs::CrashMode::synced_only);
    db.reset();
    auto re = Database::open(kPath, env.options());
    ASSERT_TRUE(re.is_ok()) << why(re);
    EXPECT_EQ(dump(**re), acked);
}

// The Syncer's one thread is held by another database's fsync, so the closing database's round
// never runs: close() itself must tell its waiter, once, after its own fsync.
TEST(GroupCommit, CloseTellsEveryWaiterLeftOnce) {
    EngineEnv env;
    Told x, y;
    Syncer syncer(1);
    std::unique_ptr<Database> dx = create(env, "/d/x.fenec", &syncer);
    std::unique_ptr<Database> dy = create(env, kPath, &syncer);
    ASSERT_TRUE(dx && dy);
    env.fs.stall_syncs(true);
    DocId id;
    Result<Landed> lx = land(*dx, 1, id);
    ASSERT_TRUE(lx.is_ok()) << why(lx);
    dx->when_durable(lx->last, tell(x, *dx, env, lx->last, "/d/x.fenec"));
    ASSERT_TRUE(env.fs.wait_for_stalled_syncs(1, wait_default));  // the Syncer's thread, on x
    Result<Landed> ly = land(*dy, 2, id);
    ASSERT_TRUE(ly.is_ok()) << why(ly);
    dy->when_durable(ly->last, tell(y, *dy, env, ly->last, kPath));
    Status closed;
    std::thread closer([&] { closed = dy->close(); });
    EXPECT_TRUE(env.fs.wait_for_stalled_syncs(2, wait_default)) << "close() did not sync";
    env.fs.release_syncs();
    closer.join();
    ASSERT_TRUE(closed.is_ok()) << why(closed);
    EXPECT_EQ(y.calls.load(), 1);
    EXPECT_TRUE(y.status.is_ok()) << why(y.status);
    EXPECT_TRUE(y.covered);
    EXPECT_EQ(y.synced, y.file);
    ASSERT_TRUE(wait_until([&] { return x.calls.load() == 1; }));
}

TEST(GroupCommit, FsyncsOfDifferentDatabasesAreInFlightAtOnce) {
    constexpr int kDatabases = 4;
    EngineEnv env;
    std::vector<Told> told(kDatabases);
    Syncer syncer(kDatabases);
    std::vector<std::unique_ptr<Database>> dbs;
    std::vector<std::string> paths;
    for (int i = 0; i < kDatabases; ++i) {
        paths.push_back("/d/t" + std::to_string(i) + ".fenec");
        dbs.push_back(create(env, paths.back(), &syncer));
        ASSERT_TRUE(dbs.back());
    }
    env.fs.stall_syncs(true);
    DocId id;
    for (int i = 0; i < kDatabases; ++i) {
        Result<Landed> l = land(*dbs[i], i, id);
        ASSERT_TRUE(l.is_ok()) << why(l);
        dbs[i]->when_durable(l->last, tell(told[i], *dbs[i], env, l->last, paths[i]));
    }
    // One fsync per database, all begun before any ended: the file system may join them.
    EXPECT_TRUE(env.fs.wait_for_stalled_syncs(kDatabases, wait_default));
    env.fs.release_syncs();
    ASSERT_TRUE(wait_until([&] {
        for (const Told& t : told) {
            if (t.calls.load() == 0) return false;
        }
        return true;
    }));
    for (int i = 0; i < kDatabases; ++i) {
        EXPECT_TRUE(told[i].status.is_ok()) << i << ": " << why(told[i].status);
        EXPECT_EQ(told[i].synced, told[i].file) << i;
    }
}

// A one-thread Syncer with a flush of the whole FaultFs, held on database `x`'s own fsync while
// `n` other databases each land a row and wait: they are queued together when it is released.
// The flush can be held (`hold`) before it runs, to land writes while it is under way.
struct GroupRoundSetup {
    static constexpr int kDatabases = 4;
    EngineEnv env;
    // What the callbacks write to, declared before what calls them, so destroyed after.
    std::vector<Told> told = std::vector<Told>(kDatabases);
    Told x_told;
    std::atomic<int> flushes{0};
    std::mutex hold_mu;
    std::condition_variable hold_cv;
    bool hold = false;
    int held = 0;  // flushes that have waited on `hold`
    Syncer syncer{1, [this] {
                      {
                          std::unique_lock lk(hold_mu);
                          if (hold) {
                              ++held;
                              hold_cv.notify_all();
                              hold_cv.wait(lk, [&] { return !hold; });
                          }
                      }
                      flushes.fetch_add(1);
                      return env.fs.sync_fs("/d");
                  }};
    std::unique_ptr<Database> x;
    std::vector<std::unique_ptr<Database>> dbs;
    std::vector<std::string> paths;

    // Creates x and the others (their creation syncs on its caller's thread).
    bool create_all() {
        x = create(env, "/d/x.fenec", &syncer);
        for (int i = 0; i < kDatabases; ++i) {
            paths.push_back("/d/t" + std::to_string(i) + ".fenec");
            dbs.push_back(create(env, paths.back(), &syncer));
            if (!dbs.back()) return false;
        }
        return x != nullptr;
    }

    // Lands the writes with the Syncer held, then lets it go and waits for every waiter to be
    // told; false (with a failure) if a step failed.
    bool land_all_while_held() {
        env.fs.stall_syncs(true);
        EXPECT_TRUE(land_told(*x, 100, x_told, env, "/d/x.fenec").is_ok());
        if (!env.fs.wait_for_stalled_syncs(1, wait_default)) {
            ADD_FAILURE() << "x's round never began";
            return false;
        }
        for (int i = 0; i < kDatabases; ++i) {
            Status st = land_told(*dbs[i], i, told[i], env, paths[i]);
            EXPECT_TRUE(st.is_ok()) << why(st);
            if (!st.is_ok()) return false;
        }
        env.fs.release_syncs();
        return wait_until([&] {
            for (const Told& t : told) {
                if (t.calls.load() == 0) return false;
            }
            return x_told.calls.load() == 1;
        });
    }

    // Checks that the databases told a failure (`err`) are latched and not covered, and the
    // others covered and writable; returns how many failed.
    int failed_latched_rest_covered(int err) {
        int failed = 0;
        for (int i = 0; i < kDatabases; ++i) {
            const Told& t = told[i];
            if (!t.status.is_ok()) {
                ++failed;
                EXPECT_EQ(t.status.detail().err_no, err) << i << ": " << why(t.status);
                EXPECT_FALSE(t.covered) << i;
                EXPECT_FALSE(dbs[i]->begin().is_ok()) << i << ": not latched";
            } else {
                EXPECT_TRUE(t.covered) << i;
                EXPECT_TRUE(dbs[i]->begin().is_ok()) << i << ": latched by another's error";
            }
        }
        return failed;
    }
};

TEST(GroupCommit, AGroupRoundCoversEveryQueuedDatabaseWithOneFlushAndNoFsync) {
    GroupRoundSetup g;
    ASSERT_TRUE(g.create_all());
    const uint64_t syncs_before = g.env.fs.syncs();
    ASSERT_TRUE(g.land_all_while_held());
    // x's own fsync, then none: the four were covered by the one flush, each file asked only
    // for its write-back errors.
    EXPECT_EQ(g.flushes.load(), 1);
    EXPECT_EQ(g.env.fs.syncs() - syncs_before, 1u) << "only x's own fsync";
    EXPECT_EQ(g.env.fs.checks_written(), uint64_t{GroupRoundSetup::kDatabases});
    EXPECT_EQ(g.syncer.group_rounds(), 1u);
    EXPECT_EQ(g.syncer.group_covered(), uint64_t{GroupRoundSetup::kDatabases});
    for (int i = 0; i < GroupRoundSetup::kDatabases; ++i) {
        const Told& t = g.told[i];
        EXPECT_EQ(t.calls.load(), 1) << i;
        EXPECT_TRUE(t.status.is_ok()) << i << ": " << why(t.status);
        EXPECT_TRUE(t.covered) << i;
        EXPECT_EQ(t.synced, t.file) << i << ": told before its bytes were durable";
    }
}

// A failed flush may have been any file's: each database falls back to its own fsync, and only
// the one whose fsync fails latches.
TEST(GroupCommit, AFailedGroupFlushFallsBackToAnFsyncEachAndLatchesOnlyTheFileThatFails) {
    GroupRoundSetup g;
    ASSERT_TRUE(g.create_all());
    g.env.fs.fail_sync_fs(1, ENOSPC);
    g.env.fs.fail_sync(3, EIO);  // x's is the first; the second database's fallback fails
    ASSERT_TRUE(g.land_all_while_held());
    EXPECT_TRUE(g.x_told.status.is_ok()) << why(g.x_told.status);
    EXPECT_EQ(g.flushes.load(), 1);
    EXPECT_EQ(g.env.fs.checks_written(), 0u);
    EXPECT_EQ(g.failed_latched_rest_covered(EIO), 1);
    for (const Told& t : g.told) {
        if (t.status.is_ok()) {
            EXPECT_EQ(t.synced, t.file);
        }
    }
}

// The flush covers the seqs landed when its round began: a block landing while it runs is told
// only after the next sync.
TEST(GroupCommit, ABlockLandingDuringAGroupFlushIsToldAfterTheNext) {
    Told late;  // outlives the databases that may call it
    GroupRoundSetup g;
    ASSERT_TRUE(g.create_all());
    {
        std::lock_guard lk(g.hold_mu);
        g.hold = true;
    }
    std::thread lander([&] { EXPECT_TRUE(g.land_all_while_held()); });
    {
        std::unique_lock lk(g.hold_mu);
        ASSERT_TRUE(g.hold_cv.wait_for(lk, wait_default, [&] { return g.held == 1; }));
    }
    ASSERT_TRUE(land_told(*g.dbs[0], 50, late, g.env, g.paths[0]).is_ok());
    const uint64_t syncs_at_release = g.env.fs.syncs();
    {
        std::lock_guard lk(g.hold_mu);
        g.hold = false;
    }
    g.hold_cv.notify_all();
    lander.join();
    ASSERT_TRUE(wait_until([&] { return late.calls.load() == 1; }));
    EXPECT_TRUE(late.status.is_ok()) << why(late.status);
    EXPECT_TRUE(late.covered);
    // The held flush covered the first four; the late block needed a round of its own, which,
    // with only its database left, was its fsync.
    EXPECT_EQ(g.flushes.load(), 1);
    EXPECT_GT(late.syncs, syncs_at_release) << "told by the flush that began before it landed";
    for (const Told& t : g.told) EXPECT_TRUE(t.status.is_ok()) << why(t.status);
}

TEST(GroupCommit, AFilesWriteBackErrorAfterTheFlushLatchesOnlyItsDatabase) {
    GroupRoundSetup g;
    ASSERT_TRUE(g.create_all());
    g.env.fs.fail_check_written(2, EIO);
    ASSERT_TRUE(g.land_all_while_held());
    EXPECT_EQ(g.failed_latched_rest_covered(EIO), 1);
}

TEST(GroupCommit, WithoutASyncerTheCallerWaits) {
    EngineEnv env;
    std::unique_ptr<Database> db = create(env, kPath, nullptr);
    ASSERT_TRUE(db);
    Told t;
    DocId id;
    Result<Landed> l = land(*db, 1, id);
    ASSERT_TRUE(l.is_ok()) << why(l);
    EXPECT_FALSE(l->durable);
    db->when_durable(l->last, tell(t, *db, env, l->last, kPath));
    EXPECT_EQ(t.calls.load(), 1);
    EXPECT_TRUE(t.status.is_ok()) << why(t.status);
    EXPECT_TRUE(t.covered);
    EXPECT_EQ(t.synced, t.file);
}

// A writer that must not wait (the node's event loop, serve_inline_write) begins a block only if
// the writer lock is free: `busy`, nothing written, while another block holds it or a reader
// holds it shared; and it begins once both let go. Tried from another thread, so a begin that
// waited is seen as one that does not return, not as a thread waiting on its own lock.
TEST(GroupCommit, ABlockThatMustNotWaitIsRefusedBusyWhileTheLockIsHeld) {
    EngineEnv env;
    std::unique_ptr<Database> db = create(env, kPath, nullptr);
    ASSERT_TRUE(db);
    const Seq at = db->seq();
    auto try_begin = [&db] {
        return std::async(std::launch::async, [&db] {
            Result<Block> b = db->begin(BlockOptions{.no_wait = true});
            return b.is_ok() ? Code::ok : b.status().code();
        });
    };
    {
        Result<Block> held = db->begin();
        ASSERT_TRUE(held.is_ok()) << why(held);
        std::future<Code> tried = try_begin();
        const bool returned = tried.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
        held->rollback();
        EXPECT_TRUE(returned) << "begin waited for the block";
        EXPECT_EQ(tried.get(), Code::busy);
    }
    {
        std::optional<ReadView> view = db->read();
        std::future<Code> tried = try_begin();
        const bool returned = tried.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
        view.reset();
        EXPECT_TRUE(returned) << "begin waited for the reader";
        EXPECT_EQ(tried.get(), Code::busy);
    }
    EXPECT_EQ(db->seq().v, at.v);
    Result<Block> b = db->begin(BlockOptions{.no_wait = true});
    ASSERT_TRUE(b.is_ok()) << why(b);
    ASSERT_TRUE(b->insert(CollectionId{1}, std::nullopt, row(1)).is_ok());
    Result<Landed> l = b->commit();
    ASSERT_TRUE(l.is_ok()) << why(l);
    EXPECT_EQ(db->seq().v, at.v + 1);
}

// Whether a database is frozen is told without its lock: the node's event loop asks it before a
// write begins (a write's refusal), while another block may hold the lock for long.
TEST(GroupCommit, FrozenIsToldWhileABlockHoldsTheLock) {
    EngineEnv env;
    std::unique_ptr<Database> db = create(env, kPath, nullptr);
    ASSERT_TRUE(db);
    Result<Block> held = db->begin();
    ASSERT_TRUE(held.is_ok()) << why(held);
    std::future<bool> frozen = std::async(std::launch::async, [&db] { return db->frozen(); });
    const bool returned = frozen.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    held->rollback();
    EXPECT_TRUE(returned) << "frozen() waited for the block";
    EXPECT_FALSE(frozen.get());
    ASSERT_TRUE(db->freeze().is_ok());
    EXPECT_TRUE(db->frozen());
    db->thaw();
    EXPECT_FALSE(db->frozen());
}

}  // namespace
}  // namespace fenec::test::group_commit_test
