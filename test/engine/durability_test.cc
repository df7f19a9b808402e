// test/engine/durability_test.cc: proves what survives a crash and what a damaged file does on
// open (engine.md §2, §5, §6, §16 tests 2, 4, 5, 7-10, 12, 13, 17-20, 30, 31, 33, 34):
// - a crash at every byte of a multi-block workload (crash(prefix, k) under at_close, and a power
//   cut after every n bytes under every_block) reopens to exactly the acknowledged prefix, the torn
//   tail is cut where the last whole block ended, and the next block lands there with seq
//   continuous;
// - zeroed and zero-padded tails are cut; a damaged mid-file record, a flipped header byte, a bad
//   length, an unknown record kind, an unknown value tag and a skipped first_seq are refused
//   (corruption, naming the offset) with the file left untouched;
// - a failed fsync or a torn append latches the database (io_error naming the first failure,
//   later blocks refused `latched`, no more syncs, reads go on) until a reopen; the torn append
//   is put back and cut;
// - concurrent every_block writers share fsyncs (group commit);
// - seq moves by the writes a block holds, empty and rolled-back blocks append nothing, a
//   savepoint keeps A and C in one record, and the change listener hears once per landed block.
#include <gtest/gtest.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine/database.h"
#include "engine/format.h"
#include "engine/format_generated.h"
#include "test/support/engine_fixture.h"

