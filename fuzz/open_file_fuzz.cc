// fuzz/open_file_fuzz.cc: fuzz_open_file, arbitrary bytes opened as a tenant file
// (engine/replay.cc: header, record framing, checksums, FlatBuffers verification, the rules of
// engine.md §2.4 and the document body validator of engine/value.cc). Seeds:
// fuzz/corpus/open_file/, real files written by fuzz/make_corpus.cc.
//
// Each input is run twice: as given, and "resealed" (every checksum of the header and of each
// record that fits recomputed), so that a mutated body passes its checksum and reaches what
// lies behind it: the FlatBuffers verifier, the rules of replay and the body validator. The
// resealed run is skipped when resealing changes nothing (a real file). Each run puts the bytes
// as a file into fresh in-memory file systems (fuzz/mem_fs.h) and:
//   1. Database::verify_image checks it as an image, and install_open installs it whole and
//      fed in slices (engine::ImageInstall), which must agree;
//   2. Database::open read-only, then read-write (a second copy: a read-write open may cut a tear);
//      the read-only open also in slices read beside the replay (OpenOptions::open_slice_bytes),
//      which must agree with the one read;
//   3. on success, every document of every collection is decoded (fuzz/state.h).
// Beyond "never crash, never leak, never read out of bounds", whatever opens must obey the
// invariants of docs/INVARIANTS.md; a broken one traps, so libFuzzer keeps the input:
//   - read-only and read-write opens of one file hold the same state (I6: a tear is cut, the
//     state is the prefix before it either way);
//   - reopening after the read-write open gives the same state (I6: the tear was cut, not
//     skipped, and nothing new is cut);
//   - image() of the open database passes verify_image and opens to the same state (I10);
//   - a checkpoint keeps the state, live and reopened (I7, I8: lineage and forks included).
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/aligned_bytes.h"
#include "engine/clock.h"
#include "engine/database.h"
#include "engine/format.h"
#include "fuzz/mem_fs.h"
#include "fuzz/reseal.h"
#include "fuzz/state.h"

namespace {

using namespace fenec::engine;
using fenec::fuzz::MemFs;
using fenec::fuzz::State;
using fenec::fuzz::state_of;

constexpr const char* kPath = "/t/t.fenec";
constexpr const char* kImagePath = "/t/image.fenec";
// Inputs past this are skipped: replay's cost is linear, and bigger inputs only slow the search.
constexpr size_t kInputBytesMax = 1 << 20;

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz_open_file: invariant broken: %s\n", what);
    __builtin_trap();
}

// The clock and random source every database here runs on: fixed, so a crash reproduces.
struct Env {
    FakeClock clock;
    SeededRandom random{7};
    OpenOptions options(Fs& fs, bool read_only) {
        OpenOptions o;
        o.fs = &fs;
        o.clock = &clock;
        o.random = &random;
        o.tenant = "t";
        o.sync = SyncPolicy::at_close();
        o.role = Role::follower;  // a replica's file opens too, instead of being refused
        o.read_only = read_only;
        return o;
    }
};

// Takes an image of `db`, checks it and opens it; its state must equal `expect`.
void check_image(Database& db, const State& expect, Env& env) {
    Result<Image> image = db.image();
    if (!image.is_ok()) return;  // e.g. a latched database; refusing is allowed, lying is not
    MemFs fs;
    fs.put(kImagePath, *image->bytes);
    Result<ImageInfo> info = Database::verify_image(fs, kImagePath);
    if (!info.is_ok()) {
        std::fprintf(stderr, "%s\n", info.status().to_string().c_str());
        broken("image() of an open database fails verify_image");
    }
    if (info->seq != db.seq() || info->lineage != db.lineage()) {
        broken("the image's seq or lineage differs from its source's");
    }
    Result<std::unique_ptr<Database>> copy = Database::open(kImagePath, env.options(fs, true));
    if (!copy.is_ok()) broken("an image that verified does not open");
    if (!(state_of(**copy) == expect)) broken("an image opens to another state");
}

// Whether two refusals of one input are the same: code, message and offset. Prints both when not.
bool same_refusal(const Status& a, const Status& b) {
    if (a.code() == b.code() && a.message() == b.message() &&
        a.detail().offset == b.detail().offset) {
        return true;
    }
    std::fprintf(stderr, "one: %s\nother: %s\n", a.to_string().c_str(), b.to_string().c_str());
    return false;
}

