// server/node/image.cc: a tenant's file image on the admin plane (node-http.md §8.3).
//
// GET: a frozen primary's file is its own image (Database::file_image: nothing built, its graph
// tail written once if stale; a move's source is frozen): hashed in one pass over the file, then
// read from it a chunk at a time as the connection takes them. Otherwise the engine's image
// (Database::image: the whole file at one seq, taken at a block boundary with writes going on,
// vector graphs included) is built and streamed from memory. Either way at most
// stream_ahead_bytes_max is queued at a time, with Content-Length and the Fenec-Seq,
// Fenec-History, Fenec-Lineage and Fenec-Image-Digest headers.
//
// The digest is XXH3-128 over the image's bytes, 32 lowercase hex digits in xxHash's canonical
// (big-endian) order: what `xxhsum -H2` (xxh128sum) prints for the file a client saved.
// node-http.md §8.3 names the header but not the algorithm. It guards a copy against damage in
// transit and on disk, not against a forger: whoever may PUT an image holds the admin token and
// could send any image with its own digest whatever the hash, so a cryptographic hash buys
// nothing here, and SHA-256 over a 69 MB image cost 150-250 ms on each side of a move where
// XXH3-128 costs a few (engine records are checked with XXH3 already).
//
// PUT: the body (up to --max-image) arrives chunk by chunk (HeadVerdict::stream_body,
// server/runtime/body_reader.h) and is hashed on the way. One up to image_in_memory_bytes_max is
// gathered in memory (resident as its bytes arrive, not as its Content-Length declares), then
// written to `<t>.fenec.incoming` past the page cache and fsynced on a thread of its own while the
// engine verifies it as it replays it from memory (never read back: Database::install_open), and
// the tenant is left open: the database the verification built is the one served (Registry's
// install_open), so the first query is warm. The answer's Server-Timing header says where the time
// went (receive, install), which a move reports. An image is any whole file, a built one or a file
// image; a tear in it is corruption, never cut. A larger one is streamed straight to
// `<t>.fenec.incoming` (one chunk in memory at a time), fsynced, and verified as the engine opens
// any file; its first query opens it. Either way it is checked against the headers sent with it
// and renamed into place under Registry::OutOfService, so the tenant is absent (404) until then.
// Any failure answers 400 naming the offset or the header and installs nothing.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stop_token>
#include <system_error>
#include <thread>

#include "engine/aligned_bytes.h"
#include "engine/hash.h"
#include "engine/huge_pages.h"
#include "server/node/admin.h"
#include "server/node/replication.h"
#include "server/node/test_hooks.h"
#include "server/runtime/body_reader.h"

namespace fenec::node {

namespace {

// A GET streams the image in chunks so the answer never holds a second copy of it; at most this
// much waits unsent at a time (under the exchange's 1 MiB stream bound, which refuses past it).
constexpr size_t stream_chunk_bytes = 256 << 10;
constexpr size_t stream_ahead_bytes_max = 768 << 10;
constexpr int64_t stream_stall_ms_max = 60'000;  // no byte taken this long: the peer is gone
// How long the streamer waits for the connection to take bytes before it looks again. Loopback
// drains 768 KiB in ~0.2 ms, so a 1 ms sleep held a 69 MB image to ~700 MB/s; the exchange has
// no writable wake-up for a worker yet, so this polls, finely while bytes move and backing off
// (doubling) to the old 1 ms while the peer takes nothing, so a slow reader costs no busy loop.
constexpr int64_t stream_poll_us_min = 50;
constexpr int64_t stream_poll_us_max = 1000;

constexpr size_t digest_hex_chars = 32;  // XXH3-128

std::string digest_hex(XXH128_hash_t h) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(digest_hex_chars);
    for (unsigned char b : c.digest) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

// The `n` image bytes at `at`, into `out`; false if they could not be read.
using ReadAt = std::function<bool(uint64_t at, size_t n, std::string& out)>;

// Writes `size` bytes read by `read` to a started stream, paced by what the connection has
// sent; ends it. A read that fails ends the stream short, which the peer sees as a body cut.
void stream_out(server::Exchange& ex, uint64_t size, const ReadAt& read) {
    uint64_t at = 0;
    auto last_progress = std::chrono::steady_clock::now();
    int64_t poll_us = stream_poll_us_min;
    std::string chunk;
    while (at < size && !ex.closed()) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(stream_chunk_bytes, size - at));
        if (chunk.empty() && !read(at, n, chunk)) break;
        if (ex.pending_bytes() + n <= stream_ahead_bytes_max) {
            // A refused write queues nothing but has taken the chunk: it is read again.
            const bool queued = ex.write(std::move(chunk));
            chunk.clear();
            if (queued) {
                at += n;
                last_progress = std::chrono::steady_clock::now();
                poll_us = stream_poll_us_min;
                continue;
            }
        }
        if (std::chrono::steady_clock::now() - last_progress >
            std::chrono::milliseconds(stream_stall_ms_max)) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(poll_us));
        poll_us = std::min(poll_us * 2, stream_poll_us_max);
    }
    ex.end();
}