namespace fenec::test::durability_test {
namespace {

using namespace engine;
namespace fb = fenec::format;
namespace ef = fenec::engine::format;

constexpr char kPath[] = "/d/t.fenec";
constexpr int kBlocks = 6;

Schema row_schema() { return schema_of("name:text, n:int, data:bytes"); }

Doc row(const std::string& name, int64_t n, size_t bytes) {
    std::string data(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) data[i] = char('a' + (i * 7 + uint64_t(n)) % 26);
    return Doc{{0, Value(name)}, {1, Value(n)}, {2, Value(Bytes{std::move(data)})}};
}

Status expect_deleted(Result<bool> r) {
    if (!r.is_ok()) return r.status();
    if (!*r) return Status::error(Code::not_found, "del found no row");
    return Status::ok();
}

// The workload's blocks: creates, inserts, puts, sets and deletes of varying sizes. Block 2 is
// the shape of spec test 13 (creates b, puts 3 rows in a and 2 in b: all or none).
Status run_step(Block& b, int i) {
    switch (i) {
        case 0:
            return b.create_collection("a", row_schema()).status();
        case 1: {
            FENEC_ASSIGN_OR_RETURN(CollectionId a, b.find("a"));
            for (int j = 0; j < 3; ++j) {
                FENEC_RETURN_IF_ERROR(
                    b.insert(a, std::nullopt, row("r" + std::to_string(j), j, 5 + 60 * j))
                        .status());
            }
            return Status::ok();
        }
        case 2: {
            FENEC_ASSIGN_OR_RETURN(CollectionId c, b.create_collection("b", row_schema()));
            FENEC_ASSIGN_OR_RETURN(CollectionId a, b.find("a"));
            for (int j = 0; j < 3; ++j) {
                FENEC_RETURN_IF_ERROR(
                    b.put(a, std::nullopt, row("p" + std::to_string(j), 10 + j, 30)).status());
            }
            for (int j = 0; j < 2; ++j) {
                FENEC_RETURN_IF_ERROR(
                    b.put(c, std::nullopt, row("q" + std::to_string(j), 20 + j, 17)).status());
            }
            return Status::ok();
        }
        case 3: {
            FENEC_ASSIGN_OR_RETURN(CollectionId a, b.find("a"));
            FENEC_RETURN_IF_ERROR(b.set(a, DocId{1}, row("big", 99, 600)));
            return expect_deleted(b.del(a, DocId{2}));
        }
        case 4: {
            FENEC_ASSIGN_OR_RETURN(CollectionId c, b.find("b"));
            for (int j = 0; j < 12; ++j) {
                FENEC_RETURN_IF_ERROR(
                    b.insert(c, std::nullopt, row("s", j, (j * 29) % 120)).status());
            }
            return Status::ok();
        }
        case 5: {
            FENEC_ASSIGN_OR_RETURN(CollectionId a, b.find("a"));
            FENEC_ASSIGN_OR_RETURN(CollectionId c, b.find("b"));
            FENEC_RETURN_IF_ERROR(expect_deleted(b.del(a, DocId{3})));
            for (uint64_t id = 1; id <= 4; ++id)
                FENEC_RETURN_IF_ERROR(expect_deleted(b.del(c, DocId{id})));
            FENEC_RETURN_IF_ERROR(b.put(a, DocId{100}, row("far", 100, 250)).status());
            return b.set(c, DocId{10}, row("small", 1, 1));
        }
    }
    return Status::error(Code::invalid_argument, "no such step");
}

// What a run of the workload saw: index 0 is right after create, index i after block i.
struct Trace {
    std::vector<std::string> dumps;
    std::vector<uint64_t> ends;  // file size
    std::vector<uint64_t> seqs;
    int acked = 0;   // blocks whose commit returned ok
    Status failure;  // the first refused begin or commit, if any
};

uint64_t file_size(const EngineEnv& env) { return env.fs.contents(kPath).size(); }

// Creates the file and runs the blocks until one fails; `arm` runs right after create. The
// database is left open in `db` so the caller can crash it before it closes.
void run_workload(EngineEnv& env, SyncPolicy policy, bool record, Trace& t,
                  std::unique_ptr<Database>& db, const std::function<void()>& arm = {}) {
    auto created = Database::create(kPath, env.options(policy));
    ASSERT_TRUE(created.is_ok()) << created.status().to_string();
    db = std::move(*created);
    auto note = [&] {
        if (record) t.dumps.push_back(dump(*db));
        t.ends.push_back(file_size(env));
        t.seqs.push_back(db->seq().v);
    };
    note();
    if (arm) arm();
    for (int i = 0; i < kBlocks; ++i) {
        auto b = db->begin();
        if (!b.is_ok()) {
            t.failure = b.status();
            return;
        }
        Status st = run_step(*b, i);
        ASSERT_TRUE(st.is_ok()) << "step " << i << ": " << st.to_string();
        auto landed = b->commit();
        if (!landed.is_ok()) {
            t.failure = landed.status();
            return;
        }
        ++t.acked;
        note();
    }
}

// The reference run, no faults, with a dump after every commit.
Trace reference(SyncPolicy policy) {
    EngineEnv env;
    Trace t;
    std::unique_ptr<Database> db;
    run_workload(env, policy, true, t, db);
    return t;
}

// Lands one block (a new collection and a row) on a reopened file: it must start where the file
// ended (the tear was cut, not skipped), with seq continuous, and be there after another reopen.
void land_after_cut(EngineEnv& env, std::unique_ptr<Database> db, uint64_t end, uint64_t seq) {
    auto b = db->begin();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    auto c = b->create_collection("late", row_schema());
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    ASSERT_TRUE(b->insert(*c, std::nullopt, row("late", 7, 9)).is_ok());
    auto landed = b->commit();
    ASSERT_TRUE(landed.is_ok()) << landed.status().to_string();
    EXPECT_EQ(landed->first.v, seq + 1);
    EXPECT_EQ(landed->last.v, seq + 2);
    const std::vector<std::byte> bytes = env.fs.contents(kPath);
    ASSERT_EQ(bytes.size(), end + landed->bytes);
    EXPECT_EQ(std::to_integer<uint8_t>(bytes[end + 12]), uint8_t(ef::Kind::block));
    const auto* rec = flatbuffers::GetRoot<fb::Block>(bytes.data() + end + ef::kRecordHeadBytes);
    EXPECT_EQ(rec->first_seq(), seq + 1);
    const std::string before = dump(*db);
    ASSERT_TRUE(db->close().is_ok());
    db.reset();
    auto again = Database::open(kPath, env.options());
    ASSERT_TRUE(again.is_ok()) << again.status().to_string();
    EXPECT_EQ(dump(**again), before);
    EXPECT_EQ((*again)->seq().v, seq + 2);
}

// ---- 1. Crashes at every byte (tests 7, 9, 13)

TEST(DurabilityCrash, PrefixAtEveryByteReopensToTheAcknowledgedPrefix) {
    const Trace ref = reference(SyncPolicy::at_close());
    ASSERT_EQ(ref.acked, kBlocks);
    ASSERT_EQ(ref.dumps.size(), size_t(kBlocks + 1));
    const uint64_t synced = ref.ends[0];  // create and open synced; at_close syncs nothing more
    const uint64_t unsynced = ref.ends.back() - synced;
    ASSERT_GT(unsynced, 1000u);
    for (uint64_t k = 0; k <= unsynced; ++k) {
        SCOPED_TRACE("k = " + std::to_string(k));
        EngineEnv env;
        Trace t;
        std::unique_ptr<Database> db;
        run_workload(env, SyncPolicy::at_close(), false, t, db);
        ASSERT_FALSE(testing::Test::HasFatalFailure());
        ASSERT_EQ(t.ends, ref.ends);  // the workload is deterministic
        ASSERT_EQ(env.fs.synced_size(kPath), synced);
        env.fs.crash(FaultFs::CrashMode::prefix, k);
        db.reset();
        ASSERT_EQ(file_size(env), synced + k);
        // The last block whose record is wholly in the kept bytes.
        size_t expect = 0;
        while (expect + 1 < ref.ends.size() && ref.ends[expect + 1] <= synced + k) ++expect;
        auto re = Database::open(kPath, env.options(SyncPolicy::at_close()));
        ASSERT_TRUE(re.is_ok()) << re.status().to_string();
        ASSERT_EQ(dump(**re), ref.dumps[expect]);
        ASSERT_EQ(file_size(env), ref.ends[expect]);  // the torn tail is cut, nothing more
        ASSERT_EQ(env.fs.synced_size(kPath), ref.ends[expect]);
        // A block lands after the cut (sampled: each lands and reopens the file twice more).
        if (k % 7 == 0 || ref.ends[expect] == synced + k || ref.ends[expect] + 1 == synced + k) {
            land_after_cut(env, std::move(*re), ref.ends[expect], ref.seqs[expect]);
            ASSERT_FALSE(testing::Test::HasFatalFailure());
        }
    }
}

TEST(DurabilityCrash, PowerCutAfterEveryByteKeepsExactlyTheAcknowledgedBlocks) {
    const Trace ref = reference(SyncPolicy::every_block());
    ASSERT_EQ(ref.acked, kBlocks);
    const uint64_t total = ref.ends.back() - ref.ends[0];
    for (uint64_t n = 0; n <= total; ++n) {
        SCOPED_TRACE("n = " + std::to_string(n));
        EngineEnv env;
        Trace t;
        std::unique_ptr<Database> db;
        run_workload(env, SyncPolicy::every_block(), false, t, db,
                     [&] { env.fs.crash_after_bytes(n); });
        ASSERT_FALSE(testing::Test::HasFatalFailure());
        // Blocks whose record fits in the budget land (an append ending exactly at it succeeds).
        int fit = 0;
        while (fit < kBlocks && ref.ends[fit + 1] - ref.ends[0] <= n) ++fit;
        ASSERT_EQ(t.acked, fit);
        for (int i = 0; i <= t.acked; ++i) ASSERT_EQ(t.ends[i], ref.ends[i]);
        if (t.acked < kBlocks) {
            EXPECT_EQ(t.failure.code(), Code::io_error) << t.failure.to_string();
            // The database is latched: the next block is refused.
            auto b = db->begin();
            ASSERT_FALSE(b.is_ok());
            EXPECT_EQ(b.status().code(), Code::latched);
            // The torn bytes of the failed append are in the file until the reopen.
            EXPECT_EQ(file_size(env), ref.ends[0] + n);
        }
        // Every acknowledged block was fsynced before its commit returned.
        EXPECT_GE(env.fs.synced_size(kPath), ref.ends[t.acked]);
        const uint64_t before_crash = file_size(env);
        const FaultFs::CrashMode mode =
            n % 2 ? FaultFs::CrashMode::all : FaultFs::CrashMode::synced_only;
        env.fs.crash(mode, 0);
        db.reset();
        auto re = Database::open(kPath, env.options());
        ASSERT_TRUE(re.is_ok()) << re.status().to_string();
        const std::string got = dump(**re);
        // A commit that returned an error is not acknowledged: the state is the acknowledged
        // prefix, or that plus the block in flight if its record reached the file whole.
        const int a = t.acked;
        const bool in_flight_whole =
            a < kBlocks && mode == FaultFs::CrashMode::all && before_crash >= ref.ends[a + 1];
        if (in_flight_whole) {
            EXPECT_TRUE(got == ref.dumps[a] || got == ref.dumps[a + 1]);
        } else {
            ASSERT_EQ(got, ref.dumps[a]);
            ASSERT_EQ(file_size(env), ref.ends[a]);  // the torn record is cut
        }
        if (n % 7 == 0 || ref.ends[a] == ref.ends[0] + n || ref.ends[a] + 1 == ref.ends[0] + n) {
            land_after_cut(env, std::move(*re), file_size(env),
                           got == ref.dumps[a] ? ref.seqs[a] : ref.seqs[a + 1]);
            ASSERT_FALSE(testing::Test::HasFatalFailure());
        }
    }
}

TEST(DurabilityCrash, ZeroFilledTailInsideTheLastRecordIsCut) {
    // A crash that keeps the file's length but reads zeros for its last k unsynced bytes (a
    // zero-filled tail), for every k inside the last record: cut there, or kept whole when only
    // its zero padding was hit.
    const Trace ref = reference(SyncPolicy::at_close());
    ASSERT_EQ(ref.acked, kBlocks);
    const uint64_t p = ref.ends[kBlocks - 1];
    const uint64_t end = ref.ends[kBlocks];
    for (uint64_t k = 1; k <= end - p; ++k) {
        SCOPED_TRACE("k = " + std::to_string(k));
        EngineEnv env;
        Trace t;
        std::unique_ptr<Database> db;
        run_workload(env, SyncPolicy::at_close(), false, t, db);
        ASSERT_FALSE(testing::Test::HasFatalFailure());
        const std::vector<std::byte> bytes = env.fs.contents(kPath);
        env.fs.crash(FaultFs::CrashMode::zero_tail, k);
        db.reset();
        ASSERT_EQ(file_size(env), end);
        const bool only_padding = std::all_of(bytes.begin() + (end - k), bytes.end(),
                                              [](std::byte x) { return x == std::byte{0}; });
        auto re = Database::open(kPath, env.options());
        ASSERT_TRUE(re.is_ok()) << re.status().to_string();
        const int expect = only_padding ? kBlocks : kBlocks - 1;
        ASSERT_EQ(dump(**re), ref.dumps[expect]);
        ASSERT_EQ(file_size(env), ref.ends[expect]);
    }
}

TEST(DurabilityCrash, ZeroFilledTailAcrossSeveralRecordsIsCut) {
    // A zero-filled tail that begins inside an earlier record (several unsynced records lost to
    // one crash) is a tear too: every record before it survives, nothing after it existed.
    const Trace ref = reference(SyncPolicy::at_close());
    ASSERT_EQ(ref.acked, kBlocks);
    const uint64_t end = ref.ends[kBlocks];
    for (uint64_t k = end - ref.ends[1]; k >= 1; k = k > 3 ? k - 3 : k - 1) {
        SCOPED_TRACE("k = " + std::to_string(k));
        EngineEnv env;
        Trace t;
        std::unique_ptr<Database> db;
        run_workload(env, SyncPolicy::at_close(), false, t, db);
        ASSERT_FALSE(testing::Test::HasFatalFailure());
        const std::vector<std::byte> bytes = env.fs.contents(kPath);
        env.fs.crash(FaultFs::CrashMode::zero_tail, k);
        db.reset();
        const uint64_t z = end - k;  // the first zeroed byte
        int expect = 0;
        while (expect < kBlocks && ref.ends[expect + 1] <= z) ++expect;
        if (expect < kBlocks && std::all_of(bytes.begin() + z, bytes.begin() + ref.ends[expect + 1],
                                            [](std::byte x) { return x == std::byte{0}; })) {
            ++expect;  // only the record's zero padding was hit
        }
        auto re = Database::open(kPath, env.options());
        ASSERT_TRUE(re.is_ok()) << re.status().to_string();
        ASSERT_EQ(dump(**re), ref.dumps[expect]);
        ASSERT_EQ(file_size(env), ref.ends[expect]);
        if (k == 1) break;
    }
}

// ---- 2. Torn tails (test 8)

struct Closed {
    Trace trace;
    std::vector<std::byte> bytes;
};

// The workload under every_block, closed; the env keeps the file.
Closed closed_workload(EngineEnv& env) {
    Closed c;
    std::unique_ptr<Database> db;
    run_workload(env, SyncPolicy::every_block(), true, c.trace, db);
    EXPECT_EQ(c.trace.acked, kBlocks);
    if (db) {
        EXPECT_TRUE(db->close().is_ok());
    }
    db.reset();
    c.bytes = env.fs.contents(kPath);
    EXPECT_EQ(c.bytes.size(), c.trace.ends.back());
    return c;
}

TEST(DurabilityTornTail, ZeroedLastBodyIsCut) {
    EngineEnv env;
    const Closed c = closed_workload(env);
    const uint64_t p = c.trace.ends[kBlocks - 1];  // the last record
    const uint32_t length = ef::load_u32(c.bytes.data() + p);
    std::vector<std::byte> torn = c.bytes;
    std::fill(torn.begin() + p + ef::kRecordHeadBytes,
              torn.begin() + p + ef::kRecordHeadBytes + length, std::byte{0});
    env.fs.set_contents(kPath, torn);
    auto db = Database::open(kPath, env.options());
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    EXPECT_EQ(dump(**db), c.trace.dumps[kBlocks - 1]);
    EXPECT_EQ(file_size(env), p);
    land_after_cut(env, std::move(*db), p, c.trace.seqs[kBlocks - 1]);
}

TEST(DurabilityTornTail, ZeroedLastRecordHeadAndBodyIsCut) {
    EngineEnv env;
    const Closed c = closed_workload(env);
    const uint64_t p = c.trace.ends[kBlocks - 1];
    std::vector<std::byte> torn = c.bytes;
    std::fill(torn.begin() + p, torn.end(), std::byte{0});
    env.fs.set_contents(kPath, torn);
    auto db = Database::open(kPath, env.options());
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    EXPECT_EQ(dump(**db), c.trace.dumps[kBlocks - 1]);
    EXPECT_EQ(file_size(env), p);
}

TEST(DurabilityTornTail, FourKibOfZerosAfterTheLastRecordIsCut) {
    EngineEnv env;
    const Closed c = closed_workload(env);
    std::vector<std::byte> padded = c.bytes;
    padded.resize(padded.size() + 4096, std::byte{0});
    env.fs.set_contents(kPath, padded);
    {
        // A read-only open reads up to the tear and cuts nothing.
        OpenOptions ro = env.options();
        ro.read_only = true;
        auto db = Database::open(kPath, ro);
        ASSERT_TRUE(db.is_ok()) << db.status().to_string();
        EXPECT_EQ(dump(**db), c.trace.dumps[kBlocks]);
    }
    EXPECT_EQ(file_size(env), padded.size());
    auto db = Database::open(kPath, env.options());
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    EXPECT_EQ(dump(**db), c.trace.dumps[kBlocks]);
    EXPECT_EQ(env.fs.contents(kPath), c.bytes);
    land_after_cut(env, std::move(*db), c.bytes.size(), c.trace.seqs[kBlocks]);
}

// ---- 3. Corruption (tests 2, 4, 5, 10, 12)

// The offsets of every record of a file.
std::vector<uint64_t> record_offsets(const std::vector<std::byte>& bytes) {
    std::vector<uint64_t> out;
    uint64_t p = ef::kHeaderBytes;
    while (p + ef::kRecordHeadBytes <= bytes.size()) {
        out.push_back(p);
        p += ef::framed_size(ef::load_u32(bytes.data() + p));
    }
    EXPECT_EQ(p, bytes.size());
    return out;
}

// Opens `bytes` and expects a refusal (corruption at `offset`, message holding `words`) that
// leaves the file as it was.
void expect_refused(EngineEnv& env, const std::vector<std::byte>& bytes, uint64_t offset,
                    const std::string& words) {
    env.fs.set_contents(kPath, bytes);
    auto db = Database::open(kPath, env.options());
    ASSERT_FALSE(db.is_ok()) << "opened a damaged file";
    EXPECT_EQ(db.status().code(), Code::corruption) << db.status().to_string();
    EXPECT_EQ(db.status().detail().offset, offset) << db.status().to_string();
    EXPECT_NE(db.status().message().find(words), std::string_view::npos) << db.status().to_string();
    EXPECT_TRUE(env.fs.contents(kPath) == bytes) << "a refused open changed the file";
}

TEST(DurabilityCorruption, FlippedByteInAMidFileBodyIsRefusedAtItsRecord) {
    EngineEnv env;
    const Closed c = closed_workload(env);
    const std::vector<uint64_t> offsets = record_offsets(c.bytes);
    ASSERT_EQ(offsets.size(), size_t(kBlocks + 1));  // the history record, then the blocks
    for (size_t r = 0; r + 1 < offsets.size(); ++r) {
        SCOPED_TRACE("record at " + std::to_string(offsets[r]));
        const uint64_t p = offsets[r];
        const uint32_t length = ef::load_u32(c.bytes.data() + p);
        std::vector<std::byte> bad = c.bytes;
        bad[p + ef::kRecordHeadBytes + length / 2] ^= std::byte{0x01};
        expect_refused(env, bad, p, "checksum");
        ASSERT_FALSE(testing::Test::HasFatalFailure());
    }
}

TEST(DurabilityCorruption, FlippedBitInAMidFileLengthIsRefusedByHeadCheckNotCut) {
    EngineEnv env;
    const Closed c = closed_workload(env);
    const uint64_t p = c.trace.ends[2];  // block 3, followed by three more
    // Bit 0 (length off by one) and bit 16 (length 64 KiB longer: past the end of the file,
    // which without head_check would read as a torn tail and cut three acknowledged blocks).
    for (int bit : {0, 3, 16, 23, 30}) {
        SCOPED_TRACE("bit " + std::to_string(bit));
        std::vector<std::byte> bad = c.bytes;
        bad[p + bit / 8] ^= std::byte(uint8_t(1u << (bit % 8)));
        expect_refused(env, bad, p, "head check");
        ASSERT_FALSE(testing::Test::HasFatalFailure());
    }
    // The last record too: its body is there, so a bad head is damage, not a tear.
    const uint64_t last = c.trace.ends[kBlocks - 1];
    std::vector<std::byte> bad = c.bytes;
    bad[last + 2] ^= std::byte{0x01};
    expect_refused(env, bad, last, "head check");
}

TEST(DurabilityCorruption, AnyFlippedHeaderByteIsRefusedAtOffsetZero) {
    EngineEnv env;
    const Closed c = closed_workload(env);
    for (uint64_t i = 0; i < ef::kHeaderBytes; ++i) {
        SCOPED_TRACE("header byte " + std::to_string(i));
        std::vector<std::byte> bad = c.bytes;
        bad[i] ^= std::byte{0xFF};
        expect_refused(env, bad, 0, "");
        ASSERT_FALSE(testing::Test::HasFatalFailure());
        bad = c.bytes;
        bad[i] ^= std::byte{0x01};
        expect_refused(env, bad, 0, "");
        ASSERT_FALSE(testing::Test::HasFatalFailure());
    }
    // A file shorter than its header.
    expect_refused(env, std::vector<std::byte>(c.bytes.begin(), c.bytes.begin() + 63), 0, "header");
    // A newer version or a set flag, with a valid header_check, is refused naming it.
    auto resealed = [&](size_t field, uint64_t value, bool wide) {
        std::vector<std::byte> h = c.bytes;
        if (wide) {
            ef::store_u64(h.data() + field, value);
        } else {
            ef::store_u32(h.data() + field, uint32_t(value));
        }
        ef::store_u64(h.data() + ef::kOffHeaderCheck, XXH3_64bits(h.data(), ef::kOffHeaderCheck));
        return h;
    };
    expect_refused(env, resealed(ef::kOffVersion, 2, false), 0, "format version 2");
    expect_refused(env, resealed(ef::kOffFlags, 4, true), 0, "flag");
}

TEST(DurabilityCorruption, UnknownKindAsLastRecordIsRefusedNotCut) {
    EngineEnv env;
    const Closed c = closed_workload(env);
    std::vector<std::byte> bad = c.bytes;
    const uint64_t p = bad.size();
    const std::vector<std::byte> body(24, std::byte{0x5A});
    ef::append_record(bad, static_cast<ef::Kind>(200), body);
    expect_refused(env, bad, p, "unknown record kind 200 at offset " + std::to_string(p));
}

// A block record built by hand: one PutDocs of one document into `collection`.
std::vector<std::byte> hand_block(uint64_t first_seq, uint32_t collection, uint64_t id,
                                  const std::vector<uint8_t>& doc) {
    flatbuffers::FlatBufferBuilder b;
    auto ids = b.CreateVector(std::vector<uint64_t>{id});
    auto ends = b.CreateVector(std::vector<uint32_t>{uint32_t(doc.size())});
    auto bodies = b.CreateVector(doc);
    auto put = fb::CreatePutDocs(b, collection, ids, ends, bodies);
    auto types = b.CreateVector(std::vector<fb::Op>{fb::Op::PutDocs});
    auto values = b.CreateVector(std::vector<flatbuffers::Offset<void>>{put.Union()});
    b.Finish(fb::CreateBlock(b, first_seq, 1, 1'700'000'000'000, false, types, values));
    std::vector<std::byte> rec;
    ef::append_record(rec, ef::Kind::block,
                      {reinterpret_cast<const std::byte*>(b.GetBufferPointer()), b.GetSize()});
    return rec;
}

// A document of collection a (name:text, n:int): "hi", 42. With `bad_tag`, n holds tag 0x0C.
std::vector<uint8_t> hand_doc(bool bad_tag) {
    if (bad_tag) return {0x02, 0x05, 0x02, 'h', 'i', 0x0C};
    return {0x02, 0x05, 0x02, 'h', 'i', 0x03, 0x54};
}

TEST(DurabilityCorruption, HandBuiltBlockOpensWhenValid) {
    // The control for the two tests below: the hand-built record is otherwise valid.
    EngineEnv env;
    const Closed c = closed_workload(env);
    std::vector<std::byte> good = c.bytes;
    const std::vector<std::byte> rec = hand_block(c.trace.seqs.back() + 1, 1, 500, hand_doc(false));
    good.insert(good.end(), rec.begin(), rec.end());
    env.fs.set_contents(kPath, good);
    auto db = Database::open(kPath, env.options());
    ASSERT_TRUE(db.is_ok()) << db.status().to_string();
    EXPECT_EQ((*db)->seq().v, c.trace.seqs.back() + 1);
    auto doc = (*db)->read().get(CollectionId{1}, DocId{500});
    ASSERT_TRUE(doc.has_value());
    EXPECT_EQ(doc->get(0), Value("hi"));
    EXPECT_EQ(doc->get(1), Value(int64_t{42}));
    EXPECT_EQ(file_size(env), good.size());
}

TEST(DurabilityCorruption, UnknownValueTagIsRefusedNamingTagAndOffset) {
    EngineEnv env;
    const Closed c = closed_workload(env);
    const std::vector<uint8_t> doc = hand_doc(true);
    const std::vector<std::byte> rec = hand_block(c.trace.seqs.back() + 1, 1, 500, doc);
    std::vector<std::byte> bad = c.bytes;
    const uint64_t p = bad.size();
    bad.insert(bad.end(), rec.begin(), rec.end());
    // The file offset of the 0x0C byte.
    std::vector<std::byte> needle;
    for (uint8_t x : doc) needle.push_back(std::byte{x});
    auto at = std::search(bad.begin() + p, bad.end(), needle.begin(), needle.end());
    ASSERT_NE(at, bad.end());
    const uint64_t tag_at = uint64_t(at - bad.begin()) + doc.size() - 1;
    expect_refused(env, bad, tag_at, "unknown value tag 12 at offset " + std::to_string(tag_at));
    // Mid-file too: followed by a valid record, still refused, nothing cut.
    const std::vector<std::byte> next =
        hand_block(c.trace.seqs.back() + 2, 1, 501, hand_doc(false));
    bad.insert(bad.end(), next.begin(), next.end());
    expect_refused(env, bad, tag_at, "unknown value tag 12");
}

TEST(DurabilityCorruption, BlockWhoseFirstSeqSkipsOrRepeatsIsRefused) {
    EngineEnv env;
    const Closed c = closed_workload(env);
    const uint64_t seq = c.trace.seqs.back();
    for (uint64_t first : {seq + 2, seq, seq + 100}) {
        SCOPED_TRACE("first_seq " + std::to_string(first));
        std::vector<std::byte> bad = c.bytes;
        const uint64_t p = bad.size();
        const std::vector<std::byte> rec = hand_block(first, 1, 500, hand_doc(false));
        bad.insert(bad.end(), rec.begin(), rec.end());
        expect_refused(env, bad, p, "first_seq");
        ASSERT_FALSE(testing::Test::HasFatalFailure());
    }
}

// ---- 4. The latch (tests 33, 34)

// A database with collection a and one row; returns it open.
std::unique_ptr<Database> one_row(EngineEnv& env, SyncPolicy policy = SyncPolicy::every_block()) {
    auto db = Database::create(kPath, env.options(policy));
    EXPECT_TRUE(db.is_ok()) << db.status().to_string();
    if (!db.is_ok()) return nullptr;
    auto b = (*db)->begin();
    EXPECT_TRUE(b.is_ok());
    auto a = b->create_collection("a", row_schema());
    EXPECT_TRUE(a.is_ok());
    EXPECT_TRUE(b->insert(*a, std::nullopt, row("first", 1, 40)).is_ok());
    EXPECT_TRUE(b->commit().is_ok());
    return std::move(*db);
}

// `code`: io_error where the failure is this call's own or its durability's (a commit whose
// fsync failed, a sync), latched where the call is refused before it writes anything.
void expect_latched(const Status& st, int err_no, const char* what, Code code = Code::io_error) {
    EXPECT_EQ(st.code(), code) << what << ": " << st.to_string();
    EXPECT_EQ(st.detail().err_no, err_no) << what << ": " << st.to_string();
    EXPECT_NE(st.message().find("fault_fs"), std::string_view::npos)
        << what << ": " << st.to_string();
}

TEST(DurabilityLatch, FailedSyncLatchesUntilReopen) {
    EngineEnv env;
    std::unique_ptr<Database> db = one_row(env);
    ASSERT_TRUE(db);
    const uint64_t seq1 = db->seq().v;
    // ENOSPC, so the later refusals can be seen to carry this failure and not another.
    env.fs.fail_sync(1, ENOSPC);
    {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->insert(CollectionId{1}, std::nullopt, row("second", 2, 40)).is_ok());
        auto landed = b->commit();
        ASSERT_FALSE(landed.is_ok());
        expect_latched(landed.status(), ENOSPC, "commit");
        EXPECT_NE(landed.status().message().find("fdatasync"), std::string_view::npos);
    }
    const uint64_t syncs = env.fs.syncs();
    ASSERT_TRUE(db->failure().has_value());
    expect_latched(*db->failure(), ENOSPC, "failure()");
    // Later begin, sync, checkpoint and compaction carry the first failure.
    auto b = db->begin();
    ASSERT_FALSE(b.is_ok());
    expect_latched(b.status(), ENOSPC, "begin", Code::latched);
    expect_latched(db->sync(), ENOSPC, "sync");
    expect_latched(db->checkpoint(), ENOSPC, "checkpoint", Code::latched);
    expect_latched(db->compact(), ENOSPC, "compact", Code::latched);
    expect_latched(db->wait_durable(Seq{seq1 + 1}), ENOSPC, "wait_durable");
    EXPECT_EQ(db->durable_seq().v, seq1);
    // Reads go on: the landed block stays readable until the reopen.
    {
        ReadView view = db->read();
        EXPECT_EQ(view.count(CollectionId{1}), 2u);
        auto doc = view.get(CollectionId{1}, DocId{2});
        ASSERT_TRUE(doc.has_value());
        EXPECT_EQ(doc->get(0), Value("second"));
    }
    // A failed fsync is never retried, not even by close.
    EXPECT_EQ(env.fs.syncs(), syncs);
    Status closed = db->close();
    closed.ignore();
    db.reset();
    EXPECT_EQ(env.fs.syncs(), syncs);
    // The reopen replays what the file holds and clears the latch.
    auto re = Database::open(kPath, env.options());
    ASSERT_TRUE(re.is_ok()) << re.status().to_string();
    EXPECT_FALSE((*re)->failure().has_value());
    EXPECT_EQ((*re)->seq().v, seq1 + 1);
    auto b2 = (*re)->begin();
    ASSERT_TRUE(b2.is_ok()) << b2.status().to_string();
    ASSERT_TRUE(b2->insert(CollectionId{1}, std::nullopt, row("third", 3, 4)).is_ok());
    auto landed = b2->commit();
    ASSERT_TRUE(landed.is_ok()) << landed.status().to_string();
    EXPECT_TRUE(landed->durable);
    EXPECT_TRUE((*re)->sync().is_ok());
}

// A close whose checkpoint fails without latching (no room for the rewrite's side file) still
// syncs what landed: under a policy that syncs only at close (--sync off) that close is the
// writes' one sync. It was skipped with the seal, and a power cut before the next open took
// writes that had been answered.
TEST(DurabilityLatch, ACloseWhoseCheckpointFailsStillSyncsWhatLanded) {
    EngineEnv env;
    std::unique_ptr<Database> db = one_row(env, SyncPolicy::at_close());
    ASSERT_TRUE(db);
    {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->insert(CollectionId{1}, std::nullopt, row("second", 2, 40)).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    const std::string landed = dump(*db);
    env.fs.fail_append(1, ENOSPC);  // the checkpoint's first write, into its side file
    const Status closed = db->close(CloseMode::checkpoint);
    EXPECT_FALSE(closed.is_ok());
    EXPECT_FALSE(db->failure().has_value()) << "the checkpoint's failure does not latch";
    db.reset();
    env.fs.crash(FaultFs::CrashMode::synced_only);
    auto re = Database::open(kPath, env.options());
    ASSERT_TRUE(re.is_ok()) << re.status().to_string();
    EXPECT_EQ(dump(**re), landed);
}

TEST(DurabilityLatch, BlockWhoseSyncFailedSurvivesACrashOnlyIfItsRecordDid) {
    // The commit got io_error, so the block is not acknowledged; a crash may keep its record
    // whole (it was appended) or drop it: the reopen shows one of the two, never a mix.
    for (FaultFs::CrashMode mode : {FaultFs::CrashMode::synced_only, FaultFs::CrashMode::all}) {
        EngineEnv env;
        std::unique_ptr<Database> db = one_row(env);
        ASSERT_TRUE(db);
        const std::string acked = dump(*db);
        const uint64_t acked_end = file_size(env);
        env.fs.fail_sync(1);
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->insert(CollectionId{1}, std::nullopt, row("second", 2, 40)).is_ok());
        ASSERT_FALSE(b->commit().is_ok());
        const std::string in_flight = dump(*db);
        const uint64_t in_flight_end = file_size(env);
        env.fs.crash(mode);
        db.reset();
        auto re = Database::open(kPath, env.options());
        ASSERT_TRUE(re.is_ok()) << re.status().to_string();
        if (mode == FaultFs::CrashMode::synced_only) {
            EXPECT_EQ(dump(**re), acked);
            EXPECT_EQ(file_size(env), acked_end);
        } else {
            EXPECT_EQ(dump(**re), in_flight);
            EXPECT_EQ(file_size(env), in_flight_end);
        }
    }
}

TEST(DurabilityLatch, TornAppendIsPutBackLatchedAndCutOnReopen) {
    EngineEnv env;
    std::unique_ptr<Database> db = one_row(env);
    ASSERT_TRUE(db);
    const std::string before = dump(*db);
    const uint64_t size0 = file_size(env);
    const uint64_t seq0 = db->seq().v;
    const uint64_t appends0 = env.fs.appends();
    env.fs.fail_append(1, ENOSPC, 100);
    {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        for (int j = 0; j < 3; ++j) {
            auto id = b->insert(CollectionId{1}, std::nullopt, row("x", j, 100));
            ASSERT_TRUE(id.is_ok());
            EXPECT_EQ(id->v, uint64_t(2 + j));
        }
        auto landed = b->commit();
        ASSERT_FALSE(landed.is_ok());
        EXPECT_EQ(landed.status().code(), Code::io_error);
        EXPECT_EQ(landed.status().detail().err_no, ENOSPC);
    }
    EXPECT_EQ(env.fs.appends(), appends0 + 1);
    // Put back: seq, rows and next ids as before; 100 torn bytes in the file.
    EXPECT_EQ(db->seq().v, seq0);
    EXPECT_EQ(dump(*db), before);
    EXPECT_EQ(file_size(env), size0 + 100);
    // Latched.
    auto b = db->begin();
    ASSERT_FALSE(b.is_ok());
    EXPECT_EQ(b.status().code(), Code::latched);
    EXPECT_EQ(b.status().detail().err_no, ENOSPC);
    EXPECT_EQ(db->read().count(CollectionId{1}), 1u);
    db.reset();
    // The reopen cuts the 100 bytes and the ids are handed out again.
    auto re = Database::open(kPath, env.options());
    ASSERT_TRUE(re.is_ok()) << re.status().to_string();
    EXPECT_EQ(file_size(env), size0);
    EXPECT_EQ(dump(**re), before);
    auto b2 = (*re)->begin();
    ASSERT_TRUE(b2.is_ok());
    auto id = b2->insert(CollectionId{1}, std::nullopt, row("y", 9, 3));
    ASSERT_TRUE(id.is_ok());
    EXPECT_EQ(id->v, 2u);
    auto landed = b2->commit();
    ASSERT_TRUE(landed.is_ok()) << landed.status().to_string();
    EXPECT_EQ(landed->first.v, seq0 + 1);
    EXPECT_EQ(file_size(env), size0 + landed->bytes);
}

// ---- 5. Group commit (tests 30, 31)

TEST(DurabilityGroupCommit, SixteenWritersShareFsyncs) {
    EngineEnv env;
    std::unique_ptr<Database> db = one_row(env);
    ASSERT_TRUE(db);
    // Test 30: under every_block a returned commit is covered by a sync.
    EXPECT_EQ(env.fs.synced_size(kPath), file_size(env));
    constexpr int kThreads = 16;
    constexpr int kPerThread = 4;
    const uint64_t seq0 = db->seq().v;
    const uint64_t syncs0 = env.fs.syncs();
    env.fs.set_sync_delay(std::chrono::milliseconds(10));
    std::atomic<int> ok{0};
    std::atomic<int> covered{0};
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kPerThread; ++i) {
                auto b = db->begin();
                if (!b.is_ok()) {
                    errors[t] = b.status().to_string();
                    return;
                }
                auto id =
                    b->insert(CollectionId{1}, std::nullopt, row("t" + std::to_string(t), i, 16));
                if (!id.is_ok()) {
                    errors[t] = id.status().to_string();
                    return;
                }
                auto landed = b->commit();
                if (!landed.is_ok()) {
                    errors[t] = landed.status().to_string();
                    return;
                }
                if (landed->durable && db->durable_seq() >= landed->last) ++covered;
                ++ok;
            }
        });
    }
    for (auto& th : threads) th.join();
    env.fs.set_sync_delay(std::chrono::microseconds(0));
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
    const int blocks = kThreads * kPerThread;
    EXPECT_EQ(ok.load(), blocks);
    EXPECT_EQ(covered.load(), blocks);
    const uint64_t syncs = env.fs.syncs() - syncs0;
    EXPECT_LT(syncs, uint64_t(blocks)) << "no fsync was shared";
    EXPECT_GE(syncs, 1u);
    EXPECT_EQ(db->seq().v, seq0 + blocks);
    EXPECT_EQ(env.fs.synced_size(kPath), file_size(env));
    const std::string before = dump(*db);
    ASSERT_TRUE(db->close().is_ok());
    db.reset();
    auto re = Database::open(kPath, env.options());
    ASSERT_TRUE(re.is_ok()) << re.status().to_string();
    EXPECT_EQ(dump(**re), before);
    EXPECT_EQ((*re)->read().count(CollectionId{1}), uint64_t(1 + blocks));
}

