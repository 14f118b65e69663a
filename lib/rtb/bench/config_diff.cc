#include "rtb/bench/config_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/diff_render.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace {

// --- renders ----------------------------------------------------------------------------------

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

// A render, not a log: Kubernetes YAML at column 0 and no config line in the first bytes.
bool looks_like_render(std::string_view head) {
  if (head.find(logs::kConfigParamMarker) != std::string_view::npos) return false;
  for (std::string_view start : {"kind:", "apiVersion:"}) {
    if (head.rfind(start, 0) == 0) return true;
    std::string at_line_start = "\n";
    at_line_start += start;
    if (head.find(at_line_start) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

// --- renders -----------------------------------------------------------------------------------

std::optional<std::string> maxtext_key_of_flag(std::string_view key) {
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
  auto it = kKeys.find(key);
  if (it != kKeys.end()) return std::string(it->second);
  constexpr std::string_view kPrefix = "maxtext_";
  if (key.size() > kPrefix.size() && key.compare(0, kPrefix.size(), kPrefix) == 0)
    return std::string(key.substr(kPrefix.size()));
  return std::nullopt;
}

std::vector<ConfigSetting> config_from_render(const k8s::DryRun& dryrun,
                                              const k8s::RoleMains& mains) {
  std::vector<DiffDocument> docs = diff_documents(dryrun, mains);
  const DiffDocument* trainer = nullptr;
  std::size_t jobsets = 0;
  for (const DiffDocument& doc : docs) {
    if (doc.kind != "JobSet") continue;
    ++jobsets;
    if (doc.role == k8s::Role::kTrainer) {
      if (trainer) {
        fail_at(dryrun.source, static_cast<std::int64_t>(doc.doc->first_line),
                "more than one trainer JobSet ({} and {})", trainer->name, doc.name);
      }
      trainer = &doc;
    }
  }
  if (!trainer && jobsets == 1) {
    for (const DiffDocument& doc : docs) {
      if (doc.kind == "JobSet") trainer = &doc;
    }
  }
  if (!trainer) {
    fail_at(dryrun.source, 0, "no trainer JobSet (--process_main={})", mains.trainer);
  }
  // Parse the client on the document itself first: its errors carry input lines.
  k8s::ClientCommand client = k8s::JobSetView(*trainer->doc).client(dryrun.source);
  std::size_t line = client.startup_line;
  YAML::Node expanded = k8s::expand_for_diff(trainer->doc->root);
  YAML::Node startup;
  for (std::string_view list : {"initContainers", "containers"}) {
    YAML::Node jobs = k8s::yaml::lookup(k8s::yaml::lookup(expanded, "spec"), "replicatedJobs");
    for (const auto& job : jobs) {
      YAML::Node containers = k8s::yaml::lookup(
          k8s::yaml::descend(job, {"template", "spec", "template", "spec"}), list);
      if (!containers.IsSequence()) continue;
      for (const auto& container : containers) {
        if (k8s::yaml::scalar_at(container, "name") == client.container.name())
          startup.reset(k8s::yaml::lookup(container, "startup"));
      }
    }
  }
  if (!startup.IsDefined() || !startup.IsMap()) {
    fail_at(dryrun.source, static_cast<std::int64_t>(line),
            "the trainer's startup command cannot be read");
  }
  std::map<std::string, ConfigSetting> settings;
  // The argv: what Tunix maps to MaxText keys.
  std::map<std::string, std::string> argv;  // flag key -> value, the last occurrence winning
  std::map<std::string, std::string> argv_items;
  YAML::Node argv_node = k8s::yaml::lookup(startup, "argv");
  if (argv_node.IsMap()) {
    for (const auto& kv : argv_node) {
      const std::string& item = kv.second.Scalar();
      std::string_view key = flag_key(item, k8s::FlagStyle::kDashDash);
      if (key.empty()) continue;
      auto value = flag_value(item, k8s::FlagStyle::kDashDash);
      argv[std::string(key)] =
          value ? std::string(*value)
                : (is_negated(item, k8s::FlagStyle::kDashDash) ? "false" : "true");
      argv_items[std::string(key)] = item;
    }
  }
  bool profiling =
      argv.count("profiler_steps") && as_integer(argv["profiler_steps"]).value_or(0) > 0;
  for (const auto& [flag, value] : argv) {
    auto key = maxtext_key_of_flag(flag);
    if (!key) continue;
    if (only_when_positive(flag) && as_integer(value).value_or(0) <= 0) continue;
    if (profiler_flag(flag) && !profiling) continue;
    if ((flag == "maxtext_ckpt_path" || flag == "maxtext_load_parameters_path") && value.empty())
      continue;
    settings[*key] = {*key, value, line, argv_items[flag]};
  }
  // max_target_length: the rows the trainer is fed, at least prompt + response.
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
      settings["max_target_length"] = {"max_target_length", std::to_string(length), line, origin};
    }
  }
  // MAXTEXT_EXTRA_FLAGS, appended last by Tunix: it overrides.
  YAML::Node extra = k8s::yaml::descend(startup, {"env", "MAXTEXT_EXTRA_FLAGS"});
  if (extra.IsMap()) {
    for (const auto& kv : extra) {
      const std::string& item = kv.second.Scalar();
      std::string_view key = flag_key(item, k8s::FlagStyle::kKeyValue);
      auto value = flag_value(item, k8s::FlagStyle::kKeyValue);
      if (key.empty() || !value) continue;
      settings[std::string(key)] = {std::string(key), std::string(*value), line,
                                    "MAXTEXT_EXTRA_FLAGS " + item};
    }
  }
  std::vector<ConfigSetting> out;
  for (auto& [key, setting] : settings) out.push_back(std::move(setting));
  return out;
}

ConfigSide read_config_side(const std::string& path, const ConfigLogOptions& options,
                            const k8s::RoleMains& mains) {
  logs::ConfigLogOrText input = logs::read_config_log_or_text(path, options, looks_like_render);
  ConfigSide side;
  side.source = display_name(path);
  if (input.text) {
    side.kind = ConfigSide::Kind::kRender;
    side.settings = config_from_render(k8s::parse_dryrun(*input.text, side.source), mains);
    return side;
  }
  side.kind = ConfigSide::Kind::kLog;
  side.settings = std::move(input.log.params);
  side.dump = input.log.selected;
  side.dumps = std::move(input.log.dumps);
  return side;
}

// --- comparing -----------------------------------------------------------------------------------

std::string_view config_kind_name(ConfigDifference::Kind kind) {
  switch (kind) {
    case ConfigDifference::Kind::kAdded:
      return "added";
    case ConfigDifference::Kind::kRemoved:
      return "removed";
    case ConfigDifference::Kind::kChanged:
      return "changed";
  }
  return "changed";
}

std::vector<ConfigDifference> diff_configs(const ConfigSide& a, const ConfigSide& b,
                                           const std::function<bool(std::string_view)>& keep_key) {
  // The last setting of a key wins (a log never repeats one within a dump).
  std::map<std::string, const ConfigSetting*> left, right;
  for (const ConfigSetting& s : a.settings) left[s.key] = &s;
  for (const ConfigSetting& s : b.settings) right[s.key] = &s;
  bool a_render = a.kind == ConfigSide::Kind::kRender;
  bool b_render = b.kind == ConfigSide::Kind::kRender;
  // Against a log, a render's few keys are the question; every other key is not.
  bool only_a = a_render && !b_render, only_b = b_render && !a_render;
  std::vector<std::string> keys;
  for (const auto& [key, _] : left) {
    if (!only_b || right.count(key)) keys.push_back(key);
  }
  for (const auto& [key, _] : right) {
    if (!left.count(key) && !only_a) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<ConfigDifference> out;
  for (const std::string& key : keys) {
    if (keep_key && !keep_key(key)) continue;
    auto x = left.find(key);
    auto y = right.find(key);
    if (x == left.end()) {
      out.push_back({ConfigDifference::Kind::kAdded, key, std::nullopt, *y->second});
    } else if (y == right.end()) {
      out.push_back({ConfigDifference::Kind::kRemoved, key, *x->second, std::nullopt});
    } else if (logs::canonical_config_value(x->second->value) !=
               logs::canonical_config_value(y->second->value)) {
      out.push_back({ConfigDifference::Kind::kChanged, key, *x->second, *y->second});
    }
  }
  return out;
}

}  // namespace rtb::bench
