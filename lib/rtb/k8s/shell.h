// Shell words: reads one bash simple command (the trainer's startup line, `KEY=VALUE ... python -m
// ... --flag=...`) into words the way bash splits them, and quotes words so that bash (and Python's
// shlex.split) read back exactly the same words.
//
// Expansions are never performed: `$VAR`, `${...}`, `$(...)`, `$((...))` and backquotes stay in a
// word's value as written, and the word is marked `expands`. A word's `source` is its text in the
// input, so an unedited word can be written back as it was and still expands at run time.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/error.h"

namespace rtb::k8s::shell {

// A syntax error in shell text: what() is "<problem> at column C" (or "line L, column C"),
// counted in the text that was parsed; offset() lets a caller place it in a larger file.
class SyntaxError : public Error {
 public:
  SyntaxError(std::string problem, std::string_view text, std::size_t offset);
  const std::string& problem() const { return problem_; }
  std::size_t offset() const { return offset_; }

 private:
  std::string problem_;
  std::size_t offset_;
};

struct Word {
  // The word as bash passes it to the program: quotes removed and backslash escapes applied, but
  // expansions kept literally (see above). `$'...'` (ANSI-C quoting) is decoded, `\u` as UTF-8.
  std::string value;
  // The word's text in the input, verbatim (quotes, escapes, line continuations included).
  std::string source;
  // True when bash may change the word at run time: a parameter, command or arithmetic expansion
  // or a backquote outside single quotes, or an unquoted tilde, glob (`*?[`) or brace pattern.
  bool expands = false;
  // Byte offset of the word's first character in the input.
  std::size_t offset = 0;
};

// The words of one simple command. Blanks (space, tab) separate words; `''` and `""` make an empty
// word; backslash-newline is a line continuation. An unescaped newline outside quotes ends the
// command: after it only blank lines and `#` comments may follow. Throws rtb::Error naming the
// problem and its column for unterminated quotes or substitutions, unquoted shell operators
// (`; & | < > ( )`: only one simple command is accepted) and text after the end of the command.
// Linear in the input and without recursion, however deeply substitutions nest.
// Not handled: `case` patterns and here-documents inside `$(...)`.
std::vector<Word> split(std::string_view text);

// The shortest safe quoting of `value` as one word: a non-empty value made only of
// [A-Za-z0-9_@%+=:,./-] is returned bare, anything else single-quoted with each `'` written `'\''`.
// Throws rtb::Error for a NUL byte, which no shell word can hold. A bare `NAME=x` is an assignment
// when it stands before the program word: quote only argv words or assignment values with it.
std::string quote(std::string_view value);

// Each value quoted, separated by one space.
std::string join(const std::vector<std::string>& values);

struct Assignment {
  std::string name;
  std::string value;   // the word's value after `NAME=`
  std::string source;  // the whole word, verbatim
  bool expands = false;
};

struct SimpleCommand {
  std::vector<Assignment> env;  // leading NAME=value words
  std::vector<Word> words;      // the program and its argv (empty when there is no program)
};

// Splits `text` and separates the leading assignments (an unquoted NAME matching
// [A-Za-z_][A-Za-z0-9_]* followed by an unquoted `=`) from the program and its argv. Words after
// the program that look like assignments are argv. Throws rtb::Error as split() does, and for a
// leading `NAME+=value`, which this model cannot represent.
SimpleCommand parse_command(std::string_view text);

}  // namespace rtb::k8s::shell
