#include "rtb/base/enum_names.h"

#include <gtest/gtest.h>

#include <string_view>

namespace rtb {
namespace {

enum class Colour { kRed, kGreen, kBlue };

constexpr const char* colour_name(Colour colour) {
  return enum_name<Colour::kBlue>(colour, {"red", "green", "blue"});
}

TEST(EnumName, NamesEachEnumeratorInDeclarationOrder) {
  EXPECT_EQ(std::string_view(colour_name(Colour::kRed)), "red");
  EXPECT_EQ(std::string_view(colour_name(Colour::kGreen)), "green");
  EXPECT_EQ(std::string_view(colour_name(Colour::kBlue)), "blue");
  static_assert(std::string_view(colour_name(Colour::kBlue)) == "blue", "usable at compile time");
}

TEST(EnumName, AValueOutsideTheEnumIsAQuestionMark) {
  EXPECT_EQ(std::string_view(colour_name(static_cast<Colour>(3))), "?");
  EXPECT_EQ(std::string_view(colour_name(static_cast<Colour>(-1))), "?");
}

}  // namespace
}  // namespace rtb
