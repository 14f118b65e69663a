// Benchmarks of profile-report's reader and summary on a generated multi-device capture.
//
// The capture is the real H200 capture of testdata/profile with its device plane repeated under
// new names (/device:GPU:1, 2, ...; a repeated name field, whose last value wins, renames each
// copy) until it reaches RTB_PROFILE_BENCH_BYTES (default 256 MiB): the layout jax.profiler
// writes, at the size of a capture of a few steps on many chips. It is written once per run into
// a temporary directory and deleted at exit. Reported, in the same run:
//   - ProfileSummary:        the library (Capture + summarize) in this process, one core:
//                            bytes/s and the process's peak RSS;
//   - ProfileSummaryRunsFirst: the same, the steps' module runs read in a walk of their own;
//   - ProfileToolPeakMemory: the profile-report tool (--json) in a child process: peak RSS;
//   - ProfilePythonBaseline: tests/perf/profile_baseline.py, Debian's python3-protobuf over a
//                            module protoc generates from tests/perf/xplane_subset.proto, on the
//                            same file: bytes/s and cpp_over_python.
// Goals (issue 31): >= 1 GB/s of uncompressed capture on one core, bounded memory.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "perf_util.h"
#include "rtb/base/proto_wire.h"
#include "rtb/profile/summary.h"
#include "rtb/profile/xspace.h"

namespace {

namespace fs = std::filesystem;

fs::path testdata_dir() {
  if (const char* env = std::getenv("RTB_TESTDATA_DIR")) return env;
  return RTB_PERF_TESTDATA_DIR;
}

class GeneratedCapture {
 public:
  static GeneratedCapture& get() {
    static GeneratedCapture capture;
    return capture;
  }
  const std::string& path() const { return path_; }
  std::uint64_t bytes() const { return bytes_; }
  double best_cpp_rate() const { return best_cpp_rate_; }
  void note_cpp_run(double seconds) {
    best_cpp_rate_ = std::max(best_cpp_rate_, static_cast<double>(bytes_) / seconds);
  }

