// The per-token kernel of the routing check (check.cc): the smallest and the largest of a token's
// L*K int16 expert slots in one pass, which tells at once whether every slot is an expert in
// [0, E) (and which one is the largest) or, on padding, -1. SSE2 on x86-64 (every x86-64 CPU has
// it, so no run-time check), the same rule in portable C++; the fuzzer (fuzz/slots_fuzz.cc) and
// the unit tests hold the two to the same answers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rtb::payload {

struct SlotRange {
  std::int16_t min = 0;
  std::int16_t max = 0;
  bool operator==(const SlotRange&) const = default;
};

// The smallest and largest of slots[0..n), n >= 1.
SlotRange slot_range(const std::int16_t* slots, std::size_t n);
SlotRange slot_range_portable(const std::int16_t* slots, std::size_t n);

// Whether slot_range uses SIMD on this build (false: it is the portable one).
bool slot_range_is_simd();

}  // namespace rtb::payload
