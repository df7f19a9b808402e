// tools/image_files.h: tenant images on the operator's disk, as `fenec backup` writes them and
// `fenec restore` reads them: a folder of `<tenant>.fenec` images and one manifest,
// `fenec-backup.json`, naming each image's tenant, bytes, seq, history, lineage and digest (the
// node's `Fenec-*` headers, docs/http-node.md).
//
// Invariants: an image is written under `<tenant>.fenec.part` and renamed into place only once
// its bytes match the digest its node sent, it replays whole (Database::verify_image) and it is
// fsynced; the folder is fsynced after the rename. The manifest is replaced durably after each
// image lands (engine/io.h's one durable replace), so a run cut anywhere leaves every image the
// manifest names whole, and a second run can tell which are (`whole`).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/hash.h"
#include "engine/io.h"
#include "engine/status.h"
#include "tools/progress.h"

namespace fenec::tools {

inline constexpr std::string_view manifest_name = "fenec-backup.json";
inline constexpr std::string_view image_suffix = ".fenec";
// Bytes read or written at once while an image streams through the tool.
inline constexpr size_t image_chunk_bytes = 1 << 20;
// A manifest larger than this is not one the tool wrote (about 300 bytes an image).
inline constexpr uint64_t manifest_bytes_max = 64ull << 20;

// XXH3-128 over bytes as they come, printed as the node prints Fenec-Image-Digest (32 hex digits,
// xxHash's canonical order, as `xxh128sum` prints it).
class Digest {
  public:
    Digest();
    void update(std::span<const std::byte> bytes);
    std::string hex() const;

  private:
    std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state_;
};

// The digest of the file at `path`, read in chunks (`progress` told of each, when given).
engine::Result<std::string> file_digest(engine::Fs& fs, const std::string& path,
                                        Progress* progress);

// Whether `name` may be a tenant's file name here: what the node takes ([a-z0-9_-], 1 to 64),
// so a name a listing sent can never reach outside the folder.
bool tenant_name_ok(std::string_view name);

struct ImageEntry {
    std::string tenant;
    std::string file;  // the image's name in the folder: `<tenant>.fenec`
    uint64_t bytes = 0;
    uint64_t seq = 0;
    std::string history;   // 16 hex
    std::string lineage;   // 16 hex
    std::string digest;    // 32 hex
    std::string node;      // the node it was taken from (its address, or its name behind a router)
    std::string taken_at;  // ISO-8601 UTC
};

struct Manifest {
    std::string source;  // the URL backed up
    std::vector<ImageEntry> images;

    const ImageEntry* find(std::string_view tenant) const;
    void put(ImageEntry entry);  // replaces the tenant's entry, or adds it
};

// The manifest of `dir`; not_found when there is none, corruption when it does not parse.
engine::Result<Manifest> read_manifest(engine::Fs& fs, const std::string& dir);
engine::Status write_manifest(engine::Fs& fs, const std::string& dir, const Manifest& manifest);

// Whether `dir`'s image for `entry` is whole: there, of its bytes, of its digest.
bool image_whole(engine::Fs& fs, const std::string& dir, const ImageEntry& entry);

// An image being written into place: bytes appended to `<path>.part` (created or emptied),
// then `finish` syncs it, renames it onto `path` and syncs the folder; destroyed unfinished, the
// part file is removed.
class ImageWriter {
  public:
    static engine::Result<std::unique_ptr<ImageWriter>> begin(engine::Fs& fs, std::string path);
    ~ImageWriter();
    engine::Status append(std::span<const std::byte> bytes);
    // Syncs the part file, checks it as a node checks an image it installs (every record
    // replayed: Database::verify_image), then renames it into place and syncs the folder.
    engine::Status finish();
    const std::string& part_path() const { return part_; }

  private:
    ImageWriter(engine::Fs& fs, std::string path, std::unique_ptr<engine::File> file);
    engine::Fs& fs_;
    std::string path_;
    std::string part_;
    std::unique_ptr<engine::File> file_;
    bool finished_ = false;
};

}  // namespace fenec::tools
