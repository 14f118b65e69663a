// Memory and cost analyses in MaxText logs, read line by line (logs can be gigabytes):
// - the trainer-engine AOT compile (maxtext.training_engine.maxtext_engine_compile): a section
//   `--- <kernel> ---` per kernel (fwd_bwd, fwd_bwd_accum or accumulate, update), each with
//   `Cost analysis: <dict>` and `Memory analysis: CompiledMemoryStats(...)`, and in newer versions
//   a per-device table whose `+state` column is the train state a kernel runs beside without being
//   passed it, and a `TRAIN-KERNEL DEVICE PEAK: X GiB` line;
// - train_compile (maxtext.trainers.pre_train.train_compile): the same two lines for its one
//   unnamed program (`train_step` here);
// - live runs: `Total estimated memory size: X GB, estimated output size: ...` (and the older
//   `Total memory size: X GB, Output size: ...`), GB meaning 2^30 bytes, and libtpu's
//   `XLA::TPU program HBM usage: X / Y` lines, summarized as the largest program;
// - out-of-memory reports in any of them: RESOURCE_EXHAUSTED, "the total memory required for HLO
//   temporaries (X) exceeds available HBM (Y)", "Ran out of memory in memory space hbm. Used X of Y
//   hbm", and runtime failures "Attempting to allocate X. That was not possible. There are Y
//   free." and "Attempting to reserve X at the bottom of memory. That was not possible. There are
//   Y free, Z reserved, and W reservable." (E0101 program loads), also wrapped over up to three
//   lines as users paste them. Free memory is not the device's capacity.
// Terminal escapes (colours of a Python traceback: CSI and OSC sequences) are removed from every
// line before it is read.
// CompiledMemoryStats is read in both the 5-field and the 10-field (host) form; other fields are
// ignored, and each `key=value` item splits at its first `=`. The cost analysis is parsed as the
// Python literal it is (base/literal.h): a dict, or a one-element list of one.
//
// Malformed input (a truncated dict, stats that do not parse, a kernel header without stats) is
// recorded as a problem with its line, never thrown, so that a log which also reports an
// out-of-memory error still says so.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/diagnostic.h"

namespace rtb::logs {

enum class MemLogKind { kUnknown, kEngineCompile, kTrainCompile, kLiveRun };
std::string_view memlog_kind_name(MemLogKind kind);  // "engine compile", ...
std::string_view memlog_kind_id(MemLogKind kind);    // "engine_compile", ... (JSON)

enum class ProgramSource {
  kMemoryAnalysis,   // Memory analysis: CompiledMemoryStats(...)
  kEstimatedTotal,   // Total (estimated) memory size: ... (live train.py)
  kTpuProgramUsage,  // XLA::TPU program HBM usage: X / Y (the largest of them)
};
std::string_view program_source_id(ProgramSource source);

struct CostAnalysis {
  std::optional<double> flops;
  std::optional<double> bytes_accessed;
  std::optional<double> transcendentals;
  std::optional<double> optimal_seconds;
};

// One compiled program's memory per device, in bytes. Fields a source does not give are empty.
struct ProgramMemory {
  std::string name;  // the kernel, "train_step", or "tpu_programs"
  std::size_t line = 0;
  ProgramSource source = ProgramSource::kMemoryAnalysis;
  bool has_memory = false;
  std::optional<long long> argument, output, alias, temp, generated_code;
  std::optional<long long> host_argument, host_output, host_alias, host_temp, host_generated_code;
  long long resident = 0;  // argument + output - alias + temp (a donated buffer is in both)
  // From MaxText's engine report: train state resident while the kernel runs but not passed to
  // it (so not in its analysis), on the device and on the host.
  std::optional<long long> state, host_state;
  std::optional<long long> capacity;  // kTpuProgramUsage: the HBM the line says there is
  std::size_t count = 1;              // kTpuProgramUsage: how many programs it covers
  std::optional<CostAnalysis> cost;

