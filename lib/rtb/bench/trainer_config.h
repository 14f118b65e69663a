// What Tunix's trainer (run_trainer_node / build_maxtext_config; docs/tunix-maxtext-facts.md E)
// makes of its argv: the MaxText keys the flags set, each with the argv item it comes from.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::bench {

// A MaxText key with its value and origin (the argv item, or items, that set it).
struct TrainerKey {
  std::string key;
  std::string value;
  std::string origin;
};

// The MaxText key that a trainer argv flag sets: `--maxtext_model_name` -> model_name,
// `--maxtext_ckpt_path` -> load_parameters_path, `--maxtext_output_directory` ->
// base_output_directory, `--maxtext_padded_moe_mlp_dim` -> padded_base_moe_mlp_dim, any other
// `--maxtext_X` -> X, `--mesh_fsdp|tp|expert|context` ->
// ici_fsdp|tensor|expert|context_parallelism, `--learning_rate` and `--optimizer_learning_rate`
// -> learning_rate, `--worker_id` -> run_name, ...; nullopt for flags that set no MaxText key.
// `flag` is the flag's key without dashes. This is the one table of Tunix's argv -> MaxText keys:
// diff-configs (trainer_keys_from_argv) and aot-check (aot_plan.cc) both read it.
std::optional<std::string> maxtext_key_of_flag(std::string_view flag);

// The trainer argv flags (without dashes) that set MaxText `key`: the table's, in name order
// ({"learning_rate", "optimizer_learning_rate"} for learning_rate), else `maxtext_<key>`
// (attention: {"maxtext_attention"}).
std::vector<std::string> flags_setting_key(std::string_view key);

// The flag among flags_setting_key(key) whose value the trainer uses: the one `argv` gives last.
// run_trainer_node declares the spellings of one setting as aliases of one argparse option, so
// the later item wins whatever its spelling. nullopt when `argv` gives none of them.
std::optional<std::string> trainer_flag_for_key(const std::vector<std::string>& argv,
                                                std::string_view key);

// The keys a trainer argv (`--flag=value` items; the last of a flag wins) sets where Tunix passes
// them (sizes > 0, paths and policies non-empty, profiler keys only with --profiler_steps > 0), and
// max_target_length: the rows the trainer is fed, max(--max_prompt_length + --max_response_length,
// --max_seq_token_per_tpu). Sorted by key; of two flags that set one key, the one given last wins
// (trainer_flag_for_key).
std::vector<TrainerKey> trainer_keys_from_argv(const std::vector<std::string>& argv);

// --- What loads a checkpoint, and what runs the trainer's profiler ------------------------------
// The one place that decides both: render-bench (--weights random drops what loads a checkpoint;
// --profile-window drops what turns the trainer's profiler on), aot-check (which passes no
// checkpoint to its compile) and diff-renders --expect-bench (which accepts those drops) read it.

// MaxText loads weights when one of its keys load_parameters_path (parameters only) or
// load_full_state_path (the whole train state) is non-empty (MaxText configs/base.yml).
bool is_checkpoint_key(std::string_view maxtext_key);
// A trainer argv flag (without dashes) that sets a checkpoint key: --maxtext_ckpt_path,
// --maxtext_load_parameters_path, --maxtext_load_full_state_path.
bool is_checkpoint_flag(std::string_view flag);
// run_trainer_node's --maxtext_ckpt_path defaults to this environment variable, so a trainer whose
// argv gives no such flag still loads the checkpoint it names.
inline constexpr std::string_view kCheckpointEnv = "MAXTEXT_CKPT";

// Whether a setting makes Tunix's trainer load a checkpoint: `name` is a checkpoint flag (without
// dashes, is_checkpoint_flag), a checkpoint MaxText key (a MAXTEXT_EXTRA_FLAGS item's,
// is_checkpoint_key) or kCheckpointEnv, and `value` is not blank. Tunix sets the MaxText key only
// for a non-empty value, so `--maxtext_ckpt_path=` or MAXTEXT_CKPT="" loads no checkpoint.
bool loads_checkpoint(std::string_view name, std::string_view value);

// A trainer argv item that turns Tunix's MaxText profiler on: --profiler_steps with a value > 0
// (build_maxtext_config then sets profiler=xplane).
bool starts_trainer_profiler(std::string_view argv_item);
// A MAXTEXT_EXTRA_FLAGS item that turns MaxText's profiler on: profiler=<non-empty>.
bool starts_maxtext_profiler(std::string_view extra_flag_item);

// MAXTEXT_EXTRA_FLAGS items (`key=value`) as keys, origin "MAXTEXT_EXTRA_FLAGS <item>"; items
// without a key or a value are skipped.
std::vector<TrainerKey> extra_flag_keys(const std::vector<std::string>& items);

}  // namespace rtb::bench
