// engine/huge_pages.cc: the 2 MiB aligned mappings of engine/huge_pages.h, and the pool of freed
// huge pages they are taken from first.
#include "engine/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace fenec::engine {

namespace {

// Freed huge pages, each huge_page_bytes long and aligned, still mapped and owned by nothing
// else. `pages` has capacity for `limit` entries, so huge_free never allocates.
struct Pool {
    std::mutex mu;
    std::vector<std::byte*> pages;
    size_t limit = 0;  // in pages
    uint64_t reused = 0;
    uint64_t fresh = 0;
};

Pool& pool() {
    static Pool* p = new Pool;  // never destroyed: blocks may be freed during static destruction
    return *p;
}

}  // namespace

std::byte* huge_alloc(size_t bytes) {
    assert(bytes > 0 && bytes % huge_page_bytes == 0);
    const size_t want = bytes / huge_page_bytes;
    // Map one huge page more than asked and cut the unaligned ends off: mmap aligns to 4 KiB only.
    const size_t mapped = bytes + huge_page_bytes;
    void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + huge_page_bytes - 1) & ~uintptr_t{huge_page_bytes - 1};
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t tail = aligned + bytes;
    if (start + mapped > tail) munmap(reinterpret_cast<void*>(tail), start + mapped - tail);
    // Advice only: refused (THP compiled out or disabled), the pages fault 4 KiB at a time.
    (void)madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);

    // Pages from the pool replace the fresh mapping's first ones: moved, not copied, so they
    // arrive backed and fault-free; what they held before is zeroed here, as a fresh page is by
    // the kernel.
    Pool& p = pool();
    std::byte* taken[64];
    size_t reused = 0;
    while (reused < want) {
        size_t n = 0;
        {
            std::lock_guard lock(p.mu);
            n = std::min({want - reused, p.pages.size(), std::size(taken)});
            for (size_t i = 0; i < n; ++i) {
                taken[i] = p.pages.back();
                p.pages.pop_back();
            }
        }
        if (n == 0) break;
        size_t moved = 0;
        for (size_t i = 0; i < n; ++i) {
            auto* to = reinterpret_cast<std::byte*>(aligned) + (reused + moved) * huge_page_bytes;
            void* r = mremap(taken[i], huge_page_bytes, huge_page_bytes,
                             MREMAP_MAYMOVE | MREMAP_FIXED, to);
            if (r == MAP_FAILED) {  // e.g. out of mappings: the fresh page stays, this one goes
                munmap(taken[i], huge_page_bytes);
                continue;
            }
            std::memset(to, 0, huge_page_bytes);
            ++moved;
        }
        reused += moved;
        if (moved < n) break;
    }
    std::lock_guard lock(p.mu);
    p.reused += reused;
    p.fresh += want - reused;
    return reinterpret_cast<std::byte*>(aligned);
}

void huge_free(std::byte* ptr, size_t bytes) {
    if (!ptr) return;
    const size_t pages = bytes / huge_page_bytes;
    size_t kept = 0;
    {
        Pool& p = pool();
        std::lock_guard lock(p.mu);
        kept = std::min(pages, p.limit - std::min(p.limit, p.pages.size()));
        for (size_t i = 0; i < kept; ++i) p.pages.push_back(ptr + i * huge_page_bytes);
    }
    if (kept < pages) munmap(ptr + kept * huge_page_bytes, bytes - kept * huge_page_bytes);
}

std::shared_ptr<std::byte[]> huge_bytes(size_t n) {
    assert(n > 0);
    const size_t rounded = (n + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    return std::shared_ptr<std::byte[]>(huge_alloc(rounded),
                                        [rounded](std::byte* p) { huge_free(p, rounded); });
}

void set_huge_pool_bytes(size_t bytes) {
    Pool& p = pool();
    std::lock_guard lock(p.mu);
    p.limit = bytes / huge_page_bytes;
    p.pages.reserve(p.limit);
    while (p.pages.size() > p.limit) {
        munmap(p.pages.back(), huge_page_bytes);
        p.pages.pop_back();
    }
}

HugePoolStats huge_pool_stats() {
    Pool& p = pool();
    std::lock_guard lock(p.mu);
    return {p.pages.size() * huge_page_bytes, p.limit * huge_page_bytes, p.reused, p.fresh};
}

}  // namespace fenec::engine
