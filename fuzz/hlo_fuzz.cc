// libFuzzer target: the HLO reader (hlo_scan.h, hlo_syntax.h, hlo.h) and its reports
// (hlo_report.h). The input is read either as one contiguous region or, depending on its size,
// through reads of a few bytes each, so that statements split across reads are exercised too.
// Properties: the SIMD and the portable chunk classifiers agree; a dump compared with itself
// is the same (hlo::judge). Only rtb::Error is expected.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "rtb/base/error.h"
#include "rtb/hlo/analysis.h"
#include "rtb/hlo/chunk.h"
#include "rtb/hlo/report.h"
#include "rtb/hlo/scan.h"
#include "rtb/hlo/syntax.h"
#include "rtb/hlo/verdict.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  for (std::size_t at = 0; at + 64 <= size; at += 64) {
    if (rtb::hlo::classify_chunk(text.data() + at) !=
        rtb::hlo::classify_chunk_portable(text.data() + at)) {
      std::fprintf(stderr, "hlo_fuzz: classify_chunk differs from the portable version\n");
      __builtin_trap();
    }
  }

  // The statement-level parsers on the first line, as a statement would reach them.
  std::string_view first_line = text.substr(0, text.find('\n'));
  rtb::hlo::InstructionHead head;
  if (rtb::hlo::parse_instruction_head(first_line, head) == rtb::hlo::HeadStatus::kOk) {
    (void)rtb::hlo::shape_bytes(head.shape);
    (void)rtb::hlo::tuple_element_bytes(head.shape);
    std::string_view operands, attributes;
    (void)rtb::hlo::split_call(head.call, operands, attributes);
  }
  (void)rtb::hlo::shape_bytes(first_line);
  (void)rtb::hlo::instruction_reached_opcode(first_line);

  rtb::hlo::Options options;
  options.threads = 1;
  options.keep_schedule = true;
  options.max_statement_bytes = 64 << 10;
  std::size_t max_read = size % 3 == 0 ? SIZE_MAX : 1 + size % 61;
  try {
    rtb::hlo::Analysis analysis = rtb::hlo::analyze_text(text, "<fuzz>", options, max_read);
    (void)rtb::hlo::format_text(analysis);
    (void)rtb::hlo::format_json(analysis);
    if (rtb::hlo::judge({analysis, analysis}, {}).outcome() != rtb::Outcome::kPass) {
      std::fprintf(stderr, "hlo_fuzz: a dump compared with itself differs\n");
      __builtin_trap();
    }
    if (analysis.schedule) (void)rtb::hlo::render_svg(analysis);
  } catch (const rtb::Error&) {
  }
  return 0;
}
