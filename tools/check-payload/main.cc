// check-payload: builds the bench's synthetic micro-batch with calibrated MoE routing, checks any
// payload file against the spec, measures routing loads of a real run (giving a target table),
// and counts attention tiles per context rank for padding at the end or first.
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/payload/builder.h"
#include "rtb/payload/check.h"
#include "rtb/payload/load.h"
#include "rtb/payload/npy.h"
#include "rtb/payload/report.h"
#include "rtb/payload/routing.h"
#include "rtb/payload/settings.h"
#include "rtb/payload/tiles.h"

namespace {

constexpr const char* kExamples =
    R"(  check-payload build --rows 4 --tokens 8192 --layers 60 --topk 10 --experts 512 -o payload.npz
  check-payload build --rows 2 --tokens 4096 --layers 4 --topk 2 --experts 16 \
      --routing-targets 1.5,2,4,8 --pad-position start --pad-align 1024 --svg loads.svg
  check-payload build --rows 2 --tokens 4096 --layers 4 --topk 2 --experts 16 \
      --routing-targets 1,2,3,4 --segments 4 --max-prompt-length 256 -o prompts.npz
  check-payload verify payload.npz                 # settings from the file; exit 1 if a check fails
  check-payload verify old.npz --experts 512 --routing-targets my-targets.txt --routing-scale 0.5
  check-payload measure routed_experts.npy --ep 2 -o my-targets.txt
  check-payload tiles --cp 4 --block-q 1024 --block-kv 4096 --dkv-block-q 2048 --dkv-block-kv 2048 \
      --rows 1 --tokens 65536                      # the bench's 60,948-token rows
  check-payload tiles payload.npz --cp 4 --block-q 1024 --block-kv 4096 --json
)";

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// --routing-targets: @FILE or an existing file is read; anything else is an inline list.
std::vector<double> load_targets(const std::string& argument, std::string* source) {
  std::string path;
  if (!argument.empty() && argument[0] == '@') {
    path = argument.substr(1);
  } else if (argument == "-" || std::filesystem::is_regular_file(argument)) {
    path = argument;
  }
  if (path.empty()) {
    *source = "--routing-targets (inline)";
    return rtb::payload::parse_routing_targets(argument, "--routing-targets");
  }
  *source = rtb::display_name(path);
  return rtb::payload::parse_routing_targets(rtb::read_file(path), rtb::display_name(path));
}

// Where the report goes: stdout, or stderr when stdout carries the payload itself (-o -).
void print_report(const std::string& text, bool to_stderr) {
  if (to_stderr) {
    std::fputs(text.c_str(), stderr);
  } else {
    rtb::write_output("-", text);
  }
}

struct LayoutFlags {
  std::string pad_position = "end";
  std::string advantages = "random";
  bool no_old_logps = false;
};

