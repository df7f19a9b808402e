// server/replication/frames.h: the replication feed's wire format, one codec for every end that
// speaks it: a node's tenant feed (GET /_replication/tenants/<t>, node-http.md §10) and the
// router's directory feed (GET /_replication, router.md §10), served and followed alike.
//
// Frame layout (engine.md §11 frames the records inside `B`):
//   frame = kind u8 | length u32 LE | payload[length] | check u64 LE = XXH3-64(kind ‖ payload)
//   H hello (JSON), I image chunk (≤ 1 MiB), i image end (JSON), B block (first u64, count u32,
//   landed_ms i64, the block's records verbatim), F forks (JSON), K keep-alive (JSON), E end
//   (JSON), C continuation (a piece of the next `B` payload: a spilled block can pass the frame
//   bound, so its payload goes as `C` frames then a `B` frame with the last piece, each within
//   the bound). decode_frame, FrameJoiner, decode_block and decode_forks are a follower's
//   readers of these outside bytes (fuzz/feed_fuzz.cc feeds them); nothing here trusts a byte.
//
// The hello's and the end's JSON members are each end's own (a node names its tenant's lineage, a
// router its directory's term); the frames, the block and the forks are this file's alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/feed.h"
#include "engine/status.h"

namespace fenec::replication {

inline constexpr size_t feed_image_chunk_bytes_max = 1 << 20;  // `I` chunks
// A frame's payload: one `block` record tops at 33 MiB; a spilled block's records, which have
// no top, go in pieces (`C` frames) of at most this.
inline constexpr uint32_t feed_frame_bytes_max = 64u << 20;
// A block joined from `C` frames: past this the follower drops the connection rather than hold
// it (the engine's spills are bounded by the tenant's memory, far below).
inline constexpr uint64_t feed_block_bytes_max = 4ull << 30;
inline constexpr int64_t feed_keepalive_ms = 2000;  // `K` after 2 s idle
inline constexpr size_t feed_frame_head_bytes = 5;
inline constexpr size_t feed_frame_tail_bytes = 8;
// A `B` payload's head: first seq u64, count u32, landed_ms i64, all LE; the block's records
// follow it.
inline constexpr size_t feed_block_head_bytes = 20;

std::string encode_frame(char kind, std::string_view payload);
// A `B` payload as frames: `C` pieces then the `B` with the last piece, each at most `bound`.
std::vector<std::string> encode_block_frames(std::string_view payload, uint32_t bound);
// A block entry's `B` payload: its head, then its records verbatim.
std::string encode_block(const engine::FeedEntry& block);
// A forks entry's `F` payload: {"forks":[{"history":<16 hex>,"at":<seq>},…]}.
std::string encode_forks(const std::vector<std::pair<engine::HistoryId, engine::Seq>>& forks);
// An image's digest, as its end frame (`i`) names it: XXH3-64 of its bytes.
uint64_t image_digest(std::string_view image);
// The fork list alone, as the hello carries it: [{"history","at"},…].
std::string forks_json(const std::vector<std::pair<engine::HistoryId, engine::Seq>>& forks);

struct Frame {
    char kind = 0;
    std::string payload;
};
enum class FrameRead : uint8_t { frame, more, bad };
// Decodes one frame at the front of `buf`: `frame` (and `consumed`), `more` (incomplete), or
// `bad` (length over the bound, a check that fails; `error` says which).
FrameRead decode_frame(std::string_view buf, Frame& out, size_t& consumed, std::string& error,
                       uint32_t bound = feed_frame_bytes_max);

// A `B` payload (joined from its `C` pieces) as the block entry it carries: seqs first to
// first + count - 1, the records after the head copied out. Refused (invalid_argument, the
// message saying why) when shorter than its head, of count 0 (a block holds at least one seq:
// `last` would fall before `first`) or ending past the last seq. The records are the engine's
// to check (Database::apply).
engine::Result<engine::FeedEntry> decode_block(std::string_view payload);
// An `F` payload {"forks":[{"history":<16 hex>,"at":<seq>},…]} as a forks entry; refused
// (invalid_argument) when it is not that shape. The list's rules (starts at 0, its bound) are
// the engine's (Database::apply).
engine::Result<engine::FeedEntry> decode_forks(std::string_view payload);

// The members of a hello (`H`), an image end (`i`) and a keep-alive (`K`) that a follower reads,
// every end's alike; each end checks what it needs of the rest. Refused (nullopt, `error` saying
// why) when the payload is not a JSON object with the required members of their types, or a
// hex member given is not 16 hex digits.
struct Hello {
    uint64_t seq = 0;
    bool image = false;                  // an image follows (`I` chunks, then `i`)
    std::optional<std::string> history;  // 16 hex, where the hello names it
};
std::optional<Hello> parse_hello(std::string_view payload, std::string& error);
struct ImageEnd {
    uint64_t seq = 0;
    std::optional<uint64_t> bytes;      // where the end names them
    std::optional<std::string> digest;  // 16 hex (image_digest), where named
};
std::optional<ImageEnd> parse_image_end(std::string_view payload, std::string& error);
// A keep-alive's `seq` (the primary's), or nullopt when it names none.
std::optional<uint64_t> parse_keepalive(std::string_view payload);

// Joins the `C` pieces of a block past the frame bound to the `B` frame that ends them.
// One a connection: a new connection starts with none held.
class FrameJoiner {
  public:
    enum class Step : uint8_t {
        whole,  // `f` is a frame to handle: a `B` with the held pieces put before its payload
        held,   // `f` was a `C` piece, kept: read the next frame
        bad,    // `error` says why: a piece past `block_bytes_max` held, or pieces ended by
                // a frame other than `B`; drop the connection
    };
    explicit FrameJoiner(uint64_t block_bytes_max = feed_block_bytes_max)
        : block_bytes_max_(block_bytes_max) {}
    Step take(Frame& f, std::string& error);
    size_t held_bytes() const { return continued_.size(); }

  private:
    uint64_t block_bytes_max_;
    std::string continued_;  // `C` pieces of the next `B` payload
};

}  // namespace fenec::replication
