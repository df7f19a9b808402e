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
// server/body_reader.h) and is hashed on the way. One up to image_in_memory_bytes_max is gathered
// in memory and written to `<t>.fenec.incoming` as it comes (its write-back started every
// write_behind_bytes, so the disk writes while the network sends), then fsynced once -- the tail
// only is left by then -- while the engine verifies it as it replays it from memory (never read
// back), and the tenant is left open: the database the verification built is the one served
// (Registry's install_open), so the first query is warm. The answer's Server-Timing header says
// where the time went (receive, install), which a move reports. An image is any whole file, a
// built one or a file image; a tear in it is corruption, never cut. A
// larger one is streamed straight to `<t>.fenec.incoming` (one chunk in memory at a time),
// fsynced, and verified as the engine opens any file; its first query opens it. Either way it is
// checked against the headers sent with it and renamed into place under Registry::OutOfService,
// so the tenant is absent (404) until then.
// Any failure answers 400 naming the offset or the header and installs nothing.
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "server/body_reader.h"
#include "server/node/admin.h"

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
        out.lineage = parse_hex16(*v);
        if (!out.lineage) return "Fenec-Lineage must be 16 lowercase hex digits";
    }
    return std::nullopt;
}

http::Response exists(Node& node, const Call& call) {
    return node.refusal(409, "tenant " + call.tenant + " has a file here: delete it first");
}

// An image up to this size is gathered in memory and installed open (the first query warm);
// a larger one goes to disk a chunk at a time so a node never holds a whole big image, and pays
// one read of the file and a cold first query instead. 1 GiB: a 100,000 x 128-dim tenant with its
// graph is ~70 MB, and a node whose tenants are this large has memory for one being moved in.
constexpr uint64_t image_in_memory_bytes_max = uint64_t{1} << 30;

// A body gathered in memory is written to `incoming` as it arrives and its write-back started
// each time this much more has been written: large enough that the disk gets long runs, small
// enough that little is left for the final fsync (4 MiB: ~5 ms of this disk's writing).
constexpr uint64_t write_behind_bytes = 4 << 20;

// The bound above; a test-hook build reads FENEC_TEST_IMAGE_IN_MEMORY_BYTES from the environment
// so a test can send a small image down the on-disk path.
uint64_t image_in_memory_max() {
#ifdef FENEC_TEST_HOOKS
    if (const char* v = std::getenv("FENEC_TEST_IMAGE_IN_MEMORY_BYTES")) {
        if (auto n = parse_decimal(v)) return *n;
    }
#endif
    return image_in_memory_bytes_max;
}

// Passes the body to `take` as it arrives (HeadVerdict::stream_body: one chunk in memory at a
// time, pulled on this worker), hashing it on the way; a refusal if the body did not come whole,
// `take` failed, or it does not match Fenec-Image-Digest.
std::optional<http::Response> receive_body(
    Node& node, Call& call, const Expected& expected,
    const std::function<engine::Status(std::string_view)>& take) {
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(),
                                                                 &XXH3_freeState);
    XXH3_128bits_reset(hash.get());
    auto step = [&](std::string_view bytes) {
        XXH3_128bits_update(hash.get(), bytes.data(), bytes.size());
        return take(bytes);
    };
    engine::Status st = engine::Status::ok();
    if (!call.request.body.empty()) {  // read whole by the connection (not streamed)
        st = step(call.request.body);
    } else {
        server::BodyReader reader(call.exchange);
        while (st.is_ok() && !reader.over()) {
            server::BodyChunk chunk = reader.next();
            if (chunk.failed) {
                return node.refusal(400, "the image was not received whole: " + chunk.error);
            }
            st = step(chunk.bytes);
        }
    }
    if (!st.is_ok()) return node.refusal(500, "the image could not be written: " + st.to_string());
    if (!expected.digest) return std::nullopt;
    const std::string got = digest_hex(XXH3_128bits_digest(hash.get()));
    if (got == *expected.digest) return std::nullopt;
    return node.refusal(400, "Fenec-Image-Digest does not match: the body's XXH3-128 is " + got);
}

