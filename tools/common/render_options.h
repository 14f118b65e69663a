// The render-bench knobs as CLI11 options, shared by every tool that renders the bench from a
// DRY_RUN (render-bench, aot-check), so that the same flags mean the same render everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/bench/arms.h"
#include "rtb/bench/render.h"
#include "rtb/k8s/dryrun.h"

namespace rtb::tool {

// What the options parse into; finish_render_options() turns it into bench::RenderOptions.
struct RenderKnobs {
  bench::RenderOptions options;  // the caller's defaults (aot-check's --name), then the knobs'
  std::string input;             // DRYRUN positional ("-": stdin)
  bool demo = false;             // --demo: the embedded example DRY_RUN
  // What was given to each knob of bench::render_knobs(), by option: the values in the order
  // given (a once-knob keeps its last), or for a flag whether it was given.
  struct Given {
    std::vector<std::string> values;
    bool flag = false;
  };
  std::map<std::string, Given, std::less<>> given;
  // A same-pod A/B (bench/arms.h): --arm values in order, --arm-order, --arm-repeats, --arm-mode.
  std::vector<std::string> arms;
  std::vector<std::string> arm_order, arm_repeats, arm_mode;
};

// kRequired: CLI11 requires --name; kOptional: it defaults to the caller's value; kCheckedByCaller:
// neither (for a tool with a mode that renders nothing, which then checks --name itself).
enum class NameOption { kRequired, kOptional, kCheckedByCaller };

// Declares DRYRUN, --demo and every knob of the knob table (bench/knobs.h) on `app`, in its
// order, with its help and value name. With kOptional, --name defaults to `knobs.options.name` as
// set by the caller.
void add_render_options(CLI::App& app, RenderKnobs& knobs, NameOption name);

// The A/B the --arm options ask for, nullopt without --arm. --arm-order, --arm-repeats and
// --arm-mode without --arm are refused. Throws rtb::Error.
std::optional<bench::ArmPlan> arm_plan(const RenderKnobs& knobs);

// Completes knobs.options after parsing: every knob given, in the table's order, through
// bench::apply_knob (which checks it: `--steps 0: must be >= 1`; a blank driver setting leaves it
// unset), then the driver source (`embedded_driver` unless --driver, with its packed form
// `embedded_driver_packed` if known; both viewed in place, so they must be static, as embedded
// files are) and the version. Throws rtb::Error.
void finish_render_options(RenderKnobs& knobs, std::string_view embedded_driver,
                           std::string_view embedded_driver_packed = {});

// The bench driver the render embeds: --driver FILE, else `embedded_driver`. Throws rtb::Error.
std::string driver_source(const RenderKnobs& knobs, std::string_view embedded_driver);

// Reads and parses the DRY_RUN (or the embedded demo, `demo_text`), keeping only the trainer and
// orchestrator documents. Throws rtb::Error.
k8s::DryRun load_dryrun(const RenderKnobs& knobs, std::string_view demo_text);

}  // namespace rtb::tool
