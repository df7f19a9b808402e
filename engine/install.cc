// engine/install.cc: images installed (engine.md §8): a file verified as an image (verify_image,
// install_image), and an image held in memory installed as a tenant's file and opened at once
// (install_open), begun while its bytes arrive (ImageInstall). Invariant: the target is renamed
// into place only once the image has verified and replayed whole and its file is durable, so a
// tenant is never served from a damaged or unsynced image.
#include <cstring>
#include <thread>

#include "engine/replay.h"

namespace fenec::engine {

namespace {

// The directory's fsync failed after the image was renamed onto `target`. create_only: nothing
// was there before, so nothing is left there (durably, as far as the disk lets it), or the
// refused install's tenant would be served after all and the same install answered
// already_exists. replace: what was there is gone already; the new file stays.
void unplace(Fs& fs, std::string_view target, InstallMode mode) {
    if (mode == InstallMode::create_only) remove_durably(fs, target).ignore();
}

}  // namespace

Result<ImageInfo> Database::verify_image(Fs& fs, std::string_view path) {
    FENEC_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs.open(path, OpenMode::read_only));
    FENEC_ASSIGN_OR_RETURN(uint64_t size, file->size());
    std::vector<uint64_t> storage((size + 7) / 8);
    auto* buf = reinterpret_cast<std::byte*>(storage.data());
    if (size > 0) FENEC_RETURN_IF_ERROR(file->read_at(0, {buf, size}));
    OpenOptions opts;
    opts.fs = &fs;
    opts.read_only = true;
    std::unique_ptr<Database> db(new Database(std::string(path), opts));
    ReplayState replay{*db, buf, size, ReplayState::Mode::verify_image};
    FENEC_RETURN_IF_ERROR(replay.run());
    ImageInfo info{db->seq(), db->history_, db->lineage_, db->created_ms_, size};
    db->collections_.clear();  // their refs point into `storage`
    return info;
}

ImageInstall::ImageInstall(std::span<const std::byte> image, std::string_view target,
                           const OpenOptions& options, std::shared_ptr<const std::byte[]> owner)
    : image_(image), db_(new Database(std::string(target), options)) {
    if (reinterpret_cast<uintptr_t>(image.data()) % alignof(uint64_t) != 0) {
        failed_ = Status::error(Code::invalid_argument,
                                "an image installed as it arrives must "
                                "be 8-byte aligned");
        return;
    }
    replay_ = std::make_unique<ReplayState>(*db_, image.data(), image.size(),
                                            ReplayState::Mode::verify_image);
    if (owner && owner.get() == image.data()) replay_->owner = std::move(owner);
}

ImageInstall::~ImageInstall() {
    if (db_) db_->close(CloseMode::plain).ignore();  // never installed: as install_open's fail
}

Status ImageInstall::feed(uint64_t available) {
    if (!failed_.is_ok()) return failed_;
    failed_ = replay_->advance(std::min<uint64_t>(available, image_.size()));
    return failed_;
}

