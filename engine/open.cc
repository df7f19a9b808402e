// engine/open.cc: Database::open (engine.md §6.1), and what follows a replay's pass whether it
// opened a file or installed an image: the index hook told, the documents copied out of the
// read buffer or the buffer kept as their store, the file adopted (a torn tail cut, synced), the
// feed seeded. Invariant: a database is served only once every step has succeeded.
//
// A read-only open takes no lock and writes nothing, so it may read a file a node holds open
// (`fenec inspect`). It reads the file as it stands at one instant, the one its size is taken
// at (the bytes below that size never change, however many reads take them): every block the
// writer had appended by then, synced or not, and a block being appended meanwhile as a torn
// tail, which is cut in memory only (torn_at()), never on disk, where the bytes are the writer's.
// A rewrite renaming a new file over the path leaves the one it opened whole. A writer cutting
// its own torn tail as it opens may shrink the file under the read: the open then fails a short
// read, and asking again reads the file as it is after the cut.
#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

#include "engine/flusher.h"
#include "engine/huge_pages.h"
#include "engine/replay.h"

namespace fenec::engine {

namespace {
// The read buffer of an open: `size` bytes, 8-byte aligned and zeroed to the next multiple of 8,
// freed with the last owner. A file of huge_buffer_min or more goes into huge pages
// (engine/huge_pages.h) rather than a zero-filled vector: a 68 MB vector tenant's buffer is 17,000
// fresh 4 KiB pages, each faulted on its first write (the vector's zero-fill), against 33 huge
// ones the kernel hands out zeroed.
std::shared_ptr<std::byte[]> read_buffer(uint64_t size) {
    if (size >= huge_buffer_min) return huge_bytes(static_cast<size_t>(size));
    auto storage = std::make_shared<std::vector<uint64_t>>((size + 7) / 8);
    return std::shared_ptr<std::byte[]>(storage, reinterpret_cast<std::byte*>(storage->data()));
}

// Reads `file` into `buf`, the buffer `replay` reads. A file of two slices or more is read a
// slice at a time on a thread of its own, and each time more is there the records wholly in it
// are replayed here (ReplayState::advance, as an install replays an image while it arrives). A
// verdict that depends on the bytes after a record (a torn tail is one of zeros to the end) waits
// for them, so the caller's run(), given the whole file, decides every tear as one read would.
// What is read first stops the open first: a refused record, or a failed read.
Status read_replaying(File& file, std::byte* buf, ReplayState& replay, uint64_t slice) {
    const uint64_t size = replay.size;
    if (size == 0) return Status::ok();
    if (slice == 0 || size / 2 < slice) return file.read_at(0, {buf, size});
    constexpr uint64_t failed = UINT64_MAX;
    std::atomic<uint64_t> read_to{0};  // bytes read so far, or `failed`
    std::atomic<bool> stop{false};
    Status read_status;
    auto read_slices = [&] {
        for (uint64_t at = 0; at < size && !stop.load(std::memory_order_relaxed);) {
            const uint64_t n = std::min(slice, size - at);
            if (Status st = file.read_at(at, {buf + at, n}); !st.is_ok()) {
                read_status = std::move(st);
                read_to.store(failed, std::memory_order_release);
                read_to.notify_one();
                return;
            }
            at += n;
            read_to.store(at, std::memory_order_release);
            read_to.notify_one();
        }
    };
    std::jthread reader;  // joined on every way out, before what it uses goes
    try {
        reader = std::jthread(read_slices);
    } catch (const std::system_error&) {
        return file.read_at(0, {buf, size});  // no thread to be had: one read, as a small file
    }
    for (uint64_t seen = 0; seen < size;) {
        read_to.wait(seen, std::memory_order_acquire);
        seen = read_to.load(std::memory_order_acquire);
        if (seen == failed) {
            reader.join();
            return read_status;
        }
        if (seen == size) break;  // the last records are the caller's run()'s
        if (Status st = replay.advance(seen); !st.is_ok()) {
            stop.store(true, std::memory_order_relaxed);
            return st;
        }
    }
    return Status::ok();
}
}  // namespace

Result<std::unique_ptr<Database>> Database::open(std::string_view path,
                                                 const OpenOptions& options) {
    std::unique_ptr<Database> db(new Database(std::string(path), options));
    Fs& fs = *db->fs_;
    FENEC_ASSIGN_OR_RETURN(
        std::unique_ptr<File> file,
        fs.open(path, options.read_only ? OpenMode::read_only : OpenMode::read_write));
    if (!options.read_only) FENEC_RETURN_IF_ERROR(fs.lock(*file));
    FENEC_ASSIGN_OR_RETURN(uint64_t size, file->size());
    std::shared_ptr<std::byte[]> storage = read_buffer(size);
    std::byte* buf = storage.get();
    db->peak_buffer_bytes_ = size;
    ReplayState replay{*db, buf, size, ReplayState::Mode::open};
    replay.owner = std::move(storage);
    FENEC_RETURN_IF_ERROR(read_replaying(*file, buf, replay, options.open_slice_bytes));
    FENEC_RETURN_IF_ERROR(replay.run());
    FENEC_RETURN_IF_ERROR(db->finish_open(replay, std::move(file), size));
    return db;
}

Result<FileSurvey> Database::survey(Fs& fs, std::string_view path) {
    FENEC_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs.open(path, OpenMode::read_only));
    FENEC_ASSIGN_OR_RETURN(uint64_t size, file->size());
    std::vector<uint64_t> storage((size + 7) / 8);
    auto* buf = reinterpret_cast<std::byte*>(storage.data());
    if (size > 0) FENEC_RETURN_IF_ERROR(file->read_at(0, {buf, size}));
    OpenOptions opts;
    opts.fs = &fs;
    opts.read_only = true;
    std::unique_ptr<Database> db(new Database(std::string(path), opts));
    FileSurvey out;
    out.file_bytes = size;
    ReplayState replay{*db, buf, size, ReplayState::Mode::open};
    replay.records_seen = &out.records;
    out.fault = replay.run();
    out.image_end = replay.image_end;
    if (out.fault.is_ok()) out.torn_at = replay.cut_at;
    db->collections_.clear();  // their refs point into `storage`
    return out;
}

