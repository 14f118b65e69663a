// Small parsers for the pieces of one HLO statement: instruction heads, shapes and their sizes,
// operand lists, attributes and the few attribute values the overlap analysis needs. They work
// on std::string_view slices of the statement and allocate only where they return strings.
//
// Text forms accepted (see XLA's HLO text format):
//   [ROOT] %name = SHAPE opcode(OPERANDS), key=value, key=value ...
//   SHAPE   = type[dims]{layout}  |  (SHAPE, SHAPE, ...)      e.g. bf16[8,128]{1,0:T(8,128)(2,1)}
//   OPERAND = %name  |  SHAPE %name                         (names may lack the %)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::hlo {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
// `name` without one leading '%'.
std::string_view strip_percent(std::string_view name);
// Length of the token at the start of `text` that ends at a blank, '(' or '{' (a computation
// header's name; the scan for it runs once per computation, so 16 bytes a step).
std::size_t header_token_length(std::string_view text);

// Length of the shape at the start of `text` (which must start at the shape), or 0 if `text`
// does not start with a shape. Sets `*incomplete` when the text ends inside the shape.
std::size_t shape_length(std::string_view text, bool* incomplete = nullptr);

// Size in bits of one element of `type` ("bf16" -> 16, "s4" -> 4, "pred" -> 8, "token" -> 0),
// or -1 if the type is unknown.
int element_bits(std::string_view type);

// Size of a shape in bytes: arrays are elements x element size rounded up to whole bytes,
// tuples the sum of their elements, tokens 0. Bounded dynamic dimensions (<=N) count as N.
// Returns nullopt if the shape cannot be sized (unknown type, unbounded dimension, bad text).
std::optional<std::int64_t> shape_bytes(std::string_view shape);
// Bytes of each top-level element of a tuple shape ({bytes} for a non-tuple), nullopt if any
// element cannot be sized.
std::optional<std::vector<std::int64_t>> tuple_element_bytes(std::string_view shape);

struct InstructionHead {
  bool root = false;
  std::string_view name;    // without '%'
  std::string_view shape;   // result shape text
  std::string_view opcode;  // e.g. "all-gather-start"
  std::string_view call;    // from the '(' of the operand list to the end of the statement
};

enum class HeadStatus {
  kOk,              // an instruction head was parsed
  kIncomplete,      // the text ends before the opcode's '(' (more lines follow)
  kNotInstruction,  // the text is not an instruction
};

// Parses `[ROOT] %name = SHAPE opcode(` at the start of `text` (leading whitespace allowed).
HeadStatus parse_instruction_head(std::string_view text, InstructionHead& head);

// Splits `call` (starting at '(') into the operand list inside the parentheses and the
// attribute text after them. Returns false if the parentheses do not close.
bool split_call(std::string_view call, std::string_view& operands, std::string_view& attributes);

// The name (without '%') of the first operand in an operand list: `%x`, `x`, `f32[4]{0} %x`,
// `((f32[2]), f32[4]) %start`, possibly after a /*index=N*/ comment. Empty if there is none.
std::string_view first_operand_name(std::string_view operands);

// Reads the next top-level `key=value` from `cursor` (attribute text after the operands, as in
// `, channel_id=1, replica_groups={{0,1}}, metadata={op_name="a,b"}`), advancing `cursor`.
// Values end at a ',' outside brackets and double-quoted strings. Returns false at the end.
bool next_attribute(std::string_view& cursor, std::string_view& key, std::string_view& value);

// The op_name inside a metadata value `{op_type="..." op_name="..." ...}`, with escapes
// (\" \' \\) resolved; empty if absent.
std::string metadata_op_name(std::string_view metadata);

// known_trip_count from a while's backend_config, in JSON form
// `{"known_trip_count":{"n":"10"},...}` or escaped-string form `"{\"known_trip_count\":...}"`.
std::optional<std::int64_t> known_trip_count(std::string_view backend_config);

// Computation names (without '%') in an attribute value: `%body` or `{%a, %b}`.
std::vector<std::string_view> computation_refs(std::string_view value);

// Whether a trimmed statement is a `//` comment.
inline bool is_comment(std::string_view body) {
  return body.size() >= 2 && body[0] == '/' && body[1] == '/';
}

// The name of the computation a computation header opens (`ENTRY %main (...) -> ... {`), empty
// if there is none.
std::string_view header_name(std::string_view body);

// The computation a fusion calls (`calls=%fused_computation.3`) from its call text (from the
// operand list's '('), empty if not found.
std::string_view fusion_callee(std::string_view call);

}  // namespace rtb::hlo
