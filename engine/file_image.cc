// engine/file_image.cc: a frozen primary's file taken as its own image (node-http.md §8.3), so
// a move's source builds nothing (router.md §7.2 step 4).
//
// Why the file may stand for its image: a file is append-only and every record in it is checked
// as it is replayed, so its bytes up to a length are a file the engine opens to the state they
// hold; frozen, no block lands, so that state is one seq's; a primary's history says
// replica = false as an image's does; and with a graph record written after the last write of
// every @hnsw field (checkpoint_graphs, once, here), the target loads its graphs from their
// records and re-inserts nothing. What it gives up against image(): the dead space the file
// holds (overwritten and deleted documents, superseded graph records) travels too, and the
// target keeps it until its next rewrite. Past file_image_dead_share of dead bytes the image is
// built instead, since then a compaction on the way costs less than carrying the dead bytes
// over the wire, onto the target's disk and into every later move.
#include <algorithm>

#include "engine/database_internal.h"
#include "engine/limits.h"

namespace fenec::engine {

Result<std::optional<FileImage>> Database::file_image() {
    {
        std::shared_lock<std::shared_mutex> lock(mu_);
        if (!frozen_ || read_only_ || history_.replica || following_ || failure()) {
            return std::optional<FileImage>{};
        }
    }
    // The graph tail current: written once, here, while nothing else lands. A graph the hook
    // cannot encode is left to be rebuilt where the file lands, as image() leaves it.
    Result<uint32_t> graphs = checkpoint_graphs(GraphCheckpoint::always);
    if (!graphs.is_ok()) return std::optional<FileImage>{};
    FileImage out;
    {
        std::shared_lock<std::shared_mutex> lock(mu_);
        if (!frozen_ || history_.replica || following_) return std::optional<FileImage>{};
        const uint64_t dead = dead_bytes_ + graph_dead_bytes_;
        // At most a quarter dead: building costs about what sending and installing the image
        // costs (a 69 MB image: ~90 ms to build, ~70-100 ms to pass and write); a quarter more
        // bytes costs well under that.
        if (dead * limits::file_image_dead_share_den > file_bytes_) {
            return std::optional<FileImage>{};
        }
        out.info = ImageInfo{seq(), history_, lineage_, created_ms_, file_bytes_};
        out.file = file_;
        out.memory = file_memory_.lock();
        if (out.memory) out.memory_bytes = std::min(file_memory_bytes_, file_bytes_);
    }
    // The blocks sent durable on the source first, as image() waits for them. The graph records
    // just appended are not waited for: they are derived data the target makes durable in its
    // own copy, and here they stay the file's tail until a later block's fsync covers them
    // (fdatasync writes every dirty page of the file), a crash before it cutting them as a torn
    // tail at worst. Their fsync was most of what the first move of a freshly loaded vector
    // tenant paid over the later ones.
    FENEC_RETURN_IF_ERROR(wait_durable(out.info.seq));
    return std::optional<FileImage>{std::move(out)};
}

}  // namespace fenec::engine
