#include "rtb/base/pyliteral.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "rtb/base/error.h"
#include "rtb/base/utf8.h"

namespace rtb {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  void advance() { ++pos_; }
  void skip_blanks() {
    while (!at_end() && is_blank(text_[pos_])) ++pos_;
  }

  template <typename... Args>
  [[noreturn]] void fail_here(fmt::format_string<Args...> format, Args&&... args) const {
    fail("column {}: {}", pos_ + 1, fmt::format(format, std::forward<Args>(args)...));
  }

  // A value that is not a container: a string, a number or a name.
  PyValue scalar() {
    char c = peek();
    if (c == '\'' || c == '"') return string();
    if (is_digit(c) || c == '-' || c == '+' || c == '.') return number();
    if (is_name_start(c)) return name();
    fail_here("unexpected '{}' where a value was expected", c);
  }

 private:
  PyValue string() {
    char quote = text_[pos_];
    std::size_t start = pos_;
    ++pos_;
    PyValue value;
    value.kind = PyValue::Kind::kString;
    std::string& out = value.text;
    for (;;) {
      if (at_end()) {
        pos_ = start;
        fail_here("unterminated string");
      }
      char c = text_[pos_];
      if (c == quote) {
        ++pos_;
        return value;
      }
      if (c == '\n') {
        pos_ = start;
        fail_here("unterminated string (a newline inside it)");
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (at_end()) {
        pos_ = start;
        fail_here("unterminated string");
      }
      char e = text_[pos_++];
      switch (e) {
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\n':
          break;  // line continuation inside a string
        case 'x':
          utf8::append(out, static_cast<std::uint32_t>(hex_escape(2)));
          break;
        case 'u':
          utf8::append(out, static_cast<std::uint32_t>(hex_escape(4)));
          break;
        case 'U': {
          unsigned long code = hex_escape(8);
          if (code > 0x10FFFF) fail_here("\\U escape beyond U+10FFFF");
          utf8::append(out, static_cast<std::uint32_t>(code));
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            unsigned long code = static_cast<unsigned long>(e - '0');
            for (int i = 0; i < 2 && !at_end() && text_[pos_] >= '0' && text_[pos_] <= '7'; ++i)
              code = code * 8 + static_cast<unsigned long>(text_[pos_++] - '0');
            utf8::append(out, static_cast<std::uint32_t>(code));
          } else {
            // Python keeps an unknown escape as written.
            out += '\\';
            out += e;
          }
      }
    }
  }

  unsigned long hex_escape(int digits) {
    unsigned long code = 0;
    for (int i = 0; i < digits; ++i) {
      int v = at_end() ? -1 : hex_value(text_[pos_]);
      if (v < 0) fail_here("escape needs {} hex digits", digits);
      code = code * 16 + static_cast<unsigned long>(v);
      ++pos_;
    }
    return code;
  }

  PyValue number() {
    std::size_t start = pos_;
    bool negative = false;
    if (text_[pos_] == '-' || text_[pos_] == '+') {
      negative = text_[pos_] == '-';
      ++pos_;
    }
    // -inf, -nan
    if (!at_end() && is_name_start(text_[pos_])) {
      PyValue named = name();
      if (named.kind != PyValue::Kind::kFloat) {
        pos_ = start;
        fail_here("'{}' is not a number", text_.substr(start, 1));
      }
      if (negative) named.number = -named.number;
      return named;
    }
    bool is_float = false;
    std::size_t digits = 0;
    while (!at_end() && (is_digit(text_[pos_]) || text_[pos_] == '.')) {
      if (text_[pos_] == '.') {
        is_float = true;
      } else {
        ++digits;
      }
      ++pos_;
    }
    if (digits == 0) {
      pos_ = start;
      fail_here("malformed number");
    }
    if (!at_end() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      is_float = true;
      ++pos_;
      if (!at_end() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      std::size_t exponent_start = pos_;
      while (!at_end() && is_digit(text_[pos_])) ++pos_;
      if (pos_ == exponent_start) {
        pos_ = start;
        fail_here("malformed number (an exponent without digits)");
      }
    }
    if (!at_end() && is_name_char(text_[pos_])) fail_here("unexpected '{}' in a number", peek());
    std::string_view literal = text_.substr(start, pos_ - start);
    // from_chars accepts no leading '+'.
    std::string_view digits_text = literal[0] == '+' ? literal.substr(1) : literal;
    PyValue value;
    value.kind = is_float ? PyValue::Kind::kFloat : PyValue::Kind::kInt;
    auto [end, ec] =
        std::from_chars(digits_text.data(), digits_text.data() + digits_text.size(), value.number);
    if (ec == std::errc::result_out_of_range) {
      // Python prints such a float as inf; an int this large is still an int.
      value.number = negative ? -std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::infinity();
    } else if (ec != std::errc() || end != digits_text.data() + digits_text.size()) {
      pos_ = start;
      fail_here("malformed number '{}'", literal);
    }
    if (!is_float) {
      value.text = std::string(literal);
      auto [iend, iec] = std::from_chars(digits_text.data(),
                                         digits_text.data() + digits_text.size(), value.integer);
      value.exact = iec == std::errc() && iend == digits_text.data() + digits_text.size();
    }
    return value;
  }

  PyValue name() {
    std::size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    std::string_view word = text_.substr(start, pos_ - start);
    PyValue value;
    if (word == "True" || word == "False") {
      value.kind = PyValue::Kind::kBool;
      value.boolean = word == "True";
    } else if (word == "None") {
      value.kind = PyValue::Kind::kNone;
    } else if (word == "inf") {
      value.kind = PyValue::Kind::kFloat;
      value.number = std::numeric_limits<double>::infinity();
    } else if (word == "nan") {
      value.kind = PyValue::Kind::kFloat;
      value.number = std::numeric_limits<double>::quiet_NaN();
    } else {
      pos_ = start;
      fail_here("unknown name '{}'", word);
    }
    return value;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

// A container being filled.
struct Frame {
  PyValue value;
  char closer;
  bool has_key = false;
  PyValue key;
};

}  // namespace

PyValue::PyValue() = default;

const PyValue* PyValue::find(std::string_view key) const {
  const PyValue* found = nullptr;
  for (const auto& [k, v] : entries) {
    if (k.kind == Kind::kString && k.text == key) found = &v;
  }
  return found;
}

std::string_view kind_name(PyValue::Kind kind) {
  switch (kind) {
    case PyValue::Kind::kNone:
      return "None";
    case PyValue::Kind::kBool:
      return "bool";
    case PyValue::Kind::kInt:
      return "int";
    case PyValue::Kind::kFloat:
      return "float";
    case PyValue::Kind::kString:
      return "str";
    case PyValue::Kind::kList:
      return "list";
    case PyValue::Kind::kTuple:
      return "tuple";
    case PyValue::Kind::kDict:
      return "dict";
  }
  return "?";
}

PyValue parse_py_literal(std::string_view text, int max_depth) {
  Reader in(text);
  std::vector<Frame> stack;
  for (;;) {
    // A value starts here: a container (pushed, and its first element read next) or a scalar.
    in.skip_blanks();
    if (in.at_end()) {
      if (stack.empty()) in.fail_here("empty input, a value was expected");
      in.fail_here("the text ends inside a {} (truncated?)", kind_name(stack.back().value.kind));
    }
    char c = in.peek();
    PyValue value;
    if (c == '{' || c == '[' || c == '(') {
      if (static_cast<int>(stack.size()) >= max_depth)
        in.fail_here("nested deeper than {} levels", max_depth);
      Frame frame;
      frame.value.kind = c == '{'   ? PyValue::Kind::kDict
                         : c == '[' ? PyValue::Kind::kList
                                    : PyValue::Kind::kTuple;
      frame.closer = c == '{' ? '}' : c == '[' ? ']' : ')';
      in.advance();
      in.skip_blanks();
      if (in.at_end() || in.peek() != frame.closer) {
        stack.push_back(std::move(frame));
        continue;
      }
      in.advance();
      value = std::move(frame.value);
    } else {
      value = in.scalar();
    }
    // Hand the value to its container; close containers until one wants another value.
    for (;;) {
      if (stack.empty()) {
        in.skip_blanks();
        if (!in.at_end()) in.fail_here("unexpected '{}' after the value", in.peek());
        return value;
      }
      Frame& top = stack.back();
      if (top.value.kind == PyValue::Kind::kDict && !top.has_key) {
        top.key = std::move(value);
        top.has_key = true;
        in.skip_blanks();
        if (in.at_end()) in.fail_here("the text ends inside a dict (truncated?)");
        if (in.peek() != ':') in.fail_here("':' expected after a dict key, not '{}'", in.peek());
        in.advance();
        break;  // the entry's value comes next
      }
      if (top.value.kind == PyValue::Kind::kDict) {
        top.value.entries.emplace_back(std::move(top.key), std::move(value));
        top.key = PyValue();
        top.has_key = false;
      } else {
        top.value.items.push_back(std::move(value));
      }
      in.skip_blanks();
      if (in.at_end())
        in.fail_here("the text ends inside a {} (truncated?)", kind_name(top.value.kind));
      char next = in.peek();
      if (next == ',') {
        in.advance();
        in.skip_blanks();
        if (in.at_end() || in.peek() != top.closer) break;  // another element
      } else if (next != top.closer) {
        in.fail_here("',' or '{}' expected, not '{}'", top.closer, next);
      }
      in.advance();  // the closer
      value = std::move(top.value);
      stack.pop_back();
    }
  }
}

}  // namespace rtb
