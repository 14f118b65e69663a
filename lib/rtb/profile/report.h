// profile-report's output of one capture: text, JSON (schema rtb.profile-report/2,
// schemas/profile-report.schema.json) and an SVG timeline of one step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "rtb/profile/overlap.h"
#include "rtb/profile/summary.h"
#include "rtb/profile/xspace.h"

namespace rtb::profile {

struct ReportOptions {
  std::size_t top = 10;  // ops listed per device
};

// With `overlap` (--hlo), the measured against scheduled overlap follows (text) or is the
// document's `overlap` (JSON; null without).
std::string format_text(const Summary& summary, const ReportOptions& options,
                        const Overlap* overlap = nullptr);
std::string format_json(const Summary& summary, const ReportOptions& options,
                        const Overlap* overlap = nullptr);

// The timeline of one step of the first device (`step`: its index among the device's steps;
// default the longest step): one row per op line, one box per op event coloured by category,
// the step's busy and idle time in the title. Throws rtb::Error for a step out of range or a
// capture without steps.
std::string render_timeline_svg(const Capture& capture, const Summary& summary,
                                std::optional<std::size_t> step);

// Picoseconds as milliseconds with three decimals ("12.345").
std::string ms(std::int64_t ps);

}  // namespace rtb::profile
