#include "rtb/bench/trainer_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "rtb/base/error.h"
#include "rtb/base/text.h"
#include "rtb/k8s/flags.h"

namespace rtb::bench {
namespace {

// Sources. run_trainer_node: google/tunix tunix/experimental/examples/common/run_trainer_node.py
// @035dbdb94cffca599c51f22b91bd1d0461eb92f6 (its argparse options and defaults).
// build_maxtext_config: google/tunix tunix/utils/maxtext_utils.py, the version of the search
// index's file id 70923261772 (newer than @035dbdb9: it takes mesh_context, attention,
// remat_policy, learning_rate_final_fraction, skip_step_*, float32_*); k8s_launcher.sh (file id
// 68397836992) passes --remat_policy, --learning_rate_final_fraction and
// --trainable_parameters_mask.
constexpr std::string_view kArgparse = "run_trainer_node@035dbdb9 _parse_args";
constexpr std::string_view kBuild = "maxtext_utils.py build_maxtext_config (file id 70923261772)";

using enum KeyApplies;
using enum KeyPrints;
using enum DefaultFrom;

// A key Tunix always passes with this value, whatever the argv and environment.
TrainerKeyRule constant(std::string_view key, std::string_view value) {
  return {.key = key,
          .fallback = value,
          .prints = kFixed,
          .default_from = kTunixConstant,
          .upstream = kBuild};
}

const std::vector<TrainerKeyRule>& rules() {
  static const std::vector<TrainerKeyRule> kRules = {
      {.key = "model_name",
       .flags = {"maxtext_model_name"},
       .fallback = "qwen3-0.6b",
       .upstream = kArgparse},
      // build_maxtext_config uses `worker_id or 'tunix_maxtext'`; argparse's default is not empty.
      {.key = "run_name", .flags = {"worker_id"}, .fallback = "trainer-0", .upstream = kArgparse},
      // argparse defaults to $MAXTEXT_OUTPUT_DIR, else a path under Tunix's checkout (unknowable).
      {.key = "base_output_directory",
       .flags = {"maxtext_output_directory"},
       .env = "MAXTEXT_OUTPUT_DIR",
       .upstream = kArgparse},
      // Set only for a non-empty path; argparse defaults --maxtext_ckpt_path to $MAXTEXT_CKPT.
      {.key = "load_parameters_path",
       .flags = {"maxtext_ckpt_path", "maxtext_load_parameters_path"},
       .env = kCheckpointEnv,
       .applies = kNotEmpty,
       .upstream = kBuild},
      // Passed only with ProfilerOptions, which run_trainer_node builds for --profiler_steps > 0.
      {.key = "profiler",
       .fallback = "xplane",
       .applies = kProfiling,
       .prints = kFixed,
       .default_from = kTunixConstant,
       .upstream = kBuild},
      {.key = "profiler_steps",
       .flags = {"profiler_steps"},
       .fallback = "0",
       .applies = kProfiling,
       .prints = kInteger,
       .upstream = kArgparse},
      {.key = "skip_first_n_steps_for_profiler",
       .flags = {"skip_first_n_profiler_steps"},
       .fallback = "1",
       .applies = kProfiling,
       .prints = kInteger,
       .upstream = kArgparse},
      {.key = "profile_periodically_period",
       .flags = {"profiler_period"},
       .fallback = "-1",
       .applies = kProfiling,
       .prints = kInteger,
       .upstream = kArgparse},
      constant("scan_layers", "True"),
      constant("convert_checkpoint_if_possible", "False"),
      constant("skip_jax_distributed_system", "True"),
      constant("allow_split_physical_axes", "True"),
      // The row the trainer is fed (trainer_keys computes it; aot-check compiles its own).
      {.key = "max_target_length", .applies = kDerived, .upstream = kBuild},
      // `attention or TRAINER_MAXTEXT_ATTENTION or "dot_product"`.
      {.key = "attention",
       .flags = {"maxtext_attention"},
       .env = "TRAINER_MAXTEXT_ATTENTION",
       .fallback = "dot_product",
       .applies = kNotEmpty,
       .default_from = kBuildMaxtextConfig,
       .upstream = kBuild},
      {.key = "remat_policy", .flags = {"remat_policy"}, .applies = kNotEmpty, .upstream = kBuild},
      {.key = "learning_rate_final_fraction",
       .flags = {"learning_rate_final_fraction"},
       .upstream = kBuild},
      constant("use_tokamax_gmm", "true"),
      constant("use_gmm_v2", "true"),
      {.key = "ici_fsdp_parallelism",
       .flags = {"mesh_fsdp"},
       .fallback = "2",
       .prints = kInteger,
       .upstream = kArgparse},
      {.key = "padded_base_moe_mlp_dim",
       .flags = {"maxtext_padded_moe_mlp_dim"},
       .applies = kPositive,
       .prints = kInteger,
       .upstream = kBuild},
      {.key = "base_num_kv_heads",
       .flags = {"base_num_kv_heads"},
       .applies = kPositive,
       .prints = kInteger,
       .upstream = kBuild},
      {.key = "override_model_config",
       .fallback = "true",
       .prints = kFixed,
       .requires_key = "base_num_kv_heads",
       .upstream = kBuild},
      {.key = "ici_tensor_parallelism",
       .flags = {"mesh_tp"},
       .fallback = "1",
       .prints = kInteger,
       .upstream = kArgparse},
      {.key = "ici_expert_parallelism",
       .flags = {"mesh_expert"},
       .fallback = "1",
       .prints = kInteger,
       .upstream = kArgparse},
      {.key = "ici_context_parallelism",
       .flags = {"mesh_context"},
       .fallback = "1",
       .prints = kInteger,
       .upstream = kBuild},
      {.key = "context_parallel_load_balance",
       .fallback = "False",
       .applies = kAboveOne,
       .prints = kFixed,
       .requires_key = "ici_context_parallelism",
       .upstream = kBuild},
      // One argparse option, dest optimizer_learning_rate: the later spelling in argv wins.
      {.key = "learning_rate",
       .flags = {"optimizer_learning_rate", "learning_rate"},
       .fallback = "2e-07",
       .upstream = kArgparse},
      {.key = "warmup_steps_fraction",
       .flags = {"maxtext_warmup_steps_fraction"},
       .fallback = "0.0",
       .upstream = kArgparse},
      constant("dtype", "bfloat16"),
      constant("weight_dtype", "bfloat16"),
      constant("grad_dtype", "float32"),
      constant("mu_dtype", "float32"),
      {.key = "float32_gate_logits",
       .env = "FLOAT32_GATE_LOGITS",
       .fallback = "True",
       .prints = kPythonBool,
       .default_from = kBuildMaxtextConfig,
       .upstream = kBuild},
      {.key = "float32_logits", .env = "FLOAT32_LOGITS", .prints = kPythonBool, .upstream = kBuild},
      constant("enable_tensorboard", "False"),
      constant("record_internal_nn_metrics", "False"),
      constant("init_weights_seed", "42"),
      {.key = "prefuse_moe_weights",
       .flags = {"prefuse_moe_weights"},
       .fallback = "False",
       .prints = kPythonBool,
       .upstream = kArgparse},
      {.key = "use_weight_converter",
       .flags = {"use_weight_converter"},
       .fallback = "True",
       .prints = kPythonBool,
       .upstream = kArgparse},
      {.key = "rollout_tensor_parallelism",
       .flags = {"rollout_mesh_tp"},
       .applies = kPositive,
       .prints = kInteger,
       .upstream = kBuild},
      {.key = "trainable_parameters_mask",
       .flags = {"trainable_parameters_mask"},
       .applies = kNotEmpty,
       .upstream = kBuild},
      {.key = "skip_step_on_spikes",
       .flags = {"maxtext_skip_step_on_spikes"},
       .fallback = "False",
       .applies = kTrue,
       .prints = kPythonBool,
       .upstream = kBuild},
      {.key = "skip_step_on_nan",
       .flags = {"maxtext_skip_step_on_nan"},
       .fallback = "True",
       .prints = kPythonBool,
       .upstream = kBuild},
      {.key = "skip_step_interval",
       .fallback = "128",
       .prints = kFixed,
       .requires_key = "skip_step_on_spikes",
       .upstream = kBuild},
      {.key = "skip_step_scaling_factor",
       .fallback = "6.0",
       .prints = kFixed,
       .requires_key = "skip_step_on_spikes",
       .upstream = kBuild},
      // Appended when OVERRIDE_MODEL_CONFIG is 1 or true and the KV heads did not set it already.
      {.key = "override_model_config",
       .env = "OVERRIDE_MODEL_CONFIG",
       .fallback = "true",
       .applies = kTrue,
       .prints = kFixed,
       .upstream = kBuild},
  };
  return kRules;
}

constexpr std::string_view kMaxTextPrefix = "maxtext_";

// The row whose flags include `flag`, nullptr for none.
const TrainerKeyRule* rule_of_flag(std::string_view flag) {
  for (const TrainerKeyRule& rule : rules()) {
    if (std::find(rule.flags.begin(), rule.flags.end(), flag) != rule.flags.end()) return &rule;
  }
  return nullptr;
}

std::optional<long long> as_integer(std::string_view text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// The environment's booleans as Tunix reads them: 1/true/yes, 0/false/no.
std::optional<bool> env_bool(std::string_view text) {
  std::string lowered = lower_ascii(text);
  if (lowered == "1" || lowered == "true" || lowered == "yes") return true;
  if (lowered == "0" || lowered == "false" || lowered == "no") return false;
  return std::nullopt;
}

std::string_view default_origin(DefaultFrom from) {
  switch (from) {
    case kRunTrainerNode:
      return "run_trainer_node default";
    case kBuildMaxtextConfig:
      return "Tunix default";
    case kTunixConstant:
      return "Tunix";
  }
  return "";
}

// A value for a rule, from one source, before its condition and printing.
struct Candidate {
  enum class Source { kFlag, kEnv, kDefault } source;
  std::string value;
  std::string origin;
  std::string given;
};

// The trainer's argv as argparse reads it: per flag, its last item and that item's position.
class ArgvReader {
 public:
  explicit ArgvReader(const std::vector<std::string>& items) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      std::string_view flag = k8s::flag_key(items[i], k8s::FlagStyle::kDashDash);
      if (!flag.empty()) last_[std::string(flag)] = {i, items[i]};
    }
  }
  // The item of the spelling among `flags` that argv gives last.
  std::optional<std::pair<std::string, std::string>> last_of(
      const std::vector<std::string_view>& flags) const {
    const std::pair<const std::string, std::pair<std::size_t, std::string>>* found = nullptr;
    for (std::string_view flag : flags) {
      auto it = last_.find(std::string(flag));
      if (it != last_.end() && (!found || it->second.first > found->second.first)) found = &*it;
    }
    if (!found) return std::nullopt;
    return std::make_pair(found->first, found->second.second);
  }
  // Flags by their last occurrence, first to last.
  std::vector<std::string> in_order() const {
    std::vector<std::pair<std::size_t, std::string>> order;
    for (const auto& [flag, at] : last_) order.emplace_back(at.first, flag);
    std::sort(order.begin(), order.end());
    std::vector<std::string> out;
    for (auto& [_, flag] : order) out.push_back(std::move(flag));
    return out;
  }
  const std::string* item(const std::string& flag) const {
    auto it = last_.find(flag);
    return it == last_.end() ? nullptr : &it->second.second;
  }

