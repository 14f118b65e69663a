// Tests of the open-addressing name index of the analyser (flat_index.h).
#include "rtb/hlo/flat_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rtb::hlo {
namespace {

TEST(HloFlatIndex, FindsWhatItInsertedAcrossGrowth) {
  FlatIndex index;
  std::vector<std::uint64_t> keys;
  for (std::uint64_t i = 0; i < 5000; ++i)
    keys.push_back(hash_name("computation." + std::to_string(i)));
  for (std::uint32_t i = 0; i < keys.size(); ++i) {
    bool inserted = false;
    std::uint32_t value = index.find_or_insert(keys[i], i, inserted,
                                               [&](std::uint32_t v) { return keys[v] == keys[i]; });
    EXPECT_TRUE(inserted);
    EXPECT_EQ(value, i);
  }
  for (std::uint32_t i = 0; i < keys.size(); ++i) {
    index.prefetch(keys[i]);
    bool inserted = true;
    std::uint32_t value = index.find_or_insert(keys[i], 99999, inserted,
                                               [&](std::uint32_t v) { return keys[v] == keys[i]; });
    EXPECT_FALSE(inserted);
    EXPECT_EQ(value, i);
  }
}

// Keys with the same high 32 bits share a fingerprint: the caller's check tells them apart.
TEST(HloFlatIndex, SameFingerprintDifferentKeysAreDifferentEntries) {
  FlatIndex index;
  const std::uint64_t keys[] = {0x1234567800000001, 0x1234567800000002, 0x0000000000000003};
  for (std::uint32_t i = 0; i < 3; ++i) {
    bool inserted = false;
    EXPECT_EQ(index.find_or_insert(keys[i], i, inserted,
                                   [&](std::uint32_t v) { return keys[v] == keys[i]; }),
              i);
    EXPECT_TRUE(inserted);
  }
  bool inserted = true;
  EXPECT_EQ(index.find_or_insert(keys[1], 7, inserted,
                                 [&](std::uint32_t v) { return keys[v] == keys[1]; }),
            1u);
  EXPECT_FALSE(inserted);
}

TEST(HloFlatIndex, NameHashIsNeverZero) {
  EXPECT_NE(hash_name(""), 0u);
  EXPECT_EQ(hash_name("main"), hash_name(std::string("main")));
}

}  // namespace
}  // namespace rtb::hlo
