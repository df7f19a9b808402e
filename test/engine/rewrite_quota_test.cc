// test/engine/rewrite_quota_test.cc: proves the rewrites, images, history, quotas, rates and TTL
// rules of engine.md §3, §7-§10 (§16 tests 36, 38, 40-43, 48-56, 70, 71).
//
// Rewrite*:  compaction keeps the dump, seq, forks, lineage, created_ms and next ids while the file
//            shrinks (36); a failed rename, a failed fsync or a crash before the directory sync
//            leaves the old file whole and a stale side file is removed on open (38); a second
//            open of an open file is busy; freeze waits for the block in progress (71).
// Image*:    an image taken while a writer goes on installs elsewhere and opens to the source's
//            dump at its seq (41); a cut or flipped image is refused, the incoming file removed
//            and the target untouched (42); create_only vs replace, and image() waits for the
//            fsync (43); lineage survives every rewrite and install, a create draws a new one
//            (70); fork_history adds a fork at the current seq that survives reopen (71).
// Quota*:    bytes to the byte (48), rows of client collections only (49), what takes away passes
//            a full tenant (50), a spill is refused before it is written (51), rates and their
//            retry-after (52), no quota work without limits and refusals that never name the
//            usage (53), compaction gives the bytes back (40).
// Ttl*:      the expiry boundary and null (54), sweeps in internal blocks of 1000 (55), an insert
//            over an expired unswept row (56).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/database.h"
#include "engine/limits.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::rewrite_quota_test {
namespace {

using namespace engine;

const std::string kPath = "/d/t.fenec";
const std::string kSide = kPath + ".rewrite";

std::unique_ptr<Database> create_db(EngineEnv& env, const std::string& path = kPath) {
    auto db = Database::create(path, env.options());
    if (!db.is_ok()) {
        ADD_FAILURE() << "create: " << db.status().to_string();
        return nullptr;
    }
    return std::move(*db);
}

std::unique_ptr<Database> open_db(EngineEnv& env, const std::string& path = kPath) {
    auto db = Database::open(path, env.options());
    if (!db.is_ok()) {
        ADD_FAILURE() << "open: " << db.status().to_string();
        return nullptr;
    }
    return std::move(*db);
}

std::unique_ptr<Database> reopen(EngineEnv& env, std::unique_ptr<Database> db,
                                 const std::string& path = kPath) {
    if (db) {
        Status st = db->close();
        if (!st.is_ok()) ADD_FAILURE() << "close: " << st.to_string();
        db.reset();
    }
    return open_db(env, path);
}

template <class F>
Landed land(Database& db, F&& body, BlockOptions opts = {}) {
    auto b = db.begin(opts);
    if (!b.is_ok()) {
        ADD_FAILURE() << "begin: " << b.status().to_string();
        return {};
    }
    body(*b);
    auto l = b->commit();
    if (!l.is_ok()) {
        ADD_FAILURE() << "commit: " << l.status().to_string();
        return {};
    }
    return *l;
}

Limits bytes_limit(uint64_t bytes) {
    Limits l;
    l.bytes = bytes;
    return l;
}
Limits rows_limit(uint64_t rows) {
    Limits l;
    l.rows = rows;
    return l;
}
Limits rows_per_s_limit(double per_s) {
    Limits l;
    l.rows_per_s = per_s;
    return l;
}

Doc item(int64_t n, const std::string& s) { return Doc{{0, Value(n)}, {1, Value(s)}}; }

// Creates `items` (n:int, s:text) holding `rows` rows with texts of `text_bytes`.
CollectionId fill(Database& db, int rows, size_t text_bytes = 16, const std::string& name = "items") {
    CollectionId c;
    land(db, [&](Block& b) {
        auto r = b.create_collection(name, schema_of("n:int, s:text"));
        ASSERT_OK(r);
        c = *r;
        for (int i = 0; i < rows; ++i) {
            ASSERT_OK(b.insert(c, std::nullopt, item(i, std::string(text_bytes, char('a' + i % 26)))));
        }
    });
    return c;
}

uint64_t file_size(EngineEnv& env, const std::string& path = kPath) { return env.fs.contents(path).size(); }

std::string infos(const Database& db) {
    std::string out;
    for (const CollectionInfo& i : db.read().collections()) {
        out += std::to_string(i.id.v) + " " + i.name + " rows " + std::to_string(i.rows) + " next " +
               std::to_string(i.next_id) + "\n";
    }
    return out;
}

class Recorder final : public ChangeListener {
public:
    void on_block(const BlockSummary& s) override {
        std::lock_guard<std::mutex> g(mu_);
        blocks_.push_back(s);
    }
    void on_durable(Seq) override {}
    std::vector<BlockSummary> take() {
        std::lock_guard<std::mutex> g(mu_);
        return std::exchange(blocks_, {});
    }

private:
    std::mutex mu_;
    std::vector<BlockSummary> blocks_;
};

// =============================================================================================
// Compaction (36) and crashes around it (38)
// =============================================================================================

TEST(RewriteCompact, EquivalentSmallerAndTheSameMeta) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    const CollectionId c = fill(*db, 300, 64);
    const CollectionId other = fill(*db, 50, 8, "other");
    std::mt19937_64 rng(36);
    std::vector<uint64_t> alive;
    for (uint64_t i = 1; i <= 300; ++i) alive.push_back(i);
    for (int blk = 0; blk < 40; ++blk) {
        land(*db, [&](Block& b) {
            for (int k = 0; k < 10; ++k) {
                const uint64_t id = alive[rng() % alive.size()];
                ASSERT_OK(b.set(c, DocId{id}, item(int64_t(blk), std::string(64, 'z'))));
            }
            for (int k = 0; k < 3; ++k) {
                const size_t at = rng() % alive.size();
                auto gone = b.del(c, DocId{alive[at]});
                ASSERT_OK(gone);
                ASSERT_TRUE(*gone);
                alive.erase(alive.begin() + static_cast<long>(at));
            }
        });
        if (blk == 20) ASSERT_OK(db->fork_history());
    }
    land(*db, [&](Block& b) {  // the rows with the highest ids go: next ids must not follow them
        for (uint64_t id = 41; id <= 50; ++id) ASSERT_OK(b.del(other, DocId{id}));
    });

    const std::string before = dump(*db);
    const std::string infos_before = infos(*db);
    const uint64_t size_before = file_size(env);
    const Usage u0 = db->usage();
    const History h0 = db->history();
    const Seq seq0 = db->seq();
    const LineageId lineage0 = db->lineage();
    const int64_t created0 = db->created_ms();
    EXPECT_GT(u0.dead_bytes, 0u);
    EXPECT_EQ(u0.file_bytes, size_before);
    ASSERT_EQ(h0.forks.size(), 2u);

