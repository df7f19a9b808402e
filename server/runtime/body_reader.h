// server/runtime/body_reader.h: BodyReader, a streamed request body (HeadVerdict::stream_body,
// server/runtime/http_server.h) read chunk by chunk on a thread that may block (a worker writing it
// to a file). Each next() asks the exchange for one chunk and waits for it, so at most one chunk is
// in memory and the connection reads nothing while the caller is busy with it.
#pragma once

#include <memory>
#include <span>

#include "server/runtime/http_server.h"

namespace fenec::server {

class BodyReader {
  public:
    explicit BodyReader(std::shared_ptr<Exchange> exchange);
    ~BodyReader();  // waits for an ask still outstanding
    BodyReader(const BodyReader&) = delete;
    BodyReader& operator=(const BodyReader&) = delete;
    // Blocks until the next chunk (or `failed`). Not on a loop thread: the chunk comes from it.
    // No deadline of its own: a silent peer is ended by the server's idle timeout (408), which
    // ends the wait with `failed`.
    BodyChunk next();
    // As next(), the bytes received straight into `into` until it is full or the body ends
    // (Exchange::read_body_into; `owner` keeps `into` alive while the connection may write it):
    // `filled` says how many.
    BodyChunk next_into(std::span<char> into, std::shared_ptr<const void> owner);
    // next_into in two halves, so the caller can work on what it has while the next bytes
    // arrive: ask_into starts the read, wait() blocks until it is done and returns it. One ask
    // is outstanding at a time (a second ask_into before wait() does nothing).
    void ask_into(std::span<char> into, std::shared_ptr<const void> owner);
    BodyChunk wait();
    // The body was read to its end, or failed: next() would only fail.
    bool over() const { return over_; }

  private:
    struct Slot;
    std::shared_ptr<Exchange> exchange_;
    std::shared_ptr<Slot> slot_;  // the outstanding ask's
    bool asked_ = false;
    bool over_ = false;
};

}  // namespace fenec::server
