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

// Freed huge pages, each huge_page_bytes long and aligned, mapped and resident, owned by nothing
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

constexpr size_t kSmallPage = 4096;
constexpr size_t kSmallPerHuge = huge_page_bytes / kSmallPage;

// Whether every 4 KiB page of the huge page at `p` is resident: only such a page is worth
// keeping, since one never written (a block's unused tail, an image body abandoned part way)
// would be faulted in afresh by huge_alloc's zeroing, at the cost the pool is there to avoid.
bool resident(std::byte* p) {
    unsigned char vec[kSmallPerHuge];
    if (mincore(p, huge_page_bytes, vec) != 0) return false;
    return std::all_of(std::begin(vec), std::end(vec), [](unsigned char v) { return v & 1; });
}

// Maps fresh anonymous memory over [to, to + bytes), as huge_alloc's first mapping was.
bool map_fresh(std::byte* to, size_t bytes) {
    void* r =
        mmap(to, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (r == MAP_FAILED) return false;
    (void)madvise(to, bytes, MADV_HUGEPAGE);
    return true;
}

// Moves `n` pooled pages (ascending addresses) over the first n huge pages at `to`, each run of
// adjacent pages in one mremap so that a block built of them stays few mappings. Returns how
// many were moved; those not moved go back to the pool (or are unmapped if it has filled
// meanwhile), and the fresh pages where they were to go stay. Throws std::bad_alloc, with the
// pages not moved given back the same way, if a failed move left a hole it cannot map again.
size_t move_in(std::byte* const* pages, size_t n, std::byte* to) {
    size_t moved = 0;
    bool hole = false;
    while (moved < n) {
        size_t run = 1;
        while (moved + run < n && pages[moved + run] == pages[moved] + run * huge_page_bytes) ++run;
        std::byte* dst = to + moved * huge_page_bytes;
        const size_t bytes = run * huge_page_bytes;
        // MREMAP_FIXED unmaps the destination before the move, and a move can still fail after
        // it (no memory for page tables, the mapping count): the fresh pages are mapped back.
        void* r = mremap(pages[moved], bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
        if (r == MAP_FAILED) {
            hole = !map_fresh(dst, bytes);
            break;
        }
        std::memset(dst, 0, bytes);
        moved += run;
    }
    for (size_t i = moved; i < n; ++i) {
        bool kept = false;
        {
            Pool& p = pool();
            std::lock_guard lock(p.mu);
            if (p.pages.size() < p.limit) {  // within the reserved capacity: no allocation
                p.pages.push_back(pages[i]);
                kept = true;
            }
        }
        if (!kept) munmap(pages[i], huge_page_bytes);
    }
    if (hole) throw std::bad_alloc();  // the caller unmaps the block, moved pages and all
    return moved;
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
    // arrive resident and fault-free; what they held before is zeroed here, as a fresh page is
    // by the kernel.
    auto* block = reinterpret_cast<std::byte*>(aligned);
    Pool& p = pool();
    size_t reused = 0;
    while (reused < want) {
        std::byte* taken[64];
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
        std::sort(taken, taken + n);
        size_t moved = 0;
        try {
            moved = move_in(taken, n, block + reused * huge_page_bytes);
        } catch (const std::bad_alloc&) {
            munmap(block, bytes);  // the moved pages with it: given back, not kept
            throw;
        }
        reused += moved;
        if (moved < n) break;
    }
    std::lock_guard lock(p.mu);
    p.reused += reused;
    p.fresh += want - reused;
    return block;
}

void huge_free(std::byte* ptr, size_t bytes) {
    if (!ptr) return;
    const size_t pages = bytes / huge_page_bytes;
    Pool& p = pool();
    bool full = false;
    {
        std::lock_guard lock(p.mu);
        full = p.pages.size() >= p.limit;
    }
    if (full) {  // no pool, or a full one: the block goes whole, as without a pool
        munmap(ptr, bytes);
        return;
    }
    // Each page kept while the pool has room and the page is resident (asked outside the lock);
    // the rest unmapped, each run of them in one call.
    size_t unmap_from = 0;  // the first page of the run not yet kept or unmapped
    for (size_t i = 0; i < pages; ++i) {
        std::byte* page = ptr + i * huge_page_bytes;
        bool kept = false;
        if (resident(page)) {
            std::lock_guard lock(p.mu);
            if (p.pages.size() < p.limit) {
                p.pages.push_back(page);
                kept = true;
            }
        }
        if (kept) {
            if (unmap_from < i)
                munmap(ptr + unmap_from * huge_page_bytes, (i - unmap_from) * huge_page_bytes);
            unmap_from = i + 1;
        }
    }
    if (unmap_from < pages)
        munmap(ptr + unmap_from * huge_page_bytes, (pages - unmap_from) * huge_page_bytes);
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