    ASSERT_OK(db->compact());
    EXPECT_EQ(dump(*db), before);
    EXPECT_EQ(infos(*db), infos_before);  // next ids and rows, other: next 51 with 40 rows
    const uint64_t size_after = file_size(env);
    EXPECT_LT(size_after, size_before);
    EXPECT_EQ(db->usage().file_bytes, size_after);
    EXPECT_EQ(db->usage().dead_bytes, 0u);
    EXPECT_EQ(db->seq(), seq0);
    EXPECT_EQ(db->durable_seq(), seq0);
    EXPECT_EQ(db->history(), h0);
    EXPECT_EQ(db->lineage(), lineage0);
    EXPECT_EQ(db->created_ms(), created0);
    EXPECT_FALSE(env.fs.has(kSide));

    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(dump(*db), before);
    // Blocks after the image replay on top of it; ids go on from the kept counters.
    land(*db, [&](Block& b) {
        auto id = b.insert(other, std::nullopt, item(1, "after"));
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 51u);
        ASSERT_OK(b.set(c, DocId{alive.front()}, item(-1, "after")));
    });
    const std::string live = dump(*db);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(dump(*db), live);
}

// A compaction writes null into dropped slots (§7); the live bodies follow it, except those a
// block replaced while the compaction ran, so the live dump is what a reopen replays (I4).
TEST(RewriteCompact, DroppedSlotsNulledWhileBlocksLandDuringTheCompaction) {
    EngineEnv env;
    auto created = Database::create(kPath, env.options(SyncPolicy::at_close()));
    ASSERT_OK(created);
    std::unique_ptr<Database> db = std::move(*created);
    CollectionId c;
    land(*db, [&](Block& b) {
        c = *b.create_collection("p", schema_of("a:int, b:text"));
        for (int i = 1; i <= 4; ++i) ASSERT_OK(b.insert(c, std::nullopt, Doc{{0, Value(int64_t{i})}, {1, Value("old b")}}));
    });
    AlterSpec drop;
    drop.kind = AlterKind::drop_field;
    drop.field = "b";
    land(*db, [&](Block& b) { ASSERT_OK(b.alter_collection(c, drop)); });

    env.fs.stall_syncs(true);
    Status compacted;
    std::thread compactor([&] { compacted = db->compact(); });
    ASSERT_TRUE(env.fs.wait_for_stalled_syncs(1, std::chrono::seconds(10))) << "compaction in step 2";
    land(*db, [&](Block& b) {  // lands while the side file is being written
        ASSERT_OK(b.set(c, DocId{2}, Doc{{0, Value(int64_t{20})}}));
        ASSERT_OK(b.del(c, DocId{3}));
    });
    env.fs.release_syncs();
    compactor.join();
    ASSERT_OK(compacted);

    {
        ReadView v = db->read();
        EXPECT_EQ(v.count(c), 3u);
        v.scan(c, [&](DocId id, DocView doc) {
            EXPECT_TRUE(doc.is_null(1)) << "row " << id.v << " still holds the dropped value";
            EXPECT_EQ(doc.get(0), Value(static_cast<int64_t>(id.v == 2 ? 20 : id.v)));
            return true;
        });
    }
    const std::string live = dump(*db);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(dump(*db), live);
}

// A database with some history and dead bytes, and its dump.
struct Prepared {
    std::unique_ptr<Database> db;
    std::string dump;
    std::vector<std::byte> bytes;
};
Prepared prepare(EngineEnv& env) {
    Prepared p;
    p.db = create_db(env);
    if (!p.db) return p;
    const CollectionId c = fill(*p.db, 100, 40);
    land(*p.db, [&](Block& b) {
        for (uint64_t id = 1; id <= 100; id += 3) {
            if (!b.del(c, DocId{id}).is_ok()) ADD_FAILURE();
        }
    });
    p.dump = dump(*p.db);
    p.bytes = env.fs.contents(kPath);
    return p;
}

TEST(RewriteCrash, FailedRenameKeepsTheOldFileWithoutLatching) {
    EngineEnv env;
    Prepared p = prepare(env);
    ASSERT_NE(p.db, nullptr);
    env.fs.fail_rename(1);
    Status st = p.db->compact();
    ASSERT_FALSE(st.is_ok());
    EXPECT_EQ(st.code(), Code::io_error) << why(st);
    EXPECT_TRUE(env.fs.contents(kPath) == p.bytes) << "the old file is whole";
    EXPECT_FALSE(env.fs.has(kSide)) << "the side file is removed";
    EXPECT_FALSE(p.db->failure().has_value()) << "a failed rename does not latch";
    EXPECT_EQ(dump(*p.db), p.dump);
    // Writes go on, and a later compaction works.
    land(*p.db, [&](Block& b) { ASSERT_OK(b.insert(*b.find("items"), std::nullopt, item(1, "later"))); });
    ASSERT_OK(p.db->compact());
    const std::string live = dump(*p.db);
    ASSERT_OK(p.db->close());
    p.db.reset();
    env.fs.crash(FaultFs::CrashMode::synced_only);
    auto db = open_db(env);
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(dump(*db), live);
}

// A tenant leaving service (a delete) cancels the compaction holding it: the rewrite stops at
// its next step, removes its side file and leaves the old file whole, with nothing latched; the
// next compaction is not cancelled by the old request.
TEST(RewriteCancel, ACancelledCompactionLeavesTheOldFileAndNoSideFile) {
    EngineEnv env;
    Prepared p = prepare(env);
    ASSERT_NE(p.db, nullptr);
    const uint64_t renames = env.fs.renames();
    env.fs.stall_syncs(true);
    Status compacted;
    std::thread compactor([&] { compacted = p.db->compact(); });
    ASSERT_TRUE(env.fs.wait_for_stalled_syncs(1, std::chrono::seconds(10)))
        << "the side file's sync";
    p.db->cancel_rewrite();
    env.fs.release_syncs();
    compactor.join();
    ASSERT_FALSE(compacted.is_ok());
    EXPECT_EQ(compacted.code(), Code::cancelled) << why(compacted);
    EXPECT_EQ(env.fs.renames(), renames) << "nothing renamed over the file";
    EXPECT_TRUE(env.fs.contents(kPath) == p.bytes) << "the old file is whole";
    EXPECT_FALSE(env.fs.has(kSide)) << "the side file is removed";
    EXPECT_FALSE(p.db->failure().has_value()) << "a cancel does not latch";
    EXPECT_EQ(dump(*p.db), p.dump);
    EXPECT_GT(p.db->usage().dead_bytes, 0u) << "nothing was reclaimed";
    // Writes go on, and the next compaction runs to its end.
    land(*p.db,
         [&](Block& b) { ASSERT_OK(b.insert(*b.find("items"), std::nullopt, item(1, "later"))); });
    ASSERT_OK(p.db->compact());
    EXPECT_EQ(p.db->usage().dead_bytes, 0u);
    const std::string live = dump(*p.db);
    p.db = reopen(env, std::move(p.db));
    ASSERT_NE(p.db, nullptr);
    EXPECT_EQ(dump(*p.db), live);
}

