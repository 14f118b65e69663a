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

#include "rtb/bench/render.h"
#include "rtb/k8s/dryrun.h"

namespace rtb::tool {

// What the options parse into; finish() turns it into bench::RenderOptions.
struct RenderKnobs {
  bench::RenderOptions options;
  std::string input;  // DRYRUN positional ("-": stdin)
  bool demo = false;  // --demo: the embedded example DRY_RUN
  std::string routing_file;
  std::string profile_window;
  std::string weights = "random";  // --weights, parsed by finish_render_options()
  // What was given to each option of the driver settings table that takes text, by setting name
  // (bench/driver_settings.h); finish_render_options() checks it with the table.
  std::map<std::string, std::optional<std::string>, std::less<>> driver_settings;
  std::vector<std::string> driver_env;
  std::optional<std::string> driver_file;
  std::optional<int> logps_chunk;
};

// kRequired: CLI11 requires --name; kOptional: it defaults to the caller's value; kCheckedByCaller:
// neither (for a tool with a mode that renders nothing, which then checks --name itself).
enum class NameOption { kRequired, kOptional, kCheckedByCaller };

// Declares DRYRUN, --demo, --name and every knob of README's render-bench table on `app`; the
// driver's settings are declared from the driver settings table, one option for each row that
// names one. With kOptional, --name defaults to `knobs.options.name` as set by the caller.
void add_render_options(CLI::App& app, RenderKnobs& knobs, NameOption name);

// Completes knobs.options after parsing: the driver source (`embedded_driver` unless --driver),
// the driver settings (checked by the table: `--steps 0: must be >= 1`; a blank value leaves a
// setting unset), routing targets, profile window, driver environment, version. Throws
// rtb::Error.
void finish_render_options(RenderKnobs& knobs, std::string_view embedded_driver);

// The bench driver the render embeds: --driver FILE, else `embedded_driver`. Throws rtb::Error.
std::string driver_source(const RenderKnobs& knobs, std::string_view embedded_driver);

// Reads and parses the DRY_RUN (or the embedded demo, `demo_text`), keeping only the trainer and
// orchestrator documents. Throws rtb::Error.
k8s::DryRun load_dryrun(const RenderKnobs& knobs, std::string_view demo_text);

}  // namespace rtb::tool
