// engine/aligned_bytes.h: a byte buffer at a page's alignment (and populate, to fault one in ahead
// of its writer), for bytes that go to a file past the page cache (File::append_direct needs the
// memory page-aligned) and are read in place as records (8-byte alignment): an image a node
// receives whole and installs (server/node/image.cc).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace fenec::engine {

inline constexpr size_t aligned_bytes_alignment = 4096;

// `n` uninitialised bytes at aligned_bytes_alignment, freed with the last owner. Throws
// std::bad_alloc.
inline std::shared_ptr<std::byte[]> aligned_bytes(size_t n) {
    // aligned_alloc wants a multiple of the alignment.
    const size_t rounded =
        (n + aligned_bytes_alignment - 1) / aligned_bytes_alignment * aligned_bytes_alignment;
    void* p = std::aligned_alloc(aligned_bytes_alignment,
                                 rounded == 0 ? aligned_bytes_alignment : rounded);
    if (!p) throw std::bad_alloc();
    return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p),
                                        [](std::byte* q) { std::free(q); });
}

// Faults in the pages of [p, p + n) now, writable, a few MiB at a time from the front, rather
// than one by one as they are first written (MADV_POPULATE_WRITE, Linux 5.14; elsewhere it does
// nothing): for a thread that prepares a large buffer while another fills it.
inline void populate(std::byte* p, size_t n) {
#ifdef MADV_POPULATE_WRITE
    constexpr size_t step = size_t{4} << 20;
    const auto base = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{aligned_bytes_alignment - 1};
    const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
    for (uintptr_t at = base; at < end; at += step) {
        if (::madvise(reinterpret_cast<void*>(at), std::min<uintptr_t>(step, end - at),
                      MADV_POPULATE_WRITE) != 0) {
            return;  // an older kernel (EINVAL): the first writes fault them as usual
        }
    }
#else
    (void)p;
    (void)n;
#endif
}

}  // namespace fenec::engine
