#include "rtb/bench/trainer_config.h"

#include <charconv>
#include <map>

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

// Flags whose MaxText key Tunix sets only when the profiler runs (--profiler_steps > 0).
bool profiler_flag(std::string_view flag) {
  return flag == "profiler_steps" || flag == "skip_first_n_profiler_steps" ||
         flag == "profiler_period";
}

}  // namespace

std::optional<std::string> maxtext_key_of_flag(std::string_view flag) {
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
      {"learning_rate", "learning_rate"},
      {"optimizer_learning_rate", "learning_rate"},
      {"rollout_mesh_tp", "rollout_tensor_parallelism"},
      {"base_num_kv_heads", "base_num_kv_heads"},
      {"prefuse_moe_weights", "prefuse_moe_weights"},
      {"use_weight_converter", "use_weight_converter"},
      {"profiler_steps", "profiler_steps"},
      {"skip_first_n_profiler_steps", "skip_first_n_steps_for_profiler"},
      {"profiler_period", "profile_periodically_period"},
  };
  auto it = kKeys.find(flag);
  if (it != kKeys.end()) return std::string(it->second);
  constexpr std::string_view kPrefix = "maxtext_";
  if (flag.size() > kPrefix.size() && flag.compare(0, kPrefix.size(), kPrefix) == 0)
    return std::string(flag.substr(kPrefix.size()));
  return std::nullopt;
}

std::vector<TrainerKey> trainer_keys_from_argv(const std::vector<std::string>& items) {
  std::map<std::string, std::string> argv;  // flag key -> value, the last occurrence winning
  std::map<std::string, std::string> argv_items;
  for (const std::string& item : items) {
    std::string_view key = k8s::flag_key(item, k8s::FlagStyle::kDashDash);
    if (key.empty()) continue;
    auto value = k8s::flag_value(item, k8s::FlagStyle::kDashDash);
    argv[std::string(key)] =
        value ? std::string(*value)
              : (k8s::is_negated(item, k8s::FlagStyle::kDashDash) ? "false" : "true");
    argv_items[std::string(key)] = item;
  }
  std::map<std::string, TrainerKey> keys;
  bool profiling =
      argv.count("profiler_steps") && as_integer(argv["profiler_steps"]).value_or(0) > 0;
  for (const auto& [flag, value] : argv) {
    auto key = maxtext_key_of_flag(flag);
    if (!key) continue;
    if (only_when_positive(flag) && as_integer(value).value_or(0) <= 0) continue;
    if (profiler_flag(flag) && !profiling) continue;
    if ((flag == "maxtext_ckpt_path" || flag == "maxtext_load_parameters_path") && value.empty())
      continue;
    keys[*key] = {*key, value, argv_items[flag]};
  }
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
