// Tests of bench/trainer_config.h: what Tunix's trainer passes MaxText for its argv and
// environment.
#include "rtb/bench/trainer_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

using test::expect_entries;

using Env = std::map<std::string, std::string>;

// key -> "value <- origin", for every key trainer_keys passes.
std::map<std::string, std::string> keys_of(const std::vector<std::string>& argv,
                                           const Env& env = {}) {
  std::map<std::string, std::string> out;
  for (const TrainerKey& k : trainer_keys(argv, env)) out[k.key] = k.value + " <- " + k.origin;
  return out;
}

std::string trainer_keys_error_of(const std::vector<std::string>& argv) {
  try {
    trainer_keys(argv, {});
  } catch (const Error& e) {
    return e.message();
  }
  return "no error";
}

// A value that meets `rule`'s condition, as a flag or variable would give it.
std::string value_meeting(const TrainerKeyRule& rule) {
  switch (rule.applies) {
    case KeyApplies::kPositive:
    case KeyApplies::kAboveOne:
    case KeyApplies::kProfiling:
      return "3";
    case KeyApplies::kTrue:
      return "true";
    default:
      return rule.prints == KeyPrints::kPythonBool ? "true" : "7";
  }
}

// What trainer_keys prints for `given`, a value that meets `rule`'s condition.
std::string printed(const TrainerKeyRule& rule, const std::string& given) {
  if (rule.prints == KeyPrints::kFixed) return std::string(*rule.fallback);
  if (rule.prints == KeyPrints::kPythonBool) return given == "true" ? "True" : "False";
  return given;
}

// The table is all a flag needs: each row's flags map to its key and back, and giving one sets
// the key, whatever the row.
TEST(TrainerKeyRules, EveryFlagSetsItsKeyAndBack) {
  std::size_t flags = 0;
  for (const TrainerKeyRule& rule : trainer_key_rules()) {
    for (std::string_view flag : rule.flags) {
      EXPECT_EQ(maxtext_key_of_flag(flag), rule.key) << flag;
      EXPECT_THAT(flags_setting_key(rule.key), ::testing::Contains(std::string(flag)));
      std::string value = value_meeting(rule);
      std::vector<std::string> argv = {"--" + std::string(flag) + "=" + value};
      if (rule.applies == KeyApplies::kProfiling) argv.insert(argv.begin(), "--profiler_steps=2");
      EXPECT_EQ(keys_of(argv)[std::string(rule.key)],
                printed(rule, value) + " <- --" + std::string(flag))
          << flag;
      ++flags;
    }
    EXPECT_FALSE(rule.upstream.empty()) << rule.key << ": cite where Tunix says so";
  }
  EXPECT_GE(flags, 25u);
}

TEST(TrainerKeyRules, EveryVariableAndDefaultSetsItsKey) {
  for (const TrainerKeyRule& rule : trainer_key_rules()) {
    std::string key(rule.key);
    if (!rule.env.empty()) {
      std::string value = value_meeting(rule);
      EXPECT_EQ(keys_of({}, {{std::string(rule.env), value}})[key],
                printed(rule, value) + " <- " + std::string(rule.env))
          << key;
    }
    // A default applies on its own unless the row waits for a condition or for another key.
    bool conditional = rule.applies == KeyApplies::kProfiling ||
                       rule.applies == KeyApplies::kTrue || !rule.requires_key.empty();
    if (rule.fallback && !conditional) {
      EXPECT_EQ(keys_of({})[key].rfind(std::string(*rule.fallback) + " <- ", 0), 0u) << key;
    }
  }
}

TEST(TrainerKeys, DefaultsAndConstantsSayWhereTheyComeFrom) {
  auto keys = keys_of({});
  expect_entries(keys,
                 {{"model_name", "qwen3-0.6b <- run_trainer_node default"},
                  {"run_name", "trainer-0 <- run_trainer_node default"},
                  {"ici_fsdp_parallelism", "2 <- run_trainer_node default"},
                  {"learning_rate", "2e-07 <- run_trainer_node default"},
                  {"attention", "dot_product <- Tunix default"},
                  {"float32_gate_logits", "True <- Tunix default"},
                  {"scan_layers", "True <- Tunix"},
                  {"dtype", "bfloat16 <- Tunix"},
                  {"max_target_length", "640 <- --max_prompt_length + --max_response_length"}});
  for (const char* unset :
       {"base_output_directory", "load_parameters_path", "float32_logits", "profiler",
        "profiler_steps", "skip_step_on_spikes", "skip_step_interval", "override_model_config",
        "context_parallel_load_balance", "rollout_tensor_parallelism"}) {
    EXPECT_EQ(keys.count(unset), 0u) << unset;
  }
}