// Installs the body under the tenant taken out of service; the answer is made while it is out
// and sent once it is back, so a request after the answer finds it in service.
http::Response install(Node& node, Call& call, const Expected& expected) {
    // Where the install's time went, answered in a Server-Timing header (`receive`: the first
    // byte taken to the last written; `install`: from there to installed, the fsync waited for,
    // the replay, the indexes and graphs, the rename), so a move can say it (router.md §7.2).
    const auto began = std::chrono::steady_clock::now();
    auto ms_since = [](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t)
            .count();
    };
    Registry::TakenOut taken = node.registry().take_out(call.tenant, 0, {});
    if (!taken.out) return node.refusal(409, taken.message);
    if (taken.out->file_exists()) return exists(node, call);

    const std::string incoming = node.registry().path_of(call.tenant) + ".incoming";
    engine::Fs& fs = engine::posix_fs();
    const uint64_t length = call.request.body.empty()
                                ? call.request.head.content_length.value_or(0)
                                : call.request.body.size();
    const bool in_memory = length <= image_in_memory_max();
    std::vector<std::byte> body;
    std::unique_ptr<engine::File> written;  // in memory: `incoming`, written as the body came
    {
        std::optional<http::Response> refused;
        if (in_memory) {
            // Each chunk is kept for the replay and written to `incoming` as it comes, its
            // write-back started every write_behind_bytes, so the fsync after the last byte
            // waits for the tail only and the disk works while the network does.
            auto f = fs.open(incoming, engine::OpenMode::create_truncate);
            engine::Status st = f.is_ok() ? fs.lock(**f) : f.status();
            if (!st.is_ok()) {
                if (f.is_ok()) fs.remove(incoming).ignore();
                return node.refusal(500, "the image could not be written: " + st.to_string());
            }
            written = std::move(*f);
            body.reserve(length);
            uint64_t behind = 0;  // written back from here on is not yet asked for
            refused = receive_body(node, call, expected, [&](std::string_view bytes) {
                const auto* b = reinterpret_cast<const std::byte*>(bytes.data());
                body.insert(body.end(), b, b + bytes.size());
                FENEC_RETURN_IF_ERROR(written->append(std::as_bytes(std::span(bytes))));
                if (body.size() - behind >= write_behind_bytes) {
                    FENEC_RETURN_IF_ERROR(written->write_behind(behind, body.size() - behind));
                    behind = body.size();
                }
                return engine::Status::ok();
            });
        } else {
            auto f = fs.open(incoming, engine::OpenMode::create_truncate);
            if (!f.is_ok()) {
                return node.refusal(500, "the image could not be written: " + f.status().to_string());
            }
            engine::File& file = **f;
            refused = receive_body(node, call, expected, [&](std::string_view bytes) {
                return file.append(std::as_bytes(std::span(bytes.data(), bytes.size())));
            });
            if (!refused) {
                if (engine::Status st = file.sync(); !st.is_ok()) {
                    refused = node.refusal(500, "the image could not be written: " + st.to_string());
                }
            }
        }
        if (refused) {
            written.reset();
            fs.remove(incoming).ignore();
            return std::move(*refused);
        }
    }
    auto check = [&](const engine::ImageInfo& info) {
        if (expected.seq && *expected.seq != info.seq.v) {
            return engine::Status::error(engine::Code::invalid_argument,
                                         "Fenec-Seq is " + std::to_string(*expected.seq) +
                                             ", the image's seq is " + std::to_string(info.seq.v));
        }
        if (expected.lineage && *expected.lineage != info.lineage.v) {
            return engine::Status::error(engine::Code::invalid_argument,
                                         "Fenec-Lineage is " + hex16(*expected.lineage) +
                                             ", the image's lineage is " + hex16(info.lineage.v));
        }
        return engine::Status::ok();
    };
    const double receive_ms = ms_since(began);
    const auto received = std::chrono::steady_clock::now();
    engine::ImageInfo info;
    // In memory: written, fsynced once, verified while replayed from the body, renamed, and left
    // open, so the first query finds the tenant's indexes built and its graphs loaded. On disk:
    // verified as any file is opened, renamed; the first query opens it.
    // The body handed over: the tenant keeps it as its documents' store rather than copying
    // them out of it (Collection::adopt), and frees it with itself.
    auto owned = std::make_shared<std::vector<std::byte>>(std::move(body));
    std::span<const std::byte> image(*owned);
    engine::Status st =
        in_memory ? taken.out->install_open(image, incoming, engine::InstallMode::create_only,
                                            check, info, std::move(written),
                                            std::shared_ptr<const std::byte[]>(owned, owned->data()))
                  : taken.out->install(incoming, engine::InstallMode::create_only, check, info);
    owned.reset();
    if (st.code() == engine::Code::corruption) {
        const uint64_t offset = st.detail().offset;
        return node.refusal(400, "the image does not verify: " + std::string(st.message()), {},
                            [&](ql::JsonWriter& w) {
                                w.key("offset");
                                w.uint64(offset);
                            });
    }
    if (st.code() == engine::Code::invalid_argument) {
        return node.refusal(400, std::string(st.message()));
    }
    if (st.code() == engine::Code::already_exists) return exists(node, call);
    if (!st.is_ok()) {
        return node.refusal(500, "the image could not be installed: " + st.to_string());
    }
    // Installed a primary, thawed, following nothing (§8.3): marks a deleted file left behind go;
    // its quota stays. Removed before it is back in service, so no request sees it otherwise.
    for (std::string_view s : {sidecar_frozen, sidecar_follows}) {
        fs.remove(node.registry().sidecar_of(call.tenant, s)).ignore();
    }
    fs.sync_dir(node.options().data_dir).ignore();
    const double install_ms = ms_since(received);
    http::Response r;
    r.status = 201;
    ql::JsonWriter w(r.body);
    w.begin_object();
    w.key("installed");
    w.string(call.tenant);
    w.key("seq");
    w.uint64(info.seq.v);
    w.key("history");
    w.string(hex16(info.history.current().v));
    w.key("lineage");
    w.string(hex16(info.lineage.v));
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
    head.header("Fenec-History", hex16(info.history.current().v));
    head.header("Fenec-Lineage", hex16(info.lineage.v));
    head.header("Fenec-Image-Digest", digest);
    return head;
}

