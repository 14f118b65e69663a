// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014):
// its finalizer, a bijection of 64-bit words in which every input bit moves about half of the
// output bits, and the golden-ratio increment of its stream. The payload builder's counter-based
// randomness, the bootstrap of bench statistics and the repeated-token hash all use this one.
#pragma once

#include <cstdint>

namespace rtb {

inline constexpr std::uint64_t kGoldenGamma = 0x9e37'79b9'7f4a'7c15;

constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58'476d'1ce4'e5b9;
  z = (z ^ (z >> 27)) * 0x94d0'49bb'1331'11eb;
  return z ^ (z >> 31);
}

}  // namespace rtb
