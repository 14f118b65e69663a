// Tests of bench/config_diff.h: a render's MaxText settings and diff_configs, on real MaxText logs
// (testdata/configlog_*, see SOURCES.md), renders and small texts.
#include "rtb/bench/config_diff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/render.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

using logs::read_config_log;
using test::expect_entries;

const char* kGpt3 = "configlog_maxtext_gpu_a3-h100x8_gpt3-22b_train.log";
const char* kPrepgo = "configlog_maxtext_gpu_a3-h100x8_llama2-7b_prepgo_train.log";

std::map<std::string, std::string> as_map(const std::vector<ConfigSetting>& settings) {
  std::map<std::string, std::string> out;
  for (const ConfigSetting& s : settings) out[s.key] = s.value;
  return out;
}

ConfigSide side(ConfigSide::Kind kind, std::string source, std::vector<ConfigSetting> settings) {
  ConfigSide out;
  out.kind = kind;
  out.source = std::move(source);
  out.settings = std::move(settings);
  return out;
}

// --- renders -----------------------------------------------------------------------------------

TEST(ConfigFromRender, E2eTrainerFlags) {
  k8s::DryRun dryrun =
      k8s::parse_dryrun(read_file(testdata("launch_dryrun.txt")), "launch_dryrun.txt");
  std::vector<ConfigSetting> settings = config_from_render(dryrun, k8s::RoleMains{});
  auto values = as_map(settings);
  expect_entries(values, {{"ragged_buffer_factor", "2.0"},
                          {"custom_mesh_and_rule", "cp-as-ep"},
                          {"model_name", "qwen3.5-397b-a17b"},
                          {"load_parameters_path", "gs://example-bucket/ckpt/model/0/items"},
                          {"base_output_directory", "gs://example-bucket/abtest/maxtext"},
                          {"ici_fsdp_parallelism", "32"},
                          {"ici_context_parallelism", "4"},
                          {"run_name", "abtest-train"},
                          {"max_target_length", "65536"},
                          {"skip_step_on_nan", "True"}});  // as Tunix passes a bool
  // What the trainer passes unasked: environment fallbacks, defaults and Tunix's constants.
  expect_entries(values, {{"attention", "flash"},       // TRAINER_MAXTEXT_ATTENTION
                          {"float32_logits", "False"},  // FLOAT32_LOGITS
                          {"scan_layers", "True"},
                          {"dtype", "bfloat16"}});
  EXPECT_EQ(values.count("profiler_steps"), 0u) << "--profiler_steps=0 sets nothing";
  EXPECT_EQ(values.count("skip_first_n_steps_for_profiler"), 0u);
  EXPECT_EQ(values.count("compute_logps_chunk_size"), 0u) << "not a MaxText key";
  for (const ConfigSetting& s : settings) {
    EXPECT_EQ(s.line, 456u) << s.key;
    EXPECT_THAT(s.origin, ::testing::Not(::testing::IsEmpty())) << s.key;
  }
  // Implied: what the render does not write, only Tunix passes.
  auto implied = [&](std::string_view key) {
    return std::find_if(settings.begin(), settings.end(),
                        [&](const ConfigSetting& s) { return s.key == key; })
        ->implied;
  };
  for (const char* key : {"scan_layers", "use_gmm_v2", "context_parallel_load_balance"})
    EXPECT_TRUE(implied(key)) << key;
  for (const char* key : {"model_name", "attention", "float32_logits", "ragged_buffer_factor"})
    EXPECT_FALSE(implied(key)) << key;
}

