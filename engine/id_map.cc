// engine/id_map.cc: the dense-and-sparse id map of engine/id_map.h.
#include "engine/id_map.h"

#include <algorithm>
#include <type_traits>

#include "engine/huge_pages.h"

namespace fenec::engine {

namespace {
// The dense slots may reach this many per row, plus a floor, before an id goes sparse: bounded
// waste for holes, no map node for the ids a collection hands out itself. A chunk added for an id
// under the bound may double the slots past it once.
constexpr uint64_t kDenseSlack = 2;
constexpr uint64_t kDenseFloor = 4096;
}  // namespace

IdMap::Chunk::Chunk(uint64_t n) : bytes(n * sizeof(DocRef)) {
    static_assert(std::is_trivially_copyable_v<DocRef> && std::is_trivially_destructible_v<DocRef>);
    if (bytes % huge_page_bytes == 0) {
        // Fresh mappings are zero: a null ref, no slot written until an id lands in it.
        slots = reinterpret_cast<DocRef*>(huge_alloc(bytes));
    } else {
        slots = new DocRef[n]();
    }
}

IdMap::Chunk::~Chunk() {
    if (!slots) return;
    if (bytes % huge_page_bytes == 0) {
        huge_free(reinterpret_cast<std::byte*>(slots), bytes);
    } else {
        delete[] slots;
    }
}

void IdMap::grow_dense(uint64_t id) {
    while (dense_size_ <= id) {
        chunks_.emplace_back(chunk_slots(chunks_.size()));
        dense_size_ = chunk_first(chunks_.size());
    }
    // Keep the invariant: ids now inside the chunks leave the map.
    for (auto it = sparse_.begin(); it != sparse_.end() && it->first < dense_size_;) {
        slot(it->first) = it->second;
        it = sparse_.erase(it);
    }
}

std::optional<DocRef> IdMap::put(uint64_t id, DocRef ref) {
    if (id >= dense_size_ && id < kDenseSlack * (count_ + 1) + kDenseFloor) grow_dense(id);
    if (id < dense_size_) {
        DocRef& s = slot(id);
        std::optional<DocRef> prev;
        if (s.data)
            prev = s;
        else
            ++count_;
        s = ref;
        return prev;
    }
    auto [it, inserted] = sparse_.try_emplace(id, ref);
    if (inserted) {
        ++count_;
        return std::nullopt;
    }
    DocRef prev = it->second;
    it->second = ref;
    return prev;
}

std::optional<DocRef> IdMap::erase(uint64_t id) {
    if (id < dense_size_) {
        DocRef& s = slot(id);
        if (!s.data) return std::nullopt;
        DocRef prev = s;
        s = DocRef{};
        --count_;
        return prev;
    }
    auto it = sparse_.find(id);
    if (it == sparse_.end()) return std::nullopt;
    DocRef prev = it->second;
    sparse_.erase(it);
    --count_;
    return prev;
}

uint64_t IdMap::max_id() const {
    if (!sparse_.empty()) return sparse_.rbegin()->first;
    for (uint64_t id = dense_size_; id > 0; --id) {
        if (slot(id - 1).data) return id - 1;
    }
    return 0;
}

}  // namespace fenec::engine