TEST(RewriteCrash, FailedSideFileSyncLatchesAndKeepsTheOldFile) {
    for (int nth : {1, 2}) {  // the side file's fsync after the image, then after the tail
        SCOPED_TRACE("failing sync " + std::to_string(nth));
        EngineEnv env;
        Prepared p = prepare(env);
        ASSERT_NE(p.db, nullptr);
        env.fs.fail_sync(nth);
        Status st = p.db->compact();
        ASSERT_FALSE(st.is_ok());
        EXPECT_EQ(st.code(), Code::io_error) << why(st);
        EXPECT_TRUE(env.fs.contents(kPath) == p.bytes);
        EXPECT_FALSE(env.fs.has(kSide));
        EXPECT_TRUE(p.db->failure().has_value()) << "a failed fsync latches";
        EXPECT_EQ(p.db->begin().status().code(), Code::latched);
        EXPECT_EQ(dump(*p.db), p.dump) << "reads go on";
        p.db->close().ignore();
        p.db.reset();
        // The side file's removal was never made durable: a crash brings it back, and the open
        // removes it.
        env.fs.crash(FaultFs::CrashMode::synced_only);
        EXPECT_TRUE(env.fs.has(kSide));
        EXPECT_TRUE(env.fs.contents(kPath) == p.bytes);
        auto db = open_db(env);
        ASSERT_NE(db, nullptr);
        EXPECT_EQ(dump(*db), p.dump);
        EXPECT_FALSE(env.fs.has(kSide));
        EXPECT_FALSE(db->failure().has_value()) << "a reopen clears the latch";
    }
}

TEST(RewriteCrash, CrashAroundTheRenameFindsBeforeOrAfterNeverAMix) {
    {
        SCOPED_TRACE("directory sync fails after the rename, then a crash");
        EngineEnv env;
        Prepared p = prepare(env);
        ASSERT_NE(p.db, nullptr);
        env.fs.fail_sync_dir(1);
        Status st = p.db->compact();
        EXPECT_EQ(st.code(), Code::io_error) << why(st);
        EXPECT_TRUE(p.db->failure().has_value());
        p.db->close().ignore();
        p.db.reset();
        env.fs.crash(FaultFs::CrashMode::synced_only);
        EXPECT_TRUE(env.fs.has(kSide)) << "the rename was not durable: the side file is back";
        EXPECT_TRUE(env.fs.contents(kPath) == p.bytes) << "and the old file under the name";
        auto db = open_db(env);
        ASSERT_NE(db, nullptr);
        EXPECT_EQ(dump(*db), p.dump);
        EXPECT_FALSE(env.fs.has(kSide)) << "a leftover side file is removed on open";
    }
    {
        SCOPED_TRACE("a crash after the compaction");
        EngineEnv env;
        Prepared p = prepare(env);
        ASSERT_NE(p.db, nullptr);
        ASSERT_OK(p.db->compact());
        const std::vector<std::byte> compacted = env.fs.contents(kPath);
        EXPECT_LT(compacted.size(), p.bytes.size());
        p.db.reset();
        env.fs.crash(FaultFs::CrashMode::synced_only);
        EXPECT_TRUE(env.fs.contents(kPath) == compacted);
        auto db = open_db(env);
        ASSERT_NE(db, nullptr);
        EXPECT_EQ(dump(*db), p.dump);
    }
}

TEST(RewriteCrash, StaleSideFileIsRemovedOnOpenButNotReadOnly) {
    EngineEnv env;
    Prepared p = prepare(env);
    ASSERT_NE(p.db, nullptr);
    ASSERT_OK(p.db->close());
    p.db.reset();
    const std::vector<std::byte> junk(1000, std::byte{0x5a});
    env.fs.set_contents(kSide, junk);
    {
        OpenOptions ro = env.options();
        ro.read_only = true;
        auto db = Database::open(kPath, ro);
        ASSERT_OK(db);
        EXPECT_EQ(dump(**db), p.dump);
        EXPECT_TRUE(env.fs.has(kSide)) << "a read-only open changes nothing";
    }
    auto db = open_db(env);
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(dump(*db), p.dump);
    EXPECT_FALSE(env.fs.has(kSide));
}

// =============================================================================================
// Busy and freeze (71)
// =============================================================================================

TEST(RewriteLock, SecondOpenOfAnOpenFileIsBusy) {
    char tmpl[] = "/tmp/fenec_rewrite_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    const std::string path = dir + "/t.fenec";
    FakeClock clock;
    OpenOptions o;  // fs = nullptr: the POSIX file system and its flock
    o.clock = &clock;
    o.tenant = "t";
    {
        auto db = Database::create(path, o);
        ASSERT_OK(db);
        land(**db, [&](Block& b) { ASSERT_OK(b.create_collection("a", schema_of("n:int"))); });
        auto second = Database::open(path, o);
        ASSERT_FALSE(second.is_ok());
        EXPECT_EQ(second.status().code(), Code::busy) << why(second);
        auto again = Database::create(path, o);
        EXPECT_EQ(again.status().code(), Code::already_exists) << why(again);
        EXPECT_EQ((*db)->seq().v, 1u) << "the refused opens changed nothing";
        ASSERT_OK((*db)->close());
    }
    {
        auto db = Database::open(path, o);  // closed: the lock is gone
        ASSERT_OK(db);
        EXPECT_EQ((*db)->seq().v, 1u);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

TEST(RewriteFreeze, FreezeWaitsForTheBlockInProgress) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    const CollectionId c = fill(*db, 3);
    const uint64_t seq0 = db->seq().v;

    auto b = db->begin();
    ASSERT_OK(b);
    ASSERT_OK(b->insert(c, std::nullopt, item(100, "in flight")));
    std::atomic<bool> frozen{false};
    std::atomic<uint64_t> seq_seen{0};
    std::thread freezer([&] {
        Status st = db->freeze();
        EXPECT_TRUE(st.is_ok()) << why(st);
        seq_seen = db->seq().v;
        frozen = true;
    });
    // The behaviour under test is a wait that does not end: a window in which freeze must not
    // return while the block is open (no event marks "has not returned yet").
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(frozen.load()) << "freeze returned while a block was in progress";
    auto landed = b->commit();
    ASSERT_OK(landed);
    freezer.join();
    EXPECT_TRUE(frozen.load());
    EXPECT_EQ(seq_seen.load(), seq0 + 1) << "freeze returned after the block landed";
    EXPECT_TRUE(db->frozen());

    auto refused = db->begin();
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.status().code(), Code::frozen) << why(refused);
    {
        ReadView v = db->read();  // reads work
        EXPECT_EQ(v.count(c), 4u);
        EXPECT_TRUE(v.get(c, DocId{4}).has_value());
    }
    EXPECT_EQ(db->seq().v, seq0 + 1);

    db->thaw();
    EXPECT_FALSE(db->frozen());
    land(*db, [&](Block& blk) { ASSERT_OK(blk.insert(c, std::nullopt, item(5, "after thaw"))); });
    EXPECT_EQ(db->seq().v, seq0 + 2);
}

// =============================================================================================
// Images (41-43), lineage (70) and history forks (71)
// =============================================================================================

const std::string kTarget = "/other/t.fenec";
const std::string kIncoming = kTarget + ".incoming";

