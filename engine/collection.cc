// engine/collection.cc: segments and the id map of one collection.
#include "engine/collection.h"

#include <algorithm>
#include <cstring>

#include "engine/huge_pages.h"

namespace fenec::engine {

namespace {
// A collection's first segment is small and each next one twice the last, up to the largest:
// a tenant written once holds a few KiB, not a megabyte it never touches (and its memory figure,
// which counts capacity, says so); a big one wastes at most half a segment.
constexpr size_t kSegmentBytesFirst = 4u << 10;
// One huge page (huge_pages.h): its first write maps all of it, where 4 KiB pages faulted 512
// times, each fault costing more than writing the page.
constexpr size_t kSegmentBytesMax = huge_page_bytes;

// A segment's memory: huge pages from the largest size up (a body larger than that is rounded up
// to whole huge pages), the heap below it.
std::shared_ptr<std::byte[]> segment_memory(size_t& capacity) {
    if (capacity < kSegmentBytesMax) return std::shared_ptr<std::byte[]>(new std::byte[capacity]);
    capacity = (capacity + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    const size_t bytes = capacity;
    return std::shared_ptr<std::byte[]>(huge_alloc(bytes),
                                        [bytes](std::byte* p) { huge_free(p, bytes); });
}
}  // namespace

DocRef Segments::add(std::span<const std::byte> body) {
    if (segs_.empty() || segs_.back().capacity - segs_.back().used < body.size()) {
        Seg s;
        const size_t next = segs_.empty() ? kSegmentBytesFirst
                                          : std::min(kSegmentBytesMax, 2 * segs_.back().capacity);
        s.capacity = std::max(next, body.size());
        s.data = segment_memory(s.capacity);
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
    return Mark{static_cast<uint32_t>(segs_.size()),
                static_cast<uint32_t>(segs_.empty() ? 0 : segs_.back().used)};
}

void Segments::rewind(Mark m) {
    while (segs_.size() > m.count) {
        held_ -= segs_.back().capacity;
        segs_.pop_back();
    }
    if (!segs_.empty()) segs_.back().used = m.used;
}

void Segments::keep(std::shared_ptr<const std::byte[]> backing, uint64_t bytes) {
    kept_.push_back(std::move(backing));
    held_ += bytes;
}

std::vector<std::shared_ptr<const std::byte[]>> Segments::share() const {
    std::vector<std::shared_ptr<const std::byte[]>> out;
    out.reserve(segs_.size() + kept_.size());
    for (const Seg& s : segs_) out.push_back(s.data);
    out.insert(out.end(), kept_.begin(), kept_.end());
    return out;
}

std::optional<DocRef> Collection::put(DocId id, std::span<const std::byte> body, DocRef* stored) {
    const DocRef ref = segs_.add(body);
    if (stored) *stored = ref;
    return docs_.put(id.v, ref);
}

std::optional<DocRef> Collection::put_ref(DocId id, DocRef ref) { return docs_.put(id.v, ref); }

std::optional<DocRef> Collection::erase(DocId id) { return docs_.erase(id.v); }

void Collection::restore(DocId id, std::optional<DocRef> prev) {
    if (prev) docs_.put(id.v, *prev);
    else docs_.erase(id.v);
}

void Collection::each(const std::function<bool(DocId, DocView)>& visit) const {
    docs_.each_from(0, [&](uint64_t id, const DocRef& ref) { return visit(DocId{id}, DocView(ref.bytes())); });
}

void Collection::repack() {
    Segments fresh;
    docs_.rewrite_all([&](const DocRef& ref) { return fresh.add(ref.bytes()); });
    segs_ = std::move(fresh);
}

uint64_t Collection::live_bytes() const {
    uint64_t n = 0;
    docs_.each_from(0, [&](uint64_t, const DocRef& ref) {
        n += ref.size;
        return true;
    });
    return n;
}

void Collection::adopt(std::shared_ptr<const std::byte[]> backing) {
    segs_.keep(std::move(backing), live_bytes());
}

}  // namespace fenec::engine
