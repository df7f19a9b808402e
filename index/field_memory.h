// index/field_memory.h: memory for the arrays of a vector field that grow with its rows (its float
// copy of the vectors, hnswlib's level-0 block; index/hnsw_index.cc): from the heap while small,
// in 2 MiB transparent huge pages (engine/huge_pages.h) once a block reaches one.
//
// Why: building a 100,000 x 128 graph wrote ~120 MB of fresh memory through these two arrays,
// each grown by doubling into fresh 4 KiB pages, and on the VMs we run on every such page costs a
// fault of 15-20 us. A huge page is one fault for 512 pages and one TLB entry for 2 MiB of graph:
// the build through the adapter went from 1.13-1.15x raw hnswlib's time to 0.92-1.02x with them
// (docs/benchmarks.md, "near_bench: the graph's build against raw hnswlib, one graph a side, then
// in huge pages"). Small fields never get one: a block under huge_page_bytes is an ordinary heap
// block, so a tenant of a few vectors costs what its vectors do (issue 18 item 7).
//
// Invariant: a block's bytes() is all usable (a huge block's size is rounded up to whole huge
// pages and the rounding is capacity, not waste), and it is freed exactly as it was obtained.
// Memory is not initialised: callers write before they read.
#pragma once

#include <cstddef>
#include <span>

namespace fenec::index {

class FieldBlock {
  public:
    FieldBlock() = default;
    // At least `bytes_min` bytes: heap below engine::huge_page_bytes, huge pages at or past it.
    // Throws std::bad_alloc.
    explicit FieldBlock(size_t bytes_min);
    ~FieldBlock();
    FieldBlock(FieldBlock&& o) noexcept;
    FieldBlock& operator=(FieldBlock&& o) noexcept;
    FieldBlock(const FieldBlock&) = delete;
    FieldBlock& operator=(const FieldBlock&) = delete;

    std::byte* data() const { return data_; }
    size_t bytes() const { return bytes_; }
    bool huge() const { return huge_; }

  private:
    void release();
    std::byte* data_ = nullptr;
    size_t bytes_ = 0;
    bool huge_ = false;
};

// A growable array of floats in a FieldBlock: what std::vector<float> offers the field, grown the
// same way (at least doubling, the old contents copied over), its new elements left uninitialised
// so a buffer sized first and filled in parts is first touched by the parts, in parallel.
class FloatArray {
  public:
    float* data() { return reinterpret_cast<float*>(block_.data()); }
    const float* data() const { return reinterpret_cast<const float*>(block_.data()); }
    size_t size() const { return size_; }
    size_t capacity() const { return block_.bytes() / sizeof(float); }
    bool huge() const { return block_.huge(); }

    // Throw std::bad_alloc; on a throw the array is unchanged.
    void append(std::span<const float> v);
    void resize(size_t n);       // new elements uninitialised
    void reserve(size_t n);      // capacity() >= n afterwards
    void clear() { size_ = 0; }  // keeps the block

  private:
    void regrow(size_t capacity);  // a block of at least `capacity` floats, the contents copied
    FieldBlock block_;
    size_t size_ = 0;
};

}  // namespace fenec::index
