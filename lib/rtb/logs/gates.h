// The numerics gates as bench-report's options change and list them: `--limit GATE=VALUE|off`,
// `--metric GATE=KEY` and `--list-gates` (the gates themselves are in bench_stats.h).
#pragma once

#include <string>
#include <vector>

#include "rtb/logs/bench_stats.h"

namespace rtb::logs {

// `--limit GATE=VALUE`: sets the gate's limit (a number >= 0) and enables it; `GATE=off`
// disables it. Throws rtb::Error naming --limit for bad syntax, value or gate.
void apply_gate_limit(std::vector<GateSpec>& gates, const std::string& assignment);

// `--metric GATE=KEY`: the metric the gate reads (for the finite gate, one more metric that must
// stay finite). Throws rtb::Error naming --metric for bad syntax or gate.
void apply_gate_metric(std::vector<GateSpec>& gates, const std::string& assignment);

// Each gate with its limit, metrics, state and reason: two lines per gate.
std::string format_gate_list(const std::vector<GateSpec>& gates);

}  // namespace rtb::logs
