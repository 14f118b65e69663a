#include "rtb/k8s/shell.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "rtb/base/error.h"
#include "rtb/base/utf8.h"

namespace rtb::k8s::shell {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_operator(char c) { return std::string_view(";&|<>()").find(c) != std::string_view::npos; }
bool is_safe_bare(char c) {
  return is_name_char(c) || std::string_view("@%+=:,./-").find(c) != std::string_view::npos;
}

// "column C" on the first line, "line L, column C" after it (both 1-based).
std::string position(std::string_view text, std::size_t offset) {
  std::size_t line = 1 + std::count(text.begin(), text.begin() + offset, '\n');
  std::size_t line_start = offset == 0 ? std::string_view::npos : text.rfind('\n', offset - 1);
  std::size_t column = offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  if (line == 1) return fmt::format("column {}", column);
  return fmt::format("line {}, column {}", line, column);
}

[[noreturn]] void unterminated(std::string_view text, std::size_t start, std::string_view what) {
  throw SyntaxError(fmt::format("unterminated {} starting", what), text, start);
}

// The offset just past the single-quoted string whose opening quote is at `start`.
std::size_t skip_single_quoted(std::string_view text, std::size_t start) {
  std::size_t close = text.find('\'', start + 1);
  if (close == std::string_view::npos) unterminated(text, start, "single quote");
  return close + 1;
}

// The offset just past the `$'...'` string starting at `start` (backslash escapes the next byte).
std::size_t skip_ansi_c_quoted(std::string_view text, std::size_t start) {
  for (std::size_t i = start + 2; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '\'') {
      return i + 1;
    }
  }
  unterminated(text, start, "$' quote");
}

// The offset just past the substitution starting at `start`: `$(...)` (and `$((...))`), `${...}`
// or a backquote. Nesting is tracked on an explicit stack, so deep input cannot exhaust the call
// stack, and each byte is looked at once.
std::size_t skip_substitution(std::string_view text, std::size_t start) {
  enum class Kind { kParen, kBrace, kDouble, kBackquote };
  struct Open {
    Kind kind;
    std::size_t start;
    int parens;  // open parentheses of a kParen, including its own
  };
  std::vector<Open> stack;
  auto open_at = [&](std::size_t at) -> std::size_t {
    if (text[at] == '`') {
      stack.push_back({Kind::kBackquote, at, 0});
      return at + 1;
    }
    stack.push_back({text[at + 1] == '(' ? Kind::kParen : Kind::kBrace, at, 1});
    return at + 2;
  };
  std::size_t i = open_at(start);
  while (!stack.empty()) {
    Open& top = stack.back();
    if (i >= text.size()) {
      constexpr std::string_view kNames[] = {"$(", "${", "double quote", "backquote"};
      unterminated(text, top.start, kNames[static_cast<int>(top.kind)]);
    }
    char c = text[i];
    if (c == '\\') {  // escapes the next byte in every context here
      i += 2;
      continue;
    }
    if (top.kind == Kind::kBackquote) {
      if (c == '`') stack.pop_back();
      ++i;
      continue;
    }
    bool closes = (top.kind == Kind::kDouble && c == '"') || (top.kind == Kind::kBrace && c == '}');
    if (top.kind == Kind::kParen) {
      if (c == '(') ++top.parens;
      closes = c == ')' && --top.parens == 0;
    }
    if (closes) {
      stack.pop_back();
      ++i;
    } else if (c == '\'' && top.kind != Kind::kDouble) {
      i = skip_single_quoted(text, i);
    } else if (c == '"') {
      stack.push_back({Kind::kDouble, i, 0});
      ++i;
    } else if (c == '`' ||
               (c == '$' && i + 1 < text.size() && (text[i + 1] == '(' || text[i + 1] == '{'))) {
      i = open_at(i);
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '\'' &&
               top.kind != Kind::kDouble) {
      i = skip_ansi_c_quoted(text, i);
    } else {
      ++i;
    }
  }
  return i;
}

