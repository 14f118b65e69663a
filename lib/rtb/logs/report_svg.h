// bench-report's SVG: one step's micro-batch timeline per run.
#pragma once

#include <string>

#include "rtb/logs/report.h"

namespace rtb::logs::report {

// One step's micro-batch timeline per run (runs[i] drawn from logs[i]): dispatch, device time,
// idle, update and weight-sync wait. `step`: that step in every run; nullopt: each run's last
// selected step that has a TRAINER_STEP_TIMING record.
std::string timeline_svg(const std::vector<steplog::RunLog>& logs, const Report& report,
                         std::optional<std::int64_t> step);

}  // namespace rtb::logs::report
