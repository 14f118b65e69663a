#include "rtb/base/svg.h"

#include <fmt/format.h>

#include <cmath>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"

namespace rtb::svg {
namespace {

void check_finite(double value, std::string_view what) {
  if (!std::isfinite(value)) fail("svg: {} is not a finite number", what);
}

void check_size(double value, std::string_view what) {
  check_finite(value, what);
  if (value < 0) fail("svg: {} is negative ({})", what, value);
}

std::string_view anchor_name(Anchor anchor) {
  return enum_name<Anchor::kEnd>(anchor, {"start", "middle", "end"});
}

}  // namespace

Paint Paint::filled(std::string_view colour) { return Paint().with_fill(colour); }
Paint Paint::stroked(std::string_view colour, double width) {
  return Paint().with_stroke(colour, width);
}
Paint& Paint::with_fill(std::string_view colour) {
  fill = colour;
  return *this;
}
Paint& Paint::with_stroke(std::string_view colour, double width) {
  stroke = colour;
  stroke_width = width;
  return *this;
}
Paint& Paint::with_opacity(double value) {
  opacity = value;
  return *this;
}
Paint& Paint::with_dash(std::string_view pattern) {
  dash = pattern;
  return *this;
}
Paint& Paint::with_class(std::string_view name) {
  css_class = name;
  return *this;
}

Font Font::sized(double value) {
  Font font;
  font.size = value;
  return font;
}
Font& Font::with_anchor(Anchor value) {
  anchor = value;
  return *this;
}
Font& Font::with_bold(bool value) {
  bold = value;
  return *this;
}
Font& Font::with_fill(std::string_view colour) {
  fill = colour;
  return *this;
}
Font& Font::with_family(std::string_view name) {
  family = name;
  return *this;
}
Font& Font::with_rotate(double degrees) {
  rotate = degrees;
  return *this;
}
Font& Font::with_class(std::string_view name) {
  css_class = name;
  return *this;
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default: {
        auto byte = static_cast<unsigned char>(c);
        bool allowed_control = c == '\t' || c == '\n' || c == '\r';
        out += (byte < 0x20 && !allowed_control) || byte == 0x7f ? '?' : c;
      }
    }
  }
  return out;
}

std::string number(double value) {
  check_finite(value, "coordinate");
  std::string text = fmt::format("{:.2f}", value);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  if (text == "-0") text = "0";
  return text;
}

Document::Document(double width, double height) : width_(0), height_(0) { set_size(width, height); }

void Document::set_size(double width, double height) {
  check_size(width, "document width");
  check_size(height, "document height");
  if (width == 0 || height == 0) fail("svg: document size must be > 0");
  width_ = width;
  height_ = height;
}

void Document::set_title(std::string_view title) { title_ = title; }

void Document::set_background(std::string_view colour) { background_ = colour; }

void Document::add_css(std::string_view css) {
  if (css.find("]]>") != std::string_view::npos) fail("svg: CSS must not contain ']]>'");
  css_ += css;
  if (!css_.empty() && css_.back() != '\n') css_ += '\n';
}

void Document::open_element(std::string_view tag) {
  body_.append(static_cast<std::size_t>(open_groups_) * 2 + 2, ' ');
  body_ += '<';
  body_ += tag;
  ++element_count_;
}

void Document::close_element(std::string_view tag, std::string_view tooltip) {
  if (tooltip.empty()) {
    body_ += "/>\n";
    return;
  }
  body_ += "><title>";
  body_ += escape(tooltip);
  body_ += "</title></";
  body_ += tag;
  body_ += ">\n";
}

void Document::write_paint(const Paint& paint) {
  body_ += fmt::format(" fill=\"{}\"", escape(paint.fill));
  if (!paint.stroke.empty() && paint.stroke != "none") {
    check_size(paint.stroke_width, "stroke width");
    body_ += fmt::format(" stroke=\"{}\" stroke-width=\"{}\"", escape(paint.stroke),
                         number(paint.stroke_width));
    if (!paint.dash.empty()) body_ += fmt::format(" stroke-dasharray=\"{}\"", escape(paint.dash));
  }
  check_finite(paint.opacity, "opacity");
  if (paint.opacity < 1.0) body_ += fmt::format(" opacity=\"{}\"", number(paint.opacity));
  if (!paint.css_class.empty()) body_ += fmt::format(" class=\"{}\"", escape(paint.css_class));
}

