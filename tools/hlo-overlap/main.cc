// hlo-overlap: reads a scheduled HLO module dump and reports which collectives the schedule
// hides behind compute and which are exposed; with two dumps, the same side by side (A/B).
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/text.h"
#include "rtb/hlo/analysis.h"
#include "rtb/hlo/report.h"

namespace {

constexpr const char* kExamples =
    R"(  hlo-overlap module_0267.jit_train_step.after_optimizations.txt
  hlo-overlap dump.txt --top 20 --computation 'while_body|wide\.region'
  hlo-overlap dump.txt --json -o overlap.json --svg schedule.svg
  hlo-overlap baseline.txt candidate.txt          # A/B of a flag: exit 1 if they differ
  hlo-overlap dump.txt --fail-if-exposed-bytes 64MiB   # exit 1 above the budget
)";

// "1048576", "64MiB", "1.5GiB", "512KiB" -> bytes.
std::int64_t parse_bytes(const std::string& text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value < 0) {
    rtb::fail("--fail-if-exposed-bytes {}: expected a byte count such as 1048576 or 64MiB", text);
  }
  std::string unit(end, text.data() + text.size());
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "KiB" || unit == "K") scale = 1024.0;
  if (unit == "MiB" || unit == "M") scale = 1024.0 * 1024;
  if (unit == "GiB" || unit == "G") scale = 1024.0 * 1024 * 1024;
  if (unit == "TiB" || unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  if (scale == 0)
    rtb::fail("--fail-if-exposed-bytes {}: unknown unit '{}' (B, KiB, MiB, GiB, TiB)", text, unit);
  double bytes = value * scale;
  // Converting a double beyond int64's range is undefined behaviour: refuse it first.
  if (!(bytes < 0x1p63)) rtb::fail("--fail-if-exposed-bytes {}: too large", text);
  return static_cast<std::int64_t>(bytes);
}

}  // namespace

