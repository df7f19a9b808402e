// engine/limits.h: every bound the engine enforces, each with its reason (engine.md §15).
// Past a limit is `limit_exceeded` (or `invalid_argument` for names and ranges), never a
// silent truncation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fenec::engine::limits {

// Any record body, reader and writer: far below FlatBuffers' own 2 GiB ceiling, and a length
// past it is corruption rather than a reason to allocate.
inline constexpr uint64_t record_body_bytes_max = 1ull << 30;
// Block, spill, landing and image_docs bodies: 16 MiB of ops plus one document.
inline constexpr uint64_t block_body_bytes_max = 33ull << 20;
// Checkpoint, collection_state and history bodies: schemas and fork lists are small.
inline constexpr uint64_t meta_body_bytes_max = 4ull << 20;
// Encoded ops held in memory before they are spilled into the file [seed 001].
inline constexpr uint64_t spill_threshold_bytes = 16ull << 20;
// A block, spills included: its count travels as a u32 in places and its bytes as one write.
inline constexpr uint64_t block_bytes_max = 4ull << 30;
inline constexpr uint64_t block_writes_max = (1ull << 32) - 1;
// One encoded document: bounds a landing's body (ops + one document).
inline constexpr uint64_t doc_bytes_max = 16ull << 20;
// Collections alive in one file: a tenant is one database, not a namespace of thousands.
inline constexpr uint32_t collections_max = 4096;
// Collection and field names: short identifiers.
inline constexpr size_t name_bytes_max = 64;
// A @text field's stemming language, as libstemmer names its algorithms (`en`, `turkish`): the
// longest of its names is 10 bytes; this leaves room and keeps a schema record small.
inline constexpr size_t stem_name_bytes_max = 32;
// Fields per collection, dropped slots included: slots are never reused.
inline constexpr size_t fields_max = 1024;
// Nesting of lists and json objects: bounds the decoder's recursion.
inline constexpr int nesting_max = 64;
// Vector dimension.
inline constexpr uint32_t vector_dim_max = 4096;
// Document ids: 1 .. 2^63-1, so an id is also a positive i64 in every language.
inline constexpr uint64_t doc_id_max = (1ull << 63) - 1;
// TTL duration: 1 ms .. 2^53 ms (exact in a double).
inline constexpr int64_t ttl_ms_max = int64_t{1} << 53;
// Json object keys.
inline constexpr size_t json_key_bytes_max = 65535;
// Forks kept in a history: a term past this is a misbehaving cluster.
inline constexpr size_t forks_max = 1024;
// Rows a TTL sweep deletes per block: bounds the writer lock it holds.
inline constexpr size_t ttl_sweep_batch = 1000;
// Flush interval bounds for the `interval` policy.
inline constexpr int64_t flush_interval_ms_min = 1;
inline constexpr int64_t flush_interval_ms_max = 10'000;
inline constexpr int64_t flush_interval_ms_default = 250;
// Syncer threads (engine/syncer.h): fsyncs of different tenants' files in flight at once, so
// the file system commits them in one journal transaction; past a few they only queue in the
// device, and each holds a thread while it waits.
inline constexpr size_t sync_threads = 4;
// A database's file keeps room of zeros ahead of its appends (File::keep_room), so that a sync
// writes the appended blocks alone, once it has taken file_room_after_bytes since it opened: a
// file written on, not every file written once (100,000 tenants each written once would hold a
// room each). The room's zeros are written half at a time: one extra 512 KiB write-back each
// 512 KiB appended, and a file holds at most 1 MiB it does not need while open. Only under
// SyncPolicy::every_block, where a sync follows every block: the room's pages a power cut can
// leave unwritten (a hole the open cuts, file-format.md §6) are then those appended while one
// sync ran.
inline constexpr uint64_t file_room_after_bytes = 256ull << 10;
inline constexpr uint64_t file_room_bytes = 1ull << 20;
// A block's undo log kept, emptied, for the next block: a 1,000-write block's log (1,024
// entries of 64 bytes), so blocks of that size write the same memory again instead of faulting
// fresh pages in; larger logs are freed, so a tenant that once wrote a large block does not hold
// its log while idle. Counted in Usage::memory_bytes.
inline constexpr uint64_t undo_kept_bytes_max = 64ull << 10;
// A file image (Database::file_image) is sent as it is while at most 1/file_image_dead_share_den
// of the file is dead, so it is at most 4/3 of the image built from it; past that it is built.
inline constexpr uint64_t file_image_dead_share_den = 4;
// The Flusher's graph checkpoints keep superseded graph records within 1/graph_dead_share_den of
// the file, so graphs leave it at most 1.25x its compact size (Database::checkpoint_graphs).
inline constexpr uint64_t graph_dead_share_den = 5;
// FlatBuffers verifier bounds.
inline constexpr uint32_t verifier_depth_max = 64;
inline constexpr uint32_t verifier_tables_max = 1u << 24;

}  // namespace fenec::engine::limits
