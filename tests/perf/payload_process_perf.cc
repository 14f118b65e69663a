// check-payload as a user runs it, whole processes, each beside its baseline in the same run
// (issue 29, items 1, 2 and 4), on the shape the issue measured: 8 rows x 16,384 tokens x 60
// layers x top-10 of 512 experts (160 MB of routing), the built-in target table:
//   - PayloadVerifyWholeProcessVsRead: `check-payload verify FILE` against a plain sequential
//     read of the same file (`cat FILE > /dev/null`), the file in the page cache, alternating,
//     5 runs each: the medians and verify_over_read (goal <= 5).
//   - PayloadBuildWholeProcessVsNumpy: `check-payload build` without -o (it builds and verifies
//     in memory) against tests/perf/payload_numpy_build.py (the bench driver's NumPy builder of
//     the same fields, in memory), alternating, 5 runs each: numpy_over_cpp (goal >= 10), and
//     cpp_over_touch, the build against first touching its routing's bytes in fresh memory (the
//     floor of any builder, np.full's included).
//   - PayloadBuildOutputVsFloor: `check-payload build -o FILE` against what writing that many
//     bytes durably costs at least, measured here in the same run: touching fresh memory, write()
//     into the page cache, fsync; 5 runs each: build_o_over_floor.
// Environment: RTB_PAYLOAD_PROCESS_SHAPE="R,T,L,K,E" overrides the shape (the targets: the
// built-in table's first L, 8.0 beyond 60 layers, capped at E/K).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "perf_util.h"
#include "rtb/base/memory.h"
#include "rtb/payload/routing.h"

