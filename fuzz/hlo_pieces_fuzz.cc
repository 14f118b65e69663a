// libFuzzer target: the pipelined HLO reader against the single-thread one (a differential
// target). The input is cut into pieces scanned in parallel (hlo_scan.h), as finely as the first
// byte says, so that the guessed piece starts are often wrong (inside strings, brackets or
// statements) and the reader must notice and scan again. Properties: the statement splitter
// delivers the same statements, lines, notes and end with 1, 2 and 3 threads; the analysis
// gives the same report. A difference traps.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "../tests/hlo/counting_filter.h"
#include "rtb/base/error.h"
#include "rtb/hlo/analysis.h"
#include "rtb/hlo/report.h"
#include "rtb/hlo/scan.h"
#include "rtb/hlo/syntax.h"

namespace {

using rtb::hlo::Statement;

bool no_head(const Statement& statement) { return statement.head == nullptr; }

using Seen =
    std::vector<std::tuple<std::string, std::int64_t, std::int64_t, std::string, std::uint32_t>>;

std::string split(std::string_view text, int threads, std::size_t piece_bytes, bool filtered) {
  rtb::MemorySource source(text, "<fuzz>");
  rtb::hlo::SplitOptions options;
  options.threads = threads;
  options.piece_bytes = piece_bytes;
  options.max_statement_bytes = 32 << 10;
  rtb::hlo::fixtures::CountingFilter filter(no_head);
  Seen seen;
  rtb::hlo::SplitEnd end = rtb::hlo::split_statements(
      source, options,
      [&](const Statement& s) {
        seen.emplace_back(s.text, s.line, s.depth_after,
                          s.head != nullptr ? std::string(s.head->opcode) : "",
                          s.note != nullptr ? s.note->count : 0);
      },
      filtered ? &filter : nullptr);
  std::string out;
  for (const auto& [statement, line, depth, opcode, count] : seen) {
    out += std::to_string(line) + ' ' + std::to_string(depth) + ' ' + opcode + ' ' +
           std::to_string(count) + ' ' + statement + '\n';
  }
  out += "end " + std::to_string(end.clean) + ' ' + std::to_string(end.line) + ' ' + end.message +
         ' ' + std::to_string(end.lines) + ' ' + std::to_string(end.bytes) + ' ' +
         std::to_string(end.partial_statement) + ' ' + std::to_string(end.pending.count);
  if (end.clean) out += ' ' + std::to_string(end.depth);  // the depth of a clean split only
  return out;
}

std::string analyse(std::string_view text, int threads, std::size_t piece_bytes) {
  rtb::hlo::Options options;
  options.threads = threads;
  options.piece_bytes = piece_bytes;
  options.max_statement_bytes = 32 << 10;
  try {
    return rtb::hlo::format_json(rtb::hlo::analyze_text(text, "<fuzz>", options));
  } catch (const rtb::Error& e) {
    return std::string("error: ") + e.what();
  }
}

void check(bool same, const char* what) {
  if (same) return;
  std::fprintf(stderr, "hlo_pieces_fuzz: %s differs between one thread and pieces\n", what);
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::size_t piece_bytes = 1 + data[0] % 128;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (bool filtered : {false, true}) {
    std::string single = split(text, 1, 0, filtered);
    check(split(text, 2, piece_bytes, filtered) == single, "the split");
    check(split(text, 3, piece_bytes * 3, filtered) == single, "the split (3 threads)");
  }
  check(analyse(text, 2, piece_bytes) == analyse(text, 1, 0), "the analysis");
  return 0;
}
