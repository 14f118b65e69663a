#include "rtb/base/svg.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb::svg {
namespace {

TEST(SvgNumber, WritesAtMostTwoDecimalsWithoutTrailingZeros) {
  EXPECT_EQ(number(12), "12");
  EXPECT_EQ(number(0.5), "0.5");
  EXPECT_EQ(number(1.234), "1.23");
  EXPECT_EQ(number(-3.10), "-3.1");
  EXPECT_EQ(number(-0.001), "0");
  EXPECT_EQ(number(1e6), "1000000");
}

TEST(SvgNumber, RejectsNonFinite) {
  EXPECT_THROW(number(std::nan("")), Error);
  EXPECT_THROW(number(std::numeric_limits<double>::infinity()), Error);
}

TEST(SvgEscape, EscapesMarkupAndDropsControlCharacters) {
  EXPECT_EQ(escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  EXPECT_EQ(escape(std::string("x\x01y\tz", 5)), "x?y\tz");
  EXPECT_EQ(escape("%all-gather.3"), "%all-gather.3");
}

TEST(SvgDocument, WritesHeaderSizeTitleAndStyle) {
  Document doc(640, 120.5);
  doc.set_title("Schedule of <main>");
  doc.add_css(".exposed{fill:#e45756}");
  doc.set_background("white");
  std::string out = doc.str();
  EXPECT_THAT(out, StartsWith("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "));
  EXPECT_THAT(out, HasSubstr("width=\"640\" height=\"120.5\" viewBox=\"0 0 640 120.5\""));
  EXPECT_THAT(out, HasSubstr("<title>Schedule of &lt;main&gt;</title>"));
  EXPECT_THAT(out, HasSubstr("<![CDATA[\n.exposed{fill:#e45756}\n]]>"));
  EXPECT_THAT(out, HasSubstr("fill=\"white\""));
  EXPECT_THAT(out, HasSubstr("</svg>\n"));
}

TEST(SvgDocument, DrawsShapesWithPaintAndTooltips) {
  Document doc(100, 100);
  doc.rect(1, 2, 3, 4, Paint::filled("#4c78a8").with_stroke("#000", 0.5), "ag-start .. ag-done");
  doc.line(0, 10, 100, 10, Paint::stroked("#999").with_dash("4 2"));
  doc.circle(5, 5, 2, Paint::filled("red").with_opacity(0.5));
  std::vector<Point> points = {{0, 0}, {10, 5.25}, {20, 0}};
  doc.polyline(points, Paint::stroked("blue"));
  doc.polygon(points, Paint::filled("green").with_class("area"));
  EXPECT_EQ(doc.element_count(), 5u);
  std::string out = doc.str();
  EXPECT_THAT(out, HasSubstr("<rect x=\"1\" y=\"2\" width=\"3\" height=\"4\" fill=\"#4c78a8\" "
                             "stroke=\"#000\" stroke-width=\"0.5\"><title>ag-start .. "
                             "ag-done</title></rect>"));
  EXPECT_THAT(out, HasSubstr("<line x1=\"0\" y1=\"10\" x2=\"100\" y2=\"10\" fill=\"none\" "
                             "stroke=\"#999\" stroke-width=\"1\" stroke-dasharray=\"4 2\"/>"));
  EXPECT_THAT(out, HasSubstr("<circle cx=\"5\" cy=\"5\" r=\"2\" fill=\"red\" opacity=\"0.5\"/>"));
  EXPECT_THAT(out, HasSubstr("<polyline points=\"0,0 10,5.25 20,0\" fill=\"none\" "
                             "stroke=\"blue\""));
  EXPECT_THAT(out, HasSubstr("<polygon points=\"0,0 10,5.25 20,0\" fill=\"green\" "
                             "class=\"area\"/>"));
}

TEST(SvgDocument, WritesTextWithFontAndEscapes) {
  Document doc(100, 100);
  doc.text(10, 20, "a < b\nnext",
           Font::sized(9)
               .with_anchor(Anchor::kEnd)
               .with_bold()
               .with_family("monospace")
               .with_rotate(-90));
  std::string out = doc.str();
  EXPECT_THAT(out, HasSubstr("<text x=\"10\" y=\"20\" font-size=\"9\" font-family=\"monospace\" "
                             "fill=\"#222\" text-anchor=\"end\" font-weight=\"bold\" "
                             "transform=\"rotate(-90 10 20)\">a &lt; b next</text>"));
}

TEST(SvgDocument, NestsGroupsAndRequiresThemClosed) {
  Document doc(100, 100);
  doc.begin_group(5, 6, "row 1", "row");
  doc.rect(0, 0, 1, 1, Paint());
  EXPECT_THROW(doc.str(), Error);
  doc.end_group();
  std::string out = doc.str();
  EXPECT_THAT(out, HasSubstr("<g transform=\"translate(5 6)\" class=\"row\">\n"));
  EXPECT_THAT(out, HasSubstr("<title>row 1</title>"));
  EXPECT_THAT(out, HasSubstr("</g>\n"));
  EXPECT_THROW(doc.end_group(), Error);
}

TEST(SvgDocument, RejectsBadSizesAndCss) {
  EXPECT_THROW(Document(0, 10), Error);
  Document doc(10, 10);
  EXPECT_THROW(doc.rect(0, 0, -1, 1, Paint()), Error);
  EXPECT_THROW(doc.circle(0, 0, std::nan(""), Paint()), Error);
  EXPECT_THROW(doc.add_css("a]]>b"), Error);
  doc.set_size(20, 30);
  EXPECT_THAT(doc.str(), HasSubstr("viewBox=\"0 0 20 30\""));
  EXPECT_THAT(doc.str(), Not(HasSubstr("<title>")));
}

}  // namespace
}  // namespace rtb::svg
