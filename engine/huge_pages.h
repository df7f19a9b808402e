// engine/huge_pages.h: memory for the large arrays that hold a collection in memory (its 2 MiB
// segments of bodies, the id map's big chunks), mapped 2 MiB aligned with the kernel asked to back
// them by transparent huge pages (madvise MADV_HUGEPAGE).
//
// Why: every fresh 4 KiB page costs a page fault on first write, and on the virtual machines we
// run on a fault costs 15-20 us (docs/benchmarks.md, "engine write path, 2026-12-03"): a
// 1,000-document block wrote ~12 fresh pages of bodies and id slots, a fifth of its time. One
// huge-page fault maps 512 pages at once. Where the kernel has no huge page to give (THP off,
// memory fragmented) the advice is ignored and the pages fault one by one as before: nothing
// here changes what the memory holds, only how it is mapped.
//
// Freed huge pages are kept for the next huge_alloc, up to a bound (set_huge_pool_bytes; 0, the
// default, keeps none; the node keeps --huge-pool MiB). Why: on hosts that take a guest's free
// memory back (free page reporting, balloons: the VMs we run on), a huge page the process gave
// back and the kernel handed out again is first touched at ~0.5 GB/s, against ~10 GB/s for one
// still backed. A tenant reopened after its idle close, or an image installed on a quiet node,
// then paid four times its open (docs/benchmarks.md, "the huge-page pool, 2026-12-04"). Pages
// in the pool stay mapped in this process, so the host keeps them backed; huge_alloc moves them
// into the new block (mremap: no copy, no fault) and zeroes them.
//
// Invariant: huge_alloc hands out zeroed memory whose size is a multiple of huge_page_bytes;
// huge_free takes back exactly what huge_alloc gave, with the same size. The pool never holds
// more than its bound, and a page in it belongs to no block. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace fenec::engine {

inline constexpr size_t huge_page_bytes = size_t{2} << 20;

// A buffer at least this large that is filled whole (a file read for its open, engine/open.cc; an
// image's body received, server/node/image.cc) is taken in huge pages (huge_bytes). Its size is
// rounded up to whole huge pages, and it may be kept as the documents' store, so the threshold
// keeps that rounding under 1/16 of it.
inline constexpr size_t huge_buffer_min = 16 * huge_page_bytes;

// `bytes` (a positive multiple of huge_page_bytes) of zeroed memory, huge_page_bytes aligned.
// Throws std::bad_alloc when the address space is exhausted, as `new` does.
std::byte* huge_alloc(size_t bytes);
void huge_free(std::byte* p, size_t bytes);

// `n` bytes (n > 0) of huge_alloc's zeroed, huge_page_bytes-aligned memory, rounded up to whole
// huge pages, freed with the last owner. Throws std::bad_alloc.
std::shared_ptr<std::byte[]> huge_bytes(size_t n);

// The pool's bound in bytes (rounded down to whole huge pages); pages past a lowered bound are
// given back at once.
void set_huge_pool_bytes(size_t bytes);

struct HugePoolStats {
    size_t bytes = 0;     // held in the pool now
    size_t limit = 0;     // its bound
    uint64_t reused = 0;  // huge pages huge_alloc took from the pool
    uint64_t fresh = 0;   // huge pages huge_alloc mapped afresh
};
HugePoolStats huge_pool_stats();

}  // namespace fenec::engine
