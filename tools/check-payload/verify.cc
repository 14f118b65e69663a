// check-payload verify: runs every check of the spec on a payload file, row by row.
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "check-payload/subcommands.h"
#include "common/tool.h"
#include "rtb/base/io.h"
#include "rtb/payload/check.h"
#include "rtb/payload/npy.h"
#include "rtb/payload/report.h"
#include "rtb/payload/settings.h"

namespace rtb::tool::check_payload {
namespace {

struct VerifyArgs {
  std::string file, targets, svg, pad_position, advantages;
  payload::VerifyOptions verify;
  int experts = 0;
  std::int64_t vocab = 0, pad_align = 0, max_prompt_length = 0;
  double routing_scale = 1.0;
  bool json = false, no_targets = false;
};

Outcome run_verify(VerifyArgs& args, const CLI::App& command, const Tool& tool) {
  FileSource source(args.file, FileAccess::kRandom);
  std::vector<payload::ArrayInfo> arrays = payload::list_arrays(source);
  std::optional<payload::PayloadSettings> recorded = payload::read_payload_settings(source, arrays);
  // Every setting defaults to what the file's payload_settings records; an option overrides it.
  payload::VerifyFlags flags;
  auto given = [&](const char* option) { return command.count(option) > 0; };
  if (given("--experts")) flags.experts = args.experts;
  if (given("--vocab")) flags.vocab = args.vocab;
  if (given("--pad-position")) flags.pad_position = payload::parse_pad_position(args.pad_position);
  if (given("--pad-align")) flags.pad_align = args.pad_align;
  if (given("--advantages")) flags.advantages = payload::parse_advantage_mode(args.advantages);
  if (given("--max-prompt-length")) flags.max_prompt_length = args.max_prompt_length;
  if (given("--routing-scale")) flags.routing_scale = args.routing_scale;
  flags.no_targets = args.no_targets;
  if (!args.targets.empty() && !args.no_targets) {
    flags.routing_targets = load_targets(args.targets, &flags.routing_targets_source);
  }
  std::string targets_source;
  payload::VerifyOptions verify =
      payload::resolve_verify_options(flags, recorded, args.verify, &targets_source);
  std::string name = display_name(args.file);
  if (!recorded) spdlog::info("{} has no payload_settings: checking what the arrays show", name);
  auto start = Clock::now();
  payload::VerifyReport report = payload::verify_payload(source, arrays, verify);
  spdlog::info("verified in {:.2f} s", seconds_since(start));
  tool.report_diagnostics(report.diagnostics);
  write_output("-", args.json ? payload::format_verify_json(name, report, targets_source)
                              : payload::format_verify_text(name, report, targets_source));
  if (!args.svg.empty()) {
    write_output(args.svg, payload::routing_load_svg("check-payload verify: " + name,
                                                     report.per_layer, report.targets));
  }
  return report.outcome();
}

}  // namespace

Subcommand add_verify(CLI::App& app, const Tool& tool) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Run every check of the spec on a payload file (exit 0 pass, 1 a check failed)");
  cmd->add_option("FILE", args->file,
                  "Payload .npz (from check-payload build or bench_driver.py --dump-payload)")
      ->required();
  cmd->add_option("--experts", args->experts,
                  "Routed experts (E) of the model (default: recorded, else the largest expert "
                  "id + 1)");
  cmd->add_option("--vocab", args->vocab,
                  "Vocabulary size, token ids < vocab (default: recorded, else 248320)");
  cmd->add_option("--routing-targets", args->targets,
                  "Target table the payload was built for (default: the targets recorded in "
                  "the file; none for a file without payload_settings)");
  cmd->add_option("--routing-scale", args->routing_scale,
                  "ROUTING_SCALE the payload was built with (default: recorded, else 1)");
  cmd->add_flag("--no-targets", args->no_targets, "Do not check per-layer targets");
  cmd->add_option("--pad-position", args->pad_position, "Require this pad position (end|start)")
      ->check(CLI::IsMember({"end", "start"}));
  cmd->add_option("--pad-align", args->pad_align,
                  "pad_align of pad position start (default: recorded, else any multiple of 64)");
  cmd->add_option("--max-prompt-length", args->max_prompt_length,
                  "Longest prompt of a segment, 0 for none (default: recorded, else only the "
                  "mask's prompt-then-completion structure is checked)");
  cmd->add_option("--advantages", args->advantages, "Require random or zero advantages")
      ->check(CLI::IsMember({"random", "zero"}));
  cmd->add_option("--ep", args->verify.ep, "Expert-parallel ranks for the per-rank columns")
      ->capture_default_str();
  cmd->add_option("--buffer-factor", args->verify.buffer_factor,
                  "Ragged buffer per rank, in mean rank loads")
      ->capture_default_str();
  cmd->add_option("--max-examples", args->verify.max_examples, "Failures listed per check")
      ->capture_default_str();
  add_json_flag(*cmd, args->json, "Print JSON instead of text");
  cmd->add_option("--svg", args->svg, "Draw per-layer target vs achieved and per-rank load");
  return {cmd, [args, cmd, &tool] { return run_verify(*args, *cmd, tool); }};
}

}  // namespace rtb::tool::check_payload
