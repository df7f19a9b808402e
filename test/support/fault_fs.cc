// test/support/fault_fs.cc: FaultFs, the in-memory Fs with injected faults and crashes. The
// durability model and the fault rules are stated in fault_fs.h; this file keeps them under one
// mutex. Invariant: for every file, synced <= data.size().
#include "test/support/fault_fs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace fenec::test {

using engine::Code;
using engine::Detail;
using engine::File;
using engine::OpenMode;
using engine::Result;
using engine::Status;

struct FaultFs::Node {
    std::vector<std::byte> data;
    uint64_t synced = 0;                    // the durable prefix of data
    const FaultFile* lock_owner = nullptr;  // the live handle holding the lock, if any
};

class FaultFs::FaultFile final : public File {
public:
    FaultFile(FaultFs& fs, std::shared_ptr<Node> node, std::string path, uint64_t generation,
              bool writable)
        : fs_(fs),
          node_(std::move(node)),
          path_(std::move(path)),
          generation_(generation),
          writable_(writable) {}
    ~FaultFile() override { fs_.file_closed(*this); }

    Result<uint64_t> size() override { return fs_.handle_size(*this); }
    Status read_at(uint64_t offset, std::span<std::byte> out) override {
        return fs_.file_read_at(*this, offset, out);
    }
    Status append(std::span<const std::byte> data) override { return fs_.file_append(*this, data); }
    Status sync() override { return fs_.file_sync(*this); }
    Status check_written() override { return fs_.file_check_written(*this); }
    Status truncate(uint64_t size) override { return fs_.file_truncate(*this, size); }

    FaultFs& fs_;
    const std::shared_ptr<Node> node_;  // kept alive by the handle, like an open inode
    const std::string path_;            // the name it was opened by, for messages
    const uint64_t generation_;
    const bool writable_;
};

namespace {

Status fs_error(Code code, std::string_view op, std::string_view path, int err) {
    std::string message = "fault_fs: ";
    message += op;
    message += ' ';
    message += path;
    message += ": ";
    char buf[128];
    message += strerror_r(err, buf, sizeof(buf));  // the GNU variant returns the text
    return Status::error(code, std::move(message), Detail{.err_no = err});
}

Status io_error(std::string_view op, std::string_view path, int err) {
    return fs_error(Code::io_error, op, path, err);
}

// A fail_path fault as the POSIX Fs reports that errno.
Status path_error(std::string_view op, std::string_view path, int err) {
    return fs_error(err == ENOENT ? Code::not_found : Code::io_error, op, path, err);
}

// "a/b/" names the directory "a/b", as dir_of("a/b/x") does.
std::string normalize_dir(std::string_view dir) {
    while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
    return std::string(dir);
}

std::vector<std::byte> crash_image(const std::vector<std::byte>& data, uint64_t synced,
                                   FaultFs::CrashMode mode, uint64_t k) {
    std::vector<std::byte> out = data;
    uint64_t unsynced = out.size() - synced;
    switch (mode) {
        case FaultFs::CrashMode::synced_only: out.resize(synced); break;
        case FaultFs::CrashMode::prefix: out.resize(synced + std::min(k, unsynced)); break;
        case FaultFs::CrashMode::all: break;
        case FaultFs::CrashMode::zero_tail: {
            uint64_t zeroed = std::min(k, unsynced);
            std::fill(out.end() - static_cast<ptrdiff_t>(zeroed), out.end(), std::byte{0});
            break;
        }
        case FaultFs::CrashMode::stale_tail_page: {
            constexpr uint64_t page = FaultFs::kCrashPageBytes;
            const uint64_t page_end =
                std::min<uint64_t>((synced + page - 1) / page * page, out.size());
            if (synced < page_end) {
                std::fill(out.begin() + static_cast<ptrdiff_t>(synced),
                          out.begin() + static_cast<ptrdiff_t>(page_end), std::byte{0});
            }
            break;
        }
        case FaultFs::CrashMode::scattered: {
            // splitmix64 from the seed: one draw a page.
            uint64_t state = k;
            auto next = [&state] {
                uint64_t z = (state += 0x9e3779b97f4a7c15ull);
                z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
                z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
                return z ^ (z >> 31);
            };
            constexpr uint64_t page = FaultFs::kCrashPageBytes;
            for (uint64_t at = synced / page * page; at < out.size(); at += page) {
                if (next() & 1) continue;  // this page reached the disk
                const uint64_t from = std::max(at, synced);
                const uint64_t to = std::min<uint64_t>(at + page, out.size());
                std::fill(out.begin() + static_cast<ptrdiff_t>(from),
                          out.begin() + static_cast<ptrdiff_t>(to), std::byte{0});
            }
            break;
        }
    }
    return out;
}

}  // namespace

