// engine/id_map.h: a collection's ids to their document versions. Ids are mostly dense (handed
// out 1, 2, 3...), so they live in slots indexed by id, holes marked by a null ref; ids far past
// the dense run (an explicit id of 2^40, say) live in an ordered map beside it.
//
// The dense slots are chunks of doubling size: chunk k holds the ids [16 (2^k - 1),
// 16 (2^(k+1) - 1)). Growing adds the next chunk and never moves the slots already held, so a
// collection growing to n rows writes each slot's memory once (a vector doubling in place copied
// every slot and faulted its pages in again at each step: a third of a 1,000-document block's
// page faults). Chunks of 2 MiB and more are huge pages (huge_pages.h).
//
// Invariant: every id in `sparse_` is at least dense_size(), so walking the chunks and then the
// map visits ids in ascending order. Not synchronized: the database's lock guards it.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace fenec::engine {

struct DocRef {
    const std::byte* data = nullptr;
    uint32_t size = 0;
    std::span<const std::byte> bytes() const { return {data, size}; }
};

class IdMap {
  public:
    IdMap() = default;
    IdMap(IdMap&&) noexcept = default;
    IdMap& operator=(IdMap&&) noexcept = default;

    const DocRef* find(uint64_t id) const {
        if (id < dense_size_) {
            const DocRef& r = slot(id);
            return r.data ? &r : nullptr;
        }
        auto it = sparse_.find(id);
        return it == sparse_.end() ? nullptr : &it->second;
    }
    // Stores `ref` under `id`; returns the version it replaced.
    std::optional<DocRef> put(uint64_t id, DocRef ref);
    std::optional<DocRef> erase(uint64_t id);
    size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    uint64_t max_id() const;  // 0 when empty
    // Ids below this live in the dense chunks.
    uint64_t dense_size() const { return dense_size_; }
    // The heap this map holds: the dense chunks and the sparse map's nodes.
    uint64_t memory_bytes() const {
        return dense_size_ * sizeof(DocRef) + sparse_.size() * kSparseNodeBytes;
    }

    // Visits (id, ref) in ascending id from `from`; stops when `visit` returns false.
    template <class F>
    void each_from(uint64_t from, F&& visit) const {
        for (size_t k = from < dense_size_ ? chunk_of(from) : chunks_.size(); k < chunks_.size();
             ++k) {
            const uint64_t first = chunk_first(k);
            const uint64_t n = chunk_slots(k);
            for (uint64_t i = from > first ? from - first : 0; i < n; ++i) {
                const DocRef& r = chunks_[k].slots[i];
                if (r.data && !visit(first + i, r)) return;
            }
        }
        for (auto it = sparse_.lower_bound(from); it != sparse_.end(); ++it) {
            if (!visit(it->first, it->second)) return;
        }
    }
    // Lets `change` replace every ref in place (repacking into new segments).
    template <class F>
    void rewrite_all(F&& change) {
        for (size_t k = 0; k < chunks_.size(); ++k) {
            DocRef* slots = chunks_[k].slots;
            for (uint64_t i = 0, n = chunk_slots(k); i < n; ++i) {
                if (slots[i].data) slots[i] = change(slots[i]);
            }
        }
        for (auto& [id, r] : sparse_) r = change(r);
    }

  private:
    // A std::map node: three links and a colour word, then the pair.
    static constexpr uint64_t kSparseNodeBytes = 32 + sizeof(std::pair<const uint64_t, DocRef>);
    // Slots in chunk 0; chunk k holds kChunk0Slots << k.
    static constexpr uint64_t kChunk0Slots = 16;

    // One chunk's slots, zeroed when made, freed as they were allocated.
    struct Chunk {
        DocRef* slots = nullptr;
        size_t bytes = 0;
        explicit Chunk(uint64_t n);
        Chunk(Chunk&& o) noexcept : slots(std::exchange(o.slots, nullptr)), bytes(o.bytes) {}
        Chunk& operator=(Chunk&&) = delete;
        ~Chunk();
    };

    static size_t chunk_of(uint64_t id) {
        return static_cast<size_t>(std::bit_width((id + kChunk0Slots) / kChunk0Slots)) - 1;
    }
    static uint64_t chunk_first(size_t k) { return (kChunk0Slots << k) - kChunk0Slots; }
    static uint64_t chunk_slots(size_t k) { return kChunk0Slots << k; }
    const DocRef& slot(uint64_t id) const {
        const size_t k = chunk_of(id);
        return chunks_[k].slots[id - chunk_first(k)];
    }
    DocRef& slot(uint64_t id) {
        const size_t k = chunk_of(id);
        return chunks_[k].slots[id - chunk_first(k)];
    }
    void grow_dense(uint64_t id);

    std::vector<Chunk> chunks_;          // chunk k covers [chunk_first(k), chunk_first(k + 1))
    uint64_t dense_size_ = 0;            // chunk_first(chunks_.size())
    std::map<uint64_t, DocRef> sparse_;  // ids >= dense_size_
    size_t count_ = 0;
};

}  // namespace fenec::engine
