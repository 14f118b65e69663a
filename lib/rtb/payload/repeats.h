// Repeated tokens in the routing check (check.cc): a token's L*K expert slots that are byte for
// byte those of a well-formed token seen a little earlier pass the same checks and add the same
// loads, so the check counts them once and adds the repeats later, a multiple per cell. The
// builder's layout makes such repeats (builder.h: tile t+1 is tile t's columns plus one, so a
// token differs from its twin a tile before only where a run of S starts): at the issue shape
// (8 x 16,384 tokens, 60 x top-10) 27,168 of the 121,896 real tokens are distinct, and a table
// of the 1,747 met last finds most repeats. Nothing is taken on trust: a repeat is found by a hash
// of a sample of its slots and confirmed by comparing every slot, and only tokens that passed every
// routing check are remembered. A token that differs from the one in its place in a few layers (a
// near twin) can take that place with its pending repeats (occupant(), take_place()): the check
// then looks at those layers only and moves the loads where the two differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "rtb/base/memory.h"

namespace rtb::payload {

class RepeatedTokens {
 public:
  // A token's repeats, handed back to be added `count` times over: its slots and the count.
  struct Pending {
    std::span<const std::int16_t> slots;
    std::uint32_t count;
  };

  // `slots_per_token` = L*K >= 1; `entries` >= 1 tokens remembered, each at the place its hash
  // picks, a newer one taking an older one's place.
  RepeatedTokens(std::size_t slots_per_token, std::size_t entries);

  // How many tokens fit in `bytes` of copies (at least 1, at most 4096).
  static std::size_t entries_for(std::size_t slots_per_token, std::size_t bytes);

  // Whether `slots` repeats a remembered token; if so its count grows by one and the caller
  // skips the token. Either way the place it would go is kept for remember().
  bool repeat(const std::int16_t* slots);

  // The token remembered at the place repeat() last looked at (which did not find the token it
  // was given there) and its pending repeats; none when the place is empty.
  std::optional<Pending> occupant() const {
    if (!used_[probed_]) return std::nullopt;
    return Pending{entry(probed_), counts_[probed_]};
  }

  // Puts the token last given to repeat() in its occupant's place, the occupant's pending repeats
  // and the token itself becoming the token's: the caller counted none of the token and added
  // the occupant's pending repeats where the two differ (count x (occupant - token)), so that
  // count + 1 copies of the token add the rest.
  void take_place(const std::int16_t* slots) {
    const std::uint32_t count = counts_[probed_];
    store(slots);
    counts_[probed_] = count + 1;
    ++hits_;
  }

  // Remembers the token last given to repeat() (which did not find it) once the caller counted
  // it. The token it replaces, when repeats of it are pending, goes to `add` first.
  template <typename Add>
  void remember(const std::int16_t* slots, Add&& add) {
    if (counts_[probed_] > 0) {
      add(Pending{entry(probed_), counts_[probed_]});
      counts_[probed_] = 0;
    }
    store(slots);
  }

  // Every remembered token with pending repeats, once; afterwards none is pending.
  template <typename Add>
  void drain(Add&& add) {
    for (std::size_t e = 0; e < counts_.size(); ++e) {
      if (counts_[e] == 0) continue;
      add(Pending{entry(e), counts_[e]});
      counts_[e] = 0;
    }
  }

  // Lookups that found the token, or a near twin whose place it took, and lookups in all.
  std::int64_t hits() const { return hits_; }
  std::int64_t lookups() const { return lookups_; }

 private:
  void store(const std::int16_t* slots);
  // The hash a token is looked up by covers every 4th word of its slots, a quarter of the work
  // of hashing them all; a token that differs from a remembered one elsewhere only is compared
  // and missed. Such near twins (the builder's tokens a tile apart differ where a run starts, in
  // one slot of 600) then take the same place, the newer replacing the older, which is the one
  // that repeats next.
  static constexpr std::size_t kHashEvery = 4;
  std::span<const std::int16_t> entry(std::size_t e) const {
    return {copies_.data() + e * slots_per_token_, slots_per_token_};
  }
  std::size_t slots_per_token_;
  std::size_t entries_;
  std::vector<std::uint64_t> hashes_;
  std::vector<std::uint32_t> counts_;  // pending repeats
  std::vector<char> used_;
  // The copies, about 2.4 MB at 60 x top-10: in huge pages where the kernel has them, one fault
  // instead of ~600.
  LargeArray<std::int16_t> copies_;
  std::size_t probed_ = 0;         // the entry repeat() looked at last
  std::uint64_t probed_hash_ = 0;  // and the hash it computed
  std::int64_t hits_ = 0;
  std::int64_t lookups_ = 0;
};

// A 64-bit hash of n int16 slots: every `every`-th 8-byte word of them (1: all) and the slots
// after the last whole word, in four independent multiply chains.
std::uint64_t hash_slots(const std::int16_t* slots, std::size_t n, std::size_t every = 1);

}  // namespace rtb::payload
