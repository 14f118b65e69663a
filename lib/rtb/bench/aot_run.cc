// aot-check --run (aot.h): the compile run here and its log summarized, for one render or for
// each arm of a same-pod A/B.
#include <fmt/format.h>
#include <sys/stat.h>

#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/bench/aot.h"
#include "rtb/logs/memlog.h"

namespace rtb::bench {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

[[noreturn]] void fail_no_maxtext(const AotOptions& options) {
  fail(
      "--run needs a Python with MaxText: {} cannot import {} (install MaxText, Tunix and "
      "libtpu, or name such an interpreter with --python; --print writes the script to run "
      "elsewhere)",
      options.python, kEngineCompileModule);
}

}  // namespace

std::string aot_arm_log_path(std::string_view log, std::string_view arm) {
  std::size_t name = log.rfind('/');
  name = name == std::string_view::npos ? 0 : name + 1;
  std::size_t dot = log.rfind('.');
  // A dot that starts the file name (.log) or lies in a folder's name is no extension.
  if (dot == std::string_view::npos || dot <= name) dot = log.size();
  return fmt::format("{}-{}{}", log.substr(0, dot), arm, log.substr(dot));
}

void check_aot_python(const AotOptions& options) {
  if (run_quiet({options.python, "-c", std::string(maxtext_probe_code())}) != 0)
    fail_no_maxtext(options);
}

logs::Summary run_aot(const AotPlan& plan, const AotOptions& options,
                      std::optional<double> hbm_gib) {
  if (!options.log) fail("internal error: run_aot without a log path");
  const std::string& log = *options.log;
  int status = run_bash(aot_script(plan, options));
  if (status == kAotNoMaxText && !exists(log)) fail_no_maxtext(options);
  if (!exists(log)) fail("the compile script exited with status {} before writing {}", status, log);
  logs::HbmOptions hbm;
  hbm.hbm_gib = hbm_gib;
  if (!hbm_gib) hbm.chip = plan.chip;
  std::vector<logs::MemLog> memlogs;
  memlogs.push_back(logs::read_memlog(log));
  logs::Summary summary = logs::summarize(std::move(memlogs), hbm);
  if (summary.error) {
    if (status != 0) {
      fail("the compile exited with status {} and its log {} reports no memory analysis: {}",
           status, log, summary.error->what());
    }
    throw *summary.error;
  }
  return summary;
}

}  // namespace rtb::bench
