// test/engine/graph_changes_test.cc: the change set a graph record comes with on open (engine.md
// §6.3, engine/replay.cc note_change): every document of its collection written after it, once,
// ascending by id, with its body as the record saw it (nullopt: it did not exist then); none for
// another collection; a later record of the field starts a new one; an alter of the collection
// makes it unknown. The same set whatever reads the file: one read, slices of a few bytes, an
// image installed from the file's bytes, and a block whose writes were spilled (past 16 MiB).
#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/database.h"
#include "engine/format.h"
#include "engine/format_generated.h"
#include "engine/limits.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::graph_changes_test {
namespace {

using namespace engine;

constexpr char kPath[] = "/d/t.fenec";

// A document's body as bytes in a string: what a change's at_graph is compared with.
using Body = std::optional<std::string>;

Body body_of(std::optional<std::span<const std::byte>> b) {
    if (!b) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(b->data()), b->size());
}

// Writes a Graph table naming the field (enough for the replay, which checks its FlatBuffers and
// reads its collection and slot), and keeps what each open reports of the graph records.
class ChangeWatch final : public IndexHook {
  public:
    struct Seen {
        bool written_after = false;
        bool known = false;
        std::vector<std::pair<uint64_t, Body>> changes;
        std::vector<uint64_t> by_last;  // their ids in the order of their last writes
    };
    std::map<std::pair<uint32_t, uint16_t>, Seen> seen;
    uint64_t at_skew = 0;  // added to the seq a record claims to describe

    Status on_write(const WriteEvent&) override { return Status::ok(); }
    void on_undo(const WriteEvent&) override {}
    void on_schema(CollectionId, const Schema*, const DocSource*) override {}
    void on_open(OpenReport& r) override {
        seen.clear();
        for (const GraphRecord& g : r.graphs) {
            Seen& s = seen[{g.collection.v, g.slot}];
            s.written_after = g.written_after;
            s.known = g.changes_known;
            std::vector<std::pair<uint64_t, uint64_t>> last;
            for (const GraphChange& c : g.changes) {
                s.changes.emplace_back(c.id.v, body_of(c.at_graph));
                last.emplace_back(c.last, c.id.v);
            }
            std::sort(last.begin(), last.end());
            for (const auto& [order, id] : last) s.by_last.push_back(id);
        }
    }
    Result<std::vector<std::byte>> encode_graph(CollectionId c, uint16_t slot, Seq at,
                                                uint64_t durable_end) override {
        flatbuffers::FlatBufferBuilder fbb;
        fenec::format::GraphBuilder g(fbb);
        g.add_version(1);
        g.add_collection(c.v);
        g.add_slot(slot);
        g.add_at_seq(at.v + at_skew);
        g.add_durable_end(durable_end);
        fbb.Finish(g.Finish());
        const auto* p = reinterpret_cast<const std::byte*>(fbb.GetBufferPointer());
        return std::vector<std::byte>(p, p + fbb.GetSize());
    }
};

Doc row(const std::string& name, size_t bytes = 8) {
    return Doc{{0, Value(name)}, {1, Value(Bytes{std::string(bytes, 'x')})}};
}

struct GraphChanges : ::testing::Test {
    EngineEnv env;
    ChangeWatch hook;
    std::unique_ptr<Database> db;
    CollectionId a, b;

    OpenOptions options() {
        OpenOptions o = env.options();
        o.hook = &hook;
        return o;
    }
    void SetUp() override {
        auto made = Database::create(kPath, options());
        ASSERT_TRUE(made.is_ok()) << made.status().to_string();
        db = std::move(made).value();
        a = make("a");
        b = make("b");
    }
    CollectionId make(const std::string& name) {
        auto blk = db->begin();
        EXPECT_TRUE(blk.is_ok());
        auto c = blk->create_collection(name, schema_of("name:text, data:bytes"));
        EXPECT_TRUE(c.is_ok()) << c.status().to_string();
        EXPECT_TRUE(blk->commit().is_ok());
        return *c;
    }
    // One block of `write` (its writes land whole).
    template <class F>
    void land(F&& write) {
        auto blk = db->begin();
        ASSERT_TRUE(blk.is_ok()) << blk.status().to_string();
        write(*blk);
        ASSERT_TRUE(blk->commit().is_ok());
    }
    Body now(CollectionId c, uint64_t id) {
        const std::optional<DocView> d = db->read().get(c, DocId{id});
        return d ? body_of(d->body()) : std::nullopt;
    }
    void reopen(uint64_t slice = OpenOptions{}.open_slice_bytes) {
        ASSERT_TRUE(db->close().is_ok());
        db.reset();
        OpenOptions o = options();
        o.open_slice_bytes = slice;
        auto re = Database::open(kPath, o);
        ASSERT_TRUE(re.is_ok()) << re.status().to_string();
        db = std::move(re).value();
    }
};