int main(int argc, char** argv) {
  rtb::tool::Tool tool(
      {"hlo-overlap",
       "Reads a scheduled HLO module dump (*after_optimizations.txt) and reports, for every "
       "asynchronous collective, copy and async op, whether the schedule puts compute (fusion, "
       "dot, "
       "convolution, custom-call, or a while/call/conditional containing them) between its start "
       "and its done: overlapped, or exposed. Synchronous collectives are exposed. Totals are "
       "weighted by known_trip_count of enclosing while loops. With two dumps A B it prints both "
       "side by side with deltas and exits like diff: 0 same, 1 different (a per-kind total "
       "differs), 2 error. The file is streamed; memory stays bounded by the largest "
       "computation.",
       kExamples});
  CLI::App& app = tool.app();
  std::vector<std::string> inputs;
  std::string output = "-";
  std::optional<std::string> svg_file;
  std::optional<std::string> fail_if_exposed;
  bool json = false;
  bool allow_truncated = false;
  rtb::hlo::Options options;
  rtb::hlo::ReportOptions report;
  std::size_t max_statement_mib = options.max_statement_bytes >> 20;

  app.add_option("DUMP", inputs,
                 "HLO text dump or binary HloProto (*.hlo.pb) (- for stdin); give two for an A/B "
                 "comparison")
      ->required()
      ->expected(1, 2);
  app.add_flag("--json", json, "Print the JSON document instead of the text report");
  app.add_option("-o,--output", output, "Write the report here (default: - for stdout)");
  app.add_option("--svg", svg_file,
                 "Draw the schedule of the computation with the most entries (among those "
                 "--computation selects) to this SVG file");
  app.add_option("--computation", options.computation_regex,
                 "Report only computations whose name matches this regex (ECMAScript, search)");
  app.add_option("--top", report.top, "How many exposed entries to list")->capture_default_str();
  app.add_flag("--list", report.list, "List every entry in the text report");
  app.add_option("--fail-if-exposed-bytes", fail_if_exposed,
                 "Exit 1 if the exposed collective bytes (weighted) of a dump exceed this "
                 "(e.g. 64MiB)");
  app.add_flag("--allow-truncated", allow_truncated,
               "Exit 0 for a dump that ends inside a computation (default: report it, exit 1)");
  app.add_option("--threads", options.threads,
                 "Threads that scan a dump read from a file while another analyses (0: the "
                 "machine's cores, at most 4, for files of 4 MiB or more; 1: one thread does "
                 "everything). The report is the same for any number.")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--max-statement-mib", max_statement_mib,
                 "Longest statement (instruction or header) accepted, in MiB")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));

  return tool.run(argc, argv, [&]() -> int {
    // 1. Options that need checking before reading anything.
    std::optional<std::int64_t> budget;
    if (fail_if_exposed) budget = parse_bytes(*fail_if_exposed);
    if (svg_file && inputs.size() == 2) rtb::fail("--svg draws one dump; give one DUMP");
    rtb::tool::require_one_stdin(inputs, "the two dumps");
    options.max_statement_bytes = max_statement_mib << 20;
    options.keep_schedule = svg_file.has_value();

    // 2. Analyse each dump (streamed).
    std::vector<rtb::hlo::Analysis> analyses;
    for (const std::string& input : inputs) {
      analyses.push_back(rtb::hlo::analyze_file(input, options));
      const rtb::hlo::Analysis& a = analyses.back();
      for (const rtb::hlo::Warning& w : a.warnings) {
        if (w.line > 0) {
          spdlog::info("{}:{}: {}", a.file, w.line, w.message);
        } else {
          spdlog::info("{}: {}", a.file, w.message);
        }
      }
      if (!a.scheduled)
        spdlog::warn("{}: the module is not scheduled; windows are indicative", a.file);
      if (a.truncated) {
        spdlog::warn("{}:{}: truncated dump: {}; reporting what precedes it", a.file,
                     a.truncated_line, a.truncation_reason);
      }
    }

    // 3. Report.
    std::string text;
    if (analyses.size() == 2) {
      text = json ? rtb::hlo::format_compare_json(analyses[0], analyses[1], report)
                  : rtb::hlo::format_compare_text(analyses[0], analyses[1]);
    } else {
      text = json ? rtb::hlo::format_json(analyses[0], report)
                  : rtb::hlo::format_text(analyses[0], report);
    }
    rtb::write_output(output, text);
    if (svg_file) rtb::write_output(*svg_file, rtb::hlo::render_svg(analyses[0]));

    // 4. Exit code. One dump: 0 analysed; 1 truncated (unless allowed) or over the exposed-bytes
    // budget. Two dumps (diff-like): 0 same, 1 different (see rtb::hlo::compare_differences) or
    // over the budget; a truncated dump is only warned about, since it is compared as it is.
    int exit_code = rtb::tool::kExitOk;
    if (analyses.size() == 2) {
      std::vector<std::string> differences =
          rtb::hlo::compare_differences(analyses[0], analyses[1]);
      if (!differences.empty()) {
        spdlog::info("A and B differ in {} kind(s)", differences.size());
        exit_code = rtb::tool::kExitDifferent;
      }
    }
    for (const rtb::hlo::Analysis& a : analyses) {
      if (a.truncated && !allow_truncated && analyses.size() == 1) {
        exit_code = rtb::tool::kExitCheckFailed;
      }
      if (budget && a.total_collectives.exposed_bytes > *budget) {
        spdlog::error("{}: exposed collective bytes {} ({}) exceed the budget {} ({})", a.file,
                      a.total_collectives.exposed_bytes,
                      rtb::human_bytes(a.total_collectives.exposed_bytes), *budget,
                      rtb::human_bytes(*budget));
        exit_code = rtb::tool::kExitCheckFailed;
      }
    }
    return exit_code;
  });
}
