// aot-check: will this bench variant fit in HBM? Renders the bench from a DRY_RUN with the
// render-bench knobs and writes (--print) or runs (--run) MaxText's trainer-engine AOT compile of
// that trainer for its slice, then summarizes the compile's memory analysis (see README.md).
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "common/embedded.h"
#include "common/mains.h"
#include "common/render_options.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/aot.h"
#include "rtb/bench/arms.h"
#include "rtb/bench/render.h"
#include "rtb/logs/memlog_format.h"

namespace rtb::tool {
namespace {

constexpr const char* kExamples =
    R"(  aot-check dryrun.txt > aot.sh && bash aot.sh      # on a CPU host with MaxText and libtpu
  aot-check dryrun.txt --libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=65536 \
      --maxtext-flag ragged_buffer_factor=2.75 --logps-chunk 4096 --print -o aot-vmem.sh
  aot-check dryrun.txt --trainer-slice tpu7x:4x4x4 --run    # compile here, then summarize
  aot-check dryrun.txt --json | jq '.keys[] | select(.from == "MAXTEXT_EXTRA_FLAGS")'
  aot-check --demo --explain -o /dev/null                   # where every compile key comes from
  aot-check dryrun.txt --arm base --arm blk:--maxtext-flag=sa_block_q=2048 -o aot-arms.sh
  aot-check dryrun.txt --arm base --arm blk:--maxtext-flag=sa_block_q=2048 --run  # per arm
)";

}  // namespace