// Reads of the file for the digest go this much at a time: few calls, one buffer that stays
// in the cache-friendly range rather than a second copy of the image.
constexpr size_t digest_read_bytes = 1 << 20;

// A file image: hashed by one pass over the file (its pages are in the page cache, the tenant
// having been served from them), then streamed from it a chunk at a time.
void send_file_image(Node& node, const std::shared_ptr<Call>& call, const engine::FileImage& fi) {
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(),
                                                                 &XXH3_freeState);
    XXH3_128bits_reset(hash.get());
    std::vector<std::byte> buf(static_cast<size_t>(std::min<uint64_t>(digest_read_bytes,
                                                                       fi.info.bytes)));
    for (uint64_t at = 0; at < fi.info.bytes;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), fi.info.bytes - at));
        if (engine::Status st = fi.file->read_at(at, {buf.data(), n}); !st.is_ok()) {
            return node.answer(*call, node.refusal(500, "tenant " + call->tenant +
                                                            ": the image could not be read: " +
                                                            st.to_string()));
        }
        XXH3_128bits_update(hash.get(), buf.data(), n);
        at += n;
    }
    buf = {};
    node.answer(*call, image_head(fi.info, digest_hex(XXH3_128bits_digest(hash.get()))));
    stream_out(*call->exchange, fi.info.bytes, [&](uint64_t at, size_t n, std::string& out) {
        out.resize(n);
        return fi.file->read_at(at, std::as_writable_bytes(std::span(out.data(), n))).is_ok();
    });
}

}  // namespace

void get_image(Node& node, const std::shared_ptr<Call>& call) {
    Acquired a = node.registry().acquire(call->tenant);
    if (!a.tenant) return node.answer(*call, acquire_refusal(node, a));
    // A frozen primary's file is its own image: read from the file, nothing built.
    engine::Result<std::optional<engine::FileImage>> file = a.tenant->db().file_image();
    if (!file.is_ok()) {
        return node.answer(
            *call, node.refusal(500, "tenant " + call->tenant + ": the image could not be taken: " +
                                         file.status().to_string()));
    }
    if (*file) {
        a.tenant.reset();  // the image holds the file; the tenant may close meanwhile
        return send_file_image(node, call, **file);
    }
    engine::Result<engine::Image> image = a.tenant->db().image();
    a.tenant.reset();  // the image holds its bytes; the tenant may close meanwhile
    if (!image.is_ok()) {
        return node.answer(
            *call, node.refusal(500, "tenant " + call->tenant + ": the image could not be taken: " +
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
    answer_audited(node, call, install(node, call, expected));
}

}  // namespace fenec::node
