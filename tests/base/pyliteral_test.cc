#include "rtb/base/pyliteral.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "rtb/base/error.h"

namespace rtb {
namespace {

using ::testing::HasSubstr;
using Kind = PyValue::Kind;

std::string error_of(std::string_view text, int depth = kDefaultPyLiteralDepth) {
  try {
    parse_py_literal(text, depth);
  } catch (const Error& e) {
    return e.message();
  }
  return "no error";
}

TEST(PyLiteral, CostAnalysisDictWithAwkwardKeys) {
  // The shape XLA's cost analysis takes after str(): keys with blanks, braces and digits.
  PyValue v = parse_py_literal(
      "{'bytes accessed0{}': 1536.0, 'bytes accessedout{}': 512.0, 'flops': 1.5e+15, "
      "'utilization0{}': 2.0, 'bytes accessed': 2.25e+12, 'transcendentals': 3.0e+09, "
      "'optimal_seconds': -1.0}");
  ASSERT_EQ(v.kind, Kind::kDict);
  ASSERT_EQ(v.entries.size(), 7u);
  EXPECT_EQ(v.entries[0].first.text, "bytes accessed0{}");
  EXPECT_DOUBLE_EQ(v.find("flops")->number, 1.5e15);
  EXPECT_DOUBLE_EQ(v.find("bytes accessed")->number, 2.25e12);
  EXPECT_DOUBLE_EQ(v.find("transcendentals")->number, 3e9);
  EXPECT_DOUBLE_EQ(v.find("optimal_seconds")->number, -1.0);
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(PyLiteral, OneElementListOfDictAsOlderJaxPrints) {
  PyValue v = parse_py_literal("[{'flops': 12.0, 'bytes accessed': 4.0}]");
  ASSERT_EQ(v.kind, Kind::kList);
  ASSERT_EQ(v.items.size(), 1u);
  EXPECT_DOUBLE_EQ(v.items[0].find("flops")->number, 12.0);
}

TEST(PyLiteral, StringsWithQuotesBracesAndEscapes) {
  PyValue v = parse_py_literal(
      R"({"it's": 'a "b" {c} [d], e: f', 'tab\there': '\\', 'x\x41\u00e9\U0001F600': "\n"})");
  ASSERT_EQ(v.entries.size(), 3u);
  EXPECT_EQ(v.entries[0].first.text, "it's");
  EXPECT_EQ(v.entries[0].second.text, "a \"b\" {c} [d], e: f");
  EXPECT_EQ(v.entries[1].first.text, "tab\there");
  EXPECT_EQ(v.entries[1].second.text, "\\");
  EXPECT_EQ(v.entries[2].first.text, "xA\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.entries[2].second.text, "\n");
  EXPECT_EQ(parse_py_literal(R"('\'')").text, "'");
  EXPECT_EQ(parse_py_literal(R"('\101\0')").text, std::string("A\0", 2));
}

TEST(PyLiteral, NumbersAsPythonPrintsThem) {
  EXPECT_DOUBLE_EQ(parse_py_literal("1e+15").number, 1e15);
  EXPECT_DOUBLE_EQ(parse_py_literal("1.5e-05").number, 1.5e-5);
  EXPECT_DOUBLE_EQ(parse_py_literal("-0.25").number, -0.25);
  EXPECT_DOUBLE_EQ(parse_py_literal("+3").number, 3);
  EXPECT_TRUE(std::isinf(parse_py_literal("inf").number));
  EXPECT_GT(parse_py_literal("inf").number, 0);
  EXPECT_LT(parse_py_literal("-inf").number, 0);
  EXPECT_TRUE(std::isnan(parse_py_literal("nan").number));
  EXPECT_EQ(parse_py_literal("1e400").number, HUGE_VAL);

  PyValue i = parse_py_literal("123456789012");
  EXPECT_EQ(i.kind, Kind::kInt);
  EXPECT_TRUE(i.exact);
  EXPECT_EQ(i.integer, 123456789012LL);
  PyValue big = parse_py_literal("123456789012345678901234567890");
  EXPECT_EQ(big.kind, Kind::kInt);
  EXPECT_FALSE(big.exact);
  EXPECT_EQ(big.text, "123456789012345678901234567890");
  EXPECT_NEAR(big.number, 1.2345678901234568e29, 1e15);
  EXPECT_EQ(parse_py_literal("2.0").kind, Kind::kFloat);
}

TEST(PyLiteral, NamesTuplesAndNesting) {
  PyValue v = parse_py_literal("{'a': (1,), 'b': (), 'c': [True, False, None], 'd': {'e': [[]]},}");
  ASSERT_EQ(v.kind, Kind::kDict);
  EXPECT_EQ(v.find("a")->kind, Kind::kTuple);
  EXPECT_EQ(v.find("a")->items.size(), 1u);
  EXPECT_TRUE(v.find("b")->items.empty());
  const PyValue& c = *v.find("c");
  ASSERT_EQ(c.items.size(), 3u);
  EXPECT_TRUE(c.items[0].boolean);
  EXPECT_EQ(c.items[1].kind, Kind::kBool);
  EXPECT_FALSE(c.items[1].boolean);
  EXPECT_EQ(c.items[2].kind, Kind::kNone);
  EXPECT_EQ(v.find("d")->find("e")->items[0].kind, Kind::kList);
  EXPECT_EQ(parse_py_literal("  {}  ").kind, Kind::kDict);
  // A repeated key: the last one counts, as in Python.
  EXPECT_DOUBLE_EQ(parse_py_literal("{'k': 1, 'k': 2}").find("k")->number, 2);
}

TEST(PyLiteral, TruncatedAndMalformedInputNamesTheColumn) {
  EXPECT_THAT(error_of("{'flops': 1.0, 'bytes"), HasSubstr("column 16: unterminated string"));
  EXPECT_THAT(error_of("{'flops': 1.0, "), HasSubstr("truncated"));
  EXPECT_THAT(error_of("{'flops': 1.0"), HasSubstr("truncated"));
  EXPECT_THAT(error_of("[{'flops': 1.0}"), HasSubstr("ends inside a list"));
  EXPECT_THAT(error_of("{'flops' 1.0}"), HasSubstr("':' expected"));
  EXPECT_THAT(error_of("{'a': 1 'b': 2}"), HasSubstr("',' or '}' expected"));
  EXPECT_THAT(error_of("{'a': 1]"), HasSubstr("',' or '}' expected, not ']'"));
  EXPECT_THAT(error_of("{'a': infinity}"), HasSubstr("unknown name 'infinity'"));
  EXPECT_THAT(error_of("{'a': 1.2.3}"), HasSubstr("malformed number"));
  EXPECT_THAT(error_of("{'a': 1e}"), HasSubstr("exponent"));
  EXPECT_THAT(error_of("{'a': 12abc}"), HasSubstr("in a number"));
  EXPECT_THAT(error_of("{} trailing"), HasSubstr("column 4: unexpected 't' after the value"));
  EXPECT_THAT(error_of(""), HasSubstr("empty input"));
  EXPECT_THAT(error_of("@"), HasSubstr("unexpected '@'"));
  EXPECT_THAT(error_of("'\\x4'"), HasSubstr("hex digits"));
  EXPECT_THAT(error_of("'a\nb'"), HasSubstr("newline"));
  EXPECT_THAT(error_of("-True"), HasSubstr("not a number"));
}

TEST(PyLiteral, DepthIsBoundedWithoutRecursion) {
  std::string deep(100000, '[');
  EXPECT_THAT(error_of(deep), HasSubstr("nested deeper than 64 levels"));
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_EQ(parse_py_literal(ok).kind, Kind::kList);
  std::string too_deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_THAT(error_of(too_deep), HasSubstr("nested deeper"));
  EXPECT_THAT(error_of("[[1]]", 1), HasSubstr("nested deeper than 1 levels"));
}

TEST(PyLiteral, LongFlatListsParse) {
  std::string text = "[";
  for (int i = 0; i < 20000; ++i) text += std::to_string(i) + ", ";
  text += "]";
  PyValue v = parse_py_literal(text);
  ASSERT_EQ(v.items.size(), 20000u);
  EXPECT_EQ(v.items.back().integer, 19999);
}

}  // namespace
}  // namespace rtb
