// bench-report for people: the runs, the comparisons against the control, the trainer
// timeline, the numerics gates.
#pragma once

#include <string>

#include "rtb/logs/report.h"

namespace rtb::logs::report {

std::string format_text(const Report& report);

}  // namespace rtb::logs::report
