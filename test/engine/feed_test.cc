// test/engine/feed_test.cc: proves the replication feed (engine.md §11): a follower fed from a
// primary's feed ends in the primary's state (dump equal but for the replica flag), across a
// primary reopen and a follower reopen, spilled blocks included; a gap is refused; since()
// answers forked / ahead / behind; a promoted follower is followed back by its old primary.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/database.h"
#include "engine/format.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::feed_test {
namespace {

using namespace engine;
using namespace std::chrono_literals;

std::string state_of(const Database& db) {
    std::string d = dump(db);
    const auto at = d.find("replica 1");
    if (at != std::string::npos) d.replace(at, 9, "replica 0");
    return d;
}

std::unique_ptr<Database> must(Result<std::unique_ptr<Database>> r) {
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? std::move(*r) : nullptr;
}

void write_rows(Database& db, int n, const std::string& text = "x") {
    auto b = db.begin();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    auto c = b->find("people");
    CollectionId id;
    if (c.is_ok()) {
        id = *c;
    } else {
        auto made = b->create_collection("people", schema_of("name:text, n:int"));
        ASSERT_TRUE(made.is_ok());
        id = *made;
    }
    for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(b->insert(id, std::nullopt, Doc{{0, Value(text)}, {1, Value(int64_t{i})}}).is_ok());
    }
    ASSERT_TRUE(b->commit().is_ok());
}

// A follower's copy of `primary` as it stands: its image, opened as a follower.
std::unique_ptr<Database> copy_of(EngineEnv& env, Database& primary, const std::string& path) {
    auto img = primary.image();
    EXPECT_TRUE(img.is_ok()) << img.status().to_string();
    {
        auto f = env.fs.open(path + ".incoming", OpenMode::create_truncate);
        EXPECT_TRUE(f.is_ok());
        EXPECT_TRUE((*f)->append(*img->bytes).is_ok());
    }
    EXPECT_TRUE(Database::install_image(env.fs, path + ".incoming", path, InstallMode::replace).is_ok());
    OpenOptions o = env.options();
    o.role = Role::follower;
    auto db = must(Database::open(path, o));
    EXPECT_TRUE(db->follow(primary.history()).is_ok());
    return db;
}

Position position_of(const Database& db) { return Position{db.seq(), db.history().current()}; }

// Applies everything the primary's feed holds for the follower; false if since() wanted an image.
int catch_up(Database& primary, Database& follower) {
    auto s = primary.feed().since(position_of(follower));
    if (!std::holds_alternative<FeedCursor>(s)) return -1;
    FeedCursor cursor = std::get<FeedCursor>(std::move(s));
    int applied = 0;
    for (;;) {
        FeedNext n = cursor.next(0ms);
        if (n.kind != FeedNext::Kind::entry) break;
        Status st = follower.apply(n.entry);
        EXPECT_TRUE(st.is_ok()) << st.to_string();
        if (!st.is_ok()) break;
        ++applied;
    }
    return applied;
}

