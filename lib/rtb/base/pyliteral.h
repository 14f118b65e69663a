// Python literals as Python's str() / repr() prints them: the `Cost analysis: {...}` dict that
// MaxText's compile tools print (a dict, or a one-element list of one with older JAX), and other
// such values in logs. Handles dicts, lists, tuples, strings in either quote with every escape
// repr() writes (quotes, braces and commas inside strings are just text), ints of any size,
// floats such as `1e+15`, `inf`, `-inf` and `nan`, True, False and None. Sets, bytes and
// expressions are not literals repr() prints for these values and are rejected.
//
// The parser keeps its own stack, so input depth never recurses on the C++ stack; nesting beyond
// `max_depth` is an error.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rtb {

struct PyValue {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict };
  // Defined (defaulted) in the .cc: clang 14 with libstdc++ 12 rejects the implicit constructor,
  // which instantiates std::pair<PyValue, PyValue> while PyValue is still incomplete.
  PyValue();
  Kind kind = Kind::kNone;
  bool boolean = false;
  // kInt and kFloat: the value as a double (a kInt too large for a double is +-inf).
  double number = 0;
  // kInt: the value when it fits in 64 bits (`exact`), and the digits as written.
  long long integer = 0;
  bool exact = false;
  // kString: the decoded text (UTF-8); kInt: the literal's text.
  std::string text;
  std::vector<PyValue> items;                        // kList, kTuple
  std::vector<std::pair<PyValue, PyValue>> entries;  // kDict, in input order

  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  // The value of the last entry whose key is the string `key` (Python keeps the last of
  // duplicate keys), or nullptr. Only for dicts.
  const PyValue* find(std::string_view key) const;
};

std::string_view kind_name(PyValue::Kind kind);

inline constexpr int kDefaultPyLiteralDepth = 64;

// Parses one literal that makes up all of `text` (blanks around it are allowed). Throws
// rtb::Error "column N: what is wrong" (1-based byte column) for anything else: a truncated
// literal, an unknown name, text after the literal, nesting deeper than `max_depth`.
PyValue parse_py_literal(std::string_view text, int max_depth = kDefaultPyLiteralDepth);

}  // namespace rtb