void Document::write_points(std::span<const Point> points) {
  body_ += " points=\"";
  bool first = true;
  for (const Point& point : points) {
    if (!first) body_ += ' ';
    first = false;
    body_ += number(point.x);
    body_ += ',';
    body_ += number(point.y);
  }
  body_ += '"';
}

void Document::rect(double x, double y, double width, double height, const Paint& paint,
                    std::string_view tooltip) {
  check_size(width, "rectangle width");
  check_size(height, "rectangle height");
  open_element("rect");
  body_ += fmt::format(" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"", number(x), number(y),
                       number(width), number(height));
  write_paint(paint);
  close_element("rect", tooltip);
}

void Document::line(double x1, double y1, double x2, double y2, const Paint& paint,
                    std::string_view tooltip) {
  open_element("line");
  body_ += fmt::format(" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"", number(x1), number(y1),
                       number(x2), number(y2));
  write_paint(paint);
  close_element("line", tooltip);
}

void Document::polyline(std::span<const Point> points, const Paint& paint,
                        std::string_view tooltip) {
  open_element("polyline");
  write_points(points);
  write_paint(paint);
  close_element("polyline", tooltip);
}

void Document::polygon(std::span<const Point> points, const Paint& paint,
                       std::string_view tooltip) {
  open_element("polygon");
  write_points(points);
  write_paint(paint);
  close_element("polygon", tooltip);
}

void Document::circle(double cx, double cy, double radius, const Paint& paint,
                      std::string_view tooltip) {
  check_size(radius, "circle radius");
  open_element("circle");
  body_ += fmt::format(" cx=\"{}\" cy=\"{}\" r=\"{}\"", number(cx), number(cy), number(radius));
  write_paint(paint);
  close_element("circle", tooltip);
}

void Document::text(double x, double y, std::string_view text, const Font& font,
                    std::string_view tooltip) {
  check_size(font.size, "font size");
  open_element("text");
  body_ +=
      fmt::format(" x=\"{}\" y=\"{}\" font-size=\"{}\" font-family=\"{}\" fill=\"{}\"", number(x),
                  number(y), number(font.size), escape(font.family), escape(font.fill));
  if (font.anchor != Anchor::kStart) {
    body_ += fmt::format(" text-anchor=\"{}\"", anchor_name(font.anchor));
  }
  if (font.bold) body_ += " font-weight=\"bold\"";
  if (font.rotate != 0.0) {
    body_ +=
        fmt::format(" transform=\"rotate({} {} {})\"", number(font.rotate), number(x), number(y));
  }
  if (!font.css_class.empty()) body_ += fmt::format(" class=\"{}\"", escape(font.css_class));
  body_ += '>';
  std::string flat(text);
  for (char& c : flat) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  body_ += escape(flat);
  if (!tooltip.empty()) {
    body_ += "<title>";
    body_ += escape(tooltip);
    body_ += "</title>";
  }
  body_ += "</text>\n";
}

void Document::begin_group(double dx, double dy, std::string_view tooltip,
                           std::string_view css_class) {
  open_element("g");
  if (dx != 0.0 || dy != 0.0) {
    body_ += fmt::format(" transform=\"translate({} {})\"", number(dx), number(dy));
  }
  if (!css_class.empty()) body_ += fmt::format(" class=\"{}\"", escape(css_class));
  body_ += ">\n";
  ++open_groups_;
  if (!tooltip.empty()) {
    body_.append(static_cast<std::size_t>(open_groups_) * 2 + 2, ' ');
    body_ += "<title>";
    body_ += escape(tooltip);
    body_ += "</title>\n";
  }
}

void Document::end_group() {
  if (open_groups_ == 0) fail("svg: end_group without begin_group");
  --open_groups_;
  body_.append(static_cast<std::size_t>(open_groups_) * 2 + 2, ' ');
  body_ += "</g>\n";
}

std::string Document::str() const {
  if (open_groups_ != 0) fail("svg: {} group(s) still open", open_groups_);
  std::string out;
  out.reserve(body_.size() + css_.size() + 512);
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\">\n",
      number(width_), number(height_));
  if (!title_.empty()) out += fmt::format("  <title>{}</title>\n", escape(title_));
  if (!css_.empty()) out += fmt::format("  <style><![CDATA[\n{}]]></style>\n", css_);
  if (!background_.empty()) {
    out += fmt::format("  <rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"{}\"/>\n",
                       escape(background_));
  }
  out += body_;
  out += "</svg>\n";
  return out;
}

}  // namespace rtb::svg
