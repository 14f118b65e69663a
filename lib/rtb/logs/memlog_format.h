// The summary of memory logs for people (a table) and for programs (--json).
#pragma once

#include <string>

#include "rtb/base/json.h"
#include "rtb/logs/memlog_verdict.h"

namespace rtb::logs {

// A table: one column per log, then one delta column per further log against the first.
std::string format_summary_table(const Summary& summary);
// The --json document, schema "rtb.aot-summarize/1" (docs/aot-check.md).
std::string format_summary_json(const Summary& summary);
// Its fields after "schema" (exit_code, error, fits, logs, deltas), written into the object `j`
// has open: for documents that hold a summary among other fields (aot-check --run with arms).
void write_summary_fields(json::Writer& j, const Summary& summary);

}  // namespace rtb::logs