FaultFs::FaultFs() = default;
FaultFs::~FaultFs() = default;

// --- Fs ---------------------------------------------------------------------------------------

Result<std::unique_ptr<File>> FaultFs::open(std::string_view path, OpenMode mode) {
    std::lock_guard lk(mu_);
    if (int err = take_path_fault(PathOp::open, path)) return path_error("open", path, err);
    auto it = live_.find(path);
    std::shared_ptr<Node> node;
    switch (mode) {
        case OpenMode::read_only:
        case OpenMode::read_write:
            if (it == live_.end()) return fs_error(Code::not_found, "open", path, ENOENT);
            node = it->second;
            break;
        case OpenMode::create_new:
            FENEC_RETURN_IF_ERROR(check_power("open", path));
            if (it != live_.end()) return fs_error(Code::already_exists, "open", path, EEXIST);
            node = std::make_shared<Node>();
            live_.emplace(path, node);
            durable_.insert_or_assign(std::string(path), node);
            break;
        case OpenMode::create_truncate:
            FENEC_RETURN_IF_ERROR(check_power("open", path));
            if (it != live_.end()) {
                node = it->second;
                node->data.clear();
                node->synced = 0;
            } else {
                node = std::make_shared<Node>();
                live_.emplace(path, node);
            }
            durable_.insert_or_assign(std::string(path), node);
            break;
    }
    bool writable = mode != OpenMode::read_only;
    return std::unique_ptr<File>(
        std::make_unique<FaultFile>(*this, std::move(node), std::string(path), generation_,
                                    writable));
}

Status FaultFs::lock(File& file) {
    auto* f = dynamic_cast<FaultFile*>(&file);
    if (f == nullptr || &f->fs_ != this) {
        return Status::error(Code::invalid_argument, "fault_fs: lock: not a file of this FaultFs");
    }
    std::lock_guard lk(mu_);
    FENEC_RETURN_IF_ERROR(check_live(*f, "lock"));
    if (f->node_->lock_owner != nullptr && f->node_->lock_owner != f) {
        return fs_error(Code::busy, "lock", f->path_, EWOULDBLOCK);
    }
    f->node_->lock_owner = f;
    return Status::ok();
}

Status FaultFs::rename(std::string_view from, std::string_view to, bool replace) {
    std::lock_guard lk(mu_);
    uint64_t call = ++renames_;
    std::string what = "rename " + std::string(from) + " to";
    if (auto fault = take_fault(rename_faults_, call)) return io_error(what, to, fault->err);
    FENEC_RETURN_IF_ERROR(check_power(what, to));
    auto it = live_.find(from);
    if (it == live_.end()) return fs_error(Code::not_found, what, to, ENOENT);
    if (!replace && live_.contains(to)) return fs_error(Code::already_exists, what, to, EEXIST);
    if (from == to) return Status::ok();
    std::shared_ptr<Node> node = it->second;
    live_.erase(it);
    live_.insert_or_assign(std::string(to), std::move(node));
    return Status::ok();
}

