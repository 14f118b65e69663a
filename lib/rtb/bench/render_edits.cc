// render-bench: the knobs that edit flags and settings (render_steps.h).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "rtb/base/error.h"
#include "rtb/base/text.h"
#include "rtb/bench/render_steps.h"
#include "rtb/bench/render_table.h"
#include "rtb/bench/trainer_config.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace render_steps {

k8s::shell::Assignment* Renderer::env_assignment(std::string_view name) {
  // The last assignment of a name is the one bash uses.
  for (auto it = env_.rbegin(); it != env_.rend(); ++it) {
    if (it->name == name) return &*it;
  }
  return nullptr;
}

void Renderer::set_env(std::string_view name, const std::string& value, Knob knob) {
  k8s::shell::Assignment* assignment = env_assignment(name);
  std::string path = client_path(".startup.env") + "." + std::string(name);
  if (assignment) {
    if (assignment->value == value) return;
    record(knob, path, assignment->value, value);
    assignment->value = value;
  } else {
    record(knob, path, "", value);
    env_.push_back({std::string(name), value, "", false});
  }
  edited_env_.insert(std::string(name));
}

void Renderer::edit_flag_list(k8s::FlagList& list, const std::string& item, Knob knob,
                              const std::string& path, bool must_exist,
                              std::optional<std::size_t> append_at) {
  std::string_view key = flag_key(item, list.style());
  if (key.empty()) {
    fail_knob(
        knob, item, "not a flag ({})",
        list.style() == k8s::FlagStyle::kKeyValue ? "KEY=VALUE" : "--KEY=VALUE, --KEY or --no-KEY");
  }
  std::optional<std::size_t> at = list.find(key);
  std::string old_value = at ? list.items()[*at] : "";
  if (must_exist) {
    list.replace(item);
  } else {
    list.upsert(item, append_at);
  }
  if (old_value == item) return;
  std::string name = (list.style() == k8s::FlagStyle::kDashDash ? "--" : "") + std::string(key);
  record(knob, k8s::path_item(path, name), old_value, item);
}

void Renderer::edit_maxtext_flags() {
  if (options_.maxtext_flags.empty() && options_.maxtext_replace.empty()) return;
  k8s::shell::Assignment* current = env_assignment(kMaxTextFlagsEnv);
  if (!current && !options_.maxtext_replace.empty()) {
    fail_knob(Knob::kMaxTextReplace, options_.maxtext_replace.front(),
              "the trainer has no MAXTEXT_EXTRA_FLAGS");
  }
  k8s::FlagList flags =
      k8s::FlagList::parse(current ? current->value : "", k8s::FlagStyle::kKeyValue);
  std::string path = client_path(".startup.env." + std::string(kMaxTextFlagsEnv));
  std::size_t before = result_.changes.size();
  for (const std::string& item : options_.maxtext_replace) {
    try {
      edit_flag_list(flags, item, Knob::kMaxTextReplace, path, true);
    } catch (const Error& e) {
      fail_knob(Knob::kMaxTextReplace, item, "{} in the trainer's MAXTEXT_EXTRA_FLAGS",
                e.message());
    }
  }
  for (const std::string& item : options_.maxtext_flags)
    edit_flag_list(flags, item, Knob::kMaxTextFlag, path, false);
  if (result_.changes.size() == before) return;
  if (!current) {
    // A new variable: record it whole rather than item by item.
    result_.changes.resize(before);
    record(Knob::kMaxTextFlag, path, "", flags.str());
    env_.push_back({std::string(kMaxTextFlagsEnv), flags.str(), "", false});
  } else {
    current->value = flags.str();
  }
  edited_env_.insert(std::string(kMaxTextFlagsEnv));
}

