// server/node/image.cc: a tenant's file image on the admin plane (node-http.md §8.3).
//
// GET: the engine's image (Database::image: the whole file at one seq, taken at a block boundary
// with writes going on, vector graphs included) streamed out in chunks through the exchange, at
// most stream_ahead_bytes_max queued at a time, with Content-Length and the Fenec-Seq,
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
// PUT: the body (read whole by the connection, up to --max-image) checked against its digest,
// written to `<t>.fenec.incoming` and fsynced once, verified as the engine replays it from the
// body in memory (never read back from disk), checked against the headers sent with it, renamed
// into place under Registry::OutOfService, so the tenant is absent (404) until then, and left
// open: the database the verification built is the one served (Registry's install_open).
// Any failure answers 400 naming the offset or the header and installs nothing.
#include <xxhash.h>

#include <chrono>
#include <thread>

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

std::string image_digest_hex(const void* data, size_t n) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(data, n));
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(digest_hex_chars);
    for (unsigned char b : c.digest) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

// Writes `bytes` to a started stream, paced by what the connection has sent; ends it.
void stream_out(server::Exchange& ex, const std::vector<std::byte>& bytes) {
    const char* data = reinterpret_cast<const char*>(bytes.data());
    size_t at = 0;
    auto last_progress = std::chrono::steady_clock::now();
    int64_t poll_us = stream_poll_us_min;
    while (at < bytes.size() && !ex.closed()) {
        const size_t n = std::min(stream_chunk_bytes, bytes.size() - at);
        if (ex.pending_bytes() + n <= stream_ahead_bytes_max &&
            ex.write(std::string(data + at, n))) {
            at += n;
            last_progress = std::chrono::steady_clock::now();
            poll_us = stream_poll_us_min;
            continue;
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

// Installs the body under the tenant taken out of service; the answer is made while it is out
// and sent once it is back, so a request after the answer finds it in service.
http::Response install(Node& node, Call& call, const Expected& expected) {
    const std::string& body = call.request.body;
    Registry::TakenOut taken = node.registry().take_out(call.tenant, 0, {});
    if (!taken.out) return node.refusal(409, taken.message);
    if (taken.out->file_exists()) return exists(node, call);

    const std::string incoming = node.registry().path_of(call.tenant) + ".incoming";
    engine::Fs& fs = engine::posix_fs();
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
    engine::ImageInfo info;
    // Written, fsynced once, verified while replayed from the body in memory, renamed, and left
    // open: the first query finds the tenant's indexes built and its graphs loaded.
    engine::Status st = taken.out->install_open(std::as_bytes(std::span(body)), incoming,
                                                engine::InstallMode::create_only, check, info);
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
    return r;
}

}  // namespace

void get_image(Node& node, const std::shared_ptr<Call>& call) {
    Acquired a = node.registry().acquire(call->tenant);
    if (!a.tenant) return node.answer(*call, acquire_refusal(node, a));
    engine::Result<engine::Image> image = a.tenant->db().image();
    a.tenant.reset();  // the image holds its bytes; the tenant may close meanwhile
    if (!image.is_ok()) {
        return node.answer(
            *call, node.refusal(500, "tenant " + call->tenant + ": the image could not be taken: " +
                                         image.status().to_string()));
    }
    const std::vector<std::byte>& bytes = *image->bytes;
    http::Response head;
    head.stream = true;
    head.close = true;
    head.content_type = "application/octet-stream";
    head.header("Content-Length", std::to_string(bytes.size()));
    head.header("Fenec-Seq", std::to_string(image->info.seq.v));
    head.header("Fenec-History", hex16(image->info.history.current().v));
    head.header("Fenec-Lineage", hex16(image->info.lineage.v));
    head.header("Fenec-Image-Digest", image_digest_hex(bytes.data(), bytes.size()));
    node.answer(*call, std::move(head));
    stream_out(*call->exchange, bytes);
}

void put_image(Node& node, Call& call) {
    Expected expected;
    if (auto e = read_expected(call.request.head, expected)) {
        return answer_audited(node, call, node.refusal(400, *e));
    }
    if (node.registry().file_exists(call.tenant))
        return answer_audited(node, call, exists(node, call));
    const std::string& body = call.request.body;
    if (body.empty())
        return answer_audited(node, call, node.refusal(400, "the body holds no image"));
    if (expected.digest) {
        const std::string got = image_digest_hex(body.data(), body.size());
        if (got != *expected.digest) {
            return answer_audited(node, call,
                                  node.refusal(400,
                                               "Fenec-Image-Digest does not match: "
                                               "the body's XXH3-128 is " +
                                                   got));
        }
    }
    answer_audited(node, call, install(node, call, expected));
}

}  // namespace fenec::node