Status Database::finish_open(ReplayState& replay, std::unique_ptr<File> file, uint64_t size) {
    FENEC_RETURN_IF_ERROR(finish_replay(replay, size));
    return adopt_file(replay, std::move(file), size);
}

namespace {
// A read buffer is kept as the documents' store (Collection::adopt) only when at least three
// quarters of it are live bodies: the dead quarter (superseded versions, graph records, the
// header) is then held until the next rewrite, at most a third more than the copy would hold,
// the share file_image() lets travel. Below it the live bodies are copied out and the buffer freed.
constexpr uint64_t adopt_live_share_num = 3;
constexpr uint64_t adopt_live_share_den = 4;
}  // namespace

Status Database::finish_replay(ReplayState& replay, uint64_t size) {
    if (history_.replica && options_.role == Role::primary && !options_.promote) {
        return Status::error(Code::invalid_argument,
                             "the file is a replica's; follow or promote it");
    }
    if (options_.hook) {
        OpenReport report;
        for (auto& [key, g] : replay.graphs) {
            auto w = replay.last_write.find(g.collection.v);
            g.written_after = w != replay.last_write.end() && w->second > g.offset;
            if (!g.written_after) graph_seq_[{g.collection.v, g.slot}] = seq_.load();
            if (g.written_after) g.changes_known = replay.take_changes(key, g.changes);
            report.graphs.push_back(std::move(g));
        }
        options_.hook->on_open(report);
    }
    // The live documents copied out of the read buffer, which is then freed; or, when the
    // buffer is the database's to keep and mostly live, the buffer kept as their store and
    // nothing copied (a 69 MB image: 55 MB of bodies not copied, ~20 ms of page faults and
    // memcpy on the install's path).
    uint64_t live = 0;
    for (const auto& [id, c] : collections_) live += c->live_bytes();
    const bool adopt = replay.owner && live * adopt_live_share_den >= size * adopt_live_share_num;
    for (auto& [id, c] : collections_) {
        if (adopt) {
            c->adopt(replay.owner);
        } else {
            c->repack();
        }
    }
    if (adopt) {
        live = 0;  // the buffer itself is the peak
        file_memory_ = replay.owner;
        file_memory_bytes_ = replay.cut_at.value_or(size);  // a torn tail is cut from the file
    }
    if (options_.hook) {
        for (const auto& [id, c] : collections_)
            options_.hook->on_schema(c->id(), &c->schema(), c.get());
        options_.hook->on_opened();
    }
    peak_buffer_bytes_ = size + live;
    return Status::ok();
}

Status Database::adopt_file(ReplayState& replay, std::unique_ptr<File> file, uint64_t size) {
    uint64_t end = replay.cut_at.value_or(size);
    if (replay.cut_at && !read_only_) {
        FENEC_RETURN_IF_ERROR(file->truncate(end));
    }
    if (read_only_) torn_at_ = replay.cut_at;
    file_ = std::move(file);
    file_bytes_ = read_only_ ? size : end;
    if (!read_only_) {
        if (replay.cut_at || !options_.file_durable) FENEC_RETURN_IF_ERROR(file_->sync());
        Status gone = fs_->remove(path_ + ".rewrite");
        gone.ignore();  // usually there is none
    }
    durable_seq_ = seq_.load();
    appended_end_.store(file_bytes_, std::memory_order_release);
    durable_end_.store(file_bytes_, std::memory_order_release);
    unsealed_ = replay.tail_uncovered;
    seed_feed(replay);
    if (history_.replica && options_.promote) {
        FENEC_RETURN_IF_ERROR(promote().status());
    }
    if (options_.flusher && !read_only_) options_.flusher->add(this);
    return Status::ok();
}

// The feed starts with the last feed_bytes of landed blocks the file holds, every one durable
// now (engine.md §6.1 step 5), so a follower outlives a primary restart without an image.
void Database::seed_feed(const ReplayState& replay) {
    feed_->reset(seq(), Seq{durable_seq_}, history_.forks);
    size_t from = replay.landed.size();
    uint64_t bytes = 0;
    while (from > 0) {
        uint64_t n = 0;
        for (const auto& [off, framed] : replay.landed[from - 1].pieces) n += framed;
        if (bytes + n > options_.feed_bytes && from != replay.landed.size()) break;
        bytes += n;
        --from;
    }
    for (size_t i = from; i < replay.landed.size(); ++i) {
        const auto& seen = replay.landed[i];
        std::vector<std::byte> records;
        for (const auto& [off, framed] : seen.pieces) {
            records.insert(records.end(), replay.buf + off, replay.buf + off + framed);
        }
        feed_->push(Seq{seen.first}, Seq{seen.last}, seen.at_ms, std::move(records));
    }
}

}  // namespace fenec::engine
