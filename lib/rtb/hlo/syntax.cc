#include "rtb/hlo/syntax.h"

#include <array>
#include <bit>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "rtb/base/text.h"

namespace rtb::hlo {
namespace {

constexpr std::int64_t kMaxBytes = std::numeric_limits<std::int64_t>::max();

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_type_char(char c) { return (c >= 'a' && c <= 'z') || is_digit(c); }

// Index just past the bracket that closes the one at text[open], skipping nested brackets and
// double-quoted strings; npos if it never closes.
std::size_t skip_balanced(std::string_view text, std::size_t open) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = open; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '(':
      case '[':
      case '{':
        ++depth;
        break;
      case ')':
      case ']':
      case '}':
        if (--depth == 0) return i + 1;
        break;
      default:
        break;
    }
  }
  return std::string_view::npos;
}

std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  return a > kMaxBytes - b ? kMaxBytes : a + b;
}

std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kMaxBytes / b ? kMaxBytes : a * b;
}

std::size_t skip_spaces_and_comments(std::string_view text, std::size_t i) {
  for (;;) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i + 1 < text.size() && text[i] == '/' && text[i + 1] == '*') {
      std::size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 2;
      continue;
    }
    return i;
  }
}

// Bytes of an array shape `type[dims]{layout}` (layout ignored).
std::optional<std::int64_t> array_bytes(std::string_view shape) {
  std::size_t bracket = shape.find('[');
  if (bracket == std::string_view::npos || bracket == 0) return std::nullopt;
  int bits = element_bits(shape.substr(0, bracket));
  if (bits < 0) return std::nullopt;
  std::size_t close = shape.find(']', bracket);
  if (close == std::string_view::npos) return std::nullopt;
  std::int64_t elements = 1;
  std::string_view dims = shape.substr(bracket + 1, close - bracket - 1);
  std::size_t i = 0;
  while (i < dims.size()) {
    while (i < dims.size() && (is_space(dims[i]) || dims[i] == '<' || dims[i] == '=')) ++i;
    if (i == dims.size()) break;
    if (!is_digit(dims[i])) return std::nullopt;  // '?' (unbounded) or garbage
    std::int64_t dim = 0;
    while (i < dims.size() && is_digit(dims[i])) {
      dim = dim > kMaxBytes / 10 ? kMaxBytes : dim * 10 + (dims[i] - '0');
      ++i;
    }
    elements = saturating_mul(elements, dim);
    while (i < dims.size() && is_space(dims[i])) ++i;
    if (i < dims.size()) {
      if (dims[i] != ',') return std::nullopt;
      ++i;
    }
  }
  if (bits == 0) return 0;
  std::int64_t total_bits = saturating_mul(elements, bits);
  return total_bits == kMaxBytes ? kMaxBytes : (total_bits + 7) / 8;
}

// Calls on_element for each top-level element of the tuple shape `shape` (which starts with
// '('). Returns false on bad text.
template <typename OnElement>
bool for_each_tuple_element(std::string_view shape, OnElement&& on_element) {
  std::size_t i = 1;
  while (i < shape.size()) {
    i = skip_spaces_and_comments(shape, i);
    if (i >= shape.size()) return false;
    if (shape[i] == ')') return true;
    std::size_t length = shape_length(shape.substr(i));
    if (length == 0) return false;
    if (!on_element(shape.substr(i, length))) return false;
    i = skip_spaces_and_comments(shape, i + length);
    if (i < shape.size() && shape[i] == ',') ++i;
  }
  return false;
}

}  // namespace

std::string_view strip_percent(std::string_view name) {
  if (!name.empty() && name.front() == '%') name.remove_prefix(1);
  return name;
}