// The options that lay rows out, shared by build and tiles.
void add_layout_options(CLI::App* cmd, rtb::payload::PayloadOptions& o, bool required) {
  cmd->add_option("--rows", o.rows, "Rows of the micro-batch (R)")->required(required);
  cmd->add_option("--tokens", o.tokens, "Token budget per row (T, max_seq_token_per_tpu)")
      ->required(required);
  cmd->add_option("--real-len", o.real_len,
                  "Real tokens per row (default: T minus the bench's share of padding, "
                  "60,948 of 65,536)");
  cmd->add_option("--segments", o.segments, "Segments (packed sequences) per row")
      ->capture_default_str();
  cmd->add_option("--final-rows", o.final_rows,
                  "Build the final micro-batch of a step: only the first F rows are real, the "
                  "rest are padding");
  cmd->add_option("--pad-align", o.pad_align,
                  "Pad position start moves a row by its padding rounded down to this (a "
                  "positive multiple of 64)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of every random choice")->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  rtb::tool::Tool tool(
      {"check-payload",
       "The bench payload: a synthetic micro-batch with the trainer's fields, shapes and dtypes "
       "and "
       "replayed top-k routing whose per-layer max/mean expert load hits a target table "
       "(docs/payload-spec.md). build writes one (.npz) and checks it; verify runs every "
       "check of the spec on any payload file (either builder's), reading it row by row; measure "
       "computes per-layer and per-expert-parallel-rank loads of a routed-experts array of a real "
       "run and writes the target table --routing-targets reads; tiles counts attention tiles per "
       "context rank with the padding at the end and first.",
       kExamples});
  CLI::App& app = tool.app();
  app.require_subcommand(1);
  app.fallthrough();  // -v, -q and the like also after the subcommand
  // A repeated option takes its last value (as the driver's argparse does), so a script can
  // append an override to a base command line.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  // --- build ---
  rtb::payload::PayloadOptions build;
  LayoutFlags build_flags;
  std::string build_output, build_targets, build_svg;
  bool build_json = false;
  int build_ep = 1, build_examples = 5;
  double build_buffer = 2.75;
  CLI::App* build_cmd = app.add_subcommand(
      "build", "Build a payload, check it, print the per-layer target vs achieved table");
  add_layout_options(build_cmd, build, true);
  build_cmd->add_option("--layers", build.layers, "Decoder layers (L)")->required();
  build_cmd->add_option("--topk", build.topk, "Experts per token (K)")->required();
  build_cmd->add_option("--experts", build.experts, "Routed experts (E)")->required();
  build_cmd->add_option("--vocab", build.vocab, "Vocabulary size")->capture_default_str();
  build_cmd
      ->add_option("--max-prompt-length", build.max_prompt_length,
                   "Each segment starts with a seeded prompt of 1..min(P, length - 1) tokens "
                   "(mask, advantages and log-probs 0 there); 0: no prompt")
      ->capture_default_str();
  build_cmd
      ->add_option("--pad-position", build_flags.pad_position,
                   "end: padding after the last token; start: rows moved right")
      ->check(CLI::IsMember({"end", "start"}))
      ->capture_default_str();
  build_cmd->add_option("--routing-targets", build_targets,
                        "Per-layer max/mean table: FILE (or @FILE) with one number per line or "
                        "`layer,target` lines, or an inline list 1.5,2,...; default: the built-in "
                        "Qwen3.5-397B-A17B table (60 layers)");
  build_cmd
      ->add_option("--routing-scale", build.routing_scale,
                   "Stretch every target: t' = 1 + S (t - 1)")
      ->capture_default_str();
  build_cmd
      ->add_option("--advantages", build_flags.advantages,
                   "random: a seeded normal per segment; zero")
      ->check(CLI::IsMember({"random", "zero"}))
      ->capture_default_str();
  build_cmd->add_flag("--no-old-logps", build_flags.no_old_logps, "Leave out old_per_token_logps");
  build_cmd->add_option("--threads", build.threads, "Threads (default or 0: the machine's cores)")
      ->check(CLI::NonNegativeNumber);
  build_cmd->add_option("-o,--output", build_output,
                        "Write the payload here (.npz; - for stdout, the report then goes to "
                        "stderr)");
  build_cmd->add_option("--ep", build_ep, "Expert-parallel ranks for the per-rank columns")
      ->capture_default_str();
  build_cmd
      ->add_option("--buffer-factor", build_buffer, "Ragged buffer per rank, in mean rank loads")
      ->capture_default_str();
  build_cmd->add_option("--max-examples", build_examples, "Failures listed per check")
      ->capture_default_str();
  build_cmd->add_flag("--json", build_json, "Print JSON instead of text");
  build_cmd->add_option("--svg", build_svg, "Draw per-layer target vs achieved and per-rank load");

  // --- verify ---
  std::string verify_file, verify_targets, verify_svg, verify_pad, verify_advantages;
  rtb::payload::VerifyOptions verify;
  int verify_experts = 0;
  std::int64_t verify_vocab = 0, verify_pad_align = 0, verify_prompt = 0;
  double verify_scale = 1.0;
  bool verify_json = false, verify_no_targets = false;
  CLI::App* verify_cmd = app.add_subcommand(
      "verify", "Run every check of the spec on a payload file (exit 0 pass, 1 a check failed)");
  verify_cmd
      ->add_option("FILE", verify_file,
                   "Payload .npz (from check-payload build or "
                   "bench_driver.py --dump-payload)")
      ->required();
  // Every setting defaults to what the file's payload_settings records; an option overrides it.
  verify_cmd->add_option("--experts", verify_experts,
                         "Routed experts (E) of the model (default: recorded, else the largest "
                         "expert id + 1)");
  verify_cmd->add_option("--vocab", verify_vocab,
                         "Vocabulary size, token ids < vocab (default: recorded, else 248320)");
  verify_cmd->add_option("--routing-targets", verify_targets,
                         "Target table the payload was built for (default: the targets recorded "
                         "in the file; none for a file without payload_settings)");
  verify_cmd->add_option("--routing-scale", verify_scale,
                         "ROUTING_SCALE the payload was built with (default: recorded, else 1)");
  verify_cmd->add_flag("--no-targets", verify_no_targets, "Do not check per-layer targets");
  verify_cmd->add_option("--pad-position", verify_pad, "Require this pad position (end|start)")
      ->check(CLI::IsMember({"end", "start"}));
  verify_cmd->add_option("--pad-align", verify_pad_align,
                         "pad_align of pad position start (default: recorded, else any "
                         "multiple of 64)");
  verify_cmd->add_option("--max-prompt-length", verify_prompt,
                         "Longest prompt of a segment, 0 for none (default: recorded, else only "
                         "the mask's prompt-then-completion structure is checked)");
  verify_cmd->add_option("--advantages", verify_advantages, "Require random or zero advantages")
      ->check(CLI::IsMember({"random", "zero"}));
  verify_cmd->add_option("--ep", verify.ep, "Expert-parallel ranks for the per-rank columns")
      ->capture_default_str();
  verify_cmd
      ->add_option("--buffer-factor", verify.buffer_factor,
                   "Ragged buffer per rank, in mean rank loads")
      ->capture_default_str();
  verify_cmd->add_option("--max-examples", verify.max_examples, "Failures listed per check")
      ->capture_default_str();
  verify_cmd->add_flag("--json", verify_json, "Print JSON instead of text");
  verify_cmd->add_option("--svg", verify_svg,
                         "Draw per-layer target vs achieved and per-rank load");

  // --- measure ---
  std::string measure_file, measure_output, measure_svg;
  rtb::payload::MeasureOptions measure;
  bool measure_json = false;
  CLI::App* measure_cmd = app.add_subcommand(
      "measure", "Per-layer loads of a routed-experts array; writes a target table");
  measure_cmd
      ->add_option("ROUTED", measure_file,
                   "Routed experts (.npy, or .npz member): [R,T,L,K] or [N,L,K], int16 or "
                   "int32, -1 = no expert")
      ->required();
  measure_cmd->add_option("--ep", measure.ep, "Expert-parallel ranks (contiguous expert groups)")
      ->required();
  measure_cmd
      ->add_option("--buffer-factor", measure.buffer_factor,
                   "Ragged buffer per rank, in mean rank loads")
      ->capture_default_str();
  measure_cmd->add_option("--experts", measure.experts, "Routed experts (E) of the model")
      ->capture_default_str();
  measure_cmd->add_option("--member", measure.member, "npz member holding the routing")
      ->capture_default_str();
  measure_cmd->add_option("-o,--output", measure_output,
                          "Write the target table here (`layer,target` lines)");
  measure_cmd->add_flag("--json", measure_json, "Print JSON instead of text");
  measure_cmd->add_option("--svg", measure_svg, "Draw per-layer max/mean and per-rank load");

  // --- tiles ---
  std::string tiles_file;
  rtb::payload::TileSettings tiles;
  rtb::payload::PayloadOptions tiles_layout;
  tiles_layout.rows = 1;
  bool tiles_json = false;
  CLI::App* tiles_cmd =
      app.add_subcommand("tiles", "Attention tiles per context rank, padding at the end and first");
  tiles_cmd->add_option("FILE", tiles_file, "Payload .npz (its segment_ids); or give --tokens");
  tiles_cmd->add_option("--cp", tiles.cp, "Context parallelism")->required();
  tiles_cmd->add_option("--block-q", tiles.block_q, "Forward query block")->required();
  tiles_cmd->add_option("--block-kv", tiles.block_kv, "Forward key/value block")->required();
  tiles_cmd->add_option("--dkv-block-q", tiles.dkv_block_q, "dK/dV query block (default: forward)");
  tiles_cmd->add_option("--dkv-block-kv", tiles.dkv_block_kv,
                        "dK/dV key/value block (default: forward)");
  add_layout_options(tiles_cmd, tiles_layout, false);
  tiles_cmd->add_flag("--json", tiles_json, "Print JSON instead of text");

  return tool.run(argc, argv, [&]() -> int {
    if (build_cmd->parsed()) {
      // 1. Options: the target table (default: the built-in one for 60 layers).
      build.pad_position = rtb::payload::parse_pad_position(build_flags.pad_position);
      build.advantages = rtb::payload::parse_advantage_mode(build_flags.advantages);
      build.old_logps = !build_flags.no_old_logps;
      build.segments_given = build_cmd->count("--segments") > 0;
      std::string targets_source = rtb::payload::kDefaultRoutingTableName;
      if (!build_targets.empty()) {
        build.routing_targets = load_targets(build_targets, &targets_source);
      } else {
        build.routing_targets = rtb::payload::default_routing_targets();
        if (build.layers != static_cast<int>(build.routing_targets.size())) {
          rtb::fail("the built-in routing table is for {} layers; give --routing-targets for {}",
                    build.routing_targets.size(), build.layers);
        }
      }
      spdlog::info("routing targets from {}", targets_source);
      // Recorded in the file: name an inline list by where it was given.
      build.routing_targets_source = targets_source == "--routing-targets (inline)"
                                         ? "inline --routing-targets of check-payload build"
                                         : targets_source;
      // 2. Build.
      auto start = Clock::now();
      rtb::payload::Payload payload = rtb::payload::build_payload(build);
      spdlog::info("built in {:.2f} s", seconds_since(start));
      for (const std::string& w : payload.warnings) spdlog::warn("{}", w);
      // 3. Check it as verify would, on the arrays in memory.
      rtb::payload::VerifyOptions checks;
      checks.experts = payload.options.experts;
      checks.vocab = payload.options.vocab;
      checks.targets = payload.targets;
      checks.pad_position = payload.options.pad_position;
      checks.pad_align = payload.options.pad_align;
      checks.advantages = payload.options.advantages;
      checks.max_prompt_length = payload.options.max_prompt_length;
      // Read back what the file will record, so a build also checks its own settings.
      checks.recorded =
          rtb::payload::parse_payload_settings(payload.settings_json, "payload_settings");
      checks.ep = build_ep;
      checks.buffer_factor = build_buffer;
      checks.max_examples = build_examples;
      rtb::payload::PayloadView view = rtb::payload::view_payload(payload);
      start = Clock::now();
      rtb::payload::VerifyReport report =
          rtb::payload::verify_payload(*view.source, view.arrays, checks);
      spdlog::info("checked in {:.2f} s", seconds_since(start));
      // 4. Write, report.
      if (!build_output.empty()) {
        start = Clock::now();
        rtb::payload::write_payload(payload, build_output);
        spdlog::info("wrote {} in {:.2f} s", rtb::display_name(build_output), seconds_since(start));
      }
      std::string shown = build_output == "-" ? "<stdout>" : build_output;
      print_report(build_json ? rtb::payload::format_build_json(payload, report, shown)
                              : rtb::payload::format_build_text(payload, report, shown),
                   build_output == "-");
      if (!build_svg.empty()) {
        rtb::write_output(build_svg,
                          rtb::payload::routing_load_svg("check-payload build: target vs achieved",
                                                         report.per_layer, payload.targets));
      }
      return report.passed() ? rtb::tool::kExitOk : rtb::tool::kExitCheckFailed;
    }

    if (verify_cmd->parsed()) {
      rtb::FileSource source(verify_file, rtb::FileAccess::kRandom);
      std::vector<rtb::payload::ArrayInfo> arrays = rtb::payload::list_arrays(source);
      std::optional<rtb::payload::PayloadSettings> recorded =
          rtb::payload::read_payload_settings(source, arrays);
      rtb::payload::VerifyFlags flags;
      auto given = [&](const char* option) { return verify_cmd->count(option) > 0; };
      if (given("--experts")) flags.experts = verify_experts;
      if (given("--vocab")) flags.vocab = verify_vocab;
      if (given("--pad-position"))
        flags.pad_position = rtb::payload::parse_pad_position(verify_pad);
      if (given("--pad-align")) flags.pad_align = verify_pad_align;
      if (given("--advantages"))
        flags.advantages = rtb::payload::parse_advantage_mode(verify_advantages);
      if (given("--max-prompt-length")) flags.max_prompt_length = verify_prompt;
      if (given("--routing-scale")) flags.routing_scale = verify_scale;
      flags.no_targets = verify_no_targets;
      if (!verify_targets.empty() && !verify_no_targets) {
        flags.routing_targets = load_targets(verify_targets, &flags.routing_targets_source);
      }
      std::string targets_source;
      verify = rtb::payload::resolve_verify_options(flags, recorded, verify, &targets_source);
      if (!recorded) {
        spdlog::info("{} has no payload_settings: checking what the arrays show",
                     rtb::display_name(verify_file));
      }
      auto start = Clock::now();
      rtb::payload::VerifyReport report = rtb::payload::verify_payload(source, arrays, verify);
      spdlog::info("verified in {:.2f} s", seconds_since(start));
      std::string name = rtb::display_name(verify_file);
      rtb::write_output("-", verify_json
                                 ? rtb::payload::format_verify_json(name, report, targets_source)
                                 : rtb::payload::format_verify_text(name, report, targets_source));
      if (!verify_svg.empty()) {
        rtb::write_output(verify_svg,
                          rtb::payload::routing_load_svg("check-payload verify: " + name,
                                                         report.per_layer, report.targets));
      }
      return report.passed() ? rtb::tool::kExitOk : rtb::tool::kExitCheckFailed;
    }

    if (measure_cmd->parsed()) {
      rtb::FileSource source(measure_file, rtb::FileAccess::kRandom);
      // Experts: the option, else what a payload file records, else the default.
      measure.experts_from = "default";
      if (measure_cmd->count("--experts") > 0) {
        measure.experts_from = "option";
      } else if (std::optional<rtb::payload::PayloadSettings> recorded =
                     rtb::payload::read_payload_settings(source, rtb::payload::list_arrays(source));
                 recorded && recorded->experts) {
        if (*recorded->experts > 32767)
          rtb::fail("payload_settings records {} experts", *recorded->experts);
        measure.experts = static_cast<int>(*recorded->experts);
        measure.experts_from = "file";
      }
      auto start = Clock::now();
      rtb::payload::MeasureReport report = rtb::payload::measure_routing(source, measure);
      spdlog::info("measured in {:.2f} s", seconds_since(start));
      std::string name = rtb::display_name(measure_file);
      if (!measure_output.empty()) {
        rtb::write_output(measure_output, rtb::payload::format_measured_table(name, report));
      }
      std::string table = measure_output == "-" ? "<stdout>" : measure_output;
      print_report(measure_json ? rtb::payload::format_measure_json(name, report, table)
                                : rtb::payload::format_measure_text(name, report, table),
                   measure_output == "-");
      if (!measure_svg.empty()) {
        rtb::write_output(measure_svg, rtb::payload::routing_load_svg(
                                           "check-payload measure: " + name, report.per_layer, {}));
      }
      return rtb::tool::kExitOk;
    }

    // tiles
    if (tiles.dkv_block_q == 0) tiles.dkv_block_q = tiles.block_q;
    if (tiles.dkv_block_kv == 0) tiles.dkv_block_kv = tiles.block_kv;
    tiles.pad_align = tiles_layout.pad_align;
    if (tiles.pad_align < 1 || tiles.pad_align % rtb::payload::kSegmentAlign != 0) {
      rtb::fail("--pad-align must be a positive multiple of {} (got {})",
                rtb::payload::kSegmentAlign, tiles.pad_align);
    }
    rtb::payload::TilesReport report;
    std::string source_name;
    if (!tiles_file.empty()) {
      for (const char* option :
           {"--rows", "--tokens", "--real-len", "--segments", "--final-rows", "--seed"}) {
        if (tiles_cmd->count(option) > 0) {
          rtb::fail("{} describes rows to lay out; with FILE the rows come from the file", option);
        }
      }
      report = rtb::payload::count_payload_tiles(
          rtb::FileSource(tiles_file, rtb::FileAccess::kRandom), tiles);
      source_name = rtb::display_name(tiles_file);
    } else {
      if (tiles_cmd->count("--tokens") == 0) rtb::fail("give a payload FILE or --tokens");
      // Only the layout matters here; the routing options are placeholders.
      tiles_layout.layers = 1;
      tiles_layout.topk = 1;
      tiles_layout.experts = 1;
      tiles_layout.routing_targets = {1.0};
      std::vector<std::string> warnings;
      rtb::payload::PayloadOptions resolved =
          rtb::payload::resolve_payload_options(tiles_layout, &warnings);
      for (const std::string& w : warnings) spdlog::warn("{}", w);
      report = rtb::payload::count_layout_tiles(resolved, tiles);
      source_name =
          fmt::format("rows laid out from options ({} real tokens, {} {})", resolved.real_len,
                      resolved.segments, resolved.segments == 1 ? "segment" : "segments");
    }
    rtb::write_output("-", tiles_json ? rtb::payload::format_tiles_json(source_name, report)
                                      : rtb::payload::format_tiles_text(source_name, report));
    return rtb::tool::kExitOk;
  });
}
