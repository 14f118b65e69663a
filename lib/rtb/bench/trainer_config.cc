#include "rtb/bench/trainer_config.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "rtb/base/text.h"
#include "rtb/k8s/flags.h"

namespace rtb::bench {
namespace {

std::optional<long long> as_integer(const std::string& text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Flags whose MaxText key Tunix sets only when the value is positive (0 means "not set").
bool only_when_positive(std::string_view flag) {
  return flag == "maxtext_padded_moe_mlp_dim" || flag == "rollout_mesh_tp" ||
         flag == "base_num_kv_heads" || flag == "profiler_steps";
}

// Flags whose MaxText key Tunix sets only when the value is not empty (build_maxtext_config tests
// the value's truth: `if remat_policy`, `attention or TRAINER_MAXTEXT_ATTENTION or ...`).
bool only_when_not_empty(std::string_view flag) {
  return flag == "maxtext_ckpt_path" || flag == "maxtext_load_parameters_path" ||
         flag == "remat_policy" || flag == "trainable_parameters_mask" ||
         flag == "maxtext_attention";
}

// Flags whose MaxText key Tunix sets only when the profiler runs (--profiler_steps > 0).
bool profiler_flag(std::string_view flag) {
  return flag == "profiler_steps" || flag == "skip_first_n_profiler_steps" ||
         flag == "profiler_period";
}

// The flags whose MaxText key is not `--maxtext_X` -> X. Sources: google/tunix
// tunix/experimental/examples/common/run_trainer_node.py@035dbdb9 (its argparse options and the
// build_maxtext_config call) and the newer tunix/utils/maxtext_utils.py build_maxtext_config
// (search-index file id 70923261772), which also takes mesh_context, remat_policy and
// learning_rate_final_fraction; google/tunix k8s_launcher.sh (file id 68397836992) passes
// --remat_policy, --learning_rate_final_fraction and --trainable_parameters_mask to the trainer.
// max_target_length is deliberately not here: no single flag sets it, and which value is right
// depends on the purpose (diff-configs: the row the trainer is fed, trainer_keys_from_argv;
// aot-check: prompt + response, with the packed row width as a compile key of its own).
const std::map<std::string_view, std::string_view>& flag_table() {
  static const std::map<std::string_view, std::string_view> kKeys = {
      {"maxtext_model_name", "model_name"},
      {"maxtext_ckpt_path", "load_parameters_path"},
      {"maxtext_load_parameters_path", "load_parameters_path"},
      {"maxtext_output_directory", "base_output_directory"},
      {"maxtext_padded_moe_mlp_dim", "padded_base_moe_mlp_dim"},
      {"worker_id", "run_name"},
      {"mesh_fsdp", "ici_fsdp_parallelism"},
      {"mesh_tp", "ici_tensor_parallelism"},
      {"mesh_expert", "ici_expert_parallelism"},
      {"mesh_context", "ici_context_parallelism"},
      // One argparse option with two spellings (run_trainer_node@035dbdb9, dest
      // optimizer_learning_rate): the later item in argv wins.
      {"learning_rate", "learning_rate"},
      {"optimizer_learning_rate", "learning_rate"},
      {"learning_rate_final_fraction", "learning_rate_final_fraction"},
      {"remat_policy", "remat_policy"},
      {"trainable_parameters_mask", "trainable_parameters_mask"},
      {"rollout_mesh_tp", "rollout_tensor_parallelism"},
      {"base_num_kv_heads", "base_num_kv_heads"},
      {"prefuse_moe_weights", "prefuse_moe_weights"},
      {"use_weight_converter", "use_weight_converter"},
      {"profiler_steps", "profiler_steps"},
      {"skip_first_n_profiler_steps", "skip_first_n_steps_for_profiler"},
      {"profiler_period", "profile_periodically_period"},
  };
  return kKeys;
}

constexpr std::string_view kMaxTextPrefix = "maxtext_";

}  // namespace

std::optional<std::string> maxtext_key_of_flag(std::string_view flag) {
  auto it = flag_table().find(flag);
  if (it != flag_table().end()) return std::string(it->second);
  if (flag.size() > kMaxTextPrefix.size() &&
      flag.compare(0, kMaxTextPrefix.size(), kMaxTextPrefix) == 0)
    return std::string(flag.substr(kMaxTextPrefix.size()));
  return std::nullopt;
}

std::vector<std::string> flags_setting_key(std::string_view key) {
  std::vector<std::string> flags;
  for (const auto& [flag, maxtext_key] : flag_table()) {
    if (maxtext_key == key) flags.emplace_back(flag);
  }
  // A key the table does not name is set by the --maxtext_<key> rule (--maxtext_attention).
  std::string prefixed = std::string(kMaxTextPrefix) + std::string(key);
  if (flags.empty() && !key.empty() && maxtext_key_of_flag(prefixed) == key)
    flags.push_back(prefixed);
  return flags;
}

std::optional<std::string> trainer_flag_for_key(const std::vector<std::string>& argv,
                                                std::string_view key) {
  std::optional<std::string> found;
  for (const std::string& item : argv) {
    std::string_view flag = k8s::flag_key(item, k8s::FlagStyle::kDashDash);
    if (!flag.empty() && maxtext_key_of_flag(flag) == key) found = std::string(flag);
  }
  return found;
}

std::vector<TrainerKey> trainer_keys_from_argv(const std::vector<std::string>& items) {
  std::map<std::string, std::string> argv;  // flag key -> value, the last occurrence winning
  std::map<std::string, std::string> argv_items;
  std::vector<std::string> order;  // flags by their last occurrence, first to last
  for (const std::string& item : items) {
    std::string_view key = k8s::flag_key(item, k8s::FlagStyle::kDashDash);
    if (key.empty()) continue;
    auto value = k8s::flag_value(item, k8s::FlagStyle::kDashDash);
    argv[std::string(key)] =
        value ? std::string(*value)
              : (k8s::is_negated(item, k8s::FlagStyle::kDashDash) ? "false" : "true");
    argv_items[std::string(key)] = item;
    order.erase(std::remove(order.begin(), order.end(), key), order.end());
    order.emplace_back(key);
  }
  std::map<std::string, TrainerKey> keys;
  bool profiling =
      argv.count("profiler_steps") && as_integer(argv["profiler_steps"]).value_or(0) > 0;
  // In argv order, so that of two spellings of one setting the later one wins, as in argparse.
  for (const std::string& flag : order) {
    const std::string& value = argv[flag];
    auto key = maxtext_key_of_flag(flag);
    if (!key) continue;
    if (only_when_positive(flag) && as_integer(value).value_or(0) <= 0) continue;
    if (only_when_not_empty(flag) && value.empty()) continue;
    if (profiler_flag(flag) && !profiling) continue;
    keys[*key] = {*key, value, argv_items[flag]};
  }
  // max_target_length for diff-configs' purpose: the row the trainer is fed (aot-check compiles
  // prompt + response and passes the row width separately, so it derives its own).
  if (argv.count("max_prompt_length") && argv.count("max_response_length")) {
    auto prompt = as_integer(argv["max_prompt_length"]);
    auto response = as_integer(argv["max_response_length"]);
    if (prompt && response) {
      long long length = *prompt + *response;
      std::string origin =
          argv_items["max_prompt_length"] + " " + argv_items["max_response_length"];
      if (argv.count("max_seq_token_per_tpu")) {
        auto packed = as_integer(argv["max_seq_token_per_tpu"]);
        if (packed && *packed > length) {
          length = *packed;
          origin = argv_items["max_seq_token_per_tpu"];
        }
      }
      keys["max_target_length"] = {"max_target_length", std::to_string(length), origin};
    }
  }
  std::vector<TrainerKey> out;
  for (auto& [key, value] : keys) out.push_back(std::move(value));
  return out;
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
  return value && as_integer(std::string(*value)).value_or(0) > 0;
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
    out.push_back({std::string(key), std::string(*value), "MAXTEXT_EXTRA_FLAGS " + item});
  }
  return out;
}

}  // namespace rtb::bench
