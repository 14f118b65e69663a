#include "common/render_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/knobs.h"
#include "rtb/k8s/jobset.h"

namespace rtb::tool {
namespace {

// The --driver file, when given.
const std::string* given_driver_file(const RenderKnobs& knobs) {
  auto given = knobs.given.find(bench::knob_option(bench::Knob::kDriver));
  if (given == knobs.given.end() || given->second.values.empty()) return nullptr;
  return &given->second.values.back();
}

}  // namespace

void add_render_options(CLI::App& app, RenderKnobs& knobs, NameOption name) {
  app.add_option("DRYRUN", knobs.input,
                 "DRY_RUN output of the launcher, or - for stdin (default: the file named by "
                 "LAUNCH_RENDER, the seed's variable; an argument wins)");
  app.add_flag("--demo", knobs.demo, "Use the embedded example DRY_RUN (no DRYRUN argument)");
  for (const bench::KnobSpec& spec : bench::render_knobs()) {
    RenderKnobs::Given& given = knobs.given[spec.option];
    if (spec.arity == bench::KnobArity::kFlag) {
      app.add_flag(spec.option, given.flag, spec.help);
      continue;
    }
    // A once-knob keeps its text in a vector too (so that finish_render_options sees whether it
    // was given): one value, and given twice it is refused, as CLI11 refuses any single-value
    // option. Neither kind takes the DRYRUN after its value.
    CLI::Option* option = spec.arity == bench::KnobArity::kOnce
                              ? add_fixed_count_option(app, spec.option, given.values, 1, spec.help)
                              : add_repeatable_option(app, spec.option, given.values, spec.help);
    option->type_name(spec.value_name);
    if (spec.knob == bench::Knob::kName) {
      if (name == NameOption::kRequired) option->required();
      if (name == NameOption::kOptional) option->default_str(knobs.options.name);
    }
  }
  add_repeatable_option(app, "--arm", knobs.arms,
                        "A same-pod A/B arm: NAME declares it (the first is the control), "
                        "NAME:KNOB adds one render-bench option to it (NAME:--maxtext-flag=K=V); "
                        "one value per use")
      ->type_name("NAME[:KNOB]");
  add_fixed_count_option(app, "--arm-order", knobs.arm_order, 1,
                         "abba (default: the arm list then its reverse, repeated; cancels linear "
                         "drift), interleave or blocks")
      ->type_name("TEXT:{abba,interleave,blocks}");
  add_fixed_count_option(app, "--arm-repeats", knobs.arm_repeats, 1,
                         "Runs of each arm (default: 2)")
      ->type_name("INT");
  add_fixed_count_option(app, "--arm-mode", knobs.arm_mode, 1,
                         "pod (default: one JobSet, the arms run back to back in its pod) or "
                         "jobsets (one JobSet per arm, named <NAME>-<arm>)")
      ->type_name("TEXT:{pod,jobsets}");
  add_role_main_options(app, knobs.options.mains);
}

std::optional<bench::ArmPlan> arm_plan(const RenderKnobs& knobs) {
  if (knobs.arms.empty()) {
    const std::pair<const char*, const std::vector<std::string>*> others[] = {
        {"--arm-order", &knobs.arm_order},
        {"--arm-repeats", &knobs.arm_repeats},
        {"--arm-mode", &knobs.arm_mode}};
    for (const auto& [option, values] : others) {
      if (!values->empty()) fail("{} needs --arm", option);
    }
    return std::nullopt;
  }
  bench::ArmPlan plan;
  plan.arms = bench::parse_arm_values(knobs.arms);
  if (!knobs.arm_order.empty()) plan.order = bench::parse_arm_order(knobs.arm_order.back());
  if (!knobs.arm_mode.empty()) plan.mode = bench::parse_arm_mode(knobs.arm_mode.back());
  if (!knobs.arm_repeats.empty()) plan.repeats = bench::parse_arm_repeats(knobs.arm_repeats.back());
  return plan;
}

void finish_render_options(RenderKnobs& knobs, std::string_view embedded_driver,
                           std::string_view embedded_driver_packed) {
  rtb::bench::RenderOptions& options = knobs.options;
  for (const bench::KnobSpec& spec : bench::render_knobs()) {
    auto given = knobs.given.find(spec.option);
    if (given == knobs.given.end()) continue;
    if (spec.arity == bench::KnobArity::kFlag) {
      if (given->second.flag) bench::apply_knob(spec, "", options);
    } else if (spec.arity == bench::KnobArity::kOnce) {
      if (!given->second.values.empty())
        bench::apply_knob(spec, given->second.values.back(), options);
    } else {
      for (const std::string& value : given->second.values) bench::apply_knob(spec, value, options);
    }
  }
  if (!given_driver_file(knobs)) {
    options.driver_source = SharedText::of_static(embedded_driver);
    options.driver_packed = SharedText::of_static(embedded_driver_packed);
  }
  options.tool_version = RTB_VERSION;
}

std::string driver_source(const RenderKnobs& knobs, std::string_view embedded_driver) {
  const std::string* file = given_driver_file(knobs);
  return file ? read_file(*file) : std::string(embedded_driver);
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
