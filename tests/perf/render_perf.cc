// render-bench (make bench):
//   - BM_RenderBench1MB: a render of a 1 MB DRY_RUN (the example fixture with rollout JobSets
//     repeated under new names until it passes 1 MB, as a launcher printing many rollout JobSets
//     would), with the real embedded driver and its packed form (gzip + base64) from the build.
//     Baselines in the same run: BM_RenderBench1MBCompressingDriver, the same render packing the
//     driver itself (what every render did before the build packed it), and yaml-cpp loading the
//     same documents, which any tool reading this input pays.
//   - RenderWholeProcessVsPython: bin/render-bench on the 397B fixture, whole process, against
//     tests/perf/render_reference.py (PyYAML's pure-Python safe_load, render-bench's main edits,
//     yaml.dump) on the same file, alternating, 5 runs each: the medians and python_over_cpp.
#include <benchmark/benchmark.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "common/embedded.h"
#include "perf_util.h"
#include "rtb/base/io.h"
#include "rtb/bench/render.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/jobset.h"

namespace {

std::string one_megabyte_dryrun() {
  std::string fixture = rtb::read_file(RTB_PERF_TESTDATA_DIR "/launch_dryrun.txt");
  std::size_t rollout = fixture.rfind("\n---\n");
  std::string rollout_doc = fixture.substr(rollout);
  std::string text = fixture;
  for (int i = 0; text.size() < (1u << 20); ++i) {
    text += std::regex_replace(rollout_doc, std::regex("abtest-roll"),
                               "abtest-roll-x" + std::to_string(i));
  }
  return text;
}

const std::string& input() {
  static const std::string text = one_megabyte_dryrun();
  return text;
}

void render_1mb(benchmark::State& state, std::string_view driver_packed) {
  rtb::bench::RenderOptions options;
  options.name = "abtest-bench";
  options.driver_source = std::string(rtb::embedded::bench_driver());
  options.driver_packed = std::string(driver_packed);
  options.libtpu_flags = {"--xla_tpu_scoped_vmem_limit_kib=65536"};
  options.trainer_slice = "tpu7x:4x4x4";
  for (auto _ : state) {
    rtb::k8s::DryRun dryrun = rtb::k8s::parse_dryrun(
        input(), "perf",
        rtb::k8s::render_chunks(options.mains,
                                {std::string(rtb::bench::kRolloutRoutedExpertsFlag),
                                 std::string(rtb::bench::kRolloutRoutedExpertsEnv)}));
    rtb::bench::RenderResult result = rtb::bench::render_bench(dryrun, options);
    benchmark::DoNotOptimize(result.yaml.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * input().size()));
  state.counters["input_MB"] = static_cast<double>(input().size()) / (1 << 20);
}

void BM_RenderBench1MB(benchmark::State& state) {
  render_1mb(state, rtb::embedded::bench_driver_packed());
}
BENCHMARK(BM_RenderBench1MB)->Unit(benchmark::kMillisecond);

void BM_RenderBench1MBCompressingDriver(benchmark::State& state) { render_1mb(state, ""); }
BENCHMARK(BM_RenderBench1MBCompressingDriver)->Unit(benchmark::kMillisecond);

// Baseline: only loading the YAML documents of the same input with yaml-cpp, as a reader that
// parses every document would.
void BM_BaselineYamlLoad1MB(benchmark::State& state) {
  for (auto _ : state) {
    std::vector<YAML::Node> docs = YAML::LoadAll(input().substr(input().find("\n---\n") + 1));
    benchmark::DoNotOptimize(docs.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * input().size()));
}
BENCHMARK(BM_BaselineYamlLoad1MB)->Unit(benchmark::kMillisecond);

// Whole processes, as a user runs them: render-bench against the plain Python reference.
void RenderWholeProcessVsPython(benchmark::State& state) {
  namespace fs = std::filesystem;
  fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  fs::path tool = bin / "render-bench";
  fs::path driver = bin.parent_path() / "driver" / "bench_driver.py";
  if (!fs::exists(tool) || !fs::exists(driver)) {
    state.SkipWithError("bin/render-bench or driver/bench_driver.py not built");
    return;
  }
  std::string dryrun = RTB_PERF_TESTDATA_DIR "/launch_dryrun.txt";
  std::string reference = RTB_PERF_SOURCE_DIR "/tests/perf/render_reference.py";
  std::vector<std::string> cpp_args = {tool.string(),
                                       dryrun,
                                       "--name",
                                       "abtest-bench",
                                       "--libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=65536",
                                       "--maxtext-flag=sa_block_q=2048",
                                       "-q"};
  std::vector<std::string> python_args = {"/usr/bin/python3", reference, dryrun, driver.string(),
                                          "abtest-bench"};
  std::optional<rtb::perf::Medians> times = rtb::perf::alternate(
      state, cpp_args, python_args, 5, "render-bench or the Python reference failed");
  if (!times) return;
  double cpp_median = times->first, python_median = times->second;
  state.counters["cpp_ms"] = cpp_median * 1e3;
  state.counters["python_ms"] = python_median * 1e3;
  state.counters["python_over_cpp"] = python_median / cpp_median;
}
BENCHMARK(RenderWholeProcessVsPython)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
