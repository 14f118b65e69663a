// What Tunix's trainer (run_trainer_node / build_maxtext_config; docs/tunix-maxtext-facts.md E)
// passes MaxText for its argv and environment: one table of rules (trainer_key_rules) and one
// reading of it (trainer_keys), which diff-configs and aot-check both use.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rtb::bench {

// When a rule sets its key. A source (the flag, then the environment variable, then the default)
// that does not meet the condition is skipped, as build_maxtext_config's `x or y or z` does.
enum class KeyApplies {
  kAlways,     // whatever the value
  kPositive,   // an integer > 0 (0 means "not set")
  kAboveOne,   // an integer > 1
  kNotEmpty,   // a non-empty value (Tunix tests the value's truth)
  kTrue,       // a true boolean (flags: argparse's str2bool; environment: 1 or true, as Tunix
               // tests OVERRIDE_MODEL_CONFIG)
  kProfiling,  // only while the trainer's profiler runs: --profiler_steps > 0
  kDerived,    // computed by trainer_keys from several flags (max_target_length)
};

// How a rule's value prints.
enum class KeyPrints {
  kAsGiven,     // as the argv, environment or default spells it
  kInteger,     // an integer as Python formats argparse's int ("08" -> 8)
  kPythonBool,  // Python's True/False, as build_maxtext_config formats a bool
  kFixed,       // the rule's `fallback`: a constant, or, with a flag or a variable, the value
                // that source turns on (then `fallback` is no default)
};

// Where a rule's default comes from, which is how a key set by it is labelled.
enum class DefaultFrom {
  kRunTrainerNode,      // run_trainer_node's argparse default: "run_trainer_node default"
  kBuildMaxtextConfig,  // build_maxtext_config's own fallback: "Tunix default"
  kTunixConstant,       // a key Tunix always passes, no flag: "Tunix"
};

// One MaxText key Tunix's trainer passes. Rows are in build_maxtext_config's order.
struct TrainerKeyRule {
  std::string_view key{};
  // The argv spellings (without dashes) of one argparse option: the later item in argv wins.
  std::vector<std::string_view> flags{};
  // The environment variable Tunix falls back to when no flag gives a value; empty for none.
  std::string_view env{};
  // The value when neither gives one (a constant's value, for kFixed); nullopt: the key is unset.
  std::optional<std::string_view> fallback{};
  KeyApplies applies = KeyApplies::kAlways;
  KeyPrints prints = KeyPrints::kAsGiven;
  DefaultFrom default_from = DefaultFrom::kRunTrainerNode;
  // A key of an earlier row that must be set for this one to apply (its origin becomes this key's);
  // empty for none. `applies` then tests that key's value.
  std::string_view requires_key{};
  std::string_view upstream{};  // where google/tunix says so
};

// The table, in build_maxtext_config's order. A new Tunix flag is one row here.
std::span<const TrainerKeyRule> trainer_key_rules();

// A MaxText key with its value and origin: "--flag" (the spelling given last), an environment
// variable's name, "run_trainer_node default", "Tunix default", "Tunix" (a constant), or for a key
// Tunix adds with another the other's origin ("--base_num_kv_heads", "--mesh_context > 1").
// `given` is what the render wrote: the argv items or the `NAME=value` assignment; empty for
// defaults, constants and keys Tunix adds. `rule` is nullptr for a key set by the `--maxtext_X`
// -> X rule alone.
struct TrainerKey {
  std::string key;
  std::string value;
  std::string origin;
  std::string given;
  const TrainerKeyRule* rule = nullptr;
};

// Every key the trainer passes MaxText for `argv` (`--flag=value` items; the last of a flag wins)
// and `env` (the trainer's environment, name -> value): the table's rows in order, defaults and
// constants included, then any other `--maxtext_X` as X, in argv order. max_target_length is the
// row the trainer is fed, max(--max_prompt_length + --max_response_length,
// --max_seq_token_per_tpu). Keys that depend on more than the argv (per_device_batch_size,
// gradient_accumulation_steps, enable_checkpointing, KV-head replication from the model's YAML)
// are not here. Throws rtb::Error "trainer argv <item>: not an integer|not a boolean" for a value
// argparse would refuse.
std::vector<TrainerKey> trainer_keys(const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& env);

// Python's str2bool as run_trainer_node reads its boolean flags; nullopt for anything else.
std::optional<bool> parse_str2bool(std::string_view text);

// The MaxText key that a trainer argv flag (without dashes) sets: the table's, any other
// `--maxtext_X` -> X; nullopt for flags that set no MaxText key.
std::optional<std::string> maxtext_key_of_flag(std::string_view flag);

// The trainer argv flags (without dashes) that set MaxText `key`: the table's, in its order
// ({"optimizer_learning_rate", "learning_rate"} for learning_rate; none for a constant), else
// `maxtext_<key>`.
std::vector<std::string> flags_setting_key(std::string_view key);

// A MaxText key that lays out the device mesh over the slice: the ICI and DCN parallelism of each
// axis (ici_*, dcn_*) and mesh_axes. The mesh is the slice's, so a same-pod arm (arms.h), which
// shares the slice with every other run, may not change one.
bool is_mesh_key(std::string_view maxtext_key);

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

// MAXTEXT_EXTRA_FLAGS items (`key=value`) as keys, origin and given "MAXTEXT_EXTRA_FLAGS <item>";
// items without a key or a value are skipped.
std::vector<TrainerKey> extra_flag_keys(const std::vector<std::string>& items);

}  // namespace rtb::bench