TEST(TrainerKeys, InTheTablesOrder) {
  std::vector<std::string> order;
  for (const TrainerKey& k : trainer_keys({"--maxtext_sa_block_q=512", "--mesh_context=2"}, {}))
    order.push_back(k.key);
  auto at = [&](std::string_view key) {
    return std::find(order.begin(), order.end(), key) - order.begin();
  };
  EXPECT_EQ(at("model_name"), 0);
  EXPECT_LT(at("scan_layers"), at("max_target_length"));
  EXPECT_EQ(at("context_parallel_load_balance"), at("ici_context_parallelism") + 1);
  EXPECT_EQ(order.back(), "sa_block_q") << "--maxtext_X outside the table comes last";
}

TEST(TrainerKeys, OnlyWhenPositive) {
  auto keys = keys_of({"--rollout_mesh_tp=0", "--base_num_kv_heads=4"});
  EXPECT_EQ(keys.count("rollout_tensor_parallelism"), 0u);
  EXPECT_EQ(keys["base_num_kv_heads"], "4 <- --base_num_kv_heads");
  EXPECT_EQ(keys["override_model_config"], "true <- --base_num_kv_heads") << "comes with it";
  EXPECT_EQ(trainer_keys_error_of({"--rollout_mesh_tp=two"}),
            "trainer argv --rollout_mesh_tp=two: not an integer");
}

TEST(TrainerKeys, OnlyWhenNotEmpty) {
  auto keys = keys_of({"--remat_policy=", "--trainable_parameters_mask=", "--maxtext_attention=",
                       "--maxtext_ckpt_path="});
  EXPECT_EQ(keys.count("remat_policy"), 0u);
  EXPECT_EQ(keys.count("trainable_parameters_mask"), 0u);
  EXPECT_EQ(keys.count("load_parameters_path"), 0u);
  // An empty flag falls through to the variable, then to Tunix's default.
  EXPECT_EQ(keys["attention"], "dot_product <- Tunix default");
  EXPECT_EQ(
      keys_of({"--maxtext_attention="}, {{"TRAINER_MAXTEXT_ATTENTION", "flash"}})["attention"],
      "flash <- TRAINER_MAXTEXT_ATTENTION");
  EXPECT_EQ(keys_of({"--maxtext_attention=splash"},
                    {{"TRAINER_MAXTEXT_ATTENTION", "flash"}})["attention"],
            "splash <- --maxtext_attention");
}

TEST(TrainerKeys, ProfilerKeysOnlyWhileProfiling) {
  EXPECT_EQ(keys_of({"--profiler_steps=0", "--skip_first_n_profiler_steps=2"})
                .count("skip_first_n_steps_for_profiler"),
            0u);
  auto keys = keys_of({"--profiler_steps=3", "--profiler_period=5"});
  expect_entries(keys, {{"profiler", "xplane <- Tunix"},
                        {"profiler_steps", "3 <- --profiler_steps"},
                        {"profile_periodically_period", "5 <- --profiler_period"},
                        {"skip_first_n_steps_for_profiler", "1 <- run_trainer_node default"}});
}

TEST(TrainerKeys, EnvironmentFallbacks) {
  Env env = {{"MAXTEXT_OUTPUT_DIR", "gs://b/out"},
             {"FLOAT32_GATE_LOGITS", "0"},
             {"FLOAT32_LOGITS", "yes"},
             {"OVERRIDE_MODEL_CONFIG", "1"},
             {std::string(kCheckpointEnv), "gs://b/ckpt"}};
  auto keys = keys_of({}, env);
  expect_entries(keys, {{"base_output_directory", "gs://b/out <- MAXTEXT_OUTPUT_DIR"},
                        {"float32_gate_logits", "False <- FLOAT32_GATE_LOGITS"},
                        {"float32_logits", "True <- FLOAT32_LOGITS"},
                        {"override_model_config", "true <- OVERRIDE_MODEL_CONFIG"},
                        {"load_parameters_path", "gs://b/ckpt <- MAXTEXT_CKPT"}});
  // The flag wins over the variable.
  EXPECT_EQ(keys_of({"--maxtext_output_directory=gs://b/flag"}, env)["base_output_directory"],
            "gs://b/flag <- --maxtext_output_directory");
  // A variable that is no boolean is as if unset.
  keys = keys_of({}, {{"FLOAT32_GATE_LOGITS", "maybe"}, {"OVERRIDE_MODEL_CONFIG", "yes"}});
  EXPECT_EQ(keys["float32_gate_logits"], "True <- Tunix default");
  EXPECT_EQ(keys.count("override_model_config"), 0u) << "Tunix tests for 1 or true only";
}

