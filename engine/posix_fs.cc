// engine/posix_fs.cc: the default Fs, straight POSIX (Linux) calls behind the seam of io.h.
// Owns: PosixFile (one fd, closed when the File dies, which also drops its flock), posix_fs()
// and dir_of(). Invariants: every fd is O_CLOEXEC; read_at and append either move every byte or
// return an error; a file keeping room (keep_room) has O_APPEND off and writes each append at
// the end of the appends, never past zeros it has not filled; a failed fdatasync is reported
// once and never retried (the kernel may have dropped the dirty pages, so a second success would
// lie); every error names the path and the strerror text, and carries errno in Detail::err_no; a
// file is created 0600 and a directory 0700 (file_create_mode, dir_create_mode), whatever the
// umask lets through, so no other local user reads a tenant's data or a token beside it. No
// exception leaves this file.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>  // renameat2, RENAME_NOREPLACE (glibc >= 2.28)
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/io.h"

namespace fenec::engine {
namespace {

std::string errno_text(int err) {
    char buf[128];
    // The GNU strerror_r returns a pointer that may or may not be into buf.
    return std::string(strerror_r(err, buf, sizeof(buf)));
}

// The Status of a failed call: `what path: strerror`, with errno kept in the detail.
Status os_error(Code code, std::string_view what, std::string_view path, int err) {
    std::string message(what);
    message += ' ';
    message += path;
    message += ": ";
    message += errno_text(err);
    return Status::error(code, std::move(message), Detail{.err_no = err});
}

Status io_error(std::string_view what, std::string_view path, int err) {
    return os_error(Code::io_error, what, path, err);
}

// O_DIRECT writes start, end and sit in memory at this alignment: a page, a multiple of every
// logical block size Linux file systems use (512 or 4096).
constexpr uint64_t direct_align_bytes = 4096;
// Each direct write moves at most this much, so one call never pins a whole large image.
constexpr uint64_t direct_chunk_bytes = 8 << 20;
// A file's room (File::keep_room) is written in these steps, from one buffer of zeros.
constexpr uint64_t room_step_bytes = 64 << 10;

// Owner read and write only: tenant files, sidecars and the router's directory hold data and
// tokens no other local user may read (issue 17 item 8). The umask can only take bits away.
constexpr mode_t file_create_mode = 0600;
// Owner only, so a file's name (a tenant's) is not listed to other users either.
constexpr mode_t dir_create_mode = 0700;

class PosixFile final : public File {
public:
    PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    ~PosixFile() override { ::close(fd_); }  // a close error here has no one to report to
    PosixFile(const PosixFile&) = delete;
    PosixFile& operator=(const PosixFile&) = delete;

    int fd() const { return fd_; }
    const std::string& path() const { return path_; }

    Result<uint64_t> size() override {
        if (positioned_) return end_;
        struct stat st{};
        if (::fstat(fd_, &st) != 0) return io_error("fstat", path_, errno);
        return static_cast<uint64_t>(st.st_size);
    }

    Status read_at(uint64_t offset, std::span<std::byte> out) override {
        size_t done = 0;
        while (done < out.size()) {
            ssize_t n = ::pread(fd_, out.data() + done, out.size() - done,
                                static_cast<off_t>(offset + done));
            if (n < 0) {
                if (errno == EINTR) continue;
                return io_error("pread", path_, errno);
            }
            if (n == 0) {
                return Status::error(Code::io_error,
                                     "short read " + path_ + ": " + std::to_string(done) + " of " +
                                         std::to_string(out.size()) + " bytes at offset " +
                                         std::to_string(offset),
                                     Detail{.err_no = 0});
            }
            done += static_cast<size_t>(n);
        }
        return Status::ok();
    }

    // O_APPEND puts every write at the end; a short write is followed by the rest. A file
    // keeping room writes at the end of its appends instead (keep_room), and tops the room up.
    Status append(std::span<const std::byte> data) override {
        if (positioned_) {
            FENEC_RETURN_IF_ERROR(write_at_end(data));
            if (ahead_ > 0) top_up_room();
            return Status::ok();
        }
        size_t done = 0;
        while (done < data.size()) {
            ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
            if (n < 0) {
                if (errno == EINTR) continue;
                return io_error("write", path_, errno);
            }
            // write(2) of a regular file moves at least a byte or fails; a zero would loop here
            // for ever, so it is taken as the error it stands for.
            if (n == 0) return io_error("write", path_, EIO);
            done += static_cast<size_t>(n);
        }
        return Status::ok();
    }

