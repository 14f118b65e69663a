// The verdict on one or more memory logs (aot-summarize, aot-check --run): the HBM per device each
// is judged against, each program's headroom, and whether everything fits.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/outcome.h"
#include "rtb/logs/memlog.h"

namespace rtb::logs {

struct HbmOptions {
  std::optional<double> hbm_gib;    // --hbm-gib
  std::optional<std::string> chip;  // --chip: the chip table's HBM per device
};

struct HbmBudget {
  double gib = 0;
  std::string source;  // "--hbm-gib", "chip tpu7x", "log", "compile_topology tpu7x-256"
};

// A log's HBM per device: --hbm-gib, else --chip, else the capacity the log states, else the chip
// of its compile_topology; nullopt when none of them is known. Throws rtb::Error for an unknown
// --chip.
std::optional<HbmBudget> hbm_budget(const MemLog& log, const HbmOptions& options);

struct ProgramVerdict {
  std::optional<double> headroom_gib;  // HBM - need
  std::optional<bool> fits;
  // False for MaxText's compile-time estimate (Total estimated memory size) in a log that also
  // has libtpu's measured program usage: the measurement outranks the estimate.
  bool decides = true;
};

// A live run whose compile-time estimate and measured usage disagree on whether it fits.
struct EstimateDisagreement {
  std::size_t estimate = 0;  // index into MemLog::programs (ProgramSource::kEstimatedTotal)
  std::size_t measured = 0;  // index into MemLog::programs (ProgramSource::kTpuProgramUsage)
  bool measured_fits = false;
};

struct LogVerdict {
  std::optional<HbmBudget> hbm;
  std::vector<ProgramVerdict> programs;  // parallel to MemLog::programs
  bool oom = false;
  std::optional<bool>
      fits;  // false: an OOM or a deciding program that does not fit; nullopt: unknown
  std::optional<EstimateDisagreement> disagreement;
};

struct Summary {
  std::vector<MemLog> logs;
  std::vector<LogVerdict> verdicts;
  // Why the logs cannot be judged (the first log with problems, without any analysis or
  // without a known HBM, unless it reports an out-of-memory error).
  std::optional<Error> error;

  // kError with `error`; kFail when a log reports OOM or a program needs more than the HBM;
  // kPass when every program fits.
  Outcome outcome() const;
};

// Judges every log (see Summary::outcome). Where a live run logs both MaxText's estimate and
// libtpu's measured usage, the measurement decides and a disagreement is recorded.
Summary summarize(std::vector<MemLog> logs, const HbmOptions& options);

}  // namespace rtb::logs
