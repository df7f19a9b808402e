// test/server/runtime/loop_test.cc: proves the io_uring loop, the worker pool and the HTTP server
// of server/runtime/http_server.h (node-http.md §2.1, §5.4) over real 127.0.0.1 sockets on port 0,
// with a handler that answers from a worker pool by echoing method, path and body: a round trip;
// 100 pipelined requests answered in order; keep-alive reuse; `Connection: close` closing;
// 431 for a head over 64 KiB; 413 before any body byte; 411 for Transfer-Encoding; 501 and 400 for
// heads the codec refuses; a check_head refusal; `Expect: 100-continue`; HEAD; the idle timeout
// closing silently; 408 for half a head; a stream's bytes; write()==false for a stream whose
// client does not read, and cut after send_timeout_ms; a half-closed client still answered;
// 503 over connections_max; on_close when a streaming client leaves;
// a prompt shutdown with connections open; Loop::post from other threads; the pool's bound;
// pipelined requests answered inline in order; streamed bodies (HeadVerdict::stream_body): in
// order in bounded chunks, reading stopped while the handler holds one, a client leaving or
// silent part-way reported to the handler, an early answer closing (and never sent a 100),
// read_body refused otherwise;
// slow clients: a head's deadline from its first byte, a body's rate floor, the per-address
// cap, the reserved share and the eviction of an unproven connection for a newcomer.
#include "server/runtime/loop.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/runtime/body_reader.h"
#include "server/runtime/http.h"
#include "server/runtime/http_server.h"
#include "server/runtime/workers.h"

namespace fenec::server::loop_test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Waits up to `limit` for `pred`.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 3000ms) {
    auto until = Clock::now() + limit;
    while (Clock::now() < until) {
        if (pred()) return true;
        std::this_thread::sleep_for(2ms);
    }
    return pred();
}

struct Reply {
    int status = 0;
    std::string head;
    std::string body;
    bool close = false;  // `Connection: close`
    std::optional<std::string> header(std::string_view name) const {
        http::ResponseHead h;
        size_t consumed = 0;
        http::ParseError error;
        if (http::parse_response_head(head, h, consumed, error) != http::ParseStatus::done) {
            return std::nullopt;
        }
        auto v = h.header(name);
        return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
    }
};

// A blocking test client with a receive timeout, so a server bug fails rather than hangs.
class Client {
  public:
    // `source`: the address it connects from (another loopback address is another peer).
    explicit Client(uint16_t port, int rcvbuf = 0, const char* source = nullptr) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (source != nullptr) {
            sockaddr_in from{};
            from.sin_family = AF_INET;
            ::inet_pton(AF_INET, source, &from.sin_addr);
            if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) return;
        }
        timeval tv{3, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    }
    ~Client() { close(); }
    bool connected() const { return connected_; }
    int fd() const { return fd_; }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    void send_all(std::string_view bytes) {
        while (!bytes.empty()) {
            ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n <= 0) return;
            bytes.remove_prefix(static_cast<size_t>(n));
        }
    }
    // Reads more bytes into the buffer; false on EOF, error or timeout.
    bool fill() {
        char chunk[16384];
        ssize_t n = 0;
        do {
            n = ::recv(fd_, chunk, sizeof chunk, 0);
        } while (n < 0 && errno == EINTR);
        if (n <= 0) {
            eof_ = true;
            return false;
        }
        buffer_.append(chunk, static_cast<size_t>(n));
        return true;
    }
    // One answer: its head, then Content-Length bytes, or everything up to EOF when it has none.
    // `head_request`: the answer to a HEAD, whose Content-Length has no body after it.
    std::optional<Reply> read_reply(bool head_request = false) {
        http::ResponseHead head;
        size_t consumed = 0;
        http::ParseError error;
        for (;;) {
            auto status = http::parse_response_head(buffer_, head, consumed, error);
            if (status == http::ParseStatus::error) return std::nullopt;
            if (status == http::ParseStatus::done) break;
            if (!fill()) return std::nullopt;
        }
        Reply r;
        r.status = head.status;
        r.head = buffer_.substr(0, consumed);
        r.close = !head.keep_alive;
        buffer_.erase(0, consumed);
        if (head_request || head.status < 200 || head.status == 204 || head.status == 304) {
            return r;
        }
        if (!head.content_length) {
            while (fill()) {
            }
            r.body.swap(buffer_);
            return r;
        }
        size_t length = *head.content_length;
        while (buffer_.size() < length) {
            if (!fill()) return std::nullopt;
        }
        r.body = buffer_.substr(0, length);
        buffer_.erase(0, length);
        return r;
    }
    // True when the server closes with nothing more sent.
    bool sees_eof() {
        if (!buffer_.empty()) return false;
        char c = 0;
        ssize_t n = 0;
        do {
            n = ::recv(fd_, &c, 1, 0);
        } while (n < 0 && errno == EINTR);
        return n == 0 || (n < 0 && errno == ECONNRESET);
    }
    std::string& buffer() { return buffer_; }

  private:
    int fd_ = -1;
    bool connected_ = false;
    bool eof_ = false;
    std::string buffer_;
};

std::string get(std::string_view path, std::string_view extra = "") {
    return "GET " + std::string(path) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra) + "\r\n";
}

// Answers from a worker pool with "<METHOD> <path> <body>"; /stream/... and /hold/... go to
// `on_special` instead; /refuse is refused at the head.
class EchoHandler : public Handler {
  public:
    HeadVerdict check_head(const Request& request) override {
        HeadVerdict v;
        v.body_bytes_max = body_bytes_max.load();
        v.stream_body = !stream_prefix.empty() && request.head.path.rfind(stream_prefix, 0) == 0;
        if (request.head.path == "/refuse") {
            http::Response r;
            r.status = 403;
            r.body = R"({"error":"refused"})";
            v.refuse = std::move(r);
        }
        return v;
    }
    void handle(Request request, std::shared_ptr<Exchange> exchange) override {
        if (request.head.path.rfind("/stream", 0) == 0 ||
            request.head.path.rfind("/hold", 0) == 0 ||
            (!stream_prefix.empty() && request.head.path.rfind(stream_prefix, 0) == 0)) {
            on_special(std::move(request), std::move(exchange));
            return;
        }
        auto shared = std::make_shared<Request>(std::move(request));
        bool queued = pool.submit([shared, exchange] {
            http::Response r;
            r.content_type = "text/plain";
            r.body = std::string(http::method_name(shared->head.method)) + " " + shared->head.path +
                     " " + shared->body;
            exchange->reply(std::move(r));
        });
        EXPECT_TRUE(queued);
    }
    http::Response over_capacity(std::string_view reason) override {
        http::Response r;
        r.status = 503;
        r.header("Retry-After", "1");
        r.body = R"({"error":"too many connections","reason":")" + std::string(reason) + "\"}";
        return r;
    }
    void on_refused(std::string_view reason) override {
        std::lock_guard lock(refused_m);
        refused.emplace_back(reason);
    }
    std::vector<std::string> refused_reasons() {
        std::lock_guard lock(refused_m);
        return refused;
    }

    std::atomic<uint64_t> body_bytes_max{1 << 20};
    std::mutex refused_m;
    std::vector<std::string> refused;  // on_refused's reasons
    std::string stream_prefix;         // paths whose body is streamed (set before start)
    std::function<void(Request, std::shared_ptr<Exchange>)> on_special =
        [](Request, std::shared_ptr<Exchange>) {};
    WorkerPool pool{2, 1024};
};

