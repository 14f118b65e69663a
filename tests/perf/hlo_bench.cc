// Benchmarks of the hlo-overlap reader on a generated 1 GiB scheduled dump.
//
// The dump is made of renamed copies of the complete computations of the real MaxText TPU dumps
// in testdata/hlo (every copy renames its computations and the references to them, so the call
// graph stays consistent). It is written once per run into a temporary directory and deleted at
// exit. Reported, in the same run:
//   - HloToolPeakMemory: the hlo-overlap tool (--json) on the file in a child process: peak RSS
//                        (wait4 ru_maxrss) and wall time (needs bin/hlo-overlap next to us);
//   - HloAnalyzeFile:   the library (rtb::hlo::analyze_file) in this process: bytes/s and the
//                        process's peak RSS;
//   - HloPythonBaseline: tests/perf/hlo_baseline.py (a line-by-line regex parser) run by
//                        /usr/bin/python3 on the same file: bytes/s, and the speed-up of the C++
//                        reader over it: cpp_over_python from its best run, cpp_mean_over_python
//                        from all its runs (bytes over seconds).
// Goals (issue 6): >= 1 GB/s, >= 20x the Python parser, peak memory < 256 MB.
//
// Environment: RTB_HLO_BENCH_BYTES overrides the dump size (default 1 GiB);
// RTB_TESTDATA_DIR overrides the fixture directory (default: the repository's testdata/).
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "perf_util.h"
#include "rtb/hlo/analysis.h"

namespace {

namespace fs = std::filesystem;

fs::path source_dir() { return fs::path(RTB_PERF_SOURCE_DIR) / "tests" / "perf"; }

fs::path testdata_dir() {
  if (const char* env = std::getenv("RTB_TESTDATA_DIR")) return env;
  return RTB_PERF_TESTDATA_DIR;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

// A source text cut into literal pieces and computation-name references (renamed per copy).
struct Template {
  std::vector<std::string> literals;  // literals[i] precedes names[i]; one more literal at the end
  std::vector<std::string> names;
};

// The complete computations of one dump (the dumps are cut at 2000 lines: drop the tail).
std::string complete_computations(const std::string& text) {
  std::size_t first = std::string::npos;
  std::size_t last_close = std::string::npos;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    if (first == std::string::npos && !line.empty() &&
        (line[0] == '%' || line.rfind("ENTRY", 0) == 0)) {
      first = at;
    }
    if (first != std::string::npos && !line.empty() && line[0] == '}') last_close = end;
    at = end + 1;
  }
  if (first == std::string::npos || last_close == std::string::npos) return {};
  return text.substr(first, last_close + 1 - first) + "\n";
}

Template make_template(const std::string& body) {
  std::unordered_set<std::string> computations;
  std::size_t at = 0;
  while (at < body.size()) {
    std::size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    if (body[at] == '%') {
      std::size_t name_end = at + 1;
      while (name_end < end && is_name_char(body[name_end])) ++name_end;
      computations.insert(body.substr(at + 1, name_end - at - 1));
    }
    at = end + 1;
  }
  Template t;
  std::size_t literal_begin = 0;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '%') continue;
    std::size_t end = i + 1;
    while (end < body.size() && is_name_char(body[end])) ++end;
    std::string name = body.substr(i + 1, end - i - 1);
    if (computations.count(name) == 0) continue;
    t.literals.push_back(body.substr(literal_begin, i + 1 - literal_begin));
    t.names.push_back(std::move(name));
    literal_begin = end;
    i = end - 1;
  }
  t.literals.push_back(body.substr(literal_begin));
  return t;
}

// The generated dump: created on first use, deleted with its directory at exit.
class GeneratedDump {
 public:
  static GeneratedDump& get() {
    static GeneratedDump dump;
    return dump;
  }
  const std::string& path() const { return path_; }
  std::uint64_t bytes() const { return bytes_; }
  // Best C++ bytes/s seen in this run (for the ratio over the Python baseline).
  double best_cpp_rate() const { return best_cpp_rate_; }
  double mean_cpp_rate() const { return cpp_seconds_ > 0 ? cpp_bytes_ / cpp_seconds_ : 0; }
  void note_cpp_run(double seconds) {
    best_cpp_rate_ = std::max(best_cpp_rate_, static_cast<double>(bytes_) / seconds);
    cpp_bytes_ += static_cast<double>(bytes_);
    cpp_seconds_ += seconds;
  }

 private:
  GeneratedDump() {
    std::uint64_t target = std::uint64_t{1} << 30;
    if (const char* env = std::getenv("RTB_HLO_BENCH_BYTES")) target = std::stoull(env);
    std::vector<Template> templates;
    for (const char* name : {"maxtext_ref_llama3_8b_tpu-v6e-4_8fcc9e13.hlo.txt",
                             "maxtext_ref_deepseek3_tpu-v6e-4_8fcc9e13.hlo.txt",
                             "maxtext_ref_deepseek3_tpu-v6e-4_28b37f85_sparsecore.hlo.txt"}) {
      std::string body = complete_computations(read_all(testdata_dir() / "hlo" / name));
      if (!body.empty()) templates.push_back(make_template(body));
    }
    if (templates.empty())
      throw std::runtime_error("no HLO fixtures under " + testdata_dir().string());
    std::uint64_t copy = 0;
    std::uint64_t written = 0;
    bool header = true;
    file_ = std::make_unique<rtb::perf::GeneratedFile>(
        "rtb-hlo-bench", "generated.after_optimizations.txt", [&](std::string& chunk) {
          if (header) {
            chunk += "HloModule jit_train_step_generated, is_scheduled=true\n\n";
            header = false;
          }
          const Template& t = templates[copy % templates.size()];
          std::string suffix = ".g" + std::to_string(copy++);
          std::size_t before = chunk.size();
          for (std::size_t i = 0; i < t.names.size(); ++i) {
            chunk += t.literals[i];
            chunk += t.names[i];
            chunk += suffix;
          }
          chunk += t.literals.back();
          chunk += '\n';
          written += chunk.size() - before;
          return written < target;
        });
    path_ = file_->path();
    bytes_ = file_->bytes();
  }