std::size_t shape_length(std::string_view text, bool* incomplete) {
  if (incomplete != nullptr) *incomplete = false;
  if (text.empty()) {
    if (incomplete != nullptr) *incomplete = true;
    return 0;
  }
  // Hot path (every instruction): shapes hold no strings, so plain bracket matching will do.
  if (text[0] == '(') {
    int depth = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      char c = text[i];
      if (c == '(') {
        ++depth;
      } else if (c == ')' && --depth == 0) {
        return i + 1;
      }
    }
    if (incomplete != nullptr) *incomplete = true;
    return 0;
  }
  std::size_t i = 0;
  while (i < text.size() && is_type_char(text[i])) ++i;
  if (i == 0) return 0;
  if (i == text.size()) {
    if (incomplete != nullptr) *incomplete = true;
    return 0;
  }
  if (text[i] != '[') return 0;
  std::size_t close = text.find(']', i);
  if (close == std::string_view::npos) {
    if (incomplete != nullptr) *incomplete = true;
    return 0;
  }
  i = close + 1;
  if (i < text.size() && text[i] == '{') {
    // A layout: {1,0:T(8,128)(2,1)S(1)}; no nested braces in practice, but check.
    std::size_t end = text.find('}', i);
    if (end != std::string_view::npos &&
        text.substr(i + 1, end - i - 1).find('{') != std::string_view::npos) {
      end = skip_balanced(text, i);
      if (end != std::string_view::npos) --end;
    }
    if (end == std::string_view::npos) {
      if (incomplete != nullptr) *incomplete = true;
      return 0;
    }
    i = end + 1;
  }
  return i;
}

int element_bits(std::string_view type) {
  switch (type.size()) {
    case 2:
      if (type == "s8" || type == "u8") return 8;
      if (type == "s4" || type == "u4") return 4;
      if (type == "s2" || type == "u2") return 2;
      if (type == "s1" || type == "u1") return 1;
      break;
    case 3:
      if (type == "f32" || type == "s32" || type == "u32") return 32;
      if (type == "f16" || type == "s16" || type == "u16") return 16;
      if (type == "f64" || type == "s64" || type == "u64" || type == "c64") return 64;
      break;
    case 4:
      if (type == "bf16") return 16;
      if (type == "pred") return 8;
      if (type == "c128") return 128;
      break;
    case 5:
      if (type == "token") return 0;
      break;
    case 6:
      if (type == "opaque") return 0;
      break;
    default:
      break;
  }
  // The float8 family (f8e4m3fn, f8e5m2, f8e4m3b11fnuz, f8e8m0fnu, ...), float6 stored one per
  // byte, and float4 (f4e2m1fn) packed like s4.
  if (type.size() > 3 && type[0] == 'f' && type[2] == 'e') {
    if (type[1] == '8' || type[1] == '6') return 8;
    if (type[1] == '4') return 4;
  }
  return -1;
}

std::optional<std::int64_t> shape_bytes(std::string_view shape) {
  shape = trim(shape);
  if (shape.empty()) return std::nullopt;
  if (shape[0] != '(') return array_bytes(shape);
  std::int64_t total = 0;
  bool ok = for_each_tuple_element(shape, [&](std::string_view element) {
    auto bytes = shape_bytes(element);
    if (!bytes) return false;
    total = saturating_add(total, *bytes);
    return true;
  });
  if (!ok) return std::nullopt;
  return total;
}

std::optional<std::vector<std::int64_t>> tuple_element_bytes(std::string_view shape) {
  shape = trim(shape);
  std::vector<std::int64_t> out;
  if (shape.empty()) return std::nullopt;
  if (shape[0] != '(') {
    auto bytes = array_bytes(shape);
    if (!bytes) return std::nullopt;
    out.push_back(*bytes);
    return out;
  }
  bool ok = for_each_tuple_element(shape, [&](std::string_view element) {
    auto bytes = shape_bytes(element);
    if (!bytes) return false;
    out.push_back(*bytes);
    return true;
  });
  if (!ok) return std::nullopt;
  return out;
}

