// server/node/image.cc: a tenant's file image on the admin plane (node-http.md §8.3).
//
// GET: the engine's image (Database::image: the whole file at one seq, taken at a block boundary
// with writes going on, vector graphs included) streamed out in chunks through the exchange, at
// most stream_ahead_bytes_max queued at a time, with Content-Length and the Fenec-Seq,
// Fenec-History, Fenec-Lineage and Fenec-Image-Digest headers.
//
// The digest is SHA-256 over the image's bytes, 64 lowercase hex digits: what `sha256sum` prints
// for the file a client saved, so anyone can check a copy without our tools.
//
// PUT: the body (up to --max-image) streamed to `<t>.fenec.incoming` chunk by chunk as it arrives
// and hashed on the way (server/body_reader.h), fsynced, verified as the engine opens any file,
// checked against the headers sent with it, and renamed into place under Registry::OutOfService,
// so the tenant is absent (404) until then.
// Any failure answers 400 naming the offset or the header and installs nothing.
#include <openssl/evp.h>

#include <chrono>
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

std::string sha256_hex(const std::byte* data, size_t n) {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    EVP_DigestUpdate(ctx, data, n);
    unsigned char md[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < len; ++i) {
        out += digits[md[i] >> 4];
        out += digits[md[i] & 15];
    }
    return out;
}

// Writes `bytes` to a started stream, paced by what the connection has sent; ends it.
void stream_out(server::Exchange& ex, const std::vector<std::byte>& bytes) {
    const char* data = reinterpret_cast<const char*>(bytes.data());
    size_t at = 0;
    auto last_progress = std::chrono::steady_clock::now();
    while (at < bytes.size() && !ex.closed()) {
        const size_t n = std::min(stream_chunk_bytes, bytes.size() - at);
        if (ex.pending_bytes() + n <= stream_ahead_bytes_max &&
            ex.write(std::string(data + at, n))) {
            at += n;
            last_progress = std::chrono::steady_clock::now();
            continue;
        }
        if (std::chrono::steady_clock::now() - last_progress >
            std::chrono::milliseconds(stream_stall_ms_max)) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
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
        if (d.size() != 64 || d.find_first_not_of("0123456789abcdef") != std::string::npos) {
            return "Fenec-Image-Digest must be 64 hex digits (SHA-256 of the image)";
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

// Writes the body to `file` as it arrives (HeadVerdict::stream_body: one chunk in memory at a
// time, pulled on this worker), hashing it on the way, then fsyncs it; a refusal if the body did
// not come whole, could not be written, or does not match Fenec-Image-Digest.
std::optional<http::Response> receive_body(Node& node, Call& call, engine::File& file,
                                           const Expected& expected) {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    auto take = [&](std::string_view bytes) {
        EVP_DigestUpdate(ctx, bytes.data(), bytes.size());
        return file.append(std::as_bytes(std::span(bytes.data(), bytes.size())));
    };
    std::optional<http::Response> refused;
    engine::Status st = engine::Status::ok();
    if (!call.request.body.empty()) {  // read whole by the connection (not streamed)
        st = take(call.request.body);
    } else {
        server::BodyReader reader(call.exchange);
        while (st.is_ok() && !reader.over()) {
            server::BodyChunk chunk = reader.next();
            if (chunk.failed) {
                refused = node.refusal(400, "the image was not received whole: " + chunk.error);
                break;
            }
            st = take(chunk.bytes);
        }
    }
    if (!refused && st.is_ok()) st = file.sync();
    if (!refused && !st.is_ok()) {
        refused = node.refusal(500, "the image could not be written: " + st.to_string());
    }
    unsigned char md[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    if (refused || !expected.digest) return refused;
    static constexpr char digits[] = "0123456789abcdef";
    std::string got;
    for (unsigned int i = 0; i < len; ++i) {
        got += digits[md[i] >> 4];
        got += digits[md[i] & 15];
    }
    if (got == *expected.digest) return std::nullopt;
    return node.refusal(400, "Fenec-Image-Digest does not match: the body's SHA-256 is " + got);
}

// Installs the body under the tenant taken out of service; the answer is made while it is out
// and sent once it is back, so a request after the answer finds it in service.
http::Response install(Node& node, Call& call, const Expected& expected) {
    Registry::TakenOut taken = node.registry().take_out(call.tenant, 0, {});
    if (!taken.out) return node.refusal(409, taken.message);
    if (taken.out->file_exists()) return exists(node, call);

    const std::string incoming = node.registry().path_of(call.tenant) + ".incoming";
    engine::Fs& fs = engine::posix_fs();
    {
        auto f = fs.open(incoming, engine::OpenMode::create_truncate);
        std::optional<http::Response> refused =
            f.is_ok() ? receive_body(node, call, **f, expected)
                      : node.refusal(500, "the image could not be written: " +
                                              f.status().to_string());
        if (refused) {
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
    engine::ImageInfo info;
    engine::Status st = taken.out->install(incoming, engine::InstallMode::create_only, check, info);
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
    head.header("Fenec-Image-Digest", sha256_hex(bytes.data(), bytes.size()));
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
    // The body is streamed (Node::check_head): its bytes reach the file in install().
    if (call.request.body.empty() && call.request.head.content_length.value_or(0) == 0)
        return answer_audited(node, call, node.refusal(400, "the body holds no image"));
    answer_audited(node, call, install(node, call, expected));
}

}  // namespace fenec::node
