// What the benchmarks of tests/perf share: running a whole process as a user would, timed.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace rtb::perf {

struct ChildRun {
  int status = -1;       // as wait4 gives it
  double seconds = 0;    // wall time from spawn to exit
  long max_rss_kib = 0;  // the child's peak RSS
  std::string output;    // its stdout
};

// Runs argv (argv[0] a path) in a child process with stdout captured (or, with discard_stdout,
// sent to /dev/null, as `cmd > /dev/null` does), waiting with wait4 for its peak RSS. Throws
// std::runtime_error if it cannot start.
ChildRun run_child(const std::vector<std::string>& args, bool discard_stdout = false);

// Runs two commands alternately `rounds` times in each iteration of `state` (so that a drift in
// the machine's load reaches both alike), stdout discarded: the medians of their wall times, or
// nullopt after skipping `state` with `failure` if a run failed.
struct Medians {
  double first = 0, second = 0;
};
std::optional<Medians> alternate(benchmark::State& state, const std::vector<std::string>& first,
                                 const std::vector<std::string>& second, int rounds,
                                 const char* failure);

// True when the child exited with status 0.
bool succeeded(const ChildRun& run);

// A file a benchmark generates, in a fresh temporary directory that is removed with it.
// `more(chunk)` appends the next bytes to `chunk` and returns false when the file is complete;
// the bytes go out in pieces of 8 MiB and are written back to disk (fsync) before anything is
// measured: the kernel otherwise flushes the dirty pages seconds later, on the same two cores, in
// the middle of whichever benchmark runs then (the readers are measured on a file in the page
// cache). Throws std::runtime_error.
class GeneratedFile {
 public:
  GeneratedFile(const std::string& prefix, const std::string& name,
                const std::function<bool(std::string& chunk)>& more);
  ~GeneratedFile();
  GeneratedFile(const GeneratedFile&) = delete;
  GeneratedFile& operator=(const GeneratedFile&) = delete;
  const std::string& path() const { return path_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::string dir_;
  std::string path_;
  std::uint64_t bytes_ = 0;
};

// The counters of an in-process reader of a `bytes`-byte file, once its iterations ran: bytes
// per second, file_MiB, GB_per_s, and the process's peak RSS (its own baseline included:
// rss_floor_MiB, what reset_peak_rss_mib returned before the runs).
void set_reader_counters(benchmark::State& state, std::uint64_t bytes, double rss_floor_mib);

// Resets this process's peak RSS (VmHWM) to its current RSS (Linux: clear_refs 5) and returns
// that current RSS in MiB (0 when /proc is unavailable). A spawned child inherits the parent's
// peak as its own starting peak (Linux carries the old mm's high-water mark across exec).
double reset_peak_rss_mib();
// This process's peak RSS (VmHWM) in MiB.
double peak_rss_mib();

// The median of `values` (not empty).
double median(std::vector<double> values);

}  // namespace rtb::perf
