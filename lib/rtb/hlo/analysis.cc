#include "rtb/hlo/analysis.h"

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/hlo/analyzer.h"
#include "rtb/hlo/call_graph.h"
#include "rtb/hlo/proto.h"
#include "rtb/hlo/scan.h"

namespace rtb::hlo {

std::string_view status_name(Status status) {
  return enum_name<Status::kUnpairedDone>(
      status, {"overlapped", "exposed", "unpaired-start", "unpaired-done"});
}

std::string_view category_name(Category category) {
  return enum_name<Category::kOther>(category, {"collective", "copy", "other"});
}

void Totals::add(const Collective& c) {
  ++instances;
  if (!c.executions_known) ++executions_unknown;
  if (!c.paired_or_sync()) {
    ++unpaired;
    return;
  }
  executions = sat_add(executions, c.executions);
  std::int64_t weighted = sat_mul(c.bytes, c.executions);
  bytes = sat_add(bytes, weighted);
  if (c.status == Status::kOverlapped) {
    overlapped = sat_add(overlapped, c.executions);
  } else {
    exposed = sat_add(exposed, c.executions);
    exposed_bytes = sat_add(exposed_bytes, weighted);
  }
}

Analysis analyze_file(const std::string& path, const Options& options) {
  Analyzer analyzer(display_name(path), options);
  try {
    HloInput input = open_hlo_input(path);  // HLO text, or a binary HloProto rendered as text
    Analysis analysis = analyzer.run(*input.source);
    if (input.format == InputFormat::kBinaryProto) analysis.bytes_read = input.proto_bytes;
    return analysis;
  } catch (const Error& e) {
    throw e.in_file(display_name(path));
  }
}

Analysis analyze_text(std::string_view text, const std::string& name, const Options& options,
                      std::size_t max_read) {
  MemorySource source(text, name, max_read);
  Analyzer analyzer(name, options);
  try {
    return analyzer.run(source);
  } catch (const Error& e) {
    throw e.in_file(name);
  }
}

}  // namespace rtb::hlo
