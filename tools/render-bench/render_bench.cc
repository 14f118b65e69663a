// render-bench: turns the trainer JobSet of a launcher's DRY_RUN output into a standalone bench
// JobSet that times the real trainer program on one slice (see README.md).
#include <spdlog/spdlog.h>

#include <optional>
#include <string>
#include <utility>

#include "common/embedded.h"
#include "common/mains.h"
#include "common/render_options.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/arms.h"
#include "rtb/bench/knobs.h"
#include "rtb/bench/render.h"
#include "rtb/k8s/dryrun.h"

namespace rtb::tool {
namespace {

constexpr const char* kExamples = R"(  render-bench dryrun.txt --name abtest-bench -o bench.yaml
  render-bench dryrun.txt --name ab-fp8 --maxtext-flag ragged_buffer_factor=2.75 \
      --libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=65536 --trainer-slice tpu7x:4x4x4 \
      --steps 5 --micro-steps 9 --explain -o ab-fp8.yaml && kubectl apply -f ab-fp8.yaml
  DRY_RUN=true bash recipe.sh start | render-bench - --name abtest-bench
  render-bench --demo --name abtest-bench      # the embedded example DRY_RUN
  render-bench dryrun.txt --name ab-x --preflight -o preflight.yaml && \
      kubectl apply -f preflight.yaml && kubectl logs -f job/ab-x-preflight
  render-bench dryrun.txt --name ab-x --preflight --numerics | kubectl apply -f -
  render-bench --print-driver > bench_driver.py   # the embedded bench driver
  render-bench --print-knobs | jq -r '.knobs[].option'   # every knob, for a sweep script
  render-bench dryrun.txt --name ab-pad --arm base --arm pad:--pad-position=start \
      --arm-repeats 4 --explain -o ab-pad.yaml   # same-pod A/B: base pad pad base base pad ...
)";

}  // namespace

int render_bench_main(int argc, char** argv) {
  Tool tool({"render-bench",
             "Turns the trainer JobSet of a launcher's DRY_RUN output into a standalone "
             "bench JobSet: the same scheduling fields, Pathways containers, flags and mesh; "
             "only names, maxRestarts and the client command (which runs the bench driver) "
             "change, plus what the knobs below ask for.",
             kExamples});
  CLI::App& app = tool.app();
  RenderKnobs knobs;
  std::string output = "-";
  bool explain = false, summary = false, preflight = false, numerics = false, print_driver = false,
       print_knobs = false;

  // --print-driver renders nothing, so --name is checked below rather than by CLI11.
  add_render_options(app, knobs, NameOption::kCheckedByCaller);
  add_output_option(app, output);
  app.add_flag("--explain", explain,
               "Print every path each knob changed, then what the bench keeps of the e2e's "
               "weights and profiler (stderr)");
  app.add_flag("--summary", summary, "Print a one-line summary of what changed (stderr)");
  CLI::Option* preflight_option = app.add_flag(
      "--preflight", preflight,
      "Write, instead of the bench, a one-pod CPU Job <NAME>-preflight that runs the driver's "
      "--preflight in the trainer image with the bench client's environment and settings");
  app.add_flag("--numerics", numerics,
               "With --preflight: the Job <NAME>-numerics runs the driver's --preflight "
               "--numerics instead (one fwd_bwd + update of a miniature model of the same family "
               "on CPU, checking that LOGP_GATES=off masks nothing and ADVANTAGES=random gives a "
               "gradient)")
      ->needs(preflight_option);
  app.add_flag("--print-driver", print_driver,
               "Write the bench driver (the embedded one, or --driver FILE) and exit")
      ->excludes(preflight_option);
  app.add_flag("--print-knobs", print_knobs,
               "Write the knob table as JSON (option, value, arity, help, driver setting) and "
               "exit: the list a sweep script can read")
      ->excludes(preflight_option);

  return tool.run(argc, argv, [&] {
    if (print_knobs) {
      if (!knobs.input.empty() || knobs.demo) fail("--print-knobs takes no DRYRUN or --demo");
      tool.write_report(output, bench::knobs_json());
      return Outcome::kPass;
    }
    if (print_driver) {
      if (!knobs.input.empty() || knobs.demo) fail("--print-driver takes no DRYRUN or --demo");
      write_output(output, driver_source(knobs, embedded::bench_driver()));
      return Outcome::kPass;
    }
    finish_render_options(knobs, embedded::bench_driver(), embedded::bench_driver_packed());
    if (knobs.options.name.empty()) fail("--name is required (the bench JobSet's name)");
    k8s::DryRun dryrun = load_dryrun(knobs, embedded::demo_dryrun());
    // Input quirks (a repeated key in some document) do not change the bench: -v shows them.
    tool.report_diagnostics(dryrun.diagnostics);
    if (std::optional<bench::ArmPlan> plan = arm_plan(knobs)) {
      if (preflight) fail("--arm renders a bench, not a --preflight Job");
      bench::ArmsRender arms = bench::render_arms(dryrun, *plan, knobs.options);
      std::vector<Diagnostic> diagnostics = arms.diagnostics;
      if (explain)
        std::erase_if(diagnostics,
                      [](const Diagnostic& d) { return d.severity == Severity::kNote; });
      tool.report_diagnostics(diagnostics);
      write_output(output, arms.yaml);
      if (explain) {
        std::string text = bench::explain_arms(*plan);
        // The changes of each arm's render.
        for (std::size_t i = 0; i < plan->arms.size(); ++i) {
          text += fmt::format("arm {}:\n", plan->arms[i].name);
          text += bench::explain_changes(arms.runs[i], tool.masker());
        }
        tool.print_to_stderr(text);
      }
      if (summary || knobs.demo) {
        for (std::size_t i = 0; i < arms.runs.size(); ++i) {
          tool.print_to_stderr(fmt::format("arm {}: {}\n", plan->arms[i].name,
                                           bench::summarize_changes(arms.runs[i])));
        }
      }
      return Outcome::kPass;
    }
    bench::RenderResult result;  // the bench, whose changes --explain and --summary describe
    std::string text;
    if (preflight) {
      bench::PreflightResult rendered = bench::render_preflight(
          dryrun, knobs.options,
          numerics ? bench::PreflightChecks::kNumerics : bench::PreflightChecks::kSetUp);
      result = std::move(rendered.bench);
      text = std::move(rendered.yaml);
    } else {
      result = bench::render_bench(std::move(dryrun), knobs.options);
      text = std::move(result.yaml);
    }
    // Each once: --explain lists the notes itself, so the log keeps only the warnings then.
    std::vector<Diagnostic> diagnostics = result.diagnostics;
    if (explain)
      std::erase_if(diagnostics, [](const Diagnostic& d) { return d.severity == Severity::kNote; });
    tool.report_diagnostics(diagnostics);
    write_output(output, text);  // to be run: real values (kubectl apply)

    if (explain) tool.print_to_stderr(bench::explain_changes(result, tool.masker()));
    if (summary || knobs.demo) tool.print_to_stderr(bench::summarize_changes(result) + "\n");
    return Outcome::kPass;
  });
}

}  // namespace rtb::tool