TEST_F(GraphChanges, EachDocumentWrittenAfterTheRecordComesOnceWithItsBodyThen) {
    std::vector<uint64_t> ids;
    land([&](Block& blk) {
        for (int i = 0; i < 6; ++i)
            ids.push_back(blk.insert(a, std::nullopt, row("r" + std::to_string(i)))->v);
        ASSERT_TRUE(blk.insert(b, std::nullopt, row("other")).is_ok());
    });
    ASSERT_TRUE(db->append_graph(a, 1).is_ok());
    std::map<uint64_t, Body> want;  // id -> body at the graph
    for (uint64_t id : {ids[1], ids[2], ids[4], ids[5]}) want[id] = now(a, id);
    uint64_t added = 0, brief = 0;
    land([&](Block& blk) {
        ASSERT_TRUE(blk.set(a, DocId{ids[1]}, row("changed")).is_ok());
        ASSERT_TRUE(*blk.del(a, DocId{ids[2]}));
        added = blk.insert(a, std::nullopt, row("added"))->v;
        brief = blk.insert(a, std::nullopt, row("brief"))->v;
        ASSERT_TRUE(blk.insert(b, std::nullopt, row("not a's")).is_ok());
    });
    land([&](Block& blk) {
        ASSERT_TRUE(blk.set(a, DocId{ids[1]}, row("changed again")).is_ok());  // still its first
        ASSERT_TRUE(*blk.del(a, DocId{brief}));
        ASSERT_TRUE(blk.set(a, DocId{ids[4]}, row("same name")).is_ok());
    });
    // A block past the spill threshold: its writes reach the file in spills before its landing.
    land([&](Block& blk) {
        ASSERT_TRUE(blk.set(a, DocId{ids[5]}, row("spilled")).is_ok());
        const size_t big = 1 << 20;
        for (uint64_t n = 0; n * big <= limits::spill_threshold_bytes; ++n) {
            ASSERT_TRUE(blk.insert(b, std::nullopt, row("big", big)).is_ok());
        }
    });
    want[added] = std::nullopt;
    want[brief] = std::nullopt;
    const std::vector<std::pair<uint64_t, Body>> expected(want.begin(), want.end());

    auto check = [&](const char* how) {
        SCOPED_TRACE(how);
        ASSERT_EQ(hook.seen.size(), 1u);
        const ChangeWatch::Seen& s = hook.seen.begin()->second;
        EXPECT_EQ(hook.seen.begin()->first, (std::pair<uint32_t, uint16_t>{a.v, 1}));
        EXPECT_TRUE(s.written_after);
        EXPECT_TRUE(s.known);
        ASSERT_EQ(s.changes.size(), expected.size());
        for (size_t i = 0; i < expected.size(); ++i) {
            EXPECT_EQ(s.changes[i].first, expected[i].first) << i;
            EXPECT_EQ(s.changes[i].second, expected[i].second) << "id " << expected[i].first;
        }
        // In the order their last writes came: ids[1] written in both of the first two blocks
        // after the record comes after `added`, written once in the first.
        EXPECT_EQ(s.by_last, (std::vector<uint64_t>{ids[2], added, ids[1], brief, ids[4], ids[5]}));
    };
    {  // the big block did reach the file in spills
        ASSERT_TRUE(db->sync().is_ok());
        auto survey = Database::survey(env.fs, kPath);
        ASSERT_TRUE(survey.is_ok());
        EXPECT_TRUE(
            std::any_of(survey->records.begin(), survey->records.end(), [](const RecordSpan& r) {
                return r.kind == static_cast<uint8_t>(engine::format::Kind::spill);
            }));
    }
    reopen();
    check("one read");
    reopen(7);
    check("slices of 7 bytes");

    // The file's bytes installed as an image elsewhere report the same set.
    ASSERT_TRUE(db->close().is_ok());
    db.reset();
    env.fs.set_contents("/d/u.fenec.incoming", env.fs.contents(kPath));
    ASSERT_TRUE(Database::install_image(env.fs, "/d/u.fenec.incoming", "/d/u.fenec",
                                        InstallMode::create_only)
                    .is_ok());
    auto moved = Database::open("/d/u.fenec", options());
    ASSERT_TRUE(moved.is_ok()) << moved.status().to_string();
    check("installed");

    // A new record of the field starts an empty set.
    db = std::move(moved).value();
    ASSERT_TRUE(db->append_graph(a, 1).is_ok());
    ASSERT_TRUE(db->close().is_ok());
    db.reset();
    auto again = Database::open("/d/u.fenec", options());
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    db = std::move(again).value();
    ASSERT_EQ(hook.seen.size(), 1u);
    EXPECT_FALSE(hook.seen.begin()->second.written_after);
    EXPECT_TRUE(hook.seen.begin()->second.changes.empty());
}