Result<std::unique_ptr<Database>> Database::install_open(
    std::span<const std::byte> image, std::string_view incoming, std::string_view target,
    InstallMode mode, const OpenOptions& options,
    const std::function<Status(const ImageInfo&)>& check, ImageInfo& info,
    std::shared_ptr<const std::byte[]> owner, std::unique_ptr<ImageInstall> begun) {
    if (begun && (begun->image_.data() != image.data() || begun->image_.size() != image.size())) {
        return Status::error(Code::invalid_argument, "the install begun is another image's");
    }
    std::unique_ptr<Database> db =
        begun ? std::move(begun->db_)
              : std::unique_ptr<Database>(new Database(std::string(target), options));
    Fs& fs = *db->fs_;
    auto fail = [&](Status st) -> Status {
        if (db) {
            db->close(CloseMode::plain).ignore();  // its descriptor is incoming's
            db.reset();
        }
        fs.remove(incoming).ignore();
        return st;
    };
    Result<std::unique_ptr<File>> opened = fs.open(incoming, OpenMode::create_truncate);
    if (!opened.is_ok()) return opened.status();
    std::unique_ptr<File> file = std::move(*opened);
    if (Status st = fs.lock(*file); !st.is_ok()) return fail(st);
    // The file is written and fsynced on a thread of its own while the image is verified and
    // replayed from memory here: the disk's time and the CPU's overlap. Written past the page
    // cache where it can be (append_direct): the bytes are in memory already and the database
    // keeps them or copies out of them, never reading the file back, so a cached copy would be
    // CPU and memory spent for nothing. Nothing else touches `file` until the thread is joined,
    // and the rename waits for both, so the tenant is served only from a file that is durable.
    Status wrote;
    std::jthread writer([&] {  // joined on every way out, before `file` goes
        wrote = file->append_direct(image);
        if (wrote.is_ok()) wrote = file->sync();
    });
    // Records are read in place, as open() reads them from its buffer: 8-byte aligned. A body
    // that is not (any heap allocation is) is copied once.
    std::vector<uint64_t> aligned;
    const std::byte* buf = image.data();
    if (reinterpret_cast<uintptr_t>(buf) % alignof(uint64_t) != 0) {
        aligned.resize((image.size() + 7) / 8);
        std::memcpy(aligned.data(), image.data(), image.size());
        buf = reinterpret_cast<const std::byte*>(aligned.data());
    }
    if (begun && !begun->replay_) return fail(begun->failed_);
    std::unique_ptr<ReplayState> fresh;
    if (!begun) {
        fresh =
            std::make_unique<ReplayState>(*db, buf, image.size(), ReplayState::Mode::verify_image);
        if (buf == image.data() && owner && owner.get() == image.data()) {
            fresh->owner = std::move(owner);
        }
    }
    ReplayState& replay = begun ? *begun->replay_ : *fresh;
    // Begun: what arrived was replayed as it came (a failure then is kept), the rest goes here.
    Status replayed = begun ? begun->failed_ : Status::ok();
    if (replayed.is_ok()) replayed = replay.run();
    if (replayed.is_ok()) {
        info = ImageInfo{db->seq(), db->history_, db->lineage_, db->created_ms_, image.size()};
        if (check) replayed = check(info);
    }
    // The live documents are copied out of `image` (repack) or, `owner` given, kept in it
    // (adopt), the indexes built and the graphs loaded from their records, beside the writer.
    if (replayed.is_ok()) replayed = db->finish_replay(replay, image.size());
    writer.join();
    if (!replayed.is_ok()) return fail(replayed);  // a damaged image says so before a bad disk
    if (!wrote.is_ok()) return fail(wrote);
    if (Status st = db->adopt_file(replay, std::move(file), image.size()); !st.is_ok()) {
        return fail(st);
    }
    if (Status st = fs.rename(incoming, target, mode == InstallMode::replace); !st.is_ok()) {
        return fail(st);
    }
    if (Status st = fs.sync_dir(dir_of(target)); !st.is_ok()) {
        // Renamed but the directory's fsync failed: the file is in place, its entry perhaps not
        // durable. Refused, as install_image refuses it; the caller is told and serves nothing.
        db->close(CloseMode::plain).ignore();
        unplace(fs, target, mode);
        return st;
    }
    return db;
}

Status Database::install_image(Fs& fs, std::string_view incoming, std::string_view target,
                               InstallMode mode) {
    auto fail = [&](Status st) {
        fs.remove(incoming).ignore();
        return st;
    };
    {
        Result<std::unique_ptr<File>> f = fs.open(incoming, OpenMode::read_write);
        if (!f.is_ok()) return fail(f.status());
        if (Status st = (*f)->sync(); !st.is_ok()) return fail(st);
    }
    Result<ImageInfo> info = verify_image(fs, incoming);
    if (!info.is_ok()) return fail(info.status());
    if (Status st = fs.rename(incoming, target, mode == InstallMode::replace); !st.is_ok()) {
        return fail(st);
    }
    Status st = fs.sync_dir(dir_of(target));
    if (!st.is_ok()) unplace(fs, target, mode);
    return st;
}

}  // namespace fenec::engine
