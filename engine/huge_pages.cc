// engine/huge_pages.cc: the 2 MiB aligned mappings of engine/huge_pages.h.
#include "engine/huge_pages.h"

#include <sys/mman.h>

#include <cassert>
#include <cstdint>
#include <new>

namespace fenec::engine {

std::byte* huge_alloc(size_t bytes) {
    assert(bytes > 0 && bytes % huge_page_bytes == 0);
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
    return reinterpret_cast<std::byte*>(aligned);
}

void huge_free(std::byte* p, size_t bytes) {
    if (p) munmap(p, bytes);
}

std::shared_ptr<std::byte[]> huge_bytes(size_t n) {
    assert(n > 0);
    const size_t rounded = (n + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    return std::shared_ptr<std::byte[]>(huge_alloc(rounded),
                                        [rounded](std::byte* p) { huge_free(p, rounded); });
}

}  // namespace fenec::engine