void Renderer::edit_libtpu_flags() {
  const bool knobs = !options_.libtpu_flags.empty();
  for (const std::string& item : options_.libtpu_flags) {
    if (flag_key(item, k8s::FlagStyle::kDashDash).empty()) {
      fail_knob(Knob::kLibtpuFlag, item, "not a flag (--KEY=VALUE)");
    }
    // libtpu splits its flag string on blanks, so a value cannot hold one.
    if (item.find_first_of(" \t\n\r") != std::string::npos) {
      fail_knob(Knob::kLibtpuFlag, "'" + item + "'", "a libtpu flag cannot contain blanks");
    }
  }
  // 1. The client: LIBTPU_INIT_ARGS inside the startup environment.
  if (knobs) {
    k8s::shell::Assignment* current = env_assignment(kLibtpuEnv);
    k8s::FlagList flags =
        k8s::FlagList::parse(current ? current->value : "", k8s::FlagStyle::kDashDash);
    std::string path = client_path(".startup.env." + std::string(kLibtpuEnv));
    std::size_t before = result_.changes.size();
    for (const std::string& item : options_.libtpu_flags)
      edit_flag_list(flags, item, Knob::kLibtpuFlag, path, false);
    if (result_.changes.size() != before) {
      if (current) {
        current->value = flags.str();
      } else {
        result_.changes.resize(before);
        record(Knob::kLibtpuFlag, path, "", flags.str());
        env_.push_back({std::string(kLibtpuEnv), flags.str(), "", false});
      }
      edited_env_.insert(std::string(kLibtpuEnv));
    }
  }
  k8s::JobSetView view(bench_);
  // 2. The pathways proxy: one args item per flag, new ones after the last --xla item.
  if (auto proxy = view.container(kProxyContainer); proxy && knobs) {
    edit_proxy_args(*proxy, options_.libtpu_flags, Knob::kLibtpuFlag);
  } else if (knobs) {
    warn_about_dryrun(fmt::format(
        "the trainer JobSet has no {} container; --libtpu-flag reaches the client and workers only",
        kProxyContainer));
  }
  // 3. The pathways workers: always the client's whole libtpu set plus their own extras
  // (render_table.h bench_worker_libtpu), so a bench never runs workers on other flags.
  if (auto worker = view.container(kWorkerContainer)) {
    sync_worker_libtpu(*worker);
  } else if (knobs) {
    warn_about_dryrun(fmt::format(
        "the trainer JobSet has no {} container; --libtpu-flag reaches the client and proxy only",
        kWorkerContainer));
  }
}

void Renderer::edit_proxy_args(k8s::ContainerRef& proxy, const std::vector<std::string>& items,
                               Knob knob) {
  YAML::Node args = k8s::yaml::lookup(proxy.node, "args");
  std::vector<std::string> before;
  if (args.IsSequence()) {
    for (const auto& item : args) before.push_back(item.IsScalar() ? item.Scalar() : "");
  }
  k8s::FlagList flags(k8s::FlagStyle::kDashDash, before);
  std::string path = proxy.path() + ".args";
  for (const std::string& item : items) {
    std::size_t append_at = flags.items().size();
    for (std::size_t i = 0; i < flags.items().size(); ++i) {
      if (flags.items()[i].rfind("--xla", 0) == 0) append_at = i + 1;
    }
    edit_flag_list(flags, item, knob, path, false, append_at);
  }
  YAML::Node rebuilt(YAML::NodeType::Sequence);
  for (std::size_t i = 0; i < flags.items().size(); ++i) {
    // Keep unchanged items as they were (type and all); new or changed ones are strings. Kept
    // ones are copied (k8s::yaml::standalone says why).
    auto old = std::find(before.begin(), before.end(), flags.items()[i]);
    if (old != before.end() && args.IsSequence()) {
      rebuilt.push_back(
          k8s::yaml::standalone(args[static_cast<std::size_t>(old - before.begin())]));
    } else {
      rebuilt.push_back(k8s::yaml::string_scalar(flags.items()[i]));
    }
  }
  proxy.node["args"] = rebuilt;
}

void Renderer::set_hlo_dump() {
  if (!options_.dump_hlo) return;
  const Knob knob = Knob::kDumpHlo;
  const std::string option(knob_option(knob));
  k8s::JobSetView view(bench_);
  auto proxy = view.container(kProxyContainer);
  if (!proxy) {
    fail(
        "{}: the trainer JobSet has no {} container, so its client compiles: use --driver-env "
        "DUMP_HLO=1",
        option, kProxyContainer);
  }
  for (const std::string& item : options_.libtpu_flags) {
    if (flag_key(item, k8s::FlagStyle::kDashDash).starts_with("xla_dump_"))
      fail("{}: --libtpu-flag {} sets the dump too; give one of them", option, item);
  }
  // Where the driver writes its trace (driver: profile_dir_of, hlo_dump_flags): PROFILE_DIR,
  // else <--maxtext_output_directory>/bench_profile, else /tmp/bench_profile; joined as Python's
  // os.path.join joins, so that a trailing slash gives the driver's path and not `out//x`
  // (a different object under gs://). tests/cli/driver_settings_contract_test.py holds both to it.
  auto join = [](std::string base, std::string_view name) {
    if (!base.ends_with('/')) base += '/';
    return base + std::string(name);
  };
  std::string dir = "/tmp/bench_profile";
  if (auto output = trainer_argv_.value("maxtext_output_directory"); output && !output->empty())
    dir = join(*output, "bench_profile");
  for (const auto& [name, value] : options_.driver.extra_env) {
    if (name == "PROFILE_DIR" && !trim(value).empty()) dir = std::string(trim(value));
  }
  dir = join(dir, "hlo");
  // XLA debug flags go where the compile runs: under Pathways the proxy compiles for the client.
  edit_proxy_args(*proxy, {"--xla_dump_to=" + dir, "--xla_dump_hlo_as_text"}, knob);
  note(fmt::format(
      "{}: the {} writes the HLO of every module it compiles to {}{}", option, kProxyContainer, dir,
      dir.find("://") != std::string::npos
          ? ", next to the driver's trace"
          : fmt::format(", a path of its own container: copy it with `kubectl cp -c {} <pod>:{} .`",
                        kProxyContainer, dir)));
}

