// diff-configs: compares the resolved MaxText configs of two runs from their logs (`Config param
// <key>: <value>` lines), or a log with a render's MaxText flags (see README.md).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/mains.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/config_diff.h"
#include "rtb/bench/diff_report.h"

namespace rtb::tool {
namespace {

constexpr const char* kExamples =
    R"(  diff-configs run-a.log run-b.log                 # last complete dump of each
  diff-configs run.log --list-dumps                 # the dumps of a log, with line numbers
  diff-configs run.log restarted.log --dump 2 --keys '^(ici_|sa_block)'
  diff-configs bench.yaml bench-pod.log             # did my flags reach the resolved config?
  kubectl logs POD | diff-configs - baseline.log --json
)";

}  // namespace

int diff_configs_main(int argc, char** argv) {
  Tool tool(
      {"diff-configs",
       "Compares the resolved MaxText configs of two runs from their logs (the `Config param "
       "<key>: <value>` dump MaxText logs; the last complete dump of a log by default), values "
       "compared by meaning (True/true, 1.0/1, list spacing) but reported as printed. A side may "
       "also be a render (e2e DRY_RUN or bench): the keys Tunix's trainer passes MaxText for its "
       "argv and environment (with Tunix's defaults and constants), then MAXTEXT_EXTRA_FLAGS; "
       "against a log only those keys are compared, a default or constant only where the log "
       "has it too.",
       kExamples});
  CLI::App& app = tool.app();
  std::vector<std::string> inputs;
  std::optional<std::string> keys;
  std::string color = "auto";
  bool list_dumps = false, json = false;
  rtb::k8s::RoleMains mains;

  add_one_or_two_inputs(app, inputs, "A B",
                        "Two logs or renders (- for stdin); one with --list-dumps");
  // Signed, so that -1 is refused rather than read as 2^64 - 1 (see dump_number below).
  std::optional<long long> dump_all, dump_first, dump_second;
  app.add_option("--dump", dump_all, "N: use dump N (1-based, see --list-dumps) of each log");
  app.add_option("--dump-a", dump_first, "N: use dump N of A");
  app.add_option("--dump-b", dump_second, "N: use dump N of B");
  app.add_flag("--list-dumps", list_dumps, "List the config dumps of each log with their lines");
  app.add_option("--keys", keys, "REGEX: compare only keys that match (ECMAScript, search)");
  add_json_flag(app, json, "Machine-readable output (rtb.diff-configs/1)");
  add_color_option(app, color);
  add_trainer_main_option(app, mains, " (renders)");

  return tool.run(argc, argv, [&] {
    auto dump_number = [](const char* option, const std::optional<long long>& value) {
      if (value && *value < 1) fail("{} {}: dump numbers start at 1", option, *value);
      return value ? std::optional<std::size_t>(static_cast<std::size_t>(*value)) : std::nullopt;
    };
    std::optional<std::size_t> dump = dump_number("--dump", dump_all);
    std::optional<std::size_t> dump_a = dump_number("--dump-a", dump_first);
    std::optional<std::size_t> dump_b = dump_number("--dump-b", dump_second);
    require_one_stdin(inputs, "A and B");
    if (list_dumps) {
      std::vector<bench::ConfigSide> sides;
      for (const std::string& input : inputs) {
        bench::ConfigLogOptions options;
        options.list_only = true;
        bench::ConfigSide side = bench::read_config_side(input, options, mains);
        if (side.kind == bench::ConfigSide::Kind::kLog && side.dumps.empty()) {
          fail_at(side.source, 0,
                  "no `Config param` line: not a MaxText log, or one whose "
                  "config was not logged");
        }
        sides.push_back(std::move(side));
      }
      tool.write_report(
          "-", json ? bench::format_dump_list_json(sides) : bench::format_dump_list(sides));
      return Outcome::kPass;
    }
    if (inputs.size() != 2) fail("give two inputs A and B (or --list-dumps)");
    std::optional<std::regex> pattern;
    if (keys) {
      try {
        pattern.emplace(*keys, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        fail("--keys {}: not a regular expression: {}", *keys, e.what());
      }
    }
    bench::ConfigLogOptions a_options, b_options;
    a_options.dump = dump_a ? dump_a : dump;
    b_options.dump = dump_b ? dump_b : dump;
    bench::ConfigSide a = bench::read_config_side(inputs[0], a_options, mains);
    bench::ConfigSide b = bench::read_config_side(inputs[1], b_options, mains);
    // Masked before comparing: a changed secret shows as two fingerprints, an unchanged one not.
    logs::mask_settings(a.settings, tool.masker());
    logs::mask_settings(b.settings, tool.masker());
    for (const bench::ConfigSide* side : {&a, &b}) {
      if (side->kind == bench::ConfigSide::Kind::kLog) {
        spdlog::info("{}: dump {} of {}, {} keys", side->source, side->dump, side->dumps.size(),
                     side->settings.size());
      } else {
        spdlog::info("{}: a render, {} MaxText settings", side->source, side->settings.size());
      }
    }
    std::vector<bench::ConfigDifference> differences =
        bench::diff_configs(a, b, [&](std::string_view key) {
          return !pattern || std::regex_search(key.begin(), key.end(), *pattern);
        });
    std::string out = json ? bench::format_config_json(a, b, differences, keys)
                           : bench::format_config_text(differences, {use_color(color), false});
    tool.write_report("-", out);
    return bench::config_outcome(differences);
  });
}

}  // namespace rtb::tool
