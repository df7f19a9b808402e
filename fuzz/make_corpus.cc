// fuzz/make_corpus.cc: fenec_make_corpus, the generator of fuzz/corpus/open_file/. It runs the
// engine on an in-memory file system (fuzz/mem_fs.h) with a fixed clock and random seed, so the
// same build writes the same bytes, and writes each resulting file into the directory it is
// given. Built only in the fuzz build (FENEC_FUZZ=ON):
//
//   make fuzz                                  # configures and builds build-fuzz/
//   build-fuzz/fuzz/fenec_make_corpus fuzz/corpus/open_file
//
// Seeds (each well under 64 KiB; a spilled block needs 16 MiB and is left out):
//   fresh.fenec        Database::create alone: header and one history record
//   types.fenec        several blocks holding every value type, explicit ids, a TTL field, an
//                      internal `_` collection, deletes, alters (add, drop, rename) and a drop
//   checkpointed.fenec the same, checkpointed (an image region), then more blocks and a fork
//   image.fenec        Database::image() of that database: an image region and nothing after it
//   torn.fenec         types.fenec plus the first half of one more block record (a torn tail)
//   zero_tail.fenec    types.fenec plus 4 KiB of zeros (a zero-filled tail)
//   room_hole.fenec    a file that keeps room (every_block, past file_room_after_bytes since its
//                      open, then compacted small), write_types' blocks, then six blocks of one
//                      round with a zeroed sector in the first, read as a crash leaves it (no
//                      seal): a hole the open cuts (records stamped with durable_end,
//                      file-format.md §6)
//   room_damage.fenec  the same with the six blocks each synced: the zeroed sector is damage
//   tail_page_hole.fenec write_types' blocks, each synced, then six blocks of one round, with
//                      the 4 KiB page that held the synced end zero from there to its end, as
//                      a power cut on ext4 can leave appends past the end: a hole the open cuts
// The regress_*.fenec files beside them are not generated: they are inputs that once broke an
// invariant (fuzz/README.md), kept so the bug stays fixed.
//
// `fenec_make_corpus --feed fuzz/corpus/feed` writes instead the seeds of fuzz/corpus/feed/:
// frames of node-http.md §10.2 as a primary sends them (server/node/replication.h's encoder),
// of a database created with lineage kFeedLineage (the one fuzz/feed_fuzz.cc's follower takes),
// read from its feed since seq 0:
//   types.feed      H, F, the B frames of write_types' blocks, K and E
//   continued.feed  the same blocks framed with a 200-byte bound: `C` pieces then a `B`
//   forked.feed     write_types, a fork, more blocks: the F the feed sends for the fork
//   gap.feed        types.feed with its first block left out (a gap, refused)
//   image.feed      a hello announcing an image, the image in `I` chunks, its end `i`, K and E
//   image_digest_wrong.feed  the same with an end naming another digest (not installed)
//   count_zero.feed the first block's frame with count 0 (refused as such: its last seq would
//                   fall before its first)
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "engine/clock.h"
#include "engine/database.h"
#include "engine/format.h"
#include "engine/limits.h"
#include "fuzz/mem_fs.h"
#include "server/node/replication.h"

