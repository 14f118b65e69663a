#include "rtb/payload/repeats.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "rtb/base/error.h"
#include "rtb/base/mix.h"

namespace rtb::payload {

std::uint64_t hash_slots(const std::int16_t* slots, std::size_t n, std::size_t every) {
  // Four chains of xor, rotate, multiply over 8-byte words (word w, w + every, w + 2 every,
  // w + 3 every at a time), so the multiplies overlap; words left over and the tail (fewer than
  // four int16) go into the first chain. The rotation brings a word's high bits down before the
  // multiply spreads them up (a multiply alone never moves a change downwards), and SplitMix64's
  // finalizer mixes the chains. Equal slots give equal hashes; a collision only costs a
  // comparison.
  auto step = [](std::uint64_t chain, std::uint64_t word) {
    return std::rotl(chain ^ word, 29) * kGoldenGamma;
  };
  const auto* bytes = reinterpret_cast<const unsigned char*>(slots);
  auto word_at = [bytes](std::size_t w) {
    std::uint64_t word;
    std::memcpy(&word, bytes + w * 8, 8);
    return word;
  };
  every = std::max<std::size_t>(every, 1);
  const std::size_t words = n * sizeof(std::int16_t) / 8;
  std::uint64_t chain[4] = {n, 1, 2, 3};
  std::size_t w = 0;
  for (; w + 3 * every < words; w += 4 * every) {
    for (std::size_t j = 0; j < 4; ++j) chain[j] = step(chain[j], word_at(w + j * every));
  }
  for (; w < words; w += every) chain[0] = step(chain[0], word_at(w));
  const std::size_t tail = n * sizeof(std::int16_t) - words * 8;
  if (tail > 0) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes + words * 8, tail);
    chain[0] = step(chain[0], word);
  }
  std::uint64_t h =
      chain[0] ^ std::rotl(chain[1], 16) ^ std::rotl(chain[2], 32) ^ std::rotl(chain[3], 48);
  return mix64(h);
}

RepeatedTokens::RepeatedTokens(std::size_t slots_per_token, std::size_t entries)
    : slots_per_token_(slots_per_token),
      entries_(entries),
      hashes_(entries, 0),
      counts_(entries, 0),
      used_(entries, 0),
      copies_(entries * slots_per_token, PageAdvice::kHugePages) {
  if (slots_per_token == 0 || entries == 0) fail("internal: RepeatedTokens without room");
}

std::size_t RepeatedTokens::entries_for(std::size_t slots_per_token, std::size_t bytes) {
  const std::size_t fit = bytes / std::max<std::size_t>(1, slots_per_token * sizeof(std::int16_t));
  return std::clamp<std::size_t>(fit, 1, 4096);
}

bool RepeatedTokens::repeat(const std::int16_t* slots) {
  ++lookups_;
  probed_hash_ = hash_slots(slots, slots_per_token_, kHashEvery);
  // The high 32 bits, the best mixed, scaled to [0, entries).
  probed_ = static_cast<std::size_t>(((probed_hash_ >> 32) * entries_) >> 32);
  if (!used_[probed_] || hashes_[probed_] != probed_hash_ ||
      std::memcmp(copies_.data() + probed_ * slots_per_token_, slots,
                  slots_per_token_ * sizeof(std::int16_t)) != 0) {
    return false;
  }
  ++counts_[probed_];
  ++hits_;
  return true;
}

void RepeatedTokens::store(const std::int16_t* slots) {
  std::memcpy(copies_.data() + probed_ * slots_per_token_, slots,
              slots_per_token_ * sizeof(std::int16_t));
  hashes_[probed_] = probed_hash_;
  used_[probed_] = 1;
}

}  // namespace rtb::payload
