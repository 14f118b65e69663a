// Tests of bench/trainer_config.h: what Tunix's trainer makes of its argv.
#include "rtb/bench/trainer_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "test_util.h"

namespace rtb::bench {
namespace {

std::map<std::string, std::string> keys_of(const std::vector<std::string>& argv) {
  std::map<std::string, std::string> out;
  for (const TrainerKey& k : trainer_keys_from_argv(argv)) out[k.key] = k.value + " <- " + k.origin;
  return out;
}

TEST(MaxTextKeyOfFlag, Mapping) {
  test::expect_cases(maxtext_key_of_flag, {{"maxtext_ckpt_path", "load_parameters_path"},
                                           {"maxtext_attention", "attention"},
                                           {"mesh_tp", "ici_tensor_parallelism"},
                                           {"worker_id", "run_name"},
                                           {"optimizer_learning_rate", "learning_rate"},
                                           {"remat_policy", "remat_policy"}});
  EXPECT_FALSE(maxtext_key_of_flag("maxtext_"));
  EXPECT_FALSE(maxtext_key_of_flag("port"));
}

TEST(TrainerKeysFromArgv, WhereTunixPassesThem) {
  auto keys = keys_of({"--maxtext_model_name=qwen3-30b-a3b", "--mesh_fsdp=4", "--mesh_fsdp=8",
                       "--rollout_mesh_tp=0", "--maxtext_ckpt_path=", "--base_num_kv_heads=4",
                       "--profiler_period=5", "--port=8000", "--no-prefuse_moe_weights",
                       "--use_weight_converter"});
  EXPECT_EQ(keys["model_name"], "qwen3-30b-a3b <- --maxtext_model_name=qwen3-30b-a3b");
  EXPECT_EQ(keys["ici_fsdp_parallelism"], "8 <- --mesh_fsdp=8");  // the last one wins
  EXPECT_EQ(keys["base_num_kv_heads"], "4 <- --base_num_kv_heads=4");
  EXPECT_EQ(keys["prefuse_moe_weights"], "false <- --no-prefuse_moe_weights");
  EXPECT_EQ(keys["use_weight_converter"], "true <- --use_weight_converter");
  EXPECT_EQ(keys.count("rollout_tensor_parallelism"), 0u);   // 0: not set
  EXPECT_EQ(keys.count("load_parameters_path"), 0u);         // empty path: not passed
  EXPECT_EQ(keys.count("profile_periodically_period"), 0u);  // no profiler
  EXPECT_EQ(keys.size(), 5u);
  keys = keys_of({"--profiler_steps=3", "--profiler_period=5"});
  EXPECT_EQ(keys["profiler_steps"], "3 <- --profiler_steps=3");
  EXPECT_EQ(keys["profile_periodically_period"], "5 <- --profiler_period=5");
}

TEST(TrainerKeysFromArgv, MaxTargetLengthIsTheRowFed) {
  auto keys = keys_of({"--max_prompt_length=1024", "--max_response_length=512"});
  EXPECT_EQ(keys["max_target_length"],
            "1536 <- --max_prompt_length=1024 --max_response_length=512");
  keys = keys_of(
      {"--max_prompt_length=1024", "--max_response_length=512", "--max_seq_token_per_tpu=4096"});
  EXPECT_EQ(keys["max_target_length"], "4096 <- --max_seq_token_per_tpu=4096");
  EXPECT_EQ(keys_of({"--max_prompt_length=1024"}).count("max_target_length"), 0u);
  EXPECT_EQ(
      keys_of({"--max_prompt_length=x", "--max_response_length=1"}).count("max_target_length"), 0u);
}

TEST(TrainerKeysFromArgv, LearningRateSpellingsTheLaterWins) {
  // run_trainer_node@035dbdb9: --optimizer_learning_rate and --learning_rate are one argparse
  // option, so the later item wins, whichever its spelling.
  EXPECT_EQ(keys_of({"--learning_rate=1e-6", "--optimizer_learning_rate=3e-6"})["learning_rate"],
            "3e-6 <- --optimizer_learning_rate=3e-6");
  EXPECT_EQ(keys_of({"--optimizer_learning_rate=3e-6", "--learning_rate=1e-6"})["learning_rate"],
            "1e-6 <- --learning_rate=1e-6");
  // A repeated flag counts at its last position.
  EXPECT_EQ(keys_of({"--learning_rate=1e-6", "--optimizer_learning_rate=3e-6",
                     "--learning_rate=2e-6"})["learning_rate"],
            "2e-6 <- --learning_rate=2e-6");
  EXPECT_EQ(
      trainer_flag_for_key({"--learning_rate=1", "--optimizer_learning_rate=2"}, "learning_rate"),
      "optimizer_learning_rate");
  EXPECT_EQ(
      trainer_flag_for_key({"--optimizer_learning_rate=2", "--learning_rate=1"}, "learning_rate"),
      "learning_rate");
  EXPECT_EQ(trainer_flag_for_key({"--port=1"}, "learning_rate"), std::nullopt);
}

TEST(TrainerKeysFromArgv, LauncherFlagsThatSetMaxTextKeys) {
  // k8s_launcher.sh passes these; build_maxtext_config sets the keys of the same name, the
  // policy and the mask only when not empty.
  auto keys = keys_of({"--remat_policy=custom", "--learning_rate_final_fraction=0.1",
                       "--trainable_parameters_mask=^(?!.*gate).*", "--maxtext_attention=flash"});
  EXPECT_EQ(keys["remat_policy"], "custom <- --remat_policy=custom");
  EXPECT_EQ(keys["learning_rate_final_fraction"], "0.1 <- --learning_rate_final_fraction=0.1");
  EXPECT_EQ(keys["trainable_parameters_mask"],
            "^(?!.*gate).* <- --trainable_parameters_mask=^(?!.*gate).*");
  EXPECT_EQ(keys["attention"], "flash <- --maxtext_attention=flash");
  keys = keys_of({"--remat_policy=", "--trainable_parameters_mask=", "--maxtext_attention="});
  EXPECT_TRUE(keys.empty());
}

TEST(FlagsSettingKey, TheTableBackwards) {
  EXPECT_THAT(flags_setting_key("learning_rate"),
              ::testing::ElementsAre("learning_rate", "optimizer_learning_rate"));
  EXPECT_THAT(flags_setting_key("load_parameters_path"),
              ::testing::ElementsAre("maxtext_ckpt_path", "maxtext_load_parameters_path"));
  EXPECT_THAT(flags_setting_key("attention"), ::testing::ElementsAre("maxtext_attention"));
  EXPECT_THAT(flags_setting_key("ici_fsdp_parallelism"), ::testing::ElementsAre("mesh_fsdp"));
  EXPECT_THAT(flags_setting_key("remat_policy"), ::testing::ElementsAre("remat_policy"));
  EXPECT_THAT(flags_setting_key("skip_step_on_nan"),
              ::testing::ElementsAre("maxtext_skip_step_on_nan"));
  // max_target_length is purpose-specific: none of the flags it derives from is in the table.
  for (std::string_view flag :
       {"max_seq_token_per_tpu", "max_prompt_length", "max_response_length"})
    EXPECT_EQ(maxtext_key_of_flag(flag), std::nullopt) << flag;
  for (std::string_view key : {"learning_rate", "run_name", "warmup_steps_fraction"}) {
    for (const std::string& flag : flags_setting_key(key))
      EXPECT_EQ(maxtext_key_of_flag(flag), key) << flag;
  }
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
  EXPECT_TRUE(loads_checkpoint("maxtext_ckpt_path", "gs://b/ckpt"));
  EXPECT_TRUE(loads_checkpoint("load_full_state_path", "gs://b/state"));
  EXPECT_TRUE(loads_checkpoint(kCheckpointEnv, "gs://b/ckpt"));
  EXPECT_FALSE(loads_checkpoint("maxtext_ckpt_path", ""));
  EXPECT_FALSE(loads_checkpoint(kCheckpointEnv, " "));
  EXPECT_FALSE(loads_checkpoint("load_parameters_path", ""));
  EXPECT_FALSE(loads_checkpoint("model_dir", "gs://b/model"));
}

TEST(Profiler, WhatStartsTheTrainersOwn) {
  EXPECT_TRUE(starts_trainer_profiler("--profiler_steps=3"));
  EXPECT_FALSE(starts_trainer_profiler("--profiler_steps=0"));
  EXPECT_FALSE(starts_trainer_profiler("--profiler_steps=-1"));
  EXPECT_FALSE(starts_trainer_profiler("--profiler_steps=x"));
  EXPECT_FALSE(starts_trainer_profiler("--skip_first_n_profiler_steps=3"));
  EXPECT_TRUE(starts_maxtext_profiler("profiler=xplane"));
  EXPECT_FALSE(starts_maxtext_profiler("profiler="));
  EXPECT_FALSE(starts_maxtext_profiler("profiler_steps=3"));
  // The same rule as trainer_keys_from_argv: profiler keys only with --profiler_steps > 0.
  EXPECT_TRUE(
      trainer_keys_from_argv({"--profiler_steps=0", "--skip_first_n_profiler_steps=2"}).empty());
}

}  // namespace
}  // namespace rtb::bench
