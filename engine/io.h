// engine/io.h: the I/O seam. The engine reaches the disk only through File and Fs, and so does
// every process built on it (the node's side files and state file, its data directory), so tests
// can inject short writes, torn writes, fsync failures and crashes (test/support/fault_fs.h).
// Contract: read_at reads all or fails; append writes all or fails, possibly leaving a prefix
// of the bytes in the file (a torn write); sync is fdatasync; nothing here retries a failed sync.
// A small file replaced whole goes through the one durable replace below (replace_durably).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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
    // After a flush of the whole file system (Fs::sync_fs) covered this file's bytes: a
    // write-back error of them, which that flush may have reported to another caller, reported
    // here (POSIX: sync_file_range(SYNC_FILE_RANGE_WAIT_BEFORE), which returns the file's own
    // write-back errors not yet seen through this handle, and writes nothing). A file without it
    // syncs, which is right, only dearer.
    virtual Status check_written() { return sync(); }
    virtual Status truncate(uint64_t size) = 0;
    // As append, for a long run of bytes nobody reads back through the file soon (an image
    // installed from memory): where the file system, the offset and the bytes' alignment allow,
    // written past the page cache (POSIX: O_DIRECT, the aligned prefix; the rest by append), so
    // no CPU copies them and no cache page is allocated for them. Durable only after sync, as
    // append is. A file without it appends.
    virtual Status append_direct(std::span<const std::byte> data) { return append(data); }
    // Room: `ahead` bytes of zeros kept written past the last append, so that appends land in
    // blocks the file already has and, once the zeros' own sync is past, an fdatasync writes the
    // data alone: no size to record, no block to allocate, so no inode write (and, on a journaled
    // file system, no journal commit). The zeros are written half the room at a time as appends
    // use it up, on the appending thread, and made durable by the next sync; size() and append()
    // keep to the end of the appends. keep_room(0) cuts the room off: the file ends at its last
    // append again. A crash leaves the room as a zero-filled tail, which an open cuts as a torn
    // tail (engine.md §6.2); a power cut mid-flush may leave holes before later appends, which
    // an open tells from damage by the records' durable stamps (file-format.md §6). Best effort: room that cannot be written (a full disk) is given up,
    // and appends go on as they would without it; only a failed cut is an error. A file without
    // it keeps none.
    virtual Status keep_room(uint64_t ahead) {
        (void)ahead;
        return Status::ok();
    }
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
    // Everything written to the file system that holds directory `dir` made durable, every
    // file's bytes and names (POSIX: syncfs(2) on the directory; it reports write-back errors
    // since Linux 5.8). One device flush for a whole data directory where a sync of each file
    // would be one each (Registry::mark_durable_at_start).
    virtual Status sync_fs(std::string_view dir) = 0;
    virtual Status remove(std::string_view path) = 0;
    virtual Result<bool> exists(std::string_view path) = 0;
    // The size of the file at `path` (not_found when there is none).
    virtual Result<uint64_t> file_size(std::string_view path) = 0;
    // The names (not paths) of the entries of directory `dir`, in no order ("." and ".." left
    // out); not_found when `dir` is absent.
    virtual Result<std::vector<std::string>> list(std::string_view dir) = 0;
    // Creates directory `dir` and every parent it lacks; ok when it exists.
    virtual Status make_dirs(std::string_view dir) = 0;
};

// The directory part of a path ("." when it has none).
std::string dir_of(std::string_view path);

// The temp file replace_durably writes beside `path`: `<path>.new`. Never a file anyone reads:
// a process starting over may remove what a crash left under such a name.
inline constexpr std::string_view replace_temp_suffix = ".new";

// The one durable replace: `path` holds `bytes` afterwards, and a crash at any point leaves the
// old content or the new one whole, never a mix or an empty file. Steps, each result checked and
// the first failure returned with nothing after it done: `<path>.new` created or emptied, `bytes`
// appended (File::append, short writes looped), synced, closed; renamed over `path`; `path`'s
// directory synced. A failure before the rename leaves `path` untouched (the temp is removed
// when it can be); a failure of the directory sync leaves the new content under `path` but not
// durable: in both cases the caller must not act as if the content were kept.
Status replace_durably(Fs& fs, std::string_view path, std::span<const std::byte> bytes);
Status replace_durably(Fs& fs, std::string_view path, std::string_view text);
// `path` removed, and the removal made durable: its directory synced, also when `path` was
// already gone (an earlier removal whose directory sync failed is made durable by the next).
Status remove_durably(Fs& fs, std::string_view path);
// The whole of a small file (a side file, a state file). not_found when it is absent; past
// `bytes_max` limit_exceeded naming the file and its size (not written by this process whole).
Result<std::string> read_small(Fs& fs, std::string_view path, uint64_t bytes_max);

// The default: POSIX calls, O_CLOEXEC, flock, write looped over short writes and EINTR,
// fdatasync, renameat2(RENAME_NOREPLACE), fsync of the directory.
Fs& posix_fs();

// The group and other permission bits of `path` (`st_mode & 077`), 0 when only its owner may
// reach it; not_found when it is absent. For a warning at start: PosixFs creates files 0600 and
// directories 0700, but a folder a user made, or a file from an older version, may be wider.
Result<uint32_t> others_may_access(std::string_view path);

}  // namespace fenec::engine