// The headers a PUT may carry, parsed before anything is written.
struct Expected {
    std::optional<std::string> digest;
    std::optional<uint64_t> seq;
    std::optional<uint64_t> lineage;
    bool frozen = false;  // Fenec-Frozen: true: installed frozen (a move's target until it is
                          // the tenant's; shard/handoff.h)
};

std::optional<std::string> read_expected(const http::RequestHead& h, Expected& out) {
    if (auto v = h.header("Fenec-Image-Digest")) {
        std::string d(*v);
        for (char& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (d.size() != digest_hex_chars ||
            d.find_first_not_of("0123456789abcdef") != std::string::npos) {
            return "Fenec-Image-Digest must be 32 hex digits (XXH3-128 of the image, as "
                   "xxhsum -H2 prints it)";
        }
        out.digest = std::move(d);
    }
    if (auto v = h.header("Fenec-Seq")) {
        out.seq = parse_decimal(*v);
        if (!out.seq) return "Fenec-Seq must be a decimal seq, not `" + std::string(*v) + "`";
    }
    if (auto v = h.header("Fenec-Lineage")) {
        out.lineage = engine::format::parse_hex16(*v);
        if (!out.lineage) return "Fenec-Lineage must be 16 lowercase hex digits";
    }
    if (auto v = h.header("Fenec-Frozen")) {
        if (*v != "true" && *v != "false") {
            return "Fenec-Frozen must be `true` or `false`, not `" + std::string(*v) + "`";
        }
        out.frozen = *v == "true";
    }
    return std::nullopt;
}

http::Response exists(Node& node, const Call& call) {
    return node.refusal(409, "tenant `" + call.tenant + "` has a file here: delete it first");
}

// An image up to this size is gathered in memory and installed open (the first query warm);
// a larger one goes to disk a chunk at a time so a node never holds a whole big image, and pays
// one read of the file and a cold first query instead. 1 GiB: a 100,000 x 128-dim tenant with its
// graph is ~70 MB, and a node whose tenants are this large has memory for one being moved in.
constexpr uint64_t image_in_memory_bytes_max = uint64_t{1} << 30;

// The bound above; the test hooks may lower it so a test can send a small image down the on-disk
// path (server/node/test_hooks.h).
uint64_t image_in_memory_max() {
    return test_hooks::image_in_memory_bytes(image_in_memory_bytes_max);
}

// A body received into memory (receive_body's `into`) is asked for this much at a time: each
// slice is hashed soon after it lands, and costs one hop to the loop and back.
constexpr size_t into_slice_bytes = 8 << 20;

// Passes the body to `take` as it arrives (HeadVerdict::stream_body: pulled on this worker),
// hashing it on the way; a refusal if the body did not come whole, `take` failed, or it does not
// match Fenec-Image-Digest. Without `into`, one chunk is in memory at a time. With `into` (room
// for the whole body, `owner` keeping it alive), the connection receives the body straight into
// it a slice at a time (Exchange::read_body_into) and `take` sees each slice where it landed.
std::optional<http::Response> receive_body(
    Node& node, Call& call, const Expected& expected,
    const std::function<engine::Status(std::string_view)>& take, std::span<char> into = {},
    const std::shared_ptr<const void>& owner = nullptr) {
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(),
                                                                 &XXH3_freeState);
    XXH3_128bits_reset(hash.get());
    auto step = [&](std::string_view bytes) {
        XXH3_128bits_update(hash.get(), bytes.data(), bytes.size());
        return take(bytes);
    };
    engine::Status st = engine::Status::ok();
    const std::string& whole = call.request.body;
    if (!whole.empty() && !into.empty()) {  // read whole by the connection (not streamed)
        const size_t n = std::min(whole.size(), into.size());
        std::memcpy(into.data(), whole.data(), n);
        st = step({into.data(), n});
    } else if (!whole.empty()) {
        st = step(whole);
    } else {
        server::BodyReader reader(call.exchange);
        if (into.empty()) {
            while (st.is_ok() && !reader.over()) {
                server::BodyChunk chunk = reader.next();
                if (chunk.failed) {
                    return node.refusal(400, "the image was not received whole: " + chunk.error);
                }
                st = step(chunk.bytes);
            }
        } else {
            // The next slice is asked for before this one is hashed and taken: the connection
            // fills it meanwhile, so the hash and `take` cost the receive nothing.
            auto ask = [&](size_t from) {
                reader.ask_into(into.subspan(from, std::min(into_slice_bytes, into.size() - from)),
                                owner);
            };
            size_t at = 0;  // of `into`
            ask(0);
            for (bool more = true; more && st.is_ok();) {
                server::BodyChunk chunk = reader.wait();
                if (chunk.failed) {
                    return node.refusal(400, "the image was not received whole: " + chunk.error);
                }
                const size_t landed = at;
                at += chunk.filled;
                more = !reader.over();
                if (more && at == into.size()) {
                    return node.refusal(400, "the image runs past its Content-Length");
                }
                if (more) ask(at);
                st = step({into.data() + landed, chunk.filled});
            }
        }
    }
    if (!st.is_ok()) return node.refusal(500, "the image could not be written: " + st.to_string());
    if (!expected.digest) return std::nullopt;
    const std::string got = digest_hex(XXH3_128bits_digest(hash.get()));
    if (got == *expected.digest) return std::nullopt;
    return node.refusal(400, "Fenec-Image-Digest does not match: the body's XXH3-128 is " + got);
}

