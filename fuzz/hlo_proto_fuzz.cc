// libFuzzer target: the binary HloProto reader (hlo/proto.h, base/proto_wire.h). The input is
// taken as a proto, rendered as HLO text and analysed; only rtb::Error may come out of it, and
// the rendering must be accepted by the format detection as text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "rtb/base/error.h"
#include "rtb/hlo/analysis.h"
#include "rtb/hlo/proto.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)rtb::hlo::detect_input_format(bytes);
  std::string text;
  try {
    text = rtb::hlo::hlo_proto_to_text(bytes);
  } catch (const rtb::Error&) {
    return 0;
  }
  if (rtb::hlo::detect_input_format(text) != rtb::hlo::InputFormat::kText) {
    std::fprintf(stderr, "hlo_proto_fuzz: a rendering is not detected as text\n");
    __builtin_trap();
  }
  rtb::hlo::Options options;
  options.threads = 1;
  options.max_statement_bytes = 64 << 10;
  try {
    (void)rtb::hlo::analyze_text(text, "<fuzz>", options);
  } catch (const rtb::Error&) {
  }
  return 0;
}
