// engine/rewrite.cc: checkpoint, compaction and images (engine.md §7-§8). All three build an
// image from a snapshot of live state taken under the lock and encoded without it; a rewrite then
// appends what landed meanwhile and renames the side file over the file, so a crash leaves the
// old file whole before the rename and the new one after it.
#include <algorithm>
#include <cassert>
#include <cstring>

#include "engine/database_internal.h"
#include "engine/limits.h"

namespace fenec::engine {

namespace fb = fenec::format;

// Graphs holding retired nodes are rebuilt from their live vectors, so a compaction gives back
// their space too. Under the writer lock: writers wait for the rebuild (a rebuild beside the
// lock, catching up on the writes made meanwhile, is not built yet).
void Database::rebuild_retired_graphs_locked() {
    if (!options_.hook) return;
    for (const auto& [id, c] : collections_) {
        const Schema& schema = c->schema();
        for (size_t slot = 0; slot < schema.fields.size(); ++slot) {
            const FieldDesc& f = schema.fields[slot];
            if (f.dropped || f.index.kind != IndexKind::hnsw) continue;
            const auto s = static_cast<uint16_t>(slot);
            if (options_.hook->has_retired(c->id(), s)) {
                // A failed rebuild leaves the old graph: derived data, never a failed compaction.
                options_.hook->rebuild_graph(c->id(), s).ignore();
            }
        }
    }
}

Database::Snapshot Database::snapshot_locked() const {
    Snapshot s;
    s.seq = seq();
    s.history = history_;
    s.next_collection = next_collection_;
    s.file_end = file_bytes_;
    for (const auto& [id, c] : collections_) {
        Snapshot::Coll sc;
        sc.id = c->id();
        sc.name = c->name();
        sc.schema = c->schema();
        sc.next_id = c->next_id();
        sc.docs.reserve(c->docs().size());
        c->docs().each_from(0, [&](uint64_t doc_id, const DocRef& ref) {
            sc.docs.emplace_back(doc_id, ref);
            return true;
        });
        sc.keep = c->segments().share();
        if (options_.hook) {
            for (size_t slot = 0; slot < sc.schema.fields.size(); ++slot) {
                const FieldDesc& f = sc.schema.fields[slot];
                if (f.dropped || f.index.kind != IndexKind::hnsw) continue;
                // An image is written whole and synced before it is a file: no stamp.
                Result<std::vector<std::byte>> g = options_.hook->encode_graph(
                    c->id(), static_cast<uint16_t>(slot), s.seq, format::kNoDurableStamp);
                // A graph that cannot be encoded is rebuilt on open: derived data, never a refusal.
                if (g.is_ok() && !g->empty() && g->size() <= limits::record_body_bytes_max) {
                    sc.graphs.emplace_back(static_cast<uint16_t>(slot), std::move(*g));
                }
            }
        }
        s.collections.push_back(std::move(sc));
    }
    return s;
}

namespace {

// The checkpoint record's body. Every field written (ForceDefaults), so its size does not
// depend on the values and the image's prefix can be set aside before they are known.
flatbuffers::FlatBufferBuilder checkpoint_body(uint64_t seq, uint64_t image_bytes,
                                               uint32_t next_collection, int64_t made_ms) {
    flatbuffers::FlatBufferBuilder b(128);
    b.ForceDefaults(true);
    b.Finish(fb::CreateCheckpoint(b, seq, image_bytes, next_collection, made_ms));
    return b;
}

// The slots of `schema` whose fields are dropped: an image writes null there.
std::vector<uint16_t> dropped_slots(const Schema& schema) {
    std::vector<uint16_t> dropped;
    for (size_t i = 0; i < schema.fields.size(); ++i) {
        if (schema.fields[i].dropped) dropped.push_back(static_cast<uint16_t>(i));
    }
    return dropped;
}

// Stamped with its own offset in the image (`out` holds it from its first byte), as a fresh
// file's History is: an image is written whole and synced before it is a file.
void append_history(std::vector<std::byte>& out, const History& history) {
    flatbuffers::FlatBufferBuilder b;
    std::vector<fb::Fork> forks;
    for (const Fork& f : history.forks) forks.emplace_back(f.history.v, f.seq.v);
    b.Finish(fb::CreateHistory(b, b.CreateVectorOfStructs(forks), history.replica, out.size()));
    format::append_record(out, format::Kind::history, codec::body_of(b));
}

void append_collection_state(std::vector<std::byte>& out, CollectionId id, const std::string& name,
                             const Schema& schema, uint64_t next_id, uint64_t rows) {
    flatbuffers::FlatBufferBuilder b;
    auto name_v = b.CreateString(name);
    auto schema_v = codec::to_fb(b, schema);
    b.Finish(fb::CreateCollectionState(b, id.v, name_v, schema_v, next_id, rows));
    format::append_record(out, format::Kind::collection_state, codec::body_of(b));
}

// A collection's documents as image_docs records, one per ~16 MiB of bodies, null written into
// the `dropped` slots. Bodies are copied from their segments straight into the record being
// built, then once into the image. False, with the records so far, once `stop` is set.
bool append_image_docs(std::vector<std::byte>& out, CollectionId id,
                       const std::vector<std::pair<uint64_t, DocRef>>& docs,
                       const std::vector<uint16_t>& dropped, const std::atomic<bool>* stop) {
    // One builder for every record of the collection: Clear() keeps its memory, so its ~16 MiB
    // are faulted in once, not once a record.
    uint64_t coll_bytes = 4096 + docs.size() * 12;
    for (const auto& [doc_id, ref] : docs) coll_bytes += ref.size;
    flatbuffers::FlatBufferBuilder b(static_cast<size_t>(
        std::min<uint64_t>(coll_bytes, limits::spill_threshold_bytes + (1 << 20))));
    std::vector<uint64_t> ids;
    std::vector<uint32_t> ends;
    std::vector<std::vector<std::byte>> cleaned;  // bodies with dropped slots nulled
    size_t i = 0;
    while (i < docs.size()) {
        if (stop && stop->load(std::memory_order_relaxed)) return false;
        ids.clear();
        ends.clear();
        cleaned.clear();
        uint64_t bytes = 0;
        const size_t first = i;
        while (i < docs.size() && (bytes == 0 || bytes < limits::spill_threshold_bytes)) {
            const auto& [doc_id, ref] = docs[i];
            if (dropped.empty()) {
                bytes += ref.size;
            } else {
                cleaned.push_back(null_slots(ref.bytes(), dropped));
                bytes += cleaned.back().size();
            }
            ids.push_back(doc_id);
            ends.push_back(static_cast<uint32_t>(bytes));
            ++i;
        }
        b.Clear();
        uint8_t* dst = nullptr;
        auto bv = b.CreateUninitializedVector(bytes, &dst);
        for (size_t k = first; k < i; ++k) {
            const auto* from = dropped.empty() ? docs[k].second.data : cleaned[k - first].data();
            const size_t n = dropped.empty() ? docs[k].second.size : cleaned[k - first].size();
            if (n) std::memcpy(dst, from, n);
            dst += n;
        }
        auto ev = b.CreateVector(ends);
        auto iv = b.CreateVector(ids);
        b.Finish(fb::CreateImageDocs(b, id.v, iv, ev, bv));
        format::append_record(out, format::Kind::image_docs, codec::body_of(b));
    }
    return true;
}

}  // namespace

// Writes the image into one buffer sized once: a prefix set aside for the header and the
// checkpoint (which holds the length of what follows it), then the records, then the prefix.
Result<std::vector<std::byte>> Database::build_image(const Snapshot& snap,
                                                     const std::atomic<bool>* stop) const {
    // The bytes the image will take, a little over: reserved once so no append reallocates (a
    // 69 MB image grown by doubling copied ~130 MB more and faulted in twice the pages).
    uint64_t estimate = 64 << 10;
    for (const Snapshot::Coll& c : snap.collections) {
        estimate += 4096 + c.docs.size() * (sizeof(uint64_t) + sizeof(uint32_t));
        estimate += (c.docs.size() / 1024 + 1) * 4096;  // image_docs records' heads and padding
        for (const auto& [id, ref] : c.docs) estimate += ref.size;
        for (const auto& [slot, graph] : c.graphs) estimate += format::framed_size(graph.size());
    }
    std::vector<std::byte> out;
    out.reserve(estimate);
    const size_t prefix =
        format::kHeaderBytes + format::framed_size(checkpoint_body(0, 0, 0, 0).GetSize());
    out.resize(prefix);
    append_history(out, snap.history);
    for (const Snapshot::Coll& c : snap.collections) {
        append_collection_state(out, c.id, c.name, c.schema, c.next_id, c.docs.size());
        if (!append_image_docs(out, c.id, c.docs, dropped_slots(c.schema), stop))
            return cancelled_if_asked();
        for (const auto& [slot, graph] : c.graphs) {
            format::append_record(out, format::Kind::graph, graph);
        }
    }
    std::vector<std::byte> head;
    head.reserve(prefix);
    const auto header = format::encode_header({lineage_.v, created_ms_});
    head.insert(head.end(), header.begin(), header.end());
    flatbuffers::FlatBufferBuilder ck =
        checkpoint_body(snap.seq.v, out.size() - prefix, snap.next_collection, clock_->wall_ms());
    format::append_record(head, format::Kind::checkpoint, codec::body_of(ck));
    if (head.size() != prefix) {  // never (every field is written); correct, if slow, anyway
        assert(false);
        out.erase(out.begin(), out.begin() + static_cast<ptrdiff_t>(prefix));
        out.insert(out.begin(), head.begin(), head.end());
        return out;
    }
    std::memcpy(out.data(), head.data(), prefix);
    return out;
}

void Database::cancel_rewrite() { rewrite_cancel_.store(true, std::memory_order_relaxed); }

Status Database::cancelled_if_asked() const {
    if (!rewrite_cancel_.load(std::memory_order_relaxed)) return Status::ok();
    return Status::error(Code::cancelled,
                         "the rewrite was cancelled: the tenant is leaving service");
}

Status Database::rewrite(bool compact) {
    // 1. Under the writer lock: the snapshot.
    Snapshot snap;
    {
        std::unique_lock<std::shared_mutex> lock(mu_);
        // A frozen tenant and a replica may still be rewritten; a latched or read-only one not.
        if (auto f = failure()) return Status::error(Code::latched, f->to_string(), f->detail());
        if (read_only_) return Status::error(Code::read_only, "the tenant is open read-only");
        if (rewriting_) return Status::error(Code::busy, "a rewrite is already running");
        rewriting_ = true;
        rewrite_cancel_.store(false, std::memory_order_relaxed);  // a cancel asked before: moot
        if (compact) rebuild_retired_graphs_locked();
        snap = snapshot_locked();
    }
    struct Done {
        Database* db;
        ~Done() {
            std::unique_lock<std::shared_mutex> lock(db->mu_);
            db->rewriting_ = false;
        }
    } done{this};

    // 2. Build and write the side file without a lock.
    const std::string side = path_ + ".rewrite";
    uint64_t image_bytes = 0;
    FENEC_ASSIGN_OR_RETURN(std::unique_ptr<File> out, write_side_file(snap, side, image_bytes));

    // 3. Under the writer lock: what landed meanwhile, then the rename.
    std::unique_lock<std::shared_mutex> lock(mu_);
    const uint64_t end = file_bytes_;
    FENEC_RETURN_IF_ERROR(replace_with_side_file_locked(snap, side, *out, end));

    // 4. Still under it: the database moves onto the new file. The image needs no seal; a tail
    // copied after it keeps the old file's stamps, which say nothing of the new offsets.
    adopt_rewritten_locked(std::move(out), snap, image_bytes + (end - snap.file_end));
    unsealed_ = end > snap.file_end;
    return Status::ok();
}

// The image built and written to `side` and synced (a failed sync latches); on any failure,
// and on a cancel (cancel_rewrite) between the steps, the side file is removed and the old file
// is untouched.
Result<std::unique_ptr<File>> Database::write_side_file(const Snapshot& snap,
                                                        const std::string& side,
                                                        uint64_t& image_bytes) {
    FENEC_ASSIGN_OR_RETURN(std::vector<std::byte> image, build_image(snap, &rewrite_cancel_));
    peak_buffer_bytes_ = std::max<uint64_t>(peak_buffer_bytes_, image.size());
    FENEC_RETURN_IF_ERROR(cancelled_if_asked());
    FENEC_ASSIGN_OR_RETURN(std::unique_ptr<File> out, fs_->open(side, OpenMode::create_truncate));
    auto discard = [&](Status st) {
        fs_->remove(side).ignore();
        return st;
    };
    if (Status st = out->append(image); !st.is_ok()) return discard(st);
    if (Status st = cancelled_if_asked(); !st.is_ok()) return discard(st);
    if (Status st = out->sync(); !st.is_ok()) {
        latch(st);
        return discard(st);
    }
    if (Status st = cancelled_if_asked(); !st.is_ok()) return discard(st);
    image_bytes = image.size();
    return out;
}

// The bytes the file gained since the snapshot ([snap.file_end, end), records landed meanwhile)
// appended to the side file verbatim, the side file synced, locked and renamed over the file,
// and the folder synced (I7). Before the rename a failure removes the side file and leaves the
// old file whole, latching only for a failed sync; after it, a failed folder sync latches.
Status Database::replace_with_side_file_locked(const Snapshot& snap, const std::string& side,
                                               File& out, uint64_t end) {
    auto discard = [&](Status st) {
        fs_->remove(side).ignore();
        return st;
    };
    if (auto f = failure())  // latched while the side file was written: nothing replaced
        return discard(Status::error(Code::latched, f->to_string(), f->detail()));
    if (Status st = cancelled_if_asked(); !st.is_ok()) return discard(st);
    if (end > snap.file_end) {
        std::vector<std::byte> tail(end - snap.file_end);
        if (Status st = file_->read_at(snap.file_end, tail); !st.is_ok()) return discard(st);
        if (Status st = out.append(tail); !st.is_ok()) return discard(st);
    }
    if (Status st = out.sync(); !st.is_ok()) {
        latch(st);
        return discard(st);
    }
    if (Status st = cancelled_if_asked(); !st.is_ok()) return discard(st);  // the last point
    if (Status st = fs_->lock(out); !st.is_ok()) return discard(st);
    // A failed rename leaves the old file whole: no latch.
    if (Status st = fs_->rename(side, path_, true); !st.is_ok()) return discard(st);
    if (Status st = fs_->sync_dir(dir_of(path_)); !st.is_ok()) {
        latch(st);
        return st;
    }
    return Status::ok();
}

// The renamed side file, `file_bytes` long, becomes the database's file: its bytes are durable,
// nothing in it is dead, each graph written in the image is the one on file, and the bodies the
// image nulled dropped slots in are nulled in memory too.
void Database::adopt_rewritten_locked(std::unique_ptr<File> out, const Snapshot& snap,
                                      uint64_t file_bytes) {
    {
        std::unique_lock<std::mutex> l(sync_mu_);
        while (syncing_) sync_cv_.wait(l);
        file_ = std::shared_ptr<File>(std::move(out));
        room_kept_ = false;  // the side file keeps room once the next append asks for it
        durable_seq_ = seq_.load();
        appended_end_.store(file_bytes, std::memory_order_release);
        durable_end_.store(file_bytes, std::memory_order_release);  // the side file was synced
        sync_cv_.notify_all();
    }
    file_bytes_ = file_bytes;
    file_memory_.reset();  // the bytes in memory were the old file's
    file_memory_bytes_ = 0;
    dead_bytes_ = 0;
    // An estimate from here: a graph appended while the side file was written came with the
    // tail and supersedes the image's without being counted.
    graph_dead_bytes_ = 0;
    graphs_deferred_.store(false, std::memory_order_relaxed);
    graph_framed_.clear();
    for (const Snapshot::Coll& sc : snap.collections) {
        for (const auto& [slot, graph] : sc.graphs) {
            uint64_t& at = graph_seq_[{sc.id.v, slot}];
            at = std::max(at, snap.seq.v);
            graph_framed_[{sc.id.v, slot}] = format::framed_size(graph.size());
        }
    }
    null_dropped_slots_locked(snap);
    for (auto& [id, c] : collections_) c->repack();
}

// The image wrote null into dropped slots: a document still at the version imaged takes that
// body too, so the live state is what a reopen replays (engine.md §7 step 3).
void Database::null_dropped_slots_locked(const Snapshot& snap) {
    for (const Snapshot::Coll& sc : snap.collections) {
        const std::vector<uint16_t> dropped = dropped_slots(sc.schema);
        Collection* c = dropped.empty() ? nullptr : collection_locked(sc.id);
        if (!c) continue;
        for (const auto& [id, ref] : sc.docs) {
            const DocRef* now = c->find(DocId{id});
            if (now && now->data == ref.data && now->size == ref.size) {
                const std::vector<std::byte> cleaned = null_slots(ref.bytes(), dropped);
                c->put(DocId{id}, cleaned);  // the old body's bytes go with the repack
            }
        }
    }
}

Status Database::checkpoint() { return rewrite(false); }
Status Database::compact() { return rewrite(true); }

Result<Image> Database::image() {
    Snapshot snap;
    {
        std::shared_lock<std::shared_mutex> lock(mu_);
        snap = snapshot_locked();
    }
    snap.history.replica = false;
    // An image never holds a write its source could still lose.
    if (!read_only_) FENEC_RETURN_IF_ERROR(wait_durable(snap.seq));
    FENEC_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, build_image(snap));
    Image img;
    img.info = ImageInfo{snap.seq, snap.history, lineage_, created_ms_, bytes.size()};
    img.bytes = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
    return img;
}

