// server/runtime/body_reader.cc: BodyReader (server/runtime/body_reader.h): read_body's callback
// hands the chunk to the waiting thread through a small shared slot.
#include "server/runtime/body_reader.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

namespace fenec::server {

struct BodyReader::Slot {
    std::mutex m;
    std::condition_variable cv;
    std::optional<BodyChunk> chunk;
};

BodyReader::BodyReader(std::shared_ptr<Exchange> exchange) : exchange_(std::move(exchange)) {}

BodyReader::~BodyReader() {
    if (asked_) (void)wait();  // the callback writes the slot: never left outstanding
}

BodyChunk BodyReader::next() { return next_into({}, nullptr); }

BodyChunk BodyReader::next_into(std::span<char> into, std::shared_ptr<const void> owner) {
    ask_into(into, std::move(owner));
    return wait();
}

void BodyReader::ask_into(std::span<char> into, std::shared_ptr<const void> owner) {
    if (asked_) return;  // one ask at a time: wait() returns the outstanding one
    asked_ = true;
    // Shared: the callback may run on the loop thread after this returns.
    slot_ = std::make_shared<Slot>();
    if (over_) {
        BodyChunk c;
        c.failed = true;
        c.error = "the body was already read to its end";
        slot_->chunk = std::move(c);
        return;
    }
    exchange_->read_body_into(into, std::move(owner), [slot = slot_](BodyChunk c) {
        std::lock_guard lock(slot->m);
        slot->chunk = std::move(c);
        slot->cv.notify_one();
    });
}

BodyChunk BodyReader::wait() {
    if (!asked_) {
        BodyChunk c;
        c.failed = true;
        c.error = "nothing was asked for";
        return c;
    }
    std::unique_lock lock(slot_->m);
    slot_->cv.wait(lock, [&] { return slot_->chunk.has_value(); });
    BodyChunk c = std::move(*slot_->chunk);
    lock.unlock();
    slot_.reset();
    asked_ = false;
    over_ = over_ || c.last || c.failed;
    return c;
}

}  // namespace fenec::server
