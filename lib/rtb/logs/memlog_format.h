// The summary of memory logs for people (a table) and for programs (--json).
#pragma once

#include <string>

#include "rtb/logs/memlog_verdict.h"

namespace rtb::logs {

// A table: one column per log, then one delta column per further log against the first.
std::string format_summary_table(const Summary& summary);
// The --json document, schema "rtb.aot-summarize/1" (README).
std::string format_summary_json(const Summary& summary);

}  // namespace rtb::logs
