#include "rtb/base/json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "rtb/base/utf8.h"

namespace rtb::json {
std::string quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      std::size_t length = utf8::sequence_length(text, i);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
  return out;
}

std::string number(double value) {
  return std::isfinite(value) ? fmt::format("{}", value) : std::string("null");
}

Writer& Writer::key(std::string_view name) {
  separate();
  out_ += quote(name);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

Writer& Writer::raw(std::string_view text) {
  separate();
  out_ += text;
  return *this;
}

void Writer::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (first_.empty()) return;
  bool one_line = layout_.back() == Layout::kOneLine;
  if (!first_.back()) out_ += one_line ? ", " : ",";
  first_.back() = false;
  if (one_line) return;
  out_ += '\n';
  out_.append(2 * indented_depth(), ' ');
}

std::size_t Writer::indented_depth() const {
  return static_cast<std::size_t>(std::count(layout_.begin(), layout_.end(), Layout::kIndented));
}

Writer::Layout Writer::inherited_layout() const {
  return layout_.empty() ? Layout::kIndented : layout_.back();
}

Writer& Writer::open(char bracket, Layout layout) {
  separate();
  out_ += bracket;
  first_.push_back(true);
  layout_.push_back(layout);
  return *this;
}

Writer& Writer::close(char bracket) {
  bool empty = first_.back();
  bool one_line = layout_.back() == Layout::kOneLine;
  first_.pop_back();
  layout_.pop_back();
  if (!empty && !one_line) {
    out_ += '\n';
    out_.append(2 * indented_depth(), ' ');
  }
  out_ += bracket;
  return *this;
}

}  // namespace rtb::json