namespace {

// Character classes for the instruction-head parser, which runs on every instruction of a dump.
enum : std::uint8_t { kSpaceClass = 1, kNameStop = 2, kTypeClass = 4, kOpcodeClass = 8 };

constexpr std::array<std::uint8_t, 256> make_classes() {
  std::array<std::uint8_t, 256> table{};
  for (int c = 0; c < 256; ++c) {
    std::uint8_t bits = 0;
    bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (space) bits |= kSpaceClass;
    if (space || c == '=' || c == '(' || c == ')' || c == '{' || c == '}' || c == ',' || c == '"') {
      bits |= kNameStop;
    }
    bool lower_or_digit = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (lower_or_digit) bits |= kTypeClass;
    if (lower_or_digit || c == '-' || c == '_') bits |= kOpcodeClass;
    table[static_cast<std::size_t>(c)] = bits;
  }
  return table;
}

constexpr std::array<std::uint8_t, 256> kClasses = make_classes();

inline bool has_class(char c, std::uint8_t bits) {
  return (kClasses[static_cast<unsigned char>(c)] & bits) != 0;
}

// 16 bytes per step with SSE2, then 8 (a word at a time): names and shapes are tens of bytes,
// so this beats both a byte loop and a memchr call. Returns the first position in [p, e)
// holding one of kStops, or e.
inline std::uint64_t zero_bytes(std::uint64_t x) {
  return (x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL;
}

template <char... kStops>
inline const char* find_any(const char* p, const char* e) {
#if defined(__SSE2__)
  // 16 bytes per step while they are there (names and shapes are often longer than 8 bytes).
  while (e - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i hit = _mm_setzero_si128();
    ((hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8(kStops)))), ...);
    unsigned hits = static_cast<unsigned>(_mm_movemask_epi8(hit));
    if (hits != 0) return p + std::countr_zero(hits);
    p += 16;
  }
#endif
  while (e - p >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    std::uint64_t hits =
        (zero_bytes(word ^ (0x0101010101010101ULL * static_cast<unsigned char>(kStops))) | ...);
    if (hits != 0) return p + (std::countr_zero(hits) >> 3);
    p += 8;
  }
  while (p < e && ((*p != kStops) && ...)) ++p;
  return p;
}

// First position in [p, e) that is not an opcode character ([a-z0-9_-]), or e. Opcodes are
// 3 to 25 characters: 16 at a time (signed compares: bytes >= 0x80 fall outside every range).
inline const char* skip_opcode_chars(const char* p, const char* e) {
#if defined(__SSE2__)
  const __m128i below_lower = _mm_set1_epi8('a' - 1);
  const __m128i above_lower = _mm_set1_epi8('z' + 1);
  const __m128i below_digit = _mm_set1_epi8('0' - 1);
  const __m128i above_digit = _mm_set1_epi8('9' + 1);
  const __m128i dash = _mm_set1_epi8('-');
  const __m128i underscore = _mm_set1_epi8('_');
  while (e - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i lower = _mm_and_si128(_mm_cmpgt_epi8(v, below_lower), _mm_cmplt_epi8(v, above_lower));
    __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, below_digit), _mm_cmplt_epi8(v, above_digit));
    __m128i other = _mm_or_si128(_mm_cmpeq_epi8(v, dash), _mm_cmpeq_epi8(v, underscore));
    unsigned in_class =
        static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(lower, digit), other)));
    if (in_class != 0xFFFFu) return p + std::countr_zero(~in_class);
    p += 16;
  }
#endif
  while (p < e && has_class(*p, kOpcodeClass)) ++p;
  return p;
}

}  // namespace

std::size_t header_token_length(std::string_view text) {
  const char* end = text.data() + text.size();
  return static_cast<std::size_t>(find_any<' ', '\t', '\n', '\r', '(', '{'>(text.data(), end) -
                                  text.data());
}