    Status sync() override {
        // Not retried, not even on EINTR: see the file comment.
        if (::fdatasync(fd_) != 0) return io_error("fdatasync", path_, errno);
        return Status::ok();
    }

    Status check_written() override {
        if (::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE) != 0) {
            return io_error("sync_file_range", path_, errno);
        }
        return Status::ok();
    }

    Status append_direct(std::span<const std::byte> data) override {
        Result<uint64_t> at = size();
        if (!at.is_ok()) return at.status();
        const uint64_t prefix = data.size() / direct_align_bytes * direct_align_bytes;
        if (prefix == 0 || *at % direct_align_bytes != 0 ||
            reinterpret_cast<uintptr_t>(data.data()) % direct_align_bytes != 0) {
            return append(data);
        }
        int direct;
        do {
            direct = ::open(path_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
        } while (direct < 0 && errno == EINTR);
        if (direct < 0) return append(data);  // a file system without O_DIRECT (EINVAL)
        uint64_t done = 0;
        while (done < prefix) {
            const size_t n =
                static_cast<size_t>(std::min<uint64_t>(direct_chunk_bytes, prefix - done));
            const ssize_t w =
                ::pwrite(direct, data.data() + done, n, static_cast<off_t>(*at + done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && errno == EINVAL && done == 0) break;  // alignment refused: buffered
            if (w < 0) {
                const int err = errno;
                ::close(direct);
                return io_error("write (O_DIRECT)", path_, err);
            }
            done += static_cast<uint64_t>(w);
            // A short direct write (the file system falling back part way) leaves an unaligned
            // position: the rest goes through append.
            if (done % direct_align_bytes != 0) break;
        }
        ::close(direct);
        if (positioned_) {
            end_ += done;
            room_end_ = std::max(room_end_, end_);
        }
        return append(data.subspan(static_cast<size_t>(done)));
    }

    Status truncate(uint64_t size) override {
        while (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
            if (errno != EINTR) return io_error("ftruncate", path_, errno);
        }
        if (positioned_) end_ = room_end_ = size;  // the room goes too; appends top it up again
        return Status::ok();
    }

    Status keep_room(uint64_t ahead) override {
        if (ahead == 0) {
            ahead_ = 0;
            if (!positioned_ || room_end_ == end_) return Status::ok();
            while (::ftruncate(fd_, static_cast<off_t>(end_)) != 0) {
                if (errno != EINTR) return io_error("ftruncate", path_, errno);
            }
            room_end_ = end_;
            return Status::ok();
        }
        if (!positioned_) {
            // Appends go where end_ says from here: pwrite at an offset needs O_APPEND off.
            struct stat st{};
            if (::fstat(fd_, &st) != 0) return io_error("fstat", path_, errno);
            const int flags = ::fcntl(fd_, F_GETFL);
            if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_APPEND) != 0) {
                return io_error("fcntl", path_, errno);
            }
            end_ = room_end_ = static_cast<uint64_t>(st.st_size);
            positioned_ = true;
        }
        ahead_ = ahead;
        top_up_room();
        return Status::ok();
    }

private:
    Status write_at_end(std::span<const std::byte> data) {
        size_t done = 0;
        while (done < data.size()) {
            ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done,
                                 static_cast<off_t>(end_ + done));
            if (n < 0) {
                if (errno == EINTR) continue;
                const int err = errno;
                end_ += done;
                room_end_ = std::max(room_end_, end_);
                return io_error("write", path_, err);
            }
            if (n == 0) {
                end_ += done;
                room_end_ = std::max(room_end_, end_);
                return io_error("write", path_, EIO);
            }
            done += static_cast<size_t>(n);
        }
        end_ += done;
        room_end_ = std::max(room_end_, end_);
        return Status::ok();
    }