// Decodes the `$'...'` string starting at `start` into `out` as bash does; returns the offset past
// it. As in bash, a decoded NUL ends the value (the rest of the string is dropped).
std::size_t read_ansi_c_quoted(std::string_view text, std::size_t start, std::string& out) {
  std::size_t end = skip_ansi_c_quoted(text, start) - 1;  // the closing quote
  auto digits = [&](std::size_t& i, int base, int max_digits) {
    std::uint32_t code = 0;
    int n = 0;
    for (; n < max_digits && i < end; ++n, ++i) {
      char c = text[i];
      int d = is_digit(c)              ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : 99;
      if (d >= base) break;
      code = code * base + d;
    }
    return n == 0 ? std::nullopt : std::optional<std::uint32_t>(code);
  };
  std::string decoded;
  for (std::size_t i = start + 2; i < end;) {
    if (text[i] != '\\') {
      decoded += text[i++];
      continue;
    }
    char c = text[i + 1];
    i += 2;
    constexpr std::string_view kSimple = "abeEfnrtv\\'\"?";
    constexpr std::string_view kDecoded = "\a\b\x1b\x1b\f\n\r\t\v\\'\"?";
    if (std::size_t k = kSimple.find(c); k != std::string_view::npos) {
      decoded += kDecoded[k];
    } else if (c >= '0' && c <= '7') {
      --i;
      decoded += static_cast<char>(*digits(i, 8, 3) & 0xFF);
    } else if (c == 'x' || c == 'u' || c == 'U') {
      auto code = digits(i, 16, c == 'x' ? 2 : c == 'u' ? 4 : 8);
      if (!code) {
        decoded += '\\';
        decoded += c;
      } else if (c == 'x') {
        decoded += static_cast<char>(*code);
      } else {
        utf8::append(decoded, std::min<std::uint32_t>(*code, 0x10FFFF));
      }
    } else if (c == 'c' && i < end) {
      char control = text[i++];
      decoded += control == '?' ? '\x7f' : static_cast<char>(control & 0x1F);
    } else {
      decoded += '\\';
      decoded += c;
    }
  }
  out.append(decoded.c_str());  // stops at a decoded NUL
  return end + 1;
}

// A word being read, with what is needed to tell whether bash would expand it.
struct WordState {
  Word word;
  bool name_so_far = true;     // every byte so far is an unquoted name byte
  bool assignment = false;     // began with an unquoted NAME=
  std::size_t tilde_at = 0;    // where an unquoted `~` would be expanded
  bool brace_open = false;     // an unquoted `{` ...
  bool brace_pattern = false;  // ... followed by an unquoted `,` or `..`
};

class Splitter {
 public:
  explicit Splitter(std::string_view text) : text_(text) {}

  std::vector<Word> run() {
    while (i_ < text_.size()) {
      char c = text_[i_];
      if (is_blank(c)) {
        finish_word();
        ++i_;
      } else if (c == '\n') {
        finish_word();
        if (!words_.empty()) ended_ = true;
        ++i_;
      } else if (c == '\\' && i_ + 1 < text_.size() && text_[i_ + 1] == '\n') {
        i_ += 2;  // line continuation, inside or between words
      } else if (c == '#' && !current_) {
        std::size_t newline = text_.find('\n', i_);
        i_ = newline == std::string_view::npos ? text_.size() : newline;
      } else if (is_operator(c)) {
        throw SyntaxError(fmt::format("unexpected shell operator '{}'", c), text_, i_);
      } else {
        read_word_part(c);
      }
    }
    finish_word();
    return std::move(words_);
  }

 private:
  WordState& current() {
    if (!current_) {
      if (ended_) {
        throw SyntaxError("unexpected text after the end of the command (a newline ends it)", text_,
                          i_);
      }
      current_.emplace();
      current_->word.offset = i_;
      current_->tilde_at = i_;
    }
    return *current_;
  }

  void finish_word() {
    if (!current_) return;
    Word& word = current_->word;
    word.source = std::string(text_.substr(word.offset, i_ - word.offset));
    words_.push_back(std::move(word));
    current_.reset();
  }

  void read_word_part(char c) {
    WordState& state = current();
    std::string& value = state.word.value;
    if (c != '\\' && c != '\'' && c != '"' && c != '$' && c != '`') {
      read_unquoted_byte(state, c);
      return;
    }
    state.name_so_far = false;
    if (c == '\\') {  // escapes the next byte; a backslash at the very end stays
      value += i_ + 1 < text_.size() ? text_[i_ + 1] : '\\';
      i_ = std::min(i_ + 2, text_.size());
    } else if (c == '\'') {
      std::size_t end = skip_single_quoted(text_, i_);
      value.append(text_.substr(i_ + 1, end - i_ - 2));
      i_ = end;
    } else if (c == '"') {
      read_double_quoted(state, i_);
    } else if (c == '$' && i_ + 1 < text_.size() && text_[i_ + 1] == '\'') {
      i_ = read_ansi_c_quoted(text_, i_, value);
    } else if (c == '$' && i_ + 1 < text_.size() && text_[i_ + 1] == '"') {
      read_double_quoted(state, i_ + 1);  // $"..." (translation) reads as "..." without a catalog
    } else {
      read_dollar_or_backquote(state);
    }
  }