HeadStatus parse_instruction_head(std::string_view text, InstructionHead& head) {
  const char* p = text.data();
  const char* const e = p + text.size();
  auto view = [](const char* from, const char* to) {
    return std::string_view(from, static_cast<std::size_t>(to - from));
  };
  while (p < e && has_class(*p, kSpaceClass)) ++p;
  if (p == e) return HeadStatus::kNotInstruction;
  head.root = false;
  if (e - p > 5 && p[0] == 'R' && p[1] == 'O' && p[2] == 'O' && p[3] == 'T' &&
      has_class(p[4], kSpaceClass)) {
    head.root = true;
    p += 5;
    while (p < e && has_class(*p, kSpaceClass)) ++p;
    if (p == e) return HeadStatus::kIncomplete;
  }
  // The name runs to the first blank or '='. Only its first character is checked against the
  // characters names never hold (the rest would cost a pass over every name).
  const char* name = p;
  if (has_class(*p, kNameStop)) return HeadStatus::kNotInstruction;
  p = find_any<' ', '='>(p, e);
  head.name = strip_percent(view(name, p));
  while (p < e && has_class(*p, kSpaceClass)) ++p;
  if (p == e) return HeadStatus::kIncomplete;
  if (*p != '=') return HeadStatus::kNotInstruction;
  ++p;
  while (p < e && has_class(*p, kSpaceClass)) ++p;
  if (p == e) return HeadStatus::kIncomplete;
  // The shape, inline for speed (shape_length has the same rules): a tuple in parentheses, or
  // type[dims] with an optional {layout}. Shapes hold no strings.
  const char* shape = p;
  // Fast path: XLA prints array shapes without blanks, so the shape ends at the next blank;
  // accept that if it looks like type[dims] or type[dims]{layout}, else parse exactly.
  const char* blank = *p == '(' ? e : find_any<' ', '\n'>(p, e);
  if (blank != e && has_class(*p, kTypeClass) && (blank[-1] == ']' || blank[-1] == '}') &&
      find_any<'['>(p, blank) != blank) {
    p = blank;
  } else if (*p == '(') {
    // A tuple: to the matching ')', from parenthesis to parenthesis (the tuple of a while loop's
    // state runs to kilobytes).
    int depth = 0;
    for (;; ++p) {
      p = find_any<'(', ')'>(p, e);
      if (p == e) return HeadStatus::kIncomplete;
      if (*p == '(') {
        ++depth;
      } else if (--depth == 0) {
        break;
      }
    }
    ++p;
  } else {
    while (p < e && has_class(*p, kTypeClass)) ++p;
    if (p == shape) return HeadStatus::kNotInstruction;
    if (p == e) return HeadStatus::kIncomplete;
    if (*p != '[') return HeadStatus::kNotInstruction;
    p = find_any<']'>(p, e);
    if (p == e) return HeadStatus::kIncomplete;
    ++p;
    if (p < e && *p == '{') {
      const char* layout = p;
      p = find_any<'}', '{'>(p + 1, e);
      if (p < e && *p == '{') {  // nested braces: never printed by XLA, but be exact
        int depth = 0;
        for (p = layout; p < e; ++p) {
          if (*p == '{') {
            ++depth;
          } else if (*p == '}' && --depth == 0) {
            break;
          }
        }
      }
      if (p == e) return HeadStatus::kIncomplete;
      ++p;
    }
  }
  head.shape = view(shape, p);
  while (p < e && has_class(*p, kSpaceClass)) ++p;
  if (p == e) return HeadStatus::kIncomplete;
  const char* opcode = p;
  p = skip_opcode_chars(p, e);
  if (p == opcode) return HeadStatus::kNotInstruction;
  if (p == e) return HeadStatus::kIncomplete;
  if (*p != '(') return HeadStatus::kNotInstruction;
  head.opcode = view(opcode, p);
  head.call = view(p, e);
  return HeadStatus::kOk;
}

bool split_call(std::string_view call, std::string_view& operands, std::string_view& attributes) {
  if (call.empty() || call[0] != '(') return false;
  std::size_t end = skip_balanced(call, 0);
  if (end == std::string_view::npos) return false;
  operands = call.substr(1, end - 2);
  attributes = call.substr(end);
  return true;
}

std::string_view first_operand_name(std::string_view operands) {
  std::size_t i = skip_spaces_and_comments(operands, 0);
  if (i >= operands.size()) return {};
  // A typed operand starts with a shape: a tuple, or `type[`.
  std::size_t j = i;
  while (j < operands.size() && is_type_char(operands[j])) ++j;
  if (operands[i] == '(' || (j > i && j < operands.size() && operands[j] == '[')) {
    std::size_t length = shape_length(operands.substr(i));
    if (length == 0) return {};
    i = skip_spaces_and_comments(operands, i + length);
  }
  std::size_t begin = i;
  while (i < operands.size() && !is_space(operands[i]) && operands[i] != ',' &&
         operands[i] != ')') {
    ++i;
  }
  return strip_percent(operands.substr(begin, i - begin));
}

bool next_attribute(std::string_view& cursor, std::string_view& key, std::string_view& value) {
  for (;;) {
    std::size_t i = 0;
    while (i < cursor.size() && (is_space(cursor[i]) || cursor[i] == ',')) ++i;
    cursor.remove_prefix(i);
    if (cursor.empty()) return false;
    std::size_t key_end = 0;
    while (key_end < cursor.size() && cursor[key_end] != '=' && cursor[key_end] != ',' &&
           !is_space(cursor[key_end]) && cursor[key_end] != '{' && cursor[key_end] != '"') {
      ++key_end;
    }
    bool has_value = key_end < cursor.size() && cursor[key_end] == '=';
    std::size_t value_begin = has_value ? key_end + 1 : key_end;
    // The value runs to the next ',' outside brackets and strings.
    int depth = 0;
    bool in_string = false;
    std::size_t j = value_begin;
    const char* const data = cursor.data();
    for (; j < cursor.size(); ++j) {
      if (in_string) {
        // Strings (op names, file paths, escaped backend configs) are most of the text here:
        // 16 bytes a step to the next quote or backslash.
        j = static_cast<std::size_t>(find_any<'"', '\\'>(data + j, data + cursor.size()) - data);
        if (j >= cursor.size()) break;
        if (data[j] == '\\') {
          ++j;
        } else {
          in_string = false;
        }
        continue;
      }
      char c = data[j];
      if (c == '"') {
        in_string = true;
      } else if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if (c == ')' || c == ']' || c == '}') {
        --depth;
      } else if (c == ',' && depth <= 0) {
        break;
      }
    }
    if (j > cursor.size()) j = cursor.size();
    if (has_value) {
      key = cursor.substr(0, key_end);
      value = trim(cursor.substr(value_begin, j - value_begin));
      cursor.remove_prefix(j);
      return true;
    }
    cursor.remove_prefix(j);  // a stray token without '=': skip it
  }
}

