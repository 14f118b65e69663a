// JSON output: string quoting that always gives valid UTF-8 JSON, numbers, and a small streaming
// writer of indented objects and arrays. Used by every tool's --json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace rtb::json {

// `text` as a JSON string literal, quotes included. Control characters are escaped (\n, \t, \r,
// \u00XX) and so is DEL. Input comes from logs and clusters and may be any bytes: each byte that
// is not part of a well-formed UTF-8 sequence becomes U+FFFD, so the output is always valid.
std::string quote(std::string_view text);
// The same, appended to `out` (no string of its own: the writer's hot path).
void append_quoted(std::string& out, std::string_view text);

// `text`, or nothing (written as null) when it is empty: names and messages a record may lack,
// e.g. j.field("op_name", json::null_if_empty(op_name)).
inline std::optional<std::string_view> null_if_empty(std::string_view text) {
  return text.empty() ? std::nullopt : std::optional<std::string_view>(text);
}

// A number as JSON: shortest round-trip form; NaN and infinities (not JSON) become null.
std::string number(double value);

// Writes pretty-printed JSON (two-space indent) in one pass:
//   Writer j; j.begin_object().field("a", 1).key("b").begin_array().value("x").end_array()
//    .end_object(); j.str()
// A container opened with Layout::kOneLine is written on one line, `{"a": 1, "b": [2, 3]}`, and
// so is what it holds unless a nested container asks for kIndented (which is then indented as if
// the one-line containers around it were not there). For small records in long lists; wrap()
// breaks a one-line container before its next item, aligned after its opening bracket.
class Writer {
 public:
  enum class Layout { kIndented, kOneLine };
  Writer& begin_object() { return open('{', inherited_layout()); }
  Writer& begin_object(Layout layout) { return open('{', layout); }
  Writer& end_object() { return close('}'); }
  Writer& begin_array() { return open('[', inherited_layout()); }
  Writer& begin_array(Layout layout) { return open('[', layout); }
  Writer& end_array() { return close(']'); }
  // Inside a one-line container: the next item starts a new line.
  Writer& wrap() {
    wrap_ = true;
    return *this;
  }
  Writer& key(std::string_view name);
  Writer& value(std::string_view text) {
    separate();
    append_quoted(out_, text);
    return *this;
  }
  Writer& value(const char* text) { return value(std::string_view(text)); }
  Writer& value(const std::string& text) { return value(std::string_view(text)); }
  Writer& value(bool flag) { return raw(flag ? "true" : "false"); }
  Writer& value(double v) { return raw(number(v)); }
  Writer& value(std::int64_t v) { return raw(std::to_string(v)); }
  Writer& value(std::uint64_t v) { return raw(std::to_string(v)); }
  Writer& value(int v) { return raw(std::to_string(v)); }
  template <typename T>
  Writer& value(const std::optional<T>& maybe) {
    return maybe ? value(*maybe) : null();
  }
  Writer& null() { return raw("null"); }
  template <typename T>
  Writer& field(std::string_view name, const T& v) {
    return key(name).value(v);
  }
  // A list under `name`: numbers on one line, strings one per line.
  template <typename T>
  Writer& list(std::string_view name, const std::vector<T>& values) {
    if constexpr (std::is_same_v<T, std::string>) {
      key(name).begin_array();
      for (const T& v : values) value(v);
      return end_array();
    } else {
      std::string text = "[";
      for (std::size_t i = 0; i < values.size(); ++i) {
        Writer one;
        one.value(values[i]);
        if (i > 0) text += ", ";
        text += one.out_;
      }
      text += ']';
      return key(name).raw(text);
    }
  }
  // Inserts already-formatted JSON as one value.
  Writer& raw(std::string_view text);
  // The document, with a final newline. A writer about to go hands its text over without a copy
  // (a report of many megabytes would be held twice): `return std::move(j).str();`.
  std::string str() const& { return out_ + "\n"; }
  std::string str() && {
    out_ += '\n';
    return std::move(out_);
  }

 private:
  struct Container {
    bool empty = true;  // nothing written in it yet
    Layout layout = Layout::kIndented;
    std::size_t column = 0;  // one-line: where its items start after wrap()
  };
  void separate();
  Layout inherited_layout() const;
  std::size_t indented_depth() const;  // one-line containers add no indentation
  Writer& open(char bracket, Layout layout);
  Writer& close(char bracket);

  std::string out_;
  std::vector<Container> open_;  // the containers open, outermost first
  bool after_key_ = false;
  bool wrap_ = false;
};

}  // namespace rtb::json
