// engine/id_map.cc: the dense-and-sparse id map of engine/id_map.h.
#include "engine/id_map.h"

#include <algorithm>

namespace fenec::engine {

namespace {
// The dense vector may hold this many slots per row, plus a floor, before an id goes sparse:
// bounded waste for holes, no map node for the ids a collection hands out itself.
constexpr uint64_t kDenseSlack = 2;
constexpr uint64_t kDenseFloor = 4096;
}  // namespace

void IdMap::grow_dense(uint64_t id) {
    uint64_t size = std::max<uint64_t>(dense_.size() * 2, id + 1);
    size = std::min<uint64_t>(size, std::max<uint64_t>(id + 1, kDenseSlack * (count_ + 1) + kDenseFloor));
    dense_.resize(size);
    // Keep the invariant: ids now inside the vector leave the map.
    for (auto it = sparse_.begin(); it != sparse_.end() && it->first < dense_.size();) {
        dense_[it->first] = it->second;
        it = sparse_.erase(it);
    }
}

std::optional<DocRef> IdMap::put(uint64_t id, DocRef ref) {
    if (id >= dense_.size() && id < kDenseSlack * (count_ + 1) + kDenseFloor) grow_dense(id);
    if (id < dense_.size()) {
        DocRef& slot = dense_[id];
        std::optional<DocRef> prev;
        if (slot.data) prev = slot;
        else ++count_;
        slot = ref;
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
    if (id < dense_.size()) {
        DocRef& slot = dense_[id];
        if (!slot.data) return std::nullopt;
        DocRef prev = slot;
        slot = DocRef{};
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
    for (uint64_t id = dense_.size(); id > 0; --id) {
        if (dense_[id - 1].data) return id - 1;
    }
    return 0;
}

}  // namespace fenec::engine