void Renderer::sync_worker_libtpu(k8s::ContainerRef& worker) {
  const k8s::shell::Assignment* client_libtpu = env_assignment(kLibtpuEnv);
  if (!client_libtpu) return;  // no client set: the workers keep theirs
  if (client_libtpu->expands) {
    warn_about_dryrun(
        fmt::format("the client's {} contains a shell expansion; the {} keep their own flags",
                    kLibtpuEnv, kWorkerContainer));
    return;
  }
  k8s::FlagList client = k8s::FlagList::parse(client_libtpu->value, k8s::FlagStyle::kDashDash);
  if (client.items().empty()) return;
  // A flag the knobs set is theirs; any other the workers take from the client.
  auto knob_of = [&](std::string_view key) -> std::string {
    for (const std::string& item : options_.libtpu_flags) {
      if (flag_key(item, k8s::FlagStyle::kDashDash) == key)
        return std::string(knob_option(Knob::kLibtpuFlag));
    }
    return std::string(kWorkersLibtpuKnob);
  };
  std::string env_path = worker.path() + ".env";
  if (!k8s::yaml::lookup(worker.node, "env").IsSequence())
    worker.node["env"] = YAML::Node(YAML::NodeType::Sequence);
  YAML::Node env = k8s::yaml::lookup(worker.node, "env");
  std::optional<YAML::Node> entry;  // the last entry of that name, as Kubernetes uses
  for (const YAML::Node& candidate : env) {
    if (k8s::yaml::scalar_at(candidate, "name") == std::string(kLibtpuEnv))
      entry.emplace(candidate);
  }
  if (!entry || !entry->IsMap()) {
    k8s::FlagList flags = bench_worker_libtpu(client, k8s::FlagList(k8s::FlagStyle::kDashDash, {}));
    YAML::Node created(YAML::NodeType::Map);
    created["name"] = std::string(kLibtpuEnv);
    created["value"] = k8s::yaml::string_scalar(flags.str());
    env.push_back(created);
    record(std::string(options_.libtpu_flags.empty() ? kWorkersLibtpuKnob
                                                     : knob_option(Knob::kLibtpuFlag)),
           k8s::path_item(env_path, kLibtpuEnv), "", flags.str());
    return;
  }
  YAML::Node value = k8s::yaml::lookup(*entry, "value");
  k8s::FlagList old = k8s::FlagList::parse(
      value.IsDefined() && value.IsScalar() ? value.Scalar() : "", k8s::FlagStyle::kDashDash);
  k8s::FlagList flags = bench_worker_libtpu(client, old);
  std::string path = k8s::path_item(env_path, kLibtpuEnv) + ".value";
  // One change per key whose effective item (its last) differs from the worker's before.
  bool changed = false;
  std::set<std::string, std::less<>> seen;
  for (const std::string& item : client.items()) {
    std::string_view key = flag_key(item, k8s::FlagStyle::kDashDash);
    if (key.empty() || !seen.emplace(key).second) continue;
    const std::string& now = client.items()[*client.find(key)];
    std::optional<std::size_t> at = old.find(key);
    std::string before = at ? old.items()[*at] : "";
    if (before == now) continue;
    record(knob_of(key), k8s::path_item(path, "--" + std::string(key)), before, now);
    changed = true;
  }
  if (changed) (*entry)["value"] = k8s::yaml::string_scalar(flags.str());
}

