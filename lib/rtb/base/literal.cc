#include "rtb/base/literal.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "rtb/base/error.h"
#include "rtb/base/utf8.h"

namespace rtb {
namespace {

using Kind = Literal::Kind;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::uint32_t kReplacement = 0xFFFD;

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_opener(char c) { return c == '{' || c == '[' || c == '('; }
bool is_closer(char c) { return c == '}' || c == ']' || c == ')'; }
bool is_surrogate(std::uint32_t code) { return code >= 0xD800 && code <= 0xDFFF; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "a dict", "an object", ...
std::string with_article(std::string_view name) {
  bool vowel = !name.empty() && std::string_view("aeiou").find(name[0]) != std::string_view::npos;
  return std::string(vowel ? "an " : "a ") + std::string(name);
}

class Reader {
 public:
  Reader(std::string_view text, const LiteralOptions& options)
      : text_(text),
        json_(options.syntax == LiteralSyntax::kJson),
        unwrap_calls_(options.unwrap_calls && !json_),
        bare_words_(options.bare_words && !json_) {}

  bool json() const { return json_; }
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

  // A name followed by '(' where calls unwrap: consumes both and returns true.
  bool call_start() {
    if (!unwrap_calls_ || at_end() || !is_name_start(peek())) return false;
    std::size_t end = pos_;
    while (end < text_.size() && (is_name_char(text_[end]) || text_[end] == '.')) ++end;
    if (end >= text_.size() || text_[end] != '(') return false;
    pos_ = end + 1;
    return true;
  }

  // A value that is not a container: a string, a number, a name or (bare_words) a word.
  // `key_ends_at_colon`: a dict key is expected, so a word ends at ':'.
  Literal scalar(bool key_ends_at_colon) {
    char c = peek();
    if (c == '"' || (c == '\'' && !json_)) return string();
    if (c == '\'') fail_here("JSON strings take double quotes, not '");
    if (bare_words_) return word(key_ends_at_colon);
    if (is_digit(c) || c == '-' || c == '+' || c == '.') return number();
    if (is_name_start(c)) return name();
    fail_here("unexpected '{}' where a value was expected", c);
  }

  // After a call's first argument: skips `, keyword=value ...` and the closing ')'.
  void skip_call_rest() {
    std::size_t start = pos_;
    int depth = 0;
    while (!at_end()) {
      char c = text_[pos_];
      if (c == '\'' || c == '"') {
        (void)string();
        continue;
      }
      if (is_opener(c)) ++depth;
      if (is_closer(c)) {
        if (depth == 0) {
          if (c != ')') fail_here("unexpected '{}' in a call", c);
          ++pos_;
          return;
        }
        --depth;
      }
      ++pos_;
    }
    pos_ = start;
    fail_here("the text ends inside a call (truncated?)");
  }

 private:
  Literal word(bool key_ends_at_colon) {
    std::size_t start = pos_;
    while (!at_end()) {
      char c = text_[pos_];
      if (c == ',' || is_opener(c) || is_closer(c) || (key_ends_at_colon && c == ':')) break;
      ++pos_;
    }
    std::string_view text = text_.substr(start, pos_ - start);
    while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
    if (text.empty()) fail_here("unexpected '{}' where a value was expected", peek());
    Literal value;
    value.kind = Kind::kWord;
    value.text = std::string(text);
    return value;
  }

  Literal string() {
    char quote = text_[pos_];
    std::size_t start = pos_;
    ++pos_;
    Literal value;
    value.kind = Kind::kString;
    std::string& out = value.text;
    auto unterminated = [&](std::string_view why) {
      pos_ = start;
      fail_here("unterminated string{}", why);
    };
    for (;;) {
      if (at_end()) unterminated("");
      char c = text_[pos_];
      if (c == quote) {
        ++pos_;
        return value;
      }
      if (c == '\n') unterminated(" (a newline inside it)");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (at_end()) unterminated("");
      char e = text_[pos_++];
      switch (e) {
        case '\\':
        case '"':
        case '/':
          if (e == '/' && !json_) {
            out += '\\';  // Python keeps an unknown escape as written
          }
          out += e;
          break;
        case '\'':
          if (json_) fail_here("unknown escape '\\{}' in a JSON string", e);
          out += '\'';
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
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u':
          append_code_point(out, hex_escape(4));
          break;
        default:
          if (json_) {
            pos_ -= 2;  // at the backslash
            fail_here("unknown escape '\\{}' in a JSON string", e);
          }
          python_escape(out, e);
      }
    }
  }

  // The escapes Python has and JSON does not.
  void python_escape(std::string& out, char e) {
    switch (e) {
      case 'a':
        out += '\a';
        return;
      case 'v':
        out += '\v';
        return;
      case '\n':
        return;  // line continuation inside a string
      case 'x':
        utf8::append(out, hex_escape(2));
        return;
      case 'U': {
        std::uint32_t code = hex_escape(8);
        if (code > 0x10FFFF) fail_here("\\U escape beyond U+10FFFF");
        append_code_point(out, code);
        return;
      }
      default:
        if (e >= '0' && e <= '7') {
          std::uint32_t code = static_cast<std::uint32_t>(e - '0');
          for (int i = 0; i < 2 && !at_end() && text_[pos_] >= '0' && text_[pos_] <= '7'; ++i)
            code = code * 8 + static_cast<std::uint32_t>(text_[pos_++] - '0');
          utf8::append(out, code);
        } else {
          // Python keeps an unknown escape as written.
          out += '\\';
          out += e;
        }
    }
  }

  // A UTF-16 surrogate pair written as two \u escapes (JSON writes characters beyond the BMP so)
  // becomes one code point; a lone surrogate has no UTF-8 form and becomes U+FFFD.
  void append_code_point(std::string& out, std::uint32_t code) {
    if (code >= 0xD800 && code <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {
      std::size_t before = pos_;
      pos_ += 2;
      std::uint32_t low = hex_escape(4);
      if (low >= 0xDC00 && low <= 0xDFFF) {
        utf8::append(out, 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00));
        return;
      }
      pos_ = before;  // not a pair: the second escape is read on its own
    }
    utf8::append(out, is_surrogate(code) ? kReplacement : code);
  }

  std::uint32_t hex_escape(int digits) {
    std::uint32_t code = 0;
    for (int i = 0; i < digits; ++i) {
      int v = at_end() ? -1 : hex_value(text_[pos_]);
      if (v < 0) fail_here("escape needs {} hex digits", digits);
      code = code * 16 + static_cast<std::uint32_t>(v);
      ++pos_;
    }
    return code;
  }

  Literal number() {
    std::size_t start = pos_;
    bool negative = false;
    if (text_[pos_] == '-' || text_[pos_] == '+') {
      negative = text_[pos_] == '-';
      ++pos_;
    }
    // -inf, -nan, -Infinity
    if (!at_end() && is_name_start(text_[pos_])) {
      Literal named = name();
      if (named.kind != Kind::kFloat) {
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
    const char* first = digits_text.data();
    const char* last = first + digits_text.size();
    Literal value;
    value.kind = is_float ? Kind::kFloat : Kind::kInt;
    auto [end, ec] = std::from_chars(first, last, value.number);
    if (ec == std::errc::result_out_of_range) {
      // Python prints such a float as inf; an int this large is still an int.
      value.number = negative ? -kInf : kInf;
    } else if (ec != std::errc() || end != last) {
      pos_ = start;
      fail_here("malformed number '{}'", literal);
    }
    if (!is_float) {
      value.text = std::string(literal);
      auto [int_end, int_ec] = std::from_chars(first, last, value.integer);
      value.exact = int_ec == std::errc() && int_end == last;
    }
    return value;
  }

  Literal name() {
    struct Constant {
      std::string_view python, json;
      Kind kind;
      bool boolean;
      double number;
    };
    static constexpr Constant kConstants[] = {
        {"True", "true", Kind::kBool, true, 0},
        {"False", "false", Kind::kBool, false, 0},
        {"None", "null", Kind::kNone, false, 0},
        {"inf", "Infinity", Kind::kFloat, false, kInf},
        {"nan", "NaN", Kind::kFloat, false, std::numeric_limits<double>::quiet_NaN()},
    };
    std::size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    std::string_view word = text_.substr(start, pos_ - start);
    for (const Constant& constant : kConstants) {
      if (word != (json_ ? constant.json : constant.python)) continue;
      Literal value;
      value.kind = constant.kind;
      value.boolean = constant.boolean;
      value.number = constant.number;
      return value;
    }
    pos_ = start;
    fail_here("unknown name '{}'", word);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  bool json_, unwrap_calls_, bare_words_;
};

// A container being filled. A call (unwrap_calls) is a frame that keeps its first argument.
struct Frame {
  Literal value;
  char closer;
  bool call = false;
  bool has_key = false;
  Literal key;
};

std::string frame_name(const Frame& frame, LiteralSyntax syntax) {
  return with_article(frame.call ? "call" : kind_name(frame.value.kind, syntax));
}

}  // namespace

Literal::Literal() = default;

const Literal* Literal::find(std::string_view key) const {
  const Literal* found = nullptr;
  for (const auto& [k, v] : entries) {
    if (k.kind == Kind::kString && k.text == key) found = &v;
  }
  return found;
}

std::string_view kind_name(Literal::Kind kind, LiteralSyntax syntax) {
  struct Names {
    std::string_view python, json;
  };
  // In the order of Literal::Kind.
  static constexpr Names kNames[] = {
      {"None", "null"},    {"bool", "boolean"}, {"int", "number"},
      {"float", "number"}, {"str", "string"},   {"list", "array"},
      {"tuple", "tuple"},  {"dict", "object"},  {"word", "word"},
  };
  const Names& names = kNames[static_cast<std::size_t>(kind)];
  return syntax == LiteralSyntax::kJson ? names.json : names.python;
}

Literal parse_literal(std::string_view text, const LiteralOptions& options) {
  Reader in(text, options);
  std::vector<Frame> stack;
  for (;;) {
    // A value starts here: a container (pushed, and its first element read next) or a scalar.
    in.skip_blanks();
    if (in.at_end()) {
      if (stack.empty()) in.fail_here("empty input, a value was expected");
      in.fail_here("the text ends inside {} (truncated?)",
                   frame_name(stack.back(), options.syntax));
    }
    char c = in.peek();
    bool wants_key = !stack.empty() && stack.back().value.kind == Kind::kDict &&
                     !stack.back().has_key && !stack.back().call;
    if (wants_key && in.json() && c != '"')
      in.fail_here("an object key must be a string in double quotes");
    Literal value;
    bool container = c == '{' || c == '[' || (c == '(' && !in.json());
    bool call = !container && in.call_start();
    if (container || call) {
      if (static_cast<int>(stack.size()) >= options.max_depth)
        in.fail_here("nested deeper than {} levels", options.max_depth);
      Frame frame;
      frame.call = call;
      frame.value.kind = c == '{' ? Kind::kDict : c == '[' ? Kind::kList : Kind::kTuple;
      frame.closer = call ? ')' : c == '{' ? '}' : c == '[' ? ']' : ')';
      if (container) in.advance();
      in.skip_blanks();
      if (in.at_end() || in.peek() != frame.closer) {
        stack.push_back(std::move(frame));
        continue;
      }
      if (call) in.fail_here("a call without arguments");
      in.advance();
      value = std::move(frame.value);
    } else {
      value = in.scalar(wants_key);
    }
    // Hand the value to its container; close containers until one wants another value.
    for (;;) {
      if (stack.empty()) {
        in.skip_blanks();
        if (!in.at_end()) in.fail_here("unexpected '{}' after the value", in.peek());
        return value;
      }
      Frame& top = stack.back();
      if (top.call) {
        // The call's first argument is its value; the rest is skipped.
        in.skip_blanks();
        if (!in.at_end() && in.peek() == ',') {
          in.skip_call_rest();
        } else if (!in.at_end() && in.peek() == ')') {
          in.advance();
        } else if (in.at_end()) {
          in.fail_here("the text ends inside a call (truncated?)");
        } else {
          in.fail_here("',' or ')' expected in a call, not '{}'", in.peek());
        }
        stack.pop_back();
        continue;
      }
      if (top.value.kind == Kind::kDict && !top.has_key) {
        top.key = std::move(value);
        top.has_key = true;
        in.skip_blanks();
        if (in.at_end())
          in.fail_here("the text ends inside {} (truncated?)", frame_name(top, options.syntax));
        if (in.peek() != ':') in.fail_here("':' expected after a key, not '{}'", in.peek());
        in.advance();
        break;  // the entry's value comes next
      }
      if (top.value.kind == Kind::kDict) {
        top.value.entries.emplace_back(std::move(top.key), std::move(value));
        top.key = Literal();
        top.has_key = false;
      } else {
        top.value.items.push_back(std::move(value));
      }
      in.skip_blanks();
      if (in.at_end())
        in.fail_here("the text ends inside {} (truncated?)", frame_name(top, options.syntax));
      char next = in.peek();
      if (next == ',') {
        in.advance();
        in.skip_blanks();
        // Python allows a trailing comma; in JSON the closer is then an unexpected value.
        if (in.json() || in.at_end() || in.peek() != top.closer) break;  // another element
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
