// profile-report's A/B of two captures (two arms, or before and after): per device (matched by
// plane name), per figure (step length, busy, idle, each category) and per op, the change of its
// mean time per step with its spread across the profiled steps, sorted by what moved most.
//
// Spread: sqrt(sd_A^2 + sd_B^2), the sample standard deviations of the figure over each side's
// steps (0 for a side of one step). A figure moved when |mean_B - mean_A| exceeds its spread and
// `min_change_percent` of mean_A (of the step length for a figure whose mean_A is 0).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "rtb/base/outcome.h"
#include "rtb/profile/summary.h"

namespace rtb::profile {

struct Change {
  std::string kind;      // "step" (length, busy, idle), "category" or "op"
  std::string name;      // "length", "busy", "idle", a category's name, an op's name
  std::string category;  // an op's category ("" for others)
  double mean_a_ps = 0;
  double mean_b_ps = 0;
  double spread_ps = 0;
  bool moved = false;
  double delta_ps() const { return mean_b_ps - mean_a_ps; }
};

struct DeviceComparison {
  std::string plane;
  std::size_t steps_a = 0;
  std::size_t steps_b = 0;
  std::vector<Change> changes;  // largest |delta| first
};

struct Comparison {
  std::vector<std::string> files_a;
  std::vector<std::string> files_b;
  std::vector<DeviceComparison> devices;
  std::vector<std::string> only_a;  // device planes in one capture only
  std::vector<std::string> only_b;
  double min_change_percent = 1.0;
  // kFail when a figure moved beyond its spread or a device is in one capture only.
  Outcome outcome() const;
};

Comparison compare(const Summary& a, const Summary& b, double min_change_percent);

std::string format_compare_text(const Comparison& comparison, std::size_t top);
std::string format_compare_json(const Comparison& comparison, std::size_t top);

}  // namespace rtb::profile
