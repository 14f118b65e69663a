#include "rtb/base/shared_text.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>

namespace rtb {
namespace {

TEST(SharedTextTest, HeldTextIsSharedByCopiesAndOutlivesTheOriginal) {
  std::string source(100000, 'x');
  SharedText copy;
  {
    SharedText text(source);
    copy = text;
    EXPECT_EQ(copy.view().data(), text.view().data());  // one string, not two
    EXPECT_NE(copy.view().data(), source.data());       // not a view of the caller's string
  }
  source.assign(100000, 'y');
  EXPECT_EQ(copy, std::string(100000, 'x'));
  SharedText moved = std::move(copy);
  EXPECT_EQ(moved.size(), 100000u);
  EXPECT_EQ(moved.view().front(), 'x');
}

TEST(SharedTextTest, StaticTextIsViewedInPlace) {
  static constexpr std::string_view kEmbedded = "print('driver')\n";
  SharedText text = SharedText::of_static(kEmbedded);
  EXPECT_EQ(text.view().data(), kEmbedded.data());
  SharedText copy = text;
  EXPECT_EQ(copy.view().data(), kEmbedded.data());
  EXPECT_EQ(copy, kEmbedded);
}

TEST(SharedTextTest, ComparesAndPrintsAsItsText) {
  SharedText empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty, "");
  SharedText text = "abc";
  EXPECT_FALSE(text.empty());
  EXPECT_TRUE(text == "abc");
  EXPECT_TRUE(std::string("abc") == text);
  EXPECT_FALSE(text == "abd");
  std::string_view view = text;
  EXPECT_EQ(view, "abc");
  std::ostringstream out;
  out << text;
  EXPECT_EQ(out.str(), "abc");
}

}  // namespace
}  // namespace rtb