TEST(ImageRoundTrip, ImageTakenWhileAWriterGoesOnOpensAtItsSeq) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    const CollectionId c = fill(*db, 200, 32);
    ASSERT_OK(db->fork_history());

    std::mutex mu;
    std::map<uint64_t, std::string> dumps;
    dumps[db->seq().v] = dump(*db);
    std::atomic<int> blocks{0};
    std::atomic<bool> stop{false};
    std::atomic<bool> writer_done{false};
    std::thread writer([&] {
        struct Done {
            std::atomic<bool>& flag;
            ~Done() { flag = true; }
        } done{writer_done};
        for (int i = 0; !stop.load(); ++i) {
            auto b = db->begin();
            if (!b.is_ok()) {
                ADD_FAILURE() << why(b);
                return;
            }
            for (int k = 0; k < 3; ++k) {
                if (!b->insert(c, std::nullopt, item(i, "w" + std::to_string(k))).is_ok()) ADD_FAILURE();
            }
            if (!b->set(c, DocId{uint64_t(1 + i % 200)}, item(-i, "set")).is_ok()) ADD_FAILURE();
            auto l = b->commit();
            if (!l.is_ok()) {
                ADD_FAILURE() << why(l);
                return;
            }
            std::string d = dump(*db);  // nothing else writes: this is the state at l->last
            {
                std::lock_guard<std::mutex> g(mu);
                dumps[l->last.v] = std::move(d);
            }
            ++blocks;
        }
    });
    while (blocks.load() < 20 && !writer_done.load()) std::this_thread::yield();
    auto img = db->image();
    const int at_image = blocks.load();
    while (blocks.load() < at_image + 10 && !writer_done.load()) std::this_thread::yield();  // the writer went on
    stop = true;
    writer.join();
    ASSERT_FALSE(HasFailure()) << "the writer failed";
    ASSERT_OK(img);
    const uint64_t s = img->info.seq.v;
    ASSERT_TRUE(dumps.count(s)) << "the image is at a block boundary, seq " << s;
    EXPECT_GT(db->seq().v, s);
    EXPECT_EQ(img->info.lineage, db->lineage());
    EXPECT_EQ(img->info.created_ms, db->created_ms());
    EXPECT_EQ(img->info.history, db->history());
    EXPECT_EQ(img->info.bytes, img->bytes->size());

    EngineEnv env2;
    env2.fs.set_contents(kIncoming, *img->bytes);
    auto info = Database::verify_image(env2.fs, kIncoming);
    ASSERT_OK(info);
    EXPECT_EQ(info->seq.v, s);
    EXPECT_EQ(info->lineage, db->lineage());
    ASSERT_OK(Database::install_image(env2.fs, kIncoming, kTarget, InstallMode::create_only));
    EXPECT_FALSE(env2.fs.has(kIncoming));
    auto copy = open_db(env2, kTarget);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(dump(*copy), dumps[s]);
    EXPECT_EQ(copy->lineage(), db->lineage());
    EXPECT_EQ(copy->created_ms(), db->created_ms());
    EXPECT_EQ(copy->history(), db->history());
    EXPECT_EQ(copy->seq().v, s);
    // The copy goes on from S.
    Landed l = land(*copy, [&](Block& b) { ASSERT_OK(b.insert(c, std::nullopt, item(0, "copy"))); });
    EXPECT_EQ(l.first.v, s + 1);
}

TEST(ImageInstall, CutOrFlippedImagesAreRefusedAndTheTargetUntouched) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    fill(*db, 400, 80);
    fill(*db, 20, 8, "second");
    auto img = db->image();
    ASSERT_OK(img);
    const std::vector<std::byte>& bytes = *img->bytes;
    ASSERT_GT(bytes.size(), 8u * 4096);

    EngineEnv env2;
    {
        auto target = create_db(env2, kTarget);  // an existing copy to leave alone
        ASSERT_NE(target, nullptr);
        ASSERT_OK(target->close());
    }
    const std::vector<std::byte> target_bytes = env2.fs.contents(kTarget);
    int attempts = 0;
    auto refused = [&](std::span<const std::byte> incoming, std::optional<uint64_t> flip,
                       const std::string& what) {
        ++attempts;
        env2.fs.set_contents(kIncoming, incoming);
        if (flip) env2.fs.flip_byte(kIncoming, *flip);
        Status st = Database::install_image(env2.fs, kIncoming, kTarget, InstallMode::replace);
        EXPECT_EQ(st.code(), Code::corruption) << what << ": " << why(st);
        EXPECT_FALSE(env2.fs.has(kIncoming)) << what;
        EXPECT_TRUE(env2.fs.contents(kTarget) == target_bytes) << what;
    };
    const std::span<const std::byte> all(bytes);
    for (uint64_t k = 0; k < bytes.size(); k += 4096) refused(all.first(k), {}, "cut at " + std::to_string(k));
    refused(all.first(bytes.size() - 1), {}, "cut before the last byte");
    std::vector<std::byte> longer = bytes;
    longer.resize(bytes.size() + 8);
    refused(longer, {}, "8 bytes after the image");
    for (uint64_t off = 0; off < bytes.size(); off += (off < 256 ? 1 : 41)) {
        refused(all, off, "byte " + std::to_string(off) + " flipped");
        if (HasFailure()) return;
    }
    refused(all, bytes.size() - 1, "last byte flipped");
    EXPECT_GT(attempts, 1000);

    // The whole image installs.
    env2.fs.set_contents(kIncoming, bytes);
    ASSERT_OK(Database::install_image(env2.fs, kIncoming, kTarget, InstallMode::replace));
    auto copy = open_db(env2, kTarget);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(dump(*copy), dump(*db));
}

TEST(ImageInstall, ExistingTargetCreateOnlyOrReplace) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    fill(*db, 30);
    auto img = db->image();
    ASSERT_OK(img);

    EngineEnv env2;
    {
        auto target = create_db(env2, kTarget);
        ASSERT_NE(target, nullptr);
        fill(*target, 3, 4, "stale");
        ASSERT_OK(target->close());
    }
    const std::vector<std::byte> target_bytes = env2.fs.contents(kTarget);
    env2.fs.set_contents(kIncoming, *img->bytes);
    Status st = Database::install_image(env2.fs, kIncoming, kTarget, InstallMode::create_only);
    EXPECT_EQ(st.code(), Code::already_exists) << why(st);
    EXPECT_FALSE(env2.fs.has(kIncoming));
    EXPECT_TRUE(env2.fs.contents(kTarget) == target_bytes);

    env2.fs.set_contents(kIncoming, *img->bytes);
    ASSERT_OK(Database::install_image(env2.fs, kIncoming, kTarget, InstallMode::replace));
    EXPECT_FALSE(env2.fs.has(kIncoming));
    auto copy = open_db(env2, kTarget);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(dump(*copy), dump(*db));
    EXPECT_FALSE(copy->read().find("stale").is_ok());
}

TEST(ImageInstall, ImageWaitsForTheFsync) {
    EngineEnv env;
    auto created = Database::create(kPath, env.options(SyncPolicy::at_close()));
    ASSERT_OK(created);
    Database& db = **created;
    fill(db, 10);
    EXPECT_LT(db.durable_seq(), db.seq());
    EXPECT_LT(env.fs.synced_size(kPath), file_size(env));
    const uint64_t syncs = env.fs.syncs();
    auto img = db.image();
    ASSERT_OK(img);
    EXPECT_EQ(img->info.seq, db.seq());
    EXPECT_EQ(db.durable_seq(), db.seq());
    EXPECT_EQ(env.fs.synced_size(kPath), file_size(env));
    EXPECT_GT(env.fs.syncs(), syncs);
}

