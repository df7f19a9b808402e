// fuzz/feed_fuzz.cc: fuzz_feed, bytes as the replication feed a follower reads from a primary
// (node-http.md §10.2): frames cut by decode_frame under a small bound, `C` pieces joined by a
// FrameJoiner, `B` and `F` payloads decoded by decode_block / decode_forks
// (server/node/replication.h, the follower's own readers), and each decoded entry applied to a
// follower database (engine Database::apply) opened on an in-memory file system (fuzz/mem_fs.h).
// Seeds: fuzz/corpus/feed/, frames a real primary sent, written by `fenec_make_corpus --feed`.
//
// Each input runs twice: as given, and "resealed" (each whole frame's check, and each whole
// record's head check and checksum inside a `B` payload, recomputed), so that a mutation passes
// the checks and reaches the decoders and apply. The resealed run is skipped when resealing
// changes nothing. A frame that fails (a bad frame, a bad join) ends the connection as it ends
// the follower's; a refused payload or apply is noted and the next frame read, as the follower
// would after reconnecting from its seq.
//
// `H`, `I`, `i` and `K` go through the readers every follower shares (parse_hello,
// parse_image_end, parse_keepalive): an image a hello announces is gathered from its chunks and,
// where its end says its bytes and digest, installed in the copy's place as the node's follower
// installs it (Database::install_open, replace); the frames after it apply to that copy.
//
// Invariants (a broken one traps, so libFuzzer keeps the input):
//   - decode_frame: a frame consumed lies within the input and is re-encoded to the same bytes;
//     `bad` says why;
//   - a refused decode or apply is a Status with a message; a refused apply changes nothing (the
//     copy's state, seq included, is as before);
//   - a block applied moves the copy's seq to the block's last seq;
//   - a forks entry applied is the copy's history when its last fork is within the copy's seq;
//   - a hello or image end read names 16-hex history and digest, or none; a refused one says why;
//   - an installed image is at the seq its end names; a refused install leaves the copy as it
//     was;
//   - whatever landed reopens to the same state (a follower reopened on its file).
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/clock.h"
#include "engine/database.h"
#include "engine/format.h"
#include "fuzz/mem_fs.h"
#include "fuzz/reseal.h"
#include "fuzz/state.h"
#include "server/node/replication.h"

