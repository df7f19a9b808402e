// engine/database_internal.h: the private parts of Database and Block shared by the files that
// implement them (database.cc, block.cc, apply.cc, codec.cc, rewrite.cc, file_image.cc, and
// through engine/replay.h replay.cc, open.cc and install.cc). Not part of the API.
#pragma once

#include <variant>

#include "engine/database.h"
#include "engine/format.h"
#include "engine/format_generated.h"
#include "engine/limits.h"
#include "engine/rate.h"

namespace fenec::engine {

// An op of a block in write order. Puts and deletes to one collection merge while consecutive.
// A put's bodies are not copied: they live in the collection's segments, which outlive the block.
struct Block::Op {
    struct Create {
        CollectionId collection;
        std::string name;
        Schema schema;
    };
    struct Alter {
        CollectionId collection;
        AlterSpec spec;
        uint16_t slot = 0;
        Schema after;
    };
    struct Drop {
        CollectionId collection;
    };
    struct Put {
        CollectionId collection;
        std::vector<uint64_t> ids;
        std::vector<DocRef> refs;
    };
    struct Delete {
        CollectionId collection;
        std::vector<uint64_t> ids;
    };
    std::variant<Create, Alter, Drop, Put, Delete> v;
};

struct Block::SpillDone {
    uint32_t part = 0;
    uint64_t count = 0;
    uint64_t checksum = 0;
    uint64_t framed = 0;
    std::vector<std::byte> record;  // the framed spill, for the feed once the block lands
};

// One entry of a block's undo log. Puts and deletes, a block's bulk, take 64 bytes; what only
// schema changes need lives behind `schema_change`, so a 1,000-write block's log is 64 KiB and
// the database keeps it for the next block (undo_spare_, limits::undo_kept_bytes_max).
struct Database::Undo {
    enum class Kind : uint8_t { put, del, create, alter, drop };
    struct SchemaChange {
        Schema prev_schema;                   // alter
        std::unique_ptr<Collection> dropped;  // drop
        uint32_t prev_next_collection = 0;    // create
    };
    Kind kind = Kind::put;
    bool hooked = false;                  // put, del: the hook accepted it (on_undo owed)
    CollectionId collection;
    DocId id;
    std::optional<DocRef> prev;           // put, del: the version before
    uint64_t prev_next_id = 0;            // put
    Segments::Mark seg_mark;              // put
    std::unique_ptr<SchemaChange> schema_change;  // create, alter, drop
};

struct Database::Quota {
    Limits limits;
    std::unique_ptr<RateBucket> rows_bucket;
    std::unique_ptr<RateBucket> bytes_bucket;
};

// What a rewrite or an image needs of the live state, taken under the lock and then used
// without it: segments are immutable and shared, so the refs stay valid.
struct Database::Snapshot {
    struct Coll {
        CollectionId id;
        std::string name;
        Schema schema;
        uint64_t next_id = 1;
        std::vector<std::pair<uint64_t, DocRef>> docs;
        std::vector<std::shared_ptr<const std::byte[]>> keep;
        std::vector<std::pair<uint16_t, std::vector<std::byte>>> graphs;
    };
    Seq seq;
    History history;
    uint32_t next_collection = 1;
    uint64_t file_end = 0;
    std::vector<Coll> collections;
    std::shared_ptr<const void> keep_buffer;  // replay's buffer, while refs still point into it
};

namespace codec {

namespace fb = fenec::format;

// Schema <-> FlatBuffers. from_fb refuses unknown enum values (corruption at `offset`).
flatbuffers::Offset<fb::Schema> to_fb(flatbuffers::FlatBufferBuilder& b, const Schema& s);
flatbuffers::Offset<fb::FieldDesc> to_fb(flatbuffers::FlatBufferBuilder& b, const FieldDesc& f);
flatbuffers::Offset<fb::IndexDesc> to_fb(flatbuffers::FlatBufferBuilder& b, const IndexDesc& x);
Result<Schema> from_fb(const fb::Schema* s, uint64_t offset);
Result<FieldDesc> from_fb(const fb::FieldDesc* f, uint64_t offset);
Result<IndexDesc> from_fb(const fb::IndexDesc* x, uint64_t offset);

// Encodes ops [begin, end) into `b`; returns the ops vector's offset.
flatbuffers::Offset<flatbuffers::Vector<fenec::format::Op>> op_types(
    flatbuffers::FlatBufferBuilder& b, const std::vector<Block::Op>& ops, size_t begin, size_t end);
flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<void>>> op_values(
    flatbuffers::FlatBufferBuilder& b, const std::vector<Block::Op>& ops, size_t begin, size_t end);
// The writes a range of ops holds (engine.md §3 counting).
uint64_t count_writes(const std::vector<Block::Op>& ops, size_t begin, size_t end);

std::span<const std::byte> body_of(const flatbuffers::FlatBufferBuilder& b);

// Whether `body` is a well-formed T within the engine's verifier bounds (limits.h): the one check
// replay and a follower's apply run on a record body before reading it.
template <class T>
bool verify_as(std::span<const std::byte> body) {
    flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(body.data()), body.size(),
                            limits::verifier_depth_max, limits::verifier_tables_max);
    return v.VerifyBuffer<T>(nullptr);
}

// The AlterSpec an AlterCollection op records, against the collection's schema before it
// (replay and a follower's apply); corruption at `offset` when it names no field.
Result<AlterSpec> alter_spec_of(const fb::AlterCollection* a, const Schema& before,
                                uint64_t offset);

}  // namespace codec
}  // namespace fenec::engine
