#include "common/render_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <utility>

#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/driver_settings.h"
#include "rtb/k8s/jobset.h"
#include "rtb/payload/routing.h"

namespace rtb::tool {
namespace {

using bench::DriverSetting;
using bench::SettingKind;

// The help of a setting's option: its meaning in the table, and its default when it has one.
std::string setting_help(const DriverSetting& setting) {
  if (setting.default_value == "-") return setting.meaning;
  return fmt::format("{} (default: {})", setting.meaning, setting.default_value);
}

// What --help shows for the value; a choice as TEXT:{a,b}, the form the bash completions read
// the values from (cmake/bash-completion.cmake).
std::string value_name(const DriverSetting& setting) {
  switch (setting.type) {
    case SettingKind::kInt:
    case SettingKind::kPadAlign:
      return "INT";
    case SettingKind::kFloat:
      return "FLOAT";
    case SettingKind::kChoice:
      return fmt::format("TEXT:{{{}}}", fmt::join(setting.choices, ","));
    default:
      return "TEXT";
  }
}

// Declares the option of each setting of the table that has one. --name and --profile-window are
// declared with the other options; --routing-targets reads its targets from a FILE (the driver
// takes them inline), and --allow-fallbacks is a flag.
void add_driver_setting_options(CLI::App& app, RenderKnobs& knobs) {
  for (const DriverSetting& setting : bench::driver_settings()) {
    if (!setting.has_option() || setting.option == "--name" ||
        setting.option == "--profile-window") {
      continue;
    }
    if (setting.option == "--routing-targets") {
      app.add_option(
          setting.option, knobs.routing_file,
          "Per-layer max/mean routing targets (file; default: the built-in Qwen3.5-397B table)");
    } else if (setting.option == "--allow-fallbacks") {
      app.add_flag(setting.option, knobs.options.driver.allow_fallbacks, setting.meaning);
    } else {
      app.add_option(setting.option, knobs.driver_settings[setting.name], setting_help(setting))
          ->type_name(value_name(setting));
    }
  }
}

// Sets the field of `options` that holds `setting`, given `text` on its option; a blank text
// leaves the default. A setting without a field of its own goes into other_settings. Throws
// rtb::Error "<option> <text>: <reason>".
void set_driver_setting(const DriverSetting& setting, const std::string& text,
                        bench::RenderOptions& options) {
  bench::DriverSettings& d = options.driver;
  const std::string& name = setting.name;
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  if (name == "STEPS" || name == "MICRO_STEPS" || name == "PAD_ALIGN") {
    std::optional<std::int64_t> value = bench::int_setting(setting, text, kIntMax);
    if (!value) return;
    int number = static_cast<int>(*value);
    if (name == "STEPS") d.steps = number;
    if (name == "MICRO_STEPS") d.micro_steps = number;
    if (name == "PAD_ALIGN") d.pad_align = number;
  } else if (name == "SEED") {
    if (std::optional<std::int64_t> value = bench::int_setting(setting, text)) d.seed = *value;
  } else if (name == "ROUTING_SCALE") {
    if (std::optional<double> value = bench::float_setting(setting, text)) d.routing_scale = *value;
  } else {
    std::string value = bench::checked_setting(setting, text);
    if (value.empty()) return;
    if (name == "LOGP_GATES") {
      d.logp_gates = value == "on";
    } else if (name == "ADVANTAGES") {
      d.advantages = value;
    } else if (name == "PAD_POSITION") {
      d.pad_position = value;
    } else if (name == "STAGE_BOUNDARY") {
      d.stage_boundary = value;
    } else if (name == "ROUTING") {
      d.routing = value;
    } else if (name == "LOGPS_PASS") {
      d.logps_pass = value;
    } else {
      d.other_settings.emplace_back(name, value);
    }
  }
}

}  // namespace

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
       {"--profile-window", &knobs.profile_window,
        bench::driver_setting("PROFILE_WINDOW").meaning.c_str()}});
  app.add_option("--weights", knobs.weights,
                 "random: drop what would load a checkpoint into the trainer "
                 "(--maxtext_ckpt_path, load_parameters_path, load_full_state_path, MAXTEXT_CKPT), "
                 "so MaxText initialises random weights; checkpoint: keep the e2e's, so the bench "
                 "loads its checkpoint (default: random)")
      ->type_name("TEXT:{random,checkpoint}");
  add_driver_setting_options(app, knobs);
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
  options.weights = bench::parse_weights(knobs.weights);
  // The driver refuses a bad setting at pod start; refuse it before a bench is written, in the
  // same words.
  for (const DriverSetting& setting : bench::driver_settings()) {
    auto given = knobs.driver_settings.find(setting.name);
    if (given != knobs.driver_settings.end() && given->second)
      set_driver_setting(setting, *given->second, options);
  }
  if (auto window = bench::parse_profile_window(knobs.profile_window))
    options.profile_window = window;
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
  // The rollout documents that set the routed-expert setting the driver copies (render.h).
  return rtb::k8s::parse_dryrun(
      text, source,
      rtb::k8s::render_chunks(knobs.options.mains, {std::string(bench::kRolloutRoutedExpertsFlag),
                                                    std::string(bench::kRolloutRoutedExpertsEnv)}));
}

}  // namespace rtb::tool