// `<t>.follows` removed and `<t>.frozen` removed, or written where the image is installed frozen,
// each durably: an image is installed a primary (§8.3), thawed unless asked otherwise, and a mark
// left by the file deleted before it would reopen it frozen or following. Either absent is fine.
engine::Status settle_marks(Node& node, const std::string& tenant, bool frozen) {
    engine::Fs& fs = node.fs();
    if (engine::Status st = fs.remove(node.registry().sidecar_of(tenant, sidecar_follows));
        !st.is_ok() && st.code() != engine::Code::not_found) {
        return st;
    }
    const std::string mark = node.registry().sidecar_of(tenant, sidecar_frozen);
    return frozen ? write_frozen_mark(node, mark) : engine::remove_durably(fs, mark);
}

// How far ahead of the bytes received an in-memory body's pages are faulted in (Prefault): three
// slices past the one the connection is filling (`got` moves a slice at a time), so the loop's
// copy finds its pages there at a receive's ~1.3 GB/s while faulting runs at ~2.5 GB/s. The
// bound on what a body holds resident beyond its bytes: a client that declares 512 MiB and sends
// 1 MiB costs the node 32 MiB, not 512 (issue 17 item 9).
constexpr size_t prefault_ahead_bytes = 4 * into_slice_bytes;

// Faults in a body's buffer on a thread of its own, from the front, up to prefault_ahead_bytes
// past the bytes received so far (received()), so resident memory follows what arrived, not
// what was declared. Without the thread (it could not be started) the receive faults its pages
// as it writes them. Stopped and joined when destroyed; owns a reference to the buffer.
class Prefault {
public:
    Prefault(std::shared_ptr<std::byte[]> buffer, size_t bytes) {
        try {
            thread_ = std::jthread([this, b = std::move(buffer), bytes](std::stop_token stop) {
                run(b.get(), bytes, stop);
            });
        } catch (const std::system_error&) {
        }
    }
    Prefault(const Prefault&) = delete;
    Prefault& operator=(const Prefault&) = delete;