TEST(ImageHistory, LineageKeptThroughRewritesInstallAndForks) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    const LineageId lineage = db->lineage();
    EXPECT_NE(lineage.v, 0u);
    ASSERT_EQ(db->history().forks.size(), 1u);
    EXPECT_EQ(db->history().forks[0].history.v, lineage.v) << "h0 is the lineage";
    EXPECT_EQ(db->history().forks[0].seq.v, 0u);
    fill(*db, 20);
    ASSERT_OK(db->checkpoint());
    EXPECT_EQ(db->lineage(), lineage);
    ASSERT_OK(db->compact());
    EXPECT_EQ(db->lineage(), lineage);
    ASSERT_OK(db->fork_history());
    EXPECT_EQ(db->lineage(), lineage);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(db->lineage(), lineage);

    auto img = db->image();
    ASSERT_OK(img);
    EXPECT_EQ(img->info.lineage, lineage);
    EngineEnv env2;
    env2.fs.set_contents(kIncoming, *img->bytes);
    ASSERT_OK(Database::install_image(env2.fs, kIncoming, kTarget, InstallMode::create_only));
    auto copy = open_db(env2, kTarget);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(copy->lineage(), lineage);
    ASSERT_OK(copy->fork_history());
    EXPECT_EQ(copy->lineage(), lineage);

    auto other = create_db(env, "/d/u.fenec");
    ASSERT_NE(other, nullptr);
    EXPECT_NE(other->lineage(), lineage) << "another create draws a new lineage";
    EXPECT_EQ(other->history().forks.size(), 1u);
}

TEST(ImageHistory, ForkHistoryAddsAForkAtTheCurrentSeq) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    const CollectionId c = fill(*db, 10);
    const Seq s1 = db->seq();
    const History h0 = db->history();
    EXPECT_EQ(h0.term(), 0u);
    const uint64_t size0 = file_size(env);

    auto h1 = db->fork_history();
    ASSERT_OK(h1);
    ASSERT_EQ(h1->forks.size(), 2u);
    EXPECT_EQ(h1->forks[0], h0.forks[0]);
    EXPECT_EQ(h1->forks[1].seq, s1);
    EXPECT_NE(h1->forks[1].history.v, 0u);
    EXPECT_NE(h1->forks[1].history, h0.forks[0].history);
    EXPECT_EQ(h1->term(), 1u);
    EXPECT_EQ(h1->current(), h1->forks[1].history);
    EXPECT_FALSE(h1->replica);
    EXPECT_EQ(db->seq(), s1) << "a fork moves no seq";
    EXPECT_EQ(db->history(), *h1);
    EXPECT_GT(file_size(env), size0) << "a history record was appended";
    EXPECT_EQ(env.fs.synced_size(kPath), file_size(env)) << "and fsynced";

    Landed l = land(*db, [&](Block& b) { ASSERT_OK(b.insert(c, std::nullopt, item(1, "x"))); });
    EXPECT_EQ(l.history, h1->current());
    auto h2 = db->fork_history();
    ASSERT_OK(h2);
    ASSERT_EQ(h2->forks.size(), 3u);
    EXPECT_EQ(h2->forks[2].seq.v, s1.v + 1);
    EXPECT_EQ(h2->term(), h2->forks.size() - 1);

    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(db->history(), *h2);
    EXPECT_EQ(db->seq().v, s1.v + 1);
    ASSERT_OK(db->compact());
    EXPECT_EQ(db->history(), *h2);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(db->history(), *h2);
    EXPECT_EQ(db->history().term(), 2u);
}

// =============================================================================================
// Quotas (48-53, 40)
// =============================================================================================

// The block both twins write: three new rows and an update.
void quota_block(Block& b, CollectionId c, std::vector<uint64_t>* ids) {
    for (int i = 0; i < 3; ++i) {
        auto id = b.insert(c, std::nullopt, item(i, "quota row " + std::to_string(i)));
        ASSERT_OK(id);
        ids->push_back(id->v);
    }
    ASSERT_OK(b.set(c, DocId{1}, item(42, "updated")));
}

TEST(QuotaBytes, OneBytePastIsRefusedExactFitLands) {
    EngineEnv twin_env, env;
    auto twin = create_db(twin_env);
    auto db = create_db(env);
    ASSERT_NE(twin, nullptr);
    ASSERT_NE(db, nullptr);
    const CollectionId c = fill(*db, 5);
    ASSERT_EQ(fill(*twin, 5), c);
    ASSERT_TRUE(twin_env.fs.contents(kPath) == env.fs.contents(kPath)) << "the twins are identical";

    // Measure the block's framed length on the twin.
    std::vector<uint64_t> twin_ids;
    const uint64_t twin_before = twin->usage().file_bytes;
    const Landed measured = land(*twin, [&](Block& b) { quota_block(b, c, &twin_ids); });
    const uint64_t len = measured.bytes;
    ASSERT_GT(len, 0u);
    ASSERT_EQ(twin->usage().file_bytes, twin_before + len);

    const uint64_t f = db->usage().file_bytes;
    ASSERT_EQ(f, file_size(env));
    const uint64_t seq0 = db->seq().v;
    const uint64_t limit = f + len - 1;  // the record would end one byte past
    db->set_limit(bytes_limit(limit));
    {
        auto b = db->begin();
        ASSERT_OK(b);
        std::vector<uint64_t> ids;
        quota_block(*b, c, &ids);
        EXPECT_EQ(ids, twin_ids);
        auto l = b->commit();
        ASSERT_FALSE(l.is_ok());
        const Status& st = l.status();
        EXPECT_EQ(st.code(), Code::quota_exceeded);
        EXPECT_EQ(st.detail().quota, QuotaKind::bytes);
        EXPECT_EQ(st.detail().limit, double(limit));
        // The message names the quota and its limit, never the usage.
        std::string msg(st.message());
        EXPECT_NE(msg.find("bytes"), std::string::npos) << msg;
        const std::string limit_text = std::to_string(limit);
        ASSERT_NE(msg.find(limit_text), std::string::npos) << msg;
        msg.erase(msg.find(limit_text), limit_text.size());
        EXPECT_EQ(msg.find(std::to_string(f)), std::string::npos) << st.message();
        EXPECT_EQ(msg.find(std::to_string(f + len)), std::string::npos) << st.message();
    }
    EXPECT_EQ(db->seq().v, seq0);
    EXPECT_EQ(file_size(env), f) << "nothing appended";
    EXPECT_EQ(db->usage().file_bytes, f);
    EXPECT_EQ(db->read().count(c), 5u);
    EXPECT_EQ(db->read().get(c, DocId{1})->get(0), Value(int64_t{0})) << "the update was put back";

    db->set_limit(bytes_limit(f + len));  // the record ends exactly at the limit
    std::vector<uint64_t> ids;
    const Landed l = land(*db, [&](Block& b) { quota_block(b, c, &ids); });
    EXPECT_EQ(ids, twin_ids) << "the refused block's ids are handed out again";
    EXPECT_EQ(l.bytes, len);
    EXPECT_EQ(db->usage().file_bytes, f + len);
    EXPECT_EQ(file_size(env), f + len);
    EXPECT_TRUE(twin_env.fs.contents(kPath) == env.fs.contents(kPath));
    // Now at the limit to the byte: any put is refused.
    auto b = db->begin();
    ASSERT_OK(b);
    ASSERT_OK(b->insert(c, std::nullopt, item(1, "")));
    EXPECT_EQ(b->commit().status().code(), Code::quota_exceeded);
}

