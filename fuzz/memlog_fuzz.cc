// libFuzzer target: the memory / cost-analysis log parser (memlog.h), its summary writers, the
// byte-size parser and the literal parser (base/literal.h) in its Python syntax. Only rtb::Error is
// an expected outcome (the log parser records problems and should not even throw).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/literal.h"
#include "rtb/logs/memlog.h"
#include "rtb/logs/memlog_format.h"
#include "rtb/logs/memlog_verdict.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  try {
    (void)rtb::parse_literal(text);
  } catch (const rtb::Error&) {
  }
  std::string_view first_line = text.substr(0, text.find('\n'));
  (void)rtb::logs::parse_byte_size(first_line);

  rtb::logs::MemLog log = rtb::logs::parse_memlog(text, "<fuzz>");
  std::vector<rtb::logs::MemLog> logs;
  logs.push_back(log);
  logs.push_back(std::move(log));
  rtb::logs::HbmOptions options;
  if (size % 2 == 0) options.hbm_gib = 16.0 + static_cast<double>(size % 100);
  try {
    rtb::logs::Summary summary = rtb::logs::summarize(std::move(logs), options);
    (void)rtb::logs::format_summary_table(summary);
    (void)rtb::logs::format_summary_json(summary);
  } catch (const rtb::Error&) {
  }
  return 0;
}
