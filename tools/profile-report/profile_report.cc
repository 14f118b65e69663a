// profile-report: reads a jax.profiler / XProf capture (XSpace) and reports per device and per
// step the busy and idle time, the time by category and the ops by self time; with two
// captures, what moved between them.
#include <spdlog/spdlog.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/mains.h"
#include "common/options.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/text.h"
#include "rtb/hlo/analysis.h"
#include "rtb/hlo/report.h"
#include "rtb/profile/compare.h"
#include "rtb/profile/report.h"
#include "rtb/profile/summary.h"
#include "rtb/profile/xspace.h"

namespace rtb::tool {
namespace {

constexpr const char* kExamples =
    R"(  profile-report bench_profile/plugins/profile/2026_12_04_10_00_00/host.xplane.pb
  profile-report bench_profile/plugins/profile/2026_12_04_10_00_00/   # every host of a capture
  profile-report capture.xplane.pb.gz --json -o profile.json --svg step.svg
  profile-report capture.xplane.pb --hlo module.after_optimizations.txt   # planned vs measured
  profile-report baseline.xplane.pb candidate.xplane.pb   # A/B: exit 1 if something moved
)";

}  // namespace

int profile_report_main(int argc, char** argv) {
  Tool tool(
      {"profile-report",
       "Reads a profiler capture (XSpace: *.xplane.pb as jax.profiler and XProf write it, or .gz "
       "of it; a directory is a multi-host capture, every *.xplane.pb[.gz] under it) and reports "
       "per device and per step: the step's length, busy time (any op running) and idle time, "
       "the self time by category (matmul, fusion and other compute, collectives, copies and "
       "host transfers; from the capture's hlo_category or hlo_op stats where it has them, else "
       "from op names) and the ops with the most self time. Steps are the driver's step "
       "annotations when the capture has them, else executions of the module with the most "
       "device time. With two captures A B it prints, per figure and per op, the change of its "
       "mean per step with its spread across the steps, largest first, and exits like diff: 0 "
       "nothing moved beyond its spread, 1 something did, 2 error. Files are memory-mapped "
       "(stdin and .gz go through a temporary file); memory stays bounded by the metadata.",
       kExamples});
  CLI::App& app = tool.app();
  std::vector<std::string> inputs;
  std::string output = "-";
  std::optional<std::string> svg_file;
  std::optional<std::size_t> svg_step;
  bool json = false;
  double min_change_percent = 1.0;
  std::optional<std::string> hlo_dump;
  double min_wait_us = 1.0;
  profile::ReportOptions report;

  add_one_or_two_inputs(app, inputs, "CAPTURE",
                        "*.xplane.pb, *.xplane.pb.gz or a directory of them (- for stdin); give "
                        "two for an A/B comparison");
  add_json_flag(app, json, "Print the JSON document instead of the text report");
  add_output_option(app, output, "Write the report here (default: - for stdout)");
  app.add_option("--svg", svg_file,
                 "Draw the timeline of one step of the first device to this SVG file");
  app.add_option("--svg-step", svg_step,
                 "Which step --svg draws: its index among the device's steps (default: the "
                 "longest)");
  app.add_option("--top", report.top, "How many ops to list per device")->capture_default_str();
  app.add_option("--hlo", hlo_dump,
                 "The scheduled HLO module of the capture (text dump or *.hlo.pb): measure, for "
                 "each async collective pair hlo-overlap judges, how long its done waited on "
                 "each device, beside the schedule's verdict, and the pairs the devices disagree "
                 "on");
  app.add_option("--min-wait-us", min_wait_us,
                 "--hlo: a pair is measured exposed when its done waits at least this long per "
                 "execution (microseconds)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--min-change-percent", min_change_percent,
                 "A/B: a figure moved only when its change also exceeds this percentage of its "
                 "mean in A")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));

  return tool.run(argc, argv, [&] {
    if (svg_file && inputs.size() == 2) fail("--svg draws one capture; give one CAPTURE");
    if (svg_step && !svg_file) fail("--svg-step needs --svg");
    if (hlo_dump && inputs.size() == 2) fail("--hlo measures one capture; give one CAPTURE");
    require_one_stdin(inputs, "the two captures");
    std::vector<profile::Summary> summaries;
    std::vector<profile::Capture> captures;
    captures.reserve(inputs.size());
    for (const std::string& input : inputs) {
      captures.emplace_back(input);
      profile::SummaryOptions options;
      options.hlo_op_names = hlo_dump.has_value();
      summaries.push_back(profile::summarize(captures.back(), options));
      for (const auto& file : captures.back().files()) {
        for (const std::string& error : file->errors()) {
          spdlog::warn("{}: the profiler recorded an error: {}", file->name(), error);
        }
      }
    }
    if (summaries.size() == 2) {
      profile::Comparison comparison =
          profile::compare(summaries[0], summaries[1], min_change_percent);
      tool.write_report(output, json ? profile::format_compare_json(comparison, report.top)
                                     : profile::format_compare_text(comparison, report.top));
      return comparison.outcome();
    }
    std::optional<profile::Overlap> overlap;
    if (hlo_dump) {
      hlo::Options options;
      hlo::Analysis analysis = hlo::analyze_file(*hlo_dump, options);
      tool.report_diagnostics(hlo::diagnostics_of(analysis));
      overlap = profile::measure_overlap(summaries[0], analysis, min_wait_us * 1e6);
    }
    const profile::Overlap* measured = overlap ? &*overlap : nullptr;
    std::string svg;
    if (svg_file) svg = profile::render_timeline_svg(captures[0], summaries[0], svg_step);
    tool.write_report(output, json ? profile::format_json(summaries[0], report, measured)
                                   : profile::format_text(summaries[0], report, measured));
    if (svg_file) tool.write_report(*svg_file, svg);
    return Outcome::kPass;
  });
}

}  // namespace rtb::tool