void Renderer::edit_argv() {
  std::string argv_path = client_path(".startup.argv");
  for (const std::string& item : options_.trainer_args) {
    edit_flag_list(trainer_argv_, item, Knob::kTrainerArg, argv_path, false);
  }
  for (const std::string& item : options_.trainer_args_removed) {
    std::string_view key = flag_key(item, k8s::FlagStyle::kDashDash);
    if (key.empty()) fail_knob(Knob::kTrainerArgRemove, item, "not a flag (--KEY)");
    auto at = trainer_argv_.find(key);
    if (!at) fail_knob(Knob::kTrainerArgRemove, item, "the trainer's argv has no --{}", key);
    std::string old = trainer_argv_.items()[*at];
    trainer_argv_.remove(key);
    record(Knob::kTrainerArgRemove, k8s::path_item(argv_path, "--" + std::string(key)), old, "");
  }
  for (const std::string& item : options_.orchestrator_args) {
    edit_flag_list(orch_argv_, item, Knob::kOrchArg, orch_argv_path_, false);
  }
  if (options_.output_prefix) {
    std::string prefix = *options_.output_prefix;
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    edit_flag_list(trainer_argv_,
                   fmt::format("--maxtext_output_directory={}/{}", prefix, options_.name),
                   Knob::kOutputPrefix, argv_path, false);
  }
  if (options_.logps_chunk) {
    if (*options_.logps_chunk <= 0)
      fail_knob(Knob::kLogpsChunk, std::to_string(*options_.logps_chunk),
                "must be a positive number of tokens");
    std::string value = std::to_string(*options_.logps_chunk);
    // Wherever the e2e passes it; the trainer's argv when it passes it nowhere.
    bool anywhere = false;
    if (auto* maxtext = env_assignment(kMaxTextFlagsEnv)) {
      k8s::FlagList flags = k8s::FlagList::parse(maxtext->value, k8s::FlagStyle::kKeyValue);
      if (flags.contains("compute_logps_chunk_size")) {
        edit_flag_list(flags, "compute_logps_chunk_size=" + value, Knob::kLogpsChunk,
                       client_path(".startup.env." + std::string(kMaxTextFlagsEnv)), true);
        maxtext->value = flags.str();
        edited_env_.insert(std::string(kMaxTextFlagsEnv));
        anywhere = true;
      }
    }
    if (env_assignment(kLogpsChunkEnv)) {
      set_env(kLogpsChunkEnv, value, Knob::kLogpsChunk);
      anywhere = true;
    }
    if (trainer_argv_.contains("compute_logps_chunk_size") || !anywhere) {
      edit_flag_list(trainer_argv_, "--compute_logps_chunk_size=" + value, Knob::kLogpsChunk,
                     argv_path, false);
    }
  }
}

void Renderer::check_weight_knobs() const {
  if (options_.weights != Weights::kRandom) return;
  // A knob that asks for a checkpoint contradicts --weights random: refuse it rather than drop it.
  auto refuse = [](Knob knob, const std::string& item) {
    fail_knob(knob, item, "loads a checkpoint, but {0} is random (give {0} checkpoint)",
              knob_option(Knob::kWeights));
  };
  for (const auto* items : {&options_.maxtext_flags, &options_.maxtext_replace}) {
    for (const std::string& item : *items) {
      if (loads_checkpoint(k8s::flag_key(item, k8s::FlagStyle::kKeyValue),
                           k8s::flag_value(item, k8s::FlagStyle::kKeyValue).value_or("")))
        refuse(items == &options_.maxtext_flags ? Knob::kMaxTextFlag : Knob::kMaxTextReplace, item);
    }
  }
  for (const std::string& item : options_.trainer_args) {
    if (loads_checkpoint(k8s::flag_key(item, k8s::FlagStyle::kDashDash),
                         k8s::flag_value(item, k8s::FlagStyle::kDashDash).value_or("")))
      refuse(Knob::kTrainerArg, item);
  }
}

bool Renderer::remove_container_env(std::string_view name, Knob knob) {
  YAML::Node env = k8s::yaml::lookup(client_.container.node, "env");
  if (!env.IsSequence()) return false;
  YAML::Node kept(YAML::NodeType::Sequence);
  std::string old;
  bool removed = false;
  for (const YAML::Node& item : env) {
    if (k8s::yaml::scalar_at(item, "name") == std::string(name)) {
      old = k8s::yaml::scalar_at(item, "value").value_or("");
      removed = true;
    } else {
      kept.push_back(k8s::yaml::standalone(item));
    }
  }
  if (!removed) return false;
  client_.container.node["env"] = kept;
  record(knob, k8s::path_item(client_path(".env"), name), fmt::format("{}={}", name, old), "");
  return true;
}