    // Writes zeros from the room's end up to ahead_ past the appends' once less than half of it
    // is left. A write that fails gives the room up (ahead_ 0): the file keeps what was written,
    // which a later cut or an open removes, and appends go on past it.
    void top_up_room() {
        if (room_end_ - end_ >= ahead_ / 2) return;
        static const std::vector<std::byte> zeros(room_step_bytes);
        const uint64_t target = end_ + ahead_;
        while (room_end_ < target) {
            const size_t n = static_cast<size_t>(std::min(room_step_bytes, target - room_end_));
            const ssize_t w = ::pwrite(fd_, zeros.data(), n, static_cast<off_t>(room_end_));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                ahead_ = 0;
                return;
            }
            room_end_ += static_cast<uint64_t>(w);
        }
    }

    int fd_;
    std::string path_;
    // Room (keep_room): once kept, appends pwrite at end_ (O_APPEND is off) and the file's
    // size is room_end_, end_ plus the zeros written ahead.
    bool positioned_ = false;
    uint64_t end_ = 0;
    uint64_t room_end_ = 0;
    uint64_t ahead_ = 0;
};

int open_flags(OpenMode mode) {
    switch (mode) {
        case OpenMode::read_only: return O_RDONLY;
        case OpenMode::read_write: return O_RDWR | O_APPEND;
        case OpenMode::create_new: return O_RDWR | O_APPEND | O_CREAT | O_EXCL;
        case OpenMode::create_truncate: return O_RDWR | O_APPEND | O_CREAT | O_TRUNC;
    }
    return O_RDONLY;
}

Code code_of_errno(int err) {
    switch (err) {
        case ENOENT: return Code::not_found;
        case EEXIST: return Code::already_exists;
        default: return Code::io_error;
    }
}