// ---- 6. Blocks, rollbacks, savepoints and the listener (tests 17-20)

TEST(DurabilityBlocks, SeqMovesByTheWritesABlockHolds) {
    EngineEnv env;
    auto created = Database::create(kPath, env.options());
    ASSERT_TRUE(created.is_ok());
    std::unique_ptr<Database> db = std::move(*created);
    auto land = [&](const std::function<void(Block&)>& fill) -> Landed {
        auto b = db->begin();
        EXPECT_TRUE(b.is_ok());
        fill(*b);
        auto landed = b->commit();
        EXPECT_TRUE(landed.is_ok()) << landed.status().to_string();
        return landed.is_ok() ? *landed : Landed{};
    };
    CollectionId a;
    land([&](Block& b) {
        a = *b.create_collection("a", row_schema());
        for (int i = 0; i < 10; ++i) ASSERT_TRUE(b.insert(a, std::nullopt, row("r", i, 3)).is_ok());
    });
    ASSERT_EQ(db->seq().v, 11u);
    Landed l = land([&](Block& b) {
        for (uint64_t id = 1; id <= 3; ++id)
            ASSERT_TRUE(b.put(a, DocId{id}, row("p", 0, 1)).is_ok());
    });
    EXPECT_EQ(l.first.v, 12u);
    EXPECT_EQ(l.last.v, 14u);
    EXPECT_EQ(db->seq().v, 14u);
    l = land([&](Block& b) {
        for (uint64_t id = 1; id <= 10; ++id) ASSERT_TRUE(*b.del(a, DocId{id}));
    });
    EXPECT_EQ(l.first.v, 15u);
    EXPECT_EQ(l.last.v, 24u);
    l = land([&](Block& b) { ASSERT_TRUE(b.create_collection("c", row_schema()).is_ok()); });
    EXPECT_EQ(l.first.v, 25u);
    EXPECT_EQ(l.last.v, 25u);
    // fork_history appends a history record and moves no seq.
    const uint64_t size_before_fork = file_size(env);
    auto forked = db->fork_history();
    ASSERT_TRUE(forked.is_ok()) << forked.status().to_string();
    EXPECT_EQ(db->seq().v, 25u);
    EXPECT_EQ(forked->forks.size(), 2u);
    EXPECT_EQ(forked->forks.back().seq.v, 25u);
    EXPECT_GT(file_size(env), size_before_fork);
    // Empty blocks (no writes, or writes that write nothing) append nothing.
    const uint64_t size = file_size(env);
    const uint64_t appends = env.fs.appends();
    l = land([](Block&) {});
    EXPECT_EQ(l.first.v, 25u);
    EXPECT_EQ(l.last.v, 25u);
    l = land([&](Block& b) {
        EXPECT_FALSE(*b.del(a, DocId{77}));
        EXPECT_EQ(b.set(a, DocId{77}, row("x", 0, 0)).code(), Code::not_found);
        EXPECT_EQ(b.writes(), 0u);
    });
    EXPECT_EQ(db->seq().v, 25u);
    EXPECT_EQ(file_size(env), size);
    EXPECT_EQ(env.fs.appends(), appends);
    // The next block continues from 26, and a reopen agrees.
    l = land([&](Block& b) { ASSERT_TRUE(b.insert(a, std::nullopt, row("n", 0, 0)).is_ok()); });
    EXPECT_EQ(l.first.v, 26u);
    const std::string before = dump(*db);
    ASSERT_TRUE(db->close().is_ok());
    db.reset();
    auto re = Database::open(kPath, env.options());
    ASSERT_TRUE(re.is_ok()) << re.status().to_string();
    EXPECT_EQ(dump(**re), before);
    EXPECT_EQ((*re)->seq().v, 26u);
}