void Renderer::apply_weights() {
  const Knob knob = Knob::kWeights;
  // What loads a checkpoint (trainer_config.h's loads_checkpoint: a non-empty value), as the e2e
  // writes it.
  std::vector<std::string> found;
  std::set<std::string, std::less<>> seen_flags;
  for (const std::string& item : trainer_argv_.items()) {
    std::string flag(k8s::flag_key(item, k8s::FlagStyle::kDashDash));
    if (!is_checkpoint_flag(flag) || !seen_flags.insert(flag).second) continue;
    // The last item of a flag is the one argparse keeps.
    const std::string& last = trainer_argv_.items()[*trainer_argv_.find(flag)];
    if (loads_checkpoint(flag, trainer_argv_.value(flag).value_or(""))) found.push_back(last);
  }
  k8s::shell::Assignment* maxtext = env_assignment(kMaxTextFlagsEnv);
  k8s::FlagList maxtext_flags =
      k8s::FlagList::parse(maxtext ? maxtext->value : "", k8s::FlagStyle::kKeyValue);
  for (const std::string& item : maxtext_flags.items()) {
    auto value = k8s::flag_value(item, k8s::FlagStyle::kKeyValue);
    if (loads_checkpoint(k8s::flag_key(item, k8s::FlagStyle::kKeyValue), value.value_or("")))
      found.push_back(fmt::format("{} {}", kMaxTextFlagsEnv, item));
  }
  for (const k8s::shell::Assignment& assignment : env_) {
    if (assignment.name == kCheckpointEnv && loads_checkpoint(kCheckpointEnv, assignment.value))
      found.push_back(assignment.name + "=" + assignment.value);
  }
  if (auto value = container_env_value(client_.container.node, kCheckpointEnv);
      value && loads_checkpoint(kCheckpointEnv, *value))
    found.push_back(fmt::format("env {}={}", kCheckpointEnv, *value));

  if (options_.weights == Weights::kCheckpoint) {
    note(found.empty() ? "--weights checkpoint: the e2e trainer loads no checkpoint, so MaxText "
                         "initialises random weights"
                       : fmt::format("--weights checkpoint: kept {}: the bench loads the e2e's "
                                     "checkpoint",
                                     fmt::join(found, ", ")));
    return;
  }
  if (found.empty()) {
    note(
        "--weights random: the e2e trainer loads no checkpoint; MaxText initialises random "
        "weights");
    return;
  }
  std::string argv_path = client_path(".startup.argv");
  std::vector<std::string> keys;
  for (const std::string& item : trainer_argv_.items()) {
    std::string key(k8s::flag_key(item, k8s::FlagStyle::kDashDash));
    if (is_checkpoint_flag(key) && std::find(keys.begin(), keys.end(), key) == keys.end())
      keys.push_back(key);
  }
  for (const std::string& key : keys) {
    std::string old = trainer_argv_.items()[*trainer_argv_.find(key)];
    trainer_argv_.remove(key);
    record(knob, k8s::path_item(argv_path, "--" + key), old, "");
  }
  if (maxtext) {
    std::string path = client_path(".startup.env." + std::string(kMaxTextFlagsEnv));
    std::vector<std::string> extra_keys;
    for (const std::string& item : maxtext_flags.items()) {
      std::string key(k8s::flag_key(item, k8s::FlagStyle::kKeyValue));
      if (is_checkpoint_key(key) &&
          std::find(extra_keys.begin(), extra_keys.end(), key) == extra_keys.end())
        extra_keys.push_back(key);
    }
    for (const std::string& key : extra_keys) {
      std::string old = maxtext_flags.items()[*maxtext_flags.find(key)];
      maxtext_flags.remove(key);
      record(knob, k8s::path_item(path, key), old, "");
    }
    if (!extra_keys.empty()) {
      maxtext->value = maxtext_flags.str();
      edited_env_.insert(std::string(kMaxTextFlagsEnv));
    }
  }
  std::size_t before = env_.size();
  std::string old_env;
  for (const k8s::shell::Assignment& assignment : env_) {
    if (assignment.name == kCheckpointEnv) old_env = assignment.value;
  }
  std::erase_if(env_, [](const k8s::shell::Assignment& a) { return a.name == kCheckpointEnv; });
  if (env_.size() != before) {
    record(knob, client_path(".startup.env." + std::string(kCheckpointEnv)), old_env, "");
  }
  remove_container_env(kCheckpointEnv, knob);
  note(fmt::format("--weights random: dropped {}: MaxText initialises random weights",
                   fmt::join(found, ", ")));
}

}  // namespace render_steps

}  // namespace rtb::bench
