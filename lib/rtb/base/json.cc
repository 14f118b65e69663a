#include "rtb/base/json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "rtb/base/utf8.h"

namespace rtb::json {
namespace {
// Bytes copied as they are: printable ASCII but the two that JSON escapes.
bool plain(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; }
}  // namespace

void append_quoted(std::string& out, std::string_view text) {
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    std::size_t run = i;
    while (run < text.size() && plain(static_cast<unsigned char>(text[run]))) ++run;
    out.append(text.data() + i, run - i);  // most text is one run: one append, not one per byte
    i = run;
    if (i == text.size()) break;
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
      default:  // the other control characters and DEL
        out += fmt::format("\\u{:04x}", c);
    }
    ++i;
  }
  out += '"';
}

std::string quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  append_quoted(out, text);
  return out;
}

std::string number(double value) {
  return std::isfinite(value) ? fmt::format("{}", value) : std::string("null");
}

Writer& Writer::key(std::string_view name) {
  separate();
  append_quoted(out_, name);
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
  if (open_.empty()) return;
  Container& container = open_.back();
  if (!container.empty) out_ += ',';
  if (container.layout == Layout::kOneLine) {
    if (wrap_ && !container.empty) {
      out_ += '\n';
      out_.append(container.column, ' ');
    } else if (!container.empty) {
      out_ += ' ';
    }
  } else {
    out_ += '\n';
    out_.append(2 * indented_depth(), ' ');
  }
  container.empty = false;
  wrap_ = false;
}

std::size_t Writer::indented_depth() const {
  return static_cast<std::size_t>(std::count_if(open_.begin(), open_.end(), [](const Container& c) {
    return c.layout == Layout::kIndented;
  }));
}

Writer::Layout Writer::inherited_layout() const {
  return open_.empty() ? Layout::kIndented : open_.back().layout;
}

Writer& Writer::open(char bracket, Layout layout) {
  separate();
  out_ += bracket;
  std::size_t line_start = out_.rfind('\n');
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  open_.push_back({true, layout, out_.size() - line_start});
  return *this;
}

Writer& Writer::close(char bracket) {
  Container closed = open_.back();
  open_.pop_back();
  if (!closed.empty && closed.layout == Layout::kIndented) {
    out_ += '\n';
    out_.append(2 * indented_depth(), ' ');
  }
  out_ += bracket;
  wrap_ = false;
  return *this;
}

}  // namespace rtb::json
