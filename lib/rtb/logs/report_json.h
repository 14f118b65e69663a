// bench-report's --json document.
#pragma once

#include <string>

#include "rtb/logs/report.h"

namespace rtb::logs::report {

// The --json document, schema "rtb.bench-report/1" (see the README section of bench-report).
std::string format_json(const Report& report);

}  // namespace rtb::logs::report
