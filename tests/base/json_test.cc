#include "rtb/base/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rtb::json {
namespace {

TEST(Quote, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(quote(""), R"("")");
  EXPECT_EQ(quote("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(quote("l1\nl2\r\t"), R"("l1\nl2\r\t")");
  EXPECT_EQ(quote(std::string("a\0b\x1f\x7f", 5)), R"("a\u0000b\u001f\u007f")");
}

TEST(Quote, KeepsWellFormedUtf8) {
  EXPECT_EQ(quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
}

TEST(Quote, ReplacesEachInvalidByteSoTheOutputIsValidUtf8) {
  EXPECT_EQ(quote("\xff\xfe"), R"("\ufffd\ufffd")");
  EXPECT_EQ(quote("caf\xe9!"), R"("caf\ufffd!")");                        // Latin-1
  EXPECT_EQ(quote("\xc0\xaf"), R"("\ufffd\ufffd")");                      // overlong '/'
  EXPECT_EQ(quote("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");            // a surrogate
  EXPECT_EQ(quote("\xf4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");  // above U+10FFFF
  EXPECT_EQ(quote("ab\xe2\x82"), R"("ab\ufffd\ufffd")");                  // cut sequence
}

TEST(Quote, AppendsRunsOfPlainTextAroundEveryEscape) {
  // Plain runs at the start, between escapes and at the end, escapes side by side.
  const std::string text =
      "ab\"\\cd\x01\x7f\xc3\xa9"
      "ef\xff"
      "gh";
  std::string out = "x=";
  append_quoted(out, text);
  EXPECT_EQ(out, R"(x="ab\"\\cd\u0001\u007f)"
                 "\xc3\xa9"
                 R"(ef\ufffdgh")");
  EXPECT_EQ(quote(text), out.substr(2));
}

TEST(Number, ShortestFormAndNullForNonFinite) {
  EXPECT_EQ(number(0.1), "0.1");
  EXPECT_EQ(number(3.0), "3");
  EXPECT_EQ(number(std::nan("")), "null");
  EXPECT_EQ(number(std::numeric_limits<double>::infinity()), "null");
}

TEST(Writer, NestsIndentsAndSeparates) {
  Writer j;
  j.begin_object()
      .field("name", "x")
      .field("n", 2)
      .field("ok", true)
      .field("missing", std::optional<double>())
      .list("values", std::vector<double>{1.5, 2})
      .list("names", std::vector<std::string>{"a"})
      .key("empty")
      .begin_array()
      .end_array()
      .end_object();
  EXPECT_EQ(j.str(), R"({
  "name": "x",
  "n": 2,
  "ok": true,
  "missing": null,
  "values": [1.5, 2],
  "names": [
    "a"
  ],
  "empty": []
}
)");
}

TEST(Writer, OneLineContainersWrapAndKeepTheBlockIndent) {
  using Layout = Writer::Layout;
  Writer j;
  j.begin_object().key("items").begin_array();
  j.begin_object(Layout::kOneLine).field("a", 1).field("b", "x");
  j.wrap().key("c").begin_array(Layout::kOneLine).value(1).value(2).end_array();
  j.end_object();
  j.begin_object(Layout::kOneLine)
      .key("inner")
      .begin_array(Layout::kIndented)
      .value(true)
      .end_array()
      .end_object();
  j.begin_object(Layout::kOneLine)
      .key("none")
      .begin_array(Layout::kOneLine)
      .end_array()
      .end_object();
  j.end_array().end_object();
  EXPECT_EQ(j.str(), R"({
  "items": [
    {"a": 1, "b": "x",
     "c": [1, 2]},
    {"inner": [
      true
    ]},
    {"none": []}
  ]
}
)");
}

TEST(Writer, OneLineContainersInsideAnIndentedDocument) {
  using Layout = Writer::Layout;
  Writer j;
  j.begin_object().key("one").begin_object(Layout::kOneLine).field("a", 1).key("b");
  j.begin_array().value("x").value("y").end_array().key("c").begin_object().end_object();
  j.end_object();  // one
  j.key("items").begin_array();
  j.begin_object(Layout::kOneLine).field("n", 1).key("more").begin_array(Layout::kIndented);
  j.begin_object(Layout::kOneLine).field("k", 2).end_object();
  j.end_array().end_object().end_array().end_object();
  EXPECT_EQ(j.str(), R"({
  "one": {"a": 1, "b": ["x", "y"], "c": {}},
  "items": [
    {"n": 1, "more": [
      {"k": 2}
    ]}
  ]
}
)");
}

TEST(Writer, EmptyTextIsNull) {
  Writer j;
  j.begin_object(Writer::Layout::kOneLine)
      .field("a", null_if_empty(""))
      .field("b", null_if_empty("x"))
      .end_object();
  EXPECT_EQ(j.str(), "{\"a\": null, \"b\": \"x\"}\n");
}

TEST(Writer, HandsItsDocumentOverWithoutChange) {
  Writer j;
  j.begin_object().field("a", 1).key("b").begin_array().value("x").end_array().end_object();
  std::string copied = j.str();
  EXPECT_EQ(std::move(j).str(), copied);
  EXPECT_EQ(copied.back(), '\n');
}

}  // namespace
}  // namespace rtb::json
