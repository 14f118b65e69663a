// bench-report: step times, micro-batch timelines, A/B verdicts with noise and numerics gates
// from bench driver logs and e2e orchestrator logs (see README.md).
#include <spdlog/spdlog.h>

#include <optional>
#include <string>
#include <vector>

#include "common/mains.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/logs/arms.h"
#include "rtb/logs/gates.h"
#include "rtb/logs/report.h"
#include "rtb/logs/report_json.h"
#include "rtb/logs/report_svg.h"
#include "rtb/logs/report_text.h"
#include "rtb/logs/steplog.h"

namespace rtb::tool {
namespace {

constexpr const char* kExamples = R"(  bench-report ctl.log variant.log
  bench-report ctl.log variant.log --steps 1-4 --control-pair ctl.log ctl-again.log
  bench-report ctl.log profiled.log --include-profiled
  kubectl logs job/ab-var-client --prefix | bench-report ctl.log - --fail-if-slower 0.5
  bench-report ctl.log variant.log --svg timeline.svg --json -o report.json
  bench-report --numerics ref1.log ref2.log variant.log --limit grad_norm=1e-3
  bench-report e2e-orchestrator.log --microbatches 1-9
  bench-report maxtext-before.log maxtext-after.log --include-outliers
  bench-report tunix-grpo-before.log tunix-grpo-after.log
  bench-report ctl.log variant.log --require-no-drops
  bench-report unstaged.log staged.log --require-same-setup
  bench-report --list-gates
  kubectl logs job/ab-pad-client | bench-report --arms -   # a same-pod A/B (render-bench --arm)
)";

}  // namespace