 private:
  std::map<std::string, std::pair<std::size_t, std::string>> last_;
};

// A flag item's value: `--x=v` -> v; `--x` -> "true" and `--no-x` -> "false" (run_trainer_node's
// booleans take nargs="?" with const=True).
std::string item_value(std::string_view item) {
  if (auto value = k8s::flag_value(item, k8s::FlagStyle::kDashDash)) return std::string(*value);
  return k8s::is_negated(item, k8s::FlagStyle::kDashDash) ? "false" : "true";
}

long long integer_of(const Candidate& c) {
  auto value = as_integer(c.value);
  if (!value) {
    if (c.source == Candidate::Source::kFlag) fail("trainer argv {}: not an integer", c.given);
    return 0;  // a default or the environment that is no integer: the key stays unset
  }
  return *value;
}

// `c` as a boolean: argv by str2bool (argparse refuses anything else), the environment by
// env_bool (anything else is as if unset), a default as written.
std::optional<bool> boolean_of(const Candidate& c) {
  if (c.source == Candidate::Source::kFlag) {
    auto value = parse_str2bool(c.value);
    if (!value) fail("trainer argv {}: not a boolean", c.given);
    return value;
  }
  return env_bool(c.value);
}

// Whether `c` meets `applies`. `profiling` is whether --profiler_steps > 0.
bool meets(KeyApplies applies, const Candidate& c, bool profiling) {
  switch (applies) {
    case kAlways:
    case kDerived:
      return true;
    case kPositive:
      return integer_of(c) > 0;
    case kAboveOne:
      return integer_of(c) > 1;
    case kNotEmpty:
      return !c.value.empty();
    case kTrue:
      if (c.source == Candidate::Source::kEnv) {
        // Tunix's own test for OVERRIDE_MODEL_CONFIG: `.lower() in ("1", "true")`.
        std::string lowered = lower_ascii(c.value);
        return lowered == "1" || lowered == "true";
      }
      return boolean_of(c).value_or(false);
    case kProfiling:
      return profiling;
  }
  return false;
}

// max_target_length: max(--max_prompt_length + --max_response_length, --max_seq_token_per_tpu),
// with run_trainer_node's defaults 512 and 128.
TrainerKey row_width(const ArgvReader& argv, const TrainerKeyRule& rule) {
  long long length = 0;
  std::string given;
  for (auto [flag, fallback] : {std::pair<std::string_view, long long>{"max_prompt_length", 512},
                                {"max_response_length", 128}}) {
    long long value = fallback;
    if (const std::string* item = argv.item(std::string(flag))) {
      value = integer_of({Candidate::Source::kFlag, item_value(*item), "", *item});
      given += (given.empty() ? "" : " ") + *item;
    }
    length += value;
  }
  std::string origin = "--max_prompt_length + --max_response_length";
  if (const std::string* item = argv.item("max_seq_token_per_tpu")) {
    long long packed = integer_of({Candidate::Source::kFlag, item_value(*item), "", *item});
    if (packed > length) {
      length = packed;
      origin = "--max_seq_token_per_tpu";
      given = *item;
    }
  }
  return {std::string(rule.key), std::to_string(length), origin, given, &rule};
}

}  // namespace