class ServerTest : public ::testing::Test {
  protected:
    void start(ServerOptions o = {}) {
        o.listen = "127.0.0.1:0";
        std::string error;
        server = HttpServer::bind(o, handler, error);
        ASSERT_TRUE(server) << error;
        ASSERT_NE(server->port(), 0);
        server->start();
    }
    void TearDown() override {
        if (server) server->shutdown();
        handler.pool.shutdown();
    }
    uint16_t port() const { return server->port(); }

    // State the handler's callbacks touch: members, not test-body locals, because TearDown's
    // shutdown (and the pool finishing its jobs) may still run them after the body returned.
    std::mutex m;
    std::shared_ptr<Exchange> held;
    std::atomic<int> closes{0};
    std::atomic<int> late{0};
    std::atomic<bool> closed{false};
    std::atomic<bool> refused{false};
    EchoHandler handler;
    std::unique_ptr<HttpServer> server;
};

TEST_F(ServerTest, GetRoundTrip) {
    start();
    Client c(port());
    ASSERT_TRUE(c.connected());
    c.send_all(get("/hello?x=1"));
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "GET /hello ");
    EXPECT_EQ(r->header("Server"), "fenec-node/0.1.0");
    EXPECT_FALSE(r->close);
    EXPECT_EQ(server->connections(), 1u);
}

TEST_F(ServerTest, PostBodyAndHead) {
    start();
    Client c(port());
    c.send_all("POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "POST /p hello");
    c.send_all("HEAD /h HTTP/1.1\r\n\r\n");
    r = c.read_reply(true);  // Content-Length stays; no body follows it
    ASSERT_TRUE(r);
    EXPECT_EQ(r->header("Content-Length"), std::to_string(std::string("HEAD /h ").size()));
    EXPECT_TRUE(c.buffer().empty());
    c.send_all(get("/after"));
    r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "GET /after ");
}

// Answers given on the loop thread itself, many in a row: a connection's recv and send complete
// in one turn in either order, and the recv is never re-armed before its callback has run.
TEST_F(ServerTest, ManySequentialRequestsAnsweredInline) {
    handler.on_special = [](Request request, std::shared_ptr<Exchange> ex) {
        http::Response r;
        r.body = request.head.path;
        ex->reply(std::move(r));
    };
    start();
    Client c(port());
    for (int i = 0; i < 2000; ++i) {
        std::string path = "/hold/" + std::to_string(i);
        c.send_all(get(path));
        auto r = c.read_reply();
        ASSERT_TRUE(r) << i;
        ASSERT_EQ(r->body, path);
    }
}

TEST_F(ServerTest, PipelinedRequestsAnsweredInOrder) {
    ServerOptions o;
    o.loops = 2;
    start(o);
    Client c(port());
    std::string all;
    for (int i = 0; i < 100; ++i) {
        if (i % 3 == 0) {
            std::string body = "b" + std::to_string(i);
            all += "POST /" + std::to_string(i) +
                   " HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                   body;
        } else {
            all += get("/" + std::to_string(i));
        }
    }
    c.send_all(all);
    for (int i = 0; i < 100; ++i) {
        auto r = c.read_reply();
        ASSERT_TRUE(r) << i;
        std::string want = i % 3 == 0 ? "POST /" + std::to_string(i) + " b" + std::to_string(i)
                                      : "GET /" + std::to_string(i) + " ";
        EXPECT_EQ(r->body, want);
    }
}

// A recv armed to read ahead while an answer is pending may land after the next head began a
// body: its bytes are the body's.
TEST_F(ServerTest, ReadAheadLandsInTheNextBody) {
    handler.on_special = [&](Request, std::shared_ptr<Exchange> ex) {
        std::lock_guard lock(m);
        held = std::move(ex);
    };
    start();
    Client c(port());
    c.send_all(get("/hold"));
    c.send_all("POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\n");
    ASSERT_TRUE(eventually([&] {
        std::lock_guard lock(m);
        return held != nullptr;
    }));
    std::this_thread::sleep_for(50ms);  // the POST head is read ahead; another recv is armed
    {
        std::lock_guard lock(m);
        http::Response r;
        r.body = "held";
        held->reply(std::move(r));
    }
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "held");
    std::this_thread::sleep_for(20ms);  // the POST head is parsed: a body is awaited
    c.send_all("hello");
    r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "POST /p hello");
}

// Many pipelined requests answered synchronously inside handle(): in order, and the next head is
// parsed by the connection's loop, not by a deeper call per answer.
TEST_F(ServerTest, PipelinedRequestsAnsweredInlineInOrder) {
    handler.on_special = [](Request request, std::shared_ptr<Exchange> ex) {
        http::Response r;
        r.body = request.head.path;
        ex->reply(std::move(r));
    };
    start();
    Client c(port());
    std::string all;
    constexpr int n = 1500;  // ~25 bytes each: the read buffer is full of heads
    for (int i = 0; i < n; ++i) all += "GET /hold/" + std::to_string(i) + " HTTP/1.1\r\n\r\n";
    std::thread sender([&] { c.send_all(all); });
    for (int i = 0; i < n; ++i) {
        auto r = c.read_reply();
        ASSERT_TRUE(r) << i;
        ASSERT_EQ(r->body, "/hold/" + std::to_string(i));
    }
    sender.join();
}