TEST(QuotaRows, RowsLimitCountsClientCollectionsOnly) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    const CollectionId c = fill(*db, 10);
    db->set_limit(rows_limit(10));
    const uint64_t seq0 = db->seq().v;
    {
        auto b = db->begin();
        ASSERT_OK(b);
        auto id = b->insert(c, std::nullopt, item(11, "one too many"));
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 11u);
        auto l = b->commit();
        EXPECT_EQ(l.status().code(), Code::quota_exceeded) << why(l);
        EXPECT_EQ(l.status().detail().quota, QuotaKind::rows);
        EXPECT_EQ(l.status().detail().limit, 10.0);
        EXPECT_NE(l.status().message().find("rows"), std::string_view::npos);
    }
    EXPECT_EQ(db->seq().v, seq0);
    // An update and a delete land; a put replacing a row adds none.
    land(*db, [&](Block& b) { ASSERT_OK(b.set(c, DocId{3}, item(3, "updated"))); });
    land(*db, [&](Block& b) { ASSERT_OK(b.put(c, DocId{4}, item(4, "replaced"))); });
    land(*db, [&](Block& b) { ASSERT_OK(b.del(c, DocId{5})); });
    EXPECT_EQ(db->usage().rows, 9u);
    // A block adding one and deleting one is no net change: it lands at the limit.
    land(*db, [&](Block& b) {
        auto id = b.insert(c, std::nullopt, item(11, "back to ten"));
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 11u) << "the refused block's id again";
    });
    land(*db, [&](Block& b) {
        ASSERT_OK(b.insert(c, std::nullopt, item(12, "swap")));
        ASSERT_OK(b.del(c, DocId{6}));
    });
    EXPECT_EQ(db->usage().rows, 10u);

    // The server's own `_idempotency` rows are neither counted nor refused.
    land(*db, [&](Block& b) {
        auto idem = b.create_collection("_idempotency", schema_of("key:text"));
        ASSERT_OK(idem);
        for (int i = 0; i < 5; ++i) ASSERT_OK(b.insert(*idem, std::nullopt, Doc{{0, Value("k" + std::to_string(i))}}));
    }, BlockOptions{.internal = true});
    EXPECT_EQ(db->usage().rows, 10u);
    EXPECT_EQ(db->usage().internal_rows, 5u);
    land(*db, [&](Block& b) { ASSERT_OK(b.del(c, DocId{7})); });
    land(*db, [&](Block& b) { ASSERT_OK(b.insert(c, std::nullopt, item(13, "ten again"))); });
    EXPECT_EQ(db->usage().rows, 10u);
    auto b = db->begin();
    ASSERT_OK(b);
    ASSERT_OK(b->insert(c, std::nullopt, item(14, "")));
    EXPECT_EQ(b->commit().status().code(), Code::quota_exceeded);
}

TEST(QuotaBytes, AtTheLimitDeletesDropsAndSweepsLand) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    const CollectionId c = fill(*db, 50);
    const CollectionId gone = fill(*db, 5, 4, "gone");
    CollectionId ttl;
    const int64_t now = env.clock.wall_ms();
    land(*db, [&](Block& b) {
        ttl = *b.create_collection("sessions", schema_of("at:timestamp@ttl(1000), n:int"));
        for (int i = 0; i < 20; ++i) ASSERT_OK(b.insert(ttl, std::nullopt, Doc{{0, Value(Timestamp{now - 5000})}}));
    });
    const uint64_t limit = db->usage().file_bytes;
    db->set_limit(bytes_limit(limit));
    {
        auto b = db->begin();
        ASSERT_OK(b);
        ASSERT_OK(b->insert(c, std::nullopt, item(1, "")));
        EXPECT_EQ(b->commit().status().code(), Code::quota_exceeded);
    }
    {
        auto b = db->begin();
        ASSERT_OK(b);
        ASSERT_OK(b->create_collection("more", schema_of("n:int")));
        EXPECT_EQ(b->commit().status().code(), Code::quota_exceeded);
    }
    const uint64_t seq0 = db->seq().v;
    land(*db, [&](Block& b) {
        for (uint64_t id = 1; id <= 10; ++id) ASSERT_OK(b.del(c, DocId{id}));
    });
    EXPECT_GT(db->usage().file_bytes, limit) << "deletes go past the bytes quota";
    land(*db, [&](Block& b) { ASSERT_OK(b.drop_collection(gone)); });
    auto swept = db->sweep_expired();
    ASSERT_OK(swept);
    EXPECT_EQ(*swept, 20u);
    EXPECT_EQ(db->seq().v, seq0 + 10 + 1 + 20);
    EXPECT_EQ(db->usage().rows, 40u);
    // A mixed block is asked like any other.
    auto b = db->begin();
    ASSERT_OK(b);
    ASSERT_OK(b->del(c, DocId{11}));
    ASSERT_OK(b->insert(c, std::nullopt, item(1, "")));
    EXPECT_EQ(b->commit().status().code(), Code::quota_exceeded);
}