TEST(TrainerKeys, BooleansPrintAsPython) {
  auto keys = keys_of({"--no-prefuse_moe_weights", "--use_weight_converter",
                       "--maxtext_skip_step_on_nan=no", "--maxtext_skip_step_on_spikes=false"});
  expect_entries(keys, {{"prefuse_moe_weights", "False <- --prefuse_moe_weights"},
                        {"use_weight_converter", "True <- --use_weight_converter"},
                        {"skip_step_on_nan", "False <- --maxtext_skip_step_on_nan"}});
  EXPECT_EQ(keys.count("skip_step_on_spikes"), 0u) << "only when true";
  keys = keys_of({"--maxtext_skip_step_on_spikes=true"});
  expect_entries(keys, {{"skip_step_on_spikes", "True <- --maxtext_skip_step_on_spikes"},
                        {"skip_step_interval", "128 <- --maxtext_skip_step_on_spikes"},
                        {"skip_step_scaling_factor", "6.0 <- --maxtext_skip_step_on_spikes"}});
  EXPECT_EQ(trainer_keys_error_of({"--prefuse_moe_weights=maybe"}),
            "trainer argv --prefuse_moe_weights=maybe: not a boolean");
}

TEST(TrainerKeys, MaxTargetLengthIsTheRowFed) {
  std::vector<TrainerKey> keys =
      trainer_keys({"--max_prompt_length=1024", "--max_response_length=512"}, {});
  auto row = std::find_if(keys.begin(), keys.end(),
                          [](const TrainerKey& k) { return k.key == "max_target_length"; });
  ASSERT_NE(row, keys.end());
  EXPECT_EQ(row->value, "1536");
  EXPECT_EQ(row->given, "--max_prompt_length=1024 --max_response_length=512");
  EXPECT_EQ(keys_of({"--max_prompt_length=1024", "--max_response_length=512",
                     "--max_seq_token_per_tpu=4096"})["max_target_length"],
            "4096 <- --max_seq_token_per_tpu");
  EXPECT_EQ(keys_of({"--max_prompt_length=1024"})["max_target_length"],
            "1152 <- --max_prompt_length + --max_response_length");
  EXPECT_EQ(trainer_keys_error_of({"--max_prompt_length=x"}),
            "trainer argv --max_prompt_length=x: not an integer");
}

TEST(TrainerKeys, LearningRateSpellingsTheLaterWins) {
  // run_trainer_node@035dbdb9: --optimizer_learning_rate and --learning_rate are one argparse
  // option, so the later item wins, whichever its spelling.
  EXPECT_EQ(keys_of({"--learning_rate=1e-6", "--optimizer_learning_rate=3e-6"})["learning_rate"],
            "3e-6 <- --optimizer_learning_rate");
  EXPECT_EQ(keys_of({"--optimizer_learning_rate=3e-6", "--learning_rate=1e-6"})["learning_rate"],
            "1e-6 <- --learning_rate");
  // A repeated flag counts at its last position.
  EXPECT_EQ(keys_of({"--learning_rate=1e-6", "--optimizer_learning_rate=3e-6",
                     "--learning_rate=2e-6"})["learning_rate"],
            "2e-6 <- --learning_rate");
  EXPECT_EQ(keys_of({"--mesh_fsdp=4", "--mesh_fsdp=08"})["ici_fsdp_parallelism"],
            "8 <- --mesh_fsdp")
      << "an int, as Python prints it";
  EXPECT_EQ(trainer_keys_error_of({"--mesh_tp=x"}), "trainer argv --mesh_tp=x: not an integer");
}

TEST(TrainerKeys, OtherMaxTextFlagsAndWhatTheRenderWrote) {
  std::vector<TrainerKey> keys =
      trainer_keys({"--maxtext_sa_block_q=512", "--port=8000", "--mesh_tp=4"}, {});
  auto find = [&](std::string_view key) {
    return *std::find_if(keys.begin(), keys.end(),
                         [&](const TrainerKey& k) { return k.key == key; });
  };
  TrainerKey block = find("sa_block_q");
  EXPECT_EQ(block.value, "512");
  EXPECT_EQ(block.rule, nullptr) << "the --maxtext_X rule, no row";
  EXPECT_EQ(find("ici_tensor_parallelism").given, "--mesh_tp=4");
  EXPECT_EQ(find("dtype").given, "") << "a constant: nothing in the render";
  EXPECT_EQ(maxtext_key_of_flag("port"), std::nullopt);
}

