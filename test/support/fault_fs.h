// test/support/fault_fs.h: FaultFs, the in-memory Fs that crash and fault tests run the engine
// on (engine.md §14). It owns a namespace of in-memory files and the model of what survives a
// crash; it injects failed and torn appends, failed syncs, renames and directory syncs, stalled
// syncs and a power cut after N bytes; it counts calls.
//
// The durability model, which crash() applies:
// - File contents. Each file is written bytes plus a synced length: the prefix that a sync
//   covered. A sync covers the bytes present when it began (bytes appended while it runs, or
//   while it is stalled, are not covered). A truncate is durable at once: it also lowers the
//   synced length. Reads see every written byte, synced or not (the page cache).
// - Names. open(create_new / create_truncate) and set_contents() make a name durable at once.
//   rename() and remove() change the live namespace at once but become durable only when
//   sync_dir() is called on the directory (dir_of) of the name: sync_dir(d) makes the live
//   entries of d durable. A crash before that finds the old names (the removed file back, the
//   renamed file under its old name, a replaced target's old content). Paths are compared as
//   strings: the engine must name a file and its directory consistently. Directories themselves
//   are not modelled: creating a file never needs its directory to exist, make_dirs() only
//   succeeds (or fails after a power cut), and list() of a directory names the live files whose
//   path has it as dir_of (none is no error).
// - crash(mode, k) replaces the live namespace by the durable one, each file cut or zeroed per
//   the mode and then fully synced; handles opened before it are dead (every call on them fails
//   with EIO), their locks gone. Stalls and armed faults are kept; the power cut is cleared.
// - check_written (after a group round's sync_fs) syncs nothing: it fails as fail_check_written
//   arms it (a write-back error of that file), on a dead handle and after a power cut.
//
// Faults: fail_append / fail_sync / fail_rename / fail_sync_dir / fail_sync_fs / fail_check_written
// count calls of their kind from the moment they are armed (the next call is 1) and fire once;
// fail_lists holds until turned off. A failed append leaves `after_bytes` of its data in the file
// (a torn write); a failed sync covers nothing; a failed rename, sync_dir or sync_fs changes
// nothing. Counters count every call, failed ones included. fail_path aims at one name: the n-th
// open, read, stat or unlink of exactly that path from now fails, once, and changes nothing (the
// steps a tenant's open and a side file's read take, which a count over every file does not reach
// reliably among the node's other files).
//
// Thread-safe: one mutex guards everything; a stalled sync waits on a condition variable with
// the mutex released. Files opened from a FaultFs must not outlive it.
#pragma once

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/io.h"

namespace fenec::test {

class FaultFs final : public engine::Fs {
public:
    enum class CrashMode {
        synced_only,  // each file keeps its synced bytes
        prefix,       // synced bytes plus the first k unsynced bytes
        all,          // every written byte
        zero_tail,    // every byte, but the last k unsynced bytes read zero
        // Every byte, the file's size kept, but each page (kCrashPageBytes, at file offsets) past
        // the synced length read zero where it never reached the disk, at random from the seed
        // k: a power cut during a flush of bytes written over room (File::keep_room), where the
        // size was durable already and pages go out in any order.
        scattered,
        // Every byte, the file's size kept, but the page (kCrashPageBytes) that held the synced
        // length, partly filled, reads as the last sync left it: zeros from the synced length to
        // the page's end. A power cut during a flush of appends past the end, as ext4 in
        // data=ordered mode can leave it: blocks newly allocated to the appends reach the disk
        // before the size that covers them (the journal's ordered-data list), but the block the
        // last sync left partly filled is rewritten in place, outside that list, so a commit of
        // the size (another file's fsync, the journal's timer) can come before it.
        stale_tail_page,
    };
    static constexpr uint64_t kCrashPageBytes = 4096;

    FaultFs();
    ~FaultFs() override;
    FaultFs(const FaultFs&) = delete;
    FaultFs& operator=(const FaultFs&) = delete;

    // engine::Fs
    engine::Result<std::unique_ptr<engine::File>> open(std::string_view path,
                                                       engine::OpenMode mode) override;
    // Exclusive per file among live handles (a renamed file keeps its lock, like flock on an
    // inode); released when the File is destroyed or by crash(). A foreign File: invalid_argument.
    engine::Status lock(engine::File& file) override;
    engine::Status rename(std::string_view from, std::string_view to, bool replace) override;
    engine::Status sync_dir(std::string_view dir) override;
    // The whole FaultFs is one file system: every file's bytes synced and the live namespace
    // made the durable one. Fails (changing nothing) as fail_sync_fs arms it and after a power
    // cut.
    engine::Status sync_fs(std::string_view dir) override;
    engine::Status remove(std::string_view path) override;
    engine::Result<bool> exists(std::string_view path) override;
    engine::Result<uint64_t> file_size(std::string_view path) override;
    engine::Result<std::vector<std::string>> list(std::string_view dir) override;
    engine::Status make_dirs(std::string_view dir) override;

