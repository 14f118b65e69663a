// render-bench on a 1 MB DRY_RUN (make bench). The DRY_RUN is the example fixture with rollout
// JobSets repeated under new names until it passes 1 MB, as a launcher printing many rollout
// JobSets would. Baseline measured in the same run: yaml-cpp loading the same documents, which
// any tool reading this input pays; the target is well under 50 ms per render.
#include <benchmark/benchmark.h>
#include <yaml-cpp/yaml.h>

#include <regex>
#include <string>

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

void BM_RenderBench1MB(benchmark::State& state) {
  rtb::bench::RenderOptions options;
  options.name = "abtest-bench";
  options.driver_source = "print('driver')\n";
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
BENCHMARK(BM_RenderBench1MB)->Unit(benchmark::kMillisecond);

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

}  // namespace
