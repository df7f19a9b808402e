// test/engine/file_room_test.cc: a database's file keeps room of zeros ahead of its appends once
// it has been written on (File::keep_room, limits::file_room_after_bytes), on the POSIX file
// system: the room is zeros past the records while the database is open; a copy of the file as
// a crash leaves it opens with every row, its zero tail cut (engine.md §6.2); a close leaves the
// file ending at its last record; a file written once keeps none. On FaultFs: a power cut
// across the room's pages, or one that leaves a file's last synced page as its sync left it
// (appends past the end), opens with every durable row, cut at the first hole, and a damaged
// durable record before later stamped ones is still refused (file-format.md §6).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/database.h"
#include "engine/format.h"
#include "engine/format_generated.h"
#include "engine/limits.h"
#include "test/support/engine_fixture.h"
#include "test/support/temp_dir.h"

namespace fenec::engine {
namespace {

using test::schema_of;
using test::TempDir;
using test::why;

constexpr char kPath[] = "/d/t.fenec";

OpenOptions posix_options(const FakeClock& clock) {
    OpenOptions o;  // fs = nullptr: the POSIX file system
    o.clock = &clock;
    o.tenant = "t";
    return o;
}

std::string on_disk(const std::string& path) {
    std::string out(std::filesystem::file_size(path), '\0');
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pread(fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    ::close(fd);
    return out;
}

void write_file(const std::string& path, const std::string& bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
}

// Lands `rows` rows of `text_bytes` each into `items`, one block a row; with `defer`, each
// commit returns before its fsync (BlockOptions::defer_durable), as the node's do.
void land(Database& db, int first, int rows, size_t text_bytes, bool defer = false) {
    for (int i = first; i < first + rows; ++i) {
        auto b = db.begin(BlockOptions{.defer_durable = defer});
        ASSERT_TRUE(b.is_ok()) << why(b);
        auto c = b->find("items");
        if (!c.is_ok()) c = b->create_collection("items", schema_of("n:int, s:text"));
        ASSERT_TRUE(c.is_ok()) << why(c);
        Doc d{{0, Value(int64_t{i})}, {1, Value(std::string(text_bytes, char('a' + i % 26)))}};
        ASSERT_TRUE(b->insert(*c, std::nullopt, d).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
}

uint64_t rows_of(const Database& db) {
    ReadView view = db.read();
    for (const CollectionInfo& c : view.collections()) {
        if (c.name == "items") return c.rows;
    }
    return 0;
}

CollectionId items_of(const Database& db) {
    ReadView view = db.read();
    for (const CollectionInfo& c : view.collections()) {
        if (c.name == "items") return c.id;
    }
    ADD_FAILURE() << "no collection items";
    return CollectionId{0};
}

// Writes a Graph table naming the field and carrying the stamp the engine hands it, as the index
// hook does (index/hnsw_index.cc): enough for the replay, which verifies it and reads its
// collection, slot, seq and stamp. Its bytes are derived data the open passes to no index. As
// a faulty hook would, it can write a stamp of 0 instead, no stamp, or bytes that are no Graph.
class GraphHook final : public IndexHook {
  public:
    enum class Writes { given_stamp, zero_stamp, no_stamp, no_graph };
    Writes writes = Writes::given_stamp;

    Status on_write(const WriteEvent&) override { return Status::ok(); }
    void on_undo(const WriteEvent&) override {}
    void on_schema(CollectionId, const Schema*, const DocSource*) override {}
    void on_open(OpenReport&) override {}
    Result<std::vector<std::byte>> encode_graph(CollectionId c, uint16_t slot, Seq at,
                                                uint64_t durable_end) override {
        if (writes == Writes::no_graph) return std::vector<std::byte>(3, std::byte{0x7f});
        flatbuffers::FlatBufferBuilder fbb;
        std::vector<uint64_t> node_docs(200, 1);  // a few sectors of body
        auto docs = fbb.CreateVector(node_docs);
        fenec::format::GraphBuilder g(fbb);
        g.add_version(format::kGraphVersion);
        g.add_collection(c.v);
        g.add_slot(slot);
        g.add_at_seq(at.v);
        g.add_node_docs(docs);
        if (writes == Writes::given_stamp) g.add_durable_end(durable_end);
        if (writes == Writes::zero_stamp) g.add_durable_end(0);
        fbb.Finish(g.Finish());
        const auto* p = reinterpret_cast<const std::byte*>(fbb.GetBufferPointer());
        return std::vector<std::byte>(p, p + fbb.GetSize());
    }
};

OpenOptions with_hook(test::EngineEnv& env, GraphHook& hook) {
    OpenOptions o = env.options();
    o.hook = &hook;
    return o;
}

// Zeroes the first whole 512-byte sector at or after `from`, which must end before `before`:
// damage that reads as a page a flush never wrote.
void zero_sector(std::vector<std::byte>& bytes, uint64_t from, uint64_t before) {
    const uint64_t sector = (from + 511) / 512 * 512;
    ASSERT_LE(sector + 512, before);
    std::fill_n(bytes.begin() + static_cast<ptrdiff_t>(sector), 512, std::byte{0});
}

// The records of `bytes` (a file without an image) with every durable_end set to the field's
// default, which reads as none, and their checks written again: the file as a build before the
// stamps wrote it, the field stored where such a build would have left it out.
std::vector<std::byte> without_stamps(const std::vector<std::byte>& bytes) {
    std::vector<std::byte> out(bytes.begin(), bytes.begin() + format::kHeaderBytes);
    uint64_t at = format::kHeaderBytes;
    while (at + format::kRecordHeadBytes <= bytes.size()) {
        const uint32_t length = format::load_u32(bytes.data() + at);
        const auto kind = static_cast<format::Kind>(std::to_integer<uint8_t>(bytes[at + 12]));
        const auto from = bytes.begin() + static_cast<ptrdiff_t>(at + format::kRecordHeadBytes);
        std::vector<std::byte> body(from, from + length);
        auto* table = flatbuffers::GetMutableRoot<flatbuffers::Table>(body.data());
        const auto unstamp = [&](flatbuffers::voffset_t field) {
            table->SetField<uint64_t>(field, format::kNoDurableStamp, format::kNoDurableStamp);
        };
        if (kind == format::Kind::block) unstamp(fenec::format::Block::VT_DURABLE_END);
        if (kind == format::Kind::spill) unstamp(fenec::format::Spill::VT_DURABLE_END);
        if (kind == format::Kind::landing) unstamp(fenec::format::Landing::VT_DURABLE_END);
        if (kind == format::Kind::history) unstamp(fenec::format::History::VT_DURABLE_END);
        if (kind == format::Kind::graph) unstamp(fenec::format::Graph::VT_DURABLE_END);
        format::append_record(out, kind, body);
        at += format::framed_size(length);
    }
    EXPECT_EQ(out.size(), bytes.size());
    return out;
}

// The open refused the file as damaged, naming the damaged record's offset.
void expect_refused_at(const Result<std::unique_ptr<Database>>& opened, uint64_t offset) {
    ASSERT_FALSE(opened.is_ok()) << "the damage was cut as a hole";
    EXPECT_EQ(opened.status().code(), Code::corruption) << why(opened);
    EXPECT_NE(why(opened).find("offset " + std::to_string(offset)), std::string::npos)
        << why(opened);
}

TEST(FileRoom, AFileWrittenOnKeepsRoomThatACrashLeavesAsAZeroTailAndACloseCuts) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    FakeClock clock;
    auto db = Database::create(path, posix_options(clock));
    ASSERT_TRUE(db.is_ok()) << why(db);
    // Past the threshold: rows of 4 KiB, one block each.
    const int rows = static_cast<int>(limits::file_room_after_bytes / 4096) + 8;
    land(**db, 0, rows, 4096);
    const uint64_t records = (*db)->usage().file_bytes;
    ASSERT_GE(records, limits::file_room_after_bytes);
    const std::string disk = on_disk(path);
    ASSERT_GT(disk.size(), records) << "a file written on keeps room";
    EXPECT_GE(disk.size() - records, limits::file_room_bytes / 2);
    EXPECT_LE(disk.size() - records, limits::file_room_bytes);
    EXPECT_EQ(disk.find_first_not_of('\0', records), std::string::npos) << "the room is zeros";

    // The file as a crash would leave it (room and all): every row, the zero tail cut on disk.
    const std::string crashed = dir.file("crashed.fenec");
    write_file(crashed, disk);
    {
        auto reopened = Database::open(crashed, posix_options(clock));
        ASSERT_TRUE(reopened.is_ok()) << why(reopened);
        EXPECT_EQ(rows_of(**reopened), static_cast<uint64_t>(rows));
        EXPECT_EQ((*reopened)->seq(), (*db)->seq());
        EXPECT_EQ((*reopened)->usage().file_bytes, records);
        EXPECT_EQ(std::filesystem::file_size(crashed), records) << "the zero tail cut";
        land(**reopened, rows, 1, 10);  // and written on after it
        EXPECT_EQ(rows_of(**reopened), static_cast<uint64_t>(rows) + 1);
        ASSERT_TRUE((*reopened)->close().is_ok());
    }

    // A close cuts the room: the file ends at its last record, and opens as it was.
    land(**db, rows, 3, 10);
    const uint64_t before_close = (*db)->usage().file_bytes;
    ASSERT_TRUE((*db)->close().is_ok());
    EXPECT_EQ(std::filesystem::file_size(path), before_close);
    auto again = Database::open(path, posix_options(clock));
    ASSERT_TRUE(again.is_ok()) << why(again);
    EXPECT_EQ(rows_of(**again), static_cast<uint64_t>(rows) + 3);
    EXPECT_EQ((*again)->usage().file_bytes, before_close);
    ASSERT_TRUE((*again)->close().is_ok());
}

// The bytes of `path` in `fs` hold a run of zeros from a page past `from` with bytes that are
// not zero after it: a hole before later records, which the old verdict (a torn tail is zeros
// to the end) refused as damage.
bool hole_before_data(const test::FaultFs& fs, const std::string& path, uint64_t from) {
    const std::vector<std::byte> bytes = fs.contents(path);
    constexpr uint64_t page = test::FaultFs::kCrashPageBytes;
    for (uint64_t at = (from + page - 1) / page * page; at + page <= bytes.size(); at += page) {
        bool zeros = true;
        for (uint64_t i = at; i < at + page && zeros; ++i) zeros = bytes[i] == std::byte{0};
        if (!zeros) continue;
        for (uint64_t i = at + page; i < bytes.size(); ++i) {
            if (bytes[i] != std::byte{0}) return true;
        }
        return false;
    }
    return false;
}

// Where the first page past `from` that the crash lost begins (its bytes from `from` on all
// zero); the file's size when none was.
uint64_t first_lost_page(const test::FaultFs& fs, const std::string& path, uint64_t from) {
    const std::vector<std::byte> bytes = fs.contents(path);
    constexpr uint64_t page = test::FaultFs::kCrashPageBytes;
    for (uint64_t at = from / page * page; at < bytes.size(); at += page) {
        const uint64_t start = std::max(at, from);
        const uint64_t end = std::min<uint64_t>(at + page, bytes.size());
        if (start < end && std::all_of(bytes.begin() + static_cast<ptrdiff_t>(start),
                                       bytes.begin() + static_cast<ptrdiff_t>(end),
                                       [](std::byte b) { return b == std::byte{0}; })) {
            return start;
        }
    }
    return bytes.size();
}

// A power cut in the middle of a flush of appends that went into room: the file's size was
// durable, and the pages written since the last sync reached the disk or not, each at random
// (FaultFs::CrashMode::scattered). Every crash reopens, with every row a finished sync covered,
// the file cut at its first hole; and the database is written on after it. The rows no sync
// covered are a run of deferred blocks and a run appended while a sync of the first waits, as
// a group commit's next round is, with a graph record among the second run (as a close or a
// sweep appends one). Without the records' durable stamps, or the sector of zeros the hole must
// hold, the seeds that leave a hole before later bytes are refused; so are they with the graph
// stamped by the appended end rather than the durable one. The same holds for a file that never
// kept room, whose appends grew it: on ext4 with `dioread_nolock` (its default since Linux 5.6)
// the blocks an append allocates are unwritten extents until their writes end, and the size
// that covers them can be committed first, so they too read zero after a power cut.
TEST(FileRoom, APowerCutAcrossRoomKeepsEveryDurableRowAndCutsAtTheFirstHole) {
    constexpr int kSeeds = 48;
    for (const bool room : {true, false}) {
        int holes = 0;
        for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
            SCOPED_TRACE("seed " + std::to_string(seed) + (room ? ", room" : ", no room"));
            test::EngineEnv env;
            GraphHook hook;
            const OpenOptions options = with_hook(env, hook);
            auto db = Database::create(kPath, options);
            ASSERT_TRUE(db.is_ok()) << why(db);
            const int before_room =
                room ? static_cast<int>(limits::file_room_after_bytes / 4096) + 4 : 4;
            land(**db, 0, before_room, 4096);
            land(**db, before_room, 20, 900);  // into room (or past the end), each row synced
            const uint64_t durable_rows = rows_of(**db);
            const uint64_t synced = env.fs.synced_size(kPath);
            // Then rows no finished sync covered: a run, a sync of it (stalled: the crash finds it
            // running), and a run appended while it runs.
            land(**db, before_room + 20, 15, 700, true);
            env.fs.stall_syncs(true);
            std::thread syncer([&] { (*db)->sync().ignore(); });
            ASSERT_TRUE(env.fs.wait_for_stalled_syncs(1, std::chrono::seconds(10)));
            land(**db, before_room + 35, 8, 700, true);
            ASSERT_TRUE((*db)->append_graph(items_of(**db), 1).is_ok());
            land(**db, before_room + 43, 7, 700, true);
            const uint64_t all_rows = rows_of(**db);
            env.fs.crash(test::FaultFs::CrashMode::scattered, seed);
            env.fs.release_syncs();
            syncer.join();
            if (hole_before_data(env.fs, kPath, synced)) ++holes;
            const uint64_t first_hole = first_lost_page(env.fs, kPath, synced);
            db->reset();

            // Odd seeds read the file in slices beside the replay, whose verdicts wait for the
            // bytes.
            OpenOptions o = options;
            if (seed % 2 == 1) o.open_slice_bytes = 64 << 10;
            auto reopened = Database::open(kPath, o);
            ASSERT_TRUE(reopened.is_ok()) << why(reopened);
            const uint64_t rows = rows_of(**reopened);
            EXPECT_GE(rows, durable_rows) << "a row a finished sync covered is lost";
            EXPECT_LE(rows, all_rows);
            EXPECT_EQ((*reopened)->usage().file_bytes, env.fs.contents(kPath).size())
                << "the file is cut at the last whole record";
            EXPECT_GE((*reopened)->usage().file_bytes, synced);
            EXPECT_LE((*reopened)->usage().file_bytes, first_hole)
                << "cut at or before the first hole";
            land(**reopened, 1000, 1, 10);
            EXPECT_EQ(rows_of(**reopened), rows + 1);
        }
        EXPECT_GT(holes, kSeeds / 4) << "too few seeds left a hole before later bytes to try";
    }
}

// Damage stays damage. A record that a sync covered, with records after it stamped once it was
// durable, fails its checksum for a flipped byte, or for a sector of it read as zeros (which
// is what a hole holds): the open refuses, naming its offset, and cuts nothing. So does a
// flipped byte in a record whose round of appends the records after it shared (their stamps
// say nothing): no sector of it reads zero, as a page a flush never wrote would. So in a file
// that keeps room and in one that never did.
TEST(FileRoom, ADamagedDurableRecordIsRefused) {
    enum class Damage { flipped_byte, zeroed_sector, flipped_byte_same_round };
    for (const bool room : {true, false}) {
        for (const Damage damage :
             {Damage::flipped_byte, Damage::zeroed_sector, Damage::flipped_byte_same_round}) {
            SCOPED_TRACE("damage " + std::to_string(static_cast<int>(damage)) +
                         (room ? ", room" : ", no room"));
            const bool same_round = damage == Damage::flipped_byte_same_round;
            test::EngineEnv env;
            auto db = Database::create(kPath, env.options());
            ASSERT_TRUE(db.is_ok()) << why(db);
            land(**db, 0, room ? static_cast<int>(limits::file_room_after_bytes / 4096) + 4 : 3,
                 4096);
            const uint64_t damaged_at = (*db)->usage().file_bytes;
            // The rows each synced on their own, or all in one round (one sync after them all).
            land(**db, 500, 1, 2000, same_round);
            land(**db, 501, 10, 900, same_round);
            ASSERT_TRUE((*db)->sync().is_ok());
            // As a crash leaves the file, every byte kept: no seal, which alone would refuse.
            env.fs.crash(test::FaultFs::CrashMode::all);
            db->reset();
            if (damage == Damage::zeroed_sector) {
                std::vector<std::byte> bytes = env.fs.contents(kPath);
                zero_sector(bytes, damaged_at, damaged_at + 2000);
                env.fs.set_contents(kPath, bytes);
            } else {
                env.fs.flip_byte(kPath, damaged_at + 40);
            }
            const std::vector<std::byte> before = env.fs.contents(kPath);

            expect_refused_at(Database::open(kPath, env.options()), damaged_at);
            EXPECT_TRUE(env.fs.contents(kPath) == before) << "the damaged file was left as it was";
        }
    }
}

// A graph record after a durable record says it was appended once that record was durable, as a
// block would: a tenant closed after its last write ends with its graphs, and a sector of zeros
// in that write, with only the graph after it, is refused, not cut with the graph. So when the
// graph was appended into room, when a reopen appended it past the end (the room not kept again
// yet), its stamp then the size the open synced, and when the hook wrote a stamp of its own (the
// engine's is set as the record lands).
TEST(FileRoom, ADamagedDurableRecordBeforeAGraphRecordIsRefused) {
    enum class Case { into_room, past_the_end, hook_stamps_zero };
    for (const Case kase : {Case::into_room, Case::past_the_end, Case::hook_stamps_zero}) {
        SCOPED_TRACE("case " + std::to_string(static_cast<int>(kase)));
        const bool reopened_first = kase == Case::past_the_end;
        test::EngineEnv env;
        GraphHook hook;
        if (kase == Case::hook_stamps_zero) hook.writes = GraphHook::Writes::zero_stamp;
        const OpenOptions options = with_hook(env, hook);
        auto db = Database::create(kPath, options);
        ASSERT_TRUE(db.is_ok()) << why(db);
        land(**db, 0, static_cast<int>(limits::file_room_after_bytes / 4096) + 4, 4096);
        const uint64_t damaged_at = (*db)->usage().file_bytes;
        land(**db, 500, 1, 2000);  // synced before its commit returns
        if (reopened_first) {
            ASSERT_TRUE((*db)->close().is_ok());
            db = Database::open(kPath, options);
            ASSERT_TRUE(db.is_ok()) << why(db);
        }
        ASSERT_TRUE((*db)->append_graph(items_of(**db), 1).is_ok());
        ASSERT_TRUE((*db)->close().is_ok());
        std::vector<std::byte> bytes = env.fs.contents(kPath);
        zero_sector(bytes, damaged_at, damaged_at + 2000);
        env.fs.set_contents(kPath, bytes);

        expect_refused_at(Database::open(kPath, options), damaged_at);
        EXPECT_TRUE(env.fs.contents(kPath) == bytes) << "the damaged file was left as it was";
    }
}

// A hook's graph record that is no Graph table, or has no stamp, is refused as it would land:
// nothing is appended, and the database takes writes and a good graph after it.
TEST(FileRoom, AGraphRecordWithoutItsStampIsNotAppended) {
    test::EngineEnv env;
    GraphHook hook;
    const OpenOptions options = with_hook(env, hook);
    auto db = Database::create(kPath, options);
    ASSERT_TRUE(db.is_ok()) << why(db);
    land(**db, 0, 4, 100);
    for (const auto writes : {GraphHook::Writes::no_stamp, GraphHook::Writes::no_graph}) {
        hook.writes = writes;
        const uint64_t end = (*db)->usage().file_bytes;
        const Status st = (*db)->append_graph(items_of(**db), 1);
        EXPECT_EQ(st.code(), Code::invalid_argument) << st.to_string();
        EXPECT_EQ((*db)->usage().file_bytes, end);
        EXPECT_EQ(env.fs.contents(kPath).size(), end);
    }
    hook.writes = GraphHook::Writes::given_stamp;
    land(**db, 10, 1, 100);
    const uint64_t end = (*db)->usage().file_bytes;
    ASSERT_TRUE((*db)->append_graph(items_of(**db), 1).is_ok());
    EXPECT_GT((*db)->usage().file_bytes, end);
    ASSERT_TRUE((*db)->close().is_ok());
    auto reopened = Database::open(kPath, options);
    ASSERT_TRUE(reopened.is_ok()) << why(reopened);
    EXPECT_EQ(rows_of(**reopened), 5u);
}

// A power cut in the middle of a flush of appends past the end of a file that never kept room,
// as ext4 in data=ordered mode can leave it (FaultFs::CrashMode::stale_tail_page): the size and
// the appends' new pages on disk, and the page the last sync left partly filled as that sync
// left it, zeros from the synced end to the page's end. The first record no sync covered reads
// zero from its start, with the rest of it, and any records after it, whole after the zeros.
// The open cuts at the synced end with every row a finished sync covered, and the database is
// written on after it: so when the unsynced appends are one record or several (a group
// commit's next round, and a graph record among them), under `every_block` and under
// `interval`, after a compaction, and as the first record after an image or a fresh file (whose
// History, stamped at its own offset, says the writer stamps its records: nothing else before
// the hole does). Without the stamps on appends past the end, each is refused as damage.
TEST(FileRoom, APowerCutBeforeTheSyncedTailPageLandsKeepsEveryDurableRow) {
    enum class Case {
        one_record,
        a_round_and_a_graph,
        interval,
        after_compaction,
        first_after_an_image,
        first_after_create,
    };
    for (const Case kase :
         {Case::one_record, Case::a_round_and_a_graph, Case::interval, Case::after_compaction,
          Case::first_after_an_image, Case::first_after_create}) {
        for (const bool in_slices : {false, true}) {
            SCOPED_TRACE("case " + std::to_string(static_cast<int>(kase)) +
                         (in_slices ? ", read in slices" : ""));
            test::EngineEnv env;
            GraphHook hook;
            OpenOptions options = with_hook(env, hook);
            if (kase == Case::interval) options.sync = SyncPolicy::interval(250);
            auto db = Database::create(kPath, options);
            ASSERT_TRUE(db.is_ok()) << why(db);
            if (kase != Case::first_after_create) land(**db, 0, 4, 1000);
            if (kase == Case::after_compaction || kase == Case::first_after_an_image) {
                ASSERT_TRUE((*db)->compact().is_ok());
            }
            if (kase == Case::after_compaction) land(**db, 10, 2, 700);
            ASSERT_TRUE((*db)->sync().is_ok());
            const uint64_t durable_rows = rows_of(**db);
            const uint64_t synced = env.fs.synced_size(kPath);
            ASSERT_EQ(synced, (*db)->usage().file_bytes);
            ASSERT_NE(synced % test::FaultFs::kCrashPageBytes, 0u) << "no partly filled page";
            std::thread syncer;
            if (kase != Case::a_round_and_a_graph && kase != Case::interval) {
                land(**db, 100, 1, 6000, true);  // from the partly filled page into new ones
            } else {
                // A round, a sync of it (stalled: the crash finds it running), and a round
                // appended while it runs.
                land(**db, 100, 3, 1500, true);
                env.fs.stall_syncs(true);
                syncer = std::thread([&] { (*db)->sync().ignore(); });
                ASSERT_TRUE(env.fs.wait_for_stalled_syncs(1, std::chrono::seconds(10)));
                land(**db, 103, 2, 1500, true);
                ASSERT_TRUE((*db)->append_graph(items_of(**db), 1).is_ok());
                land(**db, 105, 2, 1500, true);
            }
            ASSERT_EQ(env.fs.contents(kPath).size(), (*db)->usage().file_bytes) << "room kept";
            env.fs.crash(test::FaultFs::CrashMode::stale_tail_page);
            env.fs.release_syncs();
            if (syncer.joinable()) syncer.join();
            db->reset();
            ASSERT_GT(env.fs.contents(kPath).size(), synced + test::FaultFs::kCrashPageBytes);

            if (in_slices) options.open_slice_bytes = 4 << 10;
            auto reopened = Database::open(kPath, options);
            ASSERT_TRUE(reopened.is_ok()) << why(reopened);
            EXPECT_EQ(rows_of(**reopened), durable_rows);
            EXPECT_EQ((*reopened)->usage().file_bytes, synced) << "cut at the synced end";
            EXPECT_EQ(env.fs.contents(kPath).size(), synced);
            land(**reopened, 1000, 1, 10);
            EXPECT_EQ(rows_of(**reopened), durable_rows + 1);
        }
    }
}

// A file written before the stamps (each record's durable_end set back to the default, its
// checks written again) has no holes: a zeroed sector in a record, with only bytes that are no
// record after it, is refused, a graph before it notwithstanding. The same file with its
// stamps, as a crash left it (no seal), is cut there: the damage of a file's last records that
// the stamps give up.
TEST(FileRoom, AFileWrittenBeforeTheStampsHasNoHoles) {
    for (const bool stamped : {false, true}) {
        SCOPED_TRACE(stamped ? "stamped" : "unstamped");
        test::EngineEnv env;
        GraphHook hook;
        const OpenOptions options = with_hook(env, hook);
        auto db = Database::create(kPath, options);
        ASSERT_TRUE(db.is_ok()) << why(db);
        land(**db, 0, 4, 100);
        ASSERT_TRUE((*db)->append_graph(items_of(**db), 1).is_ok());
        const uint64_t damaged_at = (*db)->usage().file_bytes;
        land(**db, 10, 1, 2000);
        const uint64_t last_at = (*db)->usage().file_bytes;
        land(**db, 11, 1, 900);
        env.fs.crash(test::FaultFs::CrashMode::all);
        db->reset();
        std::vector<std::byte> bytes = env.fs.contents(kPath);
        ASSERT_EQ(std::to_integer<int>(bytes[last_at + 12]), static_cast<int>(format::Kind::block))
            << "the last record is the last block";
        if (!stamped) bytes = without_stamps(bytes);
        zero_sector(bytes, damaged_at, last_at);
        bytes[last_at + 13] ^= std::byte{0xff};  // the last record's head check fails
        env.fs.set_contents(kPath, bytes);

        auto opened = Database::open(kPath, options);
        if (stamped) {
            ASSERT_TRUE(opened.is_ok()) << why(opened);
            EXPECT_EQ((*opened)->usage().file_bytes, damaged_at);
            EXPECT_EQ(rows_of(**opened), 4u);
        } else {
            expect_refused_at(opened, damaged_at);
        }
    }
}

// A clean close seals the file: when a record was appended stamped below its own offset (rows no
// sync covered yet: a round under every_block, an interval's, or a session's under at_close),
// the close appends a History stamped with the whole file once its sync covered every row. So a
// sector of zeros in the first of those rows, the rows after it whole, is refused as damage,
// where the same file as a crash left it (no seal) is cut there. A writer whose every block was
// synced before the next was appended adds nothing at close.
TEST(FileRoom, ACleanCloseSealsTheFile) {
    enum class Case { every_block_round, interval, at_close, sequential };
    for (const Case kase :
         {Case::every_block_round, Case::interval, Case::at_close, Case::sequential}) {
        SCOPED_TRACE("case " + std::to_string(static_cast<int>(kase)));
        test::EngineEnv env;
        OpenOptions options = env.options();
        if (kase == Case::interval) options.sync = SyncPolicy::interval(250);
        if (kase == Case::at_close) options.sync = SyncPolicy::at_close();
        auto db = Database::create(kPath, options);
        ASSERT_TRUE(db.is_ok()) << why(db);
        land(**db, 0, 3, 500);
        ASSERT_TRUE((*db)->sync().is_ok());
        const uint64_t damaged_at = (*db)->usage().file_bytes;
        land(**db, 10, 5, 1500, kase != Case::sequential);
        const uint64_t rows_end = (*db)->usage().file_bytes;
        ASSERT_TRUE((*db)->close().is_ok());
        std::vector<std::byte> bytes = env.fs.contents(kPath);
        if (kase == Case::sequential) {
            EXPECT_EQ(bytes.size(), rows_end) << "a seal where no record needed one";
            continue;
        }
        ASSERT_GT(bytes.size(), rows_end) << "no seal";
        EXPECT_EQ(std::to_integer<int>(bytes[rows_end + 12]),
                  static_cast<int>(format::Kind::history));
        {
            auto reopened = Database::open(kPath, options);
            ASSERT_TRUE(reopened.is_ok()) << why(reopened);
            EXPECT_EQ(rows_of(**reopened), 8u);
            ASSERT_TRUE((*reopened)->close().is_ok());
            EXPECT_EQ(env.fs.contents(kPath).size(), bytes.size()) << "a sealed file sealed again";
        }
        zero_sector(bytes, damaged_at, damaged_at + 1500);
        env.fs.set_contents(kPath, bytes);
        expect_refused_at(Database::open(kPath, options), damaged_at);

        // Without the seal, as a crash before it would leave the file: a hole, cut.
        bytes.resize(rows_end);
        env.fs.set_contents(kPath, bytes);
        auto cut = Database::open(kPath, options);
        ASSERT_TRUE(cut.is_ok()) << why(cut);
        EXPECT_EQ((*cut)->usage().file_bytes, damaged_at);
        EXPECT_EQ(rows_of(**cut), 3u);
    }
}

// A graph record moves no seq, so one appended after the last sync is not covered by the close's
// sync: the seal syncs it first, so that its stamp covers the graph too, and a sector of zeros
// in the graph is refused, not cut with it.
TEST(FileRoom, TheSealCoversAGraphAppendedAfterTheLastSync) {
    test::EngineEnv env;
    GraphHook hook;
    const OpenOptions options = with_hook(env, hook);
    auto db = Database::create(kPath, options);
    ASSERT_TRUE(db.is_ok()) << why(db);
    land(**db, 0, 3, 500, true);  // deferred: the file needs a seal
    ASSERT_TRUE((*db)->sync().is_ok());
    const uint64_t graph_at = (*db)->usage().file_bytes;
    ASSERT_TRUE((*db)->append_graph(items_of(**db), 1).is_ok());
    const uint64_t graph_end = (*db)->usage().file_bytes;
    ASSERT_TRUE((*db)->close().is_ok());
    std::vector<std::byte> bytes = env.fs.contents(kPath);
    ASSERT_GT(bytes.size(), graph_end) << "no seal";
    zero_sector(bytes, graph_at + 16, graph_end);
    env.fs.set_contents(kPath, bytes);

    expect_refused_at(Database::open(kPath, options), graph_at);
}

// A graph record appended after a lone writer's last block (each synced: no seal) is synced by
// the close too: a closed file is durable to its end, as the node's next open takes it to be.
TEST(FileRoom, ACloseSyncsAGraphAppendedAfterTheLastSync) {
    test::EngineEnv env;
    GraphHook hook;
    const OpenOptions options = with_hook(env, hook);
    auto db = Database::create(kPath, options);
    ASSERT_TRUE(db.is_ok()) << why(db);
    land(**db, 0, 3, 500);
    const uint64_t rows_end = (*db)->usage().file_bytes;
    ASSERT_TRUE((*db)->append_graph(items_of(**db), 1).is_ok());
    const uint64_t graph_end = (*db)->usage().file_bytes;
    ASSERT_EQ(env.fs.synced_size(kPath), rows_end);
    ASSERT_TRUE((*db)->close().is_ok());
    EXPECT_EQ(env.fs.contents(kPath).size(), graph_end) << "a seal where none was needed";
    EXPECT_EQ(env.fs.synced_size(kPath), graph_end) << "the graph left unsynced";
}

// A file a crash left with its last records uncovered (stamped below their offsets) is sealed at
// the next clean close, though nothing is written in between: the open's replay says so. A sector
// of zeros in the first of those records is then refused.
TEST(FileRoom, AFileACrashLeftIsSealedAtItsNextCleanClose) {
    test::EngineEnv env;
    auto db = Database::create(kPath, env.options());
    ASSERT_TRUE(db.is_ok()) << why(db);
    land(**db, 0, 3, 500);
    const uint64_t damaged_at = (*db)->usage().file_bytes;
    land(**db, 10, 4, 1500, true);  // one round, then a sync of it
    ASSERT_TRUE((*db)->sync().is_ok());
    const uint64_t rows_end = (*db)->usage().file_bytes;
    env.fs.crash(test::FaultFs::CrashMode::all);
    db->reset();
    ASSERT_EQ(env.fs.contents(kPath).size(), rows_end) << "no seal before the crash";

    auto reopened = Database::open(kPath, env.options());
    ASSERT_TRUE(reopened.is_ok()) << why(reopened);
    EXPECT_EQ(rows_of(**reopened), 7u);
    ASSERT_TRUE((*reopened)->close().is_ok());
    std::vector<std::byte> bytes = env.fs.contents(kPath);
    ASSERT_GT(bytes.size(), rows_end) << "not sealed";
    zero_sector(bytes, damaged_at, damaged_at + 1500);
    env.fs.set_contents(kPath, bytes);
    expect_refused_at(Database::open(kPath, env.options()), damaged_at);
}

// The seal keeps no room: a close whose seal takes the file past file_room_after_bytes of
// appends since its open leaves it ending at the seal, with no zeros after it.
TEST(FileRoom, TheSealKeepsNoRoom) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    FakeClock clock;
    auto db = Database::create(path, posix_options(clock));
    ASSERT_TRUE(db.is_ok()) << why(db);
    const uint64_t opened_at = (*db)->usage().file_bytes;
    const auto appended = [&] { return (*db)->usage().file_bytes - opened_at; };
    // Deferred rows (the file needs a seal) up to a row short of the threshold.
    int n = 0;
    while (appended() + 2 * 4500 < limits::file_room_after_bytes) land(**db, n++, 1, 4000, true);
    const uint64_t before = appended();
    land(**db, n++, 1, 4000, true);
    const uint64_t overhead = appended() - before - 4000;  // a row's record beyond its text
    // One row that leaves the appends 40 bytes (give or take its padding) short of it.
    const uint64_t left = limits::file_room_after_bytes - appended();
    ASSERT_GT(left, overhead + 48);
    land(**db, n++, 1, left - overhead - 40, true);
    ASSERT_LT(appended(), limits::file_room_after_bytes);
    ASSERT_GT(appended() + 72, limits::file_room_after_bytes) << "the seal would not cross it";
    const uint64_t rows_end = (*db)->usage().file_bytes;
    ASSERT_EQ(std::filesystem::file_size(path), rows_end) << "room kept before the close";
    ASSERT_TRUE((*db)->close().is_ok());

    const uint64_t closed = std::filesystem::file_size(path);
    EXPECT_GT(closed, rows_end) << "not sealed";
    EXPECT_LT(closed, rows_end + 128) << "zeros after the seal";
    auto reopened = Database::open(path, posix_options(clock));
    ASSERT_TRUE(reopened.is_ok()) << why(reopened);
    EXPECT_EQ((*reopened)->usage().file_bytes, closed);
    EXPECT_EQ(rows_of(**reopened), static_cast<uint64_t>(n));
}

TEST(FileRoom, AFileWrittenOnceKeepsNone) {
    TempDir dir;
    const std::string path = dir.file("t.fenec");
    FakeClock clock;
    auto db = Database::create(path, posix_options(clock));
    ASSERT_TRUE(db.is_ok()) << why(db);
    land(**db, 0, 20, 100);
    EXPECT_EQ(std::filesystem::file_size(path), (*db)->usage().file_bytes);
    ASSERT_TRUE((*db)->close().is_ok());
}

}  // namespace
}  // namespace fenec::engine
