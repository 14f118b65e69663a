// Benchmarks of the payload builder's routing at the production shape (issue 3):
// 64 rows x 65,536 tokens x 60 layers x top-10 of 512 experts, int16: 5 GB, with the bench's
// 60,948 real tokens per row and the built-in Qwen3.5-397B-A17B target table. In one run:
//   - PayloadMemset:        a plain memset of the same bytes into a fresh allocation (the floor);
//   - PayloadBuildRouting:  rtb::payload::build_routing into a fresh allocation, all cores and one
//   core;
//                           counters: over_memset (time / memset time, goal <= 3) and
//                           peak_over_output (peak RSS growth / output bytes, goal <= 1.1);
//   - PayloadNumpyRouting:  the driver's NumPy builder (fill_routing of
//                           tools/render-bench/driver/bench_driver.py into np.full(-1)) on the same
//                           shape, run by /usr/bin/python3 in a child process; counters:
//                           cpp_over_numpy (speed-up of the C++ builder, goal >= 20) and
//                           numpy_peak_over_output.
// Every measurement allocates its output anew, so page faults count for all of them alike.
//
// Environment: RTB_PAYLOAD_BENCH_SHAPE="R,T,L,K,E" overrides the shape (the real length is the
// default for T and the targets the built-in table's first L, or 8.0 beyond 60 layers);
// RTB_DRIVER overrides the driver's path.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/payload/builder.h"
#include "rtb/payload/routing.h"

namespace {

namespace fs = std::filesystem;

struct Shape {
  std::int64_t rows = 64, tokens = 65536;
  int layers = 60, topk = 10, experts = 512;
  std::size_t bytes() const {
    return static_cast<std::size_t>(rows) * tokens * layers * topk * sizeof(std::int16_t);
  }
};

Shape bench_shape() {
  Shape s;
  if (const char* env = std::getenv("RTB_PAYLOAD_BENCH_SHAPE")) {
    long long r = 0, t = 0;
    int l = 0, k = 0, e = 0;
    if (std::sscanf(env, "%lld,%lld,%d,%d,%d", &r, &t, &l, &k, &e) == 5) {
      s = {r, t, l, k, e};
    }
  }
  return s;
}

rtb::payload::PayloadOptions bench_options(const Shape& s, int threads) {
  rtb::payload::PayloadOptions o;
  o.rows = s.rows;
  o.tokens = s.tokens;
  o.layers = s.layers;
  o.topk = s.topk;
  o.experts = s.experts;
  std::vector<double> table = rtb::payload::default_routing_targets();
  for (int l = 0; l < s.layers; ++l) {
    double target = l < static_cast<int>(table.size()) ? table[l] : 8.0;
    o.routing_targets.push_back(std::min(target, static_cast<double>(s.experts) / s.topk));
  }
  o.threads = threads;
  return rtb::payload::resolve_payload_options(o, nullptr);
}

// A memory figure of /proc/self/status ("VmHWM:", "VmRSS:", given in KiB), in bytes.
double status_bytes(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with(field)) return std::stod(line.substr(field.size())) * 1024;
  }
  return 0;
}
// Peak RSS since the last reset_peak_rss(), in bytes (Linux: clear_refs 5 resets VmHWM).
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }
double peak_rss_bytes() { return status_bytes("VmHWM:"); }
double rss_bytes() { return status_bytes("VmRSS:"); }

using Clock = std::chrono::steady_clock;
double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Best times of this run, for the ratios: [fresh][...] where fresh = 1 includes the page faults
// of a new allocation and fresh = 0 writes into memory already touched.
struct Best {
  double memset[2] = {0, 0};
  double cpp[2] = {0, 0};
  static Best& get() {
    static Best best;
    return best;
  }
  static void note(double& slot, double seconds) {
    if (slot == 0 || seconds < slot) slot = seconds;
  }
};

// Touches every page of a fresh allocation (so later writes measure the writing, not the faults).
rtb::payload::LargeArray<std::int16_t> touched_array(const Shape& s) {
  rtb::payload::LargeArray<std::int16_t> out(s.bytes() / sizeof(std::int16_t),
                                             rtb::PageAdvice::kPopulateWrite);
  std::memset(out.data(), 0, s.bytes());
  return out;
}