 private:
  GeneratedCapture() {
    std::uint64_t target = std::uint64_t{256} << 20;
    if (const char* env = std::getenv("RTB_PROFILE_BENCH_BYTES")) target = std::stoull(env);
    fs::path real =
        testdata_dir() / "profile" / "jax0.11.2_h200_bench_driver_profile_window.xplane.pb";
    std::ifstream in(real, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + real.string());
    std::ostringstream text;
    text << in.rdbuf();
    std::string space = text.str();
    // The device plane's bytes (the plane whose name starts with /device:).
    std::string device;
    rtb::wire::Reader reader(space, space, "XSpace", "XSpace");
    rtb::wire::Field field;
    while (reader.next(field)) {
      if (field.number != 1) continue;
      rtb::wire::Reader plane(space, field.bytes, "XPlane", "XSpace");
      rtb::wire::Field part;
      while (plane.next(part)) {
        if (part.number == 2 && part.bytes.substr(0, 8) == "/device:") device = field.bytes;
      }
    }
    if (device.empty()) throw std::runtime_error("no device plane in " + real.string());
    int copy = 0;
    std::uint64_t written = 0;
    file_ = std::make_unique<rtb::perf::GeneratedFile>(
        "rtb-profile-bench", "generated.xplane.pb", [&](std::string& chunk) {
          std::size_t before = chunk.size();
          if (copy++ == 0) {
            chunk += space;  // the real capture first, host plane included
          } else {
            std::string plane = device;
            rtb::wire::put_length_field(plane, 2, "/device:GPU:" + std::to_string(copy - 1));
            rtb::wire::put_length_field(chunk, 1, plane);
          }
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
};

void ProfileSummary(benchmark::State& state) {
  GeneratedCapture& capture = GeneratedCapture::get();
  double floor_mib = rtb::perf::reset_peak_rss_mib();
  std::size_t devices = 0;
  std::int64_t events = 0;
  for (auto _ : state) {
    auto begin = std::chrono::steady_clock::now();
    rtb::profile::Capture read(capture.path());
    rtb::profile::Summary summary = rtb::profile::summarize(read);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    capture.note_cpp_run(seconds);
    devices = summary.devices.size();
    events = 0;
    for (const auto& device : summary.devices) events += device.events;
    benchmark::DoNotOptimize(summary);
  }
  rtb::perf::set_reader_counters(state, capture.bytes(), floor_mib);
  state.counters["devices"] = static_cast<double>(devices);
  state.counters["device_events"] = static_cast<double>(events);
}
BENCHMARK(ProfileSummary)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

// The same with the steps' module runs read in a walk of their own before the figures' walk (as
// before issue 31's one walk per event): what the one walk saves, in the same run.
void ProfileSummaryRunsFirst(benchmark::State& state) {
  GeneratedCapture& capture = GeneratedCapture::get();
  rtb::profile::SummaryOptions options;
  options.module_runs_in_one_walk = false;
  for (auto _ : state) {
    rtb::profile::Capture read(capture.path());
    rtb::profile::Summary summary = rtb::profile::summarize(read, options);
    benchmark::DoNotOptimize(summary);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(capture.bytes()) * state.iterations());
}
BENCHMARK(ProfileSummaryRunsFirst)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

void ProfileToolPeakMemory(benchmark::State& state) {
  const GeneratedCapture& capture = GeneratedCapture::get();
  fs::path tool = fs::read_symlink("/proc/self/exe").parent_path() / "profile-report";
  if (!fs::exists(tool)) {
    state.SkipWithError("bin/profile-report not built next to perf_benchmarks");
    return;
  }
  rtb::perf::ChildRun run;
  for (auto _ : state) {
    rtb::perf::reset_peak_rss_mib();
    run = rtb::perf::run_child({tool.string(), capture.path(), "--json", "-q"}, true);
    state.SetIterationTime(run.seconds);
  }
  if (!rtb::perf::succeeded(run)) {
    state.SkipWithError("profile-report failed on the generated capture");
    return;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(capture.bytes()) * state.iterations());
  state.counters["peak_rss_MiB"] = static_cast<double>(run.max_rss_kib) / 1024;
}
BENCHMARK(ProfileToolPeakMemory)->Unit(benchmark::kMillisecond)->Iterations(1)->UseManualTime();

void ProfilePythonBaseline(benchmark::State& state) {
  GeneratedCapture& capture = GeneratedCapture::get();
  if (capture.best_cpp_rate() == 0) {
    for (int i = 0; i < 3; ++i) {
      auto begin = std::chrono::steady_clock::now();
      rtb::profile::Capture read(capture.path());
      rtb::profile::Summary summary = rtb::profile::summarize(read);
      benchmark::DoNotOptimize(summary);
      capture.note_cpp_run(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
    }
  }
  std::string script =
      (fs::path(RTB_PERF_SOURCE_DIR) / "tests" / "perf" / "profile_baseline.py").string();
  rtb::perf::ChildRun run;
  for (auto _ : state) {
    rtb::perf::reset_peak_rss_mib();
    run = rtb::perf::run_child({"/usr/bin/python3", script, capture.path()});
    state.SetIterationTime(run.seconds);
  }
  if (!rtb::perf::succeeded(run)) {
    state.SkipWithError(
        "the Python baseline failed (it needs python3-protobuf and protoc: make deps)");
    return;
  }
  double python_rate = static_cast<double>(capture.bytes()) / run.seconds;
  state.SetBytesProcessed(static_cast<std::int64_t>(capture.bytes()) * state.iterations());
  state.counters["cpp_over_python"] = capture.best_cpp_rate() / python_rate;
  state.counters["python_peak_rss_MiB"] = static_cast<double>(run.max_rss_kib) / 1024;
}
BENCHMARK(ProfilePythonBaseline)->Unit(benchmark::kMillisecond)->Iterations(1)->UseManualTime();

}  // namespace
