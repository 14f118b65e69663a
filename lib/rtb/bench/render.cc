#include "rtb/bench/render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <limits>
#include <set>

#include "rtb/base/compress.h"
#include "rtb/base/error.h"
#include "rtb/base/slice.h"
#include "rtb/base/text.h"
#include "rtb/bench/driver_settings.h"
#include "rtb/bench/render_table.h"
#include "rtb/bench/trainer_config.h"
#include "rtb/k8s/diff.h"
#include "rtb/k8s/flags.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"
#include "rtb/payload/routing.h"

namespace rtb::bench {
namespace {

constexpr std::string_view kDriverPath = "/tmp/bench_driver.py";
constexpr std::size_t kMaxKubernetesName = 63;
constexpr std::size_t kMaxArgumentBytes = 32 * 4096;  // MAX_ARG_STRLEN, including the NUL

// A plain scalar with this text would not read back as a string (YAML 1.1/1.2 core schemas).
bool resolves_to_non_string(std::string_view value) {
  static const std::set<std::string_view> kWords = {
      "true", "false", "True", "False", "TRUE", "FALSE", "yes",  "no", "Yes",
      "No",   "YES",   "NO",   "on",    "off",  "On",    "Off",  "ON", "OFF",
      "y",    "n",     "Y",    "N",     "null", "Null",  "NULL", "~",  ""};
  if (kWords.count(value)) return true;
  double number;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  return ec == std::errc() && end == value.data() + value.size();
}

// Sets a scalar to a string, keeping its quoting unless plain text would change the type.
void assign_string(YAML::Node node, const std::string& value) {
  if (node.Tag() == "!" || resolves_to_non_string(value)) {
    k8s::yaml::set_string(node, value);
  } else {
    node = value;
  }
}

std::string int_text(long long value) { return std::to_string(value); }

int parse_int(std::string_view text, std::string_view what) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    fail("{} '{}' is not an integer", what, text);
  return value;
}

// Visits every scalar (values, not keys) of a tree with its path, skipping subtrees for which
// `skip` returns true. Iterative: input depth cannot overflow the stack.
void visit_scalars(
    const YAML::Node& root, const std::string& base,
    const std::function<bool(const std::string&)>& skip,
    const std::function<void(YAML::Node, const std::string&, std::string_view key)>& visit) {
  struct Item {
    YAML::Node node;
    std::string path;
    std::string key;
  };
  std::vector<Item> pending{{root, base, ""}};
  while (!pending.empty()) {
    Item item = std::move(pending.back());
    pending.pop_back();
    if (skip(item.path)) continue;
    if (item.node.IsScalar()) {
      visit(item.node, item.path, item.key);
    } else if (item.node.IsMap()) {
      for (const auto& kv : item.node) {
        std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
        pending.push_back({kv.second, k8s::path_child(item.path, key), key});
      }
    } else if (item.node.IsSequence()) {
      std::vector<std::string> keys;
      bool args = item.key == "args";
      if (args) {
        // Container args are compared flag by flag (diff.h), so name them the same way.
        std::vector<std::string> items;
        for (const auto& x : item.node) items.push_back(x.IsScalar() ? x.Scalar() : "");
        keys = flag_item_keys(items, k8s::FlagStyle::kDashDash);
      } else {
        keys = k8s::sequence_item_keys(item.node);
      }
      for (std::size_t i = 0; i < item.node.size(); ++i) {
        pending.push_back({item.node[i], k8s::path_item(item.path, keys[i]), item.key});
      }
    }
  }
}

// A DNS label, as Kubernetes requires of namespaces (RFC 1123) and JobSet names (RFC 1035: starts
// with a letter).
void validate_dns_label(std::string_view option, const std::string& name, bool letter_first) {
  auto bad = [&](std::string_view why) { fail("{} '{}': {}", option, name, why); };
  if (name.empty()) bad("empty");
  if (name.size() > kMaxKubernetesName) bad("longer than 63 characters");
  bool letter = name.front() >= 'a' && name.front() <= 'z';
  bool digit = name.front() >= '0' && name.front() <= '9';
  if (!letter && !(digit && !letter_first)) {
    bad(letter_first ? "must start with a lowercase letter (a DNS label)"
                     : "must start with a lowercase letter or digit (a DNS label)");
  }
  if (name.back() == '-') bad("must end with a letter or digit (a DNS label)");
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      bad("may hold only lowercase letters, digits and '-' (a DNS label)");
    }
  }
}

// A container's env-list value of `name` (the last entry, as Kubernetes uses), or nullopt.
std::optional<std::string> container_env_value(const YAML::Node& container, std::string_view name) {
  std::optional<std::string> value;
  YAML::Node env = k8s::yaml::lookup(container, "env");
  if (!env.IsSequence()) return value;
  for (const YAML::Node& item : env) {
    if (k8s::yaml::scalar_at(item, "name") == std::string(name)) {
      value = k8s::yaml::scalar_at(item, "value");
    }
  }
  return value;
}

// The kOrchestratorDriverEnv variables the e2e orchestrator sets, from its startup block's
// assignments (the last one wins, as in bash) or else its container's env list.
std::vector<std::pair<std::string, std::string>> orchestrator_driver_env(
    const k8s::ClientCommand& orchestrator) {
  std::vector<std::pair<std::string, std::string>> found;
  for (std::string_view name : kOrchestratorDriverEnv) {
    std::optional<std::string> value;
    for (const k8s::shell::Assignment& assignment : orchestrator.startup.env) {
      if (assignment.name == name) value = assignment.value;
    }
    if (!value) value = container_env_value(orchestrator.container.node, name);
    if (value) found.emplace_back(std::string(name), *value);
  }
  return found;
}

// What one rollout JobSet sets for the routed-expert setting, with where: its startup argv's last
// --return_routed_experts (bare: true, argparse's const), --return_routed_experts=V or
// --return_routed_experts V (argparse's nargs="?" takes the next word; taken here when it is a
// boolean word) or --no-return_routed_experts (false); else its startup block's
// RETURN_ROUTED_EXPERTS, else its client container's env list (run_rollout_node's argparse
// default reads the environment). A blank value is unset: no evidence. A rollout whose startup
// block cannot be read gives no evidence, with a warning.
std::optional<std::pair<std::string, std::string>> rollout_routed_experts_of(
    const k8s::Document& rollout, const std::string& source, std::vector<std::string>& warnings) {
  k8s::ClientCommand client;
  try {
    client = k8s::JobSetView(rollout).client(source);
  } catch (const Error& e) {
    warnings.push_back(
        fmt::format("the rollout's --{} is not read: {}", kRolloutRoutedExpertsFlag, e.message()));
    return std::nullopt;
  }
  auto evidence = [](std::optional<std::pair<std::string, std::string>> found)
      -> std::optional<std::pair<std::string, std::string>> {
    if (found && trim(found->first).empty()) return std::nullopt;  // blank: unset
    return found;
  };
  std::optional<std::pair<std::string, std::string>> found;
  const std::vector<k8s::shell::Word>& words = client.startup.words;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i].value;
    if (k8s::flag_key(word, k8s::FlagStyle::kDashDash) != kRolloutRoutedExpertsFlag) continue;
    if (k8s::is_negated(word, k8s::FlagStyle::kDashDash)) {
      found.emplace("false", word);
    } else if (auto value = k8s::flag_value(word, k8s::FlagStyle::kDashDash)) {
      found.emplace(std::string(*value), word);
    } else if (i + 1 < words.size() && bool_word(words[i + 1].value)) {
      found.emplace(words[i + 1].value, fmt::format("{} {}", word, words[i + 1].value));
      ++i;
    } else {
      found.emplace("true", word);
    }
  }
  if (found) return evidence(found);
  for (const k8s::shell::Assignment& assignment : client.startup.env) {
    if (assignment.name == kRolloutRoutedExpertsEnv)
      found.emplace(assignment.value, assignment.source);
  }
  if (found) return evidence(found);
  if (auto value = container_env_value(client.container.node, kRolloutRoutedExpertsEnv)) {
    found.emplace(*value, fmt::format("env {}={}", kRolloutRoutedExpertsEnv, *value));
  }
  return evidence(found);
}