uint64_t Database::written_seq_locked(CollectionId collection) const {
    auto it = written_seq_.find(collection.v);
    return it == written_seq_.end() ? 0 : it->second;
}

// already_exists where the field's last record already holds its graph as it stands (nothing
// wrote its collection since): a second would be dead bytes (a Flusher's sweep and a tenant's
// close may both have found it stale).
Status Database::append_graph(CollectionId collection, uint16_t slot) {
    if (!options_.hook) return Status::error(Code::invalid_argument, "no index hook keeps graphs");
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (auto f = failure()) return Status::error(Code::io_error, f->to_string(), f->detail());
    if (read_only_) return Status::error(Code::read_only, "the tenant is open read-only");
    if (auto at = graph_seq_.find({collection.v, slot});
        at != graph_seq_.end() && at->second >= written_seq_locked(collection)) {
        return Status::error(Code::already_exists, "the field's graph record is current");
    }
    // Its stamp is a block's (file-format.md §6): what a finished sync covered. A sync may finish
    // while the graph is encoded (the writer's lock does not hold syncs back), so the stamp is
    // set again as the record lands; a body that is no Graph, or has no such field, is the
    // hook's fault: refused, not appended.
    FENEC_ASSIGN_OR_RETURN(
        std::vector<std::byte> body,
        options_.hook->encode_graph(collection, slot, seq(), durable_stamp_locked()));
    if (body.size() > limits::record_body_bytes_max) {
        return Status::error(Code::limit_exceeded, "the graph is over 1 GiB; not written");
    }
    if (!codec::verify_as<fb::Graph>(body)) {
        return Status::error(Code::invalid_argument, "the hook's graph record is no Graph table");
    }
    // The Graph's root as a plain table: the generated Graph hides the setter.
    if (!flatbuffers::GetMutableRoot<flatbuffers::Table>(body.data())
             ->SetField<uint64_t>(fb::Graph::VT_DURABLE_END, durable_stamp_locked(),
                                  format::kNoDurableStamp)) {
        return Status::error(Code::invalid_argument, "the hook's graph record carries no stamp");
    }
    std::vector<std::byte> rec;
    format::append_record(rec, format::Kind::graph, body);
    FENEC_RETURN_IF_ERROR(append_locked(rec));  // no seq, no quota, no follower
    graph_seq_[{collection.v, slot}] = seq().v;
    uint64_t& last = graph_framed_[{collection.v, slot}];
    graph_dead_bytes_ += last;  // the record this one supersedes
    last = rec.size();
    return Status::ok();
}