    // `got` bytes of the buffer have arrived: the window moves on.
    void received(uint64_t got) {
        {
            std::lock_guard lock(mu_);
            got_ = got;
        }
        moved_.notify_one();
    }

private:
    void run(std::byte* p, size_t bytes, const std::stop_token& stop) {
        size_t done = 0;
        while (done < bytes) {
            size_t until;
            {
                std::unique_lock lock(mu_);
                // Woken by a move of the window or by the stop.
                if (!moved_.wait(lock, stop, [&] { return window_end(bytes) > done; })) return;
                until = window_end(bytes);
            }
            engine::populate(p + done, until - done);
            done = until;
        }
    }
    size_t window_end(size_t bytes) const {  // under mu_
        return static_cast<size_t>(std::min<uint64_t>(bytes, got_ + prefault_ahead_bytes));
    }

    std::mutex mu_;
    std::condition_variable_any moved_;
    uint64_t got_ = 0;
    std::jthread thread_;  // last: stopped and joined before the members it uses go
};

// A PUT's body received: in memory (`body`, `got` bytes of it, replayed as it came by `begun`,
// charged to the node's memory as it came), or, too large for memory, written to
// `<t>.fenec.incoming` and fsynced (`body` null).
struct Received {
    explicit Received(Registry& registry) : charge(registry) {}
    std::shared_ptr<std::byte[]> body;
    uint64_t got = 0;
    std::unique_ptr<BegunInstall> begun;
    // Given back as the install ends: installed, the tenant's own memory counts the bytes.
    Registry::ArrivingCharge charge;
};

// The body of `length` bytes gathered in memory and hashed, its records replayed as they come
// while the rest arrives; a refusal if it did not come whole or does not match its digest.
std::optional<http::Response> receive_in_memory(Node& node, Call& call, const Expected& expected,
                                                Registry::OutOfService& out, uint64_t length,
                                                Received& received) {
    // Page-aligned (engine::aligned_bytes) so the install can write it past the page cache.
    // Only gathered and hashed here: the install writes it to `incoming` beside its replay, in
    // one direct write (engine::File::append_direct). Written as it came, each chunk cost the
    // receive a copy into the page cache and the node 69 MB of cache pages for a 69 MB image,
    // and the network waited for the receive. Reserved whole but not touched: only the pages
    // the body reaches (and Prefault's window past them) become resident, besides any resident
    // already that a large body takes from the node's pool of freed huge pages (--huge-pool). A
    // large body takes huge pages (engine::huge_bytes, 2 MiB aligned): a fault maps 512 pages at
    // once.
    std::shared_ptr<std::byte[]> body;
    try {
        body = length >= engine::huge_buffer_min
                   ? engine::huge_bytes(static_cast<size_t>(length))
                   : engine::aligned_bytes(static_cast<size_t>(length));
    } catch (const std::bad_alloc&) {
        return node.refusal(503, "no memory for an image of " + std::to_string(length) + " bytes");
    }
    // Its pages faulted in beside the receive, a window ahead of it: the loop's copy then finds
    // them there (a 69 MB body is ~17,000 first touches, ~25 ms of the receive otherwise).
    // Stopped when this function returns.
    Prefault prefault(body, static_cast<size_t>(length));
    // Received straight into `body`; `take` counts, charges, moves the prefault window, and
    // replays the records that are whole now while the next slice arrives (a damaged record
    // found here is kept and answered by the install, as it would be found there).
    received.body = body;
    received.begun = out.begin_install({body.get(), static_cast<size_t>(length)},
                                       std::shared_ptr<const std::byte[]>(body, body.get()));
    uint64_t& got = received.got;
    BegunInstall& begun = *received.begun;
    std::optional<http::Response> refused = receive_body(
        node, call, expected,
        [&](std::string_view bytes) {
            got += bytes.size();
            received.charge.add(bytes.size());
            prefault.received(got);
            (void)begun.feed(got);
            return engine::Status::ok();
        },
        {reinterpret_cast<char*>(body.get()), static_cast<size_t>(length)}, body);
    if (!refused && got != length) {
        refused = node.refusal(400, "the image was not received whole: " + std::to_string(got) +
                                        " of " + std::to_string(length) + " bytes");
    }
    return refused;
}

