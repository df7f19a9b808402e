// engine/io.h: the I/O seam. The engine reaches the disk only through File and Fs, so tests can
// inject short writes, torn writes, fsync failures and crashes (test/support/fault_fs.h).
// Contract: read_at reads all or fails; append writes all or fails, possibly leaving a prefix
// of the bytes in the file (a torn write); sync is fdatasync; nothing here retries a failed sync.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "engine/status.h"

namespace fenec::engine {

enum class OpenMode : uint8_t {
    read_only,       // the file must exist
    read_write,      // the file must exist; appends go to its end
    create_new,      // the file must not exist (already_exists)
    create_truncate, // created or emptied
};

class File {
public:
    virtual ~File() = default;
    virtual Result<uint64_t> size() = 0;
    virtual Status read_at(uint64_t offset, std::span<std::byte> out) = 0;
    virtual Status append(std::span<const std::byte> data) = 0;
    virtual Status sync() = 0;
    virtual Status truncate(uint64_t size) = 0;
    // As append, for a long run of bytes nobody reads back through the file soon (an image
    // installed from memory): where the file system, the offset and the bytes' alignment allow,
    // written past the page cache (POSIX: O_DIRECT, the aligned prefix; the rest by append), so
    // no CPU copies them and no cache page is allocated for them. Durable only after sync, as
    // append is. A file without it appends.
    virtual Status append_direct(std::span<const std::byte> data) { return append(data); }
};

class Fs {
public:
    virtual ~Fs() = default;
    virtual Result<std::unique_ptr<File>> open(std::string_view path, OpenMode mode) = 0;
    // Exclusive, non-blocking advisory lock held while the File lives; `busy` if taken.
    virtual Status lock(File& file) = 0;
    // replace=false fails with already_exists when `to` exists.
    virtual Status rename(std::string_view from, std::string_view to, bool replace) = 0;
    virtual Status sync_dir(std::string_view dir) = 0;
    virtual Status remove(std::string_view path) = 0;
    virtual Result<bool> exists(std::string_view path) = 0;
};

// The directory part of a path ("." when it has none).
std::string dir_of(std::string_view path);

// The default: POSIX calls, O_CLOEXEC, flock, write looped over short writes and EINTR,
// fdatasync, renameat2(RENAME_NOREPLACE), fsync of the directory.
Fs& posix_fs();

}  // namespace fenec::engine