double time_memset(const Shape& s, bool fresh, rtb::payload::LargeArray<std::int16_t>* warm) {
  auto start = Clock::now();
  rtb::payload::LargeArray<std::int16_t> own;
  std::int16_t* data = nullptr;
  if (fresh) {
    own = rtb::payload::LargeArray<std::int16_t>(s.bytes() / sizeof(std::int16_t),
                                                 rtb::PageAdvice::kPopulateWrite);
    data = own.data();
  } else {
    data = warm->data();
  }
  std::memset(data, 0xff, s.bytes());
  benchmark::DoNotOptimize(data);
  benchmark::ClobberMemory();
  return since(start);
}

double time_build(const rtb::payload::PayloadOptions& o, const Shape& s, bool fresh,
                  rtb::payload::LargeArray<std::int16_t>* warm, double* peak_over_output) {
  double before = rss_bytes();
  reset_peak_rss();
  auto start = Clock::now();
  std::int64_t real_tokens = o.final_rows * o.real_len;
  auto loads = rtb::payload::plan_expert_loads(
      o, rtb::payload::scale_routing_targets(o.routing_targets, o.routing_scale), real_tokens);
  rtb::payload::LargeArray<std::int16_t> own;
  if (fresh)
    own = rtb::payload::LargeArray<std::int16_t>(s.bytes() / sizeof(std::int16_t),
                                                 rtb::PageAdvice::kPopulateWrite);
  rtb::payload::LargeArray<std::int16_t>& out = fresh ? own : *warm;
  rtb::payload::build_routing(o, loads, out.span());
  benchmark::DoNotOptimize(out.data());
  benchmark::ClobberMemory();
  double seconds = since(start);
  if (peak_over_output) *peak_over_output = (peak_rss_bytes() - before) / s.bytes();
  return seconds;
}

// Argument: 1 = into a fresh allocation, 0 = into memory already touched.
void PayloadMemset(benchmark::State& state) {
  Shape s = bench_shape();
  bool fresh = state.range(0) == 1;
  rtb::payload::LargeArray<std::int16_t> warm;
  if (!fresh) warm = touched_array(s);
  for (auto _ : state) {
    double seconds = time_memset(s, fresh, &warm);
    Best::note(Best::get().memset[fresh], seconds);
    state.SetIterationTime(seconds);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(s.bytes()) * state.iterations());
  state.SetLabel(fmt::format("{} x {} x {} x {} int16, {}", s.rows, s.tokens, s.layers, s.topk,
                             fresh ? "fresh" : "touched"));
}
BENCHMARK(PayloadMemset)
    ->ArgName("fresh")
    ->Arg(1)
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseManualTime();

// Arguments: fresh (1) or touched (0) memory; threads (0 = all cores).
void PayloadBuildRouting(benchmark::State& state) {
  Shape s = bench_shape();
  bool fresh = state.range(0) == 1;
  rtb::payload::PayloadOptions o = bench_options(s, static_cast<int>(state.range(1)));
  rtb::payload::LargeArray<std::int16_t> warm;
  if (!fresh) warm = touched_array(s);
  double peak = 0;
  for (auto _ : state) {
    double seconds = time_build(o, s, fresh, &warm, fresh ? &peak : nullptr);
    if (state.range(1) == 0) Best::note(Best::get().cpp[fresh], seconds);
    state.SetIterationTime(seconds);
  }
  if (Best::get().memset[fresh] == 0) {
    for (int i = 0; i < 2; ++i) Best::note(Best::get().memset[fresh], time_memset(s, fresh, &warm));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(s.bytes()) * state.iterations());
  state.counters["threads"] = o.threads;
  if (fresh) state.counters["peak_over_output"] = peak;
  if (state.range(1) == 0) {
    state.counters["over_memset"] = Best::get().cpp[fresh] / Best::get().memset[fresh];
  }
}
BENCHMARK(PayloadBuildRouting)
    ->ArgNames({"fresh", "threads"})
    ->Args({1, 0})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseManualTime();