TEST(QuotaSpill, SecondSpillIsRefusedBeforeItIsWritten) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    land(*db, [&](Block& b) { c = *b.create_collection("big", schema_of("t:text")); });
    const uint64_t f0 = db->usage().file_bytes;
    const uint64_t seq0 = db->seq().v;
    const uint64_t limit = f0 + (20ull << 20);
    db->set_limit(bytes_limit(limit));
    const std::string text(100 << 10, 'q');
    {
        auto b = db->begin();
        ASSERT_OK(b);
        Status refused;
        int inserted = 0;
        uint64_t after_first_spill = 0;
        for (int i = 0; i < 400; ++i) {  // 40 MiB at most
            auto id = b->insert(c, std::nullopt, Doc{{0, Value(text)}});
            if (!id.is_ok()) {
                refused = id.status();
                break;
            }
            ++inserted;
            if (after_first_spill == 0 && file_size(env) > f0) after_first_spill = file_size(env);
        }
        ASSERT_FALSE(refused.is_ok()) << "the second spill should have been refused";
        EXPECT_EQ(refused.code(), Code::quota_exceeded) << why(refused);
        EXPECT_EQ(refused.detail().quota, QuotaKind::bytes);
        EXPECT_NE(refused.message().find("bytes"), std::string_view::npos) << why(refused);
        EXPECT_NE(refused.message().find(std::to_string(limit)), std::string_view::npos) << why(refused);
        // About 32 MiB of documents were buffered: one spill written, the second refused.
        EXPECT_GT(inserted, 300);
        EXPECT_LT(inserted, 340);
        const uint64_t grown = file_size(env) - f0;
        EXPECT_EQ(file_size(env), after_first_spill) << "the refused spill wrote nothing";
        EXPECT_GT(grown, limits::spill_threshold_bytes);
        EXPECT_LT(grown, limits::spill_threshold_bytes + (1u << 20));
        // The refusal refuses the whole block: a later write is refused too, nothing kept.
        auto later = b->insert(c, std::nullopt, Doc{});
        EXPECT_EQ(later.status().code(), Code::quota_exceeded) << why(later.status());
        // The block cannot land either: it is put back.
        auto l = b->commit();
        EXPECT_EQ(l.status().code(), Code::quota_exceeded) << why(l);
        EXPECT_EQ(file_size(env) - f0, grown) << "the file grew by spill 1 only";
    }
    EXPECT_EQ(db->seq().v, seq0);
    EXPECT_EQ(db->read().count(c), 0u);
    const Usage u = db->usage();
    EXPECT_EQ(u.file_bytes, file_size(env));
    EXPECT_GT(u.dead_bytes, limits::spill_threshold_bytes) << "the written spill is dead space";
    land(*db, [&](Block& b) {
        auto id = b.insert(c, std::nullopt, Doc{{0, Value("small")}});
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 1u) << "ids reissued";
    });
    const std::string live = dump(*db);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    EXPECT_EQ(dump(*db), live);
    EXPECT_GT(db->usage().dead_bytes, limits::spill_threshold_bytes);
}

TEST(QuotaRate, RowsPerSecondRetryAfterAndInternalBlocksNeverCharged) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c, ttl;
    const int64_t now = env.clock.wall_ms();
    land(*db, [&](Block& b) {
        c = *b.create_collection("items", schema_of("n:int, s:text"));
        ttl = *b.create_collection("sessions", schema_of("at:timestamp@ttl(1000)"));
        for (int i = 0; i < 30; ++i) ASSERT_OK(b.insert(ttl, std::nullopt, Doc{{0, Value(Timestamp{now - 5000})}}));
    });
    db->set_limit(rows_per_s_limit(100.0));
    // A full bucket lets a block of 500 rows begin; it lands and leaves a debt of 400.
    const Landed l = land(*db, [&](Block& b) {
        for (int i = 0; i < 500; ++i) ASSERT_OK(b.insert(c, std::nullopt, item(i, "r")));
    });
    EXPECT_EQ(l.last.v - l.first.v + 1, 500u);
    auto check_limited = [&](int64_t retry) {
        auto b = db->begin();
        ASSERT_FALSE(b.is_ok());
        EXPECT_EQ(b.status().code(), Code::rate_limited) << why(b);
        EXPECT_EQ(b.status().detail().quota, QuotaKind::rows_per_s);
        EXPECT_EQ(b.status().detail().retry_after_ms, retry);
    };
    check_limited(4010);
    // Internal blocks are neither asked nor charged: the server's own rows, and a TTL sweep.
    land(*db, [&](Block& b) {
        auto idem = b.create_collection("_idempotency", schema_of("key:text"));
        ASSERT_OK(idem);
        for (int i = 0; i < 50; ++i) ASSERT_OK(b.insert(*idem, std::nullopt, Doc{{0, Value("k")}}));
    }, BlockOptions{.internal = true});
    auto swept = db->sweep_expired();
    ASSERT_OK(swept);
    EXPECT_EQ(*swept, 30u);
    check_limited(4010);
    env.clock.advance_ms(4009);
    check_limited(1);
    env.clock.advance_ms(1);
    land(*db, [&](Block& b) { ASSERT_OK(b.insert(c, std::nullopt, item(0, "after the wait"))); });
    check_limited(10);  // that row emptied the bucket: the next one is 10 ms away at 100/s
}

TEST(QuotaChecks, NoLimitsRunNoQuotaCode) {
    EngineEnv env;
    auto created = Database::create(kPath, env.options(SyncPolicy::at_close()));
    ASSERT_OK(created);
    Database& db = **created;
    const CollectionId c = fill(db, 1);
    for (int i = 0; i < 10'000; ++i) {
        land(db, [&](Block& b) { ASSERT_OK(b.put(c, DocId{1}, item(i, "x"))); });
        if (HasFailure()) return;
    }
    EXPECT_EQ(db.usage().quota_checks, 0u);
    EXPECT_EQ(db.seq().v, 2u + 10'000);
    // With a limit each landing runs it once; cleared, never again.
    db.set_limit(rows_limit(1'000'000));
    for (int i = 0; i < 10; ++i) land(db, [&](Block& b) { ASSERT_OK(b.put(c, DocId{1}, item(i, "y"))); });
    EXPECT_EQ(db.usage().quota_checks, 10u);
    EXPECT_TRUE(db.limits().rows.has_value());
    db.set_limit(Limits{});
    EXPECT_FALSE(db.limits().any());
    for (int i = 0; i < 10; ++i) land(db, [&](Block& b) { ASSERT_OK(b.put(c, DocId{1}, item(i, "z"))); });
    EXPECT_EQ(db.usage().quota_checks, 10u);
}

TEST(QuotaCompaction, CompactionGivesTheBytesBack) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    const CollectionId c = fill(*db, 200, 1024);
    const uint64_t limit = db->usage().file_bytes + 512;
    db->set_limit(bytes_limit(limit));
    land(*db, [&](Block& b) {
        for (uint64_t id = 1; id <= 150; ++id) ASSERT_OK(b.del(c, DocId{id}));
    });
    ASSERT_GT(db->usage().file_bytes, limit) << "past the quota through deletes";
    {
        auto b = db->begin();
        ASSERT_OK(b);
        ASSERT_OK(b->insert(c, std::nullopt, item(1, std::string(100, 'p'))));
        EXPECT_EQ(b->commit().status().code(), Code::quota_exceeded);
    }
    const uint64_t before = db->usage().file_bytes;
    ASSERT_OK(db->compact());
    EXPECT_LT(db->usage().file_bytes, before);
    EXPECT_LT(db->usage().file_bytes, limit);
    EXPECT_EQ(db->usage().file_bytes, file_size(env));
    land(*db, [&](Block& b) {
        auto id = b.insert(c, std::nullopt, item(1, std::string(100, 'p')));
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 201u);
    });
}

// =============================================================================================
// TTL (54-56)
// =============================================================================================

constexpr int64_t kThirtyMin = 30 * 60 * 1000;

