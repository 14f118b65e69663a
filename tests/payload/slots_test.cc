#include "rtb/payload/slots.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace rtb::payload {
namespace {

constexpr std::int16_t kLowest = std::numeric_limits<std::int16_t>::min();
constexpr std::int16_t kHighest = std::numeric_limits<std::int16_t>::max();

// Both kernels on slots[0..n), which must give `expected`.
void expect_range(const std::vector<std::int16_t>& slots, SlotRange expected) {
  EXPECT_EQ(slot_range(slots.data(), slots.size()), expected) << slots.size() << " slots";
  EXPECT_EQ(slot_range_portable(slots.data(), slots.size()), expected) << slots.size() << " slots";
}

TEST(SlotRange, OneSlotAndTheInt16Extremes) {
  expect_range({7}, {7, 7});
  expect_range({-1}, {-1, -1});
  expect_range({kHighest, kLowest}, {kLowest, kHighest});
}

// Every length around the 8- and 16-slot vectors, with the smallest and the largest slot at every
// place: the tail the SIMD loop covers by overlapping must not be missed.
TEST(SlotRange, ExtremesAtEveryPlaceOfEveryLength) {
  for (std::size_t n = 2; n <= 48; ++n) {
    for (std::size_t at = 0; at < n; ++at) {
      std::vector<std::int16_t> slots(n, 100);
      slots[at] = -5;
      expect_range(slots, {-5, 100});
      slots[at] = 300;
      expect_range(slots, {100, 300});
    }
  }
}

// A token of padding is all -1; one expert id in it shows in the range.
TEST(SlotRange, PaddingAndOneStraySlot) {
  std::vector<std::int16_t> token(600, -1);
  expect_range(token, {-1, -1});
  token[599] = 0;
  expect_range(token, {-1, 0});
}

TEST(SlotRange, SimdAndPortableAgreeOnRandomSlots) {
  std::mt19937 random(29);
  std::uniform_int_distribution<int> value(kLowest, kHighest), length(1, 700);
  for (int round = 0; round < 500; ++round) {
    std::vector<std::int16_t> slots(static_cast<std::size_t>(length(random)));
    for (std::int16_t& slot : slots) slot = static_cast<std::int16_t>(value(random));
    EXPECT_EQ(slot_range(slots.data(), slots.size()),
              slot_range_portable(slots.data(), slots.size()));
  }
}

}  // namespace
}  // namespace rtb::payload