// A descriptor of directory `d`, for its sync.
Result<int> open_directory(const std::string& d) {
    int fd;
    do {
        fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return os_error(code_of_errno(errno), "open directory", d, errno);
    return fd;
}

// rename(2) without replacing, for kernels or file systems without RENAME_NOREPLACE: link()
// refuses an existing target atomically, then the old name goes.
Status rename_by_link(const std::string& from, const std::string& to) {
    if (::link(from.c_str(), to.c_str()) != 0) {
        int err = errno;
        return os_error(code_of_errno(err), "link " + from + " to", to, err);
    }
    if (::unlink(from.c_str()) != 0) return io_error("unlink", from, errno);
    return Status::ok();
}

class PosixFs final : public Fs {
public:
    ~PosixFs() override {
        for (const auto& [dir, fd] : held_) ::close(fd);
    }

    Result<std::unique_ptr<File>> open(std::string_view path, OpenMode mode) override {
        std::string p(path);
        int fd;
        do {
            fd = ::open(p.c_str(), open_flags(mode) | O_CLOEXEC, file_create_mode);
        } while (fd < 0 && errno == EINTR);
        if (fd < 0) return os_error(code_of_errno(errno), "open", p, errno);
        return std::unique_ptr<File>(std::make_unique<PosixFile>(fd, std::move(p)));
    }

    Status lock(File& file) override {
        auto* posix = dynamic_cast<PosixFile*>(&file);
        if (posix == nullptr) {
            return Status::error(Code::invalid_argument, "lock: the file is not a PosixFs file");
        }
        while (::flock(posix->fd(), LOCK_EX | LOCK_NB) != 0) {
            if (errno == EINTR) continue;
            if (errno == EWOULDBLOCK) {
                return os_error(Code::busy, "flock", posix->path(), errno);
            }
            return io_error("flock", posix->path(), errno);
        }
        return Status::ok();
    }

    Status rename(std::string_view from, std::string_view to, bool replace) override {
        std::string f(from);
        std::string t(to);
        if (replace) {
            if (::rename(f.c_str(), t.c_str()) != 0) {
                int err = errno;
                return os_error(code_of_errno(err), "rename " + f + " to", t, err);
            }
            return Status::ok();
        }
        if (::renameat2(AT_FDCWD, f.c_str(), AT_FDCWD, t.c_str(), RENAME_NOREPLACE) == 0) {
            return Status::ok();
        }
        int err = errno;
        if (err == ENOSYS || err == EINVAL) return rename_by_link(f, t);
        return os_error(code_of_errno(err), "rename " + f + " to", t, err);
    }

    Status sync_dir(std::string_view dir) override {
        std::string d(dir);
        FENEC_ASSIGN_OR_RETURN(int fd, open_directory(d));
        int rc = ::fsync(fd);
        int err = errno;
        ::close(fd);
        if (rc != 0) return io_error("fsync directory", d, err);
        return Status::ok();
    }

    // syncfs(2) on a descriptor of `dir` opened on its first sync and kept (held_): a node
    // flushes its data directory's file system once a group round under --sync-scope fs, and an
    // open and close a round cost ~21 us on the 2-CPU VM beside a ~250 us syncfs. A kept
    // descriptor also reports the file system's write-back errors since the last call through
    // it, where a fresh one reports only those met during the call. A directory is taken to stay
    // on its file system while the process runs (a node holds its data directory locked). Calls
    // run one at a time, so each error reaches the one call that came first after it.
    Status sync_fs(std::string_view dir) override {
        std::lock_guard lock(held_mu_);
        auto it = held_.find(dir);
        if (it == held_.end()) {
            std::string d(dir);
            FENEC_ASSIGN_OR_RETURN(int fd, open_directory(d));
            it = held_.emplace(std::move(d), fd).first;
        }
        if (::syncfs(it->second) != 0) return io_error("syncfs", dir, errno);
        return Status::ok();
    }

    Status remove(std::string_view path) override {
        std::string p(path);
        if (::unlink(p.c_str()) != 0) return os_error(code_of_errno(errno), "unlink", p, errno);
        return Status::ok();
    }

    Result<bool> exists(std::string_view path) override {
        std::string p(path);
        struct stat st{};
        if (::stat(p.c_str(), &st) == 0) return true;
        if (errno == ENOENT || errno == ENOTDIR) return false;
        return io_error("stat", p, errno);
    }

    Result<uint64_t> file_size(std::string_view path) override {
        std::string p(path);
        struct stat st{};
        if (::stat(p.c_str(), &st) != 0) return os_error(code_of_errno(errno), "stat", p, errno);
        return static_cast<uint64_t>(st.st_size);
    }

    Result<std::vector<std::string>> list(std::string_view dir) override {
        std::string d(dir);
        DIR* handle = ::opendir(d.c_str());
        if (handle == nullptr) return os_error(code_of_errno(errno), "opendir", d, errno);
        std::vector<std::string> names;
        for (;;) {
            errno = 0;
            const dirent* e = ::readdir(handle);
            if (e == nullptr) break;
            const std::string_view name(e->d_name);
            if (name != "." && name != "..") names.emplace_back(name);
        }
        const int err = errno;
        ::closedir(handle);
        if (err != 0) return io_error("readdir", d, err);
        return names;
    }

    Status make_dirs(std::string_view dir) override {
        std::string d(dir);
        // Each prefix in turn, so a missing parent is made first; one that exists is fine.
        for (size_t at = d.find('/', 1);; at = d.find('/', at + 1)) {
            const std::string prefix = d.substr(0, at);
            if (!prefix.empty() && ::mkdir(prefix.c_str(), dir_create_mode) != 0 &&
                errno != EEXIST) {
                return os_error(code_of_errno(errno), "mkdir", prefix, errno);
            }
            if (at == std::string::npos) break;
        }
        struct stat st{};
        if (::stat(d.c_str(), &st) != 0) return os_error(code_of_errno(errno), "stat", d, errno);
        if (!S_ISDIR(st.st_mode)) {
            return Status::error(Code::already_exists, d + " exists and is not a directory");
        }
        return Status::ok();
    }

private:
    std::mutex held_mu_;
    std::map<std::string, int, std::less<>> held_;  // sync_fs's descriptors, by directory
};

}  // namespace

std::string dir_of(std::string_view path) {
    size_t slash = path.rfind('/');
    if (slash == std::string_view::npos) return ".";
    // "a//b" has the directory "a"; "/b" and "//b" have "/".
    while (slash > 0 && path[slash - 1] == '/') --slash;
    if (slash == 0) return "/";
    return std::string(path.substr(0, slash));
}

Fs& posix_fs() {
    static PosixFs fs;
    return fs;
}

Result<uint32_t> others_may_access(std::string_view path) {
    const std::string p(path);
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return os_error(code_of_errno(errno), "stat", p, errno);
    return static_cast<uint32_t>(st.st_mode & 077);
}

}  // namespace fenec::engine