TEST(TtlBoundary, ExpiredAtExactlyNowMinusTtlNullNeverExpires) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    const int64_t now = env.clock.wall_ms();
    land(*db, [&](Block& b) {
        c = *b.create_collection("sessions", schema_of("at:timestamp@ttl(1800000), n:int"));
        ASSERT_OK(b.insert(c, DocId{1}, Doc{{0, Value(Timestamp{now - kThirtyMin})}, {1, Value(int64_t{1})}}));
        ASSERT_OK(b.insert(c, DocId{2}, Doc{{0, Value(Timestamp{now - kThirtyMin + 1})}, {1, Value(int64_t{2})}}));
        ASSERT_OK(b.insert(c, DocId{3}, Doc{{1, Value(int64_t{3})}}));  // null: never expires
    });
    auto visible = [&](const Database& d) {
        ReadView v = d.read();
        std::vector<uint64_t> ids;
        v.scan(c, [&](DocId id, DocView) {
            ids.push_back(id.v);
            return true;
        });
        return ids;
    };
    auto check = [&](const Database& d) {
        ReadView v = d.read();
        EXPECT_FALSE(v.get(c, DocId{1}).has_value());
        EXPECT_TRUE(v.get(c, DocId{2}).has_value());
        EXPECT_TRUE(v.get(c, DocId{3}).has_value());
        EXPECT_EQ(v.count(c), 2u);
        EXPECT_EQ(v.expired(c, 10), std::vector<DocId>{DocId{1}});
    };
    check(*db);
    EXPECT_EQ(visible(*db), (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(db->usage().rows, 3u) << "rows expired count until swept";
    {
        auto b = db->begin();
        ASSERT_OK(b);
        EXPECT_FALSE(b->get(c, DocId{1}).has_value());
        EXPECT_EQ(b->set(c, DocId{1}, Doc{}).code(), Code::not_found);
        auto gone = b->del(c, DocId{1});
        ASSERT_OK(gone);
        EXPECT_FALSE(*gone) << "a client's delete treats an expired row as absent";
        EXPECT_EQ(b->writes(), 0u);
    }
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    check(*db);
    env.clock.advance_ms(1);  // row 2 is now exactly at the boundary
    EXPECT_EQ(visible(*db), (std::vector<uint64_t>{3}));
    EXPECT_EQ(db->read().count(c), 1u);
    env.clock.advance_ms(365ll * 24 * 3600 * 1000);
    EXPECT_EQ(visible(*db), (std::vector<uint64_t>{3}));
}

TEST(TtlSweep, SweepLandsInternalBlocksOfAThousand) {
    EngineEnv env;
    Recorder recorder;
    OpenOptions o = env.options();
    o.listener = &recorder;
    auto created = Database::create(kPath, o);
    ASSERT_OK(created);
    Database& db = **created;
    CollectionId c;
    const int64_t now = env.clock.wall_ms();
    land(db, [&](Block& b) {
        c = *b.create_collection("sessions", schema_of("at:timestamp@ttl(1000), n:int"));
        for (int i = 0; i < 2500; ++i) ASSERT_OK(b.insert(c, std::nullopt, Doc{{0, Value(Timestamp{now - 1000 - i})}}));
        for (int i = 0; i < 10; ++i) ASSERT_OK(b.insert(c, std::nullopt, Doc{{0, Value(Timestamp{now})}}));
        ASSERT_OK(b.insert(c, std::nullopt, Doc{{1, Value(int64_t{1})}}));
    });
    const uint64_t seq0 = db.seq().v;
    recorder.take();
    auto swept = db.sweep_expired();
    ASSERT_OK(swept);
    EXPECT_EQ(*swept, 2500u);
    EXPECT_EQ(db.seq().v, seq0 + 2500);
    const std::vector<BlockSummary> blocks = recorder.take();
    ASSERT_EQ(blocks.size(), 3u);
    const uint64_t sizes[] = {1000, 1000, 500};
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_TRUE(blocks[i].internal);
        EXPECT_EQ(blocks[i].last.v - blocks[i].first.v + 1, sizes[i]);
        ASSERT_EQ(blocks[i].changes.size(), 1u);
        EXPECT_EQ(blocks[i].changes[0].deleted.size(), sizes[i]);
        EXPECT_TRUE(blocks[i].changes[0].put.empty());
    }
    EXPECT_EQ(db.read().count(c), 11u);
    EXPECT_EQ(db.usage().rows, 11u);
    auto again = db.sweep_expired();
    ASSERT_OK(again);
    EXPECT_EQ(*again, 0u);
    EXPECT_TRUE(recorder.take().empty()) << "nothing to sweep lands nothing";

    // delete_expired re-checks each id: a row moved to a later time meanwhile is skipped.
    env.clock.advance_ms(1000);  // the 10 rows at `now` expire
    std::vector<DocId> ids = db.read().expired(c, 100);
    ASSERT_EQ(ids.size(), 10u);
    // (set() would be not_found: a client sees an expired row as absent; put() writes it anew.)
    land(db, [&](Block& b) { ASSERT_OK(b.put(c, ids[0], Doc{{0, Value(Timestamp{env.clock.wall_ms()})}})); });
    auto n = db.delete_expired(c, ids, env.clock.wall_ms());
    ASSERT_OK(n);
    EXPECT_EQ(*n, 9u);
    EXPECT_TRUE(db.read().get(c, ids[0]).has_value());
    EXPECT_EQ(db.read().count(c), 2u);
}

TEST(TtlInsert, InsertOverAnExpiredUnsweptRowLands) {
    EngineEnv env;
    auto db = create_db(env);
    ASSERT_NE(db, nullptr);
    CollectionId c;
    const int64_t now = env.clock.wall_ms();
    land(*db, [&](Block& b) {
        c = *b.create_collection("sessions", schema_of("at:timestamp@ttl(1000), n:int"));
        ASSERT_OK(b.insert(c, DocId{7}, Doc{{0, Value(Timestamp{now - 2000})}, {1, Value(int64_t{1})}}));
        ASSERT_OK(b.insert(c, DocId{8}, Doc{{0, Value(Timestamp{now})}, {1, Value(int64_t{2})}}));
    });
    EXPECT_FALSE(db->read().get(c, DocId{7}).has_value());
    EXPECT_EQ(db->usage().rows, 2u);
    const uint64_t seq0 = db->seq().v;
    land(*db, [&](Block& b) {
        auto id = b.insert(c, DocId{7}, Doc{{0, Value(Timestamp{now})}, {1, Value(int64_t{70})}});
        ASSERT_OK(id);
        EXPECT_EQ(id->v, 7u);
        // Now visible: a second insert of 7 is a duplicate, and 8 always was.
        EXPECT_EQ(b.insert(c, DocId{7}, Doc{}).status().code(), Code::duplicate);
        EXPECT_EQ(b.insert(c, DocId{8}, Doc{}).status().code(), Code::duplicate);
    });
    EXPECT_EQ(db->seq().v, seq0 + 1);
    EXPECT_EQ(db->usage().rows, 2u) << "the expired row was replaced, not added to";
    auto check = [&](const Database& d) {
        auto row = d.read().get(c, DocId{7});
        ASSERT_TRUE(row.has_value());
        EXPECT_EQ(row->get(1), Value(int64_t{70}));
        EXPECT_EQ(d.read().count(c), 2u);
    };
    check(*db);
    db = reopen(env, std::move(db));
    ASSERT_NE(db, nullptr);
    check(*db);
}

}  // namespace
}  // namespace fenec::test::rewrite_quota_test