// What a handler consuming a streamed body (HeadVerdict::stream_body) saw.
struct Sink {
    std::mutex m;
    std::string got;
    size_t chunks = 0;
    size_t chunk_max = 0;
    bool last = false;
    bool failed = false;
    std::string error;
    bool hold = false;  // stop asking after the first chunk
};

// Pulls `ex`'s body chunk by chunk, each taken on a worker (as a file would be written there);
// answers "<bytes>" once it is whole.
void pump(std::shared_ptr<Exchange> ex, std::shared_ptr<Sink> sink, WorkerPool& pool) {
    ex->read_body([ex, sink, &pool](BodyChunk chunk) {
        auto c = std::make_shared<BodyChunk>(std::move(chunk));
        pool.submit([ex, sink, c, &pool] {
            bool more = false;
            {
                std::lock_guard lock(sink->m);
                sink->got += c->bytes;
                sink->chunks++;
                sink->chunk_max = std::max(sink->chunk_max, c->bytes.size());
                sink->last = c->last;
                sink->failed = c->failed;
                sink->error = c->error;
                more = !c->last && !c->failed && !sink->hold;
            }
            std::this_thread::sleep_for(100us);  // a slow disk
            if (c->last) {
                http::Response r;
                r.body = std::to_string(sink->got.size());
                ex->reply(std::move(r));
            }
            if (more) pump(ex, sink, pool);
        });
    });
}

class StreamBodyTest : public ServerTest {
  protected:
    void SetUp() override {
        handler.stream_prefix = "/sink";
        handler.body_bytes_max = 1ull << 30;
        handler.on_special = [this](Request request, std::shared_ptr<Exchange> ex) {
            if (request.head.path == "/sink/early") {  // answers without reading the body
                http::Response r;
                r.status = 400;
                r.body = "no";
                ex->reply(std::move(r));
                return;
            }
            pump(std::move(ex), sink, handler.pool);
        };
    }
    std::shared_ptr<Sink> sink = std::make_shared<Sink>();
};

std::string pattern(size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
    return s;
}

TEST_F(StreamBodyTest, ABodyLargerThanTheReadBufferArrivesInOrderInBoundedChunks) {
    start();
    Client c(port());
    const std::string body = pattern(3 * 1024 * 1024 + 17);
    // The next request pipelined behind the body: served after the streamed one, in order.
    std::string all = "PUT /sink HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n" + body + get("/after");
    std::thread sender([&] { c.send_all(all); });
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, std::to_string(body.size()));
    EXPECT_FALSE(r->close);
    r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "GET /after ");
    sender.join();
    std::lock_guard lock(sink->m);
    EXPECT_TRUE(sink->got == body) << sink->got.size();
    EXPECT_TRUE(sink->last);
    EXPECT_GT(sink->chunks, body.size() / body_chunk_bytes_max);
    EXPECT_LE(sink->chunk_max, body_chunk_bytes_max);
}

// A handler that holds its chunk: the connection reads nothing more, so the client's sends stall
// far short of the body, and the server holds no more than a chunk and its read buffer.
TEST_F(StreamBodyTest, TheConnectionStopsReadingWhileTheHandlerHoldsAChunk) {
    sink->hold = true;
    start();
    Client c(port());
    const size_t length = 256u << 20;
    c.send_all("PUT /sink HTTP/1.1\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n");
    const std::string block(64 * 1024, 'x');
    size_t sent = 0;
    auto quiet_since = Clock::now();
    while (Clock::now() - quiet_since < 300ms && sent < length) {
        ssize_t n = ::send(c.fd(), block.data(), block.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
            quiet_since = Clock::now();
        } else {
            std::this_thread::sleep_for(1ms);
        }
    }
    EXPECT_LT(sent, 64u << 20);  // the kernel's socket buffers, not the body
    std::lock_guard lock(sink->m);
    EXPECT_EQ(sink->chunks, 1u);
    EXPECT_LE(sink->got.size(), body_chunk_bytes_max);
}