  // What the device must hold while the program runs.
  long long need() const { return resident + state.value_or(0); }
};

// A size as a log printed it: the bytes, and the unit it was written in (a power of 1024: 0 for
// "B" or no unit, 1 "K", 2 "M", 3 "G", ...), so that text output keeps MiB as MiB.
struct LoggedSize {
  long long bytes = 0;
  int unit = 0;
  friend bool operator==(const LoggedSize& size, long long bytes) { return size.bytes == bytes; }
};

enum class OomKind {
  kCompile,   // the compiler's report: needed X, the memory space holds Y
  kAllocate,  // a runtime buffer allocation failed: X asked, Y free
  kReserve,   // loading a program failed to reserve X at the bottom of memory: Y free
  kOther,     // RESOURCE_EXHAUSTED and the like without figures
};
std::string_view oom_kind_id(OomKind kind);  // "compile", "allocate", "reserve", "other"

struct OomReport {
  std::size_t line = 0;
  OomKind kind = OomKind::kOther;
  std::string program;                   // the section it appeared in, if any
  std::string memory_space;              // "hbm", "vmem", ... when the text names one
  std::optional<LoggedSize> required;    // what the program or allocation needed
  std::optional<LoggedSize> available;   // the memory space's capacity (compile reports only)
  std::optional<LoggedSize> free;        // runtime failures: free memory, not the capacity
  std::optional<LoggedSize> reserved;    // reserve failures
  std::optional<LoggedSize> reservable;  // reserve failures
  std::string
      text;  // the line (a wrapped message's lines joined by a blank), trimmed, <= 300 bytes
};

struct MemLog {
  std::string source;
  MemLogKind kind = MemLogKind::kUnknown;
  std::size_t lines = 0;
  std::vector<ProgramMemory> programs;
  std::vector<OomReport> ooms;                  // the first kMaxOomReports
  std::size_t oom_lines = 0;                    // all of them
  std::optional<std::string> compile_topology;  // "Config param compile_topology: tpu7x-256"
  std::optional<long long> capacity;            // HBM per device the log itself states
  std::optional<long long> device_peak;         // TRAIN-KERNEL DEVICE PEAK
  // What the log says without failing, placed at "source:line": notes (kNote, e.g. MaxText's
  // WEIGHT-SYNC STAGING line) as read, then problems (kWarning: a line it cannot read) by line; the
  // first problem makes summarize() refuse the log. --json `diagnostics`, and `notes` / `problems`
  // (below) until rtb.aot-summarize/2.
  std::vector<Diagnostic> diagnostics;

  bool has_analysis() const { return !programs.empty(); }
  std::vector<std::string> notes() const;     // the notes' messages
  std::vector<std::string> problems() const;  // the problems as "source:line: what is wrong"
};

inline constexpr double kBytesPerGiB =
    1024.0 * 1024.0 * 1024.0;  // the log's G and GB are 2^30 bytes
inline constexpr std::size_t kMaxOomReports = 20;
inline constexpr std::size_t kMaxPrograms = 10000;
// Lines longer than this are cut; a cut line that holds an analysis is a problem.
inline constexpr std::size_t kMaxMemLogLine = std::size_t{16} << 20;

// Feeds lines one at a time (the streaming core of read_memlog / parse_memlog).
class MemLogParser {
 public:
  explicit MemLogParser(std::string source);
  ~MemLogParser();
  MemLogParser(const MemLogParser&) = delete;
  MemLogParser& operator=(const MemLogParser&) = delete;

  // `number` is 1-based; `truncated` says the line was longer than what is passed.
  void add_line(std::string_view line, std::size_t number, bool truncated = false);
  MemLog finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

MemLog parse_memlog(std::string_view text, const std::string& source);
// Streams a file ("-": stdin) with lines bounded to kMaxMemLogLine. Throws rtb::Error only when the
// file cannot be read.
MemLog read_memlog(const std::string& path);

// "21.95G", "530.00M", "1.7K", "0B", "64.00GiB": XLA's human-readable sizes (powers of 1024).
std::optional<long long> parse_byte_size(std::string_view text);
// The same, keeping the unit it was written in.
std::optional<LoggedSize> parse_logged_size(std::string_view text);
// "125.25 MiB", "14.96 GiB", "0 B": a size in the unit the log printed it in, two decimals.
std::string format_logged_size(const LoggedSize& size);

}  // namespace rtb::logs
