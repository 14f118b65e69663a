#include "rtb/base/literal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb {
namespace {

using Kind = Literal::Kind;

std::string error_of(std::string_view text, LiteralOptions options) {
  try {
    parse_literal(text, options);
  } catch (const Error& e) {
    return e.message();
  }
  return "no error";
}

std::string error_of(std::string_view text, int depth = kDefaultLiteralDepth) {
  return error_of(text, LiteralOptions{.max_depth = depth});
}

std::string json_error_of(std::string_view text) {
  return error_of(text, LiteralOptions{.syntax = LiteralSyntax::kJson});
}

const LiteralOptions kCalls{.unwrap_calls = true};
const LiteralOptions kWords{.bare_words = true};

TEST(PythonLiteral, CostAnalysisDictWithAwkwardKeys) {
  // The shape XLA's cost analysis takes after str(): keys with blanks, braces and digits.
  Literal v = parse_literal(
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

TEST(PythonLiteral, OneElementListOfDictAsOlderJaxPrints) {
  Literal v = parse_literal("[{'flops': 12.0, 'bytes accessed': 4.0}]");
  ASSERT_EQ(v.kind, Kind::kList);
  ASSERT_EQ(v.items.size(), 1u);
  EXPECT_DOUBLE_EQ(v.items[0].find("flops")->number, 12.0);
}

TEST(PythonLiteral, StringsWithQuotesBracesAndEscapes) {
  Literal v = parse_literal(
      R"({"it's": 'a "b" {c} [d], e: f', 'tab\there': '\\', 'x\x41\u00e9\U0001F600': "\n"})");
  ASSERT_EQ(v.entries.size(), 3u);
  EXPECT_EQ(v.entries[0].first.text, "it's");
  EXPECT_EQ(v.entries[0].second.text, "a \"b\" {c} [d], e: f");
  EXPECT_EQ(v.entries[1].first.text, "tab\there");
  EXPECT_EQ(v.entries[1].second.text, "\\");
  EXPECT_EQ(v.entries[2].first.text, "xA\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.entries[2].second.text, "\n");
  EXPECT_EQ(parse_literal(R"('\'')").text, "'");
  EXPECT_EQ(parse_literal(R"('\101\0')").text, std::string("A\0", 2));
}

TEST(PythonLiteral, NumbersAsPythonPrintsThem) {
  EXPECT_DOUBLE_EQ(parse_literal("1e+15").number, 1e15);
  EXPECT_DOUBLE_EQ(parse_literal("1.5e-05").number, 1.5e-5);
  EXPECT_DOUBLE_EQ(parse_literal("-0.25").number, -0.25);
  EXPECT_DOUBLE_EQ(parse_literal("+3").number, 3);
  EXPECT_TRUE(std::isinf(parse_literal("inf").number));
  EXPECT_GT(parse_literal("inf").number, 0);
  EXPECT_LT(parse_literal("-inf").number, 0);
  EXPECT_TRUE(std::isnan(parse_literal("nan").number));
  EXPECT_EQ(parse_literal("1e400").number, HUGE_VAL);

  Literal i = parse_literal("123456789012");
  EXPECT_EQ(i.kind, Kind::kInt);
  EXPECT_TRUE(i.exact);
  EXPECT_EQ(i.integer, 123456789012LL);
  Literal big = parse_literal("123456789012345678901234567890");
  EXPECT_EQ(big.kind, Kind::kInt);
  EXPECT_FALSE(big.exact);
  EXPECT_EQ(big.text, "123456789012345678901234567890");
  EXPECT_NEAR(big.number, 1.2345678901234568e29, 1e15);
  EXPECT_EQ(parse_literal("2.0").kind, Kind::kFloat);
}

TEST(PythonLiteral, NamesTuplesAndNesting) {
  Literal v = parse_literal("{'a': (1,), 'b': (), 'c': [True, False, None], 'd': {'e': [[]]},}");
  ASSERT_EQ(v.kind, Kind::kDict);
  EXPECT_EQ(v.find("a")->kind, Kind::kTuple);
  EXPECT_EQ(v.find("a")->items.size(), 1u);
  EXPECT_TRUE(v.find("b")->items.empty());
  const Literal& c = *v.find("c");
  ASSERT_EQ(c.items.size(), 3u);
  EXPECT_TRUE(c.items[0].boolean);
  EXPECT_EQ(c.items[1].kind, Kind::kBool);
  EXPECT_FALSE(c.items[1].boolean);
  EXPECT_EQ(c.items[2].kind, Kind::kNone);
  EXPECT_EQ(v.find("d")->find("e")->items[0].kind, Kind::kList);
  EXPECT_EQ(parse_literal("  {}  ").kind, Kind::kDict);
  // A repeated key: the last one counts, as in Python.
  EXPECT_DOUBLE_EQ(parse_literal("{'k': 1, 'k': 2}").find("k")->number, 2);
}

TEST(PythonLiteral, TruncatedAndMalformedInputNamesTheColumn) {
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

TEST(PythonLiteral, DepthIsBoundedWithoutRecursion) {
  std::string deep(100000, '[');
  EXPECT_THAT(error_of(deep), HasSubstr("nested deeper than 64 levels"));
  std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_EQ(parse_literal(ok).kind, Kind::kList);
  std::string too_deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_THAT(error_of(too_deep), HasSubstr("nested deeper"));
  EXPECT_THAT(error_of("[[1]]", 1), HasSubstr("nested deeper than 1 levels"));
}

TEST(PythonLiteral, LongFlatListsParse) {
  std::string text = "[";
  for (int i = 0; i < 20000; ++i) text += std::to_string(i) + ", ";
  text += "]";
  Literal v = parse_literal(text);
  ASSERT_EQ(v.items.size(), 20000u);
  EXPECT_EQ(v.items.back().integer, 19999);
}

// ---- JSON
// ----------------------------------------------------------------------------------------

TEST(JsonLiteral, JsonAsPythonWritesIt) {
  Literal v = parse_json(
      R"( {"a":1,"b":[1.5,-2e-3,3E+2],"c":{"d":null,"e":true,"f":false},"s":"x\"y\\z\n\u0041"} )");
  ASSERT_TRUE(v.is_dict());
  EXPECT_EQ(v.find("a")->number, 1.0);
  EXPECT_EQ(v.find("a")->kind, Kind::kInt);
  const Literal* b = v.find("b");
  ASSERT_EQ(b->kind, Kind::kList);
  EXPECT_EQ(b->items.size(), 3u);
  EXPECT_DOUBLE_EQ(b->items[1].number, -0.002);
  EXPECT_DOUBLE_EQ(b->items[2].number, 300.0);
  EXPECT_TRUE(v.find("c")->find("d")->is_null());
  EXPECT_TRUE(v.find("c")->find("e")->boolean);
  EXPECT_EQ(v.find("c")->find("f")->kind, Kind::kBool);
  EXPECT_EQ(v.find("s")->text, "x\"y\\z\nA");
  EXPECT_EQ(v.find("missing"), nullptr);

  Literal special = parse_json("[NaN, Infinity, -Infinity]");
  EXPECT_TRUE(std::isnan(special.items[0].number));
  EXPECT_EQ(special.items[1].number, INFINITY);
  EXPECT_EQ(special.items[2].number, -INFINITY);
}

TEST(JsonLiteral, RepeatedKeyFindsTheLast) {
  EXPECT_EQ(parse_json(R"({"k":1,"k":2})").find("k")->number, 2.0);
}

TEST(JsonLiteral, EscapesIncludingSurrogatePairs) {
  EXPECT_EQ(parse_json(R"("\/\b\f\r\t")").text, "/\b\f\r\t");
  EXPECT_EQ(parse_json(R"("\u00e9")").text, "\xc3\xa9");
  // json.dumps writes a character beyond the BMP as a surrogate pair.
  EXPECT_EQ(parse_json(R"("\ud83d\ude00")").text, "\xf0\x9f\x98\x80");
  // A lone surrogate has no UTF-8 form: U+FFFD.
  EXPECT_EQ(parse_json(R"("\ud83d.")").text, "\xef\xbf\xbd.");
  EXPECT_EQ(parse_json(R"("\ude00\u0041")").text,
            "\xef\xbf\xbd"
            "A");
  EXPECT_EQ(parse_json(R"("\ud83d\u0041")").text,
            "\xef\xbf\xbd"
            "A");
  EXPECT_THAT(json_error_of(R"("\x41")"), HasSubstr("column 2: unknown escape '\\x'"));
  EXPECT_THAT(json_error_of(R"("\'")"), HasSubstr("unknown escape"));
  EXPECT_THAT(json_error_of(R"("\u12")"), HasSubstr("4 hex digits"));
}

TEST(JsonLiteral, PythonOnlySyntaxIsRefused) {
  EXPECT_THAT(json_error_of("{'a':1}"), HasSubstr("column 2: an object key must be a string"));
  EXPECT_THAT(json_error_of("['a']"), HasSubstr("column 2: JSON strings take double quotes"));
  EXPECT_THAT(json_error_of("[1,]"), HasSubstr("column 4: unexpected ']'"));
  EXPECT_THAT(json_error_of(R"({"a":1,})"), HasSubstr("column 8: an object key must be"));
  EXPECT_THAT(json_error_of("(1, 2)"), HasSubstr("column 1: unexpected '('"));
  EXPECT_THAT(json_error_of("nan"), HasSubstr("unknown name 'nan'"));  // JSON has NaN, not nan
  EXPECT_THAT(json_error_of("True"), HasSubstr("unknown name 'True'"));
  EXPECT_THAT(json_error_of("{1: 2}"), HasSubstr("an object key must be a string"));
  // ... and the JSON words are not Python's.
  EXPECT_THAT(error_of("null"), HasSubstr("unknown name 'null'"));
  EXPECT_THAT(error_of("NaN"), HasSubstr("unknown name 'NaN'"));
}

TEST(JsonLiteral, ErrorsSayWhatAndWhere) {
  EXPECT_EQ(json_error_of(R"({"v":1,"mb":[{"i":0,)"),
            "column 21: the text ends inside an object (truncated?)");
  EXPECT_EQ(json_error_of(R"([1, 2)"), "column 6: the text ends inside an array (truncated?)");
  EXPECT_THAT(json_error_of(R"({"a":1} x)"), HasSubstr("column 9: unexpected 'x' after the value"));
  EXPECT_THAT(json_error_of("[1.2.3]"), HasSubstr("malformed number"));
  EXPECT_THAT(json_error_of(R"("abc)"), HasSubstr("column 1: unterminated string"));
  EXPECT_THAT(json_error_of(R"({"a" 1})"), HasSubstr("column 6: ':' expected after a key"));
  EXPECT_THAT(json_error_of(""), HasSubstr("empty input"));
  EXPECT_THAT(json_error_of(std::string(200, '[')), HasSubstr("nested deeper than 64 levels"));
}

// ---- Options
// -------------------------------------------------------------------------------------

TEST(PythonLiteral, CallsUnwrapToTheirFirstArgument) {
  Literal v = parse_literal(
      "{'loss': 0.0125, 'grad_norm': np.float32(1.5), 'kl': Array(0.25, dtype=float32), "
      "'t': tensor(2.), 'odd': f(g(3), key=(1, ')', [2])), 'bad': nan, 'neg': -inf,}",
      kCalls);
  EXPECT_DOUBLE_EQ(v.find("loss")->number, 0.0125);
  EXPECT_DOUBLE_EQ(v.find("grad_norm")->number, 1.5);
  EXPECT_DOUBLE_EQ(v.find("kl")->number, 0.25);
  EXPECT_DOUBLE_EQ(v.find("t")->number, 2.0);
  EXPECT_DOUBLE_EQ(v.find("odd")->number, 3.0);
  EXPECT_TRUE(std::isnan(v.find("bad")->number));
  EXPECT_EQ(v.find("neg")->number, -INFINITY);
  // Without the option a call is no literal.
  EXPECT_THAT(error_of("np.float32(1.5)"), HasSubstr("unknown name 'np'"));
  EXPECT_THAT(error_of("f()", kCalls), HasSubstr("column 3: a call without arguments"));
  EXPECT_THAT(error_of("f(1", kCalls), HasSubstr("ends inside a call"));
  EXPECT_THAT(error_of("f(1, x=2", kCalls), HasSubstr("ends inside a call"));
  EXPECT_THAT(error_of("f(1, x=2]", kCalls), HasSubstr("unexpected ']' in a call"));
  EXPECT_THAT(error_of("f(1 2)", kCalls), HasSubstr("',' or ')' expected in a call"));
  // A call counts as a level of nesting.
  std::string calls;
  for (int i = 0; i < 100; ++i) calls += "f(";
  EXPECT_THAT(error_of(calls + "1", kCalls), HasSubstr("nested deeper than 64 levels"));
}

TEST(PythonLiteral, BareWordsAreKeptForTheCaller) {
  Literal v =
      parse_literal("[RematLocation.REMAT, 1.0, a b , 'q,x', (c,d), {k: v, 'j': [w]}]", kWords);
  ASSERT_EQ(v.items.size(), 6u);
  EXPECT_EQ(v.items[0].kind, Kind::kWord);
  EXPECT_EQ(v.items[0].text, "RematLocation.REMAT");
  EXPECT_EQ(v.items[1].kind, Kind::kWord);  // numbers too: the caller decides
  EXPECT_EQ(v.items[1].text, "1.0");
  EXPECT_EQ(v.items[2].text, "a b");
  EXPECT_EQ(v.items[3].kind, Kind::kString);
  EXPECT_EQ(v.items[3].text, "q,x");
  EXPECT_EQ(v.items[4].kind, Kind::kTuple);
  EXPECT_EQ(v.items[4].items[1].text, "d");
  const Literal& dict = v.items[5];
  ASSERT_EQ(dict.entries.size(), 2u);
  EXPECT_EQ(dict.entries[0].first.text, "k");
  EXPECT_EQ(dict.entries[0].second.text, "v");
  EXPECT_EQ(dict.find("j")->items[0].text, "w");
  // A ':' ends only a key.
  EXPECT_EQ(parse_literal("[a:b]", kWords).items[0].text, "a:b");
  EXPECT_THAT(error_of("[a, , b]", kWords), HasSubstr("column 5: unexpected ','"));
  EXPECT_THAT(error_of("[a (b)]", kWords), HasSubstr("',' or ']' expected, not '('"));
  // JSON has no bare words.
  EXPECT_THAT(error_of("[a]", LiteralOptions{.syntax = LiteralSyntax::kJson, .bare_words = true}),
              HasSubstr("unknown name 'a'"));
}

// ---- Hostile input
// ---------------------------------------------------------------------------------

TEST(Literal, HostileInputFailsCleanly) {
  for (const LiteralOptions& options :
       {LiteralOptions{}, LiteralOptions{.syntax = LiteralSyntax::kJson}, kCalls, kWords}) {
    // Deep nesting of every kind, far beyond the limit, fails without recursing.
    for (std::string_view open : {"[", "(", "{'k': ", "{\"k\": ", "f("}) {
      std::string deep;
      for (int i = 0; i < 100000; ++i) deep += open;
      EXPECT_THAT(error_of(deep, options), HasSubstr("column")) << open;
    }
    // Lone quotes, stray closers, dict entries without values.
    for (std::string_view bad : {"'", "\"", "]", "}", "[1]]", "{\"a\"}", "\"\\", "[1,,2]"}) {
      EXPECT_THAT(error_of(bad, options), HasSubstr("column")) << bad;
    }
    // Bare words take any other text; without them these are not literals.
    if (options.bare_words) continue;
    for (std::string_view bad :
         {std::string_view("[1\0]", 4), std::string_view("\0", 1), std::string_view("-"),
          std::string_view("+."), std::string_view("1e+"), std::string_view("@")}) {
      EXPECT_THAT(error_of(bad, options), HasSubstr("column")) << bad;
    }
  }
  // Invalid UTF-8 inside a string is kept as bytes (the caller validates what it prints).
  EXPECT_EQ(parse_literal("'\xff\xfe'").text, "\xff\xfe");
}

}  // namespace
}  // namespace rtb