class RefusingHook final : public IndexHook {
  public:
    int refuse_at = -1;  // the on_write call (from 1) refused as a duplicate
    int writes = 0;
    int undos = 0;
    Status on_write(const WriteEvent& ev) override {
        if (++writes == refuse_at) {
            return Status::error(Code::duplicate, "taken", Detail{.id = ev.id.v});
        }
        return Status::ok();
    }
    void on_undo(const WriteEvent&) override { ++undos; }
    void on_schema(CollectionId, const Schema*, const DocSource*) override {}
    void on_open(OpenReport&) override {}
    Result<std::vector<std::byte>> encode_graph(CollectionId, uint16_t, Seq, uint64_t) override {
        return Status::error(Code::invalid_argument, "no graphs here");
    }
};

TEST(DurabilityBlocks, RollbackAppendsNothingAndIdsAreHandedOutAgain) {
    EngineEnv env;
    RefusingHook hook;
    OpenOptions opts = env.options();
    opts.hook = &hook;
    auto created = Database::create(kPath, opts);
    ASSERT_TRUE(created.is_ok());
    std::unique_ptr<Database> db = std::move(*created);
    {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        auto a = b->create_collection("a", row_schema());
        ASSERT_TRUE(a.is_ok());
        for (int i = 0; i < 10; ++i)
            ASSERT_TRUE(b->insert(*a, std::nullopt, row("r", i, 3)).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    const std::string before = dump(*db);
    const uint64_t size = file_size(env);
    const uint64_t appends = env.fs.appends();
    const uint64_t seq = db->seq().v;
    hook.writes = 0;
    hook.refuse_at = 50;
    {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        int refused = 0;
        for (int i = 0; i < 100; ++i) {
            auto id = b->put(CollectionId{1}, std::nullopt, row("p", i, 5));
            if (!id.is_ok()) {
                EXPECT_EQ(id.status().code(), Code::duplicate);
                EXPECT_EQ(i, 49);
                ++refused;
            } else if (i == 0) {
                EXPECT_EQ(id->v, 11u);
            }
        }
        EXPECT_EQ(refused, 1);
        EXPECT_EQ(b->writes(), 99u);
        b->rollback();
    }
    EXPECT_EQ(hook.undos, 99);  // every kept write taken back, the refused one was never kept
    EXPECT_EQ(env.fs.appends(), appends);
    EXPECT_EQ(file_size(env), size);
    EXPECT_EQ(db->seq().v, seq);
    EXPECT_EQ(dump(*db), before);
    hook.refuse_at = -1;
    auto b = db->begin();
    ASSERT_TRUE(b.is_ok());
    auto id = b->insert(CollectionId{1}, std::nullopt, row("next", 0, 0));
    ASSERT_TRUE(id.is_ok());
    EXPECT_EQ(id->v, 11u);  // the first rolled-back id
    auto landed = b->commit();
    ASSERT_TRUE(landed.is_ok());
    EXPECT_EQ(landed->first.v, seq + 1);
}

bool contains(const std::vector<std::byte>& hay, const std::string& needle) {
    auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                          [](std::byte x, char c) { return x == std::byte(uint8_t(c)); });
    return it != hay.end();
}

TEST(DurabilityBlocks, SavepointRollbackToKeepsAAndCInOneRecord) {
    EngineEnv env;
    std::unique_ptr<Database> db = one_row(env);
    ASSERT_TRUE(db);
    const uint64_t size = file_size(env);
    const uint64_t appends = env.fs.appends();
    const uint64_t seq = db->seq().v;
    DocId id_a, id_b, id_c;
    {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        id_a = *b->insert(CollectionId{1}, std::nullopt, row("AAAA-write", 1, 0));
        const Block::Mark mark = b->savepoint();
        id_b = *b->insert(CollectionId{1}, std::nullopt, row("BBBB-write", 2, 0));
        ASSERT_TRUE(b->del(CollectionId{1}, DocId{1}).is_ok());
        EXPECT_EQ(b->writes(), 3u);
        b->rollback_to(mark);
        EXPECT_EQ(b->writes(), 1u);
        EXPECT_FALSE(b->get(CollectionId{1}, id_b).has_value());
        EXPECT_TRUE(b->get(CollectionId{1}, DocId{1}).has_value());
        id_c = *b->insert(CollectionId{1}, std::nullopt, row("CCCC-write", 3, 0));
        auto landed = b->commit();
        ASSERT_TRUE(landed.is_ok()) << landed.status().to_string();
        EXPECT_EQ(landed->first.v, seq + 1);
        EXPECT_EQ(landed->last.v, seq + 2);
        EXPECT_EQ(file_size(env), size + landed->bytes);
    }
    EXPECT_EQ(id_c, id_b);  // the undo gave B's id back
    // One record, holding A and C.
    EXPECT_EQ(env.fs.appends(), appends + 1);
    const std::vector<std::byte> bytes = env.fs.contents(kPath);
    ASSERT_EQ(std::to_integer<uint8_t>(bytes[size + 12]), uint8_t(ef::Kind::block));
    const auto* rec = flatbuffers::GetRoot<fb::Block>(bytes.data() + size + ef::kRecordHeadBytes);
    EXPECT_EQ(rec->first_seq(), seq + 1);
    EXPECT_EQ(rec->count(), 2u);
    std::vector<uint64_t> ids;
    size_t deletes = 0;
    for (flatbuffers::uoffset_t i = 0; i < rec->ops()->size(); ++i) {
        if (rec->ops_type()->Get(i) == fb::Op::PutDocs) {
            const auto* put = static_cast<const fb::PutDocs*>(rec->ops()->Get(i));
            for (uint64_t id : *put->ids()) ids.push_back(id);
        }
        if (rec->ops_type()->Get(i) == fb::Op::DeleteDocs) ++deletes;
    }
    EXPECT_EQ(ids, (std::vector<uint64_t>{id_a.v, id_c.v}));
    EXPECT_EQ(deletes, 0u);
    EXPECT_TRUE(contains(bytes, "AAAA-write"));
    EXPECT_FALSE(contains(bytes, "BBBB-write"));
    EXPECT_TRUE(contains(bytes, "CCCC-write"));
    db.reset();
    auto re = Database::open(kPath, env.options());
    ASSERT_TRUE(re.is_ok()) << re.status().to_string();
    std::vector<std::string> names;
    (*re)->read().scan(CollectionId{1}, [&](DocId, DocView d) {
        names.push_back(std::get<std::string>(d.get(0).rep));
        return true;
    });
    EXPECT_EQ(names, (std::vector<std::string>{"first", "AAAA-write", "CCCC-write"}));
}

class RecordingListener final : public ChangeListener {
  public:
    std::vector<BlockSummary> blocks;
    void on_block(const BlockSummary& s) override { blocks.push_back(s); }
    void on_durable(Seq) override {}
};

TEST(DurabilityBlocks, ListenerHearsOncePerLandedBlockAndNeverForARefusedOne) {
    EngineEnv env;
    RecordingListener listener;
    OpenOptions opts = env.options();
    opts.listener = &listener;
    auto created = Database::create(kPath, opts);
    ASSERT_TRUE(created.is_ok());
    std::unique_ptr<Database> db = std::move(*created);
    {
        auto b = db->begin();
        ASSERT_TRUE(b->create_collection("a", row_schema()).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    ASSERT_EQ(listener.blocks.size(), 1u);
    EXPECT_TRUE(listener.blocks[0].changes.at(0).schema_changed);
    // A block of 500 writes: one call, its first and last seq.
    Landed landed;
    {
        auto b = db->begin();
        for (int i = 0; i < 500; ++i) {
            ASSERT_TRUE(b->insert(CollectionId{1}, std::nullopt, row("r", i, 2)).is_ok());
        }
        auto l = b->commit();
        ASSERT_TRUE(l.is_ok()) << l.status().to_string();
        landed = *l;
    }
    ASSERT_EQ(listener.blocks.size(), 2u);
    const BlockSummary& s = listener.blocks[1];
    EXPECT_EQ(s.first, landed.first);
    EXPECT_EQ(s.last, landed.last);
    EXPECT_EQ(s.last.v - s.first.v + 1, 500u);
    EXPECT_FALSE(s.internal);
    ASSERT_EQ(s.changes.size(), 1u);
    EXPECT_EQ(s.changes[0].collection, CollectionId{1});
    EXPECT_EQ(s.changes[0].put.size(), 500u);
    EXPECT_TRUE(s.changes[0].deleted.empty());
    EXPECT_FALSE(s.changes[0].schema_changed);
    // A refused block (rows quota), a rolled-back one and an empty one: no call, no append.
    const uint64_t appends = env.fs.appends();
    const uint64_t seq = db->seq().v;
    Limits limit;
    limit.rows = 500;
    db->set_limit(limit);
    {
        auto b = db->begin();
        ASSERT_TRUE(b.is_ok());
        ASSERT_TRUE(b->insert(CollectionId{1}, std::nullopt, row("over", 0, 0)).is_ok());
        auto l = b->commit();
        ASSERT_FALSE(l.is_ok());
        EXPECT_EQ(l.status().code(), Code::quota_exceeded);
    }
    db->set_limit(Limits{});
    {
        auto b = db->begin();
        ASSERT_TRUE(b->insert(CollectionId{1}, std::nullopt, row("undone", 0, 0)).is_ok());
        b->rollback();
    }
    {
        auto b = db->begin();
        ASSERT_TRUE(b->commit().is_ok());
    }
    EXPECT_EQ(listener.blocks.size(), 2u);
    EXPECT_EQ(env.fs.appends(), appends);
    EXPECT_EQ(db->seq().v, seq);
    // The next landed block is heard, in seq order.
    {
        auto b = db->begin();
        ASSERT_TRUE(b->del(CollectionId{1}, DocId{1}).is_ok());
        ASSERT_TRUE(b->commit().is_ok());
    }
    ASSERT_EQ(listener.blocks.size(), 3u);
    EXPECT_EQ(listener.blocks[2].first.v, seq + 1);
    EXPECT_EQ(listener.blocks[2].changes.at(0).deleted, std::vector<DocId>{DocId{1}});
}

}  // namespace
}  // namespace fenec::test::durability_test