// What a driver script runs: its startup block's assignments, one per line, then the command.
struct DriverLaunch {
  std::string what;                      // names the script: "bench client"
  std::string purpose;                   // for the header comment
  std::vector<std::string> assignments;  // NAME=value words, values quoted for bash
  std::vector<std::string> command;      // the program and its arguments, quoted for bash
};

// The PID-1 wrapper that writes the driver to kDriverPath with a quoted heredoc (so bash expands
// nothing in it) and runs `launch` in the background, forwarding SIGTERM and keeping its exit
// code. The bench client and the preflight Job both run this script, so they run the same driver
// with the same settings.
std::string driver_script(const DriverLaunch& launch, std::string driver,
                          std::string_view tool_version) {
  if (driver.empty() || driver.back() != '\n') driver += '\n';
  std::string terminator = heredoc_terminator(driver);
  std::string title = launch.what;
  if (!title.empty())
    title[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(title[0])));
  std::string script;
  script += fmt::format(
      "# {} rendered by render-bench {}: {}.\n"
      "# PID 1 wrapper: SIGTERM goes to the driver, whose exit code is the container's.\n"
      "echo \"Program Start: $(date)\"\n"
      "PID=\n"
      "_forward_sigterm() {{ if [ -n \"$PID\" ]; then kill -TERM \"$PID\" 2>/dev/null; fi; }}\n"
      "trap _forward_sigterm TERM\n\n",
      title, tool_version, launch.purpose);
  std::string rest = "\n(\n";
  // One assignment per line; the command shares the last line.
  for (const std::string& assignment : launch.assignments) rest += "  " + assignment + " \\\n";
  rest += "  " + fmt::format("{}", fmt::join(launch.command, " "));
  rest +=
      "\n) & PID=$!\n\n"
      "# Poll, so that bash runs the SIGTERM trap promptly.\n"
      "while kill -0 \"$PID\" 2>/dev/null; do\n"
      "  sleep 5\n"
      "done\n"
      "wait \"$PID\"\n"
      "EXIT_CODE=$?\n"
      "echo \"Program End: $(date)\"\n"
      "echo \"EXIT_CODE=$EXIT_CODE\"\n"
      "exit $EXIT_CODE\n";
  // The script reaches bash as one execve() argument, which Linux caps at MAX_ARG_STRLEN. The
  // driver goes in verbatim when that fits (a reader of the manifest sees it as it is), else
  // gzip-compressed and base64-encoded, which the pod unpacks with coreutils' base64 and gzip.
  std::string verbatim =
      fmt::format("cat > {} <<'{}'\n{}{}\n", kDriverPath, terminator, driver, terminator);
  if (script.size() + verbatim.size() + rest.size() < kMaxArgumentBytes) {
    script += verbatim;
  } else {
    script += fmt::format(
        "# The driver, gzip-compressed and base64-encoded: verbatim it would not fit in one "
        "command\n# argument. `render-bench --print-driver` prints it as text.\n"
        "base64 -d > {0}.gz <<'{1}' || {{ echo \"cannot decode the bench driver\" >&2; exit 1; }}\n"
        "{2}{1}\n"
        "gzip -dc {0}.gz > {0} || {{ echo \"cannot unpack the bench driver\" >&2; exit 1; }}\n",
        kDriverPath, heredoc_terminator(""), base64_encode(gzip_compress(driver)));
  }
  script += rest;
  if (script.size() >= kMaxArgumentBytes) {
    fail(
        "the {} script is {} bytes (driver {} bytes); Linux passes at most {} bytes in one "
        "command argument: shorten the driver (--driver) or the trainer's environment",
        launch.what, script.size(), driver.size(), kMaxArgumentBytes - 1);
  }
  return script;
}

class Renderer {
 public:
  Renderer(const k8s::DryRun& dryrun, const RenderOptions& options)
      : dryrun_(dryrun), options_(options) {}

  RenderResult run();
  // The preflight Job of the bench that run() rendered.
  YAML::Node preflight_job(PreflightChecks checks) const;

 private:
  void record(std::string knob, std::string path, std::string old_value, std::string new_value) {
    result_.changes.push_back(
        {std::move(knob), std::move(path), std::move(old_value), std::move(new_value)});
  }
  std::string client_path(std::string_view suffix) const {
    return client_.container.path() + std::string(suffix);
  }

  void read_inputs();
  void rename();
  void set_scheduling_fields();
  void edit_maxtext_flags();
  void edit_libtpu_flags();
  void sync_worker_libtpu(k8s::ContainerRef& worker);
  void edit_argv();
  void edit_trainer_slice();
  void check_weight_knobs() const;
  void apply_weights();
  // Removes the client container's env-list entries `name`; true when there was one.
  bool remove_container_env(std::string_view name, const std::string& knob);
  void set_driver_and_profiler();
  void build_client_command();
  void check_names_fit();

  // The trainer's environment assignment `name`, or nullptr.
  k8s::shell::Assignment* env_assignment(std::string_view name);
  void set_env(std::string_view name, const std::string& value, const std::string& knob);
  void edit_flag_list(k8s::FlagList& list, const std::string& item, const std::string& knob,
                      const std::string& path, bool must_exist,
                      std::optional<std::size_t> append_at = std::nullopt);

  const k8s::DryRun& dryrun_;
  const RenderOptions& options_;
  RenderResult result_;
  const k8s::Document* e2e_trainer_ = nullptr;  // in the DRY_RUN, unchanged
  k8s::Document bench_;
  std::string old_name_;
  k8s::ClientCommand client_;  // of the bench document (a copy of the trainer's)
  std::vector<k8s::shell::Assignment> env_;
  std::set<std::string> edited_env_;  // names whose value the bench changes
  std::vector<std::string> program_;
  k8s::FlagList trainer_argv_{k8s::FlagStyle::kDashDash, {}};
  k8s::FlagList orch_argv_{k8s::FlagStyle::kDashDash, {}};
  std::string orch_argv_path_;
  std::vector<std::pair<std::string, std::string>> orch_driver_env_;
  std::vector<std::pair<std::string, std::string>> rollout_driver_env_;
  std::vector<std::string> trainer_env_words_;     // the client's own assignments, for bash
  std::vector<std::string> driver_setting_words_;  // the driver settings, for bash
};

k8s::shell::Assignment* Renderer::env_assignment(std::string_view name) {
  // The last assignment of a name is the one bash uses.
  for (auto it = env_.rbegin(); it != env_.rend(); ++it) {
    if (it->name == name) return &*it;
  }
  return nullptr;
}

