// An open-addressing index from 64-bit hashes to 32-bit values, for the computation names of a
// dump (hundreds of thousands in a large one), and the name hash it is keyed by. Header-only:
// lookups run once per computation header and fusion, inlined into the analyser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <string_view>
#include <utility>

#include "rtb/base/memory.h"

namespace rtb::hlo {

// Never 0, which notes use for "no hash" (the name table maps 0 to 1 anyway).
inline std::uint64_t hash_name(std::string_view name) {
  std::uint64_t hash = std::hash<std::string_view>{}(name);
  return hash == 0 ? 1 : hash;
}

// Computation name hash -> record index. An open-addressing table: a dump has one entry per
// computation (hundreds of thousands in a large one), and a node-based map spent more time in
// malloc and cache misses than the rest of the reader. A slot keeps the hash's high 32 bits and
// the value (8 bytes: half the fresh memory and cache misses of a full key); the caller confirms
// a match against the rest of the key, which it keeps with the value.
class FlatIndex {
 public:
  // Starts loading the slot where `key` would be (the lookups land at random places of a large
  // table: with the hash known a few statements ahead, the cache miss overlaps other work).
  void prefetch(std::uint64_t key) const {
    if (slots_.size() == 0) return;
    __builtin_prefetch(&slots_[fingerprint(key) & (slots_.size() - 1)]);
  }

  // The value stored for `key`, or `value` after inserting it; `inserted` tells which.
  // `same_key(v)` tells whether the entry stored with value v has this key (asked only when the
  // high 32 bits agree).
  template <typename SameKey>
  std::uint32_t find_or_insert(std::uint64_t key, std::uint32_t value, bool& inserted,
                               SameKey same_key) {
    const std::uint32_t print = fingerprint(key);
    if (slots_.size() == 0) slots_ = Slots(1024, PageAdvice::kHugePages);
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::size_t mask = slots_.size() - 1;
    for (std::size_t i = print & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];  // fingerprint and value side by side: one cache miss per probe
      if (slot.print == print && same_key(slot.value)) {
        inserted = false;
        return slot.value;
      }
      if (slot.print == 0) {
        slot = Slot{print, value};
        ++size_;
        inserted = true;
        return value;
      }
    }
  }

 private:
  struct Slot {
    std::uint32_t print = 0;  // 0 marks an empty slot
    std::uint32_t value = 0;
  };

  // The high 32 bits (never 0); the slot index comes from them too, so growing the table needs
  // nothing but the slots.
  static std::uint32_t fingerprint(std::uint64_t key) {
    std::uint32_t print = static_cast<std::uint32_t>(key >> 32);
    return print == 0 ? 1 : print;
  }

  // The slots live in an anonymous mapping (zero-filled: all empty) with transparent huge pages
  // requested: a dump of a few hundred thousand computations makes the table tens of MiB, and
  // probes at random positions then missed the TLB as well as the cache with 4 KiB pages.
  using Slots = LargeArray<Slot>;

  void grow() {
    Slots old = std::move(slots_);
    slots_ = Slots(old.size() * 2, PageAdvice::kHugePages);
    std::size_t mask = slots_.size() - 1;
    for (std::size_t k = 0; k < old.size(); ++k) {
      const Slot& slot = old[k];
      if (slot.print == 0) continue;
      std::size_t i = slot.print & mask;
      while (slots_[i].print != 0) i = (i + 1) & mask;
      slots_[i] = slot;
    }
  }

  Slots slots_;
  std::size_t size_ = 0;
};

}  // namespace rtb::hlo