TEST(ConfigFromRender, BenchRenderReadsTrainerArgvAndEditedFlags) {
  k8s::DryRun e2e =
      k8s::parse_dryrun(read_file(testdata("launch_dryrun.txt")), "launch_dryrun.txt");
  RenderOptions o;
  o.name = "abtest-bench";
  o.driver_source = "print('driver')\n";
  o.maxtext_flags = {"ragged_buffer_factor=2.75"};
  o.trainer_slice = "tpu7x:4x4x4";
  o.profile_window = std::make_pair(3, 2);
  k8s::DryRun bench = k8s::parse_dryrun(render_bench(e2e, o).yaml, "bench.yaml");
  auto values = as_map(config_from_render(bench, k8s::RoleMains{}));
  expect_entries(values, {{"ragged_buffer_factor", "2.75"},
                          {"ici_fsdp_parallelism", "16"},
                          {"run_name", "abtest-bench"}});
  // The driver traces the window: the trainer's profiler sets no key, as the render leaves it.
  EXPECT_EQ(values.count("profiler_steps"), 0u);
  EXPECT_EQ(values.count("skip_first_n_steps_for_profiler"), 0u);
  EXPECT_EQ(values.count("load_parameters_path"), 0u) << "--weights random dropped it";
}

// diff-configs reads what the render (and --explain) says: with --profile-window the trainer's
// own profiler keys and MaxText's profiler item are gone; without it they are the e2e's; with
// --weights checkpoint the checkpoint stays.
TEST(ConfigFromRender, TheRendersWeightsAndProfilerAreWhatDiffConfigsSees) {
  k8s::DryRun e2e = k8s::parse_dryrun(read_file(testdata("launch_dryrun_weights_profiler.txt")),
                                      "launch_dryrun_weights_profiler.txt");
  RenderOptions o;
  o.name = "abtest-bench";
  o.driver_source = "print('driver')\n";
  auto config = [&](const RenderOptions& options) {
    k8s::DryRun bench = k8s::parse_dryrun(render_bench(e2e, options).yaml, "bench.yaml");
    return as_map(config_from_render(bench, k8s::RoleMains{}));
  };
  auto e2e_values = as_map(config_from_render(e2e, k8s::RoleMains{}));
  expect_entries(e2e_values, {{"profiler_steps", "3"},
                              {"profiler", "xplane"},
                              {"load_parameters_path", "gs://example-bucket/ckpt/model/0/items"}});
  auto plain = config(o);
  EXPECT_EQ(plain["profiler_steps"], "3") << "no window: the trainer's own profiler";
  EXPECT_EQ(plain["profiler"], "xplane");
  EXPECT_EQ(plain.count("load_parameters_path"), 0u);
  o.profile_window = std::make_pair(3, 2);
  o.weights = Weights::kCheckpoint;
  auto windowed = config(o);
  EXPECT_EQ(windowed.count("profiler_steps"), 0u);
  EXPECT_EQ(windowed.count("profiler"), 0u);
  EXPECT_EQ(windowed["load_parameters_path"], "gs://example-bucket/ckpt/model/0/items");
}

TEST(ConfigFromRender, NoTrainerFails) {
  k8s::DryRun dryrun =
      k8s::parse_dryrun(read_file(testdata("bad/no_trainer.txt")), "no_trainer.txt");
  EXPECT_THROW(config_from_render(dryrun, k8s::RoleMains{}), Error);
}

// --- comparing -----------------------------------------------------------------------------------

TEST(DiffConfigs, LogsAddedRemovedChanged) {
  ConfigSide a = side(ConfigSide::Kind::kLog, "a",
                      {{"k1", "True", 1, ""}, {"k2", "1.0", 2, ""}, {"k3", "x", 3, ""}});
  ConfigSide b = side(ConfigSide::Kind::kLog, "b",
                      {{"k1", "true", 5, ""}, {"k2", "2", 6, ""}, {"k4", "y", 7, ""}});
  std::vector<ConfigDifference> found = diff_configs(a, b);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].key, "k2");
  EXPECT_EQ(found[0].kind, ConfigDifference::Kind::kChanged);
  EXPECT_EQ(found[0].a->value, "1.0");
  EXPECT_EQ(found[0].b->line, 6u);
  EXPECT_EQ(found[1].key, "k3");
  EXPECT_EQ(found[1].kind, ConfigDifference::Kind::kRemoved);
  EXPECT_EQ(found[2].key, "k4");
  EXPECT_EQ(found[2].kind, ConfigDifference::Kind::kAdded);
  EXPECT_EQ(diff_configs(a, b, [](std::string_view k) { return k == "k4"; }).size(), 1u);
  EXPECT_TRUE(diff_configs(a, a).empty());
}