Status FaultFs::sync_dir(std::string_view dir) {
    std::lock_guard lk(mu_);
    uint64_t call = ++sync_dirs_;
    if (auto fault = take_fault(sync_dir_faults_, call)) {
        return io_error("fsync directory", dir, fault->err);
    }
    FENEC_RETURN_IF_ERROR(check_power("fsync directory", dir));
    std::string d = normalize_dir(dir);
    std::vector<std::string> names;
    for (const auto& [path, node] : live_) {
        if (engine::dir_of(path) == d) names.push_back(path);
    }
    for (const auto& [path, node] : durable_) {
        if (engine::dir_of(path) == d) names.push_back(path);
    }
    for (const std::string& name : names) {
        auto it = live_.find(name);
        if (it != live_.end()) {
            durable_.insert_or_assign(name, it->second);
        } else {
            durable_.erase(name);
        }
    }
    return Status::ok();
}

Status FaultFs::sync_fs(std::string_view dir) {
    std::lock_guard lk(mu_);
    uint64_t call = ++sync_fses_;
    if (auto fault = take_fault(sync_fs_faults_, call)) return io_error("syncfs", dir, fault->err);
    FENEC_RETURN_IF_ERROR(check_power("syncfs", dir));
    for (const auto& [path, node] : live_) node->synced = node->data.size();
    durable_ = live_;
    return Status::ok();
}

Status FaultFs::remove(std::string_view path) {
    std::lock_guard lk(mu_);
    if (int err = take_path_fault(PathOp::remove, path)) return path_error("unlink", path, err);
    FENEC_RETURN_IF_ERROR(check_power("unlink", path));
    auto it = live_.find(path);
    if (it == live_.end()) return fs_error(Code::not_found, "unlink", path, ENOENT);
    live_.erase(it);
    return Status::ok();
}

Result<bool> FaultFs::exists(std::string_view path) {
    std::lock_guard lk(mu_);
    if (int err = take_path_fault(PathOp::stat, path)) return path_error("stat", path, err);
    return live_.contains(path);
}

Result<uint64_t> FaultFs::file_size(std::string_view path) {
    std::lock_guard lk(mu_);
    if (int err = take_path_fault(PathOp::stat, path)) return path_error("stat", path, err);
    auto it = live_.find(path);
    if (it == live_.end()) return fs_error(Code::not_found, "stat", path, ENOENT);
    return static_cast<uint64_t>(it->second->data.size());
}

Result<std::vector<std::string>> FaultFs::list(std::string_view dir) {
    std::lock_guard lk(mu_);
    if (list_error_) return io_error("opendir", dir, *list_error_);
    const std::string d = normalize_dir(dir);
    std::vector<std::string> names;
    for (const auto& [path, node] : live_) {
        if (engine::dir_of(path) != d) continue;
        const size_t slash = path.rfind('/');
        names.push_back(slash == std::string::npos ? path : path.substr(slash + 1));
    }
    return names;
}

Status FaultFs::make_dirs(std::string_view dir) {
    std::lock_guard lk(mu_);
    return check_power("mkdir", dir);
}

// --- File operations --------------------------------------------------------------------------

Result<uint64_t> FaultFs::handle_size(FaultFile& f) {
    std::lock_guard lk(mu_);
    FENEC_RETURN_IF_ERROR(check_live(f, "fstat"));
    if (int err = take_path_fault(PathOp::stat, f.path_)) return path_error("fstat", f.path_, err);
    return static_cast<uint64_t>(f.node_->data.size());
}

Status FaultFs::file_read_at(FaultFile& f, uint64_t offset, std::span<std::byte> out) {
    std::lock_guard lk(mu_);
    FENEC_RETURN_IF_ERROR(check_live(f, "pread"));
    if (int err = take_path_fault(PathOp::read, f.path_)) return path_error("pread", f.path_, err);
    const std::vector<std::byte>& data = f.node_->data;
    if (offset > data.size() || out.size() > data.size() - offset) {
        uint64_t got = offset > data.size() ? 0 : data.size() - offset;
        return Status::error(Code::io_error,
                             "fault_fs: short read " + f.path_ + ": " + std::to_string(got) +
                                 " of " + std::to_string(out.size()) + " bytes at offset " +
                                 std::to_string(offset),
                             Detail{.err_no = 0});
    }
    std::copy_n(data.begin() + static_cast<ptrdiff_t>(offset), out.size(), out.begin());
    return Status::ok();
}

