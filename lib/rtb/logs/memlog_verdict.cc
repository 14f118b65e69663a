#include "rtb/logs/memlog_verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/slice.h"

namespace rtb::logs {

std::optional<HbmBudget> hbm_budget(const MemLog& log, const HbmOptions& options) {
  if (options.hbm_gib) return HbmBudget{*options.hbm_gib, "--hbm-gib"};
  if (options.chip) {
    const TpuType& type = find_tpu_type(*options.chip);
    return HbmBudget{type.hbm_gib_per_device, "chip " + type.name};
  }
  if (log.capacity) {
    // The log prints sizes with two decimals (94.74G); keep that rather than the bytes' rounding.
    return HbmBudget{std::round(static_cast<double>(*log.capacity) / kBytesPerGiB * 100) / 100,
                     "log"};
  }
  if (log.compile_topology) {
    std::size_t dash = log.compile_topology->rfind('-');
    try {
      const TpuType& type = find_tpu_type(log.compile_topology->substr(0, dash));
      return HbmBudget{type.hbm_gib_per_device, "compile_topology " + *log.compile_topology};
    } catch (const Error&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Summary summarize(std::vector<MemLog> logs, const HbmOptions& options) {
  Summary summary;
  summary.logs = std::move(logs);
  for (const MemLog& log : summary.logs) {
    LogVerdict verdict;
    verdict.hbm = hbm_budget(log, options);
    verdict.oom = log.oom_lines > 0;
    bool all_known = true, all_fit = true;
    std::optional<std::size_t> measured, estimate;
    for (std::size_t i = 0; i < log.programs.size(); ++i) {
      ProgramSource source = log.programs[i].source;
      if (source == ProgramSource::kTpuProgramUsage && !measured) measured = i;
      if (source == ProgramSource::kEstimatedTotal && !estimate) estimate = i;
    }
    for (const ProgramMemory& program : log.programs) {
      ProgramVerdict pv;
      pv.decides = !(measured && program.source == ProgramSource::kEstimatedTotal);
      if (verdict.hbm) {
        pv.headroom_gib = verdict.hbm->gib - static_cast<double>(program.need()) / kBytesPerGiB;
        // Compared in bytes, so a program exactly at the budget fits.
        pv.fits = static_cast<double>(program.need()) <= verdict.hbm->gib * kBytesPerGiB;
        if (pv.decides) all_fit = all_fit && *pv.fits;
      } else {
        all_known = false;
      }
      verdict.programs.push_back(pv);
    }
    if (measured && estimate && verdict.programs[*measured].fits &&
        verdict.programs[*measured].fits != verdict.programs[*estimate].fits) {
      verdict.disagreement =
          EstimateDisagreement{*estimate, *measured, *verdict.programs[*measured].fits};
    }
    if (verdict.oom || !all_fit) {
      verdict.fits = false;
    } else if (all_known) {
      verdict.fits = true;
    }
    if (!summary.error && !verdict.oom) {
      if (std::vector<std::string> problems = log.problems(); !problems.empty()) {
        summary.error = Error(problems.front());
      } else if (log.programs.empty()) {
        summary.error = Error(display_name(log.source), 0,
                              "holds no memory analysis (no CompiledMemoryStats, total memory "
                              "size or XLA::TPU program HBM usage line) and reports no "
                              "out-of-memory error");
      } else if (!verdict.hbm) {
        summary.error = Error(display_name(log.source), 0,
                              "cannot tell the HBM per device (the log states no capacity and "
                              "names no compile_topology): give --hbm-gib or --chip");
      }
    }
    summary.verdicts.push_back(std::move(verdict));
  }
  return summary;
}

Outcome Summary::outcome() const {
  if (error) return Outcome::kError;
  return outcome_of(std::any_of(verdicts.begin(), verdicts.end(),
                                [](const LogVerdict& verdict) { return verdict.fits == false; }));
}

}  // namespace rtb::logs
