// libFuzzer target: the step-timing log parsers (steplog.h): whole logs, the value reader they
// use (base/literal.h: JSON, Python literals with calls unwrapped, and bare words), and the
// timeline of every TRAINER_STEP_TIMING record. Only rtb::Error is an expected outcome (the log
// parser warns and should not even throw).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rtb/base/error.h"
#include "rtb/base/literal.h"
#include "rtb/logs/steplog.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  for (rtb::LiteralSyntax syntax : {rtb::LiteralSyntax::kJson, rtb::LiteralSyntax::kPython}) {
    try {
      rtb::Literal value = rtb::logs::steplog::parse_value(text, syntax);
      if (value.is_dict()) (void)rtb::logs::steplog::numeric_leaves(value);
    } catch (const rtb::Error&) {
    }
  }
  try {
    (void)rtb::parse_literal(text, {.bare_words = true});
  } catch (const rtb::Error&) {
  }

  (void)rtb::logs::steplog::find_log_timestamp(text);

  rtb::logs::steplog::RunLog log;
  try {
    log = rtb::logs::steplog::parse_run_log_text(text, "<fuzz>");
  } catch (const rtb::Error&) {
    // A set-up field of issue 25's contract with the wrong type stops the parse.
    return 0;
  }
  for (const rtb::logs::steplog::StepTiming& timing : log.timings) {
    (void)rtb::logs::steplog::step_timeline(timing);
  }
  (void)rtb::logs::steplog::log_kind_name(log.kind);
  return 0;
}
