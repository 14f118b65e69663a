// Text, JSON and SVG renderings of what check-payload computes (build, verify, measure, tiles).
// Pure functions of the reports: the tool prints what they return.
#pragma once

#include <string>
#include <vector>

#include "rtb/payload/builder.h"
#include "rtb/payload/check.h"
#include "rtb/payload/load.h"
#include "rtb/payload/tiles.h"

namespace rtb::payload {

// build: the payload's shape, the output file (empty: none) and the per-layer table of targets
// against what was written, then the checks.
std::string format_build_text(const Payload& payload, const VerifyReport& checks,
                              const std::string& output);
std::string format_build_json(const Payload& payload, const VerifyReport& checks,
                              const std::string& output);

// verify: the file's shape and layout, each check with its failures, the per-layer table.
// `targets_source` says where the targets came from ("" when none were checked).
std::string format_verify_text(const std::string& file, const VerifyReport& report,
                               const std::string& targets_source);
std::string format_verify_json(const std::string& file, const VerifyReport& report,
                               const std::string& targets_source);

// measure: the per-layer table; `table` is where the target table was written ("" if nowhere).
std::string format_measure_text(const std::string& file, const MeasureReport& report,
                                const std::string& table);
std::string format_measure_json(const std::string& file, const MeasureReport& report,
                                const std::string& table);
// The target table measure writes (parse_routing_targets reads it back).
std::string format_measured_table(const std::string& file, const MeasureReport& report);

// tiles: per-rank tile counts for pad position end and start. `source` names the file or says
// the rows were laid out from options.
std::string format_tiles_text(const std::string& source, const TilesReport& report);
std::string format_tiles_json(const std::string& source, const TilesReport& report);

// A picture of each layer's max/mean (achieved; targets when given) and of each expert-parallel
// rank's load relative to the mean rank load, with the ragged buffer's line.
std::string routing_load_svg(const std::string& title, const std::vector<LoadStats>& layers,
                             const std::vector<double>& targets);

}  // namespace rtb::payload