Status FaultFs::file_append(FaultFile& f, std::span<const std::byte> data) {
    std::lock_guard lk(mu_);
    uint64_t call = ++appends_;
    std::optional<Fault> fault = take_fault(append_faults_, call);
    FENEC_RETURN_IF_ERROR(check_live(f, "write"));
    if (!f.writable_) return io_error("write", f.path_, EBADF);
    FENEC_RETURN_IF_ERROR(check_power("write", f.path_));

    size_t keep = data.size();
    int err = 0;
    if (fault) {
        keep = std::min(keep, fault->after_bytes.value_or(0));
        err = fault->err;
    }
    if (power_budget_bytes_) {
        uint64_t& budget = *power_budget_bytes_;
        if (keep > budget) {
            keep = static_cast<size_t>(budget);
            power_cut_ = true;
            if (err == 0) err = EIO;
        }
        budget -= keep;
    }
    std::vector<std::byte>& bytes = f.node_->data;
    bytes.insert(bytes.end(), data.begin(), data.begin() + static_cast<ptrdiff_t>(keep));
    if (err != 0) {
        std::string op = "write (" + std::to_string(keep) + " of " + std::to_string(data.size()) +
                         " bytes written" + (power_cut_ ? ", power cut)" : ")");
        return io_error(op, f.path_, err);
    }
    return Status::ok();
}

Status FaultFs::file_sync(FaultFile& f) {
    std::unique_lock lk(mu_);
    uint64_t call = ++syncs_;
    std::optional<Fault> fault = take_fault(sync_faults_, call);
    FENEC_RETURN_IF_ERROR(check_live(f, "fdatasync"));
    FENEC_RETURN_IF_ERROR(check_power("fdatasync", f.path_));
    // A sync covers what was written before it began.
    const uint64_t covered = f.node_->data.size();
    if (stalled_) {
        ++stalled_syncs_;
        stall_cv_.notify_all();
        stall_cv_.wait(lk, [&] { return !stalled_ || generation_ != f.generation_; });
        --stalled_syncs_;
    }
    if (sync_delay_.count() > 0) {
        auto delay = sync_delay_;
        lk.unlock();
        std::this_thread::sleep_for(delay);
        lk.lock();
    }
    FENEC_RETURN_IF_ERROR(check_live(f, "fdatasync"));
    FENEC_RETURN_IF_ERROR(check_power("fdatasync", f.path_));
    if (fault) return io_error("fdatasync", f.path_, fault->err);
    Node& node = *f.node_;
    node.synced = std::max(node.synced, std::min<uint64_t>(covered, node.data.size()));
    return Status::ok();
}

Status FaultFs::file_check_written(FaultFile& f) {
    std::lock_guard lk(mu_);
    uint64_t call = ++checks_written_;
    std::optional<Fault> fault = take_fault(check_written_faults_, call);
    FENEC_RETURN_IF_ERROR(check_live(f, "sync_file_range"));
    FENEC_RETURN_IF_ERROR(check_power("sync_file_range", f.path_));
    if (fault) return io_error("sync_file_range", f.path_, fault->err);
    return Status::ok();
}

Status FaultFs::file_truncate(FaultFile& f, uint64_t size) {
    std::lock_guard lk(mu_);
    FENEC_RETURN_IF_ERROR(check_live(f, "ftruncate"));
    if (!f.writable_) return io_error("ftruncate", f.path_, EBADF);
    FENEC_RETURN_IF_ERROR(check_power("ftruncate", f.path_));
    Node& node = *f.node_;
    node.data.resize(size);  // growing fills with zeros, as ftruncate does
    node.synced = std::min<uint64_t>(node.synced, size);
    return Status::ok();
}

void FaultFs::file_closed(FaultFile& f) {
    std::lock_guard lk(mu_);
    if (f.node_->lock_owner == &f) f.node_->lock_owner = nullptr;
}