// The body written to `incoming` as it comes, one chunk in memory at a time, then fsynced; a
// refusal (and `incoming` removed) if it did not come whole, does not match, or was not kept.
std::optional<http::Response> receive_to_disk(Node& node, Call& call, const Expected& expected,
                                              const std::string& incoming) {
    engine::Fs& fs = node.fs();
    auto f = fs.open(incoming, engine::OpenMode::create_truncate);
    if (!f.is_ok()) {
        return node.refusal(500, "the image could not be written: " + f.status().to_string());
    }
    engine::File& file = **f;
    std::optional<http::Response> refused =
        receive_body(node, call, expected, [&](std::string_view bytes) {
            return file.append(std::as_bytes(std::span(bytes.data(), bytes.size())));
        });
    if (!refused) {
        if (engine::Status st = file.sync(); !st.is_ok()) {
            refused = node.refusal(500, "the image could not be written: " + st.to_string());
        }
    }
    if (refused) fs.remove(incoming).ignore();
    return refused;
}

// An install that failed, as its answer: 400 naming the offset of damage or the header that does
// not match, 409 for a file there meanwhile, 500 otherwise. nullopt: installed.
std::optional<http::Response> install_refusal(Node& node, Call& call, const engine::Status& st) {
    if (st.is_ok()) return std::nullopt;
    if (st.code() == engine::Code::corruption) {
        const uint64_t offset = st.detail().offset;
        return node.refusal(400, "the image does not verify: " + std::string(st.message()), {},
                            [&](json::Writer& w) {
                                w.key("offset");
                                w.uint64(offset);
                            });
    }
    if (st.code() == engine::Code::invalid_argument) {
        return node.refusal(400, std::string(st.message()));
    }
    if (st.code() == engine::Code::already_exists) return exists(node, call);
    return node.refusal(500, "the image could not be installed: " + st.to_string());
}

// Installs the body under the tenant taken out of service; the answer is made while it is out
// and sent once it is back, so a request after the answer finds it in service.
http::Response install(Node& node, Call& call, const Expected& expected) {
    // Where the install's time went, answered in a Server-Timing header (`receive`: the first
    // byte taken to the last; `install`: from there to installed, the write and fsync waited for,
    // the replay, the indexes and graphs, the rename), so a move can say it (router.md §7.2).
    const engine::Clock& clock = node.clock();
    const int64_t began_ns = clock.steady_ns();
    auto ms_since = [&clock](int64_t from_ns) {
        return static_cast<double>(clock.steady_ns() - from_ns) / 1e6;
    };
    Registry::TakenOut taken = node.registry().take_out(call.tenant, 0, {});
    if (!taken.out) return node.refusal(409, taken.message);
    if (taken.out->file_exists()) return exists(node, call);

    const std::string incoming = node.registry().path_of(call.tenant) + ".incoming";
    const uint64_t length = call.request.body.empty()
                                ? call.request.head.content_length.value_or(0)
                                : call.request.body.size();
    // One that could never fit under --max-memory goes to disk too: in memory it would be
    // charged to the node past its bound (Registry::ArrivingCharge).
    const uint64_t memory_max = node.options().max_memory_mib << 20;
    const bool in_memory =
        length <= image_in_memory_max() && (memory_max == 0 || length <= memory_max);
    Received received(node.registry());
    if (auto refused = in_memory
                           ? receive_in_memory(node, call, expected, *taken.out, length, received)
                           : receive_to_disk(node, call, expected, incoming)) {
        return std::move(*refused);
    }
    auto check = [&](const engine::ImageInfo& info) {
        if (expected.seq && *expected.seq != info.seq.v) {
            return engine::Status::error(engine::Code::invalid_argument,
                                         "Fenec-Seq is " + std::to_string(*expected.seq) +
                                             ", the image's seq is " + std::to_string(info.seq.v));
        }
        if (expected.lineage && *expected.lineage != info.lineage.v) {
            return engine::Status::error(
                engine::Code::invalid_argument,
                "Fenec-Lineage is " + engine::format::hex16(*expected.lineage) +
                    ", the image's lineage is " + engine::format::hex16(info.lineage.v));
        }
        return engine::Status::ok();
    };
    const double receive_ms = ms_since(began_ns);
    const int64_t received_ns = clock.steady_ns();
    engine::ImageInfo info;
    // In memory: written, fsynced once, verified while replayed from the body, renamed, and left
    // open, so the first query finds the tenant's indexes built and its graphs loaded. On disk:
    // verified as any file is opened, renamed; the first query opens it.
    // The body handed over: the tenant keeps it as its documents' store rather than copying
    // them out of it (Collection::adopt), and frees it with itself.
    const std::span<const std::byte> image(received.body.get(), in_memory ? received.got : 0);
    // Installed a primary following nothing (§8.3), thawed unless Fenec-Frozen asks otherwise:
    // marks a deleted file left behind go (its quota stays), and a frozen install's mark is
    // written, before the install, so a failure refuses an install that has not happened rather
    // than one served already (or served thawed); the tenant is absent meanwhile.
    if (engine::Status gone = settle_marks(node, call.tenant, expected.frozen); !gone.is_ok()) {
        if (!in_memory) node.fs().remove(incoming).ignore();  // received to disk already
        return node.refusal(500, "the image could not be installed: the marks of tenant `" +
                                     call.tenant + "` could not be settled: " + gone.to_string());
    }
    engine::Status st =
        in_memory
            ? taken.out->install_open(image, incoming, engine::InstallMode::create_only, check,
                                      info, expected.frozen, nullptr, std::move(received.begun))
            : taken.out->install(incoming, engine::InstallMode::create_only, check, info);
    received.body.reset();
    if (auto refused = install_refusal(node, call, st)) return std::move(*refused);
    const double install_ms = ms_since(received_ns);
    http::Response r;
    r.status = 201;
    json::Writer w(r.body);
    w.begin_object();
    w.key("installed");
    w.string(call.tenant);
    w.key("seq");
    w.uint64(info.seq.v);
    w.key("history");
    w.string(engine::format::hex16(info.history.current().v));
    w.key("lineage");
    w.string(engine::format::hex16(info.lineage.v));
    w.key("bytes");
    w.uint64(info.bytes);
    w.end_object();
    char timing[96];
    std::snprintf(timing, sizeof timing, "receive;dur=%.1f, install;dur=%.1f", receive_ms,
                  install_ms);
    r.header("Server-Timing", timing);
    return r;
}

