// check-payload tiles: attention tiles per context rank with the padding at the end and first, of
// a payload file's rows or of rows laid out from options.
#include "rtb/payload/tiles.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

#include "check-payload/subcommands.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/payload/npy.h"
#include "rtb/payload/report.h"

namespace rtb::tool::check_payload {
namespace {

struct TilesArgs {
  std::string file;
  payload::TileSettings tiles;
  payload::PayloadOptions layout;
  bool json = false;
};

Outcome run_tiles(const TilesArgs& args, const CLI::App& command, const Tool& tool) {
  payload::TileSettings tiles = args.tiles;
  tiles.pad_align = args.layout.pad_align;
  tiles = payload::resolve_tile_settings(tiles);
  payload::TilesReport report;
  std::string source_name;
  if (!args.file.empty()) {
    for (const char* option :
         {"--rows", "--tokens", "--real-len", "--segments", "--final-rows", "--seed"}) {
      if (command.count(option) > 0) {
        fail("{} describes rows to lay out; with FILE the rows come from the file", option);
      }
    }
    report = payload::count_payload_tiles(FileSource(args.file, FileAccess::kRandom), tiles);
    source_name = display_name(args.file);
  } else {
    if (command.count("--tokens") == 0) fail("give a payload FILE or --tokens");
    std::vector<Diagnostic> diagnostics;
    payload::PayloadOptions resolved = payload::resolve_layout_options(args.layout, &diagnostics);
    tool.report_diagnostics(diagnostics);
    report = payload::count_layout_tiles(resolved, tiles);
    report.diagnostics = std::move(diagnostics);
    source_name =
        fmt::format("rows laid out from options ({} real tokens, {} {})", resolved.real_len,
                    resolved.segments, resolved.segments == 1 ? "segment" : "segments");
  }
  write_output("-", args.json ? payload::format_tiles_json(source_name, report)
                              : payload::format_tiles_text(source_name, report));
  return Outcome::kPass;
}

}  // namespace

Subcommand add_tiles(CLI::App& app, const Tool& tool) {
  auto args = std::make_shared<TilesArgs>();
  payload::TileSettings& tiles = args->tiles;
  args->layout.rows = 1;
  CLI::App* cmd =
      app.add_subcommand("tiles", "Attention tiles per context rank, padding at the end and first");
  cmd->add_option("FILE", args->file, "Payload .npz (its segment_ids); or give --tokens");
  cmd->add_option("--cp", tiles.cp, "Context parallelism")->required();
  cmd->add_option("--block-q", tiles.block_q, "Forward query block")->required();
  cmd->add_option("--block-kv", tiles.block_kv, "Forward key/value block")->required();
  cmd->add_option("--dkv-block-q", tiles.dkv_block_q, "dK/dV query block (default: forward)");
  cmd->add_option("--dkv-block-kv", tiles.dkv_block_kv, "dK/dV key/value block (default: forward)");
  add_layout_options(cmd, args->layout, false);
  add_json_flag(*cmd, args->json, "Print JSON instead of text");
  return {cmd, [args, cmd, &tool] { return run_tiles(*args, *cmd, tool); }};
}

}  // namespace rtb::tool::check_payload