TEST(MaxTextKeyOfFlag, Mapping) {
  test::expect_cases(maxtext_key_of_flag, {{"maxtext_ckpt_path", "load_parameters_path"},
                                           {"maxtext_attention", "attention"},
                                           {"maxtext_sa_block_q", "sa_block_q"},
                                           {"mesh_tp", "ici_tensor_parallelism"},
                                           {"worker_id", "run_name"},
                                           {"optimizer_learning_rate", "learning_rate"},
                                           {"remat_policy", "remat_policy"}});
  EXPECT_FALSE(maxtext_key_of_flag("maxtext_"));
  EXPECT_FALSE(maxtext_key_of_flag("port"));
}

TEST(FlagsSettingKey, TheTableBackwards) {
  EXPECT_THAT(flags_setting_key("learning_rate"),
              ::testing::ElementsAre("optimizer_learning_rate", "learning_rate"));
  EXPECT_THAT(flags_setting_key("load_parameters_path"),
              ::testing::ElementsAre("maxtext_ckpt_path", "maxtext_load_parameters_path"));
  EXPECT_THAT(flags_setting_key("sa_block_q"), ::testing::ElementsAre("maxtext_sa_block_q"));
  EXPECT_THAT(flags_setting_key("dtype"), ::testing::IsEmpty()) << "a constant";
  // max_target_length is derived: none of the flags it comes from is a row's.
  for (std::string_view flag :
       {"max_seq_token_per_tpu", "max_prompt_length", "max_response_length"})
    EXPECT_EQ(maxtext_key_of_flag(flag), std::nullopt) << flag;
}

TEST(ExtraFlagKeys, ItemsInOrder) {
  std::vector<TrainerKey> keys = extra_flag_keys({"a=1", "=2", "b", "a=3", "c="});
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].origin, "MAXTEXT_EXTRA_FLAGS a=1");
  EXPECT_EQ(keys[1].value, "3");
  EXPECT_EQ(keys[2].key, "c");
  EXPECT_EQ(keys[2].value, "");
}

TEST(Checkpoint, KeysAndTheFlagsThatSetThem) {
  EXPECT_TRUE(is_checkpoint_key("load_parameters_path"));
  EXPECT_TRUE(is_checkpoint_key("load_full_state_path"));
  EXPECT_FALSE(is_checkpoint_key("base_output_directory"));
  EXPECT_FALSE(is_checkpoint_key("enable_checkpointing"));
  for (const char* flag :
       {"maxtext_ckpt_path", "maxtext_load_parameters_path", "maxtext_load_full_state_path"}) {
    EXPECT_TRUE(is_checkpoint_flag(flag)) << flag;
  }
  for (const char* flag : {"maxtext_output_directory", "checkpoint_root_directory",
                           "maxtext_checkpoint_dir", "model_dir", "ckpt_path"}) {
    EXPECT_FALSE(is_checkpoint_flag(flag)) << flag;
  }
  EXPECT_EQ(kCheckpointEnv, "MAXTEXT_CKPT");
}

TEST(Checkpoint, OnlyANonEmptyValueLoadsOne) {
  test::expect_calls<bool, std::string_view, std::string_view>(
      loads_checkpoint, {{{"maxtext_ckpt_path", "gs://b/ckpt"}, true},
                         {{"load_full_state_path", "gs://b/state"}, true},
                         {{kCheckpointEnv, "gs://b/ckpt"}, true},
                         {{"maxtext_ckpt_path", ""}, false},
                         {{kCheckpointEnv, " "}, false},
                         {{"load_parameters_path", ""}, false},
                         {{"model_dir", "gs://b/model"}, false}});
}

TEST(Profiler, WhatStartsTheTrainersOwn) {
  EXPECT_TRUE(starts_trainer_profiler("--profiler_steps=3"));
  for (const char* item : {"--profiler_steps=0", "--profiler_steps=-1", "--profiler_steps=x",
                           "--skip_first_n_profiler_steps=3"}) {
    EXPECT_FALSE(starts_trainer_profiler(item)) << item;
  }
  EXPECT_TRUE(starts_maxtext_profiler("profiler=xplane"));
  for (const char* item : {"profiler=", "profiler_steps=3"}) {
    EXPECT_FALSE(starts_maxtext_profiler(item)) << item;
  }
}

}  // namespace
}  // namespace rtb::bench
