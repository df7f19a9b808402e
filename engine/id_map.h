// engine/id_map.h: a collection's ids to their document versions. Ids are mostly dense (handed
// out 1, 2, 3...), so they live in a vector indexed by id, holes marked by a null ref; ids far
// past the dense run (an explicit id of 2^40, say) live in an ordered map beside it.
// Invariant: every id in `sparse_` is at least `dense_.size()`, so walking the vector and then
// the map visits ids in ascending order. Not synchronized: the database's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

namespace fenec::engine {

struct DocRef {
    const std::byte* data = nullptr;
    uint32_t size = 0;
    std::span<const std::byte> bytes() const { return {data, size}; }
};

class IdMap {
public:
    const DocRef* find(uint64_t id) const {
        if (id < dense_.size()) return dense_[id].data ? &dense_[id] : nullptr;
        auto it = sparse_.find(id);
        return it == sparse_.end() ? nullptr : &it->second;
    }
    // Stores `ref` under `id`; returns the version it replaced.
    std::optional<DocRef> put(uint64_t id, DocRef ref);
    std::optional<DocRef> erase(uint64_t id);
    size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    uint64_t max_id() const;  // 0 when empty
    // The heap this map holds: the dense vector's capacity and the sparse map's nodes.
    uint64_t memory_bytes() const {
        return dense_.capacity() * sizeof(DocRef) + sparse_.size() * kSparseNodeBytes;
    }

    // Visits (id, ref) in ascending id from `from`; stops when `visit` returns false.
    template <class F>
    void each_from(uint64_t from, F&& visit) const {
        for (uint64_t id = from; id < dense_.size(); ++id) {
            if (dense_[id].data && !visit(id, dense_[id])) return;
        }
        for (auto it = sparse_.lower_bound(from); it != sparse_.end(); ++it) {
            if (!visit(it->first, it->second)) return;
        }
    }
    // Lets `change` replace every ref in place (repacking into new segments).
    template <class F>
    void rewrite_all(F&& change) {
        for (DocRef& r : dense_) {
            if (r.data) r = change(r);
        }
        for (auto& [id, r] : sparse_) r = change(r);
    }

private:
    // A std::map node: three links and a colour word, then the pair.
    static constexpr uint64_t kSparseNodeBytes = 32 + sizeof(std::pair<const uint64_t, DocRef>);
    void grow_dense(uint64_t id);

    std::vector<DocRef> dense_;          // index = id; data == nullptr: no row
    std::map<uint64_t, DocRef> sparse_;  // ids >= dense_.size()
    size_t count_ = 0;
};

}  // namespace fenec::engine