namespace {

namespace fs = std::filesystem;

struct Shape {
  long long rows = 8, tokens = 16384;
  int layers = 60, topk = 10, experts = 512;
};

Shape process_shape() {
  Shape s;
  if (const char* env = std::getenv("RTB_PAYLOAD_PROCESS_SHAPE")) {
    Shape given;
    if (std::sscanf(env, "%lld,%lld,%d,%d,%d", &given.rows, &given.tokens, &given.layers,
                    &given.topk, &given.experts) == 5) {
      s = given;
    }
  }
  return s;
}

// The per-layer targets, comma-separated.
std::string targets_of(const Shape& s) {
  std::vector<double> table = rtb::payload::default_routing_targets();
  std::string out;
  for (int l = 0; l < s.layers; ++l) {
    double target = l < static_cast<int>(table.size()) ? table[l] : 8.0;
    out += fmt::format("{}{}", l ? "," : "",
                       std::min(target, static_cast<double>(s.experts) / s.topk));
  }
  return out;
}

struct Tools {
  fs::path check_payload, driver, numpy_builder;
};

bool find_tools(Tools& t) {
  fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  t.check_payload = bin / "check-payload";
  t.driver = bin.parent_path() / "driver" / "bench_driver.py";
  t.numpy_builder = fs::path(RTB_PERF_SOURCE_DIR) / "tests" / "perf" / "payload_numpy_build.py";
  return fs::exists(t.check_payload) && fs::exists(t.driver) && fs::exists(t.numpy_builder);
}

// check-payload build at the shape; the built-in table at 60 layers, else a table file written
// into `dir` (the first layers of the built-in one).
std::vector<std::string> build_args(const Tools& t, const Shape& s, const fs::path& dir) {
  std::vector<std::string> args = {t.check_payload.string(),
                                   "build",
                                   "--rows",
                                   std::to_string(s.rows),
                                   "--tokens",
                                   std::to_string(s.tokens),
                                   "--layers",
                                   std::to_string(s.layers),
                                   "--topk",
                                   std::to_string(s.topk),
                                   "--experts",
                                   std::to_string(s.experts),
                                   "-q"};
  if (s.layers != static_cast<int>(rtb::payload::default_routing_targets().size())) {
    fs::path table = dir / "targets.txt";
    std::string text = targets_of(s);
    std::replace(text.begin(), text.end(), ',', '\n');
    std::FILE* out = std::fopen(table.c_str(), "w");
    if (out != nullptr) {
      std::fputs(text.c_str(), out);
      std::fclose(out);
    }
    args.insert(args.end(), {"--routing-targets", table.string()});
  }
  return args;
}

// A scratch directory beside the build (the same file system as a user's payloads), removed at
// the end.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
    path = bin.parent_path() / fmt::format("perf-payload-{}", ::getpid());
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

using Clock = std::chrono::steady_clock;
double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Seconds to map `bytes` of fresh memory and write every page once, as the builder maps its
// routing (MADV_POPULATE_WRITE); a builder of that many bytes pays at least this.
double first_touch(std::size_t bytes) {
  auto start = Clock::now();
  rtb::LargeArray<char> data(bytes, rtb::PageAdvice::kPopulateWrite);
  std::memset(data.data(), 0x5a, bytes);
  benchmark::DoNotOptimize(data.data());
  return since(start);
}

std::size_t routing_bytes(const Shape& s) {
  return static_cast<std::size_t>(s.rows) * s.tokens * s.layers * s.topk * sizeof(std::int16_t);
}

// Finds the tools a process benchmark runs, or tells `state` what is missing and returns false.
bool tools_or_skip(benchmark::State& state, Tools& tools) {
  if (find_tools(tools)) return true;
  state.SkipWithError("bin/check-payload, driver/bench_driver.py or the NumPy builder missing");
  return false;
}

using rtb::perf::median;
using rtb::perf::run_child;
using rtb::perf::succeeded;

void PayloadVerifyWholeProcessVsRead(benchmark::State& state) {
  Tools tools;
  if (!tools_or_skip(state, tools)) return;
  Shape s = process_shape();
  ScratchDir dir;
  std::string file = (dir.path / "payload.npz").string();
  std::vector<std::string> build = build_args(tools, s, dir.path);
  build.insert(build.end(), {"-o", file});
  if (!succeeded(run_child(build))) {
    state.SkipWithError("check-payload build -o failed");
    return;
  }
  std::vector<std::string> read_args = {"/bin/cat", file};
  std::vector<std::string> verify_args = {tools.check_payload.string(), "verify", file, "-q"};
  run_child(read_args, /*discard_stdout=*/true);  // into the page cache
  std::optional<rtb::perf::Medians> times =
      rtb::perf::alternate(state, read_args, verify_args, 5, "cat or check-payload verify failed");
  if (!times) return;
  double read_median = times->first, verify_median = times->second;
  state.counters["file_MB"] = static_cast<double>(fs::file_size(file)) / 1e6;
  state.counters["read_ms"] = read_median * 1e3;
  state.counters["verify_ms"] = verify_median * 1e3;
  state.counters["verify_over_read"] = verify_median / read_median;
  state.SetLabel(
      fmt::format("{} x {} x {} x {} of {}", s.rows, s.tokens, s.layers, s.topk, s.experts));
}
BENCHMARK(PayloadVerifyWholeProcessVsRead)->Iterations(1)->Unit(benchmark::kMillisecond);

void PayloadBuildWholeProcessVsNumpy(benchmark::State& state) {
  Tools tools;
  if (!tools_or_skip(state, tools)) return;
  Shape s = process_shape();
  ScratchDir dir;
  std::vector<std::string> cpp_args = build_args(tools, s, dir.path);
  std::vector<std::string> numpy_args = {
      "/usr/bin/python3",     tools.numpy_builder.string(), tools.driver.string(),
      std::to_string(s.rows), std::to_string(s.tokens),     std::to_string(s.layers),
      std::to_string(s.topk), std::to_string(s.experts),    targets_of(s)};
  std::vector<double> cpp, numpy, touch;
  for (auto _ : state) {
    for (int run = 0; run < 5; ++run) {
      rtb::perf::ChildRun ours = run_child(cpp_args);
      rtb::perf::ChildRun theirs = run_child(numpy_args);
      if (!succeeded(ours) || !succeeded(theirs)) {
        state.SkipWithError("check-payload build or the NumPy builder failed");
        return;
      }
      cpp.push_back(ours.seconds);
      numpy.push_back(theirs.seconds);
      touch.push_back(first_touch(routing_bytes(s)));
    }
  }
  double cpp_median = median(cpp), numpy_median = median(numpy);
  state.counters["cpp_ms"] = cpp_median * 1e3;
  state.counters["numpy_ms"] = numpy_median * 1e3;
  state.counters["numpy_over_cpp"] = numpy_median / cpp_median;
  // The floor of any builder of this routing in fresh memory, NumPy's np.full included.
  state.counters["touch_ms"] = median(touch) * 1e3;
  state.counters["cpp_over_touch"] = cpp_median / median(touch);
  state.SetLabel(
      fmt::format("{} x {} x {} x {} of {}", s.rows, s.tokens, s.layers, s.topk, s.experts));
}
BENCHMARK(PayloadBuildWholeProcessVsNumpy)->Iterations(1)->Unit(benchmark::kMillisecond);

// What writing `bytes` durably costs at least: first touch of fresh memory (as the builder maps
// its routing), write() into the page cache, fsync. Seconds of each.
struct Floor {
  double touch = 0, write = 0, fsync = 0;
};

Floor measure_floor(const fs::path& file, std::size_t bytes) {
  Floor floor;
  floor.touch = first_touch(bytes);
  rtb::LargeArray<char> data(bytes, rtb::PageAdvice::kNone);
  std::memset(data.data(), 0x5a, bytes);
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return floor;
  auto start = Clock::now();
  for (std::size_t done = 0; done < bytes;) {
    ssize_t n = ::write(fd, data.data() + done, std::min<std::size_t>(bytes - done, 1 << 20));
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  floor.write = since(start);
  start = Clock::now();
  ::fsync(fd);
  floor.fsync = since(start);
  ::close(fd);
  fs::remove(file);
  return floor;
}

void PayloadBuildOutputVsFloor(benchmark::State& state) {
  Tools tools;
  if (!tools_or_skip(state, tools)) return;
  Shape s = process_shape();
  ScratchDir dir;
  fs::path file = dir.path / "built.npz";
  std::vector<std::string> args = build_args(tools, s, dir.path);
  args.insert(args.end(), {"-o", file.string()});
  std::vector<double> build, touch, write, fsync, floor;
  for (auto _ : state) {
    for (int run = 0; run < 5; ++run) {
      fs::remove(file);
      rtb::perf::ChildRun ours = run_child(args);
      if (!succeeded(ours)) {
        state.SkipWithError("check-payload build -o failed");
        return;
      }
      build.push_back(ours.seconds);
      Floor f = measure_floor(dir.path / "floor.bin", fs::file_size(file));
      touch.push_back(f.touch);
      write.push_back(f.write);
      fsync.push_back(f.fsync);
      floor.push_back(f.touch + f.write + f.fsync);
    }
  }
  double build_median = median(build);
  state.counters["build_o_ms"] = build_median * 1e3;
  state.counters["floor_ms"] = median(floor) * 1e3;
  state.counters["touch_ms"] = median(touch) * 1e3;
  state.counters["write_ms"] = median(write) * 1e3;
  state.counters["fsync_ms"] = median(fsync) * 1e3;
  state.counters["build_o_over_floor"] = build_median / median(floor);
}
BENCHMARK(PayloadBuildOutputVsFloor)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
