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

// MAXTEXT_EXTRA_FLAGS items (`key=value`) as keys, origin "MAXTEXT_EXTRA_FLAGS <item>"; items
// without a key or a value are skipped.
std::vector<TrainerKey> extra_flag_keys(const std::vector<std::string>& items);

}  // namespace rtb::bench
