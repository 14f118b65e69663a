// aot-summarize: per-kernel memory, cost and HBM headroom from MaxText compile and run logs, and an
// A/B of several (see README.md).
#include <spdlog/spdlog.h>

#include <optional>
#include <string>
#include <vector>

#include "common/mains.h"
#include "common/tool.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/slice.h"
#include "rtb/logs/memlog_format.h"

namespace rtb::tool {
namespace {

constexpr const char* kExamples = R"(  aot-summarize logs/aot-bench-20261030T011938Z.log
  aot-summarize --chip tpu7x base.log vmem65536.log        # A/B: a column each, deltas vs the first
  aot-summarize --hbm-gib 94.74 --json train_compile.log
  kubectl logs JOB-POD | aot-summarize --chip v5p -        # a live run's memory lines
)";

}  // namespace

int aot_summarize_main(int argc, char** argv) {
  Tool tool(
      {"aot-summarize",
       "Summarizes the memory and cost analyses in MaxText logs: the trainer-engine AOT compile "
       "(a section per kernel), train_compile, and live runs (Total estimated memory size, "
       "XLA::TPU program HBM usage), and any out-of-memory report. Per kernel: argument, output, "
       "alias, temp, generated code, host temp, resident = argument + output - alias + temp, "
       "flops, bytes accessed, and the headroom against the HBM per device. Several logs: a "
       "column each and deltas against the first. Exit 0 every kernel fits, 1 some kernel does "
       "not fit or the log reports out of memory, 2 a log that holds no analysis.",
       kExamples});
  CLI::App& app = tool.app();
  std::vector<std::string> paths;
  std::optional<double> hbm_gib;
  std::optional<std::string> chip;
  std::string output = "-";
  bool json = false;

  app.add_option("LOG", paths, "Compile or run logs (- for stdin)")->required();
  CLI::Option* hbm_option =
      app.add_option("--hbm-gib", hbm_gib, "HBM per device in GiB to judge against")
          ->check(CLI::PositiveNumber);
  CLI::Option* chip_option =
      app.add_option("--chip", chip,
                     "Take the HBM per device from the chip table: tpu7x (v7x), v5p, v6e, v5e, v4 "
                     "(default: what the log says, e.g. its compile_topology)");
  hbm_option->excludes(chip_option);
  add_output_option(app, output);
  add_json_flag(app, json, "Machine-readable output (schema rtb.aot-summarize/1)");

  return tool.run(argc, argv, [&] {
    if (chip) find_tpu_type(*chip);  // an unknown chip is an option error, before any log
    std::vector<logs::MemLog> memlogs;
    for (const std::string& path : paths) memlogs.push_back(logs::read_memlog(path));
    logs::Summary summary = logs::summarize(std::move(memlogs), {hbm_gib, chip});
    if (summary.error) {
      if (json) tool.write_report(output, logs::format_summary_json(summary));
      throw *summary.error;
    }
    // A log that reports out of memory may still hold malformed lines: warn about them (and,
    // with -v, say its notes).
    for (const logs::MemLog& log : summary.logs) tool.report_diagnostics(log.diagnostics);
    tool.write_report(
        output, json ? logs::format_summary_json(summary) : logs::format_summary_table(summary));
    return summary.outcome();
  });
}

}  // namespace rtb::tool