std::string metadata_op_name(std::string_view metadata) {
  std::size_t at = 0;
  for (;;) {
    at = metadata.find("op_name=\"", at);
    if (at == std::string_view::npos) return {};
    // Must be a key of its own, not the tail of another key (e.g. "deduplicated_op_name").
    if (at == 0 || metadata[at - 1] == '{' || is_space(metadata[at - 1])) break;
    at += 9;
  }
  std::string out;
  for (std::size_t i = at + 9; i < metadata.size(); ++i) {
    char c = metadata[i];
    if (c == '"') return out;
    if (c == '\\' && i + 1 < metadata.size()) {
      char next = metadata[++i];
      out += next == 'n' ? '\n' : next == 't' ? '\t' : next;
      continue;
    }
    out += c;
  }
  return out;
}

std::optional<std::int64_t> known_trip_count(std::string_view backend_config) {
  std::size_t at = backend_config.find("known_trip_count");
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t brace = backend_config.find('{', at);
  if (brace == std::string_view::npos || brace - at > 24) return std::nullopt;
  std::size_t key = backend_config.find('n', brace);
  if (key == std::string_view::npos || key - brace > 4) return std::nullopt;
  std::size_t i = key + 1;
  while (i < backend_config.size() && !is_digit(backend_config[i]) && i - key < 10) {
    char c = backend_config[i];
    if (c != '"' && c != '\\' && c != ':' && !is_space(c)) return std::nullopt;
    ++i;
  }
  if (i >= backend_config.size() || !is_digit(backend_config[i])) return std::nullopt;
  std::int64_t count = 0;
  while (i < backend_config.size() && is_digit(backend_config[i])) {
    if (count > kMaxBytes / 10) return std::nullopt;
    count = count * 10 + (backend_config[i] - '0');
    ++i;
  }
  return count;
}

std::vector<std::string_view> computation_refs(std::string_view value) {
  std::vector<std::string_view> out;
  value = trim(value);
  if (!value.empty() && value.front() == '{') {
    value.remove_prefix(1);
    if (!value.empty() && value.back() == '}') value.remove_suffix(1);
  }
  while (!value.empty()) {
    std::size_t comma = value.find(',');
    std::string_view item = trim(value.substr(0, comma));
    if (!item.empty()) out.push_back(strip_percent(item));
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return out;
}

// The name of the computation a computation header opens (`ENTRY %main (...) -> ... {`), empty
// if there is none.
std::string_view header_name(std::string_view body) {
  if (body.starts_with("ENTRY") && body.size() > 5 && is_space(body[5])) {
    body = trim(body.substr(5));
  }
  return strip_percent(body.substr(0, header_token_length(body)));
}

// The computation a fusion calls (`calls=%fused_computation.3`), empty if not found. XLA prints
// `calls=` before any quoted attribute (metadata, backend_config), so a plain search up to the
// first quote finds it without walking the attributes.
std::string_view fusion_callee(std::string_view call) {
  std::size_t quote = call.find('"');
  std::size_t at = call.substr(0, quote).find("calls=");
  if (at == std::string_view::npos || at == 0 || (call[at - 1] != ' ' && call[at - 1] != ',')) {
    return {};
  }
  std::string_view rest = call.substr(at + 6);
  std::size_t end = 0;
  while (end < rest.size() && rest[end] != ',' && !is_space(rest[end])) ++end;
  std::string_view value = rest.substr(0, end);
  if (value.empty() || value.front() == '{') return {};
  return strip_percent(value);
}

}  // namespace rtb::hlo