void Renderer::set_env(std::string_view name, const std::string& value, const std::string& knob) {
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

void Renderer::edit_flag_list(k8s::FlagList& list, const std::string& item, const std::string& knob,
                              const std::string& path, bool must_exist,
                              std::optional<std::size_t> append_at) {
  std::string_view key = flag_key(item, list.style());
  if (key.empty()) {
    fail(
        "{} {}: not a flag ({})", knob, item,
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

void Renderer::read_inputs() {
  k8s::Roles roles = select_roles(dryrun_, options_.mains);
  e2e_trainer_ = roles.trainer;
  const k8s::Document& trainer = *roles.trainer;
  if (!roles.orchestrator) {
    fail_at(dryrun_.source, 0,
            "no orchestrator JobSet (--process_main={}): the bench driver needs its argv",
            options_.mains.orchestrator);
  }
  // Parse on the original documents first, so errors carry their input lines.
  k8s::JobSetView(trainer).client(dryrun_.source);
  k8s::ClientCommand orchestrator = k8s::JobSetView(*roles.orchestrator).client(dryrun_.source);

  bench_ = k8s::Document(YAML::Clone(trainer.root), trainer.first_line, trainer.text);
  k8s::JobSetView view(bench_);
  old_name_ = view.name();
  result_.trainer_name = old_name_;
  client_ = view.client(dryrun_.source);
  env_ = client_.startup.env;
  if (env_assignment(k8s::kDriverSettingsStart)) {
    fail_at(dryrun_.source, static_cast<std::int64_t>(client_.startup_line),
            "the trainer's environment already sets {}, which the bench client uses",
            k8s::kDriverSettingsStart);
  }
  std::vector<std::string> argv;
  for (const k8s::shell::Word& word : client_.startup.words) {
    if (argv.empty() && word.value.rfind("--", 0) != 0) {
      program_.push_back(word.value);
    } else {
      argv.push_back(word.value);
      if (word.expands) {
        result_.warnings.push_back(
            fmt::format("{}:{}: trainer argument {} contains a shell expansion; the driver "
                        "receives it literally",
                        dryrun_.source, client_.startup_line, word.source));
      }
    }
  }
  if (program_.empty()) {
    fail_at(dryrun_.source, static_cast<std::int64_t>(client_.startup_line),
            "the trainer's startup command has no program");
  }
  trainer_argv_ = k8s::FlagList(k8s::FlagStyle::kDashDash, argv);
  std::vector<std::string> orch_argv;
  bool in_argv = false;
  for (const k8s::shell::Word& word : orchestrator.startup.words) {
    in_argv = in_argv || word.value.rfind("--", 0) == 0;
    if (in_argv) orch_argv.push_back(word.value);
  }
  orch_argv_ = k8s::FlagList(k8s::FlagStyle::kDashDash, orch_argv);
  orch_argv_path_ = client_path(".startup.driver.ORCH_ARGV");
  orch_driver_env_ = orchestrator_driver_env(orchestrator);
  if (auto routed = rollout_routed_experts(roles.rollouts, dryrun_.source, result_.warnings)) {
    rollout_driver_env_.emplace_back(std::string(kRolloutRoutedExpertsSetting), *routed);
  }
}

void Renderer::rename() {
  const std::string& name = options_.name;
  YAML::Node metadata = k8s::yaml::lookup(bench_.root, "metadata");
  std::string command_path = client_path(".command");
  // Every scalar that is exactly the trainer's name: metadata.name, label-selector values.
  visit_scalars(
      bench_.root, "", [&](const std::string& path) { return path == command_path; },
      [&](YAML::Node node, const std::string& path, std::string_view) {
        if (node.Scalar() != old_name_) return;
        record("--name", path, old_name_, name);
        assign_string(node, name);
      });
  // Flags whose value is the trainer's name (--worker_id=...).
  std::vector<std::string> items = trainer_argv_.items();
  for (const std::string& item : items) {
    auto value = flag_value(item, k8s::FlagStyle::kDashDash);
    if (value && *value == old_name_) {
      std::string key(flag_key(item, k8s::FlagStyle::kDashDash));
      edit_flag_list(trainer_argv_, fmt::format("--{}={}", key, name), "--name",
                     client_path(".startup.argv"), true);
    }
  }
  for (const k8s::shell::Assignment& assignment : client_.startup.env) {
    if (assignment.value == old_name_) set_env(assignment.name, name, "--name");
  }
  if (options_.namespace_name) {
    YAML::Node ns = k8s::yaml::lookup(metadata, "namespace");
    std::string old = ns.IsDefined() && ns.IsScalar() ? ns.Scalar() : "";
    if (old != *options_.namespace_name) {
      record("--namespace", "metadata.namespace", old, *options_.namespace_name);
      if (ns.IsDefined()) {
        assign_string(ns, *options_.namespace_name);
      } else {
        metadata["namespace"] = *options_.namespace_name;
      }
    }
  }
}

void Renderer::set_scheduling_fields() {
  // The gang-id label: the bench's pods form their own gang, also when the e2e trainer names
  // none (then the JobSet's own labels get one, as the seed's renderer did).
  bool has_gang_id = false;
  visit_scalars(
      bench_.root, "", [](const std::string&) { return false; },
      [&](YAML::Node node, const std::string& path, std::string_view key) {
        if (key != kGangIdLabel) return;
        has_gang_id = true;
        if (node.Scalar() == options_.name) return;
        record("render", path, node.Scalar(), options_.name);
        k8s::yaml::set_string(node, options_.name);
      });
  if (!has_gang_id) {
    YAML::Node metadata = k8s::yaml::lookup(bench_.root, "metadata");
    YAML::Node labels = k8s::yaml::lookup(metadata, "labels");
    if (!metadata.IsMap() || (labels.IsDefined() && !labels.IsNull() && !labels.IsMap())) {
      fail_at(dryrun_.source, static_cast<std::int64_t>(bench_.first_line),
              "the trainer JobSet's metadata.labels is not a mapping");
    }
    if (!labels.IsDefined() || labels.IsNull()) {
      record("render", "metadata.labels", "", fmt::format("{}: {}", kGangIdLabel, options_.name));
      metadata["labels"] = YAML::Node(YAML::NodeType::Map);
    } else {
      record("render", k8s::path_child("metadata.labels", kGangIdLabel), "", options_.name);
    }
    metadata["labels"][std::string(kGangIdLabel)] = k8s::yaml::string_scalar(options_.name);
  }
  // maxRestarts 0: a failed bench is read and fixed, never restarted.
  YAML::Node spec = k8s::yaml::lookup(bench_.root, "spec");
  if (!spec.IsMap())
    fail_at(dryrun_.source, static_cast<std::int64_t>(bench_.first_line),
            "the trainer JobSet has no spec");
  YAML::Node policy = k8s::yaml::lookup(spec, "failurePolicy");
  if (!policy.IsDefined() || policy.IsNull()) {
    record("render", "spec.failurePolicy", "", "maxRestarts: 0");
    YAML::Node created(YAML::NodeType::Map);
    created["maxRestarts"] = 0;
    spec["failurePolicy"] = created;
  } else {
    YAML::Node restarts = k8s::yaml::lookup(policy, "maxRestarts");
    std::string old = restarts.IsDefined() && restarts.IsScalar() ? restarts.Scalar() : "";
    if (old != "0") {
      record("render", "spec.failurePolicy.maxRestarts", old, "0");
      policy["maxRestarts"] = 0;
    }
  }
  if (options_.image) {
    YAML::Node image = k8s::yaml::lookup(client_.container.node, "image");
    std::string old = image.IsDefined() && image.IsScalar() ? image.Scalar() : "";
    if (old != *options_.image) {
      record("--image", client_path(".image"), old, *options_.image);
      client_.container.node["image"] = *options_.image;
    }
  }
}

void Renderer::edit_maxtext_flags() {
  if (options_.maxtext_flags.empty() && options_.maxtext_replace.empty()) return;
  k8s::shell::Assignment* current = env_assignment(kMaxTextFlagsEnv);
  if (!current && !options_.maxtext_replace.empty()) {
    fail("--maxtext-replace {}: the trainer has no MAXTEXT_EXTRA_FLAGS",
         options_.maxtext_replace.front());
  }
  k8s::FlagList flags =
      k8s::FlagList::parse(current ? current->value : "", k8s::FlagStyle::kKeyValue);
  std::string path = client_path(".startup.env." + std::string(kMaxTextFlagsEnv));
  std::size_t before = result_.changes.size();
  for (const std::string& item : options_.maxtext_replace) {
    try {
      edit_flag_list(flags, item, "--maxtext-replace", path, true);
    } catch (const Error& e) {
      fail("--maxtext-replace {}: {} in the trainer's MAXTEXT_EXTRA_FLAGS", item, e.message());
    }
  }
  for (const std::string& item : options_.maxtext_flags)
    edit_flag_list(flags, item, "--maxtext-flag", path, false);
  if (result_.changes.size() == before) return;
  if (!current) {
    // A new variable: record it whole rather than item by item.
    result_.changes.resize(before);
    record("--maxtext-flag", path, "", flags.str());
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
      fail("--libtpu-flag {}: not a flag (--KEY=VALUE)", item);
    }
    // libtpu splits its flag string on blanks, so a value cannot hold one.
    if (item.find_first_of(" \t\n\r") != std::string::npos) {
      fail("--libtpu-flag '{}': a libtpu flag cannot contain blanks", item);
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
      edit_flag_list(flags, item, "--libtpu-flag", path, false);
    if (result_.changes.size() != before) {
      if (current) {
        current->value = flags.str();
      } else {
        result_.changes.resize(before);
        record("--libtpu-flag", path, "", flags.str());
        env_.push_back({std::string(kLibtpuEnv), flags.str(), "", false});
      }
      edited_env_.insert(std::string(kLibtpuEnv));
    }
  }
  k8s::JobSetView view(bench_);
  // 2. The pathways proxy: one args item per flag, new ones after the last --xla item.
  if (auto proxy = view.container(kProxyContainer); proxy && knobs) {
    YAML::Node args = k8s::yaml::lookup(proxy->node, "args");
    std::vector<std::string> items;
    if (args.IsSequence()) {
      for (const auto& item : args) items.push_back(item.IsScalar() ? item.Scalar() : "");
    }
    k8s::FlagList flags(k8s::FlagStyle::kDashDash, items);
    std::string path = proxy->path() + ".args";
    for (const std::string& item : options_.libtpu_flags) {
      std::size_t append_at = flags.items().size();
      for (std::size_t i = 0; i < flags.items().size(); ++i) {
        if (flags.items()[i].rfind("--xla", 0) == 0) append_at = i + 1;
      }
      edit_flag_list(flags, item, "--libtpu-flag", path, false, append_at);
    }
    YAML::Node rebuilt(YAML::NodeType::Sequence);
    for (std::size_t i = 0; i < flags.items().size(); ++i) {
      // Keep unchanged items as they were (type and all); new or changed ones are strings.
      auto old = std::find(items.begin(), items.end(), flags.items()[i]);
      if (old != items.end() && args.IsSequence()) {
        rebuilt.push_back(args[static_cast<std::size_t>(old - items.begin())]);
      } else {
        rebuilt.push_back(k8s::yaml::string_scalar(flags.items()[i]));
      }
    }
    proxy->node["args"] = rebuilt;
  } else if (knobs) {
    result_.warnings.push_back(
        fmt::format("{}: the trainer JobSet has no {} container; "
                    "--libtpu-flag reaches the client and workers only",
                    dryrun_.source, kProxyContainer));
  }
  // 3. The pathways workers: always the client's whole libtpu set plus their own extras
  // (render_table.h bench_worker_libtpu), so a bench never runs workers on other flags.
  if (auto worker = view.container(kWorkerContainer)) {
    sync_worker_libtpu(*worker);
  } else if (knobs) {
    result_.warnings.push_back(
        fmt::format("{}: the trainer JobSet has no {} container; "
                    "--libtpu-flag reaches the client and proxy only",
                    dryrun_.source, kWorkerContainer));
  }
}

void Renderer::sync_worker_libtpu(k8s::ContainerRef& worker) {
  const k8s::shell::Assignment* client_libtpu = env_assignment(kLibtpuEnv);
  if (!client_libtpu) return;  // no client set: the workers keep theirs
  if (client_libtpu->expands) {
    result_.warnings.push_back(
        fmt::format("{}: the client's {} contains a shell expansion; the {} keep their own flags",
                    dryrun_.source, kLibtpuEnv, kWorkerContainer));
    return;
  }
  k8s::FlagList client = k8s::FlagList::parse(client_libtpu->value, k8s::FlagStyle::kDashDash);
  if (client.items().empty()) return;
  // A flag the knobs set is theirs; any other the workers take from the client.
  auto knob_of = [&](std::string_view key) -> std::string {
    for (const std::string& item : options_.libtpu_flags) {
      if (flag_key(item, k8s::FlagStyle::kDashDash) == key) return "--libtpu-flag";
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
    record(options_.libtpu_flags.empty() ? std::string(kWorkersLibtpuKnob) : "--libtpu-flag",
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
    edit_flag_list(trainer_argv_, item, "--trainer-arg", argv_path, false);
  }
  for (const std::string& item : options_.trainer_args_removed) {
    std::string_view key = flag_key(item, k8s::FlagStyle::kDashDash);
    if (key.empty()) fail("--trainer-arg-remove {}: not a flag (--KEY)", item);
    auto at = trainer_argv_.find(key);
    if (!at) fail("--trainer-arg-remove {}: the trainer's argv has no --{}", item, key);
    std::string old = trainer_argv_.items()[*at];
    trainer_argv_.remove(key);
    record("--trainer-arg-remove", k8s::path_item(argv_path, "--" + std::string(key)), old, "");
  }
  for (const std::string& item : options_.orchestrator_args) {
    edit_flag_list(orch_argv_, item, "--orch-arg", orch_argv_path_, false);
  }
  if (options_.output_prefix) {
    std::string prefix = *options_.output_prefix;
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    edit_flag_list(trainer_argv_,
                   fmt::format("--maxtext_output_directory={}/{}", prefix, options_.name),
                   "--output-prefix", argv_path, false);
  }
  if (options_.logps_chunk) {
    if (*options_.logps_chunk <= 0)
      fail("--logps-chunk {}: must be a positive number of tokens", *options_.logps_chunk);
    std::string value = std::to_string(*options_.logps_chunk);
    // Wherever the e2e passes it; the trainer's argv when it passes it nowhere.
    bool anywhere = false;
    if (auto* maxtext = env_assignment(kMaxTextFlagsEnv)) {
      k8s::FlagList flags = k8s::FlagList::parse(maxtext->value, k8s::FlagStyle::kKeyValue);
      if (flags.contains("compute_logps_chunk_size")) {
        edit_flag_list(flags, "compute_logps_chunk_size=" + value, "--logps-chunk",
                       client_path(".startup.env." + std::string(kMaxTextFlagsEnv)), true);
        maxtext->value = flags.str();
        edited_env_.insert(std::string(kMaxTextFlagsEnv));
        anywhere = true;
      }
    }
    if (env_assignment(kLogpsChunkEnv)) {
      set_env(kLogpsChunkEnv, value, "--logps-chunk");
      anywhere = true;
    }
    if (trainer_argv_.contains("compute_logps_chunk_size") || !anywhere) {
      edit_flag_list(trainer_argv_, "--compute_logps_chunk_size=" + value, "--logps-chunk",
                     argv_path, false);
    }
  }
}

void Renderer::edit_trainer_slice() {
  if (!options_.trainer_slice) return;
  const std::string knob = "--trainer-slice";
  Slice target = Slice::parse(*options_.trainer_slice);
  k8s::JobSetView view(bench_);
  std::optional<TrainerSlice> found = find_trainer_slice(view);
  if (!found) {
    fail(
        "--trainer-slice: cannot tell the trainer's current slice (no pathways-rm "
        "--instance_type, no gke-tpu-accelerator and topology labels)");
  }
  std::optional<Slice> current = Slice::parse(found->text);
  // The mesh: FSDP fills the devices left by context x expert x tensor.
  auto mesh_axis = [&](std::string_view key) {
    auto value = trainer_argv_.value(key);
    return value ? parse_int(*value, "--" + std::string(key)) : 1;
  };
  int fsdp;
  try {
    fsdp = fill_fsdp(target.devices(), mesh_axis("mesh_context"), mesh_axis("mesh_expert"),
                     mesh_axis("mesh_tp"));
  } catch (const Error& e) {
    fail("--trainer-slice {}: {}", *options_.trainer_slice, e.message());
  }
  std::string old_topology = current->topology().str();
  std::string old_partition = fmt::format("{}{}-", kPartitionPrefix, current->partition().str());
  std::string new_partition = fmt::format("{}{}-", kPartitionPrefix, target.partition().str());
  std::set<std::string> tpu_job_names = tpu_jobs(view);
  auto set_field = [&](YAML::Node node, const std::string& path, const std::string& value) {
    if (node.Scalar() == value) return;
    record(knob, path, node.Scalar(), value);
    assign_string(node, value);
  };
  std::string command_path = client_path(".command");
  std::string instance_type_prefix = std::string(kInstanceTypeFlag) + "=";
  visit_scalars(
      bench_.root, "", [&](const std::string& path) { return path == command_path; },
      [&](YAML::Node node, const std::string& path, std::string_view key) {
        const std::string& value = node.Scalar();
        if (std::optional<SliceField> field = slice_field(key)) {
          set_field(node, path, slice_field_value(target, *field));
        } else if (value.rfind(instance_type_prefix, 0) == 0) {
          set_field(node, path, instance_type_prefix + target.instance_type());
        } else if (value.find(old_partition) != std::string::npos) {
          std::string replaced = value;
          for (std::size_t at = replaced.find(old_partition); at != std::string::npos;
               at = replaced.find(old_partition, at + new_partition.size())) {
            replaced.replace(at, old_partition.size(), new_partition);
          }
          set_field(node, path, replaced);
        }
      });
  // Keys that name the partition (node affinity keys are values, but labels may be keys).
  YAML::Node jobs = k8s::yaml::lookup(k8s::yaml::lookup(bench_.root, "spec"), "replicatedJobs");
  std::vector<std::string> job_keys = k8s::sequence_item_keys(jobs);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (!tpu_job_names.count(job_keys[i])) continue;
    std::string job_path = k8s::path_item("spec.replicatedJobs", job_keys[i]) + ".template.spec";
    YAML::Node job_spec = k8s::yaml::lookup(k8s::yaml::lookup(jobs[i], "template"), "spec");
    for (std::string_view field : {"completions", "parallelism"}) {
      YAML::Node node = k8s::yaml::lookup(job_spec, field);
      if (node.IsDefined() && node.IsScalar() && node.Scalar() != int_text(target.hosts())) {
        record(knob, k8s::path_child(job_path, field), node.Scalar(), int_text(target.hosts()));
        node = target.hosts();
      }
    }
  }
  edit_flag_list(trainer_argv_, fmt::format("--mesh_fsdp={}", fsdp), knob,
                 client_path(".startup.argv"), false);
  // The orchestrator's description of the trainer, which the driver reads.
  if (orch_argv_.contains("trainer_fsdp")) {
    edit_flag_list(orch_argv_, fmt::format("--trainer_fsdp={}", fsdp), knob, orch_argv_path_, true);
  }
  if (auto topology = orch_argv_.value("tpu_topology")) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (;;) {
      std::size_t plus = topology->find('+', start);
      parts.push_back(topology->substr(start, plus == std::string::npos ? plus : plus - start));
      if (plus == std::string::npos) break;
      start = plus + 1;
    }
    // The trainer's part is the one naming its current slice, else the first.
    auto trainer_part = std::find(parts.begin(), parts.end(), current->instance_type());
    if (trainer_part == parts.end()) trainer_part = parts.begin();
    *trainer_part = target.instance_type();
    edit_flag_list(orch_argv_, fmt::format("--tpu_topology={}", fmt::join(parts, "+")), knob,
                   orch_argv_path_, true);
  }
  // No field may keep the old topology (outside the partition names, which may legitimately stay).
  if (current->topology() == target.topology()) return;
  auto keeps_old = [&](std::string text) {
    for (std::size_t at = text.find(new_partition); at != std::string::npos;
         at = text.find(new_partition)) {
      text.erase(at, new_partition.size());
    }
    return text.find(old_topology) != std::string::npos;
  };
  visit_scalars(
      bench_.root, "", [&](const std::string& path) { return path == command_path; },
      [&](YAML::Node node, const std::string& path, std::string_view) {
        if (keeps_old(node.Scalar())) {
          fail(
              "--trainer-slice: {} still names the old topology {} ('{}'), a field render-bench "
              "does not "
              "know how to change",
              path, old_topology, node.Scalar());
        }
      });
  for (const std::string& item : trainer_argv_.items()) {
    if (keeps_old(item))
      fail("--trainer-slice: the trainer argument {} still names the old topology {}", item,
           old_topology);
  }
  for (const k8s::shell::Assignment& assignment : env_) {
    if (keeps_old(assignment.value)) {
      fail("--trainer-slice: the trainer's environment {} still names the old topology {}",
           assignment.name, old_topology);
    }
  }
}

void Renderer::check_weight_knobs() const {
  if (options_.weights != Weights::kRandom) return;
  // A knob that asks for a checkpoint contradicts --weights random: refuse it rather than drop it.
  auto refuse = [](std::string_view knob, const std::string& item) {
    fail("{} {}: loads a checkpoint, but --weights is random (give --weights checkpoint)", knob,
         item);
  };
  for (const auto* items : {&options_.maxtext_flags, &options_.maxtext_replace}) {
    for (const std::string& item : *items) {
      if (loads_checkpoint(k8s::flag_key(item, k8s::FlagStyle::kKeyValue),
                           k8s::flag_value(item, k8s::FlagStyle::kKeyValue).value_or("")))
        refuse(items == &options_.maxtext_flags ? "--maxtext-flag" : "--maxtext-replace", item);
    }
  }
  for (const std::string& item : options_.trainer_args) {
    if (loads_checkpoint(k8s::flag_key(item, k8s::FlagStyle::kDashDash),
                         k8s::flag_value(item, k8s::FlagStyle::kDashDash).value_or("")))
      refuse("--trainer-arg", item);
  }
}

bool Renderer::remove_container_env(std::string_view name, const std::string& knob) {
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
      kept.push_back(item);
    }
  }
  if (!removed) return false;
  client_.container.node["env"] = kept;
  record(knob, k8s::path_item(client_path(".env"), name), fmt::format("{}={}", name, old), "");
  return true;
}

void Renderer::apply_weights() {
  const std::string knob = "--weights";
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
    result_.notes.push_back(
        found.empty() ? "--weights checkpoint: the e2e trainer loads no checkpoint, so MaxText "
                        "initialises random weights"
                      : fmt::format("--weights checkpoint: kept {}: the bench loads the e2e's "
                                    "checkpoint",
                                    fmt::join(found, ", ")));
    return;
  }
  if (found.empty()) {
    result_.notes.push_back(
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
  result_.notes.push_back(fmt::format(
      "--weights random: dropped {}: MaxText initialises random weights", fmt::join(found, ", ")));
}

void Renderer::set_driver_and_profiler() {
  const std::string knob = "--profile-window";
  // What starts the trainer's own profiler (of repeated items, the last one counts).
  std::vector<std::string> trainer_profiler;
  std::optional<std::size_t> steps_at = trainer_argv_.find("profiler_steps");
  bool argv_profiler = steps_at && starts_trainer_profiler(trainer_argv_.items()[*steps_at]);
  if (argv_profiler) trainer_profiler.push_back(trainer_argv_.items()[*steps_at]);
  k8s::shell::Assignment* maxtext = env_assignment(kMaxTextFlagsEnv);
  k8s::FlagList maxtext_flags =
      k8s::FlagList::parse(maxtext ? maxtext->value : "", k8s::FlagStyle::kKeyValue);
  std::optional<std::size_t> profiler_at = maxtext_flags.find("profiler");
  bool maxtext_profiler =
      profiler_at && starts_maxtext_profiler(maxtext_flags.items()[*profiler_at]);
  if (maxtext_profiler) {
    trainer_profiler.push_back(
        fmt::format("{} {}", kMaxTextFlagsEnv, maxtext_flags.items()[*profiler_at]));
  }
  if (!options_.profile_window) {
    result_.notes.push_back(
        trainer_profiler.empty()
            ? "profiler: none (no --profile-window, and the e2e trainer's profiler is off)"
            : fmt::format("profiler: the trainer's own, as the e2e sets it ({}); the driver traces "
                          "nothing (no --profile-window)",
                          fmt::join(trainer_profiler, ", ")));
    return;
  }
  auto [start, count] = *options_.profile_window;
  checked_setting(driver_setting("PROFILE_WINDOW"), fmt::format("{}:{}", start, count));
  // One profiler: the driver traces the window (PROFILE_WINDOW), so the trainer's is turned off
  // where the e2e turns it on, and nothing else of the e2e's profiler settings changes.
  if (argv_profiler) {
    edit_flag_list(trainer_argv_, "--profiler_steps=0", knob, client_path(".startup.argv"), false);
  }
  if (maxtext_profiler) {
    std::string path = client_path(".startup.env." + std::string(kMaxTextFlagsEnv));
    std::string old = maxtext_flags.items()[*profiler_at];
    maxtext_flags.remove("profiler");
    record(knob, k8s::path_item(path, "profiler"), old, "");
    maxtext->value = maxtext_flags.str();
    edited_env_.insert(std::string(kMaxTextFlagsEnv));
  }
  result_.notes.push_back(fmt::format(
      "profiler: the driver's (PROFILE_WINDOW={}:{}, fwd_bwd calls {}..{}){}", start, count, start,
      start + count - 1,
      trainer_profiler.empty() ? "; the e2e trainer's profiler is off"
                               : fmt::format("; the trainer's own is turned off (was {})",
                                             fmt::join(trainer_profiler, ", "))));
}

void Renderer::build_client_command() {
  std::string trainer_argv = k8s::shell::join(trainer_argv_.items());
  std::string orch_argv = k8s::shell::join(orch_argv_.items());
  trainer_env_words_.clear();
  for (const k8s::shell::Assignment& assignment : env_) {
    // Unedited assignments are written as the e2e wrote them, so their expansions still happen.
    if (!edited_env_.count(assignment.name) && !assignment.source.empty()) {
      trainer_env_words_.push_back(assignment.source);
    } else {
      trainer_env_words_.push_back(assignment.name + "=" + k8s::shell::quote(assignment.value));
    }
  }
  driver_setting_words_.clear();
  for (const auto& [name, value] : driver_environment(options_, trainer_argv, orch_argv,
                                                      orch_driver_env_, rollout_driver_env_)) {
    driver_setting_words_.push_back(name + "=" + k8s::shell::quote(value));
  }
  DriverLaunch launch{"bench client",
                      "the trainer program under the bench driver",
                      trainer_env_words_,
                      {"python3", std::string(kDriverPath)}};
  launch.assignments.insert(launch.assignments.end(), driver_setting_words_.begin(),
                            driver_setting_words_.end());
  k8s::yaml::set_string(client_.script_node,
                        driver_script(launch, options_.driver_source, options_.tool_version));
  std::string old_program = k8s::shell::join(program_);
  record("render", client_path(".script"), "e2e wrapper",
         "bench wrapper writing " + std::string(kDriverPath));
  record("render", client_path(".startup.program"), old_program,
         "python3 " + std::string(kDriverPath));
  record("render", client_path(".startup.driver"), "", "driver settings, TRAINER_ARGV, ORCH_ARGV");
}

void Renderer::check_names_fit() {
  // JobSet names its Jobs <jobset>-<replicatedJob>-<index> and their pods
  // <job>-<pod index>-<5 random characters>; both must stay within 63 characters.
  k8s::JobSetView view(bench_);
  YAML::Node jobs = k8s::yaml::lookup(k8s::yaml::lookup(bench_.root, "spec"), "replicatedJobs");
  if (!jobs.IsSequence()) return;
  for (const auto& job : jobs) {
    std::string job_name = k8s::yaml::scalar_at(job, "name").value_or("");
    auto number = [&](const YAML::Node& map, std::string_view key) {
      auto text = k8s::yaml::scalar_at(map, key);
      long long value = 1;
      if (text) std::from_chars(text->data(), text->data() + text->size(), value);
      return std::max(1LL, value);
    };
    long long replicas = number(job, "replicas");
    YAML::Node job_spec = k8s::yaml::lookup(k8s::yaml::lookup(job, "template"), "spec");
    long long pods = std::max(number(job_spec, "completions"), number(job_spec, "parallelism"));
    std::string longest_job = fmt::format("{}-{}-{}", options_.name, job_name, replicas - 1);
    std::string longest_pod = fmt::format("{}-{}-xxxxx", longest_job, pods - 1);
    if (longest_pod.size() > kMaxKubernetesName) {
      fail("--name {}: too long: JobSet would name pods like {} ({} characters, at most {})",
           options_.name, longest_pod, longest_pod.size(), kMaxKubernetesName);
    }
  }
}

bool covered(const std::string& path, const std::vector<Change>& changes) {
  for (const Change& change : changes) {
    const std::string& p = change.path;
    if (path == p) return true;
    if (path.size() > p.size() && path.compare(0, p.size(), p) == 0 &&
        (path[p.size()] == '.' || path[p.size()] == '[')) {
      return true;
    }
    // A repeated flag is compared as `key#N`; an edit of it is recorded under `key`.
    if (!p.empty() && p.back() == ']') {
      std::string stem = p.substr(0, p.size() - 1) + "#";
      if (path.compare(0, stem.size(), stem) == 0) return true;
    }
  }
  return false;
}

RenderResult Renderer::run() {
  validate_jobset_name(options_.name);
  if (options_.namespace_name) validate_dns_label("--namespace", *options_.namespace_name, false);
  check_weight_knobs();
  read_inputs();
  rename();
  set_scheduling_fields();
  edit_maxtext_flags();
  edit_libtpu_flags();
  edit_argv();
  apply_weights();
  edit_trainer_slice();
  set_driver_and_profiler();
  build_client_command();
  check_names_fit();
  check_bench_against_e2e(e2e_trainer_->root, bench_.root, result_.changes);
  result_.bench = bench_.root;
  result_.yaml = k8s::yaml::emit(bench_.root);
  return std::move(result_);
}

YAML::Node Renderer::preflight_job(PreflightChecks checks) const {
  bool numerics = checks == PreflightChecks::kNumerics;
  std::string name = options_.name + std::string(numerics ? kNumericsSuffix : kPreflightSuffix);
  validate_dns_label("--name", name, true);
  k8s::JobSetView view(bench_);
  YAML::Node image = k8s::yaml::lookup(client_.container.node, "image");
  if (!image.IsDefined() || !image.IsScalar() || image.Scalar().empty()) {
    fail("the trainer's client container has no image: give --image for the preflight");
  }
  // JAX_PLATFORMS=cpu after the trainer's own assignments, which may name a TPU platform.
  std::vector<std::string> driver_argv = {"python3", std::string(kDriverPath), "--preflight"};
  if (numerics) driver_argv.push_back("--numerics");
  DriverLaunch launch{numerics ? "bench numerics preflight" : "bench preflight",
                      numerics ? "the bench driver's --preflight --numerics checks on CPU, with "
                                 "the bench's settings"
                               : "the bench driver's --preflight checks on CPU, with the bench's "
                                 "settings",
                      trainer_env_words_, driver_argv};
  launch.assignments.push_back("JAX_PLATFORMS=cpu");
  launch.assignments.insert(launch.assignments.end(), driver_setting_words_.begin(),
                            driver_setting_words_.end());
  std::string script = driver_script(launch, options_.driver_source, options_.tool_version);

  YAML::Node labels(YAML::NodeType::Map);
  labels["rl-trainer-bench/bench"] = k8s::yaml::string_scalar(options_.name);
  labels["rl-trainer-bench/role"] = "preflight";

  YAML::Node container(YAML::NodeType::Map);
  container["name"] = "preflight";
  container["image"] = k8s::yaml::string_scalar(image.Scalar());
  if (auto policy = k8s::yaml::scalar_at(client_.container.node, "imagePullPolicy")) {
    container["imagePullPolicy"] = k8s::yaml::string_scalar(*policy);
  }
  YAML::Node command(YAML::NodeType::Sequence);
  command.push_back("bash");
  command.push_back("-c");
  command.push_back(k8s::yaml::string_scalar(script));
  container["command"] = command;
  // The client's env list with JAX_PLATFORMS=cpu in place of its platform (proxy,cpu on Pathways).
  auto cpu_platform = [] {
    YAML::Node entry(YAML::NodeType::Map);
    entry["name"] = "JAX_PLATFORMS";
    entry["value"] = k8s::yaml::string_scalar("cpu");
    return entry;
  };
  YAML::Node env(YAML::NodeType::Sequence);
  bool platform_set = false;
  YAML::Node client_env = k8s::yaml::lookup(client_.container.node, "env");
  if (client_env.IsSequence()) {
    for (const YAML::Node& item : client_env) {
      if (k8s::yaml::scalar_at(item, "name") != std::string("JAX_PLATFORMS")) {
        env.push_back(YAML::Clone(item));
      } else if (!platform_set) {
        env.push_back(cpu_platform());
        platform_set = true;
      }
    }
  }
  if (!platform_set) env.push_back(cpu_platform());
  container["env"] = env;
  // Enough to import Tunix and MaxText and build a small payload; no accelerator. The numerics
  // check also builds a miniature trainer whose embedding keeps the e2e vocabulary, with its
  // optimizer state, in float32.
  YAML::Node requests(YAML::NodeType::Map);
  requests["cpu"] = k8s::yaml::string_scalar("2");
  requests["memory"] = numerics ? "16Gi" : "8Gi";
  container["resources"]["requests"] = requests;

  YAML::Node pod_spec(YAML::NodeType::Map);
  pod_spec["restartPolicy"] = "Never";
  YAML::Node trainer_pod = view.pod_spec(client_.container.job);
  if (auto account = k8s::yaml::scalar_at(trainer_pod, "serviceAccountName")) {
    pod_spec["serviceAccountName"] = k8s::yaml::string_scalar(*account);
  }
  // The same image, so the same credentials to pull it.
  YAML::Node pull_secrets = k8s::yaml::lookup(trainer_pod, "imagePullSecrets");
  if (pull_secrets.IsDefined() && !pull_secrets.IsNull()) {
    pod_spec["imagePullSecrets"] = YAML::Clone(pull_secrets);
  }
  YAML::Node containers(YAML::NodeType::Sequence);
  containers.push_back(container);
  pod_spec["containers"] = containers;

  YAML::Node job(YAML::NodeType::Map);
  job["apiVersion"] = "batch/v1";
  job["kind"] = "Job";
  job["metadata"]["name"] = k8s::yaml::string_scalar(name);
  if (auto ns = k8s::yaml::scalar_at(k8s::yaml::lookup(bench_.root, "metadata"), "namespace")) {
    job["metadata"]["namespace"] = k8s::yaml::string_scalar(*ns);
  }
  job["metadata"]["labels"] = labels;
  job["spec"]["backoffLimit"] = 0;
  job["spec"]["template"]["metadata"]["labels"] = YAML::Clone(labels);
  job["spec"]["template"]["spec"] = pod_spec;
  return job;
}

}  // namespace

void check_bench_against_e2e(const YAML::Node& e2e_trainer, const YAML::Node& bench,
                             const std::vector<Change>& changes) {
  for (const k8s::Difference& difference :
       k8s::diff_trees(k8s::expand_for_diff(e2e_trainer), k8s::expand_for_diff(bench))) {
    if (!covered(difference.path, changes)) {
      fail(
          "internal error: self-check: the bench differs from the e2e trainer at {} ({} -> {}), "
          "which no option asked for; nothing was written",
          difference.path, difference.old_value.empty() ? "absent" : difference.old_value,
          difference.new_value.empty() ? "absent" : difference.new_value);
    }
  }
}

namespace {

// The setting a change's path ends in: HF_TOKEN for `...env[HF_TOKEN].value`, --hf_token for
// `...argv[--hf_token]`, maxRestarts for `spec.failurePolicy.maxRestarts`.
std::string_view setting_of_path(std::string_view path) {
  if (path.ends_with("].value")) path.remove_suffix(std::string_view(".value").size());
  if (path.ends_with(']')) {
    std::size_t open = path.rfind('[');
    if (open != std::string_view::npos) return path.substr(open + 1, path.size() - open - 2);
  }
  std::size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

}  // namespace

std::string explain_changes(const RenderResult& result, const SecretMasker& masker) {
  std::string out;
  for (const Change& change : result.changes) {
    std::string_view setting = setting_of_path(change.path);
    auto shown = [&](const std::string& value, const char* none) {
      return value.empty() ? std::string(none) : masker.value(setting, value);
    };
    out += fmt::format("{}: {}: {} -> {}\n", change.knob, change.path,
                       shown(change.old_value, "(absent)"), shown(change.new_value, "(removed)"));
  }
  for (const std::string& note : result.notes) out += "note: " + masker.scrub(note) + "\n";
  return out;
}

std::string summarize_changes(const RenderResult& result) {
  std::vector<std::pair<std::string, int>> counts;  // knobs in first-use order
  for (const Change& change : result.changes) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == change.knob; });
    if (it == counts.end())
      counts.emplace_back(change.knob, 1);
    else
      ++it->second;
  }
  std::string out = fmt::format(
      "{} -> {}: {} changes:", result.trainer_name,
      k8s::yaml::scalar_at(k8s::yaml::lookup(result.bench, "metadata"), "name").value_or(""),
      result.changes.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    out += fmt::format("{} {} {}", i == 0 ? "" : ",", counts[i].first, counts[i].second);
  }
  return out;
}

