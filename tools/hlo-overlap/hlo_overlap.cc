// hlo-overlap: reads a scheduled HLO module dump and reports which collectives the schedule
// hides behind compute and which are exposed; with two dumps, the same side by side (A/B).
#include <spdlog/spdlog.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/mains.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/text.h"
#include "rtb/hlo/analysis.h"
#include "rtb/hlo/report.h"
#include "rtb/hlo/verdict.h"

namespace rtb::tool {
namespace {

constexpr const char* kExamples =
    R"(  hlo-overlap module_0267.jit_train_step.after_optimizations.txt
  hlo-overlap dump.txt --top 20 --computation 'while_body|wide\.region'
  hlo-overlap dump.txt --json -o overlap.json --svg schedule.svg
  hlo-overlap baseline.txt candidate.txt          # A/B of a flag: exit 1 if they differ
  hlo-overlap dump.txt --fail-if-exposed-bytes 64MiB   # exit 1 above the budget
)";

}  // namespace

int hlo_overlap_main(int argc, char** argv) {
  Tool tool(
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
  hlo::Options options;
  hlo::ReportOptions report;
  std::size_t max_statement_mib = options.max_statement_bytes >> 20;

  add_one_or_two_inputs(app, inputs, "DUMP",
                        "HLO text dump or binary HloProto (*.hlo.pb) (- for stdin); give two for "
                        "an A/B comparison");
  add_json_flag(app, json, "Print the JSON document instead of the text report");
  add_output_option(app, output, "Write the report here (default: - for stdout)");
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

  return tool.run(argc, argv, [&] {
    // 1. Options that need checking before reading anything.
    std::optional<std::int64_t> budget;
    if (fail_if_exposed) budget = parse_byte_count(*fail_if_exposed, "--fail-if-exposed-bytes");
    if (svg_file && inputs.size() == 2) fail("--svg draws one dump; give one DUMP");
    require_one_stdin(inputs, "the two dumps");
    options.max_statement_bytes = max_statement_mib << 20;
    options.keep_schedule = svg_file.has_value();

    // 2. Analyse each dump (streamed).
    std::vector<hlo::Analysis> analyses;
    for (const std::string& input : inputs) {
      analyses.push_back(hlo::analyze_file(input, options));
      const hlo::Analysis& a = analyses.back();
      tool.report_diagnostics(hlo::diagnostics_of(a));
    }

    // 3. Report.
    std::string text;
    if (analyses.size() == 2) {
      text = json ? hlo::format_compare_json(analyses[0], analyses[1], report)
                  : hlo::format_compare_text(analyses[0], analyses[1]);
    } else {
      text = json ? hlo::format_json(analyses[0], report) : hlo::format_text(analyses[0], report);
    }
    tool.write_report(output, text);
    if (svg_file) tool.write_report(*svg_file, hlo::render_svg(analyses[0]));

    // 4. Outcome (hlo::judge): one dump fails when truncated (unless allowed) or over the
    // budget; two dumps (diff-like) fail when they differ or one is over the budget.
    hlo::Verdict verdict = hlo::judge(analyses, {budget, allow_truncated});
    if (!verdict.differences.empty()) {
      spdlog::info("A and B differ in {} kind(s)", verdict.differences.size());
    }
    for (const hlo::OverBudget& over : verdict.over_budget) {
      spdlog::error("{}: exposed collective bytes {} ({}) exceed the budget {} ({})", over.file,
                    over.exposed_bytes, human_bytes(over.exposed_bytes), over.budget,
                    human_bytes(over.budget));
    }
    return verdict.outcome();
  });
}

}  // namespace rtb::tool
