// server/body_reader.h: BodyReader, a streamed request body (HeadVerdict::stream_body,
// server/http_server.h) read chunk by chunk on a thread that may block (a worker writing it to a
// file). Each next() asks the exchange for one chunk and waits for it, so at most one chunk is in
// memory and the connection reads nothing while the caller is busy with it.
#pragma once

#include <memory>
#include <span>

#include "server/http_server.h"

namespace fenec::server {

class BodyReader {
  public:
    explicit BodyReader(std::shared_ptr<Exchange> exchange) : exchange_(std::move(exchange)) {}
    // Blocks until the next chunk (or `failed`). Not on a loop thread: the chunk comes from it.
    // No deadline of its own: a silent peer is ended by the server's idle timeout (408), which
    // ends the wait with `failed`.
    BodyChunk next();
    // As next(), the bytes received straight into `into` until it is full or the body ends
    // (Exchange::read_body_into; `owner` keeps `into` alive while the connection may write it):
    // `filled` says how many.
    BodyChunk next_into(std::span<char> into, std::shared_ptr<const void> owner);
    // The body was read to its end, or failed: next() would only fail.
    bool over() const { return over_; }

  private:
    std::shared_ptr<Exchange> exchange_;
    bool over_ = false;
};

}  // namespace fenec::server
