// render-bench: turns the trainer JobSet of a launcher's DRY_RUN output into a standalone bench
// JobSet that times the real trainer program on one slice (see README.md).
#include <spdlog/spdlog.h>

#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "common/tool.h"
#include "rtb/dryrun.h"
#include "rtb/error.h"
#include "rtb/io.h"
#include "rtb/jobset.h"
#include "rtb/render.h"
#include "rtb/routing.h"

namespace rtb::embedded {
std::string_view bench_driver();
std::string_view demo_dryrun();
}  // namespace rtb::embedded

namespace {

constexpr const char* kExamples = R"(  render-bench dryrun.txt --name abtest-bench -o bench.yaml
  render-bench dryrun.txt --name ab-fp8 --maxtext-flag ragged_buffer_factor=2.75 \
      --libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=65536 --trainer-slice tpu7x:4x4x4 \
      --steps 5 --micro-steps 9 --explain -o ab-fp8.yaml && kubectl apply -f ab-fp8.yaml
  DRY_RUN=true bash recipe.sh start | render-bench - --name abtest-bench
  render-bench --demo --name abtest-bench      # the embedded example DRY_RUN
)";

std::pair<int, int> parse_window(const std::string& text) {
  std::size_t colon = text.find(':');
  int start = -1, count = -1;
  if (colon != std::string::npos) {
    auto a = std::from_chars(text.data(), text.data() + colon, start);
    auto b = std::from_chars(text.data() + colon + 1, text.data() + text.size(), count);
    if (a.ec == std::errc() && a.ptr == text.data() + colon && b.ec == std::errc() &&
        b.ptr == text.data() + text.size()) {
      return {start, count};
    }
  }
  rtb::fail("--profile-window {}: expected START:COUNT (fwd_bwd calls)", text);
}

std::pair<std::string, std::string> parse_env(const std::string& text) {
  std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) rtb::fail("--driver-env {}: expected KEY=VALUE", text);
  return {text.substr(0, eq), text.substr(eq + 1)};
}

}  // namespace