// The image's headers, for both kinds of image.
http::Response image_head(const engine::ImageInfo& info, const std::string& digest) {
    http::Response head;
    head.stream = true;
    head.close = true;
    head.content_type = "application/octet-stream";
    head.header("Content-Length", std::to_string(info.bytes));
    head.header("Fenec-Seq", std::to_string(info.seq.v));
    head.header("Fenec-History", engine::format::hex16(info.history.current().v));
    head.header("Fenec-Lineage", engine::format::hex16(info.lineage.v));
    head.header("Fenec-Image-Digest", digest);
    return head;
}

// Reads of the file for the digest go this much at a time: few calls, one buffer that stays
// in the cache-friendly range rather than a second copy of the image.
constexpr size_t digest_read_bytes = 1 << 20;

// The file image's `n` bytes at `at` into `out`: those the database holds in memory from there
// (FileImage::memory), the rest read from the file.
engine::Status read_file_image(const engine::FileImage& fi, uint64_t at, size_t n, std::byte* out) {
    if (at < fi.memory_bytes) {
        const size_t from_memory = static_cast<size_t>(std::min<uint64_t>(n, fi.memory_bytes - at));
        std::memcpy(out, fi.memory.get() + at, from_memory);
        at += from_memory;
        out += from_memory;
        n -= from_memory;
    }
    if (n == 0) return engine::Status::ok();
    return fi.file->read_at(at, {out, n});
}

// A file image: hashed by one pass, then streamed a chunk at a time. The bytes the database
// holds in memory are hashed where they are; the rest are read from the file (its pages are
// usually cached: the tenant was served from them).
void send_file_image(Node& node, const std::shared_ptr<Call>& call, const engine::FileImage& fi) {
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(),
                                                                 &XXH3_freeState);
    XXH3_128bits_reset(hash.get());
    const uint64_t in_memory = std::min(fi.memory_bytes, fi.info.bytes);
    if (in_memory > 0) XXH3_128bits_update(hash.get(), fi.memory.get(), in_memory);
    std::vector<std::byte> buf(
        static_cast<size_t>(std::min<uint64_t>(digest_read_bytes, fi.info.bytes - in_memory)));
    for (uint64_t at = in_memory; at < fi.info.bytes;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), fi.info.bytes - at));
        if (engine::Status st = fi.file->read_at(at, {buf.data(), n}); !st.is_ok()) {
            return node.answer(
                *call, node.refusal(500, "tenant `" + call->tenant +
                                             "`: the image could not be read: " + st.to_string()));
        }
        XXH3_128bits_update(hash.get(), buf.data(), n);
        at += n;
    }
    buf = {};
    node.answer(*call, image_head(fi.info, digest_hex(XXH3_128bits_digest(hash.get()))));
    stream_out(*call->exchange, fi.info.bytes, [&](uint64_t at, size_t n, std::string& out) {
        out.resize(n);
        return read_file_image(fi, at, n, reinterpret_cast<std::byte*>(out.data())).is_ok();
    });
}

}  // namespace

