// index/field_memory.cc: the blocks and the float array of index/field_memory.h.
#include "index/field_memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "engine/huge_pages.h"

namespace fenec::index {

using engine::huge_page_bytes;

FieldBlock::FieldBlock(size_t bytes_min) {
    if (bytes_min == 0) return;
    if (bytes_min < huge_page_bytes) {
        data_ = static_cast<std::byte*>(std::malloc(bytes_min));
        if (!data_) throw std::bad_alloc();
        bytes_ = bytes_min;
        return;
    }
    const size_t rounded = (bytes_min + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    data_ = engine::huge_alloc(rounded);
    bytes_ = rounded;
    huge_ = true;
}

FieldBlock::~FieldBlock() { release(); }

FieldBlock::FieldBlock(FieldBlock&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      huge_(std::exchange(o.huge_, false)) {}

FieldBlock& FieldBlock::operator=(FieldBlock&& o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
        huge_ = std::exchange(o.huge_, false);
    }
    return *this;
}

void FieldBlock::release() {
    if (huge_) {
        engine::huge_free(data_, bytes_);
    } else {
        std::free(data_);
    }
    data_ = nullptr;
    bytes_ = 0;
    huge_ = false;
}

void FloatArray::regrow(size_t capacity) {
    FieldBlock grown(capacity * sizeof(float));
    if (size_ > 0) std::memcpy(grown.data(), block_.data(), size_ * sizeof(float));
    block_ = std::move(grown);
}

void FloatArray::append(std::span<const float> v) {
    if (size_ + v.size() > capacity()) regrow(std::max(2 * capacity(), size_ + v.size()));
    if (!v.empty()) std::memcpy(data() + size_, v.data(), v.size() * sizeof(float));
    size_ += v.size();
}

void FloatArray::resize(size_t n) {
    reserve(n);
    size_ = n;
}

void FloatArray::reserve(size_t n) {
    if (n > capacity()) regrow(n);
}

}  // namespace fenec::index
