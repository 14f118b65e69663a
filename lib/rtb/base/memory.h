// Large arrays in anonymous memory mappings. The kernel hands out zero-filled pages, so a fresh
// array is all zeros without a write pass, and the pages can be advised: populated up front (one
// kernel call instead of a fault per page while the array is first written) or backed by huge
// pages (fewer TLB misses for random probes into a table of tens of MiB).
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace rtb {

enum class PageAdvice {
  kNone,
  kPopulateWrite,  // MADV_HUGEPAGE then MADV_POPULATE_WRITE for mappings of 64 MiB or more
  kHugePages,      // MADV_HUGEPAGE for mappings of 1 MiB or more, rounded up to whole 2 MiB
};

// One anonymous private read-write mapping; move-only, unmapped on destruction.
class AnonymousMapping {
 public:
  AnonymousMapping() = default;
  // Throws std::bad_alloc when the memory is not there. Zero bytes maps nothing.
  AnonymousMapping(std::size_t bytes, PageAdvice advice);
  AnonymousMapping(AnonymousMapping&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  AnonymousMapping& operator=(AnonymousMapping&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  AnonymousMapping(const AnonymousMapping&) = delete;
  AnonymousMapping& operator=(const AnonymousMapping&) = delete;
  ~AnonymousMapping();

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }  // as mapped (kHugePages may round up)

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A large array of a trivial type in its own mapping, zero-filled by the kernel (the routing of a
// production micro-batch is 5 GB; zeroing it in user space first would double the work).
template <typename T>
class LargeArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  LargeArray() = default;
  LargeArray(std::size_t size, PageAdvice advice)
      : mapping_(size * sizeof(T), advice), size_(size) {}

  T* data() { return static_cast<T*>(mapping_.data()); }
  const T* data() const { return static_cast<const T*>(mapping_.data()); }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  std::span<T> span() { return {data(), size_}; }
  std::span<const T> span() const { return {data(), size_}; }

 private:
  AnonymousMapping mapping_;
  std::size_t size_ = 0;
};

}  // namespace rtb
