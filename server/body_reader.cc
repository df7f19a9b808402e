// server/body_reader.cc: BodyReader (server/body_reader.h): read_body's callback hands the chunk
// to the waiting thread through a small shared slot.
#include "server/body_reader.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

namespace fenec::server {

namespace {

struct Slot {
    std::mutex m;
    std::condition_variable cv;
    std::optional<BodyChunk> chunk;
};

}  // namespace

BodyChunk BodyReader::next() { return next_into({}, nullptr); }

BodyChunk BodyReader::next_into(std::span<char> into, std::shared_ptr<const void> owner) {
    if (over_) {
        BodyChunk c;
        c.failed = true;
        c.error = "the body was already read to its end";
        return c;
    }
    // Shared: the callback may run after this returns only if the wait were abandoned, which it
    // never is; shared anyway so a late callback never touches a dead frame.
    auto slot = std::make_shared<Slot>();
    exchange_->read_body_into(into, std::move(owner), [slot](BodyChunk c) {
        std::lock_guard lock(slot->m);
        slot->chunk = std::move(c);
        slot->cv.notify_one();
    });
    std::unique_lock lock(slot->m);
    slot->cv.wait(lock, [&] { return slot->chunk.has_value(); });
    BodyChunk c = std::move(*slot->chunk);
    over_ = c.last || c.failed;
    return c;
}

}  // namespace fenec::server
