#include "rtb/bench/config_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/bench/trainer_config.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace {

// --- renders ----------------------------------------------------------------------------------

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

std::vector<ConfigSetting> config_from_render(const k8s::DryRun& dryrun,
                                              const k8s::RoleMains& mains) {
  const k8s::Document& trainer =
      *k8s::select_roles(dryrun, mains, {.lone_jobset_is_trainer = true}).trainer;
  // Parse the client on the document itself first: its errors carry input lines.
  k8s::ClientCommand client = k8s::JobSetView(trainer).client(dryrun.source);
  std::size_t line = client.startup_line;
  YAML::Node expanded = k8s::expand_for_diff(trainer.root);
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
  std::vector<std::string> argv, extra;
  YAML::Node argv_node = k8s::yaml::lookup(startup, "argv");
  if (argv_node.IsMap()) {
    for (const auto& kv : argv_node) argv.push_back(kv.second.Scalar());
  }
  // The trainer's environment: its plain variables (a repeated NAME is NAME#2 there; bash keeps
  // the last), and MAXTEXT_EXTRA_FLAGS' items.
  std::map<std::string, std::string> env;
  YAML::Node env_node = k8s::yaml::lookup(startup, "env");
  if (env_node.IsMap()) {
    for (const auto& kv : env_node) {
      std::string name = kv.first.Scalar();
      if (kv.second.IsScalar()) env[name.substr(0, name.find('#'))] = kv.second.Scalar();
    }
  }
  YAML::Node extra_node = k8s::yaml::lookup(env_node, "MAXTEXT_EXTRA_FLAGS");
  if (extra_node.IsMap()) {
    for (const auto& kv : extra_node) extra.push_back(kv.second.Scalar());
  }
  // MAXTEXT_EXTRA_FLAGS, appended last by Tunix, overrides what the argv sets. A key the render
  // does not write (a default, a constant) is `implied`.
  std::map<std::string, ConfigSetting> settings;
  for (const std::vector<TrainerKey>& keys : {trainer_keys(argv, env), extra_flag_keys(extra)}) {
    for (const TrainerKey& k : keys) {
      settings[k.key] = {k.key, k.value, line, k.given.empty() ? k.origin : k.given,
                         k.given.empty()};
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
  return enum_name<ConfigDifference::Kind::kChanged>(kind, {"added", "removed", "changed"});
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
  // A render's implied keys (defaults, constants) count only where the log has them too.
  for (const auto& [key, setting] : left) {
    if (only_a && setting->implied && !right.count(key)) continue;
    if (!only_b || right.count(key)) keys.push_back(key);
  }
  for (const auto& [key, setting] : right) {
    if (only_b && setting->implied && !left.count(key)) continue;
    if (!left.count(key) && !only_a) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<ConfigDifference> out;
  for (const std::string& key : keys) {
    if (keep_key && !keep_key(key)) continue;
    auto x = left.find(key);
    auto y = right.find(key);
    if (x == left.end()) {
      out.push_back({ConfigDifference::Kind::kAdded, key, std::nullopt, *y->second, std::nullopt});
    } else if (y == right.end()) {
      out.push_back(
          {ConfigDifference::Kind::kRemoved, key, *x->second, std::nullopt, std::nullopt});
    } else if (logs::canonical_config_value(x->second->value) !=
               logs::canonical_config_value(y->second->value)) {
      out.push_back({ConfigDifference::Kind::kChanged, key, *x->second, *y->second,
                     diff_elements(x->second->value, y->second->value)});
    }
  }
  return out;
}

Outcome config_outcome(const std::vector<ConfigDifference>& differences) {
  return outcome_of(!differences.empty());
}

}  // namespace rtb::bench
