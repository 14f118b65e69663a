#include "rtb/logs/text_table.h"

#include <gtest/gtest.h>

namespace rtb::logs {
namespace {

TEST(TextTable, FirstColumnLeftOthersRightUnlessMarked) {
  TextTable table({"run", "s", "note"}, {true, false, true});
  table.add({"control", "10.5", "ok"});
  table.add({"v", "9", ""});
  EXPECT_EQ(table.str(),
            "run         s  note\n"
            "control  10.5  ok\n"
            "v           9\n");
}

TEST(TextTable, ShortRowsEndEarly) {
  TextTable table({"a", "b"}, {true, true});
  table.add({"long cell"});
  EXPECT_EQ(table.str(), "a          b\nlong cell\n");
}

}  // namespace
}  // namespace rtb::logs