  std::unique_ptr<rtb::perf::GeneratedFile> file_;
  std::string path_;
  std::uint64_t bytes_ = 0;
  double best_cpp_rate_ = 0;
  double cpp_bytes_ = 0;  // over all C++ runs, for the mean rate
  double cpp_seconds_ = 0;
};

void HloToolPeakMemory(benchmark::State& state) {
  const GeneratedDump& dump = GeneratedDump::get();
  fs::path tool = fs::read_symlink("/proc/self/exe").parent_path() / "hlo-overlap";
  if (!fs::exists(tool)) {
    state.SkipWithError("bin/hlo-overlap not built next to perf_benchmarks");
    return;
  }
  rtb::perf::ChildRun run;
  double floor_mib = 0;
  for (auto _ : state) {
    // A spawned child inherits the parent's peak RSS as its own starting peak (Linux carries
    // the old mm's high-water mark across exec); reset ours first so the number is the tool's.
    floor_mib = rtb::perf::reset_peak_rss_mib();
    run = rtb::perf::run_child({tool.string(), dump.path(), "--json", "-q", "--allow-truncated"});
    state.SetIterationTime(run.seconds);
  }
  if (!rtb::perf::succeeded(run)) {
    state.SkipWithError("hlo-overlap failed on the generated dump");
    return;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(dump.bytes()) * state.iterations());
  state.counters["peak_rss_MiB"] = static_cast<double>(run.max_rss_kib) / 1024;
  state.counters["rss_floor_MiB"] = floor_mib;  // our RSS when spawning: a lower bound of the above
  state.counters["under_256MB"] = run.max_rss_kib * 1024.0 < 256e6 ? 1 : 0;
}
BENCHMARK(HloToolPeakMemory)->Unit(benchmark::kMillisecond)->Iterations(1)->UseManualTime();

void HloAnalyzeFile(benchmark::State& state) {
  const GeneratedDump& dump = GeneratedDump::get();
  std::int64_t instructions = 0;
  std::size_t entries = 0;
  double floor_mib = rtb::perf::reset_peak_rss_mib();
  for (auto _ : state) {
    auto begin = std::chrono::steady_clock::now();
    rtb::hlo::Analysis analysis = rtb::hlo::analyze_file(dump.path());
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    GeneratedDump::get().note_cpp_run(seconds);
    instructions = analysis.instructions;
    entries = analysis.collectives.size();
    benchmark::DoNotOptimize(analysis);
  }
  rtb::perf::set_reader_counters(state, dump.bytes(), floor_mib);
  state.counters["instructions"] = static_cast<double>(instructions);
  state.counters["entries"] = static_cast<double>(entries);
}
BENCHMARK(HloAnalyzeFile)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

// Makes sure there are C++ runs to compare with: HloAnalyzeFile's iterations in this run, or
// runs of its own when that benchmark was filtered out.
void measure_cpp_if_needed() {
  GeneratedDump& dump = GeneratedDump::get();
  if (dump.best_cpp_rate() > 0) return;
  for (int i = 0; i < 3; ++i) {
    auto begin = std::chrono::steady_clock::now();
    rtb::hlo::Analysis analysis = rtb::hlo::analyze_file(dump.path());
    benchmark::DoNotOptimize(analysis);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    dump.note_cpp_run(seconds);
  }
}

void HloPythonBaseline(benchmark::State& state) {
  const GeneratedDump& dump = GeneratedDump::get();
  std::string script = (source_dir() / "hlo_baseline.py").string();
  rtb::perf::ChildRun run;
  for (auto _ : state) {
    rtb::perf::reset_peak_rss_mib();  // else the child's ru_maxrss starts at our own high-water
                                      // mark
    run = rtb::perf::run_child({"/usr/bin/python3", script, dump.path()});
    state.SetIterationTime(run.seconds);
  }
  if (!rtb::perf::succeeded(run)) {
    state.SkipWithError("the Python baseline failed");
    return;
  }
  double python_rate = static_cast<double>(dump.bytes()) / run.seconds;
  state.SetBytesProcessed(static_cast<std::int64_t>(dump.bytes()) * state.iterations());
  measure_cpp_if_needed();
  state.counters["cpp_over_python"] = GeneratedDump::get().best_cpp_rate() / python_rate;
  state.counters["cpp_mean_over_python"] = GeneratedDump::get().mean_cpp_rate() / python_rate;
  state.counters["python_peak_rss_MiB"] = static_cast<double>(run.max_rss_kib) / 1024;
  state.SetLabel(run.output.substr(0, run.output.find('\n')));
}
BENCHMARK(HloPythonBaseline)->Unit(benchmark::kMillisecond)->Iterations(1)->UseManualTime();

}  // namespace

// No main here: perf_benchmarks links benchmark::benchmark_main.
