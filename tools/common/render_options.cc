#include "common/render_options.h"

#include <cstdlib>
#include <utility>

#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/k8s/jobset.h"
#include "rtb/payload/routing.h"

namespace rtb::tool {

void add_render_options(CLI::App& app, RenderKnobs& knobs, NameOption name) {
  rtb::bench::RenderOptions& options = knobs.options;
  app.add_option("DRYRUN", knobs.input,
                 "DRY_RUN output of the launcher, or - for stdin (default: the file named by "
                 "LAUNCH_RENDER, the seed's variable; an argument wins)");
  app.add_flag("--demo", knobs.demo, "Use the embedded example DRY_RUN (no DRYRUN argument)");
  CLI::Option* name_option =
      app.add_option("--name", options.name, "Name of the bench JobSet (a DNS label)");
  if (name == NameOption::kRequired) {
    name_option->required();
  } else if (name == NameOption::kOptional) {
    name_option->capture_default_str();
  }
  add_plain_options(
      app,
      {{"--namespace", &options.namespace_name, "Namespace of the bench JobSet"},
       {"--image", &options.image, "Image of the client container"},
       {"--output-prefix", &options.output_prefix,
        "Set --maxtext_output_directory to <PREFIX>/<NAME>"},
       {"--maxtext-flag", &options.maxtext_flags,
        "KEY=VALUE: append to MAXTEXT_EXTRA_FLAGS (replace where the key stands)"},
       {"--maxtext-replace", &options.maxtext_replace,
        "KEY=VALUE: replace a MAXTEXT_EXTRA_FLAGS item in place; error if absent"},
       {"--libtpu-flag", &options.libtpu_flags,
        "--xla_...=V: write to the client's LIBTPU_INIT_ARGS, the pathways-proxy args and the "
        "pathways-worker env (use --libtpu-flag=--xla_...=V)"},
       {"--trainer-arg", &options.trainer_args, "--k=v, --k or --no-k: set in the trainer argv"},
       {"--trainer-arg-remove", &options.trainer_args_removed, "--k: remove from the trainer argv"},
       {"--orch-arg", &options.orchestrator_args,
        "--k=v: set in the orchestrator argv the driver reads (ORCH_ARGV)"},
       {"--trainer-slice", &options.trainer_slice,
        "TYPE:TOPOLOGY, e.g. tpu7x:4x4x4: change every field that encodes the trainer slice; "
        "FSDP fills the devices"},
       {"--logps-chunk", &knobs.logps_chunk,
        "compute_logps_chunk_size, wherever the e2e passes it"},
       {"--profile-window", &knobs.profile_window, "START:COUNT: profile these fwd_bwd calls"}});
  app.add_option("--steps", options.driver.steps, "Optimizer steps to time")->capture_default_str();
  app.add_option("--micro-steps", options.driver.micro_steps, "fwd_bwd calls per optimizer step")
      ->capture_default_str();
  app.add_option("--seed", options.driver.seed, "Seed of the synthetic payload")
      ->capture_default_str();
  app.add_option(
      "--routing-targets", knobs.routing_file,
      "Per-layer max/mean routing targets (file; default: the built-in Qwen3.5-397B table)");
  app.add_option("--routing-scale", options.driver.routing_scale, "Stretch targets: 1 + S (t - 1)")
      ->capture_default_str();
  app.add_option("--logp-gates", knobs.logp_gates, "on|off: the GRPO log-prob gates")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--advantages", options.driver.advantages, "random|zero")
      ->check(CLI::IsMember({"random", "zero"}))
      ->capture_default_str();
  app.add_option("--pad-position", options.driver.pad_position,
                 "end|start: where rows keep padding (default: not written; the driver follows "
                 "the e2e orchestrator's packing)")
      ->check(CLI::IsMember({"end", "start"}));
  app.add_option("--pad-align", options.driver.pad_align,
                 "Padding-first shift granularity in tokens, a multiple of 64 (default: not "
                 "written; the driver follows the e2e orchestrator's packing)");
  app.add_option("--stage-boundary", options.driver.stage_boundary,
                 "auto|on|off: the staged step boundary (auto follows the e2e orchestrator's "
                 "PIPELINE_STEP_BOUNDARY / STAGE_NEXT_MICROBATCH)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--routing", options.driver.routing,
                 "auto|on|off: the driver's ROUTING setting (default: not written; the driver's "
                 "auto applies)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_flag("--allow-fallbacks", options.driver.allow_fallbacks,
               "Write ALLOW_FALLBACKS=1 into the driver's settings (default: not written)");
  app.add_option("--logps-pass", options.driver.logps_pass,
                 "auto|on|off: the driver's LOGPS_PASS setting (default: not written; the "
                 "driver's auto applies)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  add_plain_options(
      app,
      {{"--driver-env", &knobs.driver_env, "K=V: an extra environment variable for the driver"},
       {"--driver", &knobs.driver_file, "Use this bench_driver.py instead of the embedded one"}});
  add_role_main_options(app, options.mains);
}

void finish_render_options(RenderKnobs& knobs, std::string_view embedded_driver) {
  rtb::bench::RenderOptions& options = knobs.options;
  options.driver_source = driver_source(knobs, embedded_driver);
  options.tool_version = RTB_VERSION;
  options.logps_chunk = knobs.logps_chunk;
  options.driver.logp_gates = knobs.logp_gates == "on";
  // The driver refuses these at pod start; refuse them before a bench is written.
  try {
    rtb::payload::check_routing_scale(options.driver.routing_scale);
  } catch (const Error&) {  // the payload's rule, in the words of this option
    fail("--routing-scale {}: must be a finite number >= 0", options.driver.routing_scale);
  }
  if (!knobs.profile_window.empty())
    options.profile_window = bench::parse_profile_window(knobs.profile_window);
  for (const std::string& item : knobs.driver_env) {
    options.driver.extra_env.push_back(bench::parse_driver_env(item));
  }
  if (!knobs.routing_file.empty()) {
    options.driver.routing_targets = rtb::payload::parse_routing_targets(
        read_file(knobs.routing_file), display_name(knobs.routing_file));
    options.driver.routing_targets_source = knobs.routing_file;
  }
}

std::string driver_source(const RenderKnobs& knobs, std::string_view embedded_driver) {
  return knobs.driver_file ? read_file(*knobs.driver_file) : std::string(embedded_driver);
}

k8s::DryRun load_dryrun(const RenderKnobs& knobs, std::string_view demo_text) {
  std::string input =
      bench::dryrun_input(knobs.input, knobs.demo, std::getenv(bench::kLaunchRenderEnv));
  if (knobs.demo == !input.empty())
    fail("give either a DRYRUN file (or -, or LAUNCH_RENDER) or --demo");
  std::string source = knobs.demo ? "<embedded demo DRY_RUN>" : display_name(input);
  std::string text = knobs.demo ? std::string(demo_text) : read_file(input);
  return rtb::k8s::parse_dryrun(text, source, trainer_and_orchestrator_chunks(knobs.options.mains));
}

}  // namespace rtb::tool
