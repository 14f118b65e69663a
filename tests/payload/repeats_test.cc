#include "rtb/payload/repeats.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "rtb/base/error.h"

namespace rtb::payload {
namespace {

using Token = std::vector<std::int16_t>;
using Added = std::vector<std::pair<Token, std::uint32_t>>;

// What remember() and drain() hand back, as (slots, count).
auto collect(Added& added) {
  return [&added](const RepeatedTokens::Pending& p) {
    added.emplace_back(Token(p.slots.begin(), p.slots.end()), p.count);
  };
}

TEST(HashSlots, EverySlotAndTheTailCount) {
  // Lengths around the 8-byte words and the four chains (16 slots a round).
  for (std::size_t n : {1u, 3u, 4u, 5u, 15u, 16u, 17u, 600u, 601u}) {
    Token slots(n);
    for (std::size_t i = 0; i < n; ++i) slots[i] = static_cast<std::int16_t>(i * 7 % 512);
    const std::uint64_t base = hash_slots(slots.data(), n);
    EXPECT_EQ(hash_slots(slots.data(), n), base);
    std::set<std::uint64_t> seen = {base};
    for (std::size_t i = 0; i < n; ++i) {
      Token changed = slots;
      changed[i] = static_cast<std::int16_t>(changed[i] + 1);
      seen.insert(hash_slots(changed.data(), n));
    }
    EXPECT_EQ(seen.size(), n + 1) << n << " slots: a change of one slot kept the hash";
  }
}

// Every 4th word (4 slots a word): a change in words 0, 4, 8, ... or in the tail after the last
// whole word changes the hash; elsewhere it does not.
TEST(HashSlots, ASampleOfTheWords) {
  Token slots(39);  // 9 whole words and 3 slots of tail
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<std::int16_t>(i);
  const std::uint64_t base = hash_slots(slots.data(), slots.size(), 4);
  EXPECT_NE(base, hash_slots(slots.data(), slots.size()));
  for (std::size_t i = 0; i < slots.size(); ++i) {
    Token changed = slots;
    changed[i] = -7;
    const bool sampled = i >= 36 || (i / 4) % 4 == 0;
    EXPECT_EQ(hash_slots(changed.data(), changed.size(), 4) != base, sampled) << "slot " << i;
  }
}

TEST(RepeatedTokens, ARepeatIsCountedAndHandedBackOnce) {
  RepeatedTokens repeats(4, 8);
  const Token a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  EXPECT_FALSE(repeats.repeat(a.data()));
  Added added;
  repeats.remember(a.data(), collect(added));
  EXPECT_TRUE(repeats.repeat(a.data()));
  EXPECT_TRUE(repeats.repeat(a.data()));
  EXPECT_FALSE(repeats.repeat(b.data()));  // one slot differs
  EXPECT_EQ(repeats.hits(), 2);
  EXPECT_EQ(repeats.lookups(), 4);
  repeats.drain(collect(added));
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0], std::make_pair(a, std::uint32_t{2}));
  added.clear();
  repeats.drain(collect(added));
  EXPECT_TRUE(added.empty());
  // Still remembered after the drain: a repeat counts from zero again.
  EXPECT_TRUE(repeats.repeat(a.data()));
  repeats.drain(collect(added));
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].second, 1u);
}

// With one entry every token takes the same place: the one it replaces, when repeats of it are
// pending, is handed back before its copy is overwritten.
TEST(RepeatedTokens, ATokenReplacedHandsBackItsRepeats) {
  RepeatedTokens repeats(3, 1);
  const Token a = {0, 1, 2}, b = {2, 1, 0}, c = {5, 5, 5};
  Added added;
  ASSERT_FALSE(repeats.repeat(a.data()));
  repeats.remember(a.data(), collect(added));
  ASSERT_TRUE(repeats.repeat(a.data()));
  ASSERT_TRUE(repeats.repeat(a.data()));
  ASSERT_TRUE(repeats.repeat(a.data()));
  ASSERT_FALSE(repeats.repeat(b.data()));
  repeats.remember(b.data(), collect(added));
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0], std::make_pair(a, std::uint32_t{3}));
  // b had no repeat: nothing to hand back when c replaces it.
  ASSERT_FALSE(repeats.repeat(c.data()));
  repeats.remember(c.data(), collect(added));
  EXPECT_EQ(added.size(), 1u);
  ASSERT_FALSE(repeats.repeat(a.data()));  // a is gone
}

// Tokens that differ only outside the hashed words share a place: the comparison tells them
// apart, and the newer one takes the place, handing back the older one's repeats.
TEST(RepeatedTokens, NearTwinsAreComparedAndTakeTheSamePlace) {
  RepeatedTokens repeats(32, 64);
  Token a(32, 3);
  Token b = a;
  b[5] = 4;  // word 1, not hashed
  Added added;
  ASSERT_FALSE(repeats.repeat(a.data()));
  repeats.remember(a.data(), collect(added));
  ASSERT_TRUE(repeats.repeat(a.data()));
  EXPECT_FALSE(repeats.repeat(b.data()));
  const std::optional<RepeatedTokens::Pending> occupant = repeats.occupant();
  ASSERT_TRUE(occupant.has_value());
  EXPECT_EQ(Token(occupant->slots.begin(), occupant->slots.end()), a);
  EXPECT_EQ(occupant->count, 1u);
  repeats.remember(b.data(), collect(added));
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0], std::make_pair(a, std::uint32_t{1}));
  EXPECT_TRUE(repeats.repeat(b.data()));
  EXPECT_FALSE(repeats.repeat(a.data()));
}

// A near twin the caller checked takes the place with the occupant's pending repeats and itself:
// count + 1 pending, the lookup counted as found.
TEST(RepeatedTokens, ANearTwinTakesThePlaceAndItsRepeats) {
  RepeatedTokens repeats(32, 64);
  const Token a(32, 3);
  Token b = a;
  b[6] = 9;
  Added added;
  ASSERT_FALSE(repeats.repeat(a.data()));
  EXPECT_FALSE(repeats.occupant().has_value());  // an empty place
  repeats.remember(a.data(), collect(added));
  ASSERT_TRUE(repeats.repeat(a.data()));
  ASSERT_TRUE(repeats.repeat(a.data()));
  ASSERT_FALSE(repeats.repeat(b.data()));
  repeats.take_place(b.data());
  EXPECT_EQ(repeats.hits(), 3);
  EXPECT_EQ(repeats.lookups(), 4);
  EXPECT_FALSE(repeats.repeat(a.data()));
  repeats.drain(collect(added));
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0], std::make_pair(b, std::uint32_t{3}));
}

TEST(RepeatedTokens, EntriesFitTheBytes) {
  EXPECT_EQ(RepeatedTokens::entries_for(600, std::size_t{2} << 20), 1747u);
  EXPECT_EQ(RepeatedTokens::entries_for(600, 100), 1u);
  EXPECT_EQ(RepeatedTokens::entries_for(1, std::size_t{2} << 20), 4096u);
  EXPECT_THROW(RepeatedTokens(0, 4), Error);
  EXPECT_THROW(RepeatedTokens(4, 0), Error);
}

}  // namespace
}  // namespace rtb::payload
