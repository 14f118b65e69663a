#include "rtb/payload/slots.h"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace rtb::payload {

SlotRange slot_range_portable(const std::int16_t* slots, std::size_t n) {
  SlotRange range{slots[0], slots[0]};
  for (std::size_t i = 1; i < n; ++i) {
    range.min = std::min(range.min, slots[i]);
    range.max = std::max(range.max, slots[i]);
  }
  return range;
}

#if defined(__SSE2__)

namespace {

// The smallest (or largest, with _mm_max_epi16) of the 8 lanes, in every lane.
template <__m128i (*Pick)(__m128i, __m128i)>
std::int16_t across_lanes(__m128i v) {
  v = Pick(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = Pick(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = Pick(v, _mm_shufflelo_epi16(_mm_shufflehi_epi16(v, _MM_SHUFFLE(2, 3, 0, 1)),
                                  _MM_SHUFFLE(2, 3, 0, 1)));
  return static_cast<std::int16_t>(_mm_cvtsi128_si32(v));
}

__m128i min16(__m128i a, __m128i b) { return _mm_min_epi16(a, b); }
__m128i max16(__m128i a, __m128i b) { return _mm_max_epi16(a, b); }

}  // namespace

SlotRange slot_range(const std::int16_t* slots, std::size_t n) {
  if (n < 16) return slot_range_portable(slots, n);
  // Two accumulators of each kind hide the latency of the min/max chains.
  auto load = [slots](std::size_t i) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(slots + i));
  };
  __m128i lo0 = load(0), hi0 = lo0, lo1 = load(8), hi1 = lo1;
  std::size_t i = 16;
  for (; i + 16 <= n; i += 16) {
    __m128i a = load(i), b = load(i + 8);
    lo0 = _mm_min_epi16(lo0, a);
    hi0 = _mm_max_epi16(hi0, a);
    lo1 = _mm_min_epi16(lo1, b);
    hi1 = _mm_max_epi16(hi1, b);
  }
  if (i < n) {  // the last 16 slots again, overlapping what was seen: min and max do not mind
    __m128i a = load(n - 16), b = load(n - 8);
    lo0 = _mm_min_epi16(lo0, a);
    hi0 = _mm_max_epi16(hi0, a);
    lo1 = _mm_min_epi16(lo1, b);
    hi1 = _mm_max_epi16(hi1, b);
  }
  return {across_lanes<min16>(_mm_min_epi16(lo0, lo1)),
          across_lanes<max16>(_mm_max_epi16(hi0, hi1))};
}

bool slot_range_is_simd() { return true; }

#else

SlotRange slot_range(const std::int16_t* slots, std::size_t n) {
  return slot_range_portable(slots, n);
}

bool slot_range_is_simd() { return false; }

#endif

}  // namespace rtb::payload