  void read_unquoted_byte(WordState& state, char c) {
    Word& word = state.word;
    if (state.name_so_far && c == '=' && !word.value.empty()) {
      state.assignment = true;
      state.tilde_at = i_ + 1;
    } else if (c == ':' && state.assignment) {
      state.tilde_at = i_ + 1;
    }
    if (!(is_name_start(c) || (is_digit(c) && !word.value.empty()))) state.name_so_far = false;
    if (c == '~' && i_ == state.tilde_at) word.expands = true;
    if (c == '*' || c == '?' || c == '[') word.expands = true;
    if (c == '{') state.brace_open = true;
    bool dots = c == '.' && i_ + 1 < text_.size() && text_[i_ + 1] == '.';
    if (state.brace_open && (c == ',' || dots)) state.brace_pattern = true;
    if (c == '}' && state.brace_pattern) word.expands = true;
    word.value += c;
    ++i_;
    // A run of name bytes after it changes nothing above (the word is not empty now) and ends no
    // word: taken at once, as flags and paths are mostly made of them.
    std::size_t run = i_;
    while (run < text_.size() && is_name_char(text_[run])) ++run;
    word.value.append(text_.substr(i_, run - i_));
    i_ = run;
  }

  // Reads `"..."` whose opening quote is at `open`.
  void read_double_quoted(WordState& state, std::size_t open) {
    std::string& value = state.word.value;
    i_ = open + 1;
    while (i_ < text_.size()) {
      char c = text_[i_];
      if (c == '"') {
        ++i_;
        return;
      }
      if (c == '\\' && i_ + 1 < text_.size()) {
        char next = text_[i_ + 1];
        if (next == '$' || next == '`' || next == '"' || next == '\\') {
          value += next;
        } else if (next != '\n') {
          value += '\\';
          value += next;
        }
        i_ += 2;
      } else if (c == '$' || c == '`') {
        read_dollar_or_backquote(state);
      } else {
        value += c;
        ++i_;
      }
    }
    unterminated(text_, open, "double quote");
  }

  // At `$` or a backquote: keeps a substitution or parameter reference literally and marks the
  // word. A `$` that starts none of them is an ordinary byte.
  void read_dollar_or_backquote(WordState& state) {
    std::size_t start = i_;
    char next = i_ + 1 < text_.size() ? text_[i_ + 1] : '\0';
    if (text_[i_] == '`' || next == '(' || next == '{') {
      i_ = skip_substitution(text_, i_);
    } else if (is_name_start(next)) {
      i_ += 2;
      while (i_ < text_.size() && is_name_char(text_[i_])) ++i_;
    } else if (next != '\0' &&
               std::string_view("0123456789@*#?-$!").find(next) != std::string_view::npos) {
      i_ += 2;
    } else {
      state.word.value += '$';
      ++i_;
      return;
    }
    state.word.value.append(text_.substr(start, i_ - start));
    state.word.expands = true;
  }

  std::string_view text_;
  std::size_t i_ = 0;
  std::vector<Word> words_;
  std::optional<WordState> current_;
  bool ended_ = false;  // a newline ended the command
};

}  // namespace

SyntaxError::SyntaxError(std::string problem, std::string_view text, std::size_t offset)
    : Error(fmt::format("{} at {}", problem, position(text, offset))),
      problem_(std::move(problem)),
      offset_(offset) {}

std::vector<Word> split(std::string_view text) { return Splitter(text).run(); }

std::string quote(std::string_view value) {
  if (value.find('\0') != std::string_view::npos) fail("a shell word cannot hold a NUL byte");
  if (!value.empty() && std::all_of(value.begin(), value.end(), is_safe_bare)) {
    return std::string(value);
  }
  std::string quoted = "'";
  for (char c : value) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  quoted += '\'';
  return quoted;
}

std::string join(const std::vector<std::string>& values) {
  std::string joined;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) joined += ' ';
    joined += quote(values[i]);
  }
  return joined;
}

SimpleCommand parse_command(std::string_view text) {
  SimpleCommand command;
  std::vector<Word> words = split(text);
  std::size_t first_argv = 0;
  for (; first_argv < words.size(); ++first_argv) {
    Word& word = words[first_argv];
    const std::string& source = word.source;
    std::size_t name_end = 0;
    if (!source.empty() && is_name_start(source[0])) {
      while (name_end < source.size() && is_name_char(source[name_end])) ++name_end;
    }
    if (name_end > 0 && source.compare(name_end, 2, "+=") == 0) {
      throw SyntaxError(
          fmt::format("append assignment '{}+=' is not supported", source.substr(0, name_end)),
          text, word.offset);
    }
    if (name_end == 0 || name_end >= source.size() || source[name_end] != '=') break;
    command.env.push_back(
        {source.substr(0, name_end), word.value.substr(name_end + 1), source, word.expands});
  }
  command.words.assign(std::make_move_iterator(words.begin() + first_argv),
                       std::make_move_iterator(words.end()));
  return command;
}

}  // namespace rtb::k8s::shell