    // Faults. `nth` counts calls of that kind from now, starting at 1; each fault fires once.
    // The n-th append fails with `err`, after writing `after_bytes` of its data (none if unset).
    void fail_append(int nth, int err = EIO, std::optional<size_t> after_bytes = {});
    void fail_sync(int nth, int err = EIO);
    void fail_rename(int nth, int err = EIO);
    void fail_sync_dir(int nth, int err = EIO);
    void fail_sync_fs(int nth, int err = EIO);
    void fail_check_written(int nth, int err = EIO);
    // The `nth` call of `op` naming exactly `path` from now fails with `err` (not_found for
    // ENOENT, io_error otherwise). open: any mode; read: read_at on a handle opened by that name;
    // stat: exists(), file_size() and a handle's size(); remove: unlink.
    enum class PathOp { open, read, stat, remove };
    void fail_path(PathOp op, std::string_view path, int err = EIO, int nth = 1);
    // Power cut: once `n` bytes have been appended (all files, counted from now), an append
    // writes what is left of the budget and fails with EIO; from then on every mutating call
    // (append, sync, truncate, a creating open, rename, sync_dir, remove) fails with EIO until
    // crash(). An append that ends exactly at the budget succeeds.
    void crash_after_bytes(uint64_t n);
    // While on, every list() fails with `err` (EMFILE: what opendir answers a process out of
    // descriptors) and names nothing; off (or clear_faults) lists again.
    void fail_lists(bool on, int err = EMFILE);
    // Disarms every fault above (not the stall, not the delay).
    void clear_faults();

    // While on, every sync blocks before it takes effect; turning it off releases them all.
    void stall_syncs(bool on);
    void release_syncs() { stall_syncs(false); }
    // Waits until at least `n` syncs are blocked by the stall; false on timeout.
    bool wait_for_stalled_syncs(size_t n, std::chrono::milliseconds timeout);
    // Each sync sleeps this long (outside the mutex) before it takes effect; zero by default.
    void set_sync_delay(std::chrono::microseconds delay);

    // What a restart would find (see the model above); k is used by prefix and zero_tail.
    void crash(CrashMode mode, uint64_t k = 0);

    // Calls so far, failed ones included.
    uint64_t appends() const;
    uint64_t syncs() const;
    uint64_t renames() const;
    uint64_t sync_dirs() const;
    uint64_t sync_fses() const;
    uint64_t checks_written() const;

    // Test helpers on the live namespace. Asking about a missing file is a test bug
    // (ADD_FAILURE) except for has().
    bool has(std::string_view path) const;
    std::vector<std::byte> contents(std::string_view path) const;
    uint64_t synced_size(std::string_view path) const;
    // Creates or replaces the file, durable name and fully synced content.
    void set_contents(std::string_view path, std::span<const std::byte> bytes);
    // XORs the byte at `offset` with 0xFF (synced state unchanged).
    void flip_byte(std::string_view path, uint64_t offset);
    // The live file names, sorted.
    std::vector<std::string> paths() const;

private:
    class FaultFile;
    struct Node;
    struct Fault {
        uint64_t at_call;  // the counter value of the call that fails
        int err;
        std::optional<size_t> after_bytes;
    };
    using Namespace = std::map<std::string, std::shared_ptr<Node>, std::less<>>;

    // Called by FaultFile, with mu_ not held.
    engine::Status file_append(FaultFile& f, std::span<const std::byte> data);
    engine::Status file_sync(FaultFile& f);
    engine::Status file_check_written(FaultFile& f);
    engine::Status file_truncate(FaultFile& f, uint64_t size);
    engine::Result<uint64_t> handle_size(FaultFile& f);
    engine::Status file_read_at(FaultFile& f, uint64_t offset, std::span<std::byte> out);
    void file_closed(FaultFile& f);

    // With mu_ held.
    engine::Status check_live(const FaultFile& f, std::string_view op) const;
    engine::Status check_power(std::string_view op, std::string_view path) const;
    static std::optional<Fault> take_fault(std::vector<Fault>& faults, uint64_t call);
    // The fail_path fault armed for (op, path), disarmed; 0 if none.
    int take_path_fault(PathOp op, std::string_view path);
    const Node* find_or_fail(std::string_view path) const;

    mutable std::mutex mu_;
    std::condition_variable stall_cv_;
    Namespace live_;
    Namespace durable_;
    uint64_t generation_ = 0;  // bumped by crash(); handles of older generations are dead

    std::vector<Fault> append_faults_;
    std::vector<Fault> sync_faults_;
    std::vector<Fault> rename_faults_;
    std::vector<Fault> sync_dir_faults_;
    std::vector<Fault> sync_fs_faults_;
    std::vector<Fault> check_written_faults_;
    std::optional<int> list_error_;  // fail_lists: the errno every list() fails with
    struct PathFault {
        PathOp op;
        std::string path;
        int err;
        int pass;  // matching calls still let through before it fires
    };
    std::vector<PathFault> path_faults_;
    std::optional<uint64_t> power_budget_bytes_;  // bytes left before the power cut
    bool power_cut_ = false;

    bool stalled_ = false;
    size_t stalled_syncs_ = 0;
    std::chrono::microseconds sync_delay_{0};

    uint64_t appends_ = 0;
    uint64_t syncs_ = 0;
    uint64_t renames_ = 0;
    uint64_t sync_dirs_ = 0;
    uint64_t sync_fses_ = 0;
    uint64_t checks_written_ = 0;
};

}  // namespace fenec::test