// --- Faults, stalls, crashes ------------------------------------------------------------------

void FaultFs::fail_append(int nth, int err, std::optional<size_t> after_bytes) {
    std::lock_guard lk(mu_);
    append_faults_.push_back({appends_ + static_cast<uint64_t>(nth), err, after_bytes});
}

void FaultFs::fail_sync(int nth, int err) {
    std::lock_guard lk(mu_);
    sync_faults_.push_back({syncs_ + static_cast<uint64_t>(nth), err, {}});
}

void FaultFs::fail_rename(int nth, int err) {
    std::lock_guard lk(mu_);
    rename_faults_.push_back({renames_ + static_cast<uint64_t>(nth), err, {}});
}

void FaultFs::fail_sync_dir(int nth, int err) {
    std::lock_guard lk(mu_);
    sync_dir_faults_.push_back({sync_dirs_ + static_cast<uint64_t>(nth), err, {}});
}

void FaultFs::fail_sync_fs(int nth, int err) {
    std::lock_guard lk(mu_);
    sync_fs_faults_.push_back({sync_fses_ + static_cast<uint64_t>(nth), err, {}});
}

void FaultFs::fail_check_written(int nth, int err) {
    std::lock_guard lk(mu_);
    check_written_faults_.push_back({checks_written_ + static_cast<uint64_t>(nth), err, {}});
}

void FaultFs::fail_path(PathOp op, std::string_view path, int err, int nth) {
    std::lock_guard lk(mu_);
    path_faults_.push_back({op, std::string(path), err, nth - 1});
}

void FaultFs::crash_after_bytes(uint64_t n) {
    std::lock_guard lk(mu_);
    power_budget_bytes_ = n;
    power_cut_ = false;
}

void FaultFs::clear_faults() {
    std::lock_guard lk(mu_);
    append_faults_.clear();
    sync_faults_.clear();
    rename_faults_.clear();
    sync_dir_faults_.clear();
    sync_fs_faults_.clear();
    check_written_faults_.clear();
    list_error_.reset();
    path_faults_.clear();
    power_budget_bytes_.reset();
    power_cut_ = false;
}

void FaultFs::fail_lists(bool on, int err) {
    std::lock_guard lk(mu_);
    list_error_ = on ? std::optional<int>(err) : std::nullopt;
}

void FaultFs::stall_syncs(bool on) {
    std::lock_guard lk(mu_);
    stalled_ = on;
    stall_cv_.notify_all();
}

bool FaultFs::wait_for_stalled_syncs(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lk(mu_);
    return stall_cv_.wait_for(lk, timeout, [&] { return stalled_syncs_ >= n; });
}

void FaultFs::set_sync_delay(std::chrono::microseconds delay) {
    std::lock_guard lk(mu_);
    sync_delay_ = delay;
}

void FaultFs::crash(CrashMode mode, uint64_t k) {
    std::lock_guard lk(mu_);
    // Two durable names may share a file (a rename made durable in one directory only).
    std::map<const Node*, std::shared_ptr<Node>> survivors;
    Namespace after;
    for (const auto& [path, node] : durable_) {
        std::shared_ptr<Node>& fresh = survivors[node.get()];
        if (!fresh) {
            fresh = std::make_shared<Node>();
            uint64_t synced = std::min<uint64_t>(node->synced, node->data.size());
            fresh->data = crash_image(node->data, synced, mode, k);
            fresh->synced = fresh->data.size();
        }
        after.emplace(path, fresh);
    }
    live_ = after;
    durable_ = std::move(after);
    ++generation_;
    power_budget_bytes_.reset();
    power_cut_ = false;
    stall_cv_.notify_all();  // stalled syncs of dead handles fail now
}

// --- Counters and helpers ---------------------------------------------------------------------

uint64_t FaultFs::appends() const {
    std::lock_guard lk(mu_);
    return appends_;
}

uint64_t FaultFs::syncs() const {
    std::lock_guard lk(mu_);
    return syncs_;
}