TEST_F(GraphChanges, AnAlterAfterTheRecordLeavesItsChangesUnknown) {
    uint64_t id = 0;
    land([&](Block& blk) { id = blk.insert(a, std::nullopt, row("r"))->v; });
    ASSERT_TRUE(db->append_graph(a, 1).is_ok());
    ASSERT_TRUE(db->append_graph(b, 1).is_ok());
    land([&](Block& blk) { ASSERT_TRUE(blk.set(a, DocId{id}, row("changed")).is_ok()); });
    land([&](Block& blk) {
        AlterSpec rename;
        rename.kind = AlterKind::rename_field;
        rename.field = "name";
        rename.new_name = "title";
        ASSERT_TRUE(blk.alter_collection(a, rename).is_ok());
        ASSERT_TRUE(blk.insert(b, std::nullopt, row("b's")).is_ok());
    });
    reopen();
    ASSERT_EQ(hook.seen.size(), 2u);
    const ChangeWatch::Seen& sa = hook.seen.at({a.v, 1});
    EXPECT_TRUE(sa.written_after);
    EXPECT_FALSE(sa.known);
    EXPECT_TRUE(sa.changes.empty());
    const ChangeWatch::Seen& sb = hook.seen.at({b.v, 1});  // b's own set is untouched by a's alter
    EXPECT_TRUE(sb.written_after);
    EXPECT_TRUE(sb.known);
    EXPECT_EQ(sb.changes.size(), 1u);
}

// A record whose at_seq is not the file's seq where it lies describes other documents than the
// ones before it: it is passed over, and the field's earlier record stays in force with every
// write since it (engine.md §6.3).
TEST_F(GraphChanges, ARecordNotAtTheSeqWhereItLiesIsPassedOver) {
    uint64_t first = 0, second = 0;
    land([&](Block& blk) { first = blk.insert(a, std::nullopt, row("first"))->v; });
    ASSERT_TRUE(db->append_graph(a, 1).is_ok());
    const Body first_then = now(a, first);
    land([&](Block& blk) { ASSERT_TRUE(blk.set(a, DocId{first}, row("changed")).is_ok()); });
    hook.at_skew = 1;  // the next record claims a seq one past where it is written
    ASSERT_TRUE(db->append_graph(a, 1).is_ok());
    land([&](Block& blk) { second = blk.insert(a, std::nullopt, row("second"))->v; });
    reopen();
    ASSERT_EQ(hook.seen.size(), 1u);
    const ChangeWatch::Seen& s = hook.seen.at({a.v, 1});
    EXPECT_TRUE(s.written_after);
    EXPECT_TRUE(s.known);
    // Both writes since the first record, the one before the passed-over record included.
    const std::vector<std::pair<uint64_t, Body>> expected{{first, first_then},
                                                          {second, std::nullopt}};
    EXPECT_EQ(s.changes, expected);

    // The only record of a field, if not where it claims, leaves the field no record at all.
    ASSERT_TRUE(db->append_graph(b, 1).is_ok());
    hook.at_skew = 0;
    reopen();
    EXPECT_EQ(hook.seen.count({b.v, 1}), 0u);
    EXPECT_EQ(hook.seen.count({a.v, 1}), 1u);
}

}  // namespace
}  // namespace fenec::test::graph_changes_test