// Installs `bytes` as an image twice: whole (install_open), and fed to an ImageInstall in
// slices as a PUT receives them, over a buffer whose part not yet received is garbage. The two
// must give the same verdict (the same error, or the same state): the incremental replay reads
// nothing that has not arrived and defers what depends on it (I10's install, engine/replay.cc).
void check_fed_install(std::span<const std::byte> bytes, Env& env) {
    constexpr const char* kIncoming = "/t/in.fenec.incoming";
    constexpr const char* kTarget = "/t/in.fenec";
    const size_t n = bytes.size();
    if (n == 0) return;
    MemFs whole_fs;
    ImageInfo whole_info;
    Result<std::unique_ptr<Database>> whole =
        Database::install_open(bytes, kIncoming, kTarget, InstallMode::create_only,
                               env.options(whole_fs, false), {}, whole_info);
    MemFs fed_fs;
    std::shared_ptr<std::byte[]> buf = aligned_bytes(n);
    std::memset(buf.get(), 0xA5, n);
    const std::span<const std::byte> image(buf.get(), n);
    auto begun = std::make_unique<ImageInstall>(image, kTarget, env.options(fed_fs, false),
                                                nullptr);
    const size_t slice = 1 + (n * 2654435761u) % 4096;  // one per input, 1 B to 4 KiB
    for (size_t at = 0; at < n;) {
        const size_t k = std::min(slice, n - at);
        std::memcpy(buf.get() + at, bytes.data() + at, k);
        at += k;
        (void)begun->feed(at);
    }
    ImageInfo fed_info;
    Result<std::unique_ptr<Database>> fed =
        Database::install_open(image, kIncoming, kTarget, InstallMode::create_only,
                               env.options(fed_fs, false), {}, fed_info, nullptr,
                               std::move(begun));
    if (whole.is_ok() != fed.is_ok()) broken("an image fed in slices gets another verdict");
    if (!whole.is_ok()) {
        if (!same_refusal(whole.status(), fed.status())) {
            broken("an image fed in slices is refused for another reason");
        }
        return;
    }
    if (!(state_of(**whole) == state_of(**fed))) broken("an image fed in slices opens otherwise");
}

// Opens `bytes` read-only twice: in one read, and read in slices on a thread of its own beside
// the replay, the slice one per input from 1 B to 4 KiB. The two must give the same verdict (the
// same error, or the same state and tear): the replay reads nothing not yet read and puts off
// what depends on it (I6, engine/open.cc).
void check_sliced_open(std::span<const std::byte> bytes, Env& env) {
    const size_t slice = 1 + (bytes.size() * 2654435761u) % 4096;
    auto open = [&](MemFs& fs, uint64_t slice_bytes) {
        fs.put(kPath, bytes);
        OpenOptions o = env.options(fs, true);
        o.open_slice_bytes = slice_bytes;
        return Database::open(kPath, o);
    };
    MemFs whole_fs, sliced_fs;
    Result<std::unique_ptr<Database>> whole = open(whole_fs, 0);
    Result<std::unique_ptr<Database>> sliced = open(sliced_fs, slice);
    if (whole.is_ok() != sliced.is_ok()) broken("an open in slices gets another verdict");
    if (!whole.is_ok()) {
        if (!same_refusal(whole.status(), sliced.status())) {
            broken("an open in slices is refused for another reason");
        }
        return;
    }
    if (!(state_of(**whole) == state_of(**sliced)) || (*whole)->torn_at() != (*sliced)->torn_at()) {
        broken("an open in slices opens otherwise");
    }
}

void run(std::span<const std::byte> bytes) {
    Env env;
    {
        MemFs fs;
        fs.put(kPath, bytes);
        Result<ImageInfo> info = Database::verify_image(fs, kPath);
        (void)info;
    }
    check_fed_install(bytes, env);
    check_sliced_open(bytes, env);
    std::optional<State> read_only_state;
    {
        MemFs fs;
        fs.put(kPath, bytes);
        Result<std::unique_ptr<Database>> db = Database::open(kPath, env.options(fs, true));
        if (db.is_ok()) {
            read_only_state = state_of(**db);
            if (fs.get(kPath).size() != bytes.size()) broken("a read-only open changed the file");
        }
    }
    MemFs fs;
    fs.put(kPath, bytes);
    State state;
    {
        Result<std::unique_ptr<Database>> db = Database::open(kPath, env.options(fs, false));
        if (!db.is_ok()) {
            if (read_only_state) broken("a file opens read-only but not read-write");
            return;
        }
        state = state_of(**db);
        if (!read_only_state || !(*read_only_state == state)) {
            broken("read-only and read-write opens differ");
        }
        check_image(**db, state, env);
        if ((*db)->checkpoint().is_ok() && !(state_of(**db) == state)) {
            broken("a checkpoint changed the live state");
        }
        if (!(*db)->close().is_ok()) broken("close failed on a healthy in-memory file");
    }
    Result<std::unique_ptr<Database>> again = Database::open(kPath, env.options(fs, false));
    if (!again.is_ok()) {
        std::fprintf(stderr, "%s\n", again.status().to_string().c_str());
        broken("a file that opened read-write does not reopen");
    }
    if (!(state_of(**again) == state)) broken("a reopen shows another state");
}

// The bytes with the header check and every whole record's head check and checksum recomputed
// (engine/format.h); a record running past the end is left as it is (a tear stays a tear).
std::vector<std::byte> reseal(std::span<const std::byte> in) {
    namespace f = fenec::engine::format;
    std::vector<std::byte> out(in.begin(), in.end());
    if (out.size() < f::kHeaderBytes) return out;
    std::byte* b = out.data();
    f::store_u64(b + f::kOffHeaderCheck, XXH3_64bits(b, f::kOffHeaderCheck));
    fenec::fuzz::reseal_records(out, f::kHeaderBytes);
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > kInputBytesMax) return -1;  // not added to the corpus
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
    run(bytes);
    const std::vector<std::byte> sealed = reseal(bytes);
    if (!std::equal(sealed.begin(), sealed.end(), bytes.begin())) run(sealed);
    return 0;
}
