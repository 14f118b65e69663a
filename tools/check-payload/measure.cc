// check-payload measure: per-layer and per-rank loads of a real run's routed experts, written as
// the target table --routing-targets reads.
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string>

#include "check-payload/subcommands.h"
#include "common/tool.h"
#include "rtb/base/io.h"
#include "rtb/payload/load.h"
#include "rtb/payload/report.h"
#include "rtb/payload/settings.h"

namespace rtb::tool::check_payload {
namespace {

struct MeasureArgs {
  std::string file, output, svg;
  payload::MeasureOptions measure;
  bool json = false;
};

Outcome run_measure(const MeasureArgs& args, const CLI::App& command) {
  FileSource source(args.file, FileAccess::kRandom);
  // Experts: the option, else what a payload file records, else the default.
  payload::MeasureOptions measure = payload::resolve_measure_options(
      source, args.measure,
      command.count("--experts") > 0 ? std::optional(args.measure.experts) : std::nullopt);
  auto start = Clock::now();
  payload::MeasureReport report = payload::measure_routing(source, measure);
  spdlog::info("measured in {:.2f} s", seconds_since(start));
  std::string name = display_name(args.file);
  if (!args.output.empty()) {
    write_output(args.output, payload::format_measured_table(name, report));
  }
  std::string table = args.output == "-" ? "<stdout>" : args.output;
  print_report(args.json ? payload::format_measure_json(name, report, table)
                         : payload::format_measure_text(name, report, table),
               args.output == "-");
  if (!args.svg.empty()) {
    write_output(args.svg,
                 payload::routing_load_svg("check-payload measure: " + name, report.per_layer, {}));
  }
  return Outcome::kPass;
}

}  // namespace

Subcommand add_measure(CLI::App& app) {
  auto args = std::make_shared<MeasureArgs>();
  payload::MeasureOptions& measure = args->measure;
  CLI::App* cmd = app.add_subcommand(
      "measure", "Per-layer loads of a routed-experts array; writes a target table");
  cmd->add_option("ROUTED", args->file,
                  "Routed experts (.npy, or .npz member): [R,T,L,K] or [N,L,K], int16 or int32, "
                  "-1 = no expert")
      ->required();
  cmd->add_option("--ep", measure.ep, "Expert-parallel ranks (contiguous expert groups)")
      ->required();
  cmd->add_option("--buffer-factor", measure.buffer_factor,
                  "Ragged buffer per rank, in mean rank loads")
      ->capture_default_str();
  cmd->add_option("--experts", measure.experts, "Routed experts (E) of the model")
      ->capture_default_str();
  cmd->add_option("--member", measure.member, "npz member holding the routing")
      ->capture_default_str();
  add_output_option(*cmd, args->output, "Write the target table here (`layer,target` lines)");
  add_json_flag(*cmd, args->json, "Print JSON instead of text");
  cmd->add_option("--svg", args->svg, "Draw per-layer max/mean and per-rank load");
  return {cmd, [args, cmd] { return run_measure(*args, *cmd); }};
}

}  // namespace rtb::tool::check_payload