fs::path driver_path() {
  if (const char* env = std::getenv("RTB_DRIVER")) return env;
  return fs::path(RTB_PERF_SOURCE_DIR) / "tools" / "render-bench" / "driver" / "bench_driver.py";
}

// Imports the driver as a module and times np.full(-1) + fill_routing (fresh memory, as the C++
// builder into a new allocation) and fill_routing alone (into the array np.full touched).
// Prints {"fresh": s, "touched": s, "peak_kib": k, "base_kib": b}.
constexpr const char* kNumpyScript = R"PY(
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("bench_driver", sys.argv[1])
driver = importlib.util.module_from_spec(spec)
sys.modules["bench_driver"] = driver  # dataclasses look their module up there
spec.loader.exec_module(driver)
import numpy as np
rows, tokens, layers, topk, experts = map(int, sys.argv[2:7])
targets = [float(t) for t in sys.argv[7].split(",")]
real_len = driver.default_real_len(tokens)
def status(key):
    return [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key)][0]
base = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")
start = time.perf_counter()
out = np.full((rows, tokens, layers, topk), -1, dtype=np.int16)
filled = time.perf_counter()
driver.fill_routing(out, real_rows=rows, real_len=real_len, shift=0, experts=experts,
                    targets=targets, seed=0)
end = time.perf_counter()
print(json.dumps({"fresh": end - start, "touched": end - filled, "peak_kib": status("VmHWM:"),
                  "base_kib": base}))
)PY";

double json_number(const std::string& text, const std::string& key) {
  std::size_t at = text.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size() + 3));
}

void PayloadNumpyRouting(benchmark::State& state) {
  Shape s = bench_shape();
  rtb::payload::PayloadOptions o = bench_options(s, 0);
  fs::path driver = driver_path();
  if (!fs::exists(driver)) {
    state.SkipWithError(("driver not found: " + driver.string()).c_str());
    return;
  }
  fs::path script =
      fs::temp_directory_path() / ("rtb_payload_numpy_" + std::to_string(getpid()) + ".py");
  std::ofstream(script) << kNumpyScript;
  std::string command =
      fmt::format("/usr/bin/python3 '{}' '{}' {} {} {} {} {} '{}' 2>&1", script.string(),
                  driver.string(), s.rows, s.tokens, s.layers, s.topk, s.experts,
                  rtb::payload::format_routing_targets_inline(o.routing_targets));
  std::string output;
  double fresh = 0, touched = 0, peak_kib = 0, base_kib = 0;
  for (auto _ : state) {
    output.clear();
    FILE* pipe = popen(command.c_str(), "r");
    char buffer[4096];
    while (pipe && std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
    int status = pipe ? pclose(pipe) : -1;
    fresh = json_number(output, "fresh");
    if (status != 0 || fresh <= 0) {
      fs::remove(script);
      state.SkipWithError(("the NumPy builder failed: " + output.substr(0, 300)).c_str());
      return;
    }
    touched = json_number(output, "touched");
    peak_kib = json_number(output, "peak_kib");
    base_kib = json_number(output, "base_kib");
    state.SetIterationTime(fresh);
  }
  fs::remove(script);
  for (bool f : {true, false}) {
    if (Best::get().cpp[f] > 0) continue;
    rtb::payload::LargeArray<std::int16_t> warm;
    if (!f) warm = touched_array(s);
    for (int i = 0; i < 2; ++i) Best::note(Best::get().cpp[f], time_build(o, s, f, &warm, nullptr));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(s.bytes()) * state.iterations());
  state.counters["numpy_touched_s"] = touched;
  state.counters["cpp_over_numpy_fresh"] = fresh / Best::get().cpp[1];
  state.counters["cpp_over_numpy_touched"] = touched / Best::get().cpp[0];
  state.counters["numpy_peak_over_output"] = (peak_kib - base_kib) * 1024 / s.bytes();
}
BENCHMARK(PayloadNumpyRouting)->Unit(benchmark::kMillisecond)->Iterations(1)->UseManualTime();

}  // namespace