namespace {

using namespace fenec::engine;
using fenec::fuzz::MemFs;
using fenec::fuzz::State;
using fenec::fuzz::state_of;
namespace node = fenec::node;

constexpr const char* kPath = "/t/t.fenec";
// As fuzz/make_corpus.cc's feed seeds: the follower is an empty copy of their primary's lineage.
constexpr uint64_t kFeedLineage = 0x00f33d5eed000001;
constexpr size_t kInputBytesMax = 256 << 10;
// Small bounds so that the search reaches the bounds' own paths: a frame past kFrameBound is
// bad, a block joined past kBlockBytesMax is bad.
constexpr uint32_t kFrameBound = 4096;
constexpr uint64_t kBlockBytesMax = 64 << 10;
constexpr size_t kFramesMax = 256;
// An image gathered from `I` chunks, and where it is put before its install (as the follower's
// `<t>.fenec.incoming`).
constexpr size_t kImageBytesMax = 128 << 10;
constexpr const char* kIncoming = "/t/t.fenec.incoming";

[[noreturn]] void broken(const char* what, const std::string& detail = "") {
    std::fprintf(stderr, "fuzz_feed: invariant broken: %s %s\n", what, detail.c_str());
    __builtin_trap();
}

struct Env {
    FakeClock clock;
    SeededRandom random{7};
    OpenOptions options(Fs& fs) {
        OpenOptions o;
        o.fs = &fs;
        o.clock = &clock;
        o.random = &random;
        o.tenant = "t";
        o.sync = SyncPolicy::every_block();
        o.role = Role::follower;
        o.lineage = LineageId{kFeedLineage};
        return o;
    }
};

// FENEC_FUZZ_VERBOSE=1 prints each frame's outcome (to read what a seed or a crash does).
bool verbose() {
    static const bool on = std::getenv("FENEC_FUZZ_VERBOSE") != nullptr;
    return on;
}

void check_refusal(const Status& st, const char* what) {
    if (st.is_ok() || st.message().empty()) broken("a refusal without a message", what);
}

void apply_entry(Database& db, const FeedEntry& e) {
    const State before = state_of(db);
    const Status st = db.apply(e);
    if (verbose()) {
        std::fprintf(stderr, "apply %s %llu..%llu: %s\n",
                     e.type == FeedEntry::Type::block ? "block" : "forks",
                     (unsigned long long)e.first.v, (unsigned long long)e.last.v,
                     st.to_string().c_str());
    }
    if (!st.is_ok()) {
        check_refusal(st, "apply");
        if (!(state_of(db) == before)) broken("a refused apply changed the copy", st.to_string());
        return;
    }
    if (e.type == FeedEntry::Type::block) {
        if (db.seq().v != e.last.v) broken("a block applied, but the seq is not its last");
        return;
    }
    if (!e.forks.empty() && e.forks.back().second.v <= db.seq().v) {
        const std::vector<Fork>& got = db.history().forks;
        bool same = got.size() == e.forks.size();
        for (size_t i = 0; same && i < got.size(); ++i) {
            same = got[i].history.v == e.forks[i].first.v && got[i].seq.v == e.forks[i].second.v;
        }
        if (!same) broken("a forks entry applied is not the copy's history");
    }
}

// A hello, an image chunk, an image end or a keep-alive, as the node's follower takes them
// (server/node/follower.cc): parsed by the readers every follower shares
// (server/replication/frames.h), an image gathered from the hello that announces it, and one whose
// end says its bytes and digest installed in the copy's place. False ends the connection, as the
// follower drops it.
bool take_control(const node::Frame& f, std::optional<std::string>& image,
                  std::unique_ptr<Database>& db, Env& env, MemFs& fs) {
    std::string error;
    switch (f.kind) {
        case 'K':
            (void)fenec::replication::parse_keepalive(f.payload);
            return true;
        case 'H': {
            const std::optional<fenec::replication::Hello> h =
                fenec::replication::parse_hello(f.payload, error);
            if (!h) {
                if (error.empty()) broken("a hello refused without a reason");
                return false;
            }
            if (!h->history) return false;  // the node's follower needs it (follows file)
            if (h->history && !format::parse_hex16(*h->history)) {
                broken("a hello read with a history that is not 16 hex");
            }
            image.reset();
            if (h->image) image.emplace();
            return true;
        }
        case 'I':
            if (!image || image->size() + f.payload.size() > kImageBytesMax) return false;
            image->append(f.payload);
            return true;
        default: {  // 'i'
            if (!image) return false;
            const std::optional<fenec::replication::ImageEnd> end =
                fenec::replication::parse_image_end(f.payload, error);
            if (!end) {
                if (error.empty()) broken("an image end refused without a reason");
                return false;
            }
            if (end->digest && !format::parse_hex16(*end->digest)) {
                broken("an image end read with a digest that is not 16 hex");
            }
            const std::string bytes = std::move(*image);
            image.reset();
            if (!end->bytes || !end->digest || *end->bytes != bytes.size() ||
                *end->digest != format::hex16(fenec::replication::image_digest(bytes))) {
                return false;  // not installed: the copy as it was
            }
            // Installed in the copy's place (replace), or refused with the copy unchanged.
            const State before = state_of(*db);
            if (Status st = db->close(); !st.is_ok()) broken("close failed", st.to_string());
            db.reset();
            ImageInfo info;
            // The node follower's own check: the image's seq is the one its end frame names.
            const uint64_t told = end->seq;
            auto check = [told](const ImageInfo& i) {
                return i.seq.v == told ? Status::ok()
                                       : Status::error(Code::corruption,
                                                       "the image's seq is not its end frame's");
            };
            Result<std::unique_ptr<Database>> installed = Database::install_open(
                std::as_bytes(std::span(bytes.data(), bytes.size())), kIncoming, kPath,
                InstallMode::replace, env.options(fs), check, info);
            if (verbose()) {
                std::fprintf(stderr, "install %zu bytes: %s\n", bytes.size(),
                             installed.status().to_string().c_str());
            }
            if (installed.is_ok()) {
                db = std::move(installed).value();
                if (db->seq().v != told) broken("an installed image is not at its end's seq");
                return true;
            }
            check_refusal(installed.status(), "install");
            Result<std::unique_ptr<Database>> back = Database::open(kPath, env.options(fs));
            if (!back.is_ok()) broken("a refused install lost the copy", back.status().to_string());
            db = std::move(back).value();
            if (!(state_of(*db) == before)) broken("a refused install changed the copy");
            return false;
        }
    }
}

void run(std::string_view input) {
    MemFs fs;
    Env env;
    State live;
    {
        Result<std::unique_ptr<Database>> made = Database::create(kPath, env.options(fs));
        if (!made.is_ok())
            broken("an empty follower copy is not created", made.status().to_string());
        std::unique_ptr<Database> db = std::move(made).value();
        std::optional<std::string> image;  // an image announced by a hello, as its chunks came
        node::FrameJoiner joiner(kBlockBytesMax);
        for (size_t frames = 0; frames < kFramesMax; ++frames) {
            node::Frame f;
            size_t used = 0;
            std::string error;
            const node::FrameRead r = node::decode_frame(input, f, used, error, kFrameBound);
            if (r == node::FrameRead::more) break;
            if (r == node::FrameRead::bad) {
                if (error.empty()) broken("a bad frame without a reason");
                break;
            }
            if (used > input.size() ||
                node::encode_frame(f.kind, f.payload) != input.substr(0, used)) {
                broken("a frame decoded is not the bytes it was read from");
            }
            input.remove_prefix(used);
            const node::FrameJoiner::Step step = joiner.take(f, error);
            if (step == node::FrameJoiner::Step::held) continue;
            if (step == node::FrameJoiner::Step::bad) {
                if (error.empty()) broken("a bad join without a reason");
                break;
            }
            if (f.kind == 'H' || f.kind == 'I' || f.kind == 'i' || f.kind == 'K') {
                if (!take_control(f, image, db, env, fs)) break;
                continue;
            }
            if (f.kind != 'B' && f.kind != 'F') continue;  // E, or a kind no follower takes
            Result<FeedEntry> e =
                f.kind == 'B' ? node::decode_block(f.payload) : node::decode_forks(f.payload);
            if (!e.is_ok()) {
                if (verbose()) std::fprintf(stderr, "decode: %s\n", e.status().to_string().c_str());
                check_refusal(e.status(), "decode");
                continue;
            }
            if (e->type == FeedEntry::Type::block && e->last.v < e->first.v) {
                broken("a block decoded whose last seq is before its first");
            }
            apply_entry(*db, *e);
        }
        live = state_of(*db);
        if (Status st = db->close(); !st.is_ok()) broken("close failed", st.to_string());
    }
    Result<std::unique_ptr<Database>> again = Database::open(kPath, env.options(fs));
    if (!again.is_ok())
        broken("a follower copy that was fed does not reopen", again.status().to_string());
    if (!(state_of(**again) == live)) broken("a reopen shows another state than what landed");
}

void reseal_records(std::string& payload) {
    fenec::fuzz::reseal_records(std::as_writable_bytes(std::span(payload)),
                                node::feed_block_head_bytes);
}

// The input with every whole frame's check recomputed, and inside a `B` frame not continued,
// every whole record's checks; a frame running past the end, or past the bound, ends it as is.
std::string reseal(std::string_view in) {
    std::string out;
    bool continued = false;
    while (in.size() >= node::feed_frame_head_bytes) {
        uint32_t length = 0;
        for (int i = 4; i >= 1; --i) length = length << 8 | static_cast<uint8_t>(in[i]);
        const size_t total =
            node::feed_frame_head_bytes + size_t{length} + node::feed_frame_tail_bytes;
        if (length > kFrameBound || in.size() < total) break;
        std::string payload(in.substr(node::feed_frame_head_bytes, length));
        if (in[0] == 'B' && !continued) reseal_records(payload);
        continued = in[0] == 'C';
        out += node::encode_frame(in[0], payload);
        in.remove_prefix(total);
    }
    out.append(in);
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > kInputBytesMax) return -1;
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    if (verbose()) std::fprintf(stderr, "input: %zu bytes\n", size);
    run(input);
    const std::string sealed = reseal(input);
    if (sealed != input) {
        if (verbose()) {
            size_t at = 0;
            while (at < sealed.size() && at < input.size() && sealed[at] == input[at]) ++at;
            std::fprintf(stderr, "resealed: differs from byte %zu\n", at);
        }
        run(sealed);
    }
    return 0;
}