void validate_jobset_name(const std::string& name) { validate_dns_label("--name", name, true); }

std::string dryrun_input(std::string_view given, bool demo, const char* launch_render) {
  if (!given.empty()) return std::string(given);
  if (demo || launch_render == nullptr) return "";
  return launch_render;
}

Weights parse_weights(std::string_view text) {
  if (text == "random") return Weights::kRandom;
  if (text == "checkpoint") return Weights::kCheckpoint;
  fail("--weights {}: must be random or checkpoint", text);
}

std::string_view weights_name(Weights weights) {
  return weights == Weights::kRandom ? "random" : "checkpoint";
}

std::optional<std::pair<int, int>> parse_profile_window(std::string_view text) {
  auto window =
      window_setting(driver_setting("PROFILE_WINDOW"), text, std::numeric_limits<int>::max());
  if (!window) return std::nullopt;
  return std::make_pair(static_cast<int>(window->first), static_cast<int>(window->second));
}

std::pair<std::string, std::string> parse_driver_env(std::string_view text) {
  std::size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) fail("--driver-env {}: expected KEY=VALUE", text);
  return {std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

std::string heredoc_terminator(std::string_view text) {
  const std::vector<std::string_view> lines = split_lines(text);
  auto occurs = [&](const std::string& word) {
    return std::find(lines.begin(), lines.end(), word) != lines.end();
  };
  std::string word = "BENCH_DRIVER_EOF";
  for (int n = 1; occurs(word); ++n) word = fmt::format("BENCH_DRIVER_EOF_{}", n);
  return word;
}

std::optional<std::string> rollout_routed_experts(const std::vector<const k8s::Document*>& rollouts,
                                                  const std::string& source,
                                                  std::vector<std::string>& warnings) {
  std::optional<std::pair<std::string, std::string>> first;
  std::string first_name;
  for (const k8s::Document* rollout : rollouts) {
    auto found = rollout_routed_experts_of(*rollout, source, warnings);
    if (!found) continue;
    std::string name = k8s::JobSetView(*rollout).name();
    if (std::optional<std::string> why =
            refusal(driver_setting(kRolloutRoutedExpertsSetting), found->first)) {
      fail_at(source, static_cast<std::int64_t>(rollout->first_line), "rollout JobSet '{}': {}: {}",
              name, found->second, *why);
    }
    if (!first) {
      first = found;
      first_name = name;
    } else if (bool_word(found->first) != bool_word(first->first)) {
      fail_at(source, static_cast<std::int64_t>(rollout->first_line),
              "the rollout JobSets disagree on routed experts: '{}' has {}, '{}' has {}",
              first_name, first->second, name, found->second);
    }
  }
  if (!first) return std::nullopt;
  return std::string(trim(first->first));
}

std::vector<std::pair<std::string, std::string>> driver_environment(
    const RenderOptions& options, const std::string& trainer_argv, const std::string& orch_argv,
    const std::vector<std::pair<std::string, std::string>>& orch_env,
    const std::vector<std::pair<std::string, std::string>>& rollout_env) {
  const DriverSettings& d = options.driver;
  // The text the driver reads, checked by the table in the words of the setting's option.
  auto value = [](std::string_view name, const std::string& text) {
    return checked_setting(driver_setting(name), text);
  };
  std::vector<double> targets =
      d.routing_targets.empty() ? payload::default_routing_targets() : d.routing_targets;
  std::vector<std::pair<std::string, std::string>> env = {
      {std::string(k8s::kDriverSettingsStart), options.name},
      {"STEPS", value("STEPS", std::to_string(d.steps))},
      {"MICRO_STEPS", value("MICRO_STEPS", std::to_string(d.micro_steps))},
      {"SEED", value("SEED", std::to_string(d.seed))},
      {"ROUTING_TARGETS", payload::format_routing_targets_inline(targets)},
      {"ROUTING_SCALE", value("ROUTING_SCALE", fmt::format("{}", d.routing_scale))},
      {"LOGP_GATES", d.logp_gates ? "on" : "off"},
      {"ADVANTAGES", value("ADVANTAGES", d.advantages)},
  };
  // Written only when asked for: unset, the driver applies its own default.
  if (d.pad_position) env.emplace_back("PAD_POSITION", value("PAD_POSITION", *d.pad_position));
  if (d.pad_align) env.emplace_back("PAD_ALIGN", value("PAD_ALIGN", std::to_string(*d.pad_align)));
  env.emplace_back("STAGE_BOUNDARY", value("STAGE_BOUNDARY", d.stage_boundary));
  if (d.routing) env.emplace_back("ROUTING", value("ROUTING", *d.routing));
  if (d.allow_fallbacks) env.emplace_back("ALLOW_FALLBACKS", "1");
  if (d.logps_pass) env.emplace_back("LOGPS_PASS", value("LOGPS_PASS", *d.logps_pass));
  for (const auto& [name, text] : d.other_settings) {
    const DriverSetting& setting = driver_setting(name);
    if (!setting.has_option()) fail("internal error: {} has no option of its own", name);
    env.emplace_back(name, checked_setting(setting, text));
  }
  for (const auto& [name, text] : orch_env) env.emplace_back("ORCH_" + name, text);
  for (const auto& [name, text] : rollout_env) env.emplace_back(name, text);
  if (options.profile_window) {
    env.emplace_back("PROFILE_WINDOW",
                     value("PROFILE_WINDOW", fmt::format("{}:{}", options.profile_window->first,
                                                         options.profile_window->second)));
  }
  // Settings that have their own option are refused in --driver-env even when that option is
  // absent, so a render never depends on which of the two set them; so are those the render
  // writes itself. The other settings of the table are checked as the driver will check them.
  std::set<std::string, std::less<>> written;
  for (const auto& [name, text] : env) written.insert(name);
  for (const auto& [name, text] : d.extra_env) {
    bool valid = !name.empty() && !(name[0] >= '0' && name[0] <= '9');
    for (char c : name) valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!valid)
      fail("--driver-env {}={}: '{}' is not an environment variable name", name, text, name);
    const DriverSetting* setting = find_driver_setting(name);
    bool own_option = setting && (setting->has_option() || setting->option == "argv");
    // A bad value of a setting without an option is refused as such, also when the render writes
    // that setting itself (a copy from the orchestrator or the rollout).
    if (setting && !own_option) {
      if (std::optional<std::string> why = refusal(*setting, text))
        fail("--driver-env {}={}: {}", name, text, *why);
    }
    if (written.count(name) || own_option)
      fail("--driver-env {}: set it with its own option, not --driver-env", name);
    env.emplace_back(name, text);
  }
  env.emplace_back("TRAINER_ARGV", trainer_argv);
  env.emplace_back("ORCH_ARGV", orch_argv);
  return env;
}

RenderResult render_bench(const k8s::DryRun& dryrun, const RenderOptions& options) {
  return Renderer(dryrun, options).run();
}

PreflightResult render_preflight(const k8s::DryRun& dryrun, const RenderOptions& options,
                                 PreflightChecks checks) {
  Renderer renderer(dryrun, options);
  PreflightResult result;
  result.bench = renderer.run();
  result.job = renderer.preflight_job(checks);
  result.yaml = k8s::yaml::emit(result.job);
  return result;
}

}  // namespace rtb::bench
