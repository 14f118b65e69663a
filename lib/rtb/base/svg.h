// A small SVG writer shared by the tools that draw pictures (hlo-overlap --svg, and others).
//
// The writer knows nothing about charts: it emits shapes and text at coordinates the caller
// chose, escapes every string it is given, and returns the document as one string for
// rtb::write_output. It never prints, and it throws rtb::Error only on programming mistakes
// (non-finite coordinates, negative sizes, unbalanced groups).
//
// Coordinates are SVG user units (CSS pixels at 100% zoom); the origin is the top-left corner
// and y grows downwards. Colours are any CSS colour string ("#4c78a8", "red", "rgb(1,2,3)").
//
// Example:
//
//   rtb::svg::Document doc(640, 120);
//   doc.set_title("Schedule of %main");
//   doc.rect(10, 10, 200, 16, rtb::svg::Paint::filled("#4c78a8"), "ag-start.3 .. ag-done.3");
//   doc.line(10, 40, 630, 40, rtb::svg::Paint::stroked("#999").with_dash("4 2"));
//   doc.text(10, 60, "exposed: 3", rtb::svg::Font::sized(11).with_bold());
//   rtb::write_output("schedule.svg", doc.str());
//
// Tooltips: every drawing call takes an optional `tooltip`; when it is not empty the element
// gets a <title> child, which browsers show on hover. Empty strings mean "no attribute".
// The API is kept stable for the tools that share it; add to it, do not change it.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::svg {

// How a shape is filled and outlined. Build it with the factories and chained setters, e.g.
// Paint::filled("#e45756").with_stroke("#000", 0.5) (GCC warns about designated initializers
// that leave members out, so those are not the way to go); the fields stay public to read.
struct Paint {
  std::string fill = "none";    // fill colour; "none" = hollow
  std::string stroke = "none";  // outline colour; "none" = no outline
  double stroke_width = 1.0;    // outline width in user units (written only with a stroke)
  double opacity = 1.0;         // 0..1, applies to the whole element (written only if < 1)
  std::string dash;             // stroke-dasharray, e.g. "4 2"; empty = solid
  std::string css_class;        // class attribute (see Document::add_css); empty = none

  static Paint filled(std::string_view colour);                       // fill only
  static Paint stroked(std::string_view colour, double width = 1.0);  // outline only
  Paint& with_fill(std::string_view colour);
  Paint& with_stroke(std::string_view colour, double width = 1.0);
  Paint& with_opacity(double value);
  Paint& with_dash(std::string_view pattern);
  Paint& with_class(std::string_view name);
};

enum class Anchor { kStart, kMiddle, kEnd };  // text-anchor: where (x, y) is on the text

// How text is drawn. (x, y) of Document::text is the baseline point given by `anchor`.
// Build it like Paint: Font::sized(10).with_anchor(Anchor::kMiddle).with_bold().
struct Font {
  double size = 12.0;                 // font-size in user units
  Anchor anchor = Anchor::kStart;     // horizontal alignment about x
  bool bold = false;                  // font-weight bold
  std::string fill = "#222";          // text colour
  std::string family = "sans-serif";  // font-family, e.g. "monospace"
  double rotate = 0.0;                // degrees clockwise about (x, y); 0 = horizontal
  std::string css_class;              // class attribute; empty = none

  static Font sized(double size);
  Font& with_anchor(Anchor value);
  Font& with_bold(bool value = true);
  Font& with_fill(std::string_view colour);
  Font& with_family(std::string_view name);
  Font& with_rotate(double degrees);
  Font& with_class(std::string_view name);
};

struct Point {
  double x = 0;
  double y = 0;
};

class Document {
 public:
  // A document of the given size in user units (both must be > 0). The size can be changed
  // later with set_size, e.g. when the layout is only known after drawing.
  Document(double width, double height);

  double width() const { return width_; }
  double height() const { return height_; }
  void set_size(double width, double height);

  // The document's <title> (shown by browsers as the tab name). Empty = none.
  void set_title(std::string_view title);
  // Fills the whole canvas with `colour` before any element. Empty = transparent (default).
  void set_background(std::string_view colour);
  // CSS text appended to the document's <style> element (e.g. ".exposed{fill:#e45756}").
  // It is written inside CDATA; the text must not contain "]]>".
  void add_css(std::string_view css);

  // Axis-aligned rectangle with its top-left corner at (x, y). Width and height must be >= 0.
  void rect(double x, double y, double width, double height, const Paint& paint,
            std::string_view tooltip = {});
  // Straight line from (x1, y1) to (x2, y2). Give the paint a stroke, or nothing shows.
  void line(double x1, double y1, double x2, double y2, const Paint& paint,
            std::string_view tooltip = {});
  // Open line through the points (fill is written as given; use "none" for a plain line).
  void polyline(std::span<const Point> points, const Paint& paint, std::string_view tooltip = {});
  // Closed polygon through the points.
  void polygon(std::span<const Point> points, const Paint& paint, std::string_view tooltip = {});
  // Circle centred at (cx, cy); radius must be >= 0.
  void circle(double cx, double cy, double radius, const Paint& paint,
              std::string_view tooltip = {});
  // One line of text (newlines are written as spaces). See Font for alignment.
  void text(double x, double y, std::string_view text, const Font& font = {},
            std::string_view tooltip = {});

  // Opens a <g> group whose children are shifted by (dx, dy). Groups nest; every begin_group
  // needs an end_group before str(). A tooltip on a group applies to all its children.
  void begin_group(double dx = 0, double dy = 0, std::string_view tooltip = {},
                   std::string_view css_class = {});
  void end_group();

  // Number of elements drawn so far (shapes, texts and groups), for tests and size limits.
  std::size_t element_count() const { return element_count_; }

  // The complete document: XML declaration, <svg> with width/height/viewBox, <title>,
  // <style>, background, then the elements in drawing order. Throws rtb::Error if a group
  // is still open.
  std::string str() const;

 private:
  void open_element(std::string_view tag);
  void close_element(std::string_view tag, std::string_view tooltip);
  void write_paint(const Paint& paint);
  void write_points(std::span<const Point> points);

  double width_;
  double height_;
  std::string title_;
  std::string background_;
  std::string css_;
  std::string body_;
  int open_groups_ = 0;
  std::size_t element_count_ = 0;
};

// Escapes text for XML content and attribute values (& < > " '). Control characters that XML
// 1.0 cannot carry are replaced by '?'.
std::string escape(std::string_view text);

// A coordinate or size as SVG text: at most two decimals, no trailing zeros ("12", "0.5").
// Throws rtb::Error for NaN or infinity.
std::string number(double value);

}  // namespace rtb::svg
