#include "rtb/hlo/scan.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "rtb/base/error.h"
#include "rtb/hlo/pipeline.h"
#include "rtb/hlo/splitter.h"
#include "rtb/hlo/syntax.h"

namespace rtb::hlo {

// ---- statement completeness ---------------------------------------------------------------------

bool instruction_reached_opcode(std::string_view text) {
  InstructionHead head;
  return parse_instruction_head(text, head) != HeadStatus::kIncomplete;
}

SplitEnd split_statements(ByteSource& source, const SplitOptions& options,
                          const std::function<void(const Statement&)>& on_statement,
                          StatementFilter* filter) {
  constexpr std::size_t kPipelineMinBytes = std::size_t{4} << 20;
  constexpr int kMaxAutomaticScanners = 4;
  std::string_view whole = source.contiguous();
  int scanners = options.threads;
  if (scanners == 0) {
    unsigned cores = std::thread::hardware_concurrency();
    scanners = whole.size() >= kPipelineMinBytes && cores >= 2
                   ? std::min(static_cast<int>(cores), kMaxAutomaticScanners)
                   : 1;
  }
  if (!whole.empty() && scanners >= 2) {
    return split_pipelined(source, options, scanners, on_statement, filter);
  }
  if (filter == nullptr) {
    Splitter splitter(source, options, [&](const Statement& s) { on_statement(s); });
    return splitter.run();
  }
  Splitter splitter(source, options, [&](const Statement& s) {
    StatementNote note;
    if (!filter->keep(s, note)) return;
    Statement noted = s;
    noted.note = &note;
    on_statement(noted);
  });
  SplitEnd end = splitter.run();
  end.pending = filter->pending();
  return end;
}

}  // namespace rtb::hlo
