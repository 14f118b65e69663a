// BlockVector: a growing sequence whose elements never move (the analyser's drafts).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace rtb::hlo {

// A growing sequence in blocks of kPerBlock elements that never move: growing it neither copies
// the elements nor touches memory twice, and it allocates once per block (a std::deque of a
// type this large allocates once per element).
template <typename T, std::size_t kPerBlock>
class BlockVector {
 public:
  BlockVector() = default;
  BlockVector(const BlockVector&) = delete;
  BlockVector& operator=(const BlockVector&) = delete;
  ~BlockVector() {
    for (std::size_t i = 0; i < size_; ++i) at(i)->~T();
  }

  T& emplace_back() {
    if (size_ == blocks_.size() * kPerBlock) blocks_.push_back(std::make_unique<Slot[]>(kPerBlock));
    T* element = new (at(size_)) T();
    ++size_;
    return *element;
  }
  T& operator[](std::size_t i) { return *std::launder(at(i)); }
  const T& operator[](std::size_t i) const { return *std::launder(at(i)); }
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    alignas(T) std::byte bytes[sizeof(T)];
  };
  T* at(std::size_t i) const {
    return reinterpret_cast<T*>(blocks_[i / kPerBlock][i % kPerBlock].bytes);
  }

  std::vector<std::unique_ptr<Slot[]>> blocks_;
  std::size_t size_ = 0;
};

}  // namespace rtb::hlo