int main(int argc, char** argv) {
  rtb::tool::Tool tool(
      {"render-bench",
       "Turns the trainer JobSet of a launcher's DRY_RUN output into a standalone "
       "bench JobSet: the same scheduling fields, Pathways containers, flags and mesh; "
       "only names, maxRestarts and the client command (which runs the bench driver) "
       "change, plus what the knobs below ask for.",
       kExamples});
  CLI::App& app = tool.app();
  rtb::RenderOptions options;
  std::string input, output = "-", routing_file, profile_window, logp_gates = "on";
  std::vector<std::string> driver_env;
  std::optional<std::string> driver_file;
  bool demo = false, explain = false, summary = false;
  std::optional<int> logps_chunk;

  app.add_option("DRYRUN", input, "DRY_RUN output of the launcher, or - for stdin");
  app.add_flag("--demo", demo, "Render the embedded example DRY_RUN (no DRYRUN argument)");
  app.add_option("--name", options.name, "Name of the bench JobSet (a DNS label)")->required();
  app.add_option("-o,--output", output, "Output file (default: - for stdout)");
  app.add_option("--namespace", options.namespace_name, "Namespace of the bench JobSet");
  app.add_option("--image", options.image, "Image of the client container");
  app.add_option("--output-prefix", options.output_prefix,
                 "Set --maxtext_output_directory to <PREFIX>/<NAME>");
  app.add_option("--maxtext-flag", options.maxtext_flags,
                 "KEY=VALUE: append to MAXTEXT_EXTRA_FLAGS (replace where the key stands)");
  app.add_option("--maxtext-replace", options.maxtext_replace,
                 "KEY=VALUE: replace a MAXTEXT_EXTRA_FLAGS item in place; error if absent");
  app.add_option("--libtpu-flag", options.libtpu_flags,
                 "--xla_...=V: write to the client's LIBTPU_INIT_ARGS, the pathways-proxy args and "
                 "the pathways-worker env (use --libtpu-flag=--xla_...=V)");
  app.add_option("--trainer-arg", options.trainer_args,
                 "--k=v, --k or --no-k: set in the trainer argv");
  app.add_option("--trainer-arg-remove", options.trainer_args_removed,
                 "--k: remove from the trainer argv");
  app.add_option("--orch-arg", options.orchestrator_args,
                 "--k=v: set in the orchestrator argv the driver reads (ORCH_ARGV)");
  app.add_option("--trainer-slice", options.trainer_slice,
                 "TYPE:TOPOLOGY, e.g. tpu7x:4x4x4: change every field that encodes the trainer "
                 "slice; FSDP fills the devices");
  app.add_option("--logps-chunk", logps_chunk,
                 "compute_logps_chunk_size, wherever the e2e passes it");
  app.add_option("--profile-window", profile_window, "START:COUNT: profile these fwd_bwd calls");
  app.add_option("--steps", options.driver.steps, "Optimizer steps to time")->capture_default_str();
  app.add_option("--micro-steps", options.driver.micro_steps, "fwd_bwd calls per optimizer step")
      ->capture_default_str();
  app.add_option("--seed", options.driver.seed, "Seed of the synthetic payload")
      ->capture_default_str();
  app.add_option(
      "--routing-targets", routing_file,
      "Per-layer max/mean routing targets (file; default: the built-in Qwen3.5-397B table)");
  app.add_option("--routing-scale", options.driver.routing_scale, "Stretch targets: 1 + S (t - 1)")
      ->capture_default_str();
  app.add_option("--logp-gates", logp_gates, "on|off: the GRPO log-prob gates")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--advantages", options.driver.advantages, "random|zero")
      ->check(CLI::IsMember({"random", "zero"}))
      ->capture_default_str();
  app.add_option("--pad-position", options.driver.pad_position,
                 "end|start: where rows keep padding")
      ->check(CLI::IsMember({"end", "start"}))
      ->capture_default_str();
  app.add_option("--pad-align", options.driver.pad_align,
                 "Padding-first shift granularity (tokens)")
      ->capture_default_str();
  app.add_option("--driver-env", driver_env, "K=V: an extra environment variable for the driver");
  app.add_option("--driver", driver_file, "Use this bench_driver.py instead of the embedded one");
  app.add_option("--trainer-main", options.mains.trainer, "--process_main of the trainer")
      ->capture_default_str();
  app.add_option("--orch-main", options.mains.orchestrator, "--process_main of the orchestrator")
      ->capture_default_str();
  app.add_option("--rollout-main", options.mains.rollout, "--process_main of the rollouts")
      ->capture_default_str();
  app.add_flag("--explain", explain, "Print every path each knob changed (stderr)");
  app.add_flag("--summary", summary, "Print a one-line summary of what changed (stderr)");

  return tool.run(argc, argv, [&]() -> int {
    if (demo == !input.empty()) rtb::fail("give either a DRYRUN file (or -) or --demo");
    std::string source = demo ? "<embedded demo DRY_RUN>" : rtb::display_name(input);
    std::string text = demo ? std::string(rtb::embedded::demo_dryrun()) : rtb::read_file(input);
    options.driver_source =
        driver_file ? rtb::read_file(*driver_file) : std::string(rtb::embedded::bench_driver());
    options.tool_version = RTB_VERSION;
    options.logps_chunk = logps_chunk;
    options.driver.logp_gates = logp_gates == "on";
    if (!profile_window.empty()) options.profile_window = parse_window(profile_window);
    for (const std::string& item : driver_env) options.driver.extra_env.push_back(parse_env(item));
    if (!routing_file.empty()) {
      options.driver.routing_targets =
          rtb::parse_routing_targets(rtb::read_file(routing_file), rtb::display_name(routing_file));
      options.driver.routing_targets_source = routing_file;
    }

    rtb::DryRun dryrun =
        rtb::parse_dryrun(text, source, rtb::trainer_and_orchestrator_chunks(options.mains));
    // Input quirks (a repeated key in some document) do not change the bench: -v shows them.
    for (const std::string& warning : dryrun.warnings) spdlog::info("{}", warning);
    rtb::RenderResult result = rtb::render_bench(dryrun, options);
    for (const std::string& warning : result.warnings) spdlog::warn("{}", warning);
    rtb::write_output(output, result.yaml);

    if (explain) {
      for (const rtb::Change& change : result.changes) {
        std::fprintf(stderr, "%s: %s: %s -> %s\n", change.knob.c_str(), change.path.c_str(),
                     change.old_value.empty() ? "(absent)" : change.old_value.c_str(),
                     change.new_value.empty() ? "(removed)" : change.new_value.c_str());
      }
    }
    if (summary || demo) {
      std::fprintf(stderr, "%s\n", rtb::summarize_changes(result).c_str());
    }
    return rtb::tool::kExitOk;
  });
}