TEST_F(StreamBodyTest, AClientStoppingMidBodyIsReportedToTheHandler) {
    start();
    {
        Client c(port());
        c.send_all("PUT /sink HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
        c.send_all(pattern(300'000));
    }
    EXPECT_TRUE(eventually([&] {
        std::lock_guard lock(sink->m);
        return sink->failed;
    }));
    std::lock_guard lock(sink->m);
    EXPECT_FALSE(sink->last);
    EXPECT_EQ(sink->got, pattern(300'000));
    EXPECT_NE(sink->error.find("closed"), std::string::npos) << sink->error;
}

TEST_F(StreamBodyTest, SilenceMidBodyIs408AndTheHandlerIsTold) {
    ServerOptions o;
    o.idle_timeout_ms = 200;
    start(o);
    Client c(port());
    c.send_all("PUT /sink HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + pattern(10));
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_TRUE(eventually([&] {
        std::lock_guard lock(sink->m);
        return sink->failed;
    }));
}

TEST_F(StreamBodyTest, AnAnswerBeforeTheBodyIsWholeCloses) {
    start();
    Client c(port());
    c.send_all("PUT /sink/early HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + pattern(1000));
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_TRUE(r->close);
    EXPECT_TRUE(c.sees_eof());
}

// A streamed body's `100 Continue` waits for the handler's first ask: a handler that answers
// from the head (a refused credential) never invites the body; one that reads it does.
TEST_F(StreamBodyTest, ExpectContinueWaitsForTheHandlersAsk) {
    start();
    Client early(port());
    early.send_all(
        "PUT /sink/early HTTP/1.1\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n");
    auto r = early.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_TRUE(r->close);
    EXPECT_TRUE(early.sees_eof());
    Client asked(port());
    asked.send_all("PUT /sink HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    r = asked.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 100);
    asked.send_all("hello");
    r = asked.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "5");
}

TEST_F(StreamBodyTest, ABodyNotStreamedRefusesReadBody) {
    std::atomic<bool> failed{false};
    handler.on_special = [&](Request, std::shared_ptr<Exchange> ex) {
        ex->read_body([&failed](BodyChunk c) { failed = c.failed; });
        http::Response r;
        ex->reply(std::move(r));
    };
    start();
    Client c(port());
    c.send_all("POST /hold HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
    ASSERT_TRUE(c.read_reply());
    EXPECT_TRUE(failed);
}

// read_body_into (Exchange): a handler that keeps the body whole has it received straight into
// its buffer, a slice per ask, on a worker as image.cc does it.
struct IntoSink {
    std::mutex m;
    std::shared_ptr<std::string> buffer;  // owned here and by the connection while it fills
    std::weak_ptr<std::string> watch;     // the same, not kept alive
    size_t filled = 0;
    size_t asks = 0;
    bool failed = false;
    std::string error;
};

class BodyIntoTest : public ServerTest {
  protected:
    static constexpr size_t kSlice = 1 << 20;
    void SetUp() override {
        handler.stream_prefix = "/into";
        handler.body_bytes_max = 1ull << 30;
        handler.on_special = [this](Request request, std::shared_ptr<Exchange> ex) {
            const size_t length = request.head.content_length.value_or(0);
            auto buffer = std::make_shared<std::string>(length, '\0');
            {
                std::lock_guard lock(sink->m);
                sink->buffer = buffer;
                sink->watch = buffer;
            }
            handler.pool.submit([this, ex, buffer, length]() mutable {
                BodyReader reader(ex);
                size_t at = 0;
                while (!reader.over()) {
                    const size_t n = std::min(kSlice, length - at);
                    BodyChunk c = reader.next_into({buffer->data() + at, n}, buffer);
                    std::lock_guard lock(sink->m);
                    ++sink->asks;
                    if (c.failed) {
                        sink->failed = true;
                        sink->error = c.error;
                        sink->buffer.reset();
                        return;  // `buffer` goes with this task; the connection may still hold it
                    }
                    EXPECT_TRUE(c.bytes.empty());
                    EXPECT_LE(c.filled, n);
                    at += c.filled;
                    sink->filled = at;
                }
                http::Response r;
                r.body = std::to_string(at);
                ex->reply(std::move(r));
            });
        };
    }
    std::shared_ptr<IntoSink> sink = std::make_shared<IntoSink>();
};

TEST_F(BodyIntoTest, ABodyReadIntoTheHandlersBufferArrivesWholeASliceAtATime) {
    start();
    Client c(port());
    const std::string body = pattern(3 * kSlice + 4321);
    // Sent with its head (so its first bytes are in the read buffer already) and a request
    // pipelined behind it, served after it.
    std::string all = "PUT /into HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n" + body + get("/after");
    std::thread sender([&] { c.send_all(all); });
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, std::to_string(body.size()));
    r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "GET /after ");
    sender.join();
    std::lock_guard lock(sink->m);
    ASSERT_TRUE(sink->buffer);
    EXPECT_TRUE(*sink->buffer == body);
    EXPECT_EQ(sink->asks, 4u);  // each ask filled its slice whole: three of kSlice, one of the rest
}

TEST_F(BodyIntoTest, AClientStoppingMidBodyFailsTheAskAndTheBufferIsLetGo) {
    start();
    {
        Client c(port());
        c.send_all("PUT /into HTTP/1.1\r\nContent-Length: 5000000\r\n\r\n");
        c.send_all(pattern(300'000));
    }
    EXPECT_TRUE(eventually([&] {
        std::lock_guard lock(sink->m);
        return sink->failed;
    }));
    {
        std::lock_guard lock(sink->m);
        EXPECT_NE(sink->error.find("closed"), std::string::npos) << sink->error;
    }
    // Nothing keeps the buffer once the connection is gone: its recv into it has ended.
    EXPECT_TRUE(eventually([&] {
        std::lock_guard lock(sink->m);
        return sink->watch.expired();
    }));
}

TEST_F(ServerTest, KeepAliveReusesTheConnection) {
    ServerOptions o;
    o.loops = 2;
    start(o);
    Client c(port());
    for (int i = 0; i < 5; ++i) {
        c.send_all(get("/k" + std::to_string(i)));
        auto r = c.read_reply();
        ASSERT_TRUE(r);
        EXPECT_EQ(r->body, "GET /k" + std::to_string(i) + " ");
    }
    EXPECT_EQ(server->connections(), 1u);
    // HTTP/1.0 keeps alive only when asked, and is told so.
    c.send_all("GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->header("Connection"), "keep-alive");
}

TEST_F(ServerTest, ConnectionCloseCloses) {
    start();
    Client c(port());
    c.send_all(get("/bye", "Connection: close\r\n"));
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "GET /bye ");
    EXPECT_TRUE(r->close);
    EXPECT_TRUE(c.sees_eof());
    c.close();
    EXPECT_TRUE(eventually([&] { return server->connections() == 0; }));
}

TEST_F(ServerTest, HeadOver64KiBIs431AndCloses) {
    start();
    Client c(port());
    std::string big = "GET / HTTP/1.1\r\nX-Big: " + std::string(70 * 1024, 'a') + "\r\n\r\n";
    c.send_all(big);
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 431);
    EXPECT_TRUE(r->close);
    EXPECT_NE(r->body.find("\"error\""), std::string::npos);
    EXPECT_TRUE(c.sees_eof());
}

TEST_F(ServerTest, BodyOverTheBoundIs413BeforeTheBody) {
    handler.body_bytes_max = 10;
    start();
    Client c(port());
    c.send_all("POST /x HTTP/1.1\r\nContent-Length: 1000\r\n\r\n");  // the body never comes
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    EXPECT_NE(r->body.find("1000"), std::string::npos);  // both sizes named
    EXPECT_NE(r->body.find("10 bytes"), std::string::npos);
    EXPECT_TRUE(c.sees_eof());
}

TEST_F(ServerTest, TransferEncodingIs411AndCloses) {
    start();
    Client c(port());
    c.send_all("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 411);
    EXPECT_TRUE(c.sees_eof());
}

TEST_F(ServerTest, CodecRefusalsAnswerAndClose) {
    start();
    Client a(port());
    a.send_all("BREW /pot HTTP/1.1\r\n\r\n");
    auto r = a.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 501);
    EXPECT_TRUE(a.sees_eof());
    Client b(port());
    b.send_all("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n");
    r = b.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_TRUE(b.sees_eof());
}

TEST_F(ServerTest, CheckHeadRefusalIsSentAndCloses) {
    start();
    Client c(port());
    c.send_all("POST /refuse HTTP/1.1\r\nContent-Length: 3\r\n\r\n");
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403);
    EXPECT_TRUE(r->close);
    EXPECT_TRUE(c.sees_eof());
}

TEST_F(ServerTest, ExpectContinueGets100ThenTheAnswer) {
    start();
    Client c(port());
    c.send_all("PUT /e HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 100);
    c.send_all("data");
    r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "PUT /e data");
    // Refused at the head: no 100, the refusal.
    handler.body_bytes_max = 2;
    c.send_all("PUT /e HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
}

TEST_F(ServerTest, IdleTimeoutClosesSilently) {
    ServerOptions o;
    o.idle_timeout_ms = 200;
    start(o);
    Client fresh(port());
    Client used(port());
    used.send_all(get("/once"));
    ASSERT_TRUE(used.read_reply());
    auto t0 = Clock::now();
    EXPECT_TRUE(fresh.sees_eof());
    EXPECT_TRUE(used.sees_eof());
    auto waited = Clock::now() - t0;
    EXPECT_GE(waited, 150ms);
    EXPECT_LT(waited, 1500ms);
    EXPECT_TRUE(eventually([&] { return server->connections() == 0; }));
}

TEST_F(ServerTest, HalfAHeadThenSilenceIs408) {
    ServerOptions o;
    o.idle_timeout_ms = 200;
    start(o);
    Client c(port());
    c.send_all("GET /slow HTTP/1.1\r\nHost: t\r\n");
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_TRUE(c.sees_eof());
    // Half a body as well.
    Client d(port());
    d.send_all("POST /slow HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
    r = d.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
}

// Slow clients (issue 17): a head's deadline runs from its first byte, however many bytes
// follow; a body has a rate floor; one address has a connection cap; connections that have not
// sent a whole request cannot take the reserved share, and the oldest of them is evicted for a
// newcomer once it is past half the head deadline.

// Whether `c` has bytes to read within `ms`.
bool readable(Client& c, int ms) {
    pollfd p{c.fd(), POLLIN, 0};
    return ::poll(&p, 1, ms) > 0;
}

TEST_F(ServerTest, SlowHeadIsCutAtItsDeadline) {
    ServerOptions o;
    o.head_timeout_ms =
        1000;  // the idle timeout (60 s) alone never fires: a byte comes each 200 ms
    start(o);
    Client c(port());
    const std::string head = "GET /slow HTTP/1.1\r\nHost: t\r\nX-Pad: " + std::string(100, 'a');
    const auto t0 = Clock::now();
    size_t i = 0;
    while (!readable(c, 200)) {
        ASSERT_LT(Clock::now() - t0, 3000ms) << "still open at 3 s";
        c.send_all(std::string_view(head).substr(i++ % head.size(), 1));
    }
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    const auto waited = Clock::now() - t0;
    EXPECT_GE(waited, 900ms);
    EXPECT_LT(waited, 1600ms);
    EXPECT_TRUE(c.sees_eof());
    EXPECT_EQ(handler.refused_reasons(), std::vector<std::string>{"slow_head"});
}

// The head clock runs in phase head only: a pipelined request waiting behind a slow answer is
// not timed while it waits.
TEST_F(ServerTest, APipelinedHeadBehindASlowAnswerIsNotTimed) {
    handler.on_special = [this](Request, std::shared_ptr<Exchange> ex) {
        std::lock_guard lock(m);
        held = std::move(ex);
    };
    ServerOptions o;
    o.head_timeout_ms = 200;
    start(o);
    Client c(port());
    const std::string next = get("/after");
    c.send_all(get("/hold") + next.substr(0, 10));  // and half of the next head
    ASSERT_TRUE(eventually([&] {
        std::lock_guard lock(m);
        return held != nullptr;
    }));
    std::this_thread::sleep_for(600ms);  // three head deadlines pass while the answer is held
    {
        std::lock_guard lock(m);
        http::Response r;
        r.body = "held";
        held->reply(std::move(r));
        held.reset();
    }
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "held");
    c.send_all(next.substr(10));  // timed from the answer: well within its deadline
    r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "GET /after ");
}

TEST_F(ServerTest, SlowBodyBelowTheRateIs408) {
    ServerOptions o;
    o.head_timeout_ms = 500;  // the body's grace
    o.body_bytes_per_s_min = 4096;
    start(o);
    Client c(port());
    c.send_all("POST /slow HTTP/1.1\r\nContent-Length: 100000\r\n\r\n");
    const auto t0 = Clock::now();
    while (!readable(c, 100)) {  // 100 bytes each 100 ms: 1000 bytes/s, and never silent
        ASSERT_LT(Clock::now() - t0, 3000ms) << "still reading at 3 s";
        c.send_all(std::string(100, 'b'));
    }
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_LT(Clock::now() - t0, 1500ms);
    EXPECT_EQ(handler.refused_reasons(), std::vector<std::string>{"slow_body"});
    // At the rate it is read whole.
    Client d(port());
    d.send_all("POST /fast HTTP/1.1\r\nContent-Length: 40000\r\n\r\n");
    for (int i = 0; i < 10; ++i) {
        std::this_thread::sleep_for(100ms);  // 40 KB/s over a second: past the grace
        d.send_all(std::string(4000, 'f'));
    }
    r = d.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, PerPeerCapRefusesTheNth) {
    ServerOptions o;
    o.connections_per_peer_max = 3;
    start(o);
    std::vector<std::unique_ptr<Client>> in;
    for (int i = 0; i < 3; ++i) {
        in.push_back(std::make_unique<Client>(port()));
        in.back()->send_all(get("/in"));
        auto r = in.back()->read_reply();
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
    }
    Client fourth(port());
    fourth.send_all(get("/in"));
    auto r = fourth.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_NE(r->body.find("per_address"), std::string::npos) << r->body;
    EXPECT_TRUE(fourth.sees_eof());
    // Another address is not counted with it.
    Client other(port(), 0, "127.0.0.2");
    ASSERT_TRUE(other.connected());
    other.send_all(get("/in"));
    r = other.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    // A slot given back is taken again.
    in.front()->close();
    ASSERT_TRUE(eventually([&] {
        Client again(port());
        again.send_all(get("/in"));
        auto a = again.read_reply();
        return a && a->status == 200;
    }));
}

// connections_max 4 with half reserved: two connections that sent nothing fill the share a
// newcomer may take, so the next is refused though two slots are free; once they are past half
// the head deadline the oldest is evicted for a newcomer; a proven connection keeps its slot.
TEST_F(ServerTest, UnprovenConnectionsAreKeptOutOfTheReservedShare) {
    ServerOptions o;
    o.connections_max = 4;
    o.connections_reserved_pct = 50;
    o.head_timeout_ms = 400;
    o.loops = 2;
    start(o);
    Client proven(port());
    proven.send_all(get("/in"));
    ASSERT_TRUE(proven.read_reply());
    Client silent1(port(), 0, "127.0.0.2");
    Client silent2(port(), 0, "127.0.0.3");
    ASSERT_TRUE(eventually([&] { return server->connections_unproven() == 2; }));
    Client early(port());
    early.send_all(get("/in"));
    auto r = early.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_NE(r->body.find("\"connections\""), std::string::npos) << r->body;
    EXPECT_EQ(server->connections(), 3u);
    // Past 200 ms a newcomer evicts the oldest silent one (closed: it sent nothing).
    const auto t0 = Clock::now();
    std::optional<Reply> newcomer;
    ASSERT_TRUE(eventually([&] {
        Client c(port());
        c.send_all(get("/late"));
        newcomer = c.read_reply();
        return newcomer && newcomer->status == 200;
    }));
    EXPECT_LT(Clock::now() - t0, 1500ms);
    // One of the two (accepted within a millisecond of each other, on two loops) is closed.
    pollfd both[2] = {{silent1.fd(), POLLIN, 0}, {silent2.fd(), POLLIN, 0}};
    ASSERT_EQ(::poll(both, 2, 3000), 1);
    EXPECT_TRUE(both[0].revents != 0 ? silent1.sees_eof() : silent2.sees_eof());
    EXPECT_EQ(handler.refused_reasons(), std::vector<std::string>{"evicted"});
    proven.send_all(get("/again"));
    r = proven.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
}

// A slow client that reconnects as soon as it is cut cannot evict its way back in: a newcomer
// from the address holding the most unproven connections evicts no one (503), while one from
// any other address takes the oldest evictable slot.
TEST_F(ServerTest, ANewcomerFromTheBusiestAddressEvictsNoOne) {
    ServerOptions o;
    o.connections_max = 4;
    o.connections_reserved_pct = 0;
    o.head_timeout_ms = 400;
    o.loops = 1;
    start(o);
    std::vector<std::unique_ptr<Client>> slow;
    for (int i = 0; i < 4; ++i) slow.push_back(std::make_unique<Client>(port(), 0, "127.0.0.2"));
    ASSERT_TRUE(eventually([&] { return server->connections_unproven() == 4; }));
    // Another address gets in once the slow ones are evictable (past half the head deadline).
    std::optional<Reply> r;
    std::unique_ptr<Client> other;  // kept open: the server stays full
    ASSERT_TRUE(eventually([&] {
        other = std::make_unique<Client>(port(), 0, "127.0.0.3");
        other->send_all(get("/other"));
        r = other->read_reply();
        return r && r->status == 200;
    }));
    // Three slow ones are left, evictable: the busiest address still evicts none of them.
    Client again(port(), 0, "127.0.0.2");
    again.send_all(get("/again"));
    r = again.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << "the busiest address evicted one of its own";
}

TEST_F(ServerTest, StreamStartWritesEnd) {
    handler.on_special = [this](Request, std::shared_ptr<Exchange> ex) {
        handler.pool.submit([ex] {
            http::Response head;
            head.content_type = "text/event-stream";
            ex->start(std::move(head));
            for (int i = 0; i < 5; ++i)
                EXPECT_TRUE(ex->write("data: " + std::to_string(i) + "\n\n"));
            ex->end();
            EXPECT_FALSE(ex->write("late"));
        });
    };
    start();
    Client c(port());
    c.send_all(get("/stream"));
    auto r = c.read_reply();  // no length: read to EOF
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_FALSE(r->header("Content-Length"));
    EXPECT_TRUE(r->close);
    EXPECT_EQ(r->body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
}

TEST_F(ServerTest, StreamToAClientNotReadingIsRefusedPastTheBound) {
    handler.on_special = [&](Request, std::shared_ptr<Exchange> ex) {
        ex->on_close([&] { closed = true; });
        handler.pool.submit([&, ex] {
            ex->start(http::Response{});
            std::string chunk(16 * 1024, 'x');
            for (int i = 0; i < 20000 && !refused; ++i) {
                if (!ex->write(chunk)) {
                    refused = true;
                    EXPECT_GT(ex->pending_bytes(), 64u * 1024 - chunk.size());
                }
                if (i % 64 == 63) std::this_thread::sleep_for(1ms);  // let the loop send
            }
        });
    };
    ServerOptions o;
    o.stream_buffer_max = 64 * 1024;
    start(o);
    Client c(port(), 4096);
    c.send_all(get("/stream/slow"));
    EXPECT_TRUE(eventually([&] { return refused.load(); }, 5000ms));
    EXPECT_FALSE(closed);
    c.close();
    EXPECT_TRUE(eventually([&] { return closed.load(); }));
}

TEST_F(ServerTest, AStreamNotReadIsCutAfterTheSendTimeout) {
    handler.on_special = [&](Request, std::shared_ptr<Exchange> ex) {
        ex->on_close([&] { closed = true; });
        handler.pool.submit([ex] {
            ex->start(http::Response{});
            EXPECT_TRUE(ex->write(std::string(64 * 1024, 'x')));  // the bound whole: it goes
            std::string chunk(16 * 1024, 'x');  // until the kernel's buffers are full too
            for (auto until = Clock::now() + 4s; Clock::now() < until && !ex->closed();) {
                if (!ex->write(chunk)) std::this_thread::sleep_for(1ms);
            }
        });
    };
    ServerOptions o;
    o.stream_buffer_max = 64 * 1024;
    o.send_timeout_ms = 300;
    start(o);
    Client c(port(), 4096);
    c.send_all(get("/stream/unread"));
    auto t0 = Clock::now();
    EXPECT_TRUE(eventually([&] { return closed.load(); }, 5000ms));  // the client never reads
    EXPECT_GE(Clock::now() - t0, 250ms);
    EXPECT_TRUE(eventually([&] { return server->connections() == 0; }));
}

TEST_F(ServerTest, AHalfClosedClientStillGetsItsAnswer) {
    start();
    Client c(port());
    c.send_all(get("/a") + get("/b"));
    ::shutdown(c.fd(), SHUT_WR);
    auto r = c.read_reply();
    ASSERT_TRUE(r) << c.buffer();
    EXPECT_EQ(r->body, "GET /a ");
    r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "GET /b ");
    EXPECT_TRUE(c.sees_eof());
}

TEST_F(ServerTest, OnCloseFiresWhenTheClientLeavesMidStream) {
    handler.on_special = [&](Request, std::shared_ptr<Exchange> ex) {
        ex->start(http::Response{});
        ex->write("hello\n");
        ex->on_close([&] { closes++; });
        std::lock_guard lock(m);
        held = ex;
    };
    start();
    Client c(port());
    c.send_all(get("/stream/live"));
    ASSERT_TRUE(eventually([&] {
        c.fill();
        return c.buffer().find("hello\n") != std::string::npos;
    }));
    EXPECT_EQ(closes, 0);
    c.close();
    EXPECT_TRUE(eventually([&] { return closes.load() == 1; }));
    std::shared_ptr<Exchange> ex;
    {
        std::lock_guard lock(m);
        ex = held;
    }
    EXPECT_TRUE(ex->closed());
    EXPECT_FALSE(ex->write("more"));
    ex->on_close([&] { late++; });  // registered after the close: runs at once (on the loop)
    EXPECT_TRUE(eventually([&] { return late.load() == 1; }));
    EXPECT_EQ(closes, 1);
    EXPECT_TRUE(eventually([&] { return server->connections() == 0; }));
}

TEST_F(ServerTest, OverConnectionsMaxIs503AndClosed) {
    ServerOptions o;
    o.connections_max = 2;
    o.loops = 2;
    start(o);
    Client a(port());
    Client b(port());
    for (Client* c : {&a, &b}) {
        c->send_all(get("/in"));
        ASSERT_TRUE(c->read_reply());
    }
    Client third(port());
    third.send_all(get("/in"));
    auto r = third.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_EQ(r->header("Retry-After"), "1");
    EXPECT_TRUE(r->close);
    EXPECT_TRUE(third.sees_eof());
    EXPECT_EQ(server->connections(), 2u);
    a.close();
    ASSERT_TRUE(eventually([&] { return server->connections() == 1; }));
    Client fourth(port());
    fourth.send_all(get("/in"));
    r = fourth.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, ShutdownWithConnectionsOpenIsPrompt) {
    handler.on_special = [&](Request, std::shared_ptr<Exchange> ex) {
        ex->on_close([&] { closes++; });
        std::lock_guard lock(m);
        held = ex;  // never answered
    };
    ServerOptions o;
    o.loops = 2;
    start(o);
    Client idle(port());
    Client busy(port());
    Client holding(port());
    busy.send_all(get("/x"));
    ASSERT_TRUE(busy.read_reply());
    holding.send_all(get("/hold"));
    ASSERT_TRUE(eventually([&] {
        std::lock_guard lock(m);
        return server->connections() == 3 && closes == 0 && held;
    }));
    auto t0 = Clock::now();
    server->shutdown();
    EXPECT_LT(Clock::now() - t0, 1000ms);
    EXPECT_EQ(closes, 1);
    EXPECT_EQ(server->connections(), 0u);
    EXPECT_TRUE(idle.sees_eof());
    EXPECT_TRUE(holding.sees_eof());
    held->reply(http::Response{});  // after shutdown: dropped, no crash
    server->shutdown();             // idempotent
    Client after(port());
    EXPECT_FALSE(after.connected());
}

TEST_F(ServerTest, StopAcceptingKeepsOpenConnections) {
    start();
    Client c(port());
    c.send_all(get("/a"));
    ASSERT_TRUE(c.read_reply());
    server->stop_accepting();
    EXPECT_TRUE(eventually([&] { return !Client(port()).connected(); }));
    c.send_all(get("/b"));
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "GET /b ");
}

// A drain waits on busy_connections: a request under way counts until its answer is sent, an
// idle keep-alive never does.
TEST_F(ServerTest, BusyConnectionsCountRequestsUnderWayNotIdleKeepAlives) {
    handler.on_special = [&](Request, std::shared_ptr<Exchange> ex) {
        std::lock_guard lock(m);
        held = std::move(ex);
    };
    start();
    Client idle(port());
    idle.send_all(get("/a"));
    ASSERT_TRUE(idle.read_reply());
    EXPECT_EQ(server->busy_connections(), 0u);
    Client busy(port());
    busy.send_all(get("/hold"));
    ASSERT_TRUE(eventually([&] {
        std::lock_guard lock(m);
        return held != nullptr;
    }));
    EXPECT_EQ(server->connections(), 2u);
    EXPECT_EQ(server->busy_connections(), 1u);
    server->stop_accepting();
    EXPECT_EQ(server->busy_connections(), 1u);
    {
        std::lock_guard lock(m);
        http::Response r;
        r.body = "held";
        held->reply(std::move(r));
        held.reset();
    }
    auto r = busy.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "held");
    EXPECT_TRUE(eventually([&] { return server->busy_connections() == 0; }));
    EXPECT_EQ(server->connections(), 2u);  // both still open, both idle
}

TEST(HttpServerBind, ParsesListenAddresses) {
    EchoHandler handler;
    std::string error;
    ServerOptions o;
    o.listen = "nonsense";
    EXPECT_FALSE(HttpServer::bind(o, handler, error));
    EXPECT_NE(error.find("nonsense"), std::string::npos);
    o.listen = "127.0.0.1:70000";
    EXPECT_FALSE(HttpServer::bind(o, handler, error));
    o.listen = "[::1]:0";
    auto v6 = HttpServer::bind(o, handler, error);  // IPv6 loopback may be absent in a sandbox
    if (v6) {
        EXPECT_NE(v6->port(), 0);
    }
    o.listen = "127.0.0.1:0";
    auto s = HttpServer::bind(o, handler, error);
    ASSERT_TRUE(s) << error;
    o.listen = "127.0.0.1:" + std::to_string(s->port());
    EXPECT_FALSE(HttpServer::bind(o, handler, error));  // in use
    handler.pool.shutdown();
}

TEST(LoopPost, TasksFromOtherThreadsAllRunInOrder) {
    std::string error;
    auto loop = Loop::create(error);
    ASSERT_TRUE(loop) << error;
    std::thread runner([&] { loop->run(); });
    constexpr int per_thread = 10000;
    std::atomic<int> ran{0};
    std::vector<int> last(4, -1);
    bool ordered = true;  // touched on the loop thread only
    std::vector<std::thread> posters;
    for (int t = 0; t < 4; ++t) {
        posters.emplace_back([&, t] {
            for (int i = 0; i < per_thread; ++i) {
                ASSERT_TRUE(loop->post([&, t, i] {
                    if (last[t] != i - 1) ordered = false;
                    last[t] = i;
                    ran++;
                }));
            }
        });
    }
    for (auto& p : posters) p.join();
    EXPECT_TRUE(eventually([&] { return ran.load() == 4 * per_thread; }));
    EXPECT_TRUE(loop->post([&] { EXPECT_TRUE(loop->in_loop_thread()); }));
    loop->stop();
    runner.join();
    EXPECT_TRUE(ordered);
    EXPECT_FALSE(loop->post([] {}));  // refused once run() returned
}

TEST(LoopTimeout, FiresAfterItsTime) {
    std::string error;
    auto loop = Loop::create(error);
    ASSERT_TRUE(loop) << error;
    struct State {
        Loop* loop;
        Clock::time_point fired;
    } state{loop.get(), {}};
    Completion c;
    c.context = &state;
    c.callback = [](Completion& done) {
        auto* s = static_cast<State*>(done.context);
        EXPECT_EQ(done.result, -ETIME);
        s->fired = Clock::now();
        s->loop->stop();
    };
    auto t0 = Clock::now();
    ASSERT_TRUE(loop->post([&] { loop->timeout(c, 50); }));
    std::thread runner([&] { loop->run(); });
    runner.join();
    EXPECT_GE(state.fired - t0, 45ms);
    EXPECT_LT(state.fired - t0, 1000ms);
}

// Two recvs whose data is already there complete in one reap: while the first callback runs,
// the second completion is still owed its callback, so it reads as in flight (not re-armable).
TEST(LoopCompletion, InFlightUntilItsCallbackRuns) {
    std::string error;
    auto loop = Loop::create(error);
    ASSERT_TRUE(loop) << error;
    int a[2];
    int b[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a), 0);
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b), 0);
    ASSERT_EQ(::write(a[1], "x", 1), 1);
    ASSERT_EQ(::write(b[1], "y", 1), 1);
    struct State {
        Loop* loop;
        Completion first, second;
        char buf_first = 0, buf_second = 0;
        int callbacks = 0;
        bool other_in_flight_at_first = false;
    } st;
    st.loop = loop.get();
    auto on_done = [](Completion& c) {
        auto* s = static_cast<State*>(c.context);
        Completion& other = &c == &s->first ? s->second : s->first;
        if (++s->callbacks == 1) s->other_in_flight_at_first = other.in_flight;
        EXPECT_FALSE(c.in_flight);
        EXPECT_EQ(c.result, 1);
        if (s->callbacks == 2) s->loop->stop();
    };
    for (Completion* c : {&st.first, &st.second}) {
        c->context = &st;
        c->callback = on_done;
    }
    ASSERT_TRUE(loop->post([&] {
        loop->recv(st.first, a[0], &st.buf_first, 1);
        loop->recv(st.second, b[0], &st.buf_second, 1);
    }));
    std::thread runner([&] { loop->run(); });
    runner.join();
    EXPECT_EQ(st.callbacks, 2);
    EXPECT_TRUE(st.other_in_flight_at_first);
    EXPECT_EQ(st.buf_first, 'x');
    EXPECT_EQ(st.buf_second, 'y');
    for (int fd : {a[0], a[1], b[0], b[1]}) ::close(fd);
}

// A busy-polling loop (the node's default) does not sleep between turns: a recv whose data
// arrives while it polls is finished by the task work it runs on the kernel's flag, a send goes
// out at once, and a task posted meanwhile is seen without an eventfd wake-up. 200 round trips
// of one byte with a peer thread, a post on every 50th, then stop() ends the poll promptly.
TEST(LoopBusyPoll, RoundTripsAndPostsArriveWhilePolling) {
    std::string error;
    auto loop = Loop::create(error, 200);
    ASSERT_TRUE(loop) << error;
    int s[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
    constexpr int trips = 200;
    struct State {
        Loop* loop;
        int fd;
        Completion recv_c, send_c;
        char in = 0;
        char out = 0;
        int received = 0;
        std::atomic<int> posted_ran{0};
    } st;
    st.loop = loop.get();
    st.fd = s[0];
    st.recv_c.context = st.send_c.context = &st;
    st.recv_c.callback = [](Completion& c) {
        auto* x = static_cast<State*>(c.context);
        ASSERT_EQ(c.result, 1);
        ++x->received;
        x->out = x->in;
        x->loop->send(x->send_c, x->fd, &x->out, 1);
    };
    st.send_c.callback = [](Completion& c) {
        auto* x = static_cast<State*>(c.context);
        ASSERT_EQ(c.result, 1);
        if (x->received < trips) x->loop->recv(x->recv_c, x->fd, &x->in, 1, true);
    };
    ASSERT_TRUE(loop->post([&] { loop->recv(st.recv_c, st.fd, &st.in, 1, true); }));
    std::thread runner([&] { loop->run(); });
    for (int i = 0; i < trips; ++i) {
        char b = static_cast<char>('a' + i % 26);
        ASSERT_EQ(::write(s[1], &b, 1), 1);
        if (i % 50 == 0) {
            ASSERT_TRUE(loop->post([&] { st.posted_ran++; }));
        }
        char echo = 0;
        ASSERT_EQ(::read(s[1], &echo, 1), 1);
        EXPECT_EQ(echo, b);
    }
    EXPECT_TRUE(eventually([&] { return st.posted_ran.load() == trips / 50; }));
    auto t0 = Clock::now();
    loop->stop();
    runner.join();
    EXPECT_LT(Clock::now() - t0, 1000ms);
    EXPECT_EQ(st.received, trips);
    for (int fd : s) ::close(fd);
}

TEST(WorkerPool, BoundedQueueRefusesWhenFull) {
    WorkerPool pool(1, 2);
    std::mutex gate;
    std::unique_lock hold(gate);
    std::atomic<int> ran{0};
    ASSERT_TRUE(pool.submit([&] {
        std::lock_guard wait(gate);
        ran++;
    }));
    ASSERT_TRUE(eventually([&] { return pool.queued() == 0; }));  // the first is running
    EXPECT_TRUE(pool.submit([&] { ran++; }));
    EXPECT_TRUE(pool.submit([&] { ran++; }));
    EXPECT_FALSE(pool.submit([&] { ran++; }));  // two wait: full
    hold.unlock();
    pool.shutdown();  // runs what was accepted
    EXPECT_EQ(ran, 3);
    EXPECT_FALSE(pool.submit([] {}));
}

}  // namespace
}  // namespace fenec::server::loop_test