TEST(Feed, FollowerEndsInThePrimarysStateAcrossReopens) {
    EngineEnv env;
    auto p = must(Database::create("/d/p.fenec", env.options()));
    auto f = copy_of(env, *p, "/d/f.fenec");
    write_rows(*p, 3);
    write_rows(*p, 2);
    {
        auto b = p->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->del(*b->find("people"), DocId{2}).is_ok());
        AlterSpec rename;
        rename.kind = AlterKind::rename_field;
        rename.field = "n";
        rename.new_name = "m";
        ASSERT_TRUE(b->alter_collection(*b->find("people"), rename).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    EXPECT_EQ(catch_up(*p, *f), 3);
    EXPECT_EQ(state_of(*f), state_of(*p));
    EXPECT_TRUE(f->history().replica);
    EXPECT_EQ(f->begin().status().code(), Code::read_only);

    // The primary reopens: its feed is seeded from its file, no image needed.
    ASSERT_TRUE(p->close().is_ok());
    p = must(Database::open("/d/p.fenec", env.options()));
    write_rows(*p, 4);
    EXPECT_EQ(catch_up(*p, *f), 1);
    EXPECT_EQ(state_of(*f), state_of(*p));

    // A follower opened behind the primary gets every block it missed from the seeded feed.
    auto f2 = copy_of(env, *p, "/d/f2.fenec");
    ASSERT_TRUE(f2->close().is_ok());
    write_rows(*p, 1);
    ASSERT_TRUE(p->close().is_ok());
    p = must(Database::open("/d/p.fenec", env.options()));
    OpenOptions fo = env.options();
    fo.role = Role::follower;
    f2 = must(Database::open("/d/f2.fenec", fo));
    EXPECT_EQ(catch_up(*p, *f2), 1);
    EXPECT_EQ(state_of(*f2), state_of(*p));

    // The follower's file holds the primary's blocks byte for byte: it replays to the same state.
    EXPECT_EQ(catch_up(*p, *f), 1);
    const std::string before = state_of(*f);
    ASSERT_TRUE(f->close().is_ok());
    f = must(Database::open("/d/f.fenec", fo));
    EXPECT_EQ(state_of(*f), before);
    // A replica's file is not opened as a primary by mistake.
    ASSERT_TRUE(f->close().is_ok());
    EXPECT_EQ(Database::open("/d/f.fenec", env.options()).status().code(), Code::invalid_argument);
}

TEST(Feed, SpilledBlockTravelsWhole) {
    EngineEnv env;
    auto p = must(Database::create("/d/p.fenec", env.options()));
    auto f = copy_of(env, *p, "/d/f.fenec");
    write_rows(*p, 1);
    write_rows(*p, 3, std::string(9u << 20, 'a'));  // over the 16 MiB spill threshold
    EXPECT_EQ(catch_up(*p, *f), 2);
    EXPECT_EQ(state_of(*f), state_of(*p));
    OpenOptions fo = env.options();
    fo.role = Role::follower;
    const std::string before = state_of(*f);
    ASSERT_TRUE(f->close().is_ok());
    f = must(Database::open("/d/f.fenec", fo));
    EXPECT_EQ(state_of(*f), before);
}

TEST(Feed, GapAndBadBytesRefused) {
    EngineEnv env;
    auto p = must(Database::create("/d/p.fenec", env.options()));
    auto f = copy_of(env, *p, "/d/f.fenec");
    write_rows(*p, 1);
    write_rows(*p, 1);
    auto cur = std::get<FeedCursor>(p->feed().since(position_of(*f)));
    FeedNext first = cur.next(0ms);
    FeedNext second = cur.next(0ms);
    ASSERT_EQ(second.kind, FeedNext::Kind::entry);
    Status gap = f->apply(second.entry);
    EXPECT_EQ(gap.code(), Code::invalid_argument);
    EXPECT_NE(gap.message().find("gap"), std::string_view::npos) << gap.to_string();
    auto flipped = std::make_shared<std::vector<std::byte>>(*first.entry.records);
    (*flipped)[flipped->size() / 2] ^= std::byte{1};
    FeedEntry bad = first.entry;
    bad.records = flipped;
    EXPECT_EQ(f->apply(bad).code(), Code::invalid_argument);
    EXPECT_EQ(f->seq().v, 0u);
    ASSERT_TRUE(f->apply(first.entry).is_ok());
    ASSERT_TRUE(f->apply(second.entry).is_ok());
    EXPECT_EQ(state_of(*f), state_of(*p));
    // A primary applies nothing.
    EXPECT_EQ(p->apply(first.entry).code(), Code::invalid_argument);
}

TEST(Feed, SinceAnswersNeedImage) {
    EngineEnv env;
    OpenOptions o = env.options();
    o.feed_bytes = 1;  // keeps only the newest block
    auto p = must(Database::create("/d/p.fenec", o));
    const HistoryId h0 = p->history().current();
    write_rows(*p, 1);
    write_rows(*p, 1);
    write_rows(*p, 1);
    auto why = [&](Position pos) {
        auto s = p->feed().since(pos);
        return std::holds_alternative<NeedImage>(s) ? need_image_name(std::get<NeedImage>(s).why)
                                                   : "cursor";
    };
    // Seqs: 1..2 (create and a row), 3, 4; the feed holds only 4.
    EXPECT_STREQ(why({Seq{4}, h0}), "cursor");
    EXPECT_STREQ(why({Seq{3}, h0}), "cursor");
    EXPECT_STREQ(why({Seq{2}, h0}), "behind");
    EXPECT_STREQ(why({Seq{5}, h0}), "ahead");
    EXPECT_STREQ(why({Seq{4}, HistoryId{12345}}), "forked");
    // A fork at 4: a follower on h0 at 4 continues (forks first); one past 4 on h0 is forked.
    auto forked = p->fork_history();
    ASSERT_TRUE(forked.is_ok());
    write_rows(*p, 1);
    EXPECT_STREQ(why({Seq{4}, h0}), "cursor");
    EXPECT_STREQ(why({Seq{5}, h0}), "forked");
    EXPECT_STREQ(why({Seq{5}, forked->current()}), "cursor");
    auto cur = std::get<FeedCursor>(p->feed().since({Seq{4}, h0}));
    FeedNext n = cur.next(0ms);
    ASSERT_EQ(n.kind, FeedNext::Kind::entry);
    EXPECT_EQ(n.entry.type, FeedEntry::Type::forks);
    EXPECT_EQ(n.entry.forks.size(), 2u);
    n = cur.next(0ms);
    ASSERT_EQ(n.kind, FeedNext::Kind::entry);
    EXPECT_EQ(n.entry.first.v, 5u);
    EXPECT_EQ(cur.next(0ms).kind, FeedNext::Kind::idle);
}

TEST(Feed, PromoteThenFollowBack) {
    EngineEnv env;
    auto p = must(Database::create("/d/p.fenec", env.options()));
    auto f = copy_of(env, *p, "/d/f.fenec");
    write_rows(*p, 2);
    EXPECT_EQ(catch_up(*p, *f), 1);
    // The failover: f promoted; p stopped at the fork, f writes on.
    auto h = f->promote();
    ASSERT_TRUE(h.is_ok()) << h.status().to_string();
    EXPECT_FALSE(h->replica);
    EXPECT_EQ(h->forks.size(), 2u);
    write_rows(*f, 3);
    ASSERT_TRUE(p->close().is_ok());
    OpenOptions fo = env.options();
    fo.role = Role::follower;
    p = must(Database::open("/d/p.fenec", fo));
    // Stopped at the fork: the new forks, then the writes after it.
    EXPECT_EQ(catch_up(*f, *p), 2);
    EXPECT_EQ(state_of(*p), state_of(*f));
    EXPECT_EQ(p->history().forks, f->history().forks);
    EXPECT_TRUE(p->history().replica);

    // An old primary that wrote past the fork is forked: it takes an image.
    EngineEnv env2;
    auto q = must(Database::create("/d/q.fenec", env2.options()));
    auto g = copy_of(env2, *q, "/d/g.fenec");
    write_rows(*q, 1);
    EXPECT_EQ(catch_up(*q, *g), 1);
    ASSERT_TRUE(g->promote().is_ok());
    write_rows(*q, 1);  // q wrote past the fork g took
    auto s = g->feed().since(position_of(*q));
    ASSERT_TRUE(std::holds_alternative<NeedImage>(s));
    EXPECT_EQ(std::get<NeedImage>(s).why, NeedImage::Why::forked);
}

// Two promotions of one copy at once (a router's call and its retry, say) fork it once: the
// second finds a primary and is refused, after the first's fork is durable. Checked and forked in
// two steps, both could pass the check and fork twice, each answered with a history the other's
// fork then replaced. Raced many times, since the window is narrow.
TEST(Feed, TwoPromotionsAtOnceForkOnce) {
    for (int round = 0; round < 300; ++round) {
        EngineEnv env;
        auto p = must(Database::create("/d/p.fenec", env.options()));
        auto f = copy_of(env, *p, "/d/f.fenec");
        std::atomic<int> ready{0};
        Result<History> results[2] = {Status::error(Code::busy, "not run"),
                                      Status::error(Code::busy, "not run")};
        std::thread threads[2];
        for (int i = 0; i < 2; ++i) {
            threads[i] = std::thread([&, i] {
                ready.fetch_add(1);
                while (ready.load() < 2) {
                }
                results[i] = f->promote();
            });
        }
        for (std::thread& t : threads) t.join();
        const int ok = int(results[0].is_ok()) + int(results[1].is_ok());
        ASSERT_EQ(ok, 1) << "round " << round;
        const Result<History>& refused = results[0].is_ok() ? results[1] : results[0];
        EXPECT_EQ(refused.status().code(), Code::invalid_argument) << refused.status().to_string();
        ASSERT_EQ(f->history().forks.size(), 2u) << "round " << round;
        EXPECT_EQ((results[0].is_ok() ? *results[0] : *results[1]).forks, f->history().forks);
    }
}

// A follower behind two of its primary's forks writes each as its seq reaches it, not both once
// it has passed the last: the blocks between are labelled with the history they were written
// on. Promoted between the two, it forks from that history, so an old primary that wrote on the
// first history past the fork it missed is told it forked, not followed on as if it matched.
TEST(Feed, AFollowerBehindTwoForksTakesEachAsItReachesIt) {
    EngineEnv env;
    auto p = must(Database::create("/d/p.fenec", env.options()));
    write_rows(*p, 1);  // seq 2 (its collection, then a row)
    // Three copies at (A, 2); each one's feed holds the blocks it applies from there.
    auto g = copy_of(env, *p, "/d/g.fenec");
    auto f = copy_of(env, *p, "/d/f.fenec");
    auto h = copy_of(env, *p, "/d/h.fenec");
    write_rows(*p, 1);
    write_rows(*p, 1);  // p at seq 4, all on A
    ASSERT_EQ(catch_up(*p, *f), 2);
    ASSERT_EQ(catch_up(*p, *h), 2);
    ASSERT_TRUE(f->promote().is_ok());  // [A@0, B@4]
    write_rows(*f, 1);
    write_rows(*f, 1);  // f at 6
    ASSERT_GE(catch_up(*f, *h), 2);     // h follows f from (A, 4): the forks, then 5 and 6
    ASSERT_TRUE(h->promote().is_ok());  // [A@0, B@4, C@6]
    write_rows(*h, 1);  // h at 7
    ASSERT_EQ(h->history().forks.size(), 3u);
    const Fork b = h->history().forks[1];
    // g follows h from (A, 2): the forks first, then the blocks; it stops at seq 5, past B@4 and
    // short of C@6.
    auto s = h->feed().since(position_of(*g));
    ASSERT_TRUE(std::holds_alternative<FeedCursor>(s));
    FeedCursor cursor = std::get<FeedCursor>(std::move(s));
    while (g->seq().v < 5) {
        FeedNext n = cursor.next(0ms);
        ASSERT_EQ(n.kind, FeedNext::Kind::entry);
        ASSERT_TRUE(g->apply(n.entry).is_ok());
    }
    ASSERT_EQ(g->history().forks.size(), 2u);
    EXPECT_EQ(g->history().forks[1], b);
    auto promoted = g->promote();
    ASSERT_TRUE(promoted.is_ok()) << promoted.status().to_string();
    ASSERT_EQ(promoted->forks.size(), 3u);
    EXPECT_EQ(promoted->forks[1], b);
    EXPECT_EQ(promoted->forks[2].seq.v, 5u);
    // p, the old primary, never left A and wrote past B's fork at 4: forked from g.
    write_rows(*p, 1);
    auto back = g->feed().since(position_of(*p));
    ASSERT_TRUE(std::holds_alternative<NeedImage>(back));
    EXPECT_EQ(std::get<NeedImage>(back).why, NeedImage::Why::forked);
    // And g reopens with the history it wrote.
    const History kept = g->history();
    ASSERT_TRUE(g->close().is_ok());
    g = must(Database::open("/d/g.fenec", env.options()));
    EXPECT_EQ(g->history().forks, kept.forks);
}

TEST(Feed, EntriesReadableOnlyOnceDurable) {
    EngineEnv env;
    auto p = must(Database::create("/d/p.fenec", env.options(SyncPolicy::at_close())));
    write_rows(*p, 1);
    auto cur = std::get<FeedCursor>(p->feed().since({Seq{0}, p->history().current()}));
    EXPECT_EQ(cur.next(0ms).kind, FeedNext::Kind::idle);
    ASSERT_TRUE(p->sync().is_ok());
    EXPECT_EQ(cur.next(0ms).kind, FeedNext::Kind::entry);
    ASSERT_TRUE(p->close().is_ok());
    EXPECT_EQ(cur.next(0ms).kind, FeedNext::Kind::closed);
}

}  // namespace
}  // namespace fenec::test::feed_test
