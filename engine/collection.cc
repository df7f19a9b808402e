// engine/collection.cc: segments and the id map of one collection.
#include "engine/collection.h"

#include <algorithm>
#include <cstring>

namespace fenec::engine {

namespace {
constexpr size_t kSegmentBytes = 1u << 20;  // big enough to amortise, small enough to waste little
}

DocRef Segments::add(std::span<const std::byte> body) {
    if (segs_.empty() || segs_.back().capacity - segs_.back().used < body.size()) {
        Seg s;
        s.capacity = std::max(kSegmentBytes, body.size());
        s.data = std::shared_ptr<std::byte[]>(new std::byte[s.capacity]);
        held_ += s.capacity;
        segs_.push_back(std::move(s));
    }
    Seg& s = segs_.back();
    std::byte* at = s.data.get() + s.used;
    if (!body.empty()) std::memcpy(at, body.data(), body.size());
    s.used += body.size();
    return DocRef{at, static_cast<uint32_t>(body.size())};
}

Segments::Mark Segments::mark() const {
    return Mark{segs_.size(), segs_.empty() ? 0 : segs_.back().used};
}

void Segments::rewind(Mark m) {
    while (segs_.size() > m.count) {
        held_ -= segs_.back().capacity;
        segs_.pop_back();
    }
    if (!segs_.empty()) segs_.back().used = m.used;
}

std::vector<std::shared_ptr<const std::byte[]>> Segments::share() const {
    std::vector<std::shared_ptr<const std::byte[]>> out;
    out.reserve(segs_.size());
    for (const Seg& s : segs_) out.push_back(s.data);
    return out;
}

std::optional<DocRef> Collection::put(DocId id, std::span<const std::byte> body) {
    return put_ref(id, segs_.add(body));
}

std::optional<DocRef> Collection::put_ref(DocId id, DocRef ref) {
    if (docs_.empty() || id.v > docs_.rbegin()->first) {
        docs_.emplace_hint(docs_.end(), id.v, ref);
        return std::nullopt;
    }
    auto [it, inserted] = docs_.try_emplace(id.v, ref);
    if (inserted) return std::nullopt;
    DocRef prev = it->second;
    it->second = ref;
    return prev;
}

std::optional<DocRef> Collection::erase(DocId id) {
    auto it = docs_.find(id.v);
    if (it == docs_.end()) return std::nullopt;
    DocRef prev = it->second;
    docs_.erase(it);
    return prev;
}

void Collection::restore(DocId id, std::optional<DocRef> prev) {
    if (prev) docs_[id.v] = *prev;
    else docs_.erase(id.v);
}

void Collection::each(const std::function<bool(DocId, DocView)>& visit) const {
    for (const auto& [id, ref] : docs_) {
        if (!visit(DocId{id}, DocView(ref.bytes()))) return;
    }
}

void Collection::repack() {
    Segments fresh;
    for (auto& [id, ref] : docs_) ref = fresh.add(ref.bytes());
    segs_ = std::move(fresh);
}

}  // namespace fenec::engine
