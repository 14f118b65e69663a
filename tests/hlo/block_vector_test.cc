// Tests of BlockVector (block_vector.h): elements stay put while it grows, and are destroyed.
#include "rtb/hlo/block_vector.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace rtb::hlo {
namespace {

TEST(HloBlockVector, ElementsNeverMoveAndKeepTheirValues) {
  BlockVector<std::string, 4> strings;
  std::vector<const std::string*> addresses;
  for (int i = 0; i < 50; ++i) {
    std::string& s = strings.emplace_back();
    EXPECT_TRUE(s.empty());
    s = "element " + std::to_string(i) + " long enough not to fit in the small buffer";
    addresses.push_back(&s);
  }
  ASSERT_EQ(strings.size(), 50u);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(&strings[i], addresses[i]);
    EXPECT_EQ(strings[i],
              "element " + std::to_string(i) + " long enough not to fit in the small buffer");
  }
}

TEST(HloBlockVector, DestroysItsElements) {
  auto counter = std::make_shared<int>(0);
  {
    BlockVector<std::shared_ptr<int>, 3> pointers;
    for (int i = 0; i < 10; ++i) pointers.emplace_back() = counter;
    EXPECT_EQ(counter.use_count(), 11);
  }
  EXPECT_EQ(counter.use_count(), 1);
}

}  // namespace
}  // namespace rtb::hlo
