// engine/aligned_bytes.h: a byte buffer at a page's alignment, for bytes that go to a file past
// the page cache (File::append_direct needs the memory page-aligned) and are read in place as
// records (8-byte alignment): an image a node receives whole and installs (server/node/image.cc).
#pragma once

#include <cstddef>
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

}  // namespace fenec::engine