int aot_check_main(int argc, char** argv) {
  Tool tool(
      {"aot-check",
       "Checks whether a bench variant fits in HBM before anyone waits for a TPU slice: renders "
       "the bench from the DRY_RUN with the same knobs as render-bench, and writes (--print, the "
       "default) or runs (--run) MaxText's trainer-engine AOT compile "
       "(maxtext.training_engine.maxtext_engine_compile) with that trainer's MaxText keys, mesh, "
       "micro-batch, GRPO loss, log-prob chunk and libtpu flags, for compile_topology = the "
       "trainer slice. --run needs a Python with MaxText, Tunix and libtpu; it then summarizes "
       "the log as aot-summarize does (exit 0 fits, 1 does not fit, 2 error). Log-probs compile "
       "in chunks of 512 tokens when the render sets no chunk, as the seed did; "
       "AOT_LOGPS_CHUNK_SIZE=N changes that default (empty: 512), and --logps-chunk, which sets "
       "the render's, overrides both.",
       kExamples});
  CLI::App& app = tool.app();
  RenderKnobs knobs;
  knobs.options.name = "aot-bench";
  bench::AotOptions aot;
  std::string output = "-";
  bool print = false, run = false, json = false, explain = false;
  std::optional<double> hbm_gib;

  add_render_options(app, knobs, NameOption::kOptional);
  app.add_flag("--print", print, "Write the compile as a bash script (the default)");
  app.add_flag("--run", run, "Run the compile here, then summarize its log");
  add_output_option(app, output,
                    "Output file: the script (--print) or the summary (--run); default - (stdout)");
  app.add_option("--python", aot.python, "The Python with MaxText, Tunix and libtpu")
      ->capture_default_str();
  add_plain_options(
      app, {{"--base-config", &aot.base_config,
             "MaxText config file (default: the base.yml of the MaxText that Python imports)"},
            {"--log", &aot.log,
             "The compile's log (default: logs/aot-bench-<UTC time>.log, made when it runs)"},
            {"--compile-key", &aot.compile_keys,
             "KEY=VALUE: one more MaxText key for the compile, passed last "
             "(e.g. compile_engine_router_replay=true)"}});
  app.add_option("--hbm-gib", hbm_gib,
                 "--run: HBM per device to judge against (default: the trainer slice's chip)")
      ->check(CLI::PositiveNumber);
  add_json_flag(app, json,
                "--print: the plan as JSON instead of the script; --run: the summary as JSON; "
                "with --arm, one of each per arm");
  app.add_flag("--explain", explain, "List every compile key and where it comes from (stderr)");

  return tool.run(argc, argv, [&] {
    if (print && run) fail("give --print or --run, not both");
    finish_render_options(knobs, embedded::bench_driver(), embedded::bench_driver_packed());
    rtb::k8s::DryRun dryrun = load_dryrun(knobs, embedded::demo_dryrun());
    tool.report_diagnostics(dryrun.diagnostics);
    aot.default_logps_chunk =
        rtb::bench::aot_logps_chunk_default(std::getenv("AOT_LOGPS_CHUNK_SIZE"));
    aot.source = dryrun.source;
    aot.tool_version = RTB_VERSION;
    if (run && !aot.log) aot.log = bench::aot_log_path(std::chrono::system_clock::now());
    if (std::optional<bench::ArmPlan> arms = arm_plan(knobs)) {
      // Each arm's program, planned (and so checked) as the program of a bench of one arm.
      bench::ArmsRender rendered = bench::render_arms(dryrun, *arms, knobs.options);
      std::vector<bench::AotArm> planned;
      for (std::size_t i = 0; i < arms->arms.size(); ++i) {
        const std::string& arm = arms->arms[i].name;
        YAML::Node program;
        if (arms->mode == bench::ArmMode::kJobSets) {
          program = rendered.jobsets[i];
        } else {
          k8s::Document doc(rendered.jobsets[0], 1);
          for (bench::ArmProgram& p : bench::arm_programs(doc, dryrun.source)) {
            if (p.arm == arm) program = p.bench;
          }
        }
        bench::AotOptions arm_aot = aot;
        // One log per arm, whether this run compiles or a printed script does.
        if (aot.log) arm_aot.log = bench::aot_arm_log_path(*aot.log, arm);
        bench::AotPlan plan = bench::plan_aot(program, arm_aot);
        for (Diagnostic d : plan.diagnostics) {
          d.message = fmt::format("arm {}: {}", arm, d.message);
          tool.report_diagnostics({d});
        }
        if (explain)
          tool.print_to_stderr(fmt::format("arm {}:\n", arm) + bench::explain_aot_keys(plan));
        planned.push_back({arm, std::move(plan), std::move(arm_aot)});
      }
      if (!run) {
        if (json) {
          tool.write_report(output, bench::aot_arms_plan_json(planned));
        } else {
          std::vector<std::pair<std::string, std::string>> scripts;
          for (const bench::AotArm& arm : planned)
            scripts.emplace_back(arm.name, bench::aot_script(arm.plan, arm.options));
          write_output(output, bench::aot_arms_script(scripts));
        }
        return Outcome::kPass;
      }
      bench::check_aot_python(aot);
      std::vector<bench::AotArmResult> results;
      for (const bench::AotArm& arm : planned) {
        // Announced as the arms script announces it: the compile's output follows on stderr.
        tool.print_to_stderr(fmt::format("aot-check: arm {}\n", arm.name));
        spdlog::info("arm {}: compiling for {}; log {}", arm.name, arm.plan.compile_topology,
                     *arm.options.log);
        try {
          results.push_back({arm.name, bench::run_aot(arm.plan, arm.options, hbm_gib)});
        } catch (const Error& e) {
          throw Error(e.file(), e.line(), fmt::format("arm {}: {}", arm.name, e.message()));
        }
        std::vector<Diagnostic> diagnostics = results.back().summary.logs.front().diagnostics;
        for (Diagnostic& d : diagnostics)
          d.message = fmt::format("arm {}: {}", arm.name, d.message);
        tool.report_diagnostics(diagnostics);
      }
      tool.write_report(
          output, json ? bench::aot_arms_run_json(results) : bench::aot_arms_run_text(results));
      return bench::aot_arms_outcome(results);
    }
    bench::RenderResult rendered = bench::render_bench(std::move(dryrun), knobs.options);
    // The render is only the compile's input here: its warnings are context, said at info (-v),
    // and its notes (render-bench --explain's) are not this tool's to say.
    std::vector<Diagnostic> render_context;
    for (const Diagnostic& d : rendered.diagnostics) {
      if (d.severity == Severity::kWarning)
        render_context.push_back({Severity::kNote, d.where, d.message});
    }
    tool.report_diagnostics(render_context);

    bench::AotPlan plan = bench::plan_aot(rendered.bench, aot);
    tool.report_diagnostics(plan.diagnostics);
    if (explain) tool.print_to_stderr(bench::explain_aot_keys(plan));

    if (!run) {
      if (json) {
        tool.write_report(output, bench::aot_plan_json(plan, aot));
      } else {
        write_output(output, bench::aot_script(plan, aot));  // to be run: real values
      }
      return Outcome::kPass;
    }

    // --run: MaxText must be importable here; say so in one line rather than fail mid-script.
    bench::check_aot_python(aot);
    spdlog::info("compiling for {}; log {}", plan.compile_topology, *aot.log);
    logs::Summary summary = bench::run_aot(plan, aot, hbm_gib);
    tool.report_diagnostics(summary.logs.front().diagnostics);
    tool.write_report(
        output, json ? logs::format_summary_json(summary) : logs::format_summary_table(summary));
    return summary.outcome();
  });
}

}  // namespace rtb::tool
