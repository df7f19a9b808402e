// server/body_reader.h: BodyReader, a streamed request body (HeadVerdict::stream_body,
// server/http_server.h) read chunk by chunk on a thread that may block (a worker writing it to a
// file). Each next() asks the exchange for one chunk and waits for it, so at most one chunk is in
// memory and the connection reads nothing while the caller is busy with it.
#pragma once

#include <memory>

#include "server/http_server.h"

namespace fenec::server {

class BodyReader {
  public:
    explicit BodyReader(std::shared_ptr<Exchange> exchange) : exchange_(std::move(exchange)) {}
    // Blocks until the next chunk (or `failed`). Not on a loop thread: the chunk comes from it.
    // No deadline of its own: a silent peer is ended by the server's idle timeout (408), which
    // ends the wait with `failed`.
    BodyChunk next();
    // The body was read to its end, or failed: next() would only fail.
    bool over() const { return over_; }

  private:
    std::shared_ptr<Exchange> exchange_;
    bool over_ = false;
};

}  // namespace fenec::server
