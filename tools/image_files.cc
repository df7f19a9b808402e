// tools/image_files.cc: images and their manifest on the operator's disk (tools/image_files.h).
#include "tools/image_files.h"

#include <simdjson.h>

#include "engine/database.h"
#include "json/writer.h"

namespace fenec::tools {

using engine::Code;
using engine::Fs;
using engine::Result;
using engine::Status;

Digest::Digest() : state_(XXH3_createState(), &XXH3_freeState) { XXH3_128bits_reset(state_.get()); }

void Digest::update(std::span<const std::byte> bytes) {
    XXH3_128bits_update(state_.get(), bytes.data(), bytes.size());
}

std::string Digest::hex() const {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(state_.get()));
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : c.digest) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

Result<std::string> file_digest(Fs& fs, const std::string& path, Progress* progress) {
    FENEC_ASSIGN_OR_RETURN(std::unique_ptr<engine::File> file,
                           fs.open(path, engine::OpenMode::read_only));
    FENEC_ASSIGN_OR_RETURN(uint64_t size, file->size());
    std::vector<std::byte> buf(image_chunk_bytes);
    Digest d;
    for (uint64_t at = 0; at < size;) {
        const uint64_t n = std::min<uint64_t>(buf.size(), size - at);
        FENEC_RETURN_IF_ERROR(file->read_at(at, {buf.data(), n}));
        d.update({buf.data(), n});
        at += n;
        if (progress) progress->add(n);
    }
    return d.hex();
}

bool tenant_name_ok(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    for (char c : name) {
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
            return false;
        }
    }
    return true;
}

const ImageEntry* Manifest::find(std::string_view tenant) const {
    for (const ImageEntry& e : images) {
        if (e.tenant == tenant) return &e;
    }
    return nullptr;
}

void Manifest::put(ImageEntry entry) {
    for (ImageEntry& e : images) {
        if (e.tenant == entry.tenant) {
            e = std::move(entry);
            return;
        }
    }
    images.push_back(std::move(entry));
}

Result<Manifest> read_manifest(Fs& fs, const std::string& dir) {
    const std::string path = dir + "/" + std::string(manifest_name);
    FENEC_ASSIGN_OR_RETURN(std::string text, engine::read_small(fs, path, manifest_bytes_max));
    const auto bad = [&](std::string_view what) {
        return Status::error(Code::corruption,
                             path + " is not a backup manifest: " + std::string(what));
    };
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(text).get(doc)) return bad("not JSON");
    Manifest m;
    std::string_view s;
    if (!doc["source"].get_string().get(s)) m.source = std::string(s);
    simdjson::dom::array images;
    if (doc["images"].get_array().get(images)) return bad("no `images` array");
    for (simdjson::dom::element e : images) {
        ImageEntry x;
        const auto text_of = [&](const char* key, std::string& into) {
            std::string_view v;
            if (e[key].get_string().get(v)) return false;
            into = std::string(v);
            return true;
        };
        if (!text_of("tenant", x.tenant) || !text_of("file", x.file) ||
            !text_of("digest", x.digest) || e["bytes"].get_uint64().get(x.bytes) ||
            e["seq"].get_uint64().get(x.seq)) {
            return bad("an image without tenant, file, bytes, seq and digest");
        }
        if (!tenant_name_ok(x.tenant) || x.file != x.tenant + std::string(image_suffix)) {
            return bad("an image named `" + x.file + "` for tenant `" + x.tenant + "`");
        }
        text_of("history", x.history);
        text_of("lineage", x.lineage);
        text_of("node", x.node);
        text_of("taken_at", x.taken_at);
        m.images.push_back(std::move(x));
    }
    return m;
}

Status write_manifest(Fs& fs, const std::string& dir, const Manifest& m) {
    std::string out;
    json::Writer w(out);
    w.begin_object();
    w.key("fenec_backup");
    w.uint64(1);
    w.key("source");
    w.string(m.source);
    w.key("images");
    w.begin_array();
    for (const ImageEntry& e : m.images) {
        w.begin_object();
        w.key("tenant");
        w.string(e.tenant);
        w.key("file");
        w.string(e.file);
        w.key("bytes");
        w.uint64(e.bytes);
        w.key("seq");
        w.uint64(e.seq);
        w.key("history");
        w.string(e.history);
        w.key("lineage");
        w.string(e.lineage);
        w.key("digest");
        w.string(e.digest);
        w.key("node");
        w.string(e.node);
        w.key("taken_at");
        w.string(e.taken_at);
        w.end_object();
    }
    w.end_array();
    w.end_object();
    out += '\n';
    return engine::replace_durably(fs, dir + "/" + std::string(manifest_name), out);
}

bool image_whole(Fs& fs, const std::string& dir, const ImageEntry& entry) {
    const std::string path = dir + "/" + entry.file;
    auto size = fs.file_size(path);
    if (!size.is_ok() || *size != entry.bytes) return false;
    Progress progress("check " + entry.tenant, entry.bytes);
    auto digest = file_digest(fs, path, &progress);
    return digest.is_ok() && *digest == entry.digest;
}

Result<std::unique_ptr<ImageWriter>> ImageWriter::begin(Fs& fs, std::string path) {
    FENEC_ASSIGN_OR_RETURN(std::unique_ptr<engine::File> file,
                           fs.open(path + ".part", engine::OpenMode::create_truncate));
    return std::unique_ptr<ImageWriter>(new ImageWriter(fs, std::move(path), std::move(file)));
}

ImageWriter::ImageWriter(Fs& fs, std::string path, std::unique_ptr<engine::File> file)
    : fs_(fs), path_(std::move(path)), part_(path_ + ".part"), file_(std::move(file)) {}

ImageWriter::~ImageWriter() {
    file_.reset();
    if (!finished_) fs_.remove(part_).ignore();
}

Status ImageWriter::append(std::span<const std::byte> bytes) { return file_->append(bytes); }

Status ImageWriter::finish() {
    FENEC_RETURN_IF_ERROR(file_->sync());
    file_.reset();
    FENEC_ASSIGN_OR_RETURN(engine::ImageInfo info, engine::Database::verify_image(fs_, part_));
    (void)info;
    FENEC_RETURN_IF_ERROR(fs_.rename(part_, path_, true));
    finished_ = true;
    return fs_.sync_dir(engine::dir_of(path_));
}

}  // namespace fenec::tools
