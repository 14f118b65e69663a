// check-payload build: builds a payload, checks it as verify would and reports target vs achieved.
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "check-payload/subcommands.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/payload/check.h"
#include "rtb/payload/report.h"
#include "rtb/payload/routing.h"
#include "rtb/payload/settings.h"

namespace rtb::tool::check_payload {
namespace {

struct BuildArgs {
  payload::PayloadOptions build;
  std::string pad_position = "end";
  std::string advantages = "random";
  bool no_old_logps = false;
  std::string output, targets, svg;
  bool json = false;
  int ep = 1, max_examples = 5;
  double buffer_factor = 2.75;
};

// The target table: --routing-targets, else the built-in one (for 60 layers).
void set_targets(BuildArgs& args) {
  payload::PayloadOptions& build = args.build;
  std::string targets_source = payload::kDefaultRoutingTableName;
  if (!args.targets.empty()) {
    build.routing_targets = load_targets(args.targets, &targets_source);
  } else {
    build.routing_targets = payload::default_routing_targets();
    if (build.layers != static_cast<int>(build.routing_targets.size())) {
      fail("the built-in routing table is for {} layers; give --routing-targets for {}",
           build.routing_targets.size(), build.layers);
    }
  }
  spdlog::info("routing targets from {}", targets_source);
  // Recorded in the file: name an inline list by where it was given.
  build.routing_targets_source = targets_source == "--routing-targets (inline)"
                                     ? "inline --routing-targets of check-payload build"
                                     : targets_source;
}

Outcome run_build(BuildArgs& args, const CLI::App& command, const Tool& tool) {
  // 1. Options.
  payload::PayloadOptions& build = args.build;
  build.pad_position = payload::parse_pad_position(args.pad_position);
  build.advantages = payload::parse_advantage_mode(args.advantages);
  build.old_logps = !args.no_old_logps;
  build.segments_given = command.count("--segments") > 0;
  set_targets(args);
  // 2. Build.
  auto start = Clock::now();
  // The routing is made a block at a time as it is checked and as it is written, never held
  // whole (5 GB at the seed's scale).
  payload::Payload payload = payload::build_payload(build, payload::RoutingStorage::kOnDemand);
  spdlog::info("built in {:.2f} s (all but the routing, made as it is checked and written)",
               seconds_since(start));
  tool.report_diagnostics(payload.diagnostics);
  // 3. Check it as verify would, on the arrays in memory and the routing made block by block.
  payload::VerifyOptions checks = payload::checks_of_build(payload);
  checks.ep = args.ep;
  checks.buffer_factor = args.buffer_factor;
  checks.max_examples = args.max_examples;
  start = Clock::now();
  payload::VerifyReport report = payload::verify_payload(payload, checks);
  spdlog::info("checked in {:.2f} s (making the routing included)", seconds_since(start));
  // 4. Write, report.
  if (!args.output.empty()) {
    start = Clock::now();
    payload::write_payload(payload, args.output);
    spdlog::info("wrote {} in {:.2f} s (making the routing twice included)",
                 display_name(args.output), seconds_since(start));
  }
  std::string shown = args.output == "-" ? "<stdout>" : args.output;
  print_report(args.json ? payload::format_build_json(payload, report, shown)
                         : payload::format_build_text(payload, report, shown),
               args.output == "-");
  if (!args.svg.empty()) {
    write_output(args.svg, payload::routing_load_svg("check-payload build: target vs achieved",
                                                     report.per_layer, payload.targets));
  }
  return report.outcome();
}

}  // namespace

Subcommand add_build(CLI::App& app, const Tool& tool) {
  auto args = std::make_shared<BuildArgs>();
  payload::PayloadOptions& build = args->build;
  CLI::App* cmd = app.add_subcommand(
      "build", "Build a payload, check it, print the per-layer target vs achieved table");
  add_layout_options(cmd, build, true);
  cmd->add_option("--layers", build.layers, "Decoder layers (L)")->required();
  cmd->add_option("--topk", build.topk, "Experts per token (K)")->required();
  cmd->add_option("--experts", build.experts, "Routed experts (E)")->required();
  cmd->add_option("--vocab", build.vocab, "Vocabulary size")->capture_default_str();
  cmd->add_option("--max-prompt-length", build.max_prompt_length,
                  "Each segment starts with a seeded prompt of 1..min(P, length - 1) tokens "
                  "(mask, advantages and log-probs 0 there); 0: no prompt")
      ->capture_default_str();
  cmd->add_option("--pad-position", args->pad_position,
                  "end: padding after the last token; start: rows moved right")
      ->check(CLI::IsMember({"end", "start"}))
      ->capture_default_str();
  cmd->add_option("--routing-targets", args->targets,
                  "Per-layer max/mean table: FILE (or @FILE) with one number per line or "
                  "`layer,target` lines, or an inline list 1.5,2,...; default: the built-in "
                  "Qwen3.5-397B-A17B table (60 layers)");
  cmd->add_option("--routing-scale", build.routing_scale,
                  "Stretch every target: t' = 1 + S (t - 1)")
      ->capture_default_str();
  cmd->add_option("--advantages", args->advantages, "random: a seeded normal per segment; zero")
      ->check(CLI::IsMember({"random", "zero"}))
      ->capture_default_str();
  cmd->add_flag("--no-old-logps", args->no_old_logps, "Leave out old_per_token_logps");
  cmd->add_option("--threads", build.threads, "Threads (default or 0: the machine's cores)")
      ->check(CLI::NonNegativeNumber);
  add_output_option(*cmd, args->output,
                    "Write the payload here (.npz; - for stdout, the report then goes to stderr)");
  cmd->add_option("--ep", args->ep, "Expert-parallel ranks for the per-rank columns")
      ->capture_default_str();
  cmd->add_option("--buffer-factor", args->buffer_factor,
                  "Ragged buffer per rank, in mean rank loads")
      ->capture_default_str();
  cmd->add_option("--max-examples", args->max_examples, "Failures listed per check")
      ->capture_default_str();
  add_json_flag(*cmd, args->json, "Print JSON instead of text");
  cmd->add_option("--svg", args->svg, "Draw per-layer target vs achieved and per-rank load");
  return {cmd, [args, cmd, &tool] { return run_build(*args, *cmd, tool); }};
}

}  // namespace rtb::tool::check_payload
