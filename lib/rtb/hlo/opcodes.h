// What the overlap analysis makes of an HLO opcode: its role (compute, call, collective,
// asynchronous start/update/done), the category and kind of what an asynchronous op moves, and
// a compile-time table of the opcodes that play no role (the scanning thread drops a ROOT with
// one of them and passes on only its index). The per-instruction functions are inline: the
// statement filter calls them for every instruction of a dump, on the scanning thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string_view>

#include "rtb/hlo/analysis.h"

namespace rtb::hlo {

enum class OpcodeRole : std::uint8_t { kOther, kCompute, kCall, kSync, kStart, kUpdate, kDone };

inline bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         std::memcmp(text.data() + text.size() - suffix.size(), suffix.data(), suffix.size()) == 0;
}

inline bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         std::memcmp(text.data(), prefix.data(), prefix.size()) == 0;
}

// `text` == `literal`, with the length a constant: the compiler compares in a few loads where
// std::string_view's == calls memcmp (this runs for every instruction of the dump).
template <std::size_t N>
inline bool equals(std::string_view text, const char (&literal)[N]) {
  return text.size() == N - 1 && std::memcmp(text.data(), literal, N - 1) == 0;
}

// compute: fusion, dot, convolution, custom-call; call: while, call, conditional; sync: the
// synchronous collectives; start/update/done: `*-start`, `*-update`, `*-done`, send and recv.
inline OpcodeRole opcode_role(std::string_view op) {
  switch (op.size()) {
    case 3:
      if (equals(op, "dot")) return OpcodeRole::kCompute;
      break;
    case 4:
      if (equals(op, "call")) return OpcodeRole::kCall;
      if (equals(op, "send") || equals(op, "recv")) return OpcodeRole::kStart;
      break;
    case 5:
      if (equals(op, "while")) return OpcodeRole::kCall;
      break;
    case 6:
      if (equals(op, "fusion")) return OpcodeRole::kCompute;
      break;
    case 10:
      if (equals(op, "all-gather") || equals(op, "all-reduce") || equals(op, "all-to-all"))
        return OpcodeRole::kSync;
      break;
    case 11:
      if (equals(op, "custom-call") || equals(op, "convolution")) return OpcodeRole::kCompute;
      if (equals(op, "conditional")) return OpcodeRole::kCall;
      break;
    case 14:
      if (equals(op, "reduce-scatter")) return OpcodeRole::kSync;
      break;
    case 17:
      if (equals(op, "ragged-all-to-all")) return OpcodeRole::kSync;
      break;
    case 18:
      if (equals(op, "collective-permute")) return OpcodeRole::kSync;
      break;
    case 20:
      if (equals(op, "collective-broadcast")) return OpcodeRole::kSync;
      break;
    default:
      break;
  }
  if (op.size() > 5 && op.back() == 't' && ends_with(op, "-start")) return OpcodeRole::kStart;
  if (op.size() > 4 && op.back() == 'e') {
    if (ends_with(op, "-done")) return OpcodeRole::kDone;
    if (ends_with(op, "-update")) return OpcodeRole::kUpdate;
  }
  return OpcodeRole::kOther;
}

