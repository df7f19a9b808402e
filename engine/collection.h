// engine/collection.h: one collection held in memory: its schema, its id counter and its live
// documents. Document bodies live in append-only segments; a DocRef points into one. Segments are
// never written twice at one position once a block has landed, and they are shared by reference,
// so a snapshot (image, compaction) copies the id map and keeps the segments alive without
// copying a byte. Only the writer (under the database's writer lock) changes a collection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/hooks.h"
#include "engine/id_map.h"
#include "engine/ids.h"
#include "engine/schema.h"

namespace fenec::engine {

// An append-only arena of document bodies.
class Segments {
public:
    // 32 bits each, so an undo entry stays small: segments and a segment's bytes stay far below
    // 2^32 (a segment is at most one document past a huge page).
    struct Mark {
        uint32_t count = 0;
        uint32_t used = 0;
    };
    // Copies `body` in and returns where it now lives.
    DocRef add(std::span<const std::byte> body);
    Mark mark() const;
    void rewind(Mark m);  // forget everything added after `m` (undo of a failed block)
    uint64_t bytes_held() const { return held_; }
    // Keeps `backing` (memory bodies already point into, read only) alive with these segments,
    // counted as `bytes` held: an open's read buffer adopted rather than copied (Collection::
    // adopt). Nothing is ever added into it.
    void keep(std::shared_ptr<const std::byte[]> backing, uint64_t bytes);
    // The segments themselves, for snapshots that must outlive later writes.
    std::vector<std::shared_ptr<const std::byte[]>> share() const;

private:
    struct Seg {
        std::shared_ptr<std::byte[]> data;
        size_t capacity = 0;
        size_t used = 0;
    };
    std::vector<Seg> segs_;
    std::vector<std::shared_ptr<const std::byte[]>> kept_;  // see keep()
    uint64_t held_ = 0;
};

class Collection final : public DocSource {
public:
    Collection(CollectionId id, std::string name, Schema schema)
        : id_(id), name_(std::move(name)), schema_(std::move(schema)) {}

    CollectionId id() const { return id_; }
    const std::string& name() const { return name_; }
    const Schema& schema() const { return schema_; }
    void set_schema(Schema s) { schema_ = std::move(s); }
    bool internal() const { return !name_.empty() && name_[0] == '_'; }

    uint64_t next_id() const { return next_id_; }
    void set_next_id(uint64_t n) { next_id_ = n; }

    const DocRef* find(DocId id) const { return docs_.find(id.v); }
    // Stores a body (copied into the segments) under `id`; returns the previous one if any and
    // sets `*stored` to where the body now lives.
    std::optional<DocRef> put(DocId id, std::span<const std::byte> body, DocRef* stored = nullptr);
    // Stores a ref that already lives in memory the database keeps alive (replay's buffer).
    std::optional<DocRef> put_ref(DocId id, DocRef ref);
    std::optional<DocRef> erase(DocId id);
    void restore(DocId id, std::optional<DocRef> prev);  // undo

    uint64_t rows() const { return docs_.size(); }
    const IdMap& docs() const { return docs_; }
    Segments& segments() { return segs_; }
    const Segments& segments() const { return segs_; }

    // Copies every live body into fresh segments, dropping superseded versions.
    void repack();
    // The bytes of the live bodies (what repack() would copy).
    uint64_t live_bytes() const;
    // Instead of repack(): every live body already points into `backing` (an open's read
    // buffer), which the collection now keeps alive, so nothing is copied. Superseded versions
    // and other records in it stay held until the next repack (a rewrite).
    void adopt(std::shared_ptr<const std::byte[]> backing);

    // DocSource: every stored row in id order (expiry is the reader's to judge).
    void each(const std::function<bool(DocId, DocView)>& visit) const override;

private:
    CollectionId id_;
    std::string name_;
    Schema schema_;
    uint64_t next_id_ = 1;
    IdMap docs_;
    Segments segs_;
};

}  // namespace fenec::engine