// Whether the field's next graph record keeps the budget checkpoint_graphs states. The new record
// is taken to be the size of the last, `g` (a graph grows by its inserts, so at least that): it
// supersedes the last, leaving `dead` superseded bytes in a file grown by g; a move's record
// would then supersede it too. A field's first record supersedes nothing.
bool Database::room_for_graph(CollectionId collection, uint16_t slot) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = graph_framed_.find({collection.v, slot});
    if (it == graph_framed_.end()) return true;
    const uint64_t g = it->second;
    const uint64_t dead = graph_dead_bytes_ + g;
    return dead * limits::graph_dead_share_den <= file_bytes_ + g &&
           (dead + g) * limits::file_image_dead_share_den <= file_bytes_ + 2 * g;
}

Result<uint32_t> Database::checkpoint_graphs(GraphCheckpoint mode) {
    if (!options_.hook || read_only_) return uint32_t{0};
    std::vector<std::pair<CollectionId, uint16_t>> stale;
    {
        std::shared_lock<std::shared_mutex> lock(mu_);
        for (const auto& [id, c] : collections_) {
            const uint64_t written = written_seq_locked(c->id());
            const Schema& schema = c->schema();
            for (size_t slot = 0; slot < schema.fields.size(); ++slot) {
                const FieldDesc& f = schema.fields[slot];
                if (f.dropped || f.index.kind != IndexKind::hnsw) continue;
                auto it = graph_seq_.find({id, static_cast<uint16_t>(slot)});
                if (it == graph_seq_.end() || it->second < written) {
                    stale.emplace_back(c->id(), static_cast<uint16_t>(slot));
                }
            }
        }
    }
    uint32_t written = 0;
    for (const auto& [c, slot] : stale) {
        if (mode == GraphCheckpoint::sweep && !room_for_graph(c, slot)) {
            graphs_deferred_.store(true, std::memory_order_relaxed);
            continue;
        }
        Status st = append_graph(c, slot);
        // The hook keeps no graph for it (yet), or another pass wrote it meanwhile.
        if (st.code() == Code::not_found || st.code() == Code::already_exists) continue;
        FENEC_RETURN_IF_ERROR(st);
        ++written;
    }
    return written;
}

}  // namespace fenec::engine
