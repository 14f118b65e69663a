// One reader for the literal values our inputs carry, in two syntaxes:
// - JSON as Python's json.dumps writes it (NaN, Infinity and -Infinity included): BENCH_STEP,
//   BENCH_SUMMARY and TRAINER_STEP_TIMING payloads, the payload_settings member of a payload;
// - Python literals as str() / repr() print them: the `Cost analysis: {...}` dict of MaxText's
//   compile tools, StepMetrics' trainer_metrics, the values of MaxText's `Config param` lines.
//   Dicts, lists, tuples, strings in either quote with every escape repr() writes (quotes, braces
//   and commas inside strings are just text), ints of any size, floats such as `1e+15`, `inf`,
//   `-inf` and `nan`, True, False and None. Sets, bytes and expressions are rejected unless an
//   option below lets them in.
//
// The parser keeps its own stack, so input depth never recurses on the C++ stack; nesting beyond
// `max_depth` is an error.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rtb {

struct Literal {
  // kWord: unquoted text that is not a literal, read only with LiteralOptions::bare_words.
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kWord };
  // Defined (defaulted) in the .cc: clang 14 with libstdc++ 12 rejects the implicit constructor,
  // which instantiates std::pair<Literal, Literal> while Literal is still incomplete.
  Literal();
  Kind kind = Kind::kNone;
  bool boolean = false;
  // kInt and kFloat: the value as a double (a kInt too large for a double is +-inf).
  double number = 0;
  // kInt: the value when it fits in 64 bits (`exact`), and the digits as written.
  long long integer = 0;
  bool exact = false;
  // kString: the decoded text (UTF-8); kInt: the literal's text; kWord: the word, trimmed.
  std::string text;
  std::vector<Literal> items;                        // kList, kTuple
  std::vector<std::pair<Literal, Literal>> entries;  // kDict, in input order

  bool is_null() const { return kind == Kind::kNone; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool is_dict() const { return kind == Kind::kDict; }
  bool is_sequence() const { return kind == Kind::kList || kind == Kind::kTuple; }
  // The value of the last entry whose key is the string `key` (Python and json.loads keep the
  // last of duplicate keys), or nullptr. Only for dicts.
  const Literal* find(std::string_view key) const;
};

enum class LiteralSyntax {
  // JSON: double-quoted strings with JSON escapes, true/false/null, NaN/Infinity/-Infinity; no
  // tuples, no trailing commas, object keys are strings.
  kJson,
  // Python literals as above.
  kPython,
};

inline constexpr int kDefaultLiteralDepth = 64;

struct LiteralOptions {
  LiteralSyntax syntax = LiteralSyntax::kPython;
  int max_depth = kDefaultLiteralDepth;
  // Python only: a value wrapped in a call reads as the call's first argument, the rest of the
  // call skipped: np.float32(1.5), Array(0.5, dtype=float32), tensor(2.) (how JAX and NumPy
  // scalars print inside a dict).
  bool unwrap_calls = false;
  // Python only: unquoted text that is no literal (an enum member `RematLocation.REMAT`, a word
  // of a YAML flow list `[a, b]`) reads as a kWord, up to the next `,`, bracket, or `:` where a
  // dict key ends. Every unquoted scalar is then a kWord, numbers and names included: the caller
  // decides what the words mean.
  bool bare_words = false;
};

// "dict", "list", ... as Python names them; JSON names its containers "object" and "array".
std::string_view kind_name(Literal::Kind kind, LiteralSyntax syntax = LiteralSyntax::kPython);

// Parses one literal that makes up all of `text` (blanks around it are allowed). Throws
// rtb::Error "column N: what is wrong" (1-based byte column) for anything else: a truncated
// literal, an unknown name, text after the literal, nesting deeper than `max_depth`.
Literal parse_literal(std::string_view text, const LiteralOptions& options = {});

inline Literal parse_json(std::string_view text) {
  return parse_literal(text, {.syntax = LiteralSyntax::kJson});
}

}  // namespace rtb