std::optional<bool> parse_str2bool(std::string_view text) {
  std::string lowered = lower_ascii(text);
  if (lowered == "yes" || lowered == "true" || lowered == "t" || lowered == "y" || lowered == "1")
    return true;
  if (lowered == "no" || lowered == "false" || lowered == "f" || lowered == "n" || lowered == "0")
    return false;
  return std::nullopt;
}

std::span<const TrainerKeyRule> trainer_key_rules() { return rules(); }

std::vector<TrainerKey> trainer_keys(const std::vector<std::string>& items,
                                     const std::map<std::string, std::string>& env) {
  ArgvReader argv(items);
  const std::string* profiler_item = argv.item("profiler_steps");
  bool profiling = profiler_item && starts_trainer_profiler(*profiler_item);
  std::vector<TrainerKey> out;
  auto set = [&](std::string_view key) {
    return std::find_if(out.begin(), out.end(), [&](const TrainerKey& k) { return k.key == key; });
  };
  for (const TrainerKeyRule& rule : rules()) {
    if (set(rule.key) != out.end()) continue;  // an earlier row set it: Tunix passes it once
    if (rule.applies == kDerived) {
      out.push_back(row_width(argv, rule));
      continue;
    }
    std::vector<Candidate> candidates;
    if (!rule.requires_key.empty()) {
      auto required = set(rule.requires_key);
      if (required == out.end()) continue;
      // The required key's value decides; the origin says which threshold it passed.
      Candidate c{Candidate::Source::kDefault, required->value, required->origin, required->given};
      if (!meets(rule.applies, c, profiling)) continue;
      std::string origin = required->origin + (rule.applies == kAboveOne ? " > 1" : "");
      // Tunix adds it: the render writes only what it depends on.
      out.push_back(
          {std::string(rule.key), std::string(rule.fallback.value_or("")), origin, "", &rule});
      continue;
    }
    if (auto given = argv.last_of(rule.flags)) {
      candidates.push_back({Candidate::Source::kFlag, item_value(given->second),
                            "--" + given->first, given->second});
    }
    if (!rule.env.empty()) {
      if (auto it = env.find(std::string(rule.env)); it != env.end()) {
        candidates.push_back({Candidate::Source::kEnv, it->second, std::string(rule.env),
                              std::string(rule.env) + "=" + it->second});
      }
    }
    // A kFixed row with a flag or variable prints its value only when that source says so.
    bool bare = rule.flags.empty() && rule.env.empty();
    if (rule.fallback && (rule.prints != kFixed || bare)) {
      candidates.push_back({Candidate::Source::kDefault, std::string(*rule.fallback),
                            std::string(default_origin(rule.default_from)), ""});
    }
    for (const Candidate& c : candidates) {
      if (!meets(rule.applies, c, profiling)) continue;
      std::string value = c.value;
      if (rule.prints == kFixed) {
        value = std::string(rule.fallback.value_or(""));
      } else if (rule.prints == kInteger) {
        value = std::to_string(integer_of(c));
      } else if (rule.prints == kPythonBool) {
        std::optional<bool> b = boolean_of(c);
        if (!b) continue;  // an environment value that is no boolean: as if unset
        value = *b ? "True" : "False";
      }
      out.push_back({std::string(rule.key), value, c.origin, c.given, &rule});
      break;
    }
  }
  // Any other --maxtext_X -> X, in argv order.
  for (const std::string& flag : argv.in_order()) {
    if (flag.size() <= kMaxTextPrefix.size() || flag.rfind(kMaxTextPrefix, 0) != 0) continue;
    if (rule_of_flag(flag)) continue;
    std::string key = flag.substr(kMaxTextPrefix.size());
    if (set(key) != out.end()) continue;
    const std::string& item = *argv.item(flag);
    out.push_back({key, item_value(item), "--" + flag, item, nullptr});
  }
  return out;
}