TEST(DiffConfigs, RenderAgainstALogComparesOnlyTheRendersKeys) {
  ConfigSide render = side(ConfigSide::Kind::kRender, "r",
                           {{"k1", "true", 9, "MAXTEXT_EXTRA_FLAGS k1=true"}, {"k5", "1", 9, ""}});
  ConfigSide log = side(ConfigSide::Kind::kLog, "l", {{"k1", "True", 1, ""}, {"k2", "x", 2, ""}});
  std::vector<ConfigDifference> found = diff_configs(render, log);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].key, "k5");
  EXPECT_EQ(found[0].kind, ConfigDifference::Kind::kRemoved);
  found = diff_configs(log, render);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, ConfigDifference::Kind::kAdded);
  // A default or constant the render implies counts only where the log has the key too.
  render.settings.push_back({"k2", "y", 9, "Tunix", true});
  render.settings.push_back({"k6", "z", 9, "run_trainer_node default", true});
  found = diff_configs(render, log);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].key, "k2");
  EXPECT_EQ(found[0].kind, ConfigDifference::Kind::kChanged);
  EXPECT_EQ(found[1].key, "k5");
  EXPECT_EQ(diff_configs(log, render).size(), 2u);
  // Two renders compare every key.
  EXPECT_EQ(diff_configs(render, side(ConfigSide::Kind::kRender, "r2", {})).size(), 4u);
}

TEST(DiffConfigs, RealLogs) {
  ConfigSide pre = side(ConfigSide::Kind::kLog, kPrepgo, read_config_log(testdata(kPrepgo)).params);
  ConfigSide gpt3 = side(ConfigSide::Kind::kLog, kGpt3, read_config_log(testdata(kGpt3)).params);
  std::vector<ConfigDifference> found = diff_configs(gpt3, pre);
  std::map<std::string, ConfigDifference> by_key;
  for (const ConfigDifference& d : found) by_key.emplace(d.key, d);
  EXPECT_EQ(found.size(), 34u);
  ASSERT_TRUE(by_key.count("mlp_activations"));
  EXPECT_EQ(by_key.at("mlp_activations").a->value, "['gelu']");
  EXPECT_EQ(by_key.at("mlp_activations").b->value, "['silu', 'linear']");
  EXPECT_EQ(by_key.count("adam_b1"), 0u);
}

// The verdict diff-configs exits with: kPass same, kFail different; a side that cannot be read
// throws (kError in the tool).
TEST(ConfigOutcome, PassFailAndError) {
  ConfigSide a = side(ConfigSide::Kind::kLog, "a", {{"k1", "True", 1, ""}, {"k2", "1.0", 2, ""}});
  ConfigSide same = side(ConfigSide::Kind::kLog, "b", {{"k1", "true", 5, ""}, {"k2", "1", 6, ""}});
  ConfigSide changed = side(ConfigSide::Kind::kLog, "c", {{"k1", "true", 5, ""}});
  EXPECT_EQ(config_outcome(diff_configs(a, same)), Outcome::kPass);
  EXPECT_EQ(config_outcome(diff_configs(a, changed)), Outcome::kFail);
  EXPECT_EQ(config_outcome(diff_configs(a, changed, [](std::string_view k) { return k == "k1"; })),
            Outcome::kPass);
  EXPECT_THROW(read_config_side(testdata("bad/no_trainer.txt"), {}, k8s::RoleMains{}), Error);
}

}  // namespace
}  // namespace rtb::bench