// XLA's opcodes that play no role here (OpcodeRole::kOther), sorted. The scanning thread drops a
// ROOT with one of these opcodes (about one instruction in eight) and hands over only its index
// + 1 (StatementNote::tag) with the next statement it passes on; the analysis needs a
// computation's root opcode only to name what an async-start wrapping the computation runs. A
// ROOT whose opcode is not in the table is passed on as before.
inline constexpr std::string_view kPlainOpcodes[] = {
    "abs",
    "add",
    "add-dependency",
    "after-all",
    "and",
    "atan2",
    "batch-norm-grad",
    "batch-norm-inference",
    "batch-norm-training",
    "bitcast",
    "bitcast-convert",
    "broadcast",
    "cbrt",
    "ceil",
    "cholesky",
    "clamp",
    "clz",
    "compare",
    "complex",
    "concatenate",
    "constant",
    "convert",
    "copy",
    "cosine",
    "divide",
    "domain",
    "dynamic-reshape",
    "dynamic-slice",
    "dynamic-update-slice",
    "erf",
    "exponential",
    "exponential-minus-one",
    "fft",
    "floor",
    "gather",
    "get-dimension-size",
    "get-tuple-element",
    "imag",
    "infeed",
    "iota",
    "is-finite",
    "log",
    "log-plus-one",
    "logistic",
    "map",
    "maximum",
    "minimum",
    "multiply",
    "negate",
    "not",
    "opt-barrier",
    "or",
    "outfeed",
    "pad",
    "parameter",
    "partition-id",
    "popcnt",
    "power",
    "real",
    "reduce",
    "reduce-precision",
    "reduce-window",
    "remainder",
    "replica-id",
    "reshape",
    "reverse",
    "rng",
    "rng-bit-generator",
    "rng-get-and-update-state",
    "round-nearest-afz",
    "round-nearest-even",
    "rsqrt",
    "scatter",
    "select",
    "select-and-scatter",
    "set-dimension-size",
    "shift-left",
    "shift-right-arithmetic",
    "shift-right-logical",
    "sign",
    "sine",
    "slice",
    "sort",
    "sqrt",
    "stochastic-convert",
    "subtract",
    "tan",
    "tanh",
    "topk",
    "transpose",
    "triangular-solve",
    "tuple",
    "xor",
};

namespace opcode_table {

// Index + 1 of `opcode` in kPlainOpcodes, 0 if it is not there: an open-addressing table built
// at compile time (about one probe per lookup; a binary search cost 1.5% of the CPU time).
inline constexpr std::size_t kTagSlots = 256;

constexpr std::size_t opcode_slot(std::string_view op) {
  if (op.empty()) return 0;
  auto byte = [&](std::size_t i) {
    return static_cast<std::size_t>(static_cast<unsigned char>(op[i]));
  };
  return (op.size() * 37 + byte(0) * 5 + byte(op.size() / 2) + byte(op.size() - 1) * 11) %
         kTagSlots;
}

constexpr std::array<std::uint8_t, kTagSlots> make_tag_slots() {
  static_assert(std::size(kPlainOpcodes) < kTagSlots / 2);
  std::array<std::uint8_t, kTagSlots> slots{};
  for (std::size_t i = 0; i < std::size(kPlainOpcodes); ++i) {
    std::size_t slot = opcode_slot(kPlainOpcodes[i]);
    while (slots[slot] != 0) slot = (slot + 1) % kTagSlots;
    slots[slot] = static_cast<std::uint8_t>(i + 1);
  }
  return slots;
}

inline constexpr std::array<std::uint8_t, kTagSlots> kTagSlotTable = make_tag_slots();

}  // namespace opcode_table

// Index + 1 of `opcode` in kPlainOpcodes (its tag), 0 if it is not there.
constexpr std::uint16_t plain_opcode_tag(std::string_view opcode) {
  using opcode_table::kTagSlots;
  for (std::size_t slot = opcode_table::opcode_slot(opcode);; slot = (slot + 1) % kTagSlots) {
    std::uint8_t tag = opcode_table::kTagSlotTable[slot];
    if (tag == 0) return 0;
    // A byte loop: opcodes are short, and std::string_view's == calls memcmp.
    std::string_view candidate = kPlainOpcodes[tag - 1];
    if (candidate.size() == opcode.size()) {
      std::size_t i = 0;
      while (i < opcode.size() && candidate[i] == opcode[i]) ++i;
      if (i == opcode.size()) return tag;
    }
  }
}

// The collective ops (what category kCollective is made of), with send and recv.
bool is_collective_kind(std::string_view kind);

// The category of a kind; "a+b" (an async computation running several collectives) is a
// collective when each part is.
Category category_of(std::string_view kind);

// The op a `*-start` / `*-done` / `*-update` stands for: "all-gather-start" -> "all-gather".
std::string_view sugar_kind(std::string_view opcode);

}  // namespace rtb::hlo
