// test/engine/apply_refusals_test.cc: proves that a follower's apply (engine.md §11) refuses
// what its own replay would refuse, so that no fed copy is left with a file that does not
// reopen (found by fuzz/feed_fuzz.cc): a fork list naming history 0 or going back in seq, and a
// PutDocs whose bodies run past its last document. Each refusal changes nothing, and the copy
// reopens to the state it had.
#include <gtest/gtest.h>

#include "engine/database.h"
#include "engine/format.h"
#include "engine/format_generated.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::apply_refusals_test {
namespace {

using namespace engine;
using namespace std::chrono_literals;
namespace fb = fenec::format;

std::unique_ptr<Database> must(Result<std::unique_ptr<Database>> r) {
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? std::move(*r) : nullptr;
}

struct Pair {
    EngineEnv env;
    std::unique_ptr<Database> primary;
    std::unique_ptr<Database> follower;
    Pair() {
        primary = must(Database::create("/d/p.fenec", env.options()));
        OpenOptions o = env.options();
        o.role = Role::follower;
        o.lineage = primary->lineage();
        follower = must(Database::create("/d/f.fenec", o));
    }
    // The primary's next feed entries after the follower's seq.
    std::vector<FeedEntry> entries() {
        auto s = primary->feed().since(Position{follower->seq(), primary->history().current()});
        std::vector<FeedEntry> out;
        auto* cursor = std::get_if<FeedCursor>(&s);
        EXPECT_TRUE(cursor);
        if (!cursor) return out;
        for (FeedNext n = cursor->next(0ms); n.kind == FeedNext::Kind::entry;
             n = cursor->next(0ms)) {
            if (n.entry.type == FeedEntry::Type::block) out.push_back(n.entry);
        }
        return out;
    }
    void reopen_follower() {
        const std::string before = dump(*follower);
        ASSERT_TRUE(follower->close().is_ok());
        OpenOptions o = env.options();
        o.role = Role::follower;
        follower = must(Database::open("/d/f.fenec", o));
        ASSERT_TRUE(follower);
        EXPECT_EQ(dump(*follower), before);
    }
};

TEST(ApplyRefusals, ForksReplayWouldRefuse) {
    Pair p;
    const uint64_t h0 = p.primary->history().current().v;
    for (const auto& forks : std::vector<std::vector<std::pair<HistoryId, Seq>>>{
             {{HistoryId{0}, Seq{0}}},
             {{HistoryId{h0}, Seq{0}}, {HistoryId{0}, Seq{0}}},
             {{HistoryId{h0}, Seq{0}}, {HistoryId{7}, Seq{5}}, {HistoryId{8}, Seq{3}}}}) {
        FeedEntry e;
        e.type = FeedEntry::Type::forks;
        e.forks = forks;
        const Status st = p.follower->apply(e);
        EXPECT_EQ(st.code(), Code::invalid_argument) << st.to_string();
        EXPECT_EQ(p.follower->history().forks.size(), 1u);
    }
    ASSERT_NO_FATAL_FAILURE(p.reopen_follower());
}

TEST(ApplyRefusals, PutDocsWithBytesPastItsLastDocument) {
    Pair p;
    CollectionId people;
    {
        auto b = p.primary->begin();
        ASSERT_TRUE(b.is_ok());
        auto c = b->create_collection("people", schema_of("name:text"));
        ASSERT_TRUE(c.is_ok());
        people = *c;
        ASSERT_TRUE(b->commit().is_ok());
    }
    {
        auto b = p.primary->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->insert(people, std::nullopt, Doc{{0, Value(std::string("ada"))}}).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    std::vector<FeedEntry> blocks = p.entries();
    ASSERT_EQ(blocks.size(), 2u);
    ASSERT_TRUE(p.follower->apply(blocks[0]).is_ok());
    // The put's block again, its bodies three bytes longer than its one document.
    const std::vector<std::byte>& rec = *blocks[1].records;
    const auto* block =
        flatbuffers::GetRoot<fb::Block>(rec.data() + engine::format::kRecordHeadBytes);
    ASSERT_EQ(block->ops()->size(), 1u);
    const auto* put = static_cast<const fb::PutDocs*>(block->ops()->Get(0));
    ASSERT_EQ(block->ops_type()->Get(0), fb::Op::PutDocs);
    ASSERT_TRUE(put);
    flatbuffers::FlatBufferBuilder b;
    std::vector<uint8_t> bodies(put->bodies()->begin(), put->bodies()->end());
    bodies.resize(bodies.size() + 3);
    auto op = fb::CreatePutDocs(
        b, put->collection(),
        b.CreateVector(std::vector<uint64_t>(put->ids()->begin(), put->ids()->end())),
        b.CreateVector(std::vector<uint32_t>(put->ends()->begin(), put->ends()->end())),
        b.CreateVector(bodies));
    std::vector<uint8_t> types{static_cast<uint8_t>(fb::Op::PutDocs)};
    std::vector<flatbuffers::Offset<void>> ops;
    ops.push_back(op.Union());
    b.Finish(
        fb::CreateBlock(b, block->first_seq(), block->count(), block->at_ms(), block->internal(),
                        b.CreateVector(reinterpret_cast<const fb::Op*>(types.data()), types.size()),
                        b.CreateVector(ops)));
    auto longer = std::make_shared<std::vector<std::byte>>();
    engine::format::append_record(
        *longer, engine::format::Kind::block,
        std::span(reinterpret_cast<const std::byte*>(b.GetBufferPointer()), b.GetSize()));
    FeedEntry e = blocks[1];
    e.records = longer;
    const Status st = p.follower->apply(e);
    EXPECT_EQ(st.code(), Code::invalid_argument) << st.to_string();
    EXPECT_NE(st.message().find("bodies longer than their documents"), std::string_view::npos);
    EXPECT_EQ(p.follower->seq().v, 1u);
    ASSERT_NO_FATAL_FAILURE(p.reopen_follower());
    // The block as the primary wrote it still lands.
    ASSERT_TRUE(p.follower->apply(blocks[1]).is_ok());
    EXPECT_EQ(p.follower->seq().v, 2u);
}

}  // namespace
}  // namespace fenec::test::apply_refusals_test