namespace {

using namespace fenec::engine;
using fenec::fuzz::MemFs;

constexpr const char* kPath = "/t/t.fenec";

[[noreturn]] void die(const std::string& what, const Status& st) {
    std::fprintf(stderr, "fenec_make_corpus: %s: %s\n", what.c_str(), st.to_string().c_str());
    std::exit(1);
}

template <class T>
T must(Result<T> r, const std::string& what) {
    if (!r.is_ok()) die(what, r.status());
    return std::move(r).value();
}

void must(const Status& st, const std::string& what) {
    if (!st.is_ok()) die(what, st);
}

FieldDesc field(std::string name, TypeDesc type) {
    FieldDesc f;
    f.name = std::move(name);
    f.type = std::move(type);
    return f;
}

// One field of every type of engine.md §4, plus a list of lists and a json field.
Schema everything_schema() {
    Schema s;
    s.fields.push_back(field("flag", make_type(BaseType::Bool)));
    s.fields.push_back(field("n", make_type(BaseType::Int)));
    s.fields.push_back(field("x", make_type(BaseType::Float)));
    s.fields.push_back(field("name", make_type(BaseType::Text)));
    s.fields.back().index.kind = IndexKind::hash;
    s.fields.push_back(field("blob", make_type(BaseType::Bytes)));
    s.fields.push_back(field("at", make_type(BaseType::Timestamp)));
    s.fields.push_back(field("v", make_vector(3)));
    s.fields.push_back(field("h", make_vector(4, VectorElem::f16)));
    s.fields.push_back(field("tags", make_list(make_type(BaseType::Text))));
    s.fields.push_back(field("grid", make_list(make_list(make_type(BaseType::Int)))));
    s.fields.push_back(field("meta", make_type(BaseType::Json)));
    s.fields[0].required = true;
    return s;
}

Doc everything_doc(int i) {
    Object inner;
    inner.keys = {"z", "a"};
    inner.values = {Value(int64_t{i}), Value(List{{Value("deep"), Value(true), Value()}})};
    Object meta;
    meta.keys = {"k", "nested", "pi"};
    meta.values = {Value("v" + std::to_string(i)), Value(std::move(inner)), Value(3.25)};
    Doc d;
    d.emplace_back(0, Value(i % 2 == 0));
    d.emplace_back(1, Value(int64_t{-1000} * i + 7));
    d.emplace_back(2, Value(0.5 * i - 1.0));
    d.emplace_back(3, Value("name-" + std::to_string(i) + "-\xc3\xa9"));
    d.emplace_back(4, Value(Bytes{std::string("\x00\x01\xff", 3) + std::to_string(i)}));
    d.emplace_back(5, Value(Timestamp{1'700'000'000'000 + i}));
    d.emplace_back(6, Value(VectorF32{{1.0f * i, -2.5f, 0.0f}}));
    d.emplace_back(7, Value(VectorF16{{f32_to_f16(0.5f), f32_to_f16(-1.0f), 0x7c00, 0}}));
    d.emplace_back(8, Value(List{{Value("a"), Value("b" + std::to_string(i))}}));
    d.emplace_back(
        9, Value(List{{Value(List{{Value(int64_t{1}), Value(int64_t{i})}}), Value(List{})}}));
    if (i % 3 != 0) d.emplace_back(10, Value(std::move(meta)));
    return d;
}

// Several blocks over three collections: every value type, explicit and automatic ids, a TTL
// field (rows that are expired and rows that are not), an internal collection, deletes, updates,
// alters and a dropped collection.
void write_types(Database& db) {
    CollectionId all, people, gone;
    {
        Block b = must(db.begin(), "begin");
        all = must(b.create_collection("everything", everything_schema()), "create everything");
        for (int i = 1; i <= 4; ++i) must(b.insert(all, std::nullopt, everything_doc(i)), "insert");
        must(b.commit(), "commit 1");
    }
    {
        Block b = must(db.begin(), "begin");
        Schema s;
        s.fields.push_back(field("name", make_type(BaseType::Text)));
        s.fields.push_back(field("age", make_type(BaseType::Int)));
        s.fields.push_back(field("seen", make_type(BaseType::Timestamp)));
        s.fields.back().index.kind = IndexKind::ttl;
        s.fields.back().index.ttl_ms = 60'000;
        people = must(b.create_collection("people", s), "create people");
        const int64_t now = b.now_ms();
        for (int i = 0; i < 6; ++i) {
            Doc d{{0, Value("p" + std::to_string(i))}, {1, Value(int64_t{20 + i})}};
            if (i % 2) d.emplace_back(2, Value(Timestamp{now - 120'000}));  // expired
            must(b.put(people, std::nullopt, d), "put people");
        }
        must(b.insert(people, DocId{100}, Doc{{0, Value("explicit")}}), "insert 100");
        must(b.put(all, DocId{2}, everything_doc(20)), "update 2");
        must(b.commit(), "commit 2");
    }
    {
        Block b = must(db.begin(), "begin");
        must(b.del(people, DocId{3}), "del 3");
        must(b.del(all, DocId{4}), "del 4");
        must(b.set(people, DocId{1}, Doc{{0, Value("renamed")}, {1, Value(int64_t{99})}}), "set");
        gone = must(b.create_collection("scratch", Schema{{field("s", make_type(BaseType::Text))}}),
                    "create scratch");
        must(b.put(gone, std::nullopt, Doc{{0, Value("soon gone")}}), "put scratch");
        must(b.commit(), "commit 3");
    }
    {
        Block b = must(db.begin(), "begin");
        AlterSpec add;
        add.kind = AlterKind::add_field;
        add.field_desc = field("email", make_type(BaseType::Text));
        must(b.alter_collection(people, add), "alter add");
        AlterSpec rename;
        rename.kind = AlterKind::rename_field;
        rename.field = "age";
        rename.new_name = "years";
        must(b.alter_collection(people, rename), "alter rename");
        AlterSpec drop;
        drop.kind = AlterKind::drop_field;
        drop.field = "blob";
        must(b.alter_collection(all, drop), "alter drop");
        must(b.put(people, std::nullopt, Doc{{0, Value("late")}, {3, Value("a@b.c")}}), "put");
        must(b.drop_collection(gone), "drop scratch");
        must(b.commit(), "commit 4");
    }
    {
        Block b = must(db.begin(BlockOptions{.internal = true}), "begin internal");
        Schema s{{field("key", make_type(BaseType::Text))}};
        CollectionId internal = must(b.create_collection("_idempotency", s), "create internal");
        must(b.put(internal, std::nullopt, Doc{{0, Value("req-1")}}), "put internal");
        must(b.commit(), "commit 5");
    }
}

// One more block of a few rows, appended after whatever the database holds.
void write_more(Database& db, int from, bool defer_durable = false) {
    Block b = must(db.begin(BlockOptions{.defer_durable = defer_durable}), "begin");
    CollectionId all = must(b.find("everything"), "find");
    const Schema* schema = b.schema(all);
    for (int i = from; i < from + 3; ++i) {
        Doc d = everything_doc(i);
        std::erase_if(d, [&](const auto& v) { return schema->fields[v.first].dropped; });
        must(b.put(all, std::nullopt, d), "put");
    }
    must(b.commit(), "commit more");
}

// Takes the database past limits::file_room_after_bytes of appends since its open, in a
// collection dropped again, then compacts it: a small file whose next appends are made into room
// (MemFs keeps none, but the database stamps them as it would on disk).
void write_room(Database& db) {
    Schema s;
    s.fields.push_back(field("blob", make_type(BaseType::Bytes)));
    {
        Block b = must(db.begin(), "begin");
        CollectionId big = must(b.create_collection("big", s), "create big");
        for (uint64_t n = 0; n * 4096 < limits::file_room_after_bytes + 8192; ++n) {
            must(b.insert(big, std::nullopt, Doc{{0, Value(Bytes{std::string(4096, 'r')})}}),
                 "insert big");
        }
        must(b.commit(), "commit big");
    }
    {
        Block b = must(db.begin(), "begin");
        CollectionId big = must(b.find("big"), "find big");
        must(b.drop_collection(big), "drop big");
        must(b.commit(), "commit drop");
    }
    must(db.compact(), "compact");
}

struct Env {
    MemFs fs;
    FakeClock clock;
    SeededRandom random{20240601};
    OpenOptions options() {
        OpenOptions o;
        o.fs = &fs;
        o.clock = &clock;
        o.random = &random;
        o.tenant = "t";
        o.sync = SyncPolicy::every_block();
        return o;
    }
};

using FileBytes = std::vector<std::byte>;

void write_out(const std::string& dir, const std::string& name, const FileBytes& bytes) {
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    if (!out) {
        std::fprintf(stderr, "fenec_make_corpus: cannot write %s\n", path.c_str());
        std::exit(1);
    }
    std::printf("%s: %zu bytes\n", path.c_str(), bytes.size());
}

// Closes `db` and returns the file's bytes.
FileBytes close_and_read(Env& env, std::unique_ptr<Database> db) {
    must(db->close(), "close");
    db.reset();
    return env.fs.get(kPath);
}

// The file's bytes as a crash would leave them, everything written kept: without the seal a
// clean close appends (file-format.md §6), after which any fault before it is damage.
FileBytes crash_and_read(Env& env) { return env.fs.get(kPath); }

// The lineage of the feed seeds' primary; fuzz/feed_fuzz.cc creates its follower with it.
constexpr uint64_t kFeedLineage = 0x00f33d5eed000001;

void write_text(const std::string& dir, const std::string& name, const std::string& text) {
    const auto* b = reinterpret_cast<const std::byte*>(text.data());
    write_out(dir, name, FileBytes(b, b + text.size()));
}

// The frames of everything `db`'s feed holds after seq 0 on its first history, each `B` framed
// with `bound` (as Replication::run_stream frames them).
std::vector<std::string> feed_frames(Database& db, uint32_t bound) {
    const Position from{Seq{0}, HistoryId{kFeedLineage}};
    auto since = db.feed().since(from);
    if (!std::holds_alternative<FeedCursor>(since))
        die("feed", Status::error(Code::not_found, "no cursor"));
    FeedCursor cursor = std::get<FeedCursor>(std::move(since));
    std::vector<std::string> out;
    for (;;) {
        FeedNext n = cursor.next(std::chrono::milliseconds(0));
        if (n.kind != FeedNext::Kind::entry) break;
        const FeedEntry& e = n.entry;
        if (e.type == FeedEntry::Type::forks) {
            std::string json = "{\"forks\":[";
            for (size_t i = 0; i < e.forks.size(); ++i) {
                json += (i ? "," : "") + std::string("{\"history\":\"") +
                        format::hex16(e.forks[i].first.v) +
                        "\",\"at\":" + std::to_string(e.forks[i].second.v) + "}";
            }
            out.push_back(fenec::node::encode_frame('F', json + "]}"));
            continue;
        }
        std::string payload;
        auto put = [&](uint64_t v, int bytes) {
            for (int i = 0; i < bytes; ++i) payload.push_back(static_cast<char>(v >> (8 * i)));
        };
        put(e.first.v, 8);
        put(e.last.v - e.first.v + 1, 4);
        put(static_cast<uint64_t>(e.landed_ms), 8);
        payload.append(reinterpret_cast<const char*>(e.records->data()), e.records->size());
        for (std::string& f : fenec::node::encode_block_frames(payload, bound)) out.push_back(f);
    }
    return out;
}

std::string join(const std::vector<std::string>& frames, size_t skip = 0) {
    std::string out;
    for (size_t i = skip; i < frames.size(); ++i) out += frames[i];
    return out;
}

void write_feed_corpus(const std::string& dir) {
    using fenec::node::encode_frame;
    const std::string hello =
        encode_frame('H', "{\"node\":\"n1\",\"lineage\":\"" + format::hex16(kFeedLineage) +
                              "\",\"history\":\"" + format::hex16(kFeedLineage) +
                              "\",\"forks\":[{\"history\":\"" + format::hex16(kFeedLineage) +
                              "\",\"at\":0}],\"seq\":5,\"durable\":5,\"image\":false}");
    const std::string forks = encode_frame(
        'F', "{\"forks\":[{\"history\":\"" + format::hex16(kFeedLineage) + "\",\"at\":0}]}");
    const std::string keep = encode_frame('K', "{\"seq\":5,\"durable\":5}");
    const std::string end = encode_frame('E', "{\"reason\":\"closing\"}");
    Env env;
    OpenOptions o = env.options();
    o.lineage = LineageId{kFeedLineage};
    auto db = must(Database::create(kPath, o), "create");
    write_types(*db);
    const std::vector<std::string> blocks = feed_frames(*db, fenec::node::feed_frame_bytes_max);
    write_text(dir, "types.feed", hello + forks + join(blocks) + keep + end);
    write_text(dir, "continued.feed", hello + join(feed_frames(*db, 200)) + end);
    write_text(dir, "gap.feed", hello + join(blocks, 1));
    {
        // The first block's frame with count 0 in its head (bytes 13..16 of the frame).
        std::string f = blocks.front();
        std::string payload = f.substr(
            fenec::node::feed_frame_head_bytes,
            f.size() - fenec::node::feed_frame_head_bytes - fenec::node::feed_frame_tail_bytes);
        payload.replace(8, 4, std::string(4, '\0'));
        write_text(dir, "count_zero.feed", hello + encode_frame('B', payload));
    }
    {
        // What a follower that needs an image is sent: a hello saying so, the image in `I`
        // chunks within fuzz/feed_fuzz.cc's frame bound, its end (`i`: seq, bytes, digest), then
        // the feed on from it; and the same with a digest the image does not have.
        const Image image = must(db->image(), "image");
        const std::string bytes(reinterpret_cast<const char*>(image.bytes->data()),
                                image.bytes->size());
        const std::string seq = std::to_string(image.info.seq.v);
        const std::string image_hello =
            encode_frame('H', "{\"node\":\"n1\",\"lineage\":\"" + format::hex16(kFeedLineage) +
                                  "\",\"history\":\"" + format::hex16(kFeedLineage) +
                                  "\",\"seq\":" + seq + ",\"durable\":" + seq + ",\"image\":true}");
        std::string chunks;
        for (size_t at = 0; at < bytes.size(); at += 2048)
            chunks += encode_frame('I', bytes.substr(at, 2048));
        auto image_end = [&](uint64_t digest) {
            return encode_frame('i', "{\"seq\":" + seq + ",\"history\":\"" +
                                         format::hex16(kFeedLineage) +
                                         "\",\"bytes\":" + std::to_string(bytes.size()) +
                                         ",\"digest\":\"" + format::hex16(digest) + "\"}");
        };
        const uint64_t digest = fenec::replication::image_digest(bytes);
        write_text(dir, "image.feed", image_hello + chunks + image_end(digest) + keep + end);
        write_text(dir, "image_digest_wrong.feed",
                   image_hello + chunks + image_end(digest ^ 1) + keep + end);
    }
    must(db->fork_history(), "fork");
    write_more(*db, 60);
    write_text(dir, "forked.feed",
               hello + join(feed_frames(*db, fenec::node::feed_frame_bytes_max)));
    must(db->close(), "close");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "--feed") {
        write_feed_corpus(argv[2]);
        return 0;
    }
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <output dir> | --feed <output dir>\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    {
        Env env;
        auto db = must(Database::create(kPath, env.options()), "create");
        write_out(dir, "fresh.fenec", close_and_read(env, std::move(db)));
    }
    FileBytes types;
    {
        Env env;
        auto db = must(Database::create(kPath, env.options()), "create");
        write_types(*db);
        types = close_and_read(env, std::move(db));
        write_out(dir, "types.fenec", types);
    }
    {
        Env env;
        auto db = must(Database::create(kPath, env.options()), "create");
        write_types(*db);
        const uint64_t before = db->usage().file_bytes;
        write_more(*db, 50);
        const uint64_t after = db->usage().file_bytes;
        FileBytes torn = close_and_read(env, std::move(db));
        torn.resize(before + (after - before) / 2);
        write_out(dir, "torn.fenec", torn);
        FileBytes zeros = types;
        zeros.resize(types.size() + 4096);
        write_out(dir, "zero_tail.fenec", zeros);
    }
    for (const bool one_round : {true, false}) {
        Env env;
        auto db = must(Database::create(kPath, env.options()), "create");
        write_room(*db);
        write_types(*db);
        const uint64_t hole = db->usage().file_bytes;
        for (int i = 0; i < 6; ++i) write_more(*db, 100 + 3 * i, one_round);
        must(db->sync(), "sync");
        FileBytes bytes = crash_and_read(env);
        // Zeros from the first of the six to the end of the next whole sector after it.
        const uint64_t to = (hole + 511) / 512 * 512 + 512;
        std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(hole),
                  bytes.begin() + static_cast<std::ptrdiff_t>(to), std::byte{0});
        write_out(dir, one_round ? "room_hole.fenec" : "room_damage.fenec", bytes);
    }
    {
        Env env;
        auto db = must(Database::create(kPath, env.options()), "create");
        write_types(*db);
        const uint64_t hole = db->usage().file_bytes;
        for (int i = 0; i < 6; ++i) write_more(*db, 100 + 3 * i, true);
        must(db->sync(), "sync");
        FileBytes bytes = crash_and_read(env);
        const uint64_t to = (hole + 4095) / 4096 * 4096;
        if (to == hole || to >= bytes.size()) {
            std::fprintf(stderr, "fenec_make_corpus: the synced end %llu leaves no page to zero\n",
                         static_cast<unsigned long long>(hole));
            std::exit(1);
        }
        std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(hole),
                  bytes.begin() + static_cast<std::ptrdiff_t>(to), std::byte{0});
        write_out(dir, "tail_page_hole.fenec", bytes);
    }
    {
        Env env;
        auto db = must(Database::create(kPath, env.options()), "create");
        write_types(*db);
        must(db->checkpoint(), "checkpoint");
        write_more(*db, 30);
        must(db->fork_history(), "fork");
        write_more(*db, 40);
        Image image = must(db->image(), "image");
        write_out(dir, "image.fenec", *image.bytes);
        write_out(dir, "checkpointed.fenec", close_and_read(env, std::move(db)));
    }
    return 0;
}
