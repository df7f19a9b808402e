// engine/feed.h: the replication feed (engine.md §11). The last `feed_bytes` of landed blocks,
// each kept as the exact framed bytes of its records (a spilled block: its spills, then its
// landing), and the file's forks. An entry joins at landing and is readable once durable_seq
// covers it, so a follower never holds a write its primary could lose in a crash.
//
// Threading: every method is safe from any thread. The database pushes under its writer lock;
// readers (a stream per follower, on their own threads) wait on the feed's own condition, never
// on the database's locks. A FeedCursor shares the feed's state, so it outlives a closed
// database and then answers `closed`.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <variant>
#include <vector>

#include "engine/ids.h"

namespace fenec::engine {

struct Fork;

struct Position {
    Seq seq;
    HistoryId history;
};

struct FeedEntry {
    enum class Type : uint8_t { forks, block };
    Type type = Type::block;
    Seq first;            // block: its first and last seq
    Seq last;
    int64_t landed_ms = 0;
    std::vector<std::pair<HistoryId, Seq>> forks;  // forks: the primary's whole fork list
    std::shared_ptr<const std::vector<std::byte>> records;  // block: framed records, verbatim
};

struct NeedImage {
    enum class Why : uint8_t { forked, ahead, behind };
    Why why = Why::behind;
};
const char* need_image_name(NeedImage::Why why);

struct FeedState;

// What FeedCursor::next found.
struct FeedNext {
    enum class Kind : uint8_t {
        entry,   // `entry` holds the next entry
        idle,    // nothing new within the wait
        behind,  // the cursor fell out of the feed (overrun): the follower needs an image
        closed,  // the database closed (or was replaced): end the stream
    };
    Kind kind = Kind::idle;
    FeedEntry entry;
};

class FeedCursor {
public:
    // Waits up to `wait` for the next durable entry; forks come first where they changed.
    FeedNext next(std::chrono::milliseconds wait);
    Seq position() const { return Seq{next_after_}; }

private:
    friend class Feed;
    FeedCursor(std::shared_ptr<FeedState> state, uint64_t after, uint64_t forks_version)
        : state_(std::move(state)), next_after_(after), forks_version_(forks_version) {}
    std::shared_ptr<FeedState> state_;
    uint64_t next_after_ = 0;      // the seq this cursor has sent up to
    uint64_t forks_version_ = 0;   // the fork list it sent last (0: none sent)
};

class Feed {
public:
    explicit Feed(uint64_t bytes_max);
    ~Feed();
    Feed(const Feed&) = delete;
    Feed& operator=(const Feed&) = delete;

    // Where a follower at `pos` continues: a cursor yielding forks (if its history is not the
    // primary's current one) then every block after pos.seq, or the reason it needs an image.
    std::variant<FeedCursor, NeedImage> since(Position pos) const;

    // Engine side (database.cc, block.cc, apply.cc, open.cc).
    void reset(Seq seq, Seq durable, const std::vector<Fork>& forks);
    void push(Seq first, Seq last, int64_t landed_ms, std::vector<std::byte> records);
    void set_forks(const std::vector<Fork>& forks);
    void durable(Seq seq);
    void close();

    // Observability: the oldest first seq held (0: empty), the bytes held.
    Seq oldest() const;
    uint64_t bytes() const;
    uint64_t bytes_max() const;

private:
    std::shared_ptr<FeedState> state_;
};

// The state a Feed and its cursors share (feed.cc).
struct FeedState {
    struct Held {
        uint64_t first = 0;
        uint64_t last = 0;
        int64_t landed_ms = 0;
        std::shared_ptr<const std::vector<std::byte>> records;
    };
    mutable std::mutex mu;
    std::condition_variable cv;
    uint64_t bytes_max = 0;
    uint64_t bytes = 0;
    std::deque<Held> entries;
    std::vector<std::pair<HistoryId, Seq>> forks;
    uint64_t forks_version = 1;
    uint64_t seq = 0;       // the last landed seq
    uint64_t durable = 0;   // durable_seq
    bool closed = false;
};

}  // namespace fenec::engine