std::optional<std::string> maxtext_key_of_flag(std::string_view flag) {
  if (const TrainerKeyRule* rule = rule_of_flag(flag)) return std::string(rule->key);
  if (flag.size() > kMaxTextPrefix.size() &&
      flag.substr(0, kMaxTextPrefix.size()) == kMaxTextPrefix)
    return std::string(flag.substr(kMaxTextPrefix.size()));
  return std::nullopt;
}

std::vector<std::string> flags_setting_key(std::string_view key) {
  std::vector<std::string> flags;
  bool a_row = false;
  for (const TrainerKeyRule& rule : rules()) {
    if (rule.key != key) continue;
    a_row = true;
    for (std::string_view flag : rule.flags) flags.emplace_back(flag);
  }
  // A key the table does not name is set by the --maxtext_<key> rule (--maxtext_sa_block_q).
  std::string prefixed = std::string(kMaxTextPrefix) + std::string(key);
  if (!a_row && !key.empty() && maxtext_key_of_flag(prefixed) == key) flags.push_back(prefixed);
  return flags;
}

bool is_mesh_key(std::string_view maxtext_key) {
  return maxtext_key.starts_with("ici_") || maxtext_key.starts_with("dcn_") ||
         maxtext_key == "mesh_axes";
}

bool is_checkpoint_key(std::string_view maxtext_key) {
  return maxtext_key == "load_parameters_path" || maxtext_key == "load_full_state_path";
}