void get_image(Node& node, const std::shared_ptr<Call>& call) {
    Acquired a = node.registry().acquire(call->tenant);
    if (!a.tenant) return node.answer(*call, acquire_refusal(node, a));
    // A frozen primary's file is its own image: read from the file, nothing built.
    engine::Result<std::optional<engine::FileImage>> file = a.tenant->db().file_image();
    if (!file.is_ok()) {
        return node.answer(*call, node.refusal(500, "tenant `" + call->tenant +
                                                        "`: the image could not be taken: " +
                                                        file.status().to_string()));
    }
    if (*file) {
        // The tenant is held until its file is read out: the image reads through the database's
        // own descriptor, which holds the file's lock, so a close meanwhile (idle, or for
        // memory) left the next open refused for that lock until the stream ended, its requests
        // 500 and a move's rollback unable to thaw it. A delete waits for the stream as for any
        // request in flight.
        send_file_image(node, call, **file);
        return;
    }
    engine::Result<engine::Image> image = a.tenant->db().image();
    a.tenant.reset();  // the image holds its bytes; the tenant may close meanwhile
    if (!image.is_ok()) {
        return node.answer(*call, node.refusal(500, "tenant `" + call->tenant +
                                                        "`: the image could not be taken: " +
                                                        image.status().to_string()));
    }
    const std::vector<std::byte>& bytes = *image->bytes;
    const char* data = reinterpret_cast<const char*>(bytes.data());
    const std::string digest = digest_hex(XXH3_128bits(bytes.data(), bytes.size()));
    node.answer(*call, image_head(image->info, digest));
    stream_out(*call->exchange, bytes.size(), [&](uint64_t at, size_t n, std::string& out) {
        out.assign(data + at, n);
        return true;
    });
}

void put_image(Node& node, Call& call) {
    Expected expected;
    if (auto e = read_expected(call.request.head, expected)) {
        return answer_audited(node, call, node.refusal(400, *e));
    }
    if (node.registry().file_exists(call.tenant))
        return answer_audited(node, call, exists(node, call));
    // The body is streamed (Node::check_head): its bytes reach the file in install().
    if (call.request.body.empty() && call.request.head.content_length.value_or(0) == 0)
        return answer_audited(node, call, node.refusal(400, "the body holds no image"));
    // An image installs a primary following nothing (§8.3). A followed copy's follower may run
    // here: a delete of its file keeps `<t>.follows` and starts it again, and left running it
    // would write `<t>.follows` back at its next hello and install its primary's image over
    // this one. It stops first; a refused install leaves the copy following as it was: the
    // marks the install settled before it was refused (`<t>.follows` removed, `<t>.frozen` as
    // Fenec-Frozen said) are put back as they were, so the copy's next image opens as before.
    Replication& repl = node.replication();
    const bool followed = repl.stop_following(call.tenant);
    const std::optional<Follows> follows =
        followed ? repl.read_follows(call.tenant) : std::nullopt;
    const std::string frozen_mark = node.registry().sidecar_of(call.tenant, sidecar_frozen);
    const engine::Result<bool> was_frozen = node.fs().exists(frozen_mark);
    http::Response r = install(node, call, expected);
    if (followed && r.status != 201) {
        if (follows && !repl.read_follows(call.tenant)) {
            (void)repl.write_follows(call.tenant, *follows);
        }
        if (was_frozen.is_ok()) {
            const engine::Result<bool> now = node.fs().exists(frozen_mark);
            if (now.is_ok() && *now != *was_frozen) {
                (void)(*was_frozen ? write_frozen_mark(node, frozen_mark)
                                   : engine::remove_durably(node.fs(), frozen_mark));
            }
        }
        repl.resume_following(call.tenant);
    }
    answer_audited(node, call, std::move(r));
}

}  // namespace fenec::node