uint64_t FaultFs::renames() const {
    std::lock_guard lk(mu_);
    return renames_;
}

uint64_t FaultFs::sync_dirs() const {
    std::lock_guard lk(mu_);
    return sync_dirs_;
}

uint64_t FaultFs::checks_written() const {
    std::lock_guard lk(mu_);
    return checks_written_;
}

uint64_t FaultFs::sync_fses() const {
    std::lock_guard lk(mu_);
    return sync_fses_;
}

bool FaultFs::has(std::string_view path) const {
    std::lock_guard lk(mu_);
    return live_.contains(path);
}

std::vector<std::byte> FaultFs::contents(std::string_view path) const {
    std::lock_guard lk(mu_);
    const Node* node = find_or_fail(path);
    return node ? node->data : std::vector<std::byte>{};
}

uint64_t FaultFs::synced_size(std::string_view path) const {
    std::lock_guard lk(mu_);
    const Node* node = find_or_fail(path);
    return node ? node->synced : 0;
}

void FaultFs::set_contents(std::string_view path, std::span<const std::byte> bytes) {
    std::lock_guard lk(mu_);
    auto it = live_.find(path);
    std::shared_ptr<Node> node;
    if (it != live_.end()) {
        node = it->second;  // open handles see the new bytes, as with an overwrite in place
    } else {
        node = std::make_shared<Node>();
        live_.emplace(path, node);
    }
    node->data.assign(bytes.begin(), bytes.end());
    node->synced = node->data.size();
    durable_.insert_or_assign(std::string(path), std::move(node));
}

void FaultFs::flip_byte(std::string_view path, uint64_t offset) {
    std::lock_guard lk(mu_);
    auto it = live_.find(path);
    if (it == live_.end()) {
        ADD_FAILURE() << "FaultFs::flip_byte: no file " << path;
        return;
    }
    std::vector<std::byte>& data = it->second->data;
    if (offset >= data.size()) {
        ADD_FAILURE() << "FaultFs::flip_byte: offset " << offset << " past the end of " << path
                      << " (" << data.size() << " bytes)";
        return;
    }
    data[offset] ^= std::byte{0xFF};
}

std::vector<std::string> FaultFs::paths() const {
    std::lock_guard lk(mu_);
    std::vector<std::string> out;
    for (const auto& [path, node] : live_) out.push_back(path);
    return out;
}

// --- Private ----------------------------------------------------------------------------------

Status FaultFs::check_live(const FaultFile& f, std::string_view op) const {
    if (f.generation_ != generation_) {
        return io_error(std::string(op) + " (handle from before a crash)", f.path_, EIO);
    }
    return Status::ok();
}

Status FaultFs::check_power(std::string_view op, std::string_view path) const {
    if (power_cut_) return io_error(std::string(op) + " (after the power cut)", path, EIO);
    return Status::ok();
}

std::optional<FaultFs::Fault> FaultFs::take_fault(std::vector<Fault>& faults, uint64_t call) {
    auto it = std::find_if(faults.begin(), faults.end(),
                           [&](const Fault& fault) { return fault.at_call == call; });
    if (it == faults.end()) return std::nullopt;
    Fault fault = *it;
    faults.erase(it);
    return fault;
}

int FaultFs::take_path_fault(PathOp op, std::string_view path) {
    int err = 0;
    for (auto it = path_faults_.begin(); it != path_faults_.end();) {
        if (it->op != op || it->path != path) {
            ++it;
        } else if (it->pass > 0) {
            --it->pass;
            ++it;
        } else if (err == 0) {
            err = it->err;
            it = path_faults_.erase(it);
        } else {
            ++it;
        }
    }
    return err;
}

const FaultFs::Node* FaultFs::find_or_fail(std::string_view path) const {
    auto it = live_.find(path);
    if (it == live_.end()) {
        ADD_FAILURE() << "FaultFs: no file " << path;
        return nullptr;
    }
    return it->second.get();
}

}  // namespace fenec::test