int bench_report_main(int argc, char** argv) {
  Tool tool(
      {"bench-report",
       "Reads bench driver, e2e orchestrator, MaxText and Tunix trainer logs by these lines, "
       "with any line prefix: " +
           logs::steplog::line_format_list() +
           "; and reports seconds per optimizer step (a Tunix log without step times: the "
           "intervals between its steps' log timestamps, host side), the regular micro-batch "
           "time, tokens/s/chip (padded and real) and the trainer's micro-batch timeline per run; "
           "outlier steps are named and left out; micro-batch times timed differently (device vs "
           "dispatch) are not compared, nor log-timestamp step times with others; each run "
           "against the first (the control) with a seeded bootstrap interval and a verdict, and "
           "any set-up difference (staging, replays, weights, ...) named beside it; and the "
           "numerics gates of a variant against two references. Exit 1 when a gate fails or "
           "--fail-if-slower, --require-no-drops or --require-same-setup trips.",
       kExamples});
  CLI::App& app = tool.app();
  std::vector<std::string> runs, control_pair, numerics, limits, metrics;
  std::string steps, microbatches, output = "-", svg_file;
  std::optional<std::int64_t> svg_step;
  std::optional<double> fail_if_slower;
  bool json = false, show_gates = false, arms = false;
  logs::report::Options options;

  app.add_option("RUN", runs, "Logs, or - for stdin; the first is the control");
  app.add_option("--steps", steps,
                 "A-B, A- or A: the optimizer steps to use, as logged (the bench driver counts "
                 "from 0, older drivers from 1; --steps 1-4 is the seed's 'mean of steps 1-4' of "
                 "a 5-step run). Default: every logged step but the first, which compiles");
  app.add_flag("--include-profiled", options.include_profiled,
               "Keep profiled steps (BENCH_STEP \"profiled\": true) in the means and medians "
               "(default: left out, with a note)");
  auto* include_outliers = app.add_flag(
      "--include-outliers", options.include_outliers,
      "Keep outlier steps (slower than --outlier-factor x the median step: checkpoint saves, "
      "recompiles, the profiler) in the means and comparisons (default: named and left out)");
  // The default's name, still accepted (scripts written before issue 28 pass it).
  const std::string exclude_outliers_help =
      "Leave outlier steps out of the means and comparisons, naming them: the default";
  app.add_flag("--exclude-outliers", exclude_outliers_help)->excludes(include_outliers);
  app.add_option("--outlier-factor", options.outlier_factor,
                 "K > 1: a selected step slower than K x the median of the selected steps is an "
                 "outlier")
      ->capture_default_str();
  app.add_flag("--require-no-drops", options.require_no_drops,
               "Exit 1 when a run dropped tokens or its log cannot show it dropped none");
  app.add_flag("--require-same-setup", options.require_same_setup,
               "Exit 1 when two compared arms differ in set-up (staging, replays, weights, update "
               "path, log-prob pass, micro-batch timing, shape); exit 2 when there is no pair or a "
               "set-up is not logged");
  app.add_option("--microbatches", microbatches,
                 "A-B or A-: micro-batches of a step (1-based) for the regular micro-batch time "
                 "(default 3-last, without a short final micro-batch (final_rows < rows), as the "
                 "driver's median)");
  add_fixed_count_option(app, "--control-pair", control_pair, 2,
                         "A1 A2: two control runs whose difference is the A/A noise floor");
  add_fixed_count_option(
      app, "--numerics", numerics, 3,
      "REF1 REF2 VARIANT: gate the variant's per-step metrics against two references");
  add_repeatable_option(app, "--limit", limits, "GATE=VALUE or GATE=off: a numerics gate's limit");
  add_repeatable_option(app, "--metric", metrics, "GATE=KEY: the metric a numerics gate reads");
  app.add_flag("--list-gates", show_gates, "Print the numerics gates and their defaults");
  app.add_option("--fail-if-slower", fail_if_slower,
                 "PCT: exit 1 when a run is significantly slower than the control by more than "
                 "PCT percent (s/step or micro-batch)");
  app.add_option("--svg", svg_file, "Write one step's micro-batch timeline per run to FILE");
  app.add_option("--svg-step", svg_step,
                 "N: the step to draw, as logged (from 0; default: each run's last selected step "
                 "with timing)");
  app.add_flag("--arms", arms,
               "Each RUN is one pod's log of a same-pod A/B (render-bench --arm): runs keyed by "
               "(arm, run, step), each arm against the control by pairs in run order, with an "
               "interval over the pairs and the verdict; with several pods, each arm's mean "
               "across pods (the reference); exit 1 when a run failed");
  add_json_flag(app, json,
                "Machine-readable output (schema rtb.bench-report/1; with --arms "
                "rtb.bench-report.arms/1)");
  add_output_option(app, output);
  add_bootstrap_options(app, options.bootstrap);

  return tool.run(argc, argv, [&] {
    logs::report::Inputs inputs;
    for (const std::string& text : limits) logs::apply_gate_limit(inputs.gates, text);
    for (const std::string& text : metrics) logs::apply_gate_metric(inputs.gates, text);
    if (show_gates) {
      tool.write_report(output, logs::format_gate_list(inputs.gates));
      return Outcome::kPass;
    }
    if (runs.empty() && numerics.empty()) {
      fail("give at least one RUN log, or --numerics REF1 REF2 VARIANT (see --help)");
    }
    if (!steps.empty()) options.steps = logs::report::parse_range(steps, "--steps");
    if (!microbatches.empty()) {
      options.microbatches = logs::report::parse_range(microbatches, "--microbatches");
      options.microbatches_given = true;
    }
    if (fail_if_slower) {
      if (!(*fail_if_slower >= 0)) fail("--fail-if-slower {}: must be >= 0", *fail_if_slower);
      if (runs.size() < 2) fail("--fail-if-slower needs a control and at least one run");
      options.fail_if_slower_pct = fail_if_slower;
    }
    if (!svg_file.empty() && runs.empty()) fail("--svg needs at least one RUN log");
    if (svg_step && *svg_step < 0) fail("--svg-step {}: must be a step number >= 0", *svg_step);
    if (svg_file == "-" && output == "-") {
      fail("--svg - and the report would both go to stdout: give -o FILE for the report");
    }
    options.validate();
    if (arms) {
      if (!control_pair.empty() || !numerics.empty() || !svg_file.empty() || fail_if_slower ||
          options.require_no_drops || options.require_same_setup)
        fail(
            "--arms compares the arms inside each pod: drop --control-pair, --numerics, --svg, "
            "--fail-if-slower, --require-no-drops and --require-same-setup");
      std::vector<logs::arms::PodReport> pods;
      for (const std::string& path : runs) {
        pods.push_back(logs::arms::analyze_pod(logs::arms::parse_pod_log(path), options));
        tool.report_diagnostics(pods.back().diagnostics);
      }
      tool.write_report(
          output, json ? logs::arms::format_arms_json(pods) : logs::arms::format_arms_text(pods));
      for (const logs::arms::PodReport& pod : pods) {
        for (const std::string& line : pod.failed_runs)
          spdlog::error("{}: failed run: {}", pod.source, line);
      }
      return logs::arms::outcome_of(pods);
    }

    logs::steplog::RunLogCache run_logs;
    for (const std::string& path : runs) inputs.runs.push_back(run_logs.get(path));
    if (!control_pair.empty()) {
      inputs.control_pair.emplace(run_logs.get(control_pair[0]), run_logs.get(control_pair[1]));
    }
    for (const std::string& path : numerics) inputs.numerics.push_back(run_logs.get(path));

    logs::report::Report report = logs::report::build_report(inputs, options);
    tool.report_diagnostics(report.diagnostics);

    if (!svg_file.empty()) {
      tool.write_report(svg_file, logs::report::timeline_svg(inputs.runs, report, svg_step));
    }
    tool.write_report(output,
                      json ? logs::report::format_json(report) : logs::report::format_text(report));
    for (const std::string& line : report.slower_than_allowed) spdlog::error("{}", line);
    for (const std::string& line : report.drops_not_ruled_out) spdlog::error("{}", line);
    for (const std::string& line : report.setups_differ) spdlog::error("{}", line);
    if (report.numerics && !report.numerics->result.pass) {
      spdlog::error("numerics: a gate failed");
    }
    return report.outcome();
  });
}

}  // namespace rtb::tool
