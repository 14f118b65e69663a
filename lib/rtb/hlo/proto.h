// Binary HloProto dumps (`*.hlo.pb`, written by XLA with --xla_dump_hlo_as_proto and kept by
// nsys-jax and profiler tooling) read as HLO text: the module is rendered, one statement at a
// time, as the text XLA prints for it, and the text reader (scan.h, analysis.h) analyses that,
// so a module gives the same analysis whether it was dumped as text or as a proto.
//
// The rendering keeps what the analysis reads and nothing else:
//   HloModule <name>[, is_scheduled=true]          (is_scheduled when the module has a schedule)
//
//   [ENTRY ]%<computation> {                       (a blank line after each computation)
//     [ROOT ]%<name> = <shape> <opcode>(%<operand>, ...), index=, channel_id=, <callees>,
//         custom_call_target=, is_host_transfer=true, metadata={op_type= op_name=},
//         backend_config="<escaped>"
//   }
// Shapes with element type, dimensions (`<=N` dynamic), tuples and layouts (minor_to_major,
// tiles, element size, memory space); callees by opcode as XLA prints them (while: condition=
// body=, conditional: branch_computations=, fusion and async ops: calls=, custom-call:
// called_computations=, select-and-scatter: select= scatter=, others: to_apply=).
// Instructions of a computation come in the module's schedule order (HloScheduleProto) when the
// module has one for that computation, else in the order the proto stores them. Computations in
// the order the proto stores them; the entry one from entry_computation_id (else its name, else
// the last one). Line numbers the analysis reports are lines of this rendering; XLA prints a
// module's text with one instruction per line in the same layout, so they are the lines of the
// text dump of the same module.
//
// Memory: the proto is memory-mapped (stdin is first copied to an unlinked temporary file), and
// besides a table of the computations only the instruction index of one computation and one
// rendered statement are held. Field numbers: see proto.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rtb/hlo/scan.h"

namespace rtb::hlo {

enum class InputFormat { kText, kBinaryProto };

// Decides from the first bytes of an input (up to 4 KiB; `prefix` is all of the input when it
// is shorter) whether it is HLO text or a binary HloProto:
//   - text when, after leading blanks (space, tab, CR, LF), it starts with `HloModule` followed
//     by a blank or the end;
//   - else a binary HloProto when its first byte is 0x0A (field 1, length-delimited: the
//     hlo_module, which XLA writes first) and the prefix holds a control byte other than tab,
//     CR and LF (a field key or a length; HLO text has none);
//   - else text (the text reader then reports what is wrong with it).
InputFormat detect_input_format(std::string_view prefix);
constexpr std::size_t kFormatPrefixBytes = 4096;

// An input opened for the analysis: HLO text as it is, or a binary HloProto rendered as text.
struct HloInput {
  std::unique_ptr<ByteSource> source;  // the HLO text to analyse
  InputFormat format = InputFormat::kText;
  std::uint64_t proto_bytes = 0;  // size of the binary proto (the text reader counts the text)
};

// Opens `path` ("-" = stdin) and detects its format by content (detect_input_format). Throws
// rtb::Error for unreadable input; problems inside a proto surface while the text is read.
HloInput open_hlo_input(const std::string& path);

// The text of a binary HloProto held in memory (tests, fuzzing). `proto` must outlive the
// source. Throws rtb::Error ("binary HloProto: ...") for malformed input, some at construction
// (the module's structure), the rest while reading (an instruction's fields).
std::unique_ptr<ByteSource> hlo_proto_text_source(std::string_view proto);

// The whole rendering of `proto` as one string (tests, and small inputs only).
std::string hlo_proto_to_text(std::string_view proto);

}  // namespace rtb::hlo