bool is_checkpoint_flag(std::string_view flag) {
  std::optional<std::string> key = maxtext_key_of_flag(flag);
  return key && is_checkpoint_key(*key);
}

bool loads_checkpoint(std::string_view name, std::string_view value) {
  bool checkpoint = is_checkpoint_flag(name) || is_checkpoint_key(name) || name == kCheckpointEnv;
  return checkpoint && !trim(value).empty();
}

bool starts_trainer_profiler(std::string_view argv_item) {
  if (k8s::flag_key(argv_item, k8s::FlagStyle::kDashDash) != "profiler_steps") return false;
  auto value = k8s::flag_value(argv_item, k8s::FlagStyle::kDashDash);
  return value && as_integer(*value).value_or(0) > 0;
}

bool starts_maxtext_profiler(std::string_view extra_flag_item) {
  if (k8s::flag_key(extra_flag_item, k8s::FlagStyle::kKeyValue) != "profiler") return false;
  auto value = k8s::flag_value(extra_flag_item, k8s::FlagStyle::kKeyValue);
  return value && !value->empty();
}

std::vector<TrainerKey> extra_flag_keys(const std::vector<std::string>& items) {
  std::vector<TrainerKey> out;
  for (const std::string& item : items) {
    std::string_view key = k8s::flag_key(item, k8s::FlagStyle::kKeyValue);
    auto value = k8s::flag_value(item, k8s::FlagStyle::kKeyValue);
    if (key.empty() || !value) continue;
    std::string origin = "MAXTEXT_EXTRA_FLAGS " + item;
    out.push_back({std::string(key), std::string(*value), origin, origin, nullptr});
  }
  return out;
}

}  // namespace rtb::bench
